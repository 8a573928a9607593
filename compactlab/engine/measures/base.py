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

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from ...plain import NamedTuple
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


def after_first_run(memo: dict, key: tuple, make: Callable[[], Any]) -> Any:
    """What a measure keeps in a recording's memo (the feed's) under ``key`` for the runs of it
    after the first, made by ``make`` at the second run and the same one after: a tune's trials and
    a compare's policies read each message once, not once a run. None at its first run (noted): a
    recording replayed once keeps no more of it than its run does."""
    known = memo.get(key)
    if known is None:
        memo[key] = False  # (its first run, noted)
        return None
    if known is False:
        known = memo[key] = make()
    return known
