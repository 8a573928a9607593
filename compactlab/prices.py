"""Prices: what each call's tokens cost, in USD per million tokens, at the model and time it ran.

The default source is ``genai-prices`` (pydantic/genai-prices, a maintained price library, read
offline from the data it ships with: it knows 1-hour cache writes, long-context tiers and prices
by date), under a short table of corrections where its data is behind the vendor's published
prices (``data/price_corrections.toml``, each row with its source and the date it applies from).
``--prices FILE`` (the same TOML layout) is put in front of both: its models win, the others are
still found. A model none of them knows is priced as the default model and marked unknown (the
caller warns and names it).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .errors import InputError, UsageError
from .files import read_regular_text

MTOK = 1_000_000
DEFAULT_MODEL = "claude-sonnet-4-5"
#: when a call has no recorded time, it is priced as of this instant (noon UTC: no off-peak rate)
AS_OF = datetime(2026, 11, 26, 12, tzinfo=timezone.utc).timestamp()


@dataclass(frozen=True)
class ModelPrices:
    """USD per million tokens; ``tiers``: (tokens, prices) where a call whose input tokens are
    over ``tokens`` is billed wholly at ``prices`` (long-context pricing)."""

    model: str
    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    read: str  # where the prices come from
    known: bool = True
    tiers: tuple[tuple[int, ModelPrices], ...] = ()

    def at(self, input_tokens: int) -> ModelPrices:
        """The prices of a call with ``input_tokens`` input tokens in all."""
        for start, prices in reversed(self.tiers):
            if input_tokens > start:
                return prices
        return self

    def input_cost(self, read_tokens: int, write_tokens: int, ttl: str = "5m") -> float:
        """Cache reads, and cache writes at the rate of their TTL (``5m`` or ``1h``)."""
        p = self.at(read_tokens + write_tokens) if self.tiers else self
        write = p.cache_write_1h if ttl == "1h" else p.cache_write_5m
        return (read_tokens * p.cache_read + write_tokens * write) / MTOK

    def nocache_cost(self, tokens: int) -> float:
        return tokens * self.at(tokens).input / MTOK

    def summary_cost(self, input_tokens: int, output_tokens: int, calls: int = 1) -> float:
        """``calls`` summary calls, uncached, of ``input_tokens`` in all (tiered by their mean)."""
        p = self.at(input_tokens // max(calls, 1))
        return (input_tokens * p.input + output_tokens * p.output) / MTOK

    def recorded_output_cost(self, usage: dict[str, Any]) -> float:
        """What a call's recorded output tokens were billed (at the tier of its input)."""
        p = self.at(usage.get("input_tokens", 0) + usage.get("cache_creation_input_tokens", 0)
                    + usage.get("cache_read_input_tokens", 0)) if self.tiers else self
        return usage.get("output_tokens", 0) * p.output / MTOK

    def recorded_input_cost(self, usage: dict[str, Any]) -> float:
        """What a call's recorded usage was billed for its input: uncached input, cache reads,
        and cache writes each at its TTL's rate (``cache_creation_1h_input_tokens`` of them at the
        1-hour rate, the rest at the 5-minute one)."""
        one_hour = usage.get("cache_creation_1h_input_tokens", 0)
        fresh, written, read = (usage.get("input_tokens", 0), usage.get("cache_creation_input_tokens", 0),
                                usage.get("cache_read_input_tokens", 0))
        p = self.at(fresh + written + read)
        return (fresh * p.input + (written - one_hour) * p.cache_write_5m + one_hour * p.cache_write_1h
                + read * p.cache_read) / MTOK


@dataclass(frozen=True)
class _Period:
    since: float  # seconds since the epoch; -inf: always
    row: dict


class TomlPrices:
    """A price table in TOML: ``[models."name"]`` with ``input`` and ``output`` (and optionally
    ``cache_write_5m``, ``cache_write_1h``, ``cache_read``; by default Anthropic's rules: 1.25×,
    2× and 0.1× input), or ``[[models."name"]]`` periods each with ``since`` (an ISO date or time
    from which it applies). A model is found by its name, by its name without a date suffix or
    a ``provider/`` prefix, or by the longest name it starts with."""

    def __init__(self, text: str, source: str) -> None:
        try:
            data = tomllib.loads(text)
            models = data["models"]
            if not isinstance(models, dict) or not models:
                raise KeyError("models")
        except (tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
            raise UsageError(f"{source}: not a usable price table: {exc}") from None
        self.source = source
        self.read = str(data.get("read", "unknown"))
        self.default_model = data.get("default_model")
        self.periods: dict[str, list[_Period]] = {}
        for name, value in models.items():
            rows = value if isinstance(value, list) else [value]
            periods = []
            for row in rows:
                for key in ("input", "output"):
                    if not isinstance(row, dict) or not isinstance(row.get(key), (int, float)) \
                            or isinstance(row.get(key), bool) or not 0 <= row[key] < 1e6:
                        raise UsageError(f"{source}: models.{name}.{key} must be a price (USD per million tokens)")
                periods.append(_Period(_since(row.get("since"), source, name), row))
            self.periods[name] = sorted(periods, key=lambda p: p.since)

    def lookup(self, model: str, when: float) -> ModelPrices | None:
        key = self._match(model)
        if key is None:
            return None
        row = None
        for period in self.periods[key]:
            if period.since <= when:
                row = period.row
        if row is None:
            return None
        base = row["input"]
        return ModelPrices(model=model, input=base, output=row["output"],
                           cache_write_5m=row.get("cache_write_5m", base * 1.25),
                           cache_write_1h=row.get("cache_write_1h", base * 2.0),
                           cache_read=row.get("cache_read", base * 0.1), read=f"{self.source} ({self.read})")

    def _match(self, name: str) -> str | None:
        if name in self.periods:
            return name
        stripped = re.sub(r"-\d{8}$|@\d{8}$|-latest$", "", name.split("/")[-1])
        if stripped in self.periods:
            return stripped
        prefixes = [k for k in self.periods if stripped.startswith(k)]
        return max(prefixes, key=len) if prefixes else None


def _since(value: Any, source: str, name: str) -> float:
    if value is None:
        return float("-inf")
    try:
        when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    except ValueError:
        raise UsageError(f"{source}: models.{name}.since must be an ISO date or time, not {value!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


class GenaiPrices:
    """The prices of ``genai-prices``, from the data it was released with (no network)."""

    def __init__(self) -> None:
        from importlib.metadata import version

        from genai_prices import data_snapshot

        self.snapshot = data_snapshot.get_snapshot()
        self.read = f"genai-prices {version('genai-prices')}"
        self._models: dict[str, Any] = {}
        self._converted: dict[tuple[str, int], ModelPrices] = {}

    def __reduce__(self) -> tuple:  # to a dask worker: it loads the same data itself
        return GenaiPrices, ()

    def lookup(self, model: str, when: float) -> ModelPrices | None:
        info = self._find(model)
        if info is None:
            return None
        price = info.get_prices(datetime.fromtimestamp(when, timezone.utc))
        key = (model, id(price))
        if key not in self._converted:
            self._converted[key] = _from_genai(price, model, self.read)
        return self._converted[key]

    def _find(self, model: str) -> Any:
        if model not in self._models:
            found = None
            ref = model.split("@")[0]  # a Vertex version suffix
            attempts = [(ref, "litellm"), (ref.split("/")[-1], None)] if "/" in ref else [(ref, None)]
            for name, provider in attempts:
                try:
                    found = self.snapshot.find_provider_model(name, None, provider, None)[1]
                    break
                except LookupError:
                    continue
            self._models[model] = found
        return self._models[model]


def _from_genai(price: Any, model: str, read: str) -> ModelPrices:
    """genai-prices' ModelPrice (Decimals, or tiered prices) as ModelPrices with their tiers."""
    fields = {"input": "input_mtok", "output": "output_mtok", "cache_read": "cache_read_mtok",
              "cache_write_5m": "cache_write_mtok", "cache_write_1h": "cache_write_1h_mtok"}
    values = {name: getattr(price, key, None) for name, key in fields.items()}
    starts = sorted({t.start for v in values.values() if hasattr(v, "tiers") for t in v.tiers})

    def rate(value: Any, start: int | None) -> float | None:
        if value is None:
            return None
        if not hasattr(value, "tiers"):
            return float(value)
        applicable = value.base
        for tier in value.tiers:
            if start is not None and start >= tier.start:
                applicable = tier.price
        return float(applicable)

    def prices(start: int | None) -> ModelPrices:
        r = {name: rate(v, start) for name, v in values.items()}
        base = r["input"] or 0.0
        write = r["cache_write_5m"] if r["cache_write_5m"] is not None else base  # no write surcharge
        return ModelPrices(model=model, input=base, output=r["output"] or 0.0, cache_write_5m=write,
                           cache_write_1h=r["cache_write_1h"] if r["cache_write_1h"] is not None else write,
                           cache_read=r["cache_read"] if r["cache_read"] is not None else base, read=read)

    return replace(prices(None), tiers=tuple((s, prices(s)) for s in starts))


@dataclass
class PriceTable:
    """Where prices are looked up, first to last (``--prices FILE``, the corrections, genai-prices),
    and the model an unknown one is priced as."""

    sources: list = field(default_factory=list)
    default_model: str = DEFAULT_MODEL

    @property
    def read(self) -> str:
        return " over ".join(s.read if isinstance(s, GenaiPrices) else f"{s.source} ({s.read})" for s in self.sources)

    def lookup(self, model: str | None, when: float | None = None) -> ModelPrices:
        """Prices for ``model`` at ``when`` (seconds since the epoch; None: ``AS_OF``); an unknown
        model gets the default model's prices, marked unknown."""
        name = model or self.default_model
        at = AS_OF if when is None else when
        for source in self.sources:
            if (found := source.lookup(name, at)) is not None:
                return found
        for source in self.sources:
            if (found := source.lookup(self.default_model, at)) is not None:
                return replace(found, model=name, known=False)
        raise UsageError(f"no prices for the default model {self.default_model!r}")


def _package_file(relative: str) -> str:
    here = Path(__file__).parent / relative
    if here.is_file():
        return here.read_text(encoding="utf-8")
    from importlib import resources  # a zipped install

    return resources.files("compactlab").joinpath(relative).read_text(encoding="utf-8")


_DEFAULT: list = []  # the corrections and genai-prices, loaded once per process


def load_prices(path: str | None = None) -> PriceTable:
    """The price table: ``path`` (a TOML table, ``--prices``) in front of the built-in sources."""
    if not _DEFAULT:
        _DEFAULT.extend([TomlPrices(_package_file("data/price_corrections.toml"), "compactlab corrections"),
                         GenaiPrices()])
    sources = list(_DEFAULT)
    default = DEFAULT_MODEL
    if path is not None:
        try:
            text = read_regular_text(path, "--prices")
        except InputError as exc:
            raise UsageError(exc.message) from None
        except OSError as exc:
            raise UsageError(f"{path}: not a usable price table: {exc.strerror or exc}") from None
        own = TomlPrices(text, path)
        if own.default_model is not None:
            if not isinstance(own.default_model, str) or own.lookup(own.default_model, AS_OF) is None:
                raise UsageError(f"{path}: default_model {own.default_model!r} has no prices")
            default = own.default_model
        sources.insert(0, own)
    return PriceTable(sources, default)
