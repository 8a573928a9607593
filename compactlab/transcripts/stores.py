"""Harness stores that hold many sessions in one SQLite database (OpenCode's and Kilo CLI's, Goose's).

A store given as a path stands for its sessions; a session of it is named ``STORE#SESSION``. A
store is opened read-only, in one read transaction (every query sees one snapshot; in WAL mode a
reader never blocks the harness writing it), with no busy wait: a store that is locked or
unreadable is refused with a one-line error, never waited on. Which format a store is, is told by
its tables (``transcripts.store_format``: each store format's ``TABLES``).
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import InputError

SQLITE_MAGIC = b"SQLite format 3\x00"
#: how a session of a store is named
SEP = "#"


def is_sqlite(path: str) -> bool:
    """A ``.db`` SQLite file (never opens a pipe or a device: it would block)."""
    if not path.endswith(".db") or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def connect(store: str) -> Any:
    """The store, opened read-only in one read transaction (a one-line error where it cannot be)."""
    import sqlite3
    from urllib.parse import quote

    try:
        db = sqlite3.connect(f"file:{quote(os.path.abspath(store))}?mode=ro", uri=True, timeout=0,
                             isolation_level=None)
        db.execute("BEGIN")  # (one read transaction: every query sees the same snapshot)
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise InputError(f"{store}: an SQLite store compactlab cannot read now ({exc})",
                         hint="if the harness is writing it, try again, or copy the file and read the copy") from None
    return db


def tables(db: Any) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def columns(db: Any, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}  # (table: one of the formats' own names)


def in_store(path: str) -> tuple[str, str] | None:
    """(store, session id) of a ``STORE#SESSION`` name; None for any other path."""
    store, sep, session = path.rpartition(SEP)
    return (store, session) if sep and session and is_sqlite(store) else None
