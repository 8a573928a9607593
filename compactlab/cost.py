"""The cache-aware cost model (SPEC §7); the prices themselves are ``prices``'.

With prompt caching, the part of a call's prompt that is unchanged since the previous call (the
prefix before the first message anything changed) is a cache read, the rest a cache write; so a
policy that rewrites old messages pays cache writes on every call it does so. Summary calls are
billed at their own input and output, uncached. The recorded replies' output is the same under
every policy and left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .prices import ModelPrices
from .sizing import TokenEstimator, list_chars


class PromptCache:
    """The prompt-cache prefix model: the part of a call's prompt unchanged since the previous
    call was sent is read from the cache, the rest is written.

    The first call reads nothing. A call whose context changed from its first message (a summary
    without ``keep_head``, a recorded compaction's restart) still reads the overhead (system
    prompt and tools, which no layer touches). Otherwise the unchanged prefix, in tokens (by the
    estimate, or in proportion of the exact count), is read, never more than the previous call
    sent. ``sent`` is told what each call sent.
    """

    def __init__(self, estimator: TokenEstimator, exact: bool = False) -> None:
        self.estimator = estimator
        self.exact = exact  # tokens are exact counts: the prefix is their share by chars
        self.calls = 0
        self.sent_messages = 0  # messages of the context last sent
        self.sent_tokens = 0

    def unchanged(self, lowest_changed: int | None) -> int:
        """How many leading messages are as they were sent last time."""
        return self.sent_messages if lowest_changed is None else min(self.sent_messages, lowest_changed)

    def account(self, context: Any, unchanged: int, tokens: int) -> tuple[int, int]:
        """(cache read, cache write) tokens of a call sending ``context`` (its ``entries``, their
        ``chars_sum`` and its ``chars`` as JSON), of which the first ``unchanged`` were sent before."""
        if self.calls == 0:
            read = 0
        elif unchanged > 0:
            entries = context.entries
            n = len(entries)  # sum the shorter side: the kept prefix, or what changed after it
            kept = (sum(e.chars for e in entries[:unchanged]) if unchanged < n - unchanged
                    else context.chars_sum - sum(e.chars for e in entries[unchanged:]))
            prefix = list_chars(kept, unchanged)
            read = round(tokens * prefix / context.chars) if self.exact else self.estimator.tokens(prefix)
            read = min(read, tokens, self.sent_tokens)
        else:
            read = min(self.estimator.overhead_tokens, tokens)  # system prompt and tools stay cached
        return read, tokens - read

    def sent(self, messages: int, tokens: int) -> None:
        self.calls += 1
        self.sent_messages, self.sent_tokens = messages, tokens


@dataclass
class Priced:
    """What pricing a run's calls gives beside each record's ``input_cost_usd``: the raw
    baseline's cost, and both without caching."""

    raw: float = 0.0
    nocache: float = 0.0
    raw_nocache: float = 0.0
    ttl: str = "5m"
    #: calls made after the cache had expired (None: the source has no timestamps, no expiry)
    expired: int | None = None


#: a cache entry's lifetime after its last read or write, by TTL
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def price_calls(records: list, prices: ModelPrices | Callable[[Any, float | None], ModelPrices],
                models: list[str | None] | None = None, times: list[float | None] | None = None,
                ttl: str = "5m") -> Priced:
    """Price each call at its model and time (``models[i]`` and ``times[i]``, priced by
    ``prices(model, time)``; or every call at one model's ``prices``): set each record's ``input_cost_usd`` from its cache reads and writes
    (writes at the ``ttl``'s rate), and price the raw baseline (the whole history every call, its
    previous call's prompt read from the cache). Nothing is read from the cache, in the policy's
    context and in the raw one alike, by a call on another model than the previous one (the
    prompt cache is per model), nor by one made more than ``ttl`` after the previous one
    (``times[i]``, seconds; where both are known: a source without timestamps never expires)."""
    priced = Priced(ttl=ttl, expired=0 if times and any(t is not None for t in times) else None)
    lifetime = TTL_SECONDS[ttl]
    prev_raw = 0
    prev_model: Any = None
    for i, r in enumerate(records):  # in call order, as the costs of a recording add up
        model = models[i] if models else None
        p = prices(model, times[i] if times else None) if callable(prices) else prices
        expired = bool(i and times and times[i] is not None and times[i - 1] is not None
                       and times[i] - times[i - 1] > lifetime)
        if expired:
            priced.expired = (priced.expired or 0) + 1
        if i and (model != prev_model or expired):  # an empty cache: the whole prompt is written
            r.cache_read_tokens, r.cache_write_tokens, prev_raw = 0, r.tokens, 0
        prev_model = model
        r.input_cost_usd = p.input_cost(r.cache_read_tokens, r.cache_write_tokens, ttl)
        raw_read = min(prev_raw, r.raw_tokens)
        priced.raw += p.input_cost(raw_read, r.raw_tokens - raw_read, ttl)
        priced.nocache += p.nocache_cost(r.tokens)
        priced.raw_nocache += p.nocache_cost(r.raw_tokens)
        prev_raw = r.raw_tokens
    return priced


@dataclass
class Recorded:
    """What the recording's usage fields imply its calls were billed, at list prices."""

    input: float = 0.0
    output: float = 0.0


def recorded_cost(records: list, usage: dict[int, dict[str, Any]],
                  prices_of: Callable[[str | None, Any], ModelPrices]) -> Recorded | None:
    """The input and output cost the recording's usage fields imply, each call priced at the model
    and time it recorded (``prices_of(model, timestamp)``; None where the call names none); None
    without usage."""
    if not usage:
        return None
    total = Recorded()
    for r in records:
        u = usage.get(r.message_index)
        if u is not None:
            p = prices_of(u.get("model"), u.get("timestamp"))
            total.input += p.recorded_input_cost(u)
            total.output += p.recorded_output_cost(u)
    return total
