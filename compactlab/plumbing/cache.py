"""An on-disk cache of what live API calls returned, so a rerun makes no request.

Entries are JSON files named by a SHA-256 of what determines the answer (model, prompt, input);
they hold the answer and its usage, never a key or a header. Writes are atomic. The folders it
creates are private to the user (0700) and so are its files (0600): summaries quote transcripts.
A read-only cache (``--dry-run``) answers from what is there and writes nothing.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import orjson

from ..errors import CompactlabError, InputError
from .sha256 import hex_of
from .files import open_regular, read_at_most
from .outputs import atomic_write_bytes


def digest(*parts: str) -> str:
    """The SHA-256 of ``parts``, each followed by a NUL."""
    return hex_of(b"".join(p.encode("utf-8", "surrogatepass") + b"\x00" for p in parts))


#: the largest cache entry read (a summary and its usage are a few KB; a price record less)
MAX_ENTRY_BYTES = 16 << 20


class DiskCache:
    """The entries of one kind (``summaries``, ``prices``) under the cache folder. What is read is
    checked like any input: only a regular file within MAX_ENTRY_BYTES holding a JSON object is
    an entry; anything else (a pipe, a link to a device, a damaged file) is ignored, said in
    ``problems``, and answered anew."""

    def __init__(self, root: str | Path, kind: str, read_only: bool = False) -> None:
        self.folder = Path(root) / kind
        self.read_only = read_only
        self.problems: list[str] = []  # why entries were ignored, for the caller to warn of
        self._trusted: bool | None = None  # (checked at the first use)

    def trusted(self) -> bool:
        """Whether the cache's folders can be trusted: only this user (or root) may write them. An
        entry planted by anyone else would change costs and recall without a word, so a folder
        others can write is neither read nor written (said once, in ``problems``)."""
        if self._trusted is None:
            if self.folder not in _CHECKED:  # (every file's replay opens the same few caches)
                _CHECKED[self.folder] = _untrusted(self.folder)
            why = _CHECKED[self.folder]
            self._trusted = why is None
            if why is not None and why not in _SAID:
                _SAID.add(why)
                self.problems.append(f"{why}: the cache there is neither read nor written (make the folder this "
                                     "user's own, mode 700, or choose another with --cache-dir or COMPACTLAB_CACHE_DIR)")
        return self._trusted

    def get(self, key: str) -> dict[str, Any] | None:
        data = self.read(key)
        return None if data is None else self.parsed(key, data)

    def read(self, key: str) -> bytes | None:
        """The bytes of the entry ``key``, not yet parsed (``parsed``: what ``get`` makes of them);
        None where it is absent, or no entry (ignored, said in ``problems``)."""
        path = self.folder / f"{key}.json"
        if not os.path.lexists(path) or not self.trusted():
            return None  # absent: ask
        try:
            with open_regular(path, remember=False) as f:  # (never blocks on a pipe; refuses a device)
                st = os.fstat(f.fileno())
                if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
                    why = "written by another user" if st.st_uid != os.getuid() else "writable by others"
                elif st.st_size > MAX_ENTRY_BYTES:
                    why = f"larger than {MAX_ENTRY_BYTES >> 20} MiB"
                else:
                    return read_at_most(f, MAX_ENTRY_BYTES + 1)
        except InputError as exc:  # (a pipe, a device, a folder, unreadable)
            why = "not a regular file" if "not a regular file" in exc.message else exc.message.removeprefix(f"{path}: ")
        except OSError as exc:
            why = exc.strerror or str(exc)
        self.ignore(key, why)
        return None

    def parsed(self, key: str, data: bytes) -> dict[str, Any] | None:
        """The JSON object the entry ``key`` read (``read``) holds; None where it holds none
        (ignored, said in ``problems``)."""
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            why = "not JSON"
        else:
            if isinstance(value, dict):
                return value
            why = "not a JSON object"
        self.ignore(key, why)
        return None

    def ignore(self, key: str, why: str) -> None:
        """Say that the entry ``key`` was not used (it is answered anew)."""
        self.problems.append(f"cache entry {self.folder / key}.json ignored ({why}): rebuilt")

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self.read_only or not self.trusted():
            return
        path = self.folder / f"{key}.json"
        try:
            if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
                return  # not an entry this cache wrote: left alone, answered anew next time
            _private_folders(self.folder)
            atomic_write_bytes(path, orjson.dumps(value), mode=0o600)
        except (OSError, CompactlabError):
            pass  # a cache that cannot be written costs a request next time, nothing more


#: the untrusted cache folders said already, and each folder's verdict (once per command: ``forget_said``)
_SAID: set[str] = set()
_CHECKED: dict[Path, str | None] = {}


def forget_said() -> None:
    """A new command checks the cache folders again, and says again which it does not use."""
    _SAID.clear()
    _CHECKED.clear()


def _untrusted(folder: Path) -> str | None:
    """Why ``folder`` or its parent (the cache's root) may hold entries another user planted, or
    None: each that exists must be owned by this user (or root) and writable by no one else."""
    if not hasattr(os, "getuid"):
        return None  # (no owners to tell apart)
    for where in (folder.parent, folder):
        try:
            st = os.stat(where)
        except OSError:
            continue  # (made by this user when first written: 0700)
        if st.st_uid not in (os.getuid(), 0):
            return f"cache folder {where} belongs to another user (uid {st.st_uid})"
        if st.st_mode & 0o002 or (st.st_mode & 0o020 and st.st_gid != os.getgid()):
            return f"cache folder {where} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _private_folders(folder: Path) -> None:
    """Create ``folder`` and its missing parents with mode 0700 (existing ones are left as they are)."""
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for f in reversed(missing):
        try:
            os.mkdir(f, 0o700)
        except FileExistsError:
            pass
