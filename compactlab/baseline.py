"""The raw baseline of a transcript: the uncompacted history before every call.

It does not depend on the policy, so it is computed once per transcript and shared by every run
over it (a sweep replays many policies over one loaded transcript).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .invariants import InvariantTracker, Violation
from .messages import FILE_KEY_SET, files_in_input
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
    #: per call: the earlier tool results its tool calls refer to, as (message origin, block index)
    refs: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

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
    raw: list = []  # the raw context: it only grows
    for call, pos in enumerate(transcript.call_positions):
        for e in entries[done:pos]:
            chars_sum += e.chars
        raw.extend(entries[done:pos])
        tracker.update(raw, done)
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
    base.refs = retention_refs(transcript)
    return base


def retention_refs(transcript: Transcript) -> dict[int, list[tuple[int, int]]]:
    """For every call, the latest earlier tool result for each file its tool calls name (SPEC §7
    retention): a tool_use whose input names a file (path, file_path, notebook_path) refers to
    the result of the last earlier tool call on that file."""
    latest: dict[str, tuple[int, int]] = {}
    files_of: dict[str, list[str]] = {}
    refs: dict[int, list[tuple[int, int]]] = {}
    call = 0
    for pos, e in enumerate(transcript.entries):
        if e.role == "assistant":
            if e.tool_use_ids:
                found = []
                for b in e.message["content"]:
                    if type(b) is dict and b.get("type") == "tool_use":
                        inp = b.get("input")
                        if type(inp) is dict and not FILE_KEY_SET.isdisjoint(inp):
                            files = files_of[b["id"]] = files_in_input(inp)
                            for f in files:
                                if f in latest:
                                    found.append(latest[f])
                        else:
                            files_of[b["id"]] = []  # a reused id forgets its earlier files
                if found:
                    refs[call] = found
            call += 1
        elif e.results and files_of:
            for f in e.results:
                names = files_of.get(f.tool_use_id)
                if names:
                    for name in names:
                        latest[name] = (pos, f.block)
    return refs


def baseline_for(transcript: Transcript) -> RawBaseline:
    """The transcript's baseline, computed on first use and kept on the transcript."""
    if transcript.raw_baseline is None:
        transcript.raw_baseline = compute_baseline(transcript)
    return transcript.raw_baseline
