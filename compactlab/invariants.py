"""API validity of every context sent (SPEC §6), checked incrementally.

Each violation except ``duplicate_tool_use_id`` depends only on one message and its neighbours,
so it is "owned" by that message: ``orphan_tool_use`` by the assistant message (with the message
after it), ``orphan_tool_result`` and ``tool_result_not_first`` by the user message (with the one
before it), ``empty_content`` and ``first_not_user`` by the message itself. The tracker keeps the
owned violations per position and, for a new context whose first ``dirty_from`` messages are
unchanged, recomputes only from ``dirty_from - 1`` on. Duplicate ids are counted with a map from
id to positions, maintained the same way.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .messages import Entry

KINDS = (
    "orphan_tool_use",
    "orphan_tool_result",
    "duplicate_tool_use_id",
    "tool_result_not_first",
    "empty_content",
    "first_not_user",
)


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    message_index: int
    tool_use_id: str | None
    origin: int  # the owning message's origin: identifies "the same violation" across calls

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.kind, self.tool_use_id)


def owned_violations(entries: list[Entry], i: int) -> list[Violation]:
    e = entries[i]
    out: list[Violation] = []
    if i == 0 and e.role != "user":
        out.append(Violation("first_not_user", i, None, e.origin))
    if e.empty:
        out.append(Violation("empty_content", i, None, e.origin))
    if e.tool_use_ids and e.role == "assistant":
        nxt = entries[i + 1] if i + 1 < len(entries) else None
        answered = {f.tool_use_id for f in nxt.results} if nxt is not None and nxt.role == "user" else set()
        for tid in e.tool_use_ids:
            if tid not in answered:
                out.append(Violation("orphan_tool_use", i, tid, e.origin))
    if e.results:
        prev = entries[i - 1] if i > 0 else None
        uses = set(prev.tool_use_ids) if prev is not None and prev.role == "assistant" else set()
        for f in e.results:
            if f.tool_use_id not in uses:
                out.append(Violation("orphan_tool_result", i, f.tool_use_id, e.origin))
        for tid in e.misplaced_results:
            out.append(Violation("tool_result_not_first", i, tid, e.origin))
    return out


def check_context(entries: list[Entry]) -> list[Violation]:
    """All violations of one context, from scratch (the reference the tracker must agree with)."""
    tracker = InvariantTracker()
    tracker.update(entries, 0)
    return tracker.violations()


class InvariantTracker:
    """The violations of the last context it was shown, updated from the first changed message."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.owned: dict[int, list[Violation]] = {}
        self.owned_counts: Counter[tuple[str, str | None]] = Counter()
        self.uses: dict[str, list[int]] = {}
        self.duplicated: set[str] = set()

    def update(self, entries: list[Entry], dirty_from: int) -> None:
        """Show the tracker ``entries``, whose first ``dirty_from`` messages it has seen before."""
        d = max(0, min(dirty_from, len(self.entries), len(entries)))
        self.replace_tail(d, entries[d:])

    def replace_tail(self, d: int, tail: list[Entry]) -> None:
        """The new context is the old one's first ``d`` messages followed by ``tail``."""
        old_n = len(self.entries)
        d = max(0, min(d, old_n))
        start = max(d - 1, 0)
        for pos in range(start, old_n):
            for v in self.owned.pop(pos, ()):
                self.owned_counts[v.key] -= 1
                if not self.owned_counts[v.key]:
                    del self.owned_counts[v.key]
        for pos in range(old_n - 1, d - 1, -1):
            for tid in self.entries[pos].tool_use_ids:
                positions = self.uses[tid]
                positions.pop()
                if len(positions) <= 1:
                    self.duplicated.discard(tid)
                    if not positions:
                        del self.uses[tid]
        del self.entries[d:]
        self.entries.extend(tail)
        for pos in range(d, len(self.entries)):
            for tid in self.entries[pos].tool_use_ids:
                positions = self.uses.setdefault(tid, [])
                positions.append(pos)
                if len(positions) > 1:
                    self.duplicated.add(tid)
        for pos in range(start, len(self.entries)):
            found = owned_violations(self.entries, pos)
            if found:
                self.owned[pos] = found
                for v in found:
                    self.owned_counts[v.key] += 1

    def _duplicates(self) -> list[Violation]:
        return [
            Violation("duplicate_tool_use_id", pos, tid, self.entries[pos].origin)
            for tid in sorted(self.duplicated)
            for pos in self.uses[tid][1:]
        ]

    def counts(self) -> Counter[tuple[str, str | None]]:
        """Multiset of (kind, tool id) of the current context's violations."""
        if not self.duplicated:
            return self.owned_counts
        c = Counter(self.owned_counts)
        for tid in self.duplicated:
            c[("duplicate_tool_use_id", tid)] += len(self.uses[tid]) - 1
        return c

    @property
    def total(self) -> int:
        return sum(self.owned_counts.values()) + sum(len(self.uses[t]) - 1 for t in self.duplicated)

    def violations(self) -> list[Violation]:
        out = [v for pos in sorted(self.owned) for v in self.owned[pos]]
        out.extend(self._duplicates())
        return sorted(out, key=lambda v: (v.message_index, KINDS.index(v.kind)))


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
