"""A file's SHA-256, remembered with its stat so that a file unchanged since it was hashed is not
hashed again (as git's index and ccache do).

The digest is kept in the user's cache folder (``KIND``), named by the file's absolute path,
device and inode, beside its size, modification and change times and when it was hashed. It is
trusted only where all of these are the file's now and its change time is more than ``RACY_NS``
before the hashing: any write changes the change time, which no program can set back, and a write
in the same tick of the file system's clock as the hashing would not show (git's "racily clean"
entries). A cache folder others can write is not used at all.

Its users: the probe cache's key (``engine/measures/probe_cache.key_of``: the raw bytes of a file
it streams or loads), a loaded transcript's content hash (``Transcript.content_hash``, which
``compare``, ``check`` and ``tune`` ask of every file), and a whole JSON document's, hashed as it
is read (``transcripts/reader.read_document``): one digest of the same bytes, hashed once.
"""

from __future__ import annotations

import os
import time
from io import BufferedReader
from typing import Any

from .sha256 import hex_of

#: the kind under which a file's hash is remembered beside its size and times
KIND = "probe-keys"
#: a file changed less than this before it was hashed may have changed again within the same tick
#: of the file system's clock: its remembered hash is not trusted (git's "racily clean" entries)
RACY_NS = 2_000_000_000


def disk(read_only: bool = False) -> Any:
    """The cache of remembered digests (``plumbing.cache.DiskCache``)."""
    from .cache import DiskCache
    from .folders import default_cache_dir

    return DiskCache(default_cache_dir(), KIND, read_only=read_only)


def _name(path: str, st: os.stat_result | tuple[int, ...]) -> str:
    dev, ino = (st.st_dev, st.st_ino) if isinstance(st, os.stat_result) else st[:2]
    return hex_of(f"{os.path.abspath(path)}\0{dev}\0{ino}".encode("utf-8", "surrogateescape"))


def _trusted(memo: dict[str, Any] | None, stat: list[int]) -> str | None:
    """The digest ``memo`` remembers where it is of a file with ``stat`` (size, modification and
    change times) hashed well after its last change, else None."""
    if (memo is not None and memo.get("stat") == stat and type(memo.get("hashed_at")) is int
            and stat[2] < memo["hashed_at"] - RACY_NS and _is_digest(memo.get("sha256"))):
        return str(memo["sha256"])
    return None


def _is_digest(value: Any) -> bool:
    return type(value) is str and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def sha256_of_open(f: BufferedReader, path: str, st: os.stat_result, remember: bool = True) -> str:
    """The SHA-256 of the open file ``f`` (at ``path``, whose ``fstat`` is ``st``): the one
    remembered for it where that is trusted, else hashed now (and remembered, unless not
    ``remember``: a dry run writes nothing)."""
    stat = [st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    where = disk(read_only=not remember)
    name = _name(path, st)
    digest = _trusted(where.get(name), stat)
    if digest is None:
        import hashlib

        hashed_at = time.time_ns()
        digest = hashlib.file_digest(f, "sha256").hexdigest()
        where.put(name, {"stat": stat, "hashed_at": hashed_at, "sha256": digest})
    return digest


def remembered(path: str, stamp: tuple[int, ...]) -> str | None:
    """The SHA-256 remembered for the file at ``path`` whose ``files.stat_stamp`` was ``stamp``
    (device, inode, size, modification and change times) where it is trusted; None where none is
    (nothing is hashed or written here)."""
    where = disk(read_only=True)
    if not where.trusted():
        return None
    return _trusted(where.get(_name(path, stamp)), list(stamp[2:5]))


class Digest(str):
    """A file's SHA-256 hashed as it was read, with what it is the digest of: the file's
    ``files.stat_stamp`` before and after the reading (None: not the same, or not a plain file) and
    when the reading began (ns). What ``remember`` keeps."""

    stamp: tuple[int, ...] | None
    at: int

    def __new__(cls, value: str, stamp: tuple[int, ...] | None, at: int) -> "Digest":
        digest = super().__new__(cls, value)
        digest.stamp, digest.at = stamp, at
        return digest

    def __reduce__(self) -> Any:  # (pickled whole: what it is the digest of goes with it)
        return Digest, (str(self), self.stamp, self.at)


def remember(path: str, digest: Digest) -> None:
    """Remember ``digest`` for the file at ``path`` it was hashed from, where it knows the file's
    stat then (and unless that is remembered already)."""
    stamp = digest.stamp
    if stamp is None or remembered(path, stamp) == digest:
        return
    disk().put(_name(path, stamp), {"stat": list(stamp[2:5]), "hashed_at": digest.at, "sha256": str(digest)})
