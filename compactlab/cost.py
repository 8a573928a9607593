"""Prices (data) and the cache-aware cost model (SPEC §7).

With prompt caching, the part of a call's prompt that is unchanged since the previous call (the
prefix before the first message anything changed) is a cache read, the rest a cache write; so a
policy that rewrites old messages pays cache writes on every call it does so. Summary calls are
billed at their own input and output, uncached. The recorded replies' output is the same under
every policy and left out.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from .errors import InputError, UsageError
from .files import read_regular_text
from .sizing import TokenEstimator, list_chars

MTOK = 1_000_000


@dataclass(frozen=True)
class ModelPrices:
    """USD per million tokens."""

    model: str
    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    read: str  # when the prices were read
    known: bool = True

    def input_cost(self, read_tokens: int, write_tokens: int, ttl: str = "5m") -> float:
        """Cache reads, and cache writes at the rate of their TTL (``5m`` or ``1h``)."""
        write = self.cache_write_1h if ttl == "1h" else self.cache_write_5m
        return (read_tokens * self.cache_read + write_tokens * write) / MTOK

    def nocache_cost(self, tokens: int) -> float:
        return tokens * self.input / MTOK

    def summary_cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / MTOK

    def recorded_input_cost(self, usage: dict[str, Any]) -> float:
        """What a call's recorded usage was billed for its input: uncached input, cache reads,
        and cache writes each at its TTL's rate (``cache_creation_1h_input_tokens`` of them at the
        1-hour rate, the rest at the 5-minute one)."""
        one_hour = usage.get("cache_creation_1h_input_tokens", 0)
        return (usage.get("input_tokens", 0) * self.input
                + (usage.get("cache_creation_input_tokens", 0) - one_hour) * self.cache_write_5m
                + one_hour * self.cache_write_1h
                + usage.get("cache_read_input_tokens", 0) * self.cache_read) / MTOK


@dataclass(frozen=True)
class PriceTable:
    """A price table: per model, what input, output and the cache cost (USD per million tokens)."""

    read: str
    default_model: str
    models: dict[str, dict]

    def lookup(self, model: str | None) -> ModelPrices:
        """Prices for ``model`` (exact, or with a date suffix such as -20250929 dropped, or the
        longest known prefix); an unknown model gets the default's prices, marked unknown."""
        name = model or self.default_model
        key = self._match(name)
        known = key is not None
        row = self.models[key if known else self.default_model]
        base = row["input"]
        return ModelPrices(
            model=name,
            input=base,
            output=row["output"],
            cache_write_5m=row.get("cache_write_5m", base * 1.25),
            cache_write_1h=row.get("cache_write_1h", base * 2.0),
            cache_read=row.get("cache_read", base * 0.1),
            read=self.read,
            known=known,
        )

    def _match(self, name: str) -> str | None:
        if name in self.models:
            return name
        stripped = re.sub(r"-\d{8}$|@\d{8}$|-latest$", "", name.split("/")[-1])
        if stripped in self.models:
            return stripped
        prefixes = [k for k in self.models if stripped.startswith(k)]
        return max(prefixes, key=len) if prefixes else None


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


def price_calls(records: list, prices: ModelPrices | Callable[[Any], ModelPrices],
                models: list[str | None] | None = None, times: list[float | None] | None = None,
                ttl: str = "5m") -> Priced:
    """Price each call at its model (``models[i]``, priced by ``prices(model)``; or every call at
    one model's ``prices``): set each record's ``input_cost_usd`` from its cache reads and writes
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
        p = prices(model) if callable(prices) else prices
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


def recorded_cost(records: list, usage: dict[int, dict[str, Any]],
                  prices_of: Callable[[str | None], ModelPrices]) -> float | None:
    """The input cost the recording's usage fields imply, each call priced at the model it
    recorded (``prices_of(model)``; None where the call names none); None without usage."""
    if not usage:
        return None
    total = 0.0
    for r in records:
        u = usage.get(r.message_index)
        if u is not None:
            total += prices_of(u.get("model")).recorded_input_cost(u)
    return total


def _package_file(relative: str) -> str:
    here = Path(__file__).parent / relative
    if here.is_file():
        return here.read_text(encoding="utf-8")
    from importlib import resources  # a zipped install

    return resources.files("compactlab").joinpath(relative).read_text(encoding="utf-8")


def load_prices(path: str | None = None) -> PriceTable:
    try:
        if path is None:
            text = _package_file("data/prices.toml")
        else:
            text = read_regular_text(path, "--prices")
        data = tomllib.loads(text)
        models = data["models"]
        for name, row in models.items():
            for key in ("input", "output"):
                if not isinstance(row, dict) or not isinstance(row.get(key), (int, float)):
                    raise UsageError(f"{path}: models.{name}.{key} must be a number")
        table = PriceTable(read=str(data.get("read", "unknown")), default_model=data.get("default_model", next(iter(models))),
                           models=models)
    except InputError as exc:
        raise UsageError(exc.message) from None
    except (OSError, tomllib.TOMLDecodeError, KeyError, StopIteration) as exc:
        raise UsageError(f"{path or 'prices.toml'}: not a usable price table: {exc}") from None
    if table.default_model not in table.models:
        raise UsageError(f"{path}: default_model {table.default_model!r} has no prices")
    return table
