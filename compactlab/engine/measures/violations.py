"""API validity of every context sent (SPEC §6), checked incrementally.

Each violation except ``duplicate_tool_use_id`` depends only on one message and its neighbours,
so it is "owned" by that message: ``orphan_tool_use`` by the assistant message (with the message
after it), ``orphan_tool_result`` and ``tool_result_not_first`` by the user message (with the one
before it), ``empty_content`` and ``first_not_user`` by the message itself (a context of no
message owns a ``first_not_user`` of its own at position 0: ``NO_MESSAGE``). The tracker keeps the
owned violations per position and, for a new context whose first ``dirty_from`` messages are
unchanged, recomputes only from ``dirty_from - 1`` on. Duplicate ids are counted with a map from
id to positions, maintained the same way.
"""

from __future__ import annotations

from collections import Counter

from typing import Any, Protocol

from ...plain import NamedTuple
from ..context import Context, find_origin
from ...transcripts.messages import Entry
from .base import CallAt, after_first_run

KINDS = (
    "orphan_tool_use",
    "orphan_tool_result",
    "duplicate_tool_use_id",
    "tool_result_not_first",
    "empty_content",
    "first_not_user",
)
#: each kind in words, for people (the kind's name stays the machine's: JSON, CSV)
MEANING = {
    "orphan_tool_use": "a tool call without its result",
    "orphan_tool_result": "a tool result without its call",
    "duplicate_tool_use_id": "two tool calls with one id",
    "tool_result_not_first": "a tool result after other content in its message",
    "empty_content": "a message with no content",
    "first_not_user": "a context that does not start with a user message (or has none)",
}


#: the origin of the violation of a context of no message (``NO_MESSAGE``): that of no message
NO_MESSAGE_ORIGIN = -1


def where(violation: dict, context_messages: int) -> str:
    """Where a listed violation is, for a reader: its message's position in the call's context, or
    that the call sends no message (the ``first_not_user`` of an empty context, listed at position 0
    where the first message to arrive will stand)."""
    if context_messages == 0:
        return "no message sent"
    return f"message {violation['message_index']}"


def message_cell(violation: dict, context_messages: int) -> str:
    """``where`` in a table's message column."""
    return str(violation["message_index"]) if context_messages else "none sent"


def manual_orphans(policy: dict, violations: list[dict], manual_calls: list[int]) -> int:
    """How many of the ``violations`` a run introduced are the tool results its manual compaction
    orphaned by design: a compaction run before the results are appended (``manual.mode =
    "before_results"``, the s08 design's) leaves the compact call's result without its call. What
    replay's terminal and compare's verdict say of them, and of the setting that avoids them."""
    if (policy.get("manual") or {}).get("mode") != "before_results" or not manual_calls:
        return 0
    at = set(manual_calls)
    return sum(1 for v in violations if v["introduced"] and v["kind"] == "orphan_tool_result" and v["call"] in at)


class Violation(NamedTuple):
    """One way a context would make the API reject the request (SPEC §6)."""

    kind: str
    message_index: int
    tool_use_id: str | None
    origin: int  # the owning message's origin: identifies "the same violation" across calls

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.kind, self.tool_use_id)


def owned_violations(entries: list[Entry], i: int) -> list[Violation]:
    e = entries[i]
    # the common case, decided with a few set operations: a valid message owns nothing
    if i and not e.empty and not e.misplaced_results and _plainly_valid(entries, i, e):
        return _NONE
    out: list[Violation] = []
    if i == 0 and e.role != "user":
        out.append(Violation("first_not_user", i, None, e.origin))
    if e.empty:
        out.append(Violation("empty_content", i, None, e.origin))
    if e.tool_use_ids and e.role == "assistant":
        after = entries[i + 1] if i + 1 < len(entries) else None
        answered = {f.tool_use_id for f in after.results} if after is not None and after.role == "user" else set()
        out += [Violation("orphan_tool_use", i, tid, e.origin) for tid in e.tool_use_ids if tid not in answered]
    if e.results:
        prev = entries[i - 1] if i > 0 else None
        uses = set(prev.tool_use_ids) if prev is not None and prev.role == "assistant" else set()
        out += [Violation("orphan_tool_result", i, f.tool_use_id, e.origin) for f in e.results
                if f.tool_use_id not in uses]
        out += [Violation("tool_result_not_first", i, tid, e.origin) for tid in e.misplaced_results]
    return out


def _plainly_valid(entries: list[Entry], i: int, e: Entry) -> bool:
    """A message after the first, not empty, with no misplaced result, whose tool calls are all
    answered by the next message (an assistant's) or whose results all answer the one before (a
    user's)."""
    if e.role == "assistant":
        if not e.use_set:
            return True
        nxt = entries[i + 1] if i + 1 < len(entries) else None
        return nxt is not None and nxt.role == "user" and e.use_set <= nxt.result_set
    if not e.results:
        return True
    before = entries[i - 1]
    return before.role == "assistant" and e.result_set <= before.use_set


_NONE: list[Violation] = []
#: a context of no message does not start with a user message either (the API refuses an empty
#: list): a call after a recording's opening reply sends one. Owned by position 0, which the first
#: message takes over (``_grow`` checks it again).
NO_MESSAGE = [Violation("first_not_user", 0, None, NO_MESSAGE_ORIGIN)]


def check_context(entries: list[Entry]) -> list[Violation]:
    """All violations of one context, from scratch (the reference the tracker must agree with)."""
    tracker = InvariantTracker()
    tracker.update(entries, 0)
    return tracker.violations()


class InvariantTracker:
    """The violations of the last context it was shown, updated from what changed.

    A new context shares a prefix with the previous one (``dirty_from``) and often a run of the
    very same messages after it, shifted (a snip drops the middle and appends the new messages
    behind the kept tail). Only the messages around what changed are checked again; the kept
    run's violations move with it. A message whose content alone changed (micro and budget
    replace result contents) owns what it owned, so it is stepped over without a check.
    Violations are stored without positions, which are given when they are listed.
    """

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.owned: dict[int, list[tuple[str, str | None, int]]] = {}  # position -> (kind, tool id, origin)
        self.owned_counts: Counter[tuple[str, str | None]] = Counter()
        self.owned_total = 0  # sum of owned_counts, kept as it changes
        self.use_count: dict[str, int] = {}
        self.duplicated: set[str] = set()

    def update(self, entries: list[Entry], dirty_from: int) -> None:
        """Show the tracker ``entries``, whose first ``dirty_from`` messages it has seen before."""
        old = self.entries
        n_old, n_new = len(old), len(entries)
        d = max(0, min(dirty_from, n_old, n_new))
        # a result's content replaced (micro, budget) leaves every violation as it was
        while d < n_old and d < n_new and _same_shape(old[d], entries[d]):
            old[d] = entries[d]
            d += 1
        if d == n_old:  # the context only grew: the new messages, and the last old one, to check
            self._grow(entries, d)
            return
        i0, j0, run = _kept_run(old, entries, d)
        if not run:
            i0, j0 = n_new, n_old
        # tool ids: out with the old messages that went, in with the new ones
        for e in old[d:j0] + old[j0 + run:]:
            for tid in e.tool_use_ids:
                left = self.use_count[tid] - 1
                if left:
                    self.use_count[tid] = left
                    if left == 1:
                        self.duplicated.discard(tid)
                else:
                    del self.use_count[tid]
        for e in entries[d:i0] + entries[i0 + run:]:
            for tid in e.tool_use_ids:
                n = self.use_count.get(tid, 0) + 1
                self.use_count[tid] = n
                if n > 1:
                    self.duplicated.add(tid)
        # owned violations: kept before the change, moved with the kept run, dropped elsewhere
        owned: dict[int, list[tuple[str, str | None, int]]] = {}
        shift = i0 - j0
        for pos, found in self.owned.items():
            if pos < d - 1:
                owned[pos] = found
            elif run and j0 + 1 <= pos <= j0 + run - 2:
                owned[pos + shift] = found
            else:
                self._drop(found)
        self.entries[d:] = entries[d:]
        check: list[int] | range = range(max(d - 1, 0), min(i0 + 1, n_new))
        if run:
            check = [*check, *range(max(i0 + run - 1, i0 + 1), n_new)]
        self.owned = owned
        for pos in check:
            made = owned_violations(self.entries, pos)
            if made:
                self._own(pos, made)
        if not entries:
            self._own(0, NO_MESSAGE)

    def free(self, start: int, stop: int, freed: Entry) -> None:
        """The stream's messages from ``start`` to ``stop`` it no longer needs: ``freed`` in their
        place (their violations were counted; the next check looks from the message before the
        next call)."""
        for k in range(start, min(stop, len(self.entries))):
            self.entries[k] = freed

    def _grow(self, entries: list[Entry], d: int) -> None:
        """``update`` for a context that only gained messages after its first ``d``."""
        use_count = self.use_count
        for e in entries[d:]:
            for tid in e.tool_use_ids:
                n = use_count.get(tid, 0) + 1
                use_count[tid] = n
                if n > 1:
                    self.duplicated.add(tid)
        self.entries[d:] = entries[d:]
        first = max(d - 1, 0)
        if first in self.owned:  # what the last old message owned depended on its missing neighbour
            self._drop(self.owned.pop(first))
        for pos in range(first, len(entries)):
            found = owned_violations(self.entries, pos)
            if found:
                self._own(pos, found)
        if not entries:
            self._own(0, NO_MESSAGE)

    def _drop(self, found: list[tuple[str, str | None, int]]) -> None:
        self.owned_total -= len(found)
        for kind, tid, _ in found:
            key = (kind, tid)
            self.owned_counts[key] -= 1
            if not self.owned_counts[key]:
                del self.owned_counts[key]

    def _own(self, pos: int, found: list[Violation]) -> None:
        self.owned[pos] = [(v.kind, v.tool_use_id, v.origin) for v in found]
        self.owned_total += len(found)
        for v in found:
            self.owned_counts[(v.kind, v.tool_use_id)] += 1

    def counts(self) -> Counter[tuple[str, str | None]]:
        """Multiset of (kind, tool id) of the current context's violations."""
        if not self.duplicated:
            return self.owned_counts
        c = Counter(self.owned_counts)
        for tid in self.duplicated:
            c[("duplicate_tool_use_id", tid)] += self.use_count[tid] - 1
        return c

    @property
    def total(self) -> int:
        if not self.duplicated:
            return self.owned_total
        return self.owned_total + sum(self.use_count[t] - 1 for t in self.duplicated)

    def violations(self) -> list[Violation]:
        out = [Violation(kind, pos, tid, origin) for pos in sorted(self.owned) for kind, tid, origin in self.owned[pos]]
        if self.duplicated:
            seen: dict[str, int] = {}
            for pos, e in enumerate(self.entries):
                for tid in e.tool_use_ids:
                    if tid in self.duplicated:
                        seen[tid] = seen.get(tid, 0) + 1
                        if seen[tid] > 1:
                            out.append(Violation("duplicate_tool_use_id", pos, tid, e.origin))
        return sorted(out, key=lambda v: (v.message_index, KINDS.index(v.kind)))


def tracker_for(native: Any = None, shared: Any = None) -> InvariantTracker:
    """A tracker: the native core's (``_native.InvariantTracker``, in Rust) where ``native`` is the
    native module (``core.in_use()``), else this module's, its reference. ``shared``: what the
    native trackers of the runs of its recording know of its messages (``shared_facts``)."""
    if native is None:
        return InvariantTracker()
    return native.InvariantTracker(Violation, shared)  # type: ignore[no-any-return]


def shared_facts(memo: dict, native: Any) -> Any:
    """What the native trackers know of a recording's own messages (their facts), for the runs of it
    after the first (``_native.KnownFacts``: ``base.after_first_run``)."""
    return after_first_run(memo, _SHARED, native.KnownFacts)


_SHARED = ("violations", "the recording's messages")


def _same_shape(a: Entry, b: Entry) -> bool:
    """Whether ``b`` is ``a`` or a copy of it with only content changed: the facts violations
    depend on (role, tool ids, tool_result ids and their places, emptiness) are the same."""
    return a is b or (a.origin == b.origin and a.role == b.role and a.tool_use_ids == b.tool_use_ids
                      and len(a.results) == len(b.results) and a.result_set == b.result_set
                      and a.empty == b.empty and a.misplaced_results == b.misplaced_results)


def _kept_run(old: list[Entry], new: list[Entry], d: int) -> tuple[int, int, int]:
    """(i0, j0, length): ``new[i0:i0+length]`` are the very objects ``old[j0:j0+length]``, the
    first such run after ``d`` (a layer inserts at most a few messages before what it keeps)."""
    for i0 in range(d, min(d + 3, len(new))):
        e = new[i0]
        if e.origin < 0:
            continue
        j0 = find_origin(old, e.origin, d)
        if j0 is None or old[j0] is not e:
            continue
        run = 1
        limit = min(len(new) - i0, len(old) - j0)
        while run < limit and new[i0 + run] is old[j0 + run]:
            run += 1
        return i0, j0, run
    return d, d, 0


def classify(found: list[Violation], sent: Counter, raw: Counter) -> list[tuple[Violation, bool]]:
    """Pair each violation with ``introduced``: the excess of a (kind, id) over the raw context.

    Matched as a multiset, since indexes shift: the first ``raw[key]`` occurrences are inherited,
    the rest introduced.
    """
    seen: Counter = Counter()
    out = []
    for v in found:
        seen[v.key] += 1
        out.append((v, seen[v.key] > raw.get(v.key, 0)))
    return out


class ViolationLog:
    """The violations of a run: each call's introduced and inherited counts, and every
    violation once, at the first call whose context contained it."""

    def __init__(self) -> None:
        self._seen: dict[tuple, dict] = {}

    def record(self, call: int, tracker: InvariantTracker, raw: Counter) -> tuple[int, int]:
        """(introduced, inherited) in the context ``tracker`` last checked, against the raw
        context's counts ``raw``."""
        introduced = inherited = 0
        if not tracker.total:
            return 0, 0
        seen = self._seen
        for v, is_new in classify(tracker.violations(), tracker.counts(), raw):
            introduced += is_new
            inherited += not is_new
            key = (v.kind, v.tool_use_id, v.origin, is_new)
            if key not in seen:
                seen[key] = {"kind": v.kind, "call": call, "message_index": v.message_index,
                             "tool_use_id": v.tool_use_id, "introduced": is_new}
        return introduced, inherited

    @property
    def table(self) -> dict[tuple, dict]:
        """What it logged, by (kind, tool id, origin, introduced): where the native core's tracker
        logs each call's violations itself (``InvariantTracker.log``; ``record`` is its reference)."""
        return self._seen

    def listed(self) -> list[dict]:
        """Every violation once, in call and message order."""
        return sorted(self._seen.values(), key=lambda v: (v["call"], v["message_index"]))


class Violations:
    """The measure (``base.Measure``): the context sent checked against the API's rules
    incrementally (from the first message a layer changed), each violation introduced by the
    policy or inherited from the recording (the raw context's ``counts_at`` the call)."""

    def __init__(self, raw: RawCounts, native: Any = None, shared: Any = None) -> None:
        self.raw = raw
        self.tracker = tracker_for(native, shared)  # (``native``: the native core's, in Rust)
        self.log = ViolationLog()

    def at_call(self, at: CallAt, context: Context) -> ViolationsRow:
        self.tracker.update(context.entries, at.changed_from)  # (capped at what it saw last call)
        return ViolationsRow(*self.logged(at.call))

    def logged(self, call: int) -> tuple[int, int]:
        """(introduced, inherited) in the context the tracker last checked, at ``call``: each
        violation logged once (what the native measures ask where the context has any)."""
        return self.log.record(call, self.tracker, self.raw.counts_at(call))

    def finish(self) -> ViolationsTotal:
        return ViolationsTotal(self.log.listed())


class ViolationsRow(NamedTuple):
    """A call's violations of the API's rules (``TurnRecord``'s columns)."""

    violations_introduced: int
    violations_inherited: int


class ViolationsTotal(NamedTuple):
    """Every violation once, in call and message order (``summarize``'s keyword)."""

    violations: list[dict]


class RawCounts(Protocol):
    """The raw context's violations at each call (``baseline.RawBaseline``)."""

    def counts_at(self, call: int) -> Counter: ...
