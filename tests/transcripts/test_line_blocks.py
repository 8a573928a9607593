"""``LineReader.blocks``: a file's lines a block of whole lines at a time, every byte of it read once
— the line a piece cuts goes on in the next (``read_on``: the native core's, and Python's
``_read_on``, its reference), a line longer than a piece is read on in longer ones."""

from __future__ import annotations

import contextlib
import errno
from types import SimpleNamespace

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlab.core import in_use
from compactlab.transcripts import reader
from compactlab.transcripts.reader import LineReader
from helpers import examples, user

NATIVE = in_use()
needs_native = pytest.mark.skipif(NATIVE is None, reason="the native core is not in use here (not built, or "
                                  "COMPACTLAB_CORE=python)")
#: the two ways of reading on: Python's reference, and the native core's
READERS = ["python", pytest.param("native", marks=needs_native)]


def _read_on(how: str):
    return reader._read_on if how == "python" else NATIVE.read_on  # type: ignore[union-attr]


@contextlib.contextmanager
def _reading_with(how: str, asked: list[tuple[int, int, int]] | None = None):
    """``blocks`` reading on with ``how``'s ``read_on``, each read noted in ``asked``: (where it read
    from, what it asked for, the new bytes it gave)."""
    read = _read_on(how)

    def counted(f, kept: bytes, start: int, want: int, at: int) -> bytes:
        made = read(f, kept, start, want, at)
        if asked is not None:
            asked.append((at, want, len(made) - len(kept[start:])))
        return made

    with pytest.MonkeyPatch.context() as m:
        m.setattr(reader, "in_use", lambda: SimpleNamespace(read_on=counted))
        yield


def _blocks(path, how: str, limit: int | None = None, asked: list | None = None) -> list[tuple[int, bytes, int, int]]:
    with _reading_with(how, asked):
        return list(LineReader(str(path), limit=limit).blocks())


@pytest.mark.parametrize("how", READERS)
def test_a_cut_line_and_a_long_one_are_read_once(tmp_path, monkeypatch, how):
    """The line a piece cuts goes on in the next piece, and a line longer than a piece is read on
    into a piece twice as long, then twice again: each read starts where the last one ended, the
    file is read once in all, and the blocks are its lines whole."""
    monkeypatch.setattr(reader, "BLOCK", 4096)
    path = tmp_path / "t.jsonl"
    lines = [orjson.dumps(user("a")) + b"\n", orjson.dumps(user("x" * 14_000)) + b"\n",
             orjson.dumps(user("b" * 3000)) + b"\n", orjson.dumps(user("c" * 3000)) + b"\n",
             orjson.dumps(user("y" * 5_000))]  # (the last without its break)
    data = b"".join(lines)
    path.write_bytes(data)
    asked: list[tuple[int, int, int]] = []
    blocks = _blocks(path, how, asked=asked)
    got = [block[start:stop] for _, block, start, stop in blocks]
    assert b"".join(got) == data
    assert [line for block in got for line in block.splitlines(keepends=True)] == lines
    assert [at for at, _, _, _ in blocks] == [sum(len(b) for b in got[:k]) for k in range(len(got))]
    # (every read from where the last ended, none of it again: the file read once)
    assert [at for at, _, _ in asked] == [sum(new for _, _, new in asked[:k]) for k in range(len(asked))]
    assert sum(new for _, _, new in asked) == len(data)
    # (the long line: a piece of 4 KiB, then 8 KiB, then 16 KiB, each what was read of it and the rest)
    assert [want for _, want, _ in asked[:4]] == [4096, len(lines[0]), 4096, 8192]


@pytest.mark.parametrize("how", READERS)
def test_a_file_ending_where_a_piece_does_is_read_to_its_end(tmp_path, monkeypatch, how):
    """A file whose last line ends a piece exactly, an empty file, and one of a single line without
    its break: their lines, and nothing more (and the same blocks read with no native core)."""
    monkeypatch.setattr(reader, "BLOCK", 64)
    for data in (b"", b"x" * 64, b'{"a":1}\n' * 8, b'{"a":1}\n' * 8 + b"tail"):
        path = tmp_path / "t.jsonl"
        path.write_bytes(data)
        blocks = _blocks(path, how)
        assert b"".join(block[start:stop] for _, block, start, stop in blocks) == data
        with pytest.MonkeyPatch.context() as m:
            m.setattr(reader, "in_use", lambda: None)
            assert list(LineReader(str(path)).blocks()) == blocks


_LINES = st.lists(st.one_of(st.integers(0, 300), st.integers(300, 3000)), min_size=0, max_size=40)


@needs_native
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=_LINES, last_break=st.booleans(), blank=st.booleans(), piece=st.sampled_from([16, 64, 256, 1024]),
       cut=st.floats(0, 1))
def test_the_native_reader_reads_the_blocks_python_reads(tmp_path, monkeypatch, lengths, last_break, blank, piece,
                                                         cut):
    """Files of lines shorter and longer than a piece, blank lines among them, the last with or
    without its break, read whole or up to a limit anywhere in them: the native core's blocks are
    Python's (``_read_on``, the reference) and so are those read with no native core at all;
    together they are the file up to its limit, each but the last ending with a line break."""
    monkeypatch.setattr(reader, "BLOCK", piece)
    lines = [(b" \t" if blank and k % 5 == 4 else b"z" * n) + b"\n" for k, n in enumerate(lengths)]
    data = b"".join(lines)
    if data and not last_break:
        data = data[:-1]
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    limit = int(len(data) * cut) if cut < 1 else None
    native = _blocks(path, "native", limit)
    assert native == _blocks(path, "python", limit)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(reader, "in_use", lambda: None)
        assert native == list(LineReader(str(path), limit=limit).blocks())
    got = [block[start:stop] for _, block, start, stop in native]
    assert b"".join(got) == data[:limit]
    assert all(block.endswith(b"\n") for block in got[:-1])


@needs_native
@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kept=st.binary(max_size=300), start=st.integers(0, 320), want=st.integers(0, 400), at=st.integers(0, 700))
def test_read_on_is_its_reference(tmp_path, kept, start, want, at):
    """``read_on``: what was kept from ``start`` and then what the file holds from ``at``, up to
    ``want`` bytes, fewer past its end (none at all beyond it): the bytes Python's reference joins."""
    path = tmp_path / "f.bin"
    if not path.exists():
        path.write_bytes(bytes(range(256)) * 2)
    with open(path, "rb") as f:
        assert NATIVE.read_on(f, kept, start, want, at) == reader._read_on(f, kept, start, want, at)  # type: ignore[union-attr]


@pytest.mark.parametrize("how", READERS)
def test_read_on_says_what_the_system_said(tmp_path, how):
    """A file the reader may not read (opened to write) and a closed one: the errors Python's
    ``os.pread`` and ``fileno`` raise, from either reader (``LineReader`` says them as one line)."""
    read = _read_on(how)
    path = tmp_path / "f.bin"
    with open(path, "wb") as f:
        with pytest.raises(OSError) as caught:
            read(f, b"", 0, 10, 0)
        assert caught.value.errno == errno.EBADF
    with pytest.raises(ValueError, match="closed file"):
        read(f, b"", 0, 10, 0)
