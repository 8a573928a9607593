"""What a run is judged by: every metric once, and the one way a corpus adds up (#26 §1).

A metric has one name (the key in summary.json, results.csv, the check baseline), one label (the
column head in words), a unit, which way is better, how ``check`` tolerates a change of it
(relative, absolute, or not compared), and how it totals over runs. A share is always a ratio of
sums over the runs — never a mean of the runs' ratios — with its value when nothing was counted
(``empty``): recall is the probes kept over every run divided by the probes of every run, 1.0 when
no reply used any. :func:`totals` is *the* corpus aggregation: the verdict, ``tune``'s objectives
and ``records.summarize`` (a run is a corpus of one) all go through it.

To add a metric: an entry here, the per-call counting that fills its sums (``records.TurnRecord``
and ``records.summarize``), and, if ``tune`` may optimise it, its ``objective`` name; the verdict,
tune, check and the report columns read the registry (a test checks every output lists it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Metric:
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


#: every metric, in the order reports list them
METRICS: dict[str, Metric] = {m.name: m for m in [
    Metric("cost_saving", "cost saving", "share", "higher", None, "cost_usd", "raw_cost_usd", complement=True,
           objective="cost", description="1 - cost / cost with no compaction, with prompt caching, over the runs"),
    Metric("tokens_total", "tokens", "tokens", "lower", "relative", "tokens_total",
           description="input tokens sent over every call"),
    Metric("cost_usd", "cost", "usd", "lower", "relative", "cost_usd",
           description="input cost with prompt caching, plus the summarizer's calls"),
    Metric("reduction", "tokens saved", "share", "higher", "absolute", "tokens_total", "raw_tokens_total",
           complement=True, objective="reduction", description="1 - tokens sent / tokens with no compaction"),
    Metric("retention", "retention", "share", "higher", "absolute", "refs_retained", "refs", empty=1.0,
           objective="retention", description="referenced tool results still intact where they are referenced"),
    Metric("recall", "recall", "share", "higher", "absolute", "probes_kept", "probes", empty=1.0,
           objective="recall", description="hindsight probes (what the agent later used) the contexts sent held"),
    Metric("recoverable", "recoverable", "share", "higher", "absolute", "probes_recoverable", "probes", empty=0.0,
           description="hindsight probes not in the contexts sent but in a persisted output they point to"),
    Metric("violations_introduced", "violations", "count", "lower", None, "violations_introduced",
           description="tool_use/tool_result pairing violations the policy introduced (the API rejects them)"),
    Metric("overflows", "overflows", "count", "lower", None, "overflows",
           description="calls whose context is over the reactive window (the API refuses them)"),
    Metric("summaries", "summaries", "count", "lower", None, "summaries", description="summaries made"),
]}

#: the metrics ``tune --objective`` accepts, by their objective name
OBJECTIVES: dict[str, Metric] = {m.objective: m for m in METRICS.values() if m.objective}
#: the metrics ``check`` compares with a tolerance: name -> (tolerance kind, the way it gets worse)
COMPARED: dict[str, tuple[str, str]] = {m.name: (m.tolerance, "up" if m.better == "lower" else "down")
                                        for m in METRICS.values() if m.tolerance is not None}
#: the summary keys the metrics are made of
PARTS: tuple[str, ...] = tuple(dict.fromkeys(p for m in METRICS.values() for p in m.parts))


def sums(summaries: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The parts of every metric summed over ``summaries`` (run summaries as dicts)."""
    out = dict.fromkeys(PARTS, 0.0)
    for s in summaries:
        for key in PARTS:
            out[key] += s.get(key, 0)  # (a summary written before the metric existed: none counted)
    return out


def of_sums(summed: Mapping[str, float]) -> dict[str, float]:
    """Every metric from the sums of its parts (``sums``)."""
    return {name: m.of(summed) for name, m in METRICS.items()}


def totals(summaries: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Every metric over a corpus: the corpus aggregation (shares are ratios of sums)."""
    return of_sums(sums(summaries))


def tolerance_help() -> str:
    """``check --tolerance``'s help, from the registry: which metrics are compared, and how."""
    def names(kind: str) -> str:
        found = [name for name, (k, _) in COMPARED.items() if k == kind]
        return ", ".join(found[:-1]) + f" and {found[-1]}" if len(found) > 1 else "".join(found)

    return (f"Allowed worsening: relative for {names('relative')}, absolute for {names('absolute')}; default 0.01. "
            f"X sets all {len(COMPARED)}; cost_usd=0.05 one (repeatable).")
