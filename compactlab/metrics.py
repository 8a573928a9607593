"""What a run is judged by: every metric once, and the one way a corpus adds up (#26 §1).

A metric has one name (the key in summary.json, results.csv, the check baseline), one label (the
column head in words), a unit, which way is better, how ``check`` tolerates a change of it
(relative, absolute, or not compared), and how it totals over runs. A share is always a ratio of
sums over the runs — never a mean of the runs' ratios — with its value when nothing was counted
(``empty``): recall is the probes kept over every run divided by the probes of every run, 1.0 when
no reply used any.

A run's totals have one typed shape, :class:`Numbers` (coverage.py's ``Numbers`` is the model): the
parts of every metric, added with ``+``, each metric a property of it. A run's summary gives its
``numbers``; the verdict, ``tune``'s objectives, check's baseline and a replay of a folder add them
(a run is a corpus of one).

To add a metric: an entry here and the counting that fills its parts (``records.RunSummary`` holds
each part as a field). Everything else reads the registry: results.csv's columns, the terminal
table, ``--sort``'s direction, the verdict's entries, the check baseline and its tolerances and
help, tune's objectives (``test_metrics`` adds one and follows it through).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from typing import Any, Literal

from .plain import NamedTuple


class Metric(NamedTuple):
    name: str  # the key in summaries, results and baselines
    label: str  # in words, for column heads and axes
    unit: Literal["share", "usd", "tokens", "count"]
    better: Literal["higher", "lower"]
    #: how check tolerates a change: relative (× the baseline value), absolute, or not compared
    tolerance: Literal["relative", "absolute"] | None
    #: a share: ``numerator`` / ``denominator`` summed over the runs (``complement``: 1 minus it,
    #: a saving); a total: the sum of ``numerator``
    numerator: str
    denominator: str | None = None
    complement: bool = False
    empty: float = 0.0  # a share's value when the denominator sums to 0
    objective: str | None = None  # its name as a tune --objective
    description: str = ""
    #: a column of the reports' tables (every metric is one of results.csv): "essential" kept on the
    #: narrowest terminal, "verdict" kept there in the verdict's table only (the runs' table, a row
    #: a run, keeps fewer), "wide" where it fits, None in results.csv only
    table: Literal["essential", "verdict", "wide"] | None = "wide"
    signed: bool = False  # shown with its sign (a saving that can be negative)
    short: str = ""  # its head where a terminal is narrow (the label, where empty)

    def of(self, sums: Mapping[str, float]) -> float:
        """The metric from the sums of its parts (one run's, or a corpus's)."""
        if self.denominator is None:
            return sums[self.numerator]
        den = sums[self.denominator]
        if not den:
            return self.empty
        share = sums[self.numerator] / den
        return 1 - share if self.complement else share

    @property
    def parts(self) -> tuple[str, ...]:
        return (self.numerator,) if self.denominator is None else (self.numerator, self.denominator)

    def shown(self, sums: Mapping[str, float]) -> float:
        """The metric as every output gives it: a share or a cost to 6 places, a count whole."""
        value = self.of(sums)
        return int(value) if self.unit in ("tokens", "count") else round(value, 6)

    def cell(self, value: float) -> str:
        """The metric in a report's table: a share as a percentage, money in dollars, a count whole."""
        if self.unit == "share":
            return f"{value * 100:+.1f}%" if self.signed else f"{value * 100:.1f}%"
        if self.unit == "usd":
            return f"${value:,.4f}"
        return f"{int(value):,}"


#: every metric, in the order reports list them
REGISTRY: list[Metric] = [
    Metric("cost_saving", "cost saving", "share", "higher", None, "cost_usd", "raw_cost_usd", complement=True,
           objective="cost", description="1 - cost / cost with no compaction, with prompt caching, over the runs",
           table="essential", signed=True, short="saving"),
    Metric("tokens_total", "tokens", "tokens", "lower", "relative", "tokens_total",
           description="input tokens sent over every call", table=None),
    Metric("cost_usd", "cost", "usd", "lower", "relative", "cost_usd",
           description="input cost with prompt caching, plus the summarizer's calls"),
    Metric("reduction", "tokens saved", "share", "higher", "absolute", "tokens_total", "raw_tokens_total",
           complement=True, objective="reduction", description="1 - tokens sent / tokens with no compaction"),
    Metric("retention", "retention", "share", "higher", "absolute", "refs_retained", "refs", empty=1.0,
           objective="retention", description="referenced tool results still intact where they are referenced",
           table="verdict", short="retained"),
    Metric("recall", "recall", "share", "higher", "absolute", "probes_kept", "probes", empty=1.0,
           objective="recall", description="hindsight probes (what the agent later used) the contexts sent held",
           table="essential"),
    Metric("recoverable", "recoverable", "share", "higher", "absolute", "probes_recoverable", "probes", empty=0.0,
           description="hindsight probes not in the contexts sent but in a persisted output they point to"),
    Metric("violations_introduced", "violations", "count", "lower", None, "violations_introduced",
           description="tool_use/tool_result pairing violations the policy introduced (the API rejects them)",
           table="essential", short="broken"),
    Metric("overflows", "overflows", "count", "lower", None, "overflows",
           description="calls whose context is over the reactive window (the API refuses them)", table="verdict",
           short="overflow"),
    Metric("summaries", "summaries", "count", "lower", None, "summaries", description="summaries made"),
]

#: every metric by name, in the order reports list them (``define`` makes these from ``REGISTRY``)
METRICS: dict[str, Metric] = {}
#: the metrics ``tune --objective`` accepts, by their objective name
OBJECTIVES: dict[str, Metric] = {}
#: the metrics ``check`` compares with a tolerance: name -> (tolerance kind, the way it gets worse)
COMPARED: dict[str, tuple[str, str]] = {}
#: the summary keys the metrics are made of
PARTS: tuple[str, ...] = ()


class Named:
    """Every metric and every part of one, by name, typed (``define`` makes each a property of
    ``Numbers``; ``verdict.Entry`` reads them as the outputs give them): a name that is none of
    them is a type error, not a silent float. A test holds this list to the registry's."""

    __slots__ = ()

    cost_saving: float
    tokens_total: float
    cost_usd: float
    reduction: float
    retention: float
    recall: float
    recoverable: float
    violations_introduced: float
    overflows: float
    summaries: float
    raw_cost_usd: float
    raw_tokens_total: float
    refs_retained: float
    refs: float
    probes_kept: float
    probes: float
    probes_recoverable: float


class Numbers(Named):
    """The parts of every metric, for one run or summed over many (``a + b``, ``sum(...)``); each
    metric is a property (``n.recall``: ``METRICS["recall"].of`` its parts, unrounded)."""

    __slots__ = ("_parts",)

    def __init__(self, parts: Mapping[str, float] | None = None) -> None:
        given = parts or {}
        self._parts = {p: given.get(p, 0) for p in PARTS}  # (a summary from before a metric existed: 0)

    @classmethod
    def of(cls, summary: Any) -> "Numbers":
        """The parts of a run's summary: a ``RunSummary`` (its ``numbers``) or a dict of its keys."""
        if isinstance(summary, Numbers):
            return summary
        if isinstance(summary, Mapping):
            return cls(summary)
        return cls({p: getattr(summary, p) for p in PARTS})

    def __add__(self, other: "Numbers") -> "Numbers":
        return Numbers({p: v + other._parts[p] for p, v in self._parts.items()})

    def __radd__(self, other: Any) -> "Numbers":  # (sum() starts at 0)
        if other == 0:
            return self
        return NotImplemented

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Numbers) and other._parts == self._parts

    def __repr__(self) -> str:
        return f"Numbers({self._parts!r})"

    @property
    def parts(self) -> dict[str, float]:
        return dict(self._parts)

    def metrics(self) -> dict[str, float]:
        """Every metric, unrounded."""
        return {name: m.of(self._parts) for name, m in METRICS.items()}

    def shown(self) -> dict[str, float]:
        """Every metric as the outputs give it (``Metric.shown``)."""
        return {name: m.shown(self._parts) for name, m in METRICS.items()}


def _property(name: str, metric: Metric | None) -> property:
    if metric is not None:
        return property(lambda self: metric.of(self._parts), doc=metric.description)
    return property(lambda self: self._parts[name])


def define(registry: list[Metric]) -> None:
    """Make everything the registry decides from it: ``METRICS``, ``OBJECTIVES``, ``COMPARED``,
    ``PARTS`` and a property of ``Numbers`` per part and per metric (a test defines a longer one)."""
    global PARTS
    for name in [*PARTS, *METRICS]:
        if isinstance(Numbers.__dict__.get(name), property):
            delattr(Numbers, name)
    for table in (METRICS, OBJECTIVES, COMPARED):
        table.clear()
    METRICS.update((m.name, m) for m in registry)
    OBJECTIVES.update((m.objective, m) for m in registry if m.objective)
    COMPARED.update((m.name, (m.tolerance, "up" if m.better == "lower" else "down"))
                    for m in registry if m.tolerance is not None)
    PARTS = tuple(dict.fromkeys(p for m in registry for p in m.parts))
    for name in PARTS:
        setattr(Numbers, name, _property(name, None))
    for name, m in METRICS.items():
        if name not in PARTS:
            setattr(Numbers, name, _property(name, m))


define(REGISTRY)


def sums(summaries: Iterable[Any]) -> Numbers:
    """The parts of every metric summed over ``summaries`` (run summaries, or their dicts)."""
    return sum(map(Numbers.of, summaries), Numbers())


def totals(summaries: Iterable[Any]) -> dict[str, float]:
    """Every metric over a corpus: the corpus aggregation (shares are ratios of sums)."""
    return sums(summaries).metrics()


#: the columns of results.csv that are no metric but sort best first ascending as a cost does
LOWER_IS_BETTER = frozenset({"cost_usd_nocache", "peak_tokens", "violations_inherited"})


def lower_is_better(column: str) -> bool:
    """Whether a column of results.csv sorts best first ascending: a metric as the registry says."""
    m = METRICS.get(column)
    return m.better == "lower" if m is not None else column in LOWER_IS_BETTER


def tolerance_help() -> str:
    """``check --tolerance``'s help, from the registry: which metrics are compared, and how."""
    def names(kind: str) -> str:
        found = [name for name, (k, _) in COMPARED.items() if k == kind]
        return ", ".join(found[:-1]) + f" and {found[-1]}" if len(found) > 1 else "".join(found)

    return (f"Allowed worsening: relative for {names('relative')}, absolute for {names('absolute')}; default 0.01. "
            f"X sets all {len(COMPARED)}; cost_usd=0.05 one (repeatable).")
