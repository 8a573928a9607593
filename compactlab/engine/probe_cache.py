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
INDEX_VERSION = 2
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
    """Store a file's probes (a cache that cannot be written costs an index next time, no more)."""
    from ..summarizers.cache import MAX_ENTRY_BYTES

    data = {"version": INDEX_VERSION,
            "calls": [[call, [[p.text, [list(w) for w in p.where], p.source_call, p.source_tool, p.kind] for p in ps]]
                      for call, ps in sorted(probes.items())]}
    if len(orjson.dumps(data)) <= MAX_ENTRY_BYTES:
        _disk().put(key, data)


def _parse(entry: dict[str, Any]) -> dict[int, list[Probe]] | None:
    """An entry's probes if every value is what ``save`` writes, else None."""
    if entry.get("version") != INDEX_VERSION or not isinstance(entry.get("calls"), list):
        return None
    out: dict[int, list[Probe]] = {}
    for item in entry["calls"]:
        if not (isinstance(item, list) and len(item) == 2 and type(item[0]) is int and item[0] >= 0
                and isinstance(item[1], list)):
            return None
        ps = []
        for p in item[1]:
            if not (isinstance(p, list) and len(p) == 5 and isinstance(p[0], str) and isinstance(p[1], list)
                    and type(p[2]) is int and isinstance(p[3], str) and p[4] in KINDS
                    and all(isinstance(w, list) and len(w) == 2 and all(type(x) is int for x in w) for w in p[1])):
                return None
            ps.append(Probe(p[0], tuple((w[0], w[1]) for w in p[1]), p[2], p[3], p[4]))
        out[item[0]] = ps
    return out
