"""What a measure is (#44 §2): one small protocol the loop calls at every call and at the end.

A measure reads the context as it is sent at a call and writes its columns of the call's record
(``TurnRecord``); at the end of the run it gives what it adds to the run's summary. The loop
knows no measure by name: it calls the list ``measures_for`` makes (``measures/__init__.py``), the
one place that chooses each measure's implementation.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from ..context import Context
from ..records import TurnRecord


class CallAt(NamedTuple):
    """What a measure needs to know of a call besides its context."""

    call: int  # the call's index
    pos: int  # the position of its recorded reply in the transcript
    unchanged: int  # how many messages at the head of the context no layer changed since the last call
    intact: bool  # the context is the recording's own: no layer has acted, no recorded compaction replayed


class Measure(Protocol):
    def at_call(self, at: CallAt, context: Context, record: TurnRecord) -> None:
        """Measure ``context`` as sent at this call, into ``record``'s columns."""

    def finish(self) -> dict[str, Any]:
        """What the measure adds to the run's summary (``records.summarize``'s keywords)."""
