"""The cache-aware cost model (SPEC §7); the prices themselves are ``prices``'.

With prompt caching, the part of a call's prompt that is unchanged since the previous call (the
prefix before the first message anything changed) is a cache read, the rest a cache write; so a
policy that rewrites old messages pays cache writes on every call it does so. Summary calls are
billed at their own input and output, uncached. The recorded replies' output is the same under
every policy and left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

from ...plain import NamedTuple, dataclass
from .cache_rules import RULES, CacheRules, rules_for, uncached_as_recorded
from .prices import ModelPrices, PriceTable, load_prices
from ..sizing import TokenEstimator, list_chars
from ...core import in_use


class PromptCache:
    """The prompt-cache prefix model: the part of a call's prompt unchanged since the previous
    call was sent is read from the cache, the rest is written.

    The first call reads nothing. A call whose context changed from its first message (a summary
    without ``keep_head``, a recorded compaction's restart) still reads the overhead (system
    prompt and tools, which no layer touches); one after a prompt of no message (a recording that
    opens with the model's reply) reads all of that prompt. Otherwise the unchanged prefix, in tokens (by the
    estimate, or in proportion of the exact count), is read, never more than the previous call
    sent. ``sent`` is told what each call sent.
    """

    def __init__(self, estimator: TokenEstimator, exact: bool = False, rules: CacheRules = RULES["anthropic"]) -> None:
        self.estimator = estimator
        self.exact = exact  # tokens are exact counts: the prefix is their share by chars
        self.rules = rules  # the provider's (cache_rules.py): whether the reply is cached, steps, minimum
        self.calls = 0
        self.sent_messages = 0  # messages of the context last sent
        self.sent_tokens = 0
        self.reply_tokens = 0  # of the reply to the context last sent
        self.replies: list[int] = []  # each call's reply, estimated (the caches that keep it)

    def unchanged(self, lowest_changed: int | None) -> int:
        """How many leading messages are as they were sent last time (and the reply to them, where
        the provider caches it)."""
        cached = self.sent_messages + (1 if self.rules.reply_cached and self.calls else 0)
        return cached if lowest_changed is None else min(cached, lowest_changed)

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
            read = min(read, tokens, self.sent_tokens + (self.reply_tokens if unchanged > self.sent_messages else 0))
        elif self.sent_messages == 0:  # (the last prompt held no message: all of it, the system prompt and
            read = min(self.sent_tokens, tokens)  # tools, is this one's start, as the raw history reads it)
        else:
            read = min(self.estimator.overhead_tokens, tokens)  # system prompt and tools stay cached
        read = self.rules.read(read)
        return read, tokens - read

    def sent(self, messages: int, tokens: int, reply_chars: int = 0) -> None:
        self.calls += 1
        self.sent_messages, self.sent_tokens = messages, tokens
        self.reply_tokens = round(reply_chars / self.estimator.chars_per_token) if reply_chars else 0
        self.replies.append(self.reply_tokens)

    def at_call(self, at: Any, context: Any) -> CacheRow:
        """The prompt cache as a measure (``measures.base.Measure``), told each call's facts once:
        what ``at`` (``measures.CallAt``: the first message a layer changed, the tokens sent, the
        recorded reply's characters) and ``context`` say; the call's reads and writes."""
        read, write = self.account(context, self.unchanged(at.changed_from), at.tokens)
        self.sent(len(context), at.tokens, at.reply_chars)
        return CacheRow(read, write)

    def finish(self) -> CacheTotal:
        return CacheTotal()


class NativePromptCache:
    """``PromptCache`` on the native core (``compactlab/core.py``; #59): the same model, its state in
    Rust, told at each call only the characters of the messages it does not know yet (those from
    the first changed one, or from the end of the context it last sent). A differential test holds
    it to ``PromptCache`` on every shared recording and preset (``tests/engine/test_native_core.py``)."""

    __slots__ = ("_core", "estimator", "exact")

    def __init__(self, estimator: TokenEstimator, exact: bool = False, rules: CacheRules = RULES["anthropic"]) -> None:
        from ...core import native_module

        native = native_module()
        if native is None:
            raise RuntimeError("the native core is not built")  # (core.chosen() says so to the user first)
        self._core = native.PromptCache(estimator.chars_per_token, estimator.overhead_tokens, exact, rules)
        self.estimator, self.exact = estimator, exact

    @property
    def rules(self) -> CacheRules:
        rules: CacheRules = self._core.rules  # (the CacheRules last set, given back as set)
        return rules

    @rules.setter
    def rules(self, rules: CacheRules) -> None:
        self._core.rules = rules

    @property
    def core(self) -> Any:
        """The model in Rust (``_native.PromptCache``), for the native measures that tell it each call."""
        return self._core

    @property
    def sent_tokens(self) -> int:
        return int(self._core.sent_tokens)

    @property
    def replies(self) -> list[int]:
        return list(self._core.replies)

    def at_call(self, at: Any, context: Any) -> CacheRow:
        core = self._core
        start = min(at.changed_from, core.known())
        read, write = core.at_call(at.changed_from, at.tokens, at.reply_chars, start,
                                   [e.chars for e in context.entries[start:]])
        return CacheRow(read, write)

    def finish(self) -> CacheTotal:
        return CacheTotal()


class CacheTotal(NamedTuple):
    """The prompt cache adds nothing to the summary here: the run's pricing does (``price_run``)."""


class CacheRow(NamedTuple):
    """A call's prompt-cache reads and writes, as the prefix model gives them (``TurnRecord``'s
    columns; pricing replays the recording's cache events over them at the end)."""

    cache_read_tokens: int
    cache_write_tokens: int


class Priced:
    """What pricing a run's calls gives beside each record's ``input_cost_usd``: the raw
    baseline's cost, and both without caching. (A plain class, as ``Recorded``.)"""

    __slots__ = ("raw", "nocache", "raw_nocache", "ttl", "expired")

    def __init__(self, ttl: str = "5m", expired: int | None = None) -> None:
        self.raw = self.nocache = self.raw_nocache = 0.0
        self.ttl = ttl
        #: calls made after the cache had expired (None: the source has no timestamps, no expiry)
        self.expired = expired


#: a cache entry's lifetime after its last read or write, by TTL
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def price_calls(records: list, prices: ModelPrices | Callable[[Any, float | None], ModelPrices],
                models: list[str | None] | None = None, times: list[float | None] | None = None,
                ttl: str = "5m", breaks: dict[int, int] | None = None, rules: CacheRules = RULES["anthropic"],
                reply_tokens: list[int] | None = None, expected: dict[int, int] | None = None,
                looked_up: tuple[list[ModelPrices], list[int]] | None = None) -> Priced:
    """Price each call at its model and time (``models[i]`` and ``times[i]``, priced by
    ``prices(model, time)``; or every call at one model's ``prices``): set each record's ``input_cost_usd`` from its cache reads and writes
    (writes at the ``ttl``'s rate), and price the raw baseline (the whole history every call, its
    previous call's prompt read from the cache). Nothing is read from the cache, in the policy's
    context and in the raw one alike, by a call on another model than the previous one (the
    prompt cache is per model), nor by one made more than ``ttl`` after the previous one
    (``times[i]``, seconds; where both are known: a source without timestamps never expires).
    ``breaks``: recorded cache events replayed (call -> the tokens it read: see
    ``recorded_breaks``), in both contexts: a later call reads no more than that, the first call
    reads that much (the system prompt an earlier session had cached). ``rules``: the provider's
    cache (its entries' lifetime; the raw history reads the previous reply too where the provider
    caches it, ``reply_tokens[i]`` being call i's reply). Under such a provider's rules a break is
    what the cache missed: call i reads ``expected[i] - breaks[i]`` less than the model says (the
    recording's own expectation, ``expected_reads``), so that the estimate's error stays out of it;
    a whole miss (a break that read nothing) reads nothing. Under no cache (``rules.caches``
    False) every prompt is at the input price. On the native core the loop is Rust's
    (``_native.price_calls``, the same operations in the same order: ``price_calls_in_python`` is
    its reference; ``looked_up``: the calls' prices as ``prices_looked_up`` gives them, where the
    caller has them)."""
    native = in_use()
    if native is None:
        return price_calls_in_python(records, prices, models, times, ttl, breaks, rules, reply_tokens, expected)
    n = len(records)
    table, index = looked_up or prices_looked_up(prices, models, times, n)
    ids: dict[Any, int] = {}
    raw, nocache, raw_nocache, expired = native.price_calls(
        records if type(records) is list else list(records), [_rates(p) for p in table], index,
        [None if m is None else ids.setdefault(m, len(ids)) for m in models[:n]] if models else [],
        times[:n] if times else [], ttl == "1h", breaks or {}, expected or {}, _rules_arg(rules, ttl),
        reply_tokens or [])
    priced = Priced(ttl=ttl, expired=expired)
    priced.raw, priced.nocache, priced.raw_nocache = raw, nocache, raw_nocache
    return priced


def prices_looked_up(prices: ModelPrices | Callable[[Any, float | None], ModelPrices], models: list | None,
                     times: list | None, n: int) -> tuple[list[ModelPrices], list[int]]:
    """The distinct prices of ``n`` calls and each call's among them (``price_calls``' look-ups, as
    the native pricing takes them; empty: every call at the first). On the native core the loop is
    Rust's, asking ``prices`` once for each distinct model and time of a call
    (``_native.prices_looked_up``; ``prices_looked_up_in_python`` is its reference)."""
    if not callable(prices):
        return [prices], []
    native = in_use()
    if native is not None:
        table, index = native.prices_looked_up(prices, models or None, times or None, n)
        return table, index
    return prices_looked_up_in_python(prices, models, times, n)


def prices_looked_up_in_python(prices: Callable[[Any, float | None], ModelPrices], models: list | None,
                               times: list | None, n: int) -> tuple[list[ModelPrices], list[int]]:
    """``prices_looked_up`` in Python: every call's prices asked, told apart by value."""
    table: list[ModelPrices] = []
    index: list[int] = []
    # (by value: a look-up at each call's own time may make each call an equal object of its own)
    seen: dict[ModelPrices, int] = {}
    for i in range(n):
        p = prices(models[i] if models else None, times[i] if times else None)
        k = seen.get(p)
        if k is None:
            k = seen[p] = len(table)
            table.append(p)
        index.append(k)
    return table, index


def _rates(p: ModelPrices) -> tuple:
    """A model's prices as the native pricing takes them: its rates and its tiers'."""
    def rates(q: ModelPrices) -> tuple[float, float, float, float, float]:
        return (float(q.input), float(q.cache_read), float(q.cache_write_5m), float(q.cache_write_1h),
                float(q.output))

    return rates(p), [(start, rates(q)) for start, q in p.tiers]


def _rules_arg(rules: CacheRules, ttl: str = "5m") -> tuple[bool, bool, int, int, float]:
    """A provider's cache as the native pricing takes it, its entries' lifetime the ``ttl``'s where
    the rules give none."""
    return rules.caches, rules.reply_cached, rules.granularity, rules.minimum, rules.lifetime or TTL_SECONDS[ttl]


def price_calls_in_python(records: list, prices: ModelPrices | Callable[[Any, float | None], ModelPrices],
                          models: list[str | None] | None = None, times: list[float | None] | None = None,
                          ttl: str = "5m", breaks: dict[int, int] | None = None,
                          rules: CacheRules = RULES["anthropic"], reply_tokens: list[int] | None = None,
                          expected: dict[int, int] | None = None) -> Priced:
    """``price_calls`` in Python: the reference of the native loop, and the loop of the python core."""
    priced = Priced(ttl=ttl, expired=0 if times and any(t is not None for t in times) else None)
    lifetime = rules.lifetime or TTL_SECONDS[ttl]
    prev_raw = 0
    prev_model: Any = None
    for i, r in enumerate(records):  # in call order, as the costs of a recording add up
        model = models[i] if models else None
        p = prices(model, times[i] if times else None) if callable(prices) else prices
        expired = bool(i and times and _apart(times[i - 1], times[i]) > lifetime)
        if expired:
            priced.expired = (priced.expired or 0) + 1
        if i and (model != prev_model or expired):  # an empty cache: the whole prompt is written
            r.cache_read_tokens, r.cache_write_tokens, prev_raw = 0, r.tokens, 0
        prev_model = model
        kept = breaks.get(i) if breaks else None
        read = _as_recorded(i, r.cache_read_tokens, r.tokens, kept, expected)
        r.cache_read_tokens, r.cache_write_tokens = read, r.tokens - read
        nocache, raw_nocache = p.nocache_cost(r.tokens), p.nocache_cost(r.raw_tokens)
        if not rules.caches:  # no prompt cache: every prompt at the input price
            r.cache_read_tokens, r.cache_write_tokens = 0, r.tokens
            r.input_cost_usd, raw_cost = nocache, raw_nocache
        else:
            r.input_cost_usd = p.input_cost(r.cache_read_tokens, r.cache_write_tokens, ttl)
            # the raw history reads the previous call's prompt (and reply), then the same recorded
            # events apply to it by the same rule as to the policy's context
            reply = reply_tokens[i - 1] if rules.reply_cached and reply_tokens and i and prev_raw else 0
            raw_read = _as_recorded(i, rules.read(min(prev_raw + reply, r.raw_tokens)), r.raw_tokens, kept, expected)
            raw_cost = p.input_cost(raw_read, r.raw_tokens - raw_read, ttl)
        priced.raw += raw_cost
        priced.nocache += nocache
        priced.raw_nocache += raw_nocache
        prev_raw = r.raw_tokens
    return priced


def _as_recorded(i: int, read: int, tokens: int, kept: int | None, expected: dict[int, int] | None) -> int:
    """What call ``i`` reads of a prompt of ``tokens`` it would read ``read`` of, once the recorded
    cache event at it (``kept``: the tokens the recording read there; None: no event) is replayed:
    one rule for the policy's context and the raw history alike, so that a policy that changes
    nothing costs what no compaction costs. Under an automatic cache (``expected``: what the
    provider's rules predict each call reads) the event is what the cache missed, taken off
    ``read``; a whole miss reads nothing; elsewhere no more than ``kept`` is read. Call 0 reads what
    it recorded (a warm start: the system prompt an earlier session had cached)."""
    if kept is None:
        return read
    if kept and i and expected and i in expected:  # the provider missed a part
        kept = max(read - max(expected[i] - kept, 0), 0)
    return min(kept, tokens) if read > kept or i == 0 else read


class Recorded:
    """What the recording's usage fields imply its calls were billed, at list prices."""

    __slots__ = ("input", "output")

    def __init__(self, input: float = 0.0, output: float = 0.0) -> None:  # noqa: A002 (the bill's words)
        self.input, self.output = input, output


def recorded_cost(records: list, usage: dict[int, dict[str, Any]],
                  prices_of: Callable[[str | None, Any], ModelPrices]) -> Recorded | None:
    """The input and output cost the recording's usage fields imply, each call priced at the model
    and time it recorded (``prices_of(model, timestamp)``; None where the call names none); None
    without usage."""
    if not usage:
        return None
    return recorded_of((u for r in records if (u := usage.get(r.message_index)) is not None), prices_of)


def _recorded_cost(records: list, usage: dict[int, dict[str, Any]], prices_of: Callable[[str | None, Any], ModelPrices],
                   calls_usage: list[dict[str, Any]], looked_up: tuple[list[ModelPrices], list[int]] | None
                   ) -> Recorded | None:
    """``recorded_cost``, on the native core from the calls' prices as ``prices_looked_up`` gave
    them (``looked_up``: the same look-ups, each call at its model and time): the same sums in the
    same order (``_native.recorded_cost``; Python reads usage that is not plain whole counts, or a
    time not written as text)."""
    native = in_use()
    if usage and looked_up is not None and native is not None:
        table, index = looked_up
        found = native.recorded_cost(calls_usage, [_rates(p) for p in table], index)
        if found is not None:
            return Recorded(*found)
    return recorded_cost(records, usage, prices_of)


def recorded_of(usages: Iterable[dict[str, Any]], prices_of: Callable[[str | None, Any], ModelPrices]) -> Recorded:
    """The input and output cost of recorded usage objects, each at the model and time it names."""
    total = Recorded()
    for u in usages:
        p = prices_of(u.get("model"), u.get("timestamp"))
        total.input += p.recorded_input_cost(u)
        total.output += p.recorded_output_cost(u)
    return total


#: a call whose recorded cache read is under this share of the previous call's prompt, with
#: nothing to explain it, is a recorded cache break. A call after an unchanged prefix reads the
#: previous prompt within a few tokens (25,798 of 25,801 on spotter/tool_heavy); a harness that
#: rewrote its prompt reads its system prompt alone (18,014 of 26,007 there, 69%: under 0.5, the
#: share used before 2026-11, it went unseen and the model was 31% off)
BREAK_SHARE = 0.9


def _apart(before: float | None, now: float | None) -> float:
    """Seconds between two calls' times; 0 where either is unknown (a cache never expires then)."""
    return now - before if now is not None and before is not None else 0.0


def recorded_breaks(calls_usage: list[dict[str, Any]], times: list[float | None] | None, ttl: str,
                    restarted: set[int], rules: CacheRules = RULES["anthropic"],
                    expected: dict[int, int] | None = None) -> dict[int, int]:
    """``recorded_breaks_in_python``, the reference, on the native core where it runs
    (``_native.recorded_breaks``: the same calls, in the same order; Python reads usage that is
    not plain whole counts)."""
    native = in_use()
    if native is not None and type(calls_usage) is list:
        found = native.recorded_breaks(calls_usage, times, restarted if type(restarted) is set else set(restarted),
                                       _rules_arg(rules, ttl), expected)
        if found is not None:
            return found
    return recorded_breaks_in_python(calls_usage, times, ttl, restarted, rules, expected)


def recorded_breaks_in_python(calls_usage: list[dict[str, Any]], times: list[float | None] | None, ttl: str,
                              restarted: set[int], rules: CacheRules = RULES["anthropic"],
                              expected: dict[int, int] | None = None) -> dict[int, int]:
    """Prefix rewrites the recording shows and no compaction explains: calls (index -> the tokens
    they still read) on the same model as the previous one, within the cache's lifetime, and not
    just after a recorded compaction (``restarted``), that read less than the provider's rules
    predict: under Anthropic's, less than ``BREAK_SHARE`` of the previous call's prompt (the
    harness changed something early in its prompt); under the automatic caches' (the previous prompt and reply,
    in steps), a step or more less than that (the provider's cache missed in part). And call 0
    where it read from the cache: a warm start (the system prompt and tools an earlier session
    cached). ``expected``: ``expected_reads(calls_usage, rules)``, where the caller has it."""
    out: dict[int, int] = {}
    if not rules.caches:  # nothing cached: nothing to break
        return out
    if rules.reply_cached and expected is None:
        expected = expected_reads(calls_usage, rules)
    if calls_usage and calls_usage[0].get("cache_read_input_tokens", 0) > 0:
        out[0] = int(calls_usage[0]["cache_read_input_tokens"])
    lifetime = rules.lifetime or TTL_SECONDS[ttl]
    for i in range(1, len(calls_usage)):
        u, prev = calls_usage[i], calls_usage[i - 1]
        if u and not prev and i not in restarted and _missed_whole(u, rules):
            out[i] = 0  # (after calls that recorded no usage: nothing to expect, but a read of nothing is a miss)
            continue
        if not u or not prev or i in restarted or u.get("model") != prev.get("model"):
            continue
        if times and _apart(times[i - 1], times[i]) > lifetime:
            continue
        before, read = prompt_of(prev), u.get("cache_read_input_tokens", 0)
        if expected is not None:  # (the automatic caches': reply_cached)
            if read <= expected[i] - max(rules.granularity, 1):
                out[i] = int(read)
        elif before and read < BREAK_SHARE * before:
            out[i] = int(read)
    return out


def _missed_whole(usage: dict[str, Any], rules: CacheRules) -> bool:
    """Whether a call under an automatic cache read nothing of a prompt it would have read from."""
    return rules.reply_cached and not usage.get("cache_read_input_tokens") and prompt_of(usage) >= rules.minimum


def expected_reads(calls_usage: list[dict[str, Any]], rules: CacheRules) -> dict[int, int]:
    """``expected_reads_in_python``, the reference, on the native core where it runs
    (``_native.expected_reads``)."""
    native = in_use()
    if native is not None and type(calls_usage) is list:
        found = native.expected_reads(calls_usage, _rules_arg(rules))
        if found is not None:
            return found
    return expected_reads_in_python(calls_usage, rules)


def expected_reads_in_python(calls_usage: list[dict[str, Any]], rules: CacheRules) -> dict[int, int]:
    """What each call would have read under ``rules`` by its recorded sizes: the previous call's
    prompt and reply (where the provider caches the reply), in the provider's steps."""
    out = {}
    for i in range(1, len(calls_usage)):
        u, prev = calls_usage[i], calls_usage[i - 1]
        if u and prev:
            reply = int(prev.get("output_tokens", 0)) if rules.reply_cached else 0
            out[i] = rules.read(min(prompt_of(prev) + reply, prompt_of(u)))
    return out


def prompt_of(usage: dict[str, Any]) -> int:
    return int(usage.get("input_tokens", 0) + usage.get("cache_creation_input_tokens", 0)
               + usage.get("cache_read_input_tokens", 0))


def cache_ledger(records: list, calls_usage: list[dict[str, Any]], recorded_input: float) -> dict[str, Any]:
    """The modelled cache reads and writes against the recorded ones, over the calls that recorded
    usage, and the modelled input cost against the recorded one: how right the model of the
    harness's caching is (for a run that sent what the recording sent). On the native core its sums
    are Rust's (``_native.cache_ledger``: the same sums in the same order; Python reads records of
    another class and usage that is not plain whole counts); ``cache_ledger_in_python`` is the
    reference."""
    native = in_use()
    sums = (native.cache_ledger(records, calls_usage) if native is not None and type(records) is list
            and type(calls_usage) is list else None)
    if sums is None:
        return cache_ledger_in_python(records, calls_usage, recorded_input)
    calls, modelled_read, read, modelled_write, write, cost, per_call = sums
    return _ledger(calls, modelled_read, read, modelled_write, write, cost if calls else 0, recorded_input,
                   per_call)


def cache_ledger_in_python(records: list, calls_usage: list[dict[str, Any]], recorded_input: float) -> dict[str, Any]:
    """``cache_ledger`` in Python."""
    pairs = [(r, u) for r, u in zip(records, calls_usage) if u]
    modelled_read = sum(r.cache_read_tokens for r, _ in pairs)
    modelled_write = sum(r.cache_write_tokens for r, _ in pairs)
    read = sum(int(u.get("cache_read_input_tokens", 0)) for _, u in pairs)
    write = sum(int(u.get("cache_creation_input_tokens", 0) + u.get("input_tokens", 0)) for _, u in pairs)
    cost = sum(r.input_cost_usd for r, _ in pairs)
    return _ledger(len(pairs), modelled_read, read, modelled_write, write, cost, recorded_input,
                   [[r.call, r.cache_read_tokens, int(u.get("cache_read_input_tokens", 0))] for r, u in pairs])


def _ledger(calls: int, modelled_read: int, read: int, modelled_write: int, write: int, cost: float,
            recorded_input: float, per_call: list[list[int]]) -> dict[str, Any]:
    """The cache ledger of its sums: each modelled figure's error against the recorded one."""
    def error(modelled: float, recorded: float) -> float | None:
        return round(modelled / recorded - 1, 4) if recorded else None

    return {"calls": calls, "modelled_read_tokens": modelled_read, "recorded_read_tokens": read,
            "modelled_write_tokens": modelled_write, "recorded_write_tokens": write,
            "read_error": error(modelled_read, read), "write_error": error(modelled_write, write),
            "cost_error": error(cost, recorded_input), "modelled_input_cost_usd": cost,
            #: per call: [call, modelled read, recorded read] (the cached tokens, call by call)
            "per_call": per_call}


def billed(metadata: dict[str, Any]) -> float | None:
    """What the source recorded it was billed (mini-swe-agent and SWE-agent: ``instance_cost``;
    0 there means not recorded)."""
    stats = metadata.get("model_stats")
    cost = stats.get("instance_cost") if isinstance(stats, dict) else None
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost > 0 else None


def recorded_total(transcript: Any, table: PriceTable | None = None) -> float | None:
    """What a recording's usage implies it was billed, input and output, each call at the model and
    time it recorded (its inline subagents' calls included); None without usage. What a session
    left out of a replay (a subagent's file) still cost: this says how much."""
    usage = [*transcript.usage.values(), *(transcript.metadata.get("sidechain_usage") or ())]
    if not usage:
        return None
    prices = table or load_prices()
    total = recorded_of(usage, lambda model, when: prices.lookup(model or transcript.model, seconds(when)))
    return total.input + total.output


def seconds(timestamp: Any) -> float | None:
    """An ISO 8601 time as seconds, or None."""
    return _parsed(timestamp) if isinstance(timestamp, str) else None


@lru_cache(maxsize=1 << 16)
def _parsed(timestamp: str) -> float | None:
    """(Each recorded time parsed once a process: a corpus job prices every run of a transcript
    at the same calls' times.)"""
    from datetime import datetime

    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return None


@dataclass(eq=False, repr=False)
class RunPricing:
    """What pricing a run gave: the prices of the transcript's model and, by call, those its summary
    requests are priced at (the summarizer's model's, else the model and time of the call that made
    them: ``records.SummaryCalls``), the priced totals, the recorded costs, the bill a source recorded, the recorded cache breaks
    (call -> tokens still read) and the cache ledger (None unless the run sent what was sent)."""

    prices: ModelPrices
    summary_prices: dict[int, ModelPrices]
    priced: Priced
    recorded: Recorded | None
    billed: float | None
    breaks: dict[int, int]
    ledger: dict[str, Any] | None
    rules: CacheRules = RULES["anthropic"]
    #: what the recording's inline subagents (sidechains: another conversation, not replayed) were
    #: billed, at list prices, and how many calls they made; None where it has none
    sidechains: Recorded | None = None
    sidechain_calls: int = 0
    #: the models its calls were priced at, in the order first met (one model's prices for every
    #: call, ``--price-model``: none)
    models: tuple[str, ...] = ()


class _Prices:
    """A run's price look-ups: every call at one model's prices (``--price-model``), or at the
    model and time each names in a table (loaded on first use), memoised; a call that names no
    time at the session's start."""

    def __init__(self, prices: ModelPrices | PriceTable | None, model: str | None, started_at: float | None) -> None:
        self.forced = prices if isinstance(prices, ModelPrices) else None
        self.table = prices if isinstance(prices, PriceTable) else None
        self.model, self.started_at = model, started_at
        self.looked_up: dict[tuple[Any, Any], ModelPrices] = {}

    def lookup(self, model: str | None, when: float | None) -> ModelPrices:
        if self.table is None:
            self.table = load_prices()
        return self.table.lookup(model, when)

    def times_asked(self, models: list | None, times: list | None) -> list | None:
        """Each call's time as its prices are looked up at (``prices_looked_up``): None (the
        session's start) for a call whose model's prices are the same at every time, so that a
        run's calls on it are looked up once, not once a call's time. The prices looked up are the
        ones each call's own time gives."""
        if self.forced is not None or not times:
            return times
        if self.table is None:
            self.table = load_prices()
        table = self.table
        timeless = {m: table.timeless(m or self.model) for m in set(models or (None,))}
        if models:
            return [None if timeless[m] else t for m, t in zip(models, times)] + list(times[len(models):])
        return None if timeless[None] else times

    def __call__(self, model: str | None, when: Any = None) -> ModelPrices:
        if self.forced is not None:
            return self.forced
        at = seconds(when) if isinstance(when, str) else when
        key = (model or self.model, self.started_at if at is None else at)
        found = self.looked_up.get(key)
        if found is None:
            found = self.looked_up[key] = self.lookup(*key)
        return found


def _calls_of(at: tuple[int, ...], feed: Any) -> tuple[list[dict[str, Any]], list | None, list | None, float | None]:
    """Each call's recorded usage, model and time, and the session's start (``at``: each call's
    message index): the same for every run of a recording (kept in ``feed.memo``: a corpus job
    replays it once a policy)."""
    facts = feed.memo.get(("calls", at))
    if facts is None:
        usage = feed.usage
        calls_usage = [usage.get(i) or {} for i in at] if usage else []
        native = in_use()  # (the form recordings write read natively: ``_native.times_of``)
        times = (native.times_of(calls_usage, seconds) if native is not None and type(calls_usage) is list
                 else [seconds(u.get("timestamp")) for u in calls_usage]) or None
        facts = feed.memo["calls", at] = (calls_usage, [u.get("model") or feed.model for u in calls_usage] or None,
                                          times, next((t for t in times or () if t is not None), None))
    return facts


def _by_table(feed: Any, key: tuple, prices: Any, make: Callable[[], Any]) -> Any:
    """``make()``, kept in ``feed.memo`` under ``key`` for runs priced by the same ``prices`` (the
    same object: the table or model a job prices every run by)."""
    held = feed.memo.get(key)
    if held is None or held[0] is not prices:
        held = feed.memo[key] = (prices, make())
    return held[1]


def _rules_of(calls_usage: list[dict[str, Any]], models: list | None, feed: Any, rules: CacheRules,
              rules_given: bool) -> tuple[CacheRules, CacheRules]:
    """(the rules the run is priced by, the recorded cache's own): the recorded model's provider,
    or none where the recording cached nothing (``uncached_as_recorded``); ``rules`` where given
    (``--cache-model``)."""
    own = rules_for(models[0] if models else feed.model) if rules_given else rules
    if uncached_as_recorded(calls_usage, own):
        own = RULES["none"]
    return (rules if rules_given else own), own


def restarted_calls(at: Sequence[int], positions: list[int]) -> set[int]:
    """The calls (by position, from 1) made just after a recorded compaction: those whose message
    index (``at``, each call's) is past a compaction's position that the previous call's was not
    (``_native.restarted`` on the native core: this is its reference)."""
    return {i for i in range(1, len(at)) if any(at[i - 1] < p <= at[i] for p in positions)}


def _cache_events(at: tuple[int, ...], feed: Any, calls_usage: list[dict[str, Any]], times: list | None, ttl: str,
                  rules: CacheRules, own: CacheRules) -> tuple[dict[int, int] | None, dict[int, int]]:
    """(the reads the provider's rules expect, the recorded breaks), once for every run of a
    recording (``at``: each call's message index); no breaks under another provider's cache than
    the recorded one (``--cache-model``)."""
    key = ("events", at, rules, own, ttl)
    events = feed.memo.get(key)
    if events is None:
        expected = expected_reads(calls_usage, rules) if rules.reply_cached else None
        breaks = {}
        if calls_usage and rules is own:  # (the calls just after a recorded compaction are not breaks)
            positions = [c.position for c in feed.compactions]
            native = in_use()
            restarted = (native.restarted(list(key[1]), positions) if native is not None
                         else restarted_calls(key[1], positions))
            breaks = recorded_breaks(calls_usage, times, ttl, restarted, rules, expected)
        events = feed.memo[key] = (expected, breaks)
    return events


def _summary_prices(prices_of: _Prices, summarizer_model: str | None, models: list | None, times: list | None,
                    calls: Iterable[int]) -> dict[int, ModelPrices]:
    """The prices each of ``calls``' summary requests is billed at: the summarizer's model's, else
    the call's own model's (the harness compacts on the model it is on), at the call's time."""
    def at(values: list | None, call: int) -> Any:
        return values[call] if values and call < len(values) else None

    return {call: prices_of(summarizer_model or at(models, call), at(times, call)) for call in calls}


def price_run(records: list, feed: Any, prices: ModelPrices | PriceTable | None, cache_ttl: str | None,
              keep_recorded_compactions: bool, summarizer_model: str | None, acted: bool,
              rules: CacheRules = RULES["anthropic"], reply_tokens: list[int] | None = None,
              rules_given: bool = False, summary_calls: Iterable[int] = ()) -> RunPricing:
    """Price a replayed run's records (``price_calls``) at the models and times the recording names
    (``prices``: a table, default the built-in one; or one model's prices for every call). With
    ``keep_recorded_compactions`` the run kept the recorded compactions; one that changed
    nothing (``acted`` False) of a recording whose compactions it kept gets the cache ledger. Unless
    ``rules_given`` (``--cache-model``), a recording whose harness cached nothing
    (``uncached_as_recorded``) is priced with no cache. The recorded cache breaks and warm start
    are replayed under any policy (no policy changes what the harness or the provider did), but
    not under another provider's cache than the recorded one. The calls of ``summary_calls`` made
    summary requests: each is priced at the summarizer's model (``summarizer_model``), else at that
    call's own model, at that call's time."""
    # (each call's message index: the key of what every run of a recording shares, in ``feed.memo``)
    at = tuple(r.message_index for r in records)
    calls_usage, models, times, started_at = _calls_of(at, feed)
    prices_of = _Prices(prices, feed.model, started_at)
    rules, own = _rules_of(calls_usage, models, feed, rules, rules_given)
    ttl = cache_ttl or ("1h" if any(u.get("cache_creation_1h_input_tokens") for u in calls_usage) else "5m")
    expected, breaks = _cache_events(at, feed, calls_usage, times, ttl, rules, own)
    # (the calls' prices and what the recording cost: the same for every run of a recording priced
    # by the same table, kept in ``feed.memo`` as the calls' facts are)
    looked_up = _by_table(feed, ("prices", at), prices,
                          lambda: prices_looked_up(prices_of, models, prices_of.times_asked(models, times),
                                                   len(records))) if in_use() else None
    priced = price_calls(records, prices_of, models, times, ttl, breaks, rules, reply_tokens, expected, looked_up)
    recorded = _by_table(feed, ("recorded", at), prices,
                         lambda: _recorded_cost(records, feed.usage, prices_of, calls_usage, looked_up))
    side = [u for u in feed.metadata.get("sidechain_usage") or () if isinstance(u, dict)]
    sent_as_recorded = not acted and (keep_recorded_compactions or not feed.compactions)
    return RunPricing(
        prices=prices_of.forced or prices_of.lookup(feed.model, started_at),
        summary_prices=_summary_prices(prices_of, summarizer_model, models, times, summary_calls),
        priced=priced, recorded=recorded, billed=billed(feed.metadata), breaks=breaks,
        ledger=cache_ledger(records, calls_usage, recorded.input) if recorded and sent_as_recorded else None,
        rules=rules, sidechains=recorded_of(side, prices_of) if side else None, sidechain_calls=len(side),
        models=() if prices_of.forced else tuple(dict.fromkeys(m for m in models or () if isinstance(m, str) and m)),
    )
