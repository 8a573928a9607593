"""What the engine works out once of a recording for every run of it (#60 §2): its raw baseline
(``measures.baseline``) and the facts pricing reads of its calls (``cost.price_run``), kept by the
engine beside the loaded transcript, never on it.

Keyed by the transcript object: an entry goes when its transcript is collected. A forked worker
inherits its parent's; a transcript sent to another machine (a Dask worker) is worked out again
there, once per worker."""

from __future__ import annotations

import weakref
from typing import Any


class TranscriptMemo:
    __slots__ = ("baseline", "runs")

    def __init__(self) -> None:
        self.baseline: Any = None  # the raw baseline (``baseline.RawBaseline``), once computed
        self.runs: dict[Any, Any] = {}  # what pricing reads of the calls, by what it depends on


_MEMOS: dict[int, TranscriptMemo] = {}


def memo_of(transcript: object) -> TranscriptMemo:
    """The engine's memo of a loaded transcript (made on first use)."""
    key = id(transcript)
    found = _MEMOS.get(key)
    if found is None:
        found = _MEMOS[key] = TranscriptMemo()
        weakref.finalize(transcript, _MEMOS.pop, key, None)  # (before its id can be another's)
    return found
