"""The hindsight probes of a big streamed file, kept on disk so that the next replay of the same
file does not look for them again (#28 §5).

Looking for the probes splits every tool result of a file into strings: on a big file that is most
of a streamed replay's time, and it is the same work for every policy replayed over the same
file. So once a replay has read a file of at least ``MIN_BYTES`` to the end, its probes (per call:
each string, where the results held it, its source and kind) are written to the user's cache
folder (``$COMPACTLAB_CACHE_DIR`` or the platform's, ``probes/``), named by the SHA-256 of the
file's bytes and ``INDEX_VERSION``; the next streamed replay of the same bytes reads them instead
(about 40 ms to hash 55 MB, against seconds to index it). A corpus command (compare, check, tune)
loads its files whole and shares one index across its runs in memory instead.

An entry is read like any input: a regular file within the cache's size limit whose every value
validates; anything else is ignored with a warning and rebuilt. ``COMPACTLAB_PROBE_CACHE=0``
turns the cache off; a dry run reads it and writes nothing.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import orjson

from .probes import KINDS, Probe

#: the probe rules' version: bump it whenever what counts as a probe changes (entries made by
#: earlier rules are then never read)
INDEX_VERSION = 3
#: smaller files are indexed as they are read: hashing and a cache entry would cost as much
MIN_BYTES = 1 << 20
KIND = "probes"


def enabled() -> bool:
    return os.environ.get("COMPACTLAB_PROBE_CACHE", "") != "0"


def key_of(path: str) -> str | None:
    """The cache key of a file's bytes; None where the file is too small to be worth one, or
    cannot be read (whoever reads it next says why)."""
    try:
        if os.path.getsize(path) < MIN_BYTES:
            return None
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None
    return f"{digest}-v{INDEX_VERSION}"


def _disk(read_only: bool = False) -> Any:
    from ..summarizers import default_cache_dir
    from ..summarizers.cache import DiskCache

    return DiskCache(default_cache_dir(), KIND, read_only=read_only)


def load(key: str, warnings: list[str]) -> dict[int, list[Probe]] | None:
    """The probes stored under ``key``, or None (absent; or unusable, said in ``warnings``)."""
    disk = _disk(read_only=True)
    entry = disk.get(key)
    if entry is None:
        warnings.extend(disk.problems)
        return None
    probes = _parse(entry)
    if probes is None:
        disk.ignore(key, "not a probe index of this version")
        warnings.extend(disk.problems)
    return probes


def save(key: str, probes: dict[int, list[Probe]]) -> None:
    """Store a file's probes (a cache that cannot be written costs an index next time, no more).
    Column by column, so that reading it back is a few list checks rather than one per value."""
    from ..summarizers.cache import MAX_ENTRY_BYTES

    rows = [(call, p) for call, ps in sorted(probes.items()) for p in ps]
    data = {"version": INDEX_VERSION,
            "call": [c for c, _ in rows], "text": [p.text for _, p in rows],
            "where": [[x for w in p.where for x in w] for _, p in rows],
            "source_call": [p.source_call for _, p in rows], "source_tool": [p.source_tool for _, p in rows],
            "kind": [p.kind for _, p in rows]}
    if len(orjson.dumps(data)) <= MAX_ENTRY_BYTES:
        _disk().put(key, data)


COLUMNS = {"call": int, "text": str, "where": list, "source_call": int, "source_tool": str, "kind": str}


def _parse(entry: dict[str, Any]) -> dict[int, list[Probe]] | None:
    """An entry's probes if every value is what ``save`` writes, else None."""
    if entry.get("version") != INDEX_VERSION:
        return None
    got = [entry.get(name) for name in COLUMNS]
    columns: list[list[Any]] = [c for c in got if isinstance(c, list)]
    if len(columns) != len(COLUMNS) or len({len(c) for c in columns}) != 1:
        return None
    for column, kind in zip(columns, COLUMNS.values()):
        if not all(type(v) is kind for v in column):
            return None
    calls, texts, wheres, source_calls, tools, kinds = columns
    if not set(kinds) <= set(KINDS) or any(c < 0 for c in calls):
        return None
    for w in wheres:
        if not w or len(w) % 2 or not all(type(x) is int for x in w):
            return None
    out: dict[int, list[Probe]] = {}
    for call, text, w, source, tool, kind in zip(calls, texts, wheres, source_calls, tools, kinds):
        out.setdefault(call, []).append(Probe(text, tuple(zip(w[::2], w[1::2])), source, tool, kind))
    return out
