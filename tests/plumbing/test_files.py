"""Reading what compactlab keeps for itself (plumbing/files.py's ``read_at_most``): as much as a
limit allows, in a buffer of the file's size, not of the limit."""

from __future__ import annotations

import os
import tracemalloc

from compactlab.plumbing import files
from compactlab.plumbing.cache import MAX_ENTRY_BYTES, DiskCache


def peak_of(read) -> tuple[bytes, int]:
    """What ``read()`` returned and the most memory Python held at once while it ran."""
    tracemalloc.start()
    try:
        data = read()
        return data, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_small_file_is_read_in_a_buffer_of_its_size_not_of_the_limit(tmp_path):
    path = tmp_path / "entry.json"
    path.write_bytes(b'{"a": 1}' * 40)
    limit = 16 << 20
    with open(path, "rb", buffering=0) as f:
        data, peak = peak_of(lambda: files.read_at_most(f, limit))
    assert data == path.read_bytes() and peak < 1 << 20
    with open(path, "rb", buffering=0) as f:  # (what it spares: the limit allocated whole)
        data, peak = peak_of(lambda: f.read(limit))
    assert data == path.read_bytes() and peak >= limit
    with open(path, "rb") as f:  # (a buffered file too, from where it stands)
        f.read(8)
        assert files.read_at_most(f, limit) == path.read_bytes()[8:]


def test_at_most_the_limit_is_read_even_of_a_file_that_grew_since_its_size_was_taken(tmp_path, monkeypatch):
    path = tmp_path / "entry.json"
    path.write_bytes(b"x" * 1000)
    with open(path, "rb", buffering=0) as f:
        assert files.read_at_most(f, 10) == b"x" * 10
    fstat = os.fstat

    def stale(fd):  # (the size taken before another 990 bytes were written)
        st = fstat(fd)
        return os.stat_result((*st[:6], 10, *st[7:]))

    monkeypatch.setattr(files.os, "fstat", stale)
    with open(path, "rb", buffering=0) as f:
        assert files.read_at_most(f, 2000) == b"x" * 1000
    with open(path, "rb", buffering=0) as f:
        assert files.read_at_most(f, 500) == b"x" * 500


def test_a_cache_entry_is_read_whole_and_one_over_the_limit_is_ignored(tmp_path):
    cache = DiskCache(tmp_path, "summaries")
    cache.put("k", {"text": "t" * 5000})
    assert cache.get("k") == {"text": "t" * 5000}
    data, peak = peak_of(lambda: cache.read("k"))
    assert data is not None and len(data) > 5000 and peak < 1 << 20  # (not 16 MiB to read a few KB)
    big = cache.folder / "big.json"
    big.write_bytes(b'{"text": "' + b"t" * MAX_ENTRY_BYTES + b'"}')
    assert cache.get("big") is None and any("larger than" in p for p in cache.problems)
