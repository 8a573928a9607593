"""An on-disk cache of what live API calls returned, so a rerun makes no request.

Entries are JSON files named by a SHA-256 of what determines the answer (model, prompt, input);
they hold the answer and its usage, never a key or a header. Writes are atomic. The folders it
creates are private to the user (0700) and so are its files (0600): summaries quote transcripts.
A read-only cache (``--dry-run``) answers from what is there and writes nothing.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from ..outputs import atomic_write_bytes


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


class DiskCache:
    def __init__(self, root: str | Path, kind: str, read_only: bool = False) -> None:
        self.folder = Path(root) / kind
        self.read_only = read_only

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return orjson.loads((self.folder / f"{key}.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None  # absent or unreadable: ask again

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self.read_only:
            return
        try:
            _private_folders(self.folder)
            atomic_write_bytes(self.folder / f"{key}.json", orjson.dumps(value), mode=0o600)
        except OSError:
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
