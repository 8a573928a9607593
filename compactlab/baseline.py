"""The raw baseline of a transcript: the uncompacted history before every call.

It does not depend on the policy, so it is computed once per transcript and shared by every run
over it (a sweep replays many policies over one loaded transcript).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .invariants import InvariantTracker, Violation
from .sizing import list_chars
from .transcripts.model import Transcript


@dataclass
class RawBaseline:
    messages: list[int] = field(default_factory=list)  # per call: messages before it
    chars: list[int] = field(default_factory=list)  # per call: compact JSON length of them
    #: per call: multiset of (kind, tool id) violations in the raw context; calls absent: none
    violation_counts: dict[int, Counter] = field(default_factory=dict)
    #: each raw violation once, at the first call whose context contains it
    first_seen: list[tuple[int, Violation]] = field(default_factory=list)

    def counts_at(self, call: int) -> Counter:
        return self.violation_counts.get(call, _EMPTY)


_EMPTY: Counter = Counter()


def compute_baseline(transcript: Transcript) -> RawBaseline:
    base = RawBaseline()
    tracker = InvariantTracker()
    seen: set[tuple[str, str | None, int]] = set()
    entries = transcript.entries
    chars_sum = 0
    done = 0
    for call, pos in enumerate(transcript.call_positions):
        for e in entries[done:pos]:
            chars_sum += e.chars
        tracker.replace_tail(done, entries[done:pos])
        done = pos
        base.messages.append(pos)
        base.chars.append(list_chars(chars_sum, pos))
        if tracker.total:
            base.violation_counts[call] = Counter(tracker.counts())
            for v in tracker.violations():
                k = (v.kind, v.tool_use_id, v.origin)
                if k not in seen:
                    seen.add(k)
                    base.first_seen.append((call, v))
    return base


def baseline_for(transcript: Transcript) -> RawBaseline:
    """The transcript's baseline, computed on first use and kept on the transcript."""
    if transcript.raw_baseline is None:
        transcript.raw_baseline = compute_baseline(transcript)
    return transcript.raw_baseline
