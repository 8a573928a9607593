"""The working context of a replay: the messages that would be sent, with incremental sizes.

A :class:`Context` holds :class:`~compactlab.messages.Entry` objects, the running sum of their
compact-JSON lengths and an index of every tool_result block (position, block number) in order.
Layers treat a context as immutable and return a new one when they change something
(``replaced`` for same-shape edits, ``Context(entries)`` for structural ones). Only the replay
engine appends to the context it owns, in place, which keeps per-call work proportional to what
changed rather than to the whole history.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate
from collections.abc import Iterable, Mapping
from typing import Any

from .messages import Entry
from .sizing import list_chars


class Context:
    __slots__ = ("entries", "chars_sum", "result_refs", "last_assistant", "memo", "origin_keys")

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self.entries: list[Entry] = list(entries)
        self.chars_sum = sum(e.chars for e in self.entries)
        #: per position, the origin of the message, or for one a policy made the origin before it
        #: (-1 at the start): non-decreasing, so a transcript message is found by bisection. (The
        #: running maximum is that: transcript origins increase along a context, made ones are < 0.)
        self.origin_keys: list[int] = list(accumulate([e.origin for e in self.entries], max, initial=-1))[1:]
        #: (position, index into entry.results) of every tool_result block, in context order
        self.result_refs: list[tuple[int, int]] = [
            (pos, k) for pos, e in enumerate(self.entries) if e.results for k in range(len(e.results))
        ]
        self.last_assistant = next(
            (pos for pos in range(len(self.entries) - 1, -1, -1) if self.entries[pos].role == "assistant"), -1
        )
        #: derived facts layers may cache; valid while the context only grows by appends
        self.memo: dict[str, Any] = {}

    # -- the engine's in-place growth ---------------------------------------------------------
    def append(self, entry: Entry) -> None:
        pos = len(self.entries)
        self.entries.append(entry)
        self.origin_keys.append(entry.origin if entry.origin >= 0 else self.origin_keys[-1] if pos else -1)
        self.chars_sum += entry.chars
        if entry.results:
            self.result_refs.extend((pos, k) for k in range(len(entry.results)))
        if entry.role == "assistant":
            self.last_assistant = pos

    def extend(self, entries: Iterable[Entry]) -> None:
        for e in entries:
            self.append(e)

    # -- what layers use -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.entries)

    @property
    def chars(self) -> int:
        return list_chars(self.chars_sum, len(self.entries))

    @property
    def messages(self) -> list[dict]:
        return [e.message for e in self.entries]

    def replaced(self, changes: Mapping[int, Entry]) -> "Context":
        """A new context with the entries at some positions replaced by same-shape copies.

        The tool-result index is reused: a replacement keeps the message's tool_result blocks
        where they were (it may change their content, not their number or order).
        """
        new = Context.__new__(Context)
        new.entries = list(self.entries)
        delta = 0
        for pos, entry in changes.items():
            delta += entry.chars - new.entries[pos].chars
            new.entries[pos] = entry
        new.chars_sum = self.chars_sum + delta
        new.result_refs = list(self.result_refs)
        new.origin_keys = list(self.origin_keys)  # a replacement keeps its message's origin
        new.last_assistant = self.last_assistant
        new.memo = {}
        return new

    def spliced(self, head_end: int, made: list[Entry], tail_start: int) -> "Context":
        """A new context: the first ``head_end`` entries, ``made``, then the entries from
        ``tail_start`` on (what snip, summary and reactive compaction build). The indexes of the
        kept entries are carried over, shifted, rather than rebuilt from every entry."""
        entries = self.entries
        kept_tail = entries[tail_start:]
        new = Context.__new__(Context)
        new.entries = [*entries[:head_end], *made, *kept_tail]
        dropped = entries[head_end:tail_start]
        if len(dropped) < len(new.entries):
            new.chars_sum = self.chars_sum - sum(e.chars for e in dropped) + sum(e.chars for e in made)
        else:
            new.chars_sum = sum(e.chars for e in new.entries)
        shift = head_end + len(made) - tail_start
        refs = self.result_refs
        new.result_refs = refs[: self.refs_before(head_end)]
        new.result_refs += [(head_end + i, k) for i, e in enumerate(made) if e.results for k in range(len(e.results))]
        new.result_refs += [(pos + shift, k) for pos, k in refs[self.refs_before(tail_start):]]
        keys = self.origin_keys[:head_end]
        key = keys[-1] if keys else -1
        for e in made:
            key = max(key, e.origin)
            keys.append(key)
        for i, e in enumerate(kept_tail):  # a made message leading the tail takes the key before it
            if e.origin >= 0:
                keys += self.origin_keys[tail_start + i:]
                break
            keys.append(key)
        new.origin_keys = keys
        if self.last_assistant >= tail_start:
            new.last_assistant = self.last_assistant + shift
        else:
            head = [*entries[:head_end], *made]
            new.last_assistant = next((i for i in range(len(head) - 1, -1, -1) if head[i].role == "assistant"), -1)
        new.memo = {}
        return new

    def refs_before(self, position: int) -> int:
        """How many tool_result blocks sit in messages before ``position``."""
        return bisect_left(self.result_refs, (position, -1))

    def find_origin(self, origin: int) -> int | None:
        """Position of the transcript message ``origin``, or None when it is not in the context."""
        j = bisect_left(self.origin_keys, origin)
        return j if origin >= 0 and j < len(self.entries) and self.entries[j].origin == origin else None


def find_origin(entries: list[Entry], origin: int, lo: int = 0) -> int | None:
    """Position (at or after ``lo``) of the transcript message ``origin`` in ``entries``.

    Messages from the transcript keep their order in every context (layers drop, replace or
    insert, never reorder), so their origins increase along positions; the entries a policy made
    have negative origins and are stepped over. Binary search: O(log n) per lookup.
    """
    hi = len(entries)
    while lo < hi:
        mid = (lo + hi) // 2
        j = mid
        while j < hi and entries[j].origin < 0:
            j += 1
        if j == hi:
            hi = mid
            continue
        o = entries[j].origin
        if o == origin:
            return j
        if o < origin:
            lo = j + 1
        else:
            hi = mid
    return None
