"""What a measure is (#44 §2, #60 §3): one small protocol the loop calls at every call and at the end,
with plain data across it.

At each call a measure reads the context as it is sent and returns its figures for the call as a
small typed row (a ``NamedTuple`` of ints and floats whose field names are ``TurnRecord``'s
columns), or None when it has nothing to say at that call; the loop stores the row in the call's
record. At the end of the run it returns a typed total (a ``NamedTuple`` whose field names are
``records.summarize``'s keywords). The loop knows no measure by name: it calls the ``Measures``
that ``measures_for`` makes (``measures/__init__.py``), the one place that chooses each measure's
implementation. This is the seam a native core stands behind (``docs/architecture.md``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol

from ..context import Context


class CallAt(NamedTuple):
    """What a measure needs to know of a call besides its context."""

    call: int  # the call's index
    pos: int  # the position of its recorded reply in the transcript
    changed_from: int  # the first message a layer changed at this call (the context's length: none)
    intact: bool  # the context is the recording's own: no layer has acted, no recorded compaction replayed
    tokens: int  # the context's tokens as sent
    reply_chars: int  # the recorded reply's characters


class Row(Protocol):
    """Plain data across the seam: a ``NamedTuple`` of ints, floats (and, in a total, the lists and
    dicts the summary keeps)."""

    @property
    def _fields(self) -> tuple[str, ...]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Measure(Protocol):
    def at_call(self, at: CallAt, context: Context) -> Row | None:
        """This call's figures: a row whose fields are ``TurnRecord`` columns (None: nothing)."""

    def finish(self) -> Row:
        """What the measure adds to the run's summary: a row whose fields are ``summarize``'s
        keywords (an empty one when it adds nothing)."""


class Nothing(NamedTuple):
    """The total of a measure that adds nothing to the summary."""
