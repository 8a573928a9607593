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

from functools import lru_cache

import math
import os
import re
from dataclasses import field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...errors import InputError, UsageError
from ...plain import NamedTuple, dataclass
from ...plumbing import package_toml
from ...plumbing.files import read_regular_text

MTOK = 1_000_000
DEFAULT_MODEL = "claude-sonnet-4-5"
#: when a call has no recorded time, it is priced as of this instant (noon UTC: no off-peak rate)
AS_OF = datetime(2026, 11, 26, 12, tzinfo=timezone.utc).timestamp()


class ModelPrices(NamedTuple):
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
    #: an unknown model's stand-in: the model of its provider whose prices it was given (an
    #: estimate); "" with ``known`` False: no provider known, unpriced (every cost 0)
    priced_as: str | None = None
    tiers: tuple[tuple[int, ModelPrices], ...] = ()

    def priced_by(self) -> str:
        """Where these prices come from, in a phrase (a run's "priced by"): the model and the table,
        or the stand-in an unknown model was given (an estimate), or that it is unpriced."""
        if self.known:
            return f"{self.model}'s in {self.read}"
        if self.priced_as:
            return f"{self.priced_as}'s in {self.read}, standing in for {self.model}, which no table knows (an estimate)"
        return f"none: no table knows {self.model} nor its provider (every cost 0)"

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


class _Period(NamedTuple):
    since: float  # seconds since the epoch; -inf: always
    row: dict


class TomlPrices:
    """A price table in TOML: ``[models."name"]`` with ``input`` and ``output`` (and optionally
    ``cache_write_5m``, ``cache_write_1h``, ``cache_read``; by default Anthropic's rules: 1.25×,
    2× and 0.1× input), or ``[[models."name"]]`` periods each with ``since`` (an ISO date or time
    from which it applies). A model is found by its name, by its name without a date suffix or
    a ``provider/`` prefix, or by the longest name it starts with."""

    def __init__(self, text: str, source: str, user: bool = False, packaged: bool = False) -> None:
        try:
            data = package_toml.loads(text) if packaged else _user_toml(text)
            models = data["models"]
            if not isinstance(models, dict) or not models:
                raise KeyError("models")
        except (ValueError, KeyError, TypeError) as exc:  # (ValueError: tomllib.TOMLDecodeError)
            raise UsageError(f"{source}: not a usable price table: {exc}") from None
        self.source = source
        self.user = user  # the user's (--prices, the user's prices file): its windows are theirs
        self.read = str(data.get("read", "unknown"))
        self.default_model = data.get("default_model")
        self.periods: dict[str, list[_Period]] = {}
        self._matched: dict[str, str | None] = {}  # (a run looks its model up at each call's time)
        for name, value in models.items():
            rows = value if isinstance(value, list) else [value]
            periods = []
            for row in rows:
                for key in ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read"):
                    if isinstance(row, dict) and key not in row and key.startswith("cache_"):
                        continue  # (optional: the input price's multiples)
                    value = row.get(key) if isinstance(row, dict) else None
                    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1e6:
                        shown = f" = {str(value)[:20]}" if value is not None else ""
                        raise UsageError(f"{source}: models.{name}.{key}{shown}: must be a price (USD per million "
                                         "tokens, 0 or more, finite)")
                window = row.get("window")
                if window is not None and (type(window) is not int or not 0 < window <= 100_000_000):
                    raise UsageError(f"{source}: models.{name}.window must be a context window in tokens")
                periods.append(_Period(_since(row.get("since"), source, name), row))
            self.periods[name] = sorted(periods, key=lambda p: p.since)

    @property
    def name(self) -> str:
        """The table as its prices name it: its file and the date it was read."""
        return f"{self.source} ({self.read})"

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
                           cache_read=row.get("cache_read", base * 0.1), read=self.name)

    def timeless(self, model: str) -> bool | None:
        """Whether ``lookup(model, when)`` gives the same prices whatever ``when``: True where the
        table gives the model one row for all time, False where its rows have dates (before the
        first it gives none); None where it does not know the model."""
        key = self._match(model)
        if key is None:
            return None
        periods = self.periods[key]
        return len(periods) == 1 and periods[0].since == float("-inf")

    def window(self, model: str) -> int | None:
        """The context window the table gives ``model`` (its latest row's ``window``), or None."""
        key = self._match(model)
        return next((p.row["window"] for p in reversed(self.periods[key]) if "window" in p.row), None) \
            if key is not None else None

    def _match(self, name: str) -> str | None:
        if name in self.periods:
            return name
        if name in self._matched:
            return self._matched[name]
        stripped = re.sub(r"-\d{8}$|@\d{8}$|-latest$", "", name.split("/")[-1])
        if stripped in self.periods:
            found: str | None = stripped
        else:
            prefixes = [k for k in self.periods if stripped.startswith(k)]
            found = max(prefixes, key=len) if prefixes else None
        self._matched[name] = found
        return found


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
    """The prices of ``genai-prices``, from the data it was released with (no network).

    Importing genai-prices takes longer than a small replay (0.13 s, 20 MB), so what it says of a
    model (its prices, each with the date or time of day it applies from) is kept in the user's
    cache folder per release of its data, and a later process reads that instead; ``cache_dir``
    None keeps nothing (``--dry-run``)."""

    def __init__(self, cache_dir: str | None = None, write: bool = True) -> None:
        self.cache_dir, self.write = cache_dir, write
        self._library: Any = None
        self._records: dict[str, list | None] = {}
        self._windows: dict[str, int | None] = {}
        self._converted: dict[tuple[str, int], ModelPrices] = {}
        self._disk: Any = None
        self._stamp: str | None = None
        self._read: str | None = None  # "genai-prices VERSION", from the cache where it has it

    def __reduce__(self) -> tuple:  # to a dask worker: it finds its own
        return GenaiPrices, (self.cache_dir, self.write)

    @property
    def read(self) -> str:
        """The library and its version, as its prices name it."""
        if self._read is None:
            from importlib.metadata import version

            self._read = f"genai-prices {version('genai-prices')}"
        return self._read

    name = read

    def lookup(self, model: str, when: float) -> ModelPrices | None:
        record = self._record(model)
        if record is None:
            return None
        if record == LIBRARY:  # conditions of a kind this does not read: genai-prices decides
            values = _values(self._info(model).get_prices(datetime.fromtimestamp(when, timezone.utc)))
            return _prices_of(values, model, self.read)
        index, at = 0, None  # (the last whose condition holds, else the first; the time read where one is asked)
        for i in range(len(record) - 1, -1, -1):
            condition = record[i][0]
            if condition is not None:
                at = at or datetime.fromtimestamp(when, timezone.utc)
                if not _active(condition, at):
                    continue
            index = i
            break
        key = (model, index)
        if key not in self._converted:
            self._converted[key] = _prices_of(record[index][1], model, self.read)
        return self._converted[key]

    def timeless(self, model: str) -> bool | None:
        """Whether ``lookup(model, when)`` gives the same prices whatever ``when``: True where the
        last of the model's prices has no condition (it always applies: ``lookup`` takes the last
        whose condition holds); None where genai-prices does not know the model."""
        record = self._record(model)
        if record is None:
            return None
        return record != LIBRARY and bool(record) and record[-1][0] is None

    def _record(self, model: str) -> Any:
        """The model's prices as [[condition, {field: value}], ...] (genai-prices' order: the last
        one whose condition holds applies), from the cache or from genai-prices; None: genai-prices
        does not know the model; LIBRARY: ask genai-prices at each call."""
        if model in self._records:
            return self._records[model]
        disk, key = self._cache()
        cached = disk.get(key(model)) if disk is not None else None
        if cached is not None and not (isinstance(cached.get("read"), str) and _valid_record(cached.get("prices"))
                                       and (cached.get("window") is None or _positive_int(cached.get("window")))):
            disk.ignore(key(model), f"prices of {model!r} that are not prices")
            cached = None
        if cached is not None:
            record, window = cached["prices"], cached.get("window")
            self._read = self._read or cached["read"]
        else:
            info = self._info(model)
            record = None if info is None else _record_of(info)
            window = getattr(info, "context_window", None)
            window = window if _positive_int(window) else None
            if disk is not None:
                disk.put(key(model), {"model": model, "prices": record, "window": window, "read": self.read})
        self._records[model], self._windows[model] = record, window
        return record

    def window(self, model: str) -> int | None:
        """The context window genai-prices knows for ``model``, kept with its prices (reading the
        cache entry costs a start no import of genai-prices: a tenth of a second)."""
        if model not in self._windows:
            self._record(model)
        return self._windows.get(model)

    @property
    def problems(self) -> list[str]:
        """Why cached records were not used (each rebuilt from genai-prices' data)."""
        return self._disk.problems if self._disk is not None else []

    def _cache(self) -> tuple[Any, Any]:
        if self.cache_dir is None:
            return None, None
        if self._disk is None:
            from importlib.util import find_spec

            from ...plumbing.cache import DiskCache, digest

            spec = find_spec("genai_prices")
            origin = Path(spec.origin).with_name("data.py") if spec and spec.origin else None
            try:
                st = os.stat(origin) if origin else None
            except OSError:
                st = None
            if st is None:
                return None, None
            self._stamp = f"{st.st_size}-{st.st_mtime_ns}-{CACHE_FORMAT}"  # a release's data
            self._disk = DiskCache(self.cache_dir, "prices", read_only=not self.write)
            self._key = lambda m: digest("genai-prices", self._stamp or "", m)
        return self._disk, self._key

    def _info(self, model: str) -> Any:
        """genai-prices' ModelInfo for a model name (a litellm-style ``provider/model`` too), or None."""
        if self._library is None:
            from genai_prices import data_snapshot

            self._library = data_snapshot.get_snapshot()
        ref = model.split("@")[0]  # a Vertex version suffix
        attempts = [(ref, "litellm"), (ref.split("/")[-1], None)] if "/" in ref else [(ref, None)]
        for name, provider in attempts:
            try:
                return self._library.find_provider_model(name, None, provider, None)[1]
            except LookupError:
                continue
        return None


#: a record genai-prices must evaluate itself (a kind of condition ``_active`` does not know)
LIBRARY = "library"


def _record_of(info: Any) -> Any:
    conditional = info.prices if isinstance(info.prices, list) else [_Plain(info.prices)]
    out = []
    for c in conditional:
        constraint = _constraint(c.constraint)
        if constraint is False:
            return LIBRARY
        out.append([constraint, _values(c.prices)])
    return out


def _valid_record(record: Any) -> bool:
    """A cached record as ``_record_of`` makes it: None, LIBRARY, or [[condition, values], ...]
    whose prices are finite and not negative."""
    if record is None or record == LIBRARY:
        return True
    return isinstance(record, list) and bool(record) and all(
        isinstance(item, list) and len(item) == 2 and isinstance(item[1], dict) and _valid_condition(item[0])
        and all(name in _FIELDS and _valid_value(v) for name, v in item[1].items()) for item in record)


def _valid_condition(c: Any) -> bool:
    """None (always), ["date", ISO date] or ["time", start, end] (``_constraint``)."""
    return (c is None or (isinstance(c, list) and c and c[0] == "date" and len(c) == 2 and isinstance(c[1], str))
            or (isinstance(c, list) and len(c) == 3 and c[0] == "time" and all(type(x) is int for x in c[1:])))


def _valid_value(v: Any) -> bool:
    """A price, or tiers: {"base": price, "tiers": [[tokens, price], ...]}."""
    if isinstance(v, dict):
        tiers = v.get("tiers")
        return _price(v.get("base")) and isinstance(tiers, list) and all(
            isinstance(t, list) and len(t) == 2 and type(t[0]) is int and _price(t[1]) for t in tiers)
    return _price(v)


def _price(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and 0 <= v < 1e6


#: the layout of a cached genai-prices record (bump when it changes)
CACHE_FORMAT = 2


class _Plain:
    __slots__ = ("prices", "constraint")

    def __init__(self, prices: Any, constraint: Any = None) -> None:
        self.prices, self.constraint = prices, constraint


def _constraint(c: Any) -> Any:
    """A genai-prices condition as data: None (always), ["date", ISO date] (from that UTC date
    on), ["time", start, end] (a daily UTC interval); False: unknown."""
    if c is None:
        return None
    if hasattr(c, "start_date"):
        return ["date", c.start_date.isoformat()]
    if hasattr(c, "start_time") and hasattr(c, "end_time"):
        return ["time", _utc_seconds(c.start_time), _utc_seconds(c.end_time)]
    return False


def _utc_seconds(t: Any) -> int:
    """A time of day as seconds after UTC midnight (naive: UTC)."""
    if t.tzinfo is not None:
        offset = t.utcoffset()
        t_seconds = t.hour * 3600 + t.minute * 60 + t.second - (offset.total_seconds() if offset else 0)
        return int(t_seconds) % 86400
    return t.hour * 3600 + t.minute * 60 + t.second


def _active(constraint: Any, at: datetime) -> bool:
    """As genai-prices' StartDateConstraint / TimeOfDateConstraint decide."""
    if constraint is None:
        return True
    if constraint[0] == "date":
        return at.date().isoformat() >= constraint[1]
    now = at.hour * 3600 + at.minute * 60 + at.second + at.microsecond / 1e6
    start, end = constraint[1], constraint[2]
    return (now >= start or now < end) if end < start else start <= now < end


#: our names for genai-prices' price fields
_FIELDS = {"input": "input_mtok", "output": "output_mtok", "cache_read": "cache_read_mtok",
           "cache_write_5m": "cache_write_mtok", "cache_write_1h": "cache_write_1h_mtok"}


def _values(price: Any) -> dict[str, Any]:
    """genai-prices' ModelPrice as data: a number, or {"base", "tiers": [[start, price], ...]}."""
    out: dict[str, Any] = {}
    for name, key in _FIELDS.items():
        v = getattr(price, key, None)
        if v is None:
            continue
        out[name] = ({"base": float(v.base), "tiers": [[t.start, float(t.price)] for t in v.tiers]}
                     if hasattr(v, "tiers") else float(v))
    return out


def _prices_of(values: dict[str, Any], model: str, read: str) -> ModelPrices:
    """ModelPrices, with their long-context tiers, of a record's price values (see ``_values``)."""
    starts = sorted({t[0] for v in values.values() if isinstance(v, dict) for t in v["tiers"]})

    def rate(name: str, start: int | None) -> float | None:
        v = values.get(name)
        if v is None or not isinstance(v, dict):
            return v
        applicable = v["base"]
        for tier_start, price in v["tiers"]:
            if start is not None and start >= tier_start:
                applicable = price
        return applicable

    def prices(start: int | None) -> ModelPrices:
        r = {name: rate(name, start) for name in _FIELDS}
        base = r["input"] or 0.0
        write = r["cache_write_5m"] if r["cache_write_5m"] is not None else base  # no write surcharge
        return ModelPrices(model=model, input=base, output=r["output"] or 0.0, cache_write_5m=write,
                           cache_write_1h=r["cache_write_1h"] if r["cache_write_1h"] is not None else write,
                           cache_read=r["cache_read"] if r["cache_read"] is not None else base, read=read)

    return prices(None)._replace(tiers=tuple((s, prices(s)) for s in starts))


#: the model whose prices stand in for a model of the same provider that the price data does not
#: know (a newer release, say): its provider's prices and cache rules, marked as an estimate
STAND_INS = {"anthropic": DEFAULT_MODEL, "openai": "gpt-5", "gemini": "gemini-2.5-pro", "deepseek": "deepseek-chat"}


#: how many look-ups a price table keeps (then it starts again)
MEMO_SIZE = 1 << 16


@dataclass(eq=False, repr=False)
class PriceTable:
    """Where prices are looked up, first to last (``--prices FILE``, the corrections, genai-prices),
    and the model an unknown one is priced as."""

    sources: list = field(default_factory=list)
    default_model: str = DEFAULT_MODEL
    #: what was looked up, by (model, time): a corpus job prices every run of a transcript at the
    #: same calls' models and times (a run's own calls, each at its time, are mostly new keys)
    _memo: dict[tuple[str, float], ModelPrices] = field(default_factory=dict, repr=False, compare=False)
    #: the unknown models a warning was said of (once a table: a command's corpus says each once)
    warned: set[str] = field(default_factory=set, repr=False, compare=False)

    @property
    def read(self) -> str:
        return " over ".join(s.name for s in self.sources)

    def problems(self) -> list[str]:
        """What the sources could not use and said so (a damaged cache entry), once each."""
        out = []
        for source in self.sources:
            if isinstance(source, GenaiPrices):
                out += source.problems
                source.problems.clear()
        return out

    def window(self, model: str | None) -> tuple[int, str] | None:
        """The context window a user's price table (``--prices``, the user's prices file) gives
        ``model``, and which table; None where none does (the built-in tables give none)."""
        for source in self.sources:
            if isinstance(source, TomlPrices) and source.user and model and (w := source.window(model)):
                return w, source.source
        return None

    def lookup(self, model: str | None, when: float | None = None) -> ModelPrices:
        """Prices for ``model`` at ``when`` (seconds since the epoch; None: ``AS_OF``). A model no
        source knows is priced as its provider's stand-in (``STAND_INS``: an estimate, marked
        unknown), never as another provider's model; one of no provider known here is unpriced
        (every price 0, marked so)."""
        name = model or self.default_model
        at = AS_OF if when is None else when
        key = (name, at)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            found = self._memo[key] = self._lookup(model, name, at)
        return found

    def timeless(self, model: str | None) -> bool:
        """Whether ``lookup(model, when)`` gives the same prices whatever ``when`` (a run's calls
        are then looked up once, not once a call's time): the first source that knows the model
        says, else its stand-in's first; a source that cannot say makes it False."""
        name = model or self.default_model
        said = self._timeless_in_sources(name)
        if said is not None:
            return said
        stand_in = self._stand_in(model, name)
        # (unpriced, or no prices for the stand-in: the same at every time)
        return stand_in is None or self._timeless_in_sources(stand_in) is not False

    def _timeless_in_sources(self, name: str) -> bool | None:
        """What the first source that knows ``name`` says of it (``timeless``); None: none does."""
        for source in self.sources:
            said = source.timeless(name) if hasattr(source, "timeless") else False
            if said is not None:
                return bool(said)
        return None

    def _stand_in(self, model: str | None, name: str) -> str | None:
        """The model whose prices stand in for ``name``, which no source knows: its provider's
        (``STAND_INS``), the default model where ``model`` names none, or (of no provider known
        here) the default model only where a --prices table names its own."""
        from .cache_rules import family_of

        family = family_of(name)
        return (self.default_model if model is None else STAND_INS[family] if family is not None
                else self.default_model if self.default_model != DEFAULT_MODEL else None)

    def _lookup(self, model: str | None, name: str, at: float) -> ModelPrices:
        for source in self.sources:
            if (found := source.lookup(name, at)) is not None:
                return found
        from .cache_rules import family_of

        family = family_of(name)
        stand_in = self._stand_in(model, name)
        if stand_in is None:
            return ModelPrices(model=name, input=0.0, output=0.0, cache_write_5m=0.0, cache_write_1h=0.0,
                               cache_read=0.0, read="unpriced", known=False, priced_as="")
        for source in self.sources:
            if (found := source.lookup(stand_in, at)) is not None:
                return found._replace(model=name, known=False, priced_as=stand_in)
        raise UsageError(f"no prices for {stand_in!r}, the stand-in of {family or 'the default'} models")


def _user_toml(text: str) -> dict[str, Any]:
    """A price table of the user's, read by ``tomllib`` (imported only then)."""
    import tomllib

    return tomllib.loads(text)


def _package_file(relative: str) -> str:
    here = Path(__file__).parents[2] / relative  # the package folder
    if here.is_file():
        return here.read_text(encoding="utf-8")
    from importlib import resources  # a zipped install

    return resources.files("compactlab").joinpath(relative).read_text(encoding="utf-8")


_DEFAULT: dict[bool, list] = {}  # the corrections and genai-prices, once per process (and cache use)


def load_prices(path: str | None = None, cache: bool = True) -> PriceTable:
    """The price table: ``path`` (a TOML table, ``--prices``) in front of the built-in sources.
    ``cache``: keep what genai-prices says of a model in the user's cache folder (else only read
    what is there: ``--dry-run``)."""
    if cache not in _DEFAULT:
        from ...plumbing.folders import default_cache_dir

        _DEFAULT[cache] = [TomlPrices(_package_file("data/price_corrections.toml"), "compactlab corrections",
                                      packaged=True),
                           GenaiPrices(default_cache_dir(), write=cache)]
    sources = list(_DEFAULT[cache])
    default = DEFAULT_MODEL
    configured = user_prices_file()
    for given, what in ((configured, "the user's prices file"), (path, "--prices")):  # (--prices in front)
        if given is None:
            continue
        try:
            text = read_regular_text(given, what)
        except InputError as exc:
            raise UsageError(exc.message) from None
        except OSError as exc:
            raise UsageError(f"{given}: not a usable price table: {exc.strerror or exc}") from None
        own = TomlPrices(text, given, user=True)
        if own.default_model is not None:
            if not isinstance(own.default_model, str) or own.lookup(own.default_model, AS_OF) is None:
                raise UsageError(f"{given}: default_model {own.default_model!r} has no prices")
            default = own.default_model
        sources.insert(0, own)
    return PriceTable(sources, default)


def user_prices_file() -> str | None:
    """The user's own price table, read by every command where it exists: ``prices.toml`` in
    ``$COMPACTLAB_CONFIG_DIR``, else in the user's config folder (``~/.config/compactlab`` on
    Linux, as platformdirs names it: ``plumbing.folders``)."""
    folder = os.environ.get("COMPACTLAB_CONFIG_DIR", "").strip()
    if not folder:
        from ...plumbing.folders import user_folder

        folder = user_folder("config")
    path = os.path.join(folder, "prices.toml")
    return path if os.path.lexists(path) else None


@lru_cache(maxsize=256)
def known_window(model: str | None) -> int | None:
    """The context window genai-prices knows for ``model`` (a litellm-style ``provider/model``
    too), or None: from the built-in table's genai-prices source, which keeps it in its cache.
    The source the command's prices were loaded with, where they were (it writes the cache where
    the command may: a model priced by compactlab's corrections is read from genai-prices once, not
    at every start), else one that only reads the cache."""
    if not model:
        return None
    sources = _DEFAULT.get(True) or load_prices(cache=False).sources
    return next(s.window(model) for s in sources if isinstance(s, GenaiPrices))


def _positive_int(value: Any) -> bool:
    return type(value) is int and value > 0
