"""The hindsight probes of a big streamed file, kept on disk so that the next replay of the same
file does not look for them again (#28 §5).

Looking for the probes splits every tool result of a file into strings: on a big file that is most
of a streamed replay's time, and it is the same work for every policy replayed over the same
file. So once a replay has read a file of at least ``MIN_BYTES`` (64 KB) to the end, its probes (per call:
each string, where the results held it, its source and kind) are written to the user's cache
folder (``$COMPACTLAB_CACHE_DIR`` or the platform's, ``probes/``), named by the SHA-256 of the
file's bytes and ``INDEX_VERSION``; the next streamed replay of the same bytes reads them instead
(about 40 ms to hash 55 MB, against seconds to index it; and a file unchanged since it was hashed,
by its stat, is not hashed again: ``key_of``). A corpus command (compare, check, tune) loads its
files whole, shares one index across its runs in memory, and keeps it here too (``baseline_of``),
as a replay of a file it loads whole (one that records usage, to calibrate on it) does: a corpus
compared again, or a recording replayed again, skips its indexing as a streamed file does.

An entry is read like any input: a regular file within the cache's size limit whose every value
validates; anything else is ignored with a warning and rebuilt. ``COMPACTLAB_PROBE_CACHE=0``
turns the cache off; a dry run reads it and writes nothing.
"""

from __future__ import annotations

import os
from itertools import accumulate, chain, repeat
from collections.abc import Mapping
from typing import Any

import orjson

from ...core import in_use
from ..memo import memo_of
from .baseline import RawBaseline, baseline_for, compute_baseline
from .probes import KINDS, Probe
from ...plumbing import digests
from ...plumbing.files import stat_stamp
from ...transcripts.model import Transcript

#: the probe rules' and the entry's version: bump it whenever what counts as a probe, or what an
#: entry holds, changes (entries made by earlier rules are then never read). 5: each text, tool
#: and kind stored once, the rows naming them by position (4 repeated them on every row)
INDEX_VERSION = 5
#: smaller files are indexed as they are read: reading a cache entry (about 1 ms) would cost as
#: much (indexing 30 KB takes 2 ms, a 300 KB session 12 ms: a folder of sessions gains)
MIN_BYTES = 64 << 10
KIND = "probes"


def enabled() -> bool:
    return os.environ.get("COMPACTLAB_PROBE_CACHE", "") != "0"


class Key(str):
    """A cache key, with the file it was hashed from and that file's stat then: the probes a replay
    found are stored under it only if the file still has that stat once read (a write in between,
    even of the same size, changes its change time: what was read may not be what was hashed)."""

    path: str
    stamp: tuple[int, ...]

    def __new__(cls, value: str, path: str, stamp: tuple[int, ...]) -> "Key":
        key = super().__new__(cls, value)
        key.path, key.stamp = path, stamp
        return key

    def __reduce__(self) -> Any:  # (pickled whole: its path and stat go with it)
        return Key, (str(self), self.path, self.stamp)

    def unchanged(self) -> bool:
        try:
            return stat_stamp(os.stat(self.path)) == self.stamp
        except OSError:
            return False


def key_of(path: str, remember: bool = True, warnings: list[str] | None = None) -> Key | None:
    """The cache key of a file's bytes; None where the file is too small to be worth one, or
    cannot be read (whoever reads it next says why).

    The SHA-256 of a file is remembered with its stat (``plumbing/digests.py``): a file unchanged
    since it was hashed is not hashed again (40 ms for 55 MB, a tenth of a replay). ``remember``
    False (a dry run) writes nothing. A cache folder others can write is not used at all (None;
    said in ``warnings``)."""
    disk = _disk(KIND)
    if not disk.trusted():
        if warnings is not None:
            warnings.extend(disk.problems)
        return None
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size < MIN_BYTES:
                return None
            digest = digests.sha256_of_open(f, path, st, remember)
    except OSError:
        return None
    return Key(f"{digest}-v{INDEX_VERSION}", path, stat_stamp(st))


def _disk(kind: str = KIND, read_only: bool = False) -> Any:
    from ...plumbing.cache import DiskCache
    from ...plumbing.folders import default_cache_dir

    return DiskCache(default_cache_dir(), kind, read_only=read_only)


def present(key: str) -> bool:
    """Whether an entry is stored under ``key`` (it may still prove unusable when loaded)."""
    return os.path.lexists(_disk(read_only=True).folder / f"{key}.json")


def baseline_of(transcript: Transcript, write: bool = True) -> RawBaseline:
    """A loaded transcript's raw baseline (``baseline.baseline_for``), its probes read from the
    cache where a replay of the same bytes stored them, else found and stored (unless not
    ``write``): a corpus job's files, and a file replayed whole, as a streamed file's replay. The
    key is the SHA-256 of the bytes the transcript was loaded from: hashed by its loader where it
    had them (a document format's), else the file's (``key_of``) where the file, as it was hashed,
    is the one that was read (its stat before and after loading, ``Transcript.stamp``), so that
    no write to the file can pair these probes with other bytes; a file under ``MIN_BYTES``, or
    one changed since it was read, is indexed as before. What was wrong with an entry goes to
    the transcript's warnings."""
    memo = memo_of(transcript)
    if memo.baseline is not None and memo.baseline.probes_indexed:
        return memo.baseline
    key = _loaded_key(transcript, write)
    cached = load(key, transcript.warnings) if key is not None else None
    if cached is None:
        base = baseline_for(transcript)
        if key is not None and write:
            save(key, base.probes)
        return base
    base = compute_baseline(transcript, probes=False)
    base.probes = cached
    base.probes_indexed = True
    memo.baseline = base
    return base


def _loaded_key(transcript: Transcript, write: bool) -> str | None:
    if not enabled() or not _disk(KIND).trusted():
        return None
    if not transcript.known_hash:
        if transcript.stamp is None:
            return None
        key = key_of(transcript.path, remember=write, warnings=transcript.warnings)
        return key if key is not None and key.stamp == transcript.stamp else None
    try:
        if os.path.getsize(transcript.path) < MIN_BYTES:
            return None
    except OSError:
        return None
    if write and isinstance(transcript.known_hash, digests.Digest):  # (a document: its next read is not hashed)
        digests.remember(transcript.path, transcript.known_hash)
    return f"{transcript.known_hash}-v{INDEX_VERSION}"


def load(key: str, warnings: list[str]) -> Mapping[int, list[Probe]] | None:
    """The probes stored under ``key`` by call, or None (absent; or unusable, said in ``warnings``):
    where the native core runs, read from the entry's bytes and held in Rust
    (``_native.StoredProbes``: no Python object a probe until a call's are asked for), else, and for
    an entry it does not read, by ``_parsed``, its reference."""
    disk = _disk(read_only=True)
    data = disk.read(key)
    native = in_use()
    if data is not None and native is not None:
        stored: Mapping[int, list[Probe]] | None = native.StoredProbes.parse(data, INDEX_VERSION, Probe, KINDS)
        if stored is not None:
            return stored
    entry = disk.parsed(key, data) if data is not None else None
    if entry is None:
        warnings.extend(disk.problems)
        return None
    probes = _parsed(entry)
    if probes is None:
        disk.ignore(key, "not a probe index of this version")
        warnings.extend(disk.problems)
    return probes


def save(key: str, probes: Mapping[int, list[Probe]]) -> None:
    """Store a file's probes (a cache that cannot be written costs an index next time, no more).
    Column by column, so that reading it back is a few list checks rather than one per value; each
    text, tool and kind once (``TABLES``), in the order first stored, the rows naming each by its
    position (a probe is asked at many calls: 17,005 rows of 421 texts in the bench's file)."""
    from ...plumbing.cache import MAX_ENTRY_BYTES

    if isinstance(key, Key) and not key.unchanged():
        return  # (the file changed while it was read: these probes may not be those of the bytes hashed)
    rows = [(call, p) for call, ps in sorted(probes.items()) for p in ps]
    texts: dict[str, int] = {}
    tools: dict[str, int] = {}
    kinds: dict[str, int] = {}
    data = {"version": INDEX_VERSION,
            "call": [c for c, _ in rows], "text": [texts.setdefault(p.text, len(texts)) for _, p in rows],
            "where": [[x for w in p.where for x in w] for _, p in rows],
            "source_call": [p.source_call for _, p in rows],
            "source_tool": [tools.setdefault(p.source_tool, len(tools)) for _, p in rows],
            "kind": [kinds.setdefault(p.kind, len(kinds)) for _, p in rows],
            "texts": list(texts), "tools": list(tools), "kinds": list(kinds)}
    if len(orjson.dumps(data)) <= MAX_ENTRY_BYTES:
        _disk().put(key, data)


#: an entry's columns, a value a probe, and the type of each value
COLUMNS = {"call": int, "text": int, "where": list, "source_call": int, "source_tool": int, "kind": int}
#: its tables, each a list of strings that a column names by position: ``text``, ``source_tool``
#: and ``kind`` in turn
TABLES = ("texts", "tools", "kinds")
_KINDS = frozenset(KINDS)


def _named(tables: list[list[str]], positions: tuple[list[int], ...]) -> list[list[str]] | None:
    """Each column of ``positions`` as the strings of its table, or None where a position is past it."""
    if any(min(at) < 0 or max(at) >= len(table) for table, at in zip(tables, positions)):
        return None
    return [list(map(table.__getitem__, at)) for table, at in zip(tables, positions)]


def _parsed(entry: dict[str, Any]) -> dict[int, list[Probe]] | None:
    """An entry's probes if every value is what ``save`` writes, else None (``_native.StoredProbes``
    reads the entry's bytes where the native core runs; this is its reference). Checked and built a
    column at a time, in C (``map``, sets): a loop over 17,000 probes in Python cost a replay more
    than reading the entry."""
    if entry.get("version") != INDEX_VERSION:
        return None
    got = [entry.get(name) for name in COLUMNS]
    columns: list[list[Any]] = [c for c in got if type(c) is list]
    if len(columns) != len(COLUMNS) or len(set(map(len, columns))) != 1:
        return None
    for column, kind in zip(columns, COLUMNS.values()):
        if column and set(map(type, column)) != {kind}:
            return None
    tables: list[list[Any]] = [t for t in map(entry.get, TABLES) if type(t) is list and all(type(v) is str for v in t)]
    if len(tables) != len(TABLES) or not _KINDS.issuperset(tables[2]):
        return None
    calls, at_texts, wheres, source_calls, at_tools, at_kinds = columns
    if not calls:
        return {}
    named = _named(tables, (at_texts, at_tools, at_kinds))
    if named is None:
        return None
    texts, tools, kinds = named
    sizes = list(map(len, wheres))
    flat = list(chain.from_iterable(wheres))
    if min(calls) < 0 or 0 in sizes or any(map((2).__rmod__, sizes)) or (flat and set(map(type, flat)) != {int}):
        return None
    numbers = iter(flat)
    pairs = list(zip(numbers, numbers))  # (origin, block) of every probe, in order
    ends = list(accumulate(map((2).__rfloordiv__, sizes)))
    where = list(map(tuple, map(pairs.__getitem__, map(slice, [0, *ends[:-1]], ends))))
    probes = list(map(tuple.__new__, repeat(Probe), zip(texts, where, source_calls, tools, kinds)))
    out: dict[int, list[Probe]] = {}
    for call, probe in zip(calls, probes):
        held = out.get(call)
        if held is None:
            out[call] = [probe]
        else:
            held.append(probe)
    return out
