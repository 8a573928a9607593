"""An on-disk cache of what live API calls returned, so a rerun makes no request.

Entries are JSON files named by a SHA-256 of what determines the answer (model, prompt, input);
they hold the answer and its usage, never a key or a header. Writes are atomic. The folders it
creates are private to the user (0700) and so are its files (0600): summaries quote transcripts.
A read-only cache (``--dry-run``) answers from what is there and writes nothing.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import orjson

from ..errors import CompactlabError, InputError
from ..plumbing.files import open_regular
from ..plumbing.outputs import atomic_write_bytes


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


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

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.folder / f"{key}.json"
        if not os.path.lexists(path):
            return None  # absent: ask
        try:
            with open_regular(path) as f:  # (never blocks on a pipe; refuses a device)
                if os.fstat(f.fileno()).st_size > MAX_ENTRY_BYTES:
                    why = f"larger than {MAX_ENTRY_BYTES >> 20} MiB"
                else:
                    value = orjson.loads(f.read(MAX_ENTRY_BYTES + 1))
                    if isinstance(value, dict):
                        return value
                    why = "not a JSON object"
        except InputError as exc:  # (a pipe, a device, a folder, unreadable)
            why = "not a regular file" if "not a regular file" in exc.message else exc.message.removeprefix(f"{path}: ")
        except orjson.JSONDecodeError:
            why = "not JSON"
        except OSError as exc:
            why = exc.strerror or str(exc)
        self.ignore(key, why)
        return None

    def ignore(self, key: str, why: str) -> None:
        """Say that the entry ``key`` was not used (it is answered anew)."""
        self.problems.append(f"cache entry {self.folder / key}.json ignored ({why}): rebuilt")

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self.read_only:
            return
        path = self.folder / f"{key}.json"
        try:
            if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
                return  # not an entry this cache wrote: left alone, answered anew next time
            _private_folders(self.folder)
            atomic_write_bytes(path, orjson.dumps(value), mode=0o600)
        except (OSError, CompactlabError):
            pass  # a cache that cannot be written costs a request next time, nothing more


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
