"""A run summary as a corpus command's process keeps it (#32 §1): thousands of them, read-only.

A summary is a dict of about sixty keys, most of them numbers: kept as dicts, 30,000 runs (10,000
sessions x 3 policies) held about 150 MB of the compare's main process. A :class:`Packed` summary
keeps its integers and floats in two arrays of machine numbers and the rest (names, the calibration,
None) in a tuple; which key is where (its *layout*) is shared by every summary with the same keys
and value types. About 0.7 KB a run where the dict took about 4 KB. It reads as the dict did (a
``Mapping``): ``s[key]``, ``s.get``, ``in``, iteration in the dict's order, ``==`` with a dict.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator, Mapping
from typing import Any

_INT64 = (-(1 << 63), (1 << 63) - 1)

#: a layout (its keys with each value's kind: q int, d float, o other) -> key -> (kind, slot)
_LAYOUTS: dict[tuple[tuple[str, str], ...], dict[str, tuple[str, int]]] = {}


def _kind(value: Any) -> str:
    if type(value) is int and _INT64[0] <= value <= _INT64[1]:
        return "q"
    return "d" if type(value) is float else "o"


def interned(value: Any) -> Any:
    """``value`` with its dict keys and short strings interned (one copy for all results)."""
    if isinstance(value, dict):
        return {sys.intern(str(k)) if isinstance(k, str) else k: interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interned(v) for v in value]
    if isinstance(value, str) and len(value) < 200:
        return sys.intern(str(value))  # (a str subclass, a FolderFile, as a plain str)
    return value


class Sharing:
    """One copy of what many runs of a grid hold equal, by value (a transcript's calibration in each
    of its runs, a policy's trigger levels, no events, the raw series of a transcript): for the
    runs of one grid (``run_jobs``), let go with it."""

    def __init__(self) -> None:
        self._values: dict[Any, Any] = {}
        self._series: dict[str, list[Any]] = {}

    def value(self, value: Any) -> Any:
        """One copy of ``value`` for every equal one: a dict or a list of plain values (str, int,
        float, bool, None), never changed after (a list becomes a tuple); anything else as it is."""
        if isinstance(value, dict):
            key: Any = ("d", *value.items())
        elif isinstance(value, (list, tuple)):
            value = tuple(value)
            key = ("t", *value)
        else:
            return value
        try:
            return self._values.setdefault(key, interned(value) if isinstance(value, dict) else value)
        except TypeError:  # (a value inside that is no plain value: kept as it is)
            return value

    def series(self, transcript: str, series: Any) -> Any:
        """One copy of a transcript's series (an array) for every equal one."""
        known = self._series.setdefault(transcript, [])
        for held in known:
            if held == series:
                return held
        known.append(series)
        return series


class Packed(Mapping[str, Any]):
    """A read-only summary, packed (see the module docstring)."""

    __slots__ = ("_where", "_ints", "_floats", "_rest")

    def __init__(self, summary: Mapping[str, Any], sharing: Sharing | None = None) -> None:
        signature = tuple((sys.intern(str(k)), _kind(v)) for k, v in summary.items())
        where = _LAYOUTS.get(signature)
        if where is None:
            slots = {"q": 0, "d": 0, "o": 0}
            where = {}
            for key, kind in signature:
                where[key] = (kind, slots[kind])
                slots[kind] += 1
            where = _LAYOUTS.setdefault(signature, where)
        values = list(summary.values())
        kinds = [kind for _, kind in signature]
        self._where = where
        self._ints = array("q", [v for v, k in zip(values, kinds) if k == "q"])
        self._floats = array("d", [v for v, k in zip(values, kinds) if k == "d"])
        share = (sharing or Sharing()).value
        self._rest = tuple(share(v) if isinstance(v, dict) else interned(v) for v, k in zip(values, kinds) if k == "o")

    def __getitem__(self, key: str) -> Any:
        kind, slot = self._where[key]
        return self._ints[slot] if kind == "q" else self._floats[slot] if kind == "d" else self._rest[slot]

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def __repr__(self) -> str:
        return f"Packed({dict(self)!r})"

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return Packed, (dict(self),)

    def to_dict(self) -> dict[str, Any]:
        return dict(self)
