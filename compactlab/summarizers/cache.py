"""An on-disk cache of what live API calls returned, so a rerun makes no request.

Entries are JSON files named by a SHA-256 of what determines the answer (model, prompt, input);
they hold the answer and its usage, never a key or a header. Writes are atomic.
"""

from __future__ import annotations

import hashlib
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
    def __init__(self, root: str | Path, kind: str) -> None:
        self.folder = Path(root) / kind

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return orjson.loads((self.folder / f"{key}.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None  # absent or unreadable: ask again

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            atomic_write_bytes(self.folder / f"{key}.json", orjson.dumps(value))
        except OSError:
            pass  # a cache that cannot be written costs a request next time, nothing more
