"""Retention (SPEC §7): of the earlier tool results a call's tool inputs refer to, how many the
context sent at that call still holds intact.

The references are found once per transcript by the raw baseline (``baseline.py``: a tool_use
whose input names a file refers to the latest earlier result for that file); here they are
looked up in the context as sent.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...plain import NamedTuple
from ..context import Context
from .base import CallAt, Nothing


def retained(refs: Iterable[tuple[int, int]], context: Context) -> int:
    """How many of ``refs`` ((message origin, block index) of a tool result) ``context`` holds
    with that block unchanged."""
    kept = 0
    for origin, block in refs:
        j = context.find_origin(origin)
        if j is not None and block not in context.entries[j].changed:
            kept += 1
    return kept


class Retention:
    """The measure (``base.Measure``): a call's references (``refs``) and those the context still
    holds (``refs_retained``). A stream's references are let go as they are used."""

    def __init__(self, refs: dict[int, list[tuple[int, int]]], keep: bool = True) -> None:
        self.refs, self.keep = refs, keep

    def at_call(self, at: CallAt, context: Context) -> RetentionRow | None:
        refs = self.refs.get(at.call, ()) if self.keep else self.refs.pop(at.call, ())
        return RetentionRow(len(refs), retained(refs, context)) if refs else None

    def finish(self) -> Nothing:
        return Nothing()


class RetentionRow(NamedTuple):
    """A call's references and those retained (``TurnRecord``'s columns)."""

    refs: int
    refs_retained: int
