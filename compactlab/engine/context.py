"""The working context of a replay: the messages that would be sent, with incremental sizes.

A :class:`Context` holds :class:`~compactlab.transcripts.messages.Entry` objects, the running sum of their
compact-JSON lengths and an index of every tool_result block (position, block number) in order.
Layers treat a context as immutable and return a new one when they change something
(``replaced`` for same-shape edits, ``spliced`` for structural ones). Only the replay engine
appends to the context it owns, in place, which keeps per-call work proportional to what changed
rather than to the whole history.

The two position indexes (tool results, origin keys) are append-only logs that a same-shape
replacement shares with the context it came from, each context reading the prefix that is its
own: the engine's next append extends the log in place instead of copying it at every call, and
a context whose log another one has extended copies its prefix before it appends itself.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from itertools import accumulate

from ..transcripts.messages import Entry
from .sizing import list_chars


class ResultMemo:
    """Per layer (by key), how many tool results from the first, in context order, the layer has
    dealt with: its decisions on them stand, so it looks only at those that became old since
    (micro's incremental step). Immutable: a new count is a new memo, kept by the new context."""

    __slots__ = ("_dealt",)

    def __init__(self, dealt: dict[str, int] | None = None) -> None:
        self._dealt = dealt or {}

    def __bool__(self) -> bool:
        return bool(self._dealt)

    def get(self, key: str) -> int:
        return self._dealt.get(key, 0)

    def with_count(self, key: str, dealt: int) -> "ResultMemo":
        return ResultMemo({**self._dealt, key: dealt})

    def spliced(self, head_refs: int, tail_refs: int, made_refs: int) -> "ResultMemo":
        """After a splice that keeps the first ``head_refs`` results and those from ``tail_refs``
        on, with ``made_refs`` new ones between: what was dealt with in the head stays so, and in
        the tail too unless new results precede it (then only the head's)."""
        if not self._dealt:
            return self
        return ResultMemo({key: n if n <= head_refs else head_refs if n < tail_refs or made_refs
                           else n - (tail_refs - head_refs) for key, n in self._dealt.items()})


NO_MEMO = ResultMemo()


class Context:
    __slots__ = ("entries", "chars_sum", "_refs", "n_refs", "_keys", "last_assistant", "memo")

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self.entries: list[Entry] = list(entries)
        self.chars_sum = sum(e.chars for e in self.entries)
        #: (position, index into entry.results) of every tool_result block, in context order; the
        #: first ``n_refs`` are this context's
        self._refs: list[tuple[int, int]] = [
            (pos, k) for pos, e in enumerate(self.entries) if e.results for k in range(len(e.results))
        ]
        self.n_refs = len(self._refs)
        #: per position, the origin of the message, or for one a policy made the origin before it
        #: (-1 at the start): non-decreasing, so a transcript message is found by bisection. (The
        #: running maximum is that: transcript origins increase along a context, made ones are < 0.)
        self._keys: list[int] = list(accumulate([e.origin for e in self.entries], max, initial=-1))[1:]
        self.last_assistant = next(
            (pos for pos in range(len(self.entries) - 1, -1, -1) if self.entries[pos].role == "assistant"), -1
        )
        #: what layers have dealt with (``ResultMemo``): carried through same-shape replacements,
        #: and through splices (``ResultMemo.spliced``)
        self.memo = NO_MEMO

    # -- the engine's in-place growth ---------------------------------------------------------
    def append(self, entry: Entry) -> None:
        pos = len(self.entries)
        if len(self._keys) != pos:  # a context sharing the logs has extended them: copy ours
            self._keys = self._keys[:pos]
        if len(self._refs) != self.n_refs:
            self._refs = self._refs[: self.n_refs]
        self.entries.append(entry)
        self._keys.append(entry.origin if entry.origin >= 0 else self._keys[-1] if pos else -1)
        self.chars_sum += entry.chars
        if entry.results:
            self._refs.extend((pos, k) for k in range(len(entry.results)))
            self.n_refs += len(entry.results)
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
        # a replacement keeps its message's tool results and origin: the logs are shared
        new._refs, new.n_refs, new._keys = self._refs, self.n_refs, self._keys
        new.last_assistant = self.last_assistant
        new.memo = self.memo
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
        refs = self._refs
        head_refs, tail_refs = self.refs_before(head_end), self.refs_before(tail_start)
        new._refs = refs[:head_refs]
        new._refs += [(head_end + i, k) for i, e in enumerate(made) if e.results for k in range(len(e.results))]
        made_refs = len(new._refs) - head_refs
        new._refs += [(pos + shift, k) for pos, k in refs[tail_refs: self.n_refs]]
        new.n_refs = len(new._refs)
        new.memo = self.memo.spliced(head_refs, tail_refs, made_refs)
        keys = self._keys[:head_end]
        key = keys[-1] if keys else -1
        for e in made:
            key = max(key, e.origin)
            keys.append(key)
        for i, e in enumerate(kept_tail):  # a made message leading the tail takes the key before it
            if e.origin >= 0:
                keys += self._keys[tail_start + i: len(entries)]
                break
            keys.append(key)
        new._keys = keys
        if self.last_assistant >= tail_start:
            new.last_assistant = self.last_assistant + shift
        else:
            head = [*entries[:head_end], *made]
            new.last_assistant = next((i for i in range(len(head) - 1, -1, -1) if head[i].role == "assistant"), -1)
        return new

    @property
    def result_refs(self) -> list[tuple[int, int]]:
        """(position, index into entry.results) of every tool_result block, in context order."""
        return self._refs[: self.n_refs]

    def refs_between(self, start: int, stop: int) -> list[tuple[int, int]]:
        """The tool_result blocks ``start`` to ``stop`` (by their order in the context)."""
        return self._refs[start: min(stop, self.n_refs)]

    @property
    def origin_keys(self) -> list[int]:
        return self._keys[: len(self.entries)]

    @property
    def origin_log(self) -> list[int]:
        """The origin keys' log itself, uncopied: its first ``len(self)`` values are this context's
        (``origin_keys``), for a caller that bisects within them."""
        return self._keys

    def refs_before(self, position: int) -> int:
        """How many tool_result blocks sit in messages before ``position``."""
        return bisect_left(self._refs, (position, -1), 0, self.n_refs)

    def made_in_gap(self, origin: int) -> Entry | None:
        """For a transcript message that is not in the context, the message a policy made that
        stands where it was (a snip's placeholder, a summary), the nearest before the next message
        of the transcript; None when none does."""
        j = bisect_left(self._keys, origin, 0, len(self.entries))
        return self.entries[j - 1] if j > 0 and self.entries[j - 1].origin < 0 else None

    def find_origin(self, origin: int) -> int | None:
        """Position of the transcript message ``origin``, or None when it is not in the context."""
        n = len(self.entries)
        j = bisect_left(self._keys, origin, 0, n)
        return j if origin >= 0 and j < n and self.entries[j].origin == origin else None


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
