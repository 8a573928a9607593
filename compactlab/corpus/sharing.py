"""One copy of what the runs of a corpus command hold equal (#32 §1): thousands of runs, read-only.

30,000 runs (10,000 sessions x 3 policies) kept as dicts held about 150 MB of compare's main
process. A run's summary is a slotted ``RunSummary``; what many runs hold equal by value (a
transcript's calibration, a policy's trigger levels, a transcript's raw series) is held once, and
names are interned.
"""

from __future__ import annotations

import sys
from dataclasses import fields
from typing import Any

#: the floats many runs hold (a recall of 1.0, a cost of 0.0): one object each
_FLOATS = {0.0: 0.0, 1.0: 1.0}


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

    def fields(self, record: Any) -> None:
        """The fields of a dataclass (a run's summary) held once where many runs hold them equal:
        names interned, dicts by value, an empty list or dict one object, a float of 0 or 1 one
        object. The record is read-only after."""
        for f in fields(record):
            value = getattr(record, f.name)
            kind = type(value)
            if kind is str:
                setattr(record, f.name, interned(value))
            elif kind is float:
                setattr(record, f.name, _FLOATS.get(value, value))
            elif kind is dict:
                setattr(record, f.name, self.value(value) if value else self._empty(dict))
            elif kind is list and not value:
                setattr(record, f.name, self._empty(list))

    def _empty(self, kind: type) -> Any:
        return self._values.setdefault(("empty", kind), kind())

    def series(self, transcript: str, series: Any) -> Any:
        """One copy of a transcript's series (an array) for every equal one."""
        known = self._series.setdefault(transcript, [])
        for held in known:
            if held == series:
                return held
        known.append(series)
        return series
