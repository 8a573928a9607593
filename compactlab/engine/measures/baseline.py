"""The raw baseline of a transcript: the uncompacted history before every call.

It does not depend on the policy, so it is computed once per transcript and shared by every run
over it (a sweep replays many policies over one loaded transcript).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import field
from typing import Any

import orjson

from ...plain import NamedTuple, dataclass
from ..context import Context
from ..memo import memo_of
from .base import CallAt, Nothing
from .violations import Violation, tracker_for
from ...transcripts.messages import Entry, make_entry
from ...core import in_use
from .probes import Probe, ProbeIndex, Replies, wanted_strings
from ..sizing import list_chars
from ...transcripts.model import Transcript


#: what a streamed baseline leaves where a message it no longer needs was (its memory let go):
#: nothing reads it again, the invariant tracker checks from the message before the call on
FREED = make_entry({"role": "user", "content": ""}, -1)


@dataclass(eq=False, repr=False)
class RawBaseline:
    """Per call, the uncompacted history: its size, violations and retention references."""

    messages: list[int] = field(default_factory=list)  # per call: messages before it
    chars: list[int] = field(default_factory=list)  # per call: compact JSON length of them
    #: per call: multiset of (kind, tool id) violations in the raw context; calls absent: none
    violation_counts: dict[int, Counter] = field(default_factory=dict)
    #: each raw violation once, at the first call whose context contains it
    first_seen: list[tuple[int, Violation]] = field(default_factory=list)
    #: per call: the earlier tool results its tool calls refer to, as (message origin, block index):
    #: a context holding that message with the block unchanged (``Entry.changed``) retains it
    refs: dict[int, list[Ref]] = field(default_factory=dict)
    #: per call: the hindsight probes of its reply (``probes.py``); calls absent: none. Those found
    #: as the transcript was read (a dict), or read back from the probe cache (``probe_cache.load``)
    probes: Mapping[int, list[Probe]] = field(default_factory=dict)
    #: whether the probes were looked for (a replay of no compaction skips them: recall is 1.0)
    probes_indexed: bool = True
    #: a stream's native baseline hands the facts it read of each message to the run's violations
    #: tracker (``_native.KnownFacts(stream=True)``: ``stream_baseline``); None: none handed
    handed: Any = field(default=None, compare=False, repr=False)

    def counts_at(self, call: int) -> Counter:
        return self.violation_counts.get(call, _EMPTY)


Ref = tuple[int, int]
_EMPTY: Counter = Counter()


def stream_baseline(native: Any, base: RawBaseline, keep: bool = False) -> Any:
    """The raw baseline of a stream whose probes are not looked for, built in Rust
    (``_native.StreamBaseline``; ``BaselineBuilder`` is its reference): shown each message in order
    (``add``, or as the native core reads its line), it writes each call's row into ``base``; with
    ``keep`` (a loaded transcript's) each violation's first call too (``first_seen``). A stream's
    hands the facts it reads of each message to the run's violations tracker (``base.handed``),
    which then does not read them again."""
    if not keep:
        base.handed = native.KnownFacts(stream=True)
    return native.StreamBaseline(Violation, FREED, base.messages, base.chars, base.violation_counts, base.refs,
                                 Counter, base.first_seen if keep else None, base.handed)


class BaselineBuilder:
    """Builds a RawBaseline from the messages in order, as a replay reads them.

    ``add`` takes every message; at an assistant message (a call) the row of that call is
    recorded first, from the messages before it. With ``keep=False`` (a replay that streams its
    transcript) no message is held once it can no longer matter, and ``first_seen``, which needs
    the violations' positions and so every message, is left empty.
    """

    def __init__(self, keep: bool = True, system: Any = None, wanted: set[str] | None = None,
                 probes: bool = True, native: Any = None, replies: Replies | None = None) -> None:
        #: the probes found, by call (``base.probes``)
        self.found: dict[int, list[Probe]] = {}
        self.base = RawBaseline(probes=self.found, probes_indexed=probes)
        if native is not None and not probes:
            # probes not looked for (a stream's, or those read from the cache): the whole builder in
            # Rust (this class is its reference), writing each call's row into ``base``
            self.add = stream_baseline(native, self.base, keep).add  # type: ignore[method-assign]
        #: the hindsight probes' index; None for a run that cannot lose one (no compaction). It
        #: reads the texts in Rust where the native core runs (``native``: ``core.in_use()``)
        self._probes = ProbeIndex(system if isinstance(system, str) else orjson.dumps(system).decode() if system else None,
                                  wanted, native, replies) if probes else None
        self.keep = keep
        self._tracker = tracker_for(native)
        self._seen: set[tuple[str, str | None, int]] = set()
        self._raw: list = []  # the raw context: it only grows
        self._done = 0  # messages the tracker has seen
        self._freed = 0  # messages before this one are no longer held (keep=False)
        self._chars = 0
        self._latest: dict[str, Ref] = {}  # file -> its latest tool result
        self._files_of: dict[str, tuple[str, ...]] = {}  # tool_use id -> the files its input names

    def add(self, entry: Entry) -> None:
        pos = len(self._raw)
        probes = self._probes.add(pos, entry) if self._probes is not None else None
        if entry.role == "assistant":
            self._call(entry)
            if probes:
                self.found[len(self.base.messages) - 1] = probes
        elif entry.results and self._files_of:
            for f in entry.results:
                names = self._files_of.get(f.tool_use_id)
                if names:
                    for name in names:
                        self._latest[name] = (pos, f.block)
        self._raw.append(entry)
        self._chars += entry.chars

    def _call(self, entry: Entry) -> None:
        base, tracker, raw = self.base, self._tracker, self._raw
        call, pos = len(base.messages), len(raw)
        tracker.update(raw, self._done)
        if not self.keep:  # the next update checks from the message before this call's on
            for k in range(self._freed, pos - 2):
                raw[k] = FREED
            if pos - 2 > self._freed:
                tracker.free(self._freed, pos - 2, FREED)
            self._freed = max(self._freed, pos - 2)
        self._done = pos
        base.messages.append(pos)
        base.chars.append(list_chars(self._chars, pos))
        if tracker.total:
            base.violation_counts[call] = Counter(tracker.counts())
            if self.keep:
                for v in tracker.violations():
                    seen = (v.kind, v.tool_use_id, v.origin)
                    if seen not in self._seen:
                        self._seen.add(seen)
                        base.first_seen.append((call, v))
        if entry.tool_use_ids:  # retention (SPEC §7): what the call's tool inputs refer to
            found = []
            for tid, files in zip(entry.tool_use_ids, entry.use_files):
                self._files_of[tid] = files  # a reused id forgets its earlier files
                for f in files:
                    if f in self._latest:
                        found.append(self._latest[f])
            if found:
                base.refs[call] = found


def compute_baseline(transcript: Transcript, probes: bool = True) -> RawBaseline:
    entries = transcript.entries
    native = in_use()
    replies: Replies = {}  # (each reply's strings, read once for what is wanted and for the index)
    builder = BaselineBuilder(system=transcript.system,
                              wanted=wanted_strings(entries, native, replies) if probes else None,
                              probes=probes, native=native, replies=replies)
    for e in entries[: transcript.call_positions[-1] + 1] if transcript.call_positions else ():
        builder.add(e)
    return builder.base


def retention_refs(transcript: Transcript) -> dict[int, list[Ref]]:
    """For every call, the latest earlier tool result for each file its tool calls name (SPEC §7
    retention): a tool_use whose input names a file (path, file_path, notebook_path) refers to
    the result of the last earlier tool call on that file."""
    return compute_baseline(transcript).refs


def baseline_for(transcript: Transcript, probes: bool = True) -> RawBaseline:
    """The transcript's baseline, computed on first use and kept in the engine's memo of it
    (``memo.memo_of``). ``probes`` False: without the probes, unless it has them already (what a
    policy that never acts, a calibration or inspect read); one asked for with them later is
    computed again with them."""
    memo = memo_of(transcript)
    base = memo.baseline
    if base is None or (probes and not base.probes_indexed):
        base = memo.baseline = compute_baseline(transcript, probes=probes)
    return base


class RawRow(NamedTuple):
    """A call's uncompacted history (``TurnRecord``'s columns)."""

    raw_messages: int
    raw_chars: int
    raw_tokens: int


class RawSize:
    """The raw baseline as a measure (``base.Measure``): each call's uncompacted history, its
    messages, characters and tokens (``counter``: exact counts of the ``entries`` before the call,
    else ``estimator``'s estimate of its characters)."""

    def __init__(self, base: RawBaseline, estimator: Any, counter: Any = None,
                 entries: list[Entry] | None = None) -> None:
        self.base, self.estimator, self.counter, self.entries = base, estimator, counter, entries

    def at_call(self, at: CallAt, context: Context) -> RawRow:
        base, call = self.base, at.call
        chars = base.chars[call]
        tokens = (self.counter.count([e.message for e in (self.entries or [])[:at.pos]]) if self.counter
                  else self.estimator.tokens(chars))
        return RawRow(base.messages[call], chars, tokens)

    def finish(self) -> Nothing:
        return Nothing()
