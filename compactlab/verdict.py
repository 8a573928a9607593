"""Which policy to use: the verdict of a compare, across its transcripts.

Per policy (or swept value): what it saved in cost over all the transcripts together (their cost
against the same transcripts with no compaction) and per transcript (median and spread), tokens,
retention, violations it introduced, overflows, summaries, and on how many transcripts it cost
more than no compaction. Then a recommendation: the best total cost saving among the entries that
introduce no violation, overflow no window (the API would refuse those calls) and keep retention
within ``margin`` of the best retention among the entries that save (no compaction keeps every
result, so measured against it every compaction would lose), and why the runner-up lost.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from . import metrics

if TYPE_CHECKING:
    import pandas as pd

#: how far below the best retention a recommended policy may be (share of references)
RETENTION_MARGIN = 0.05


@dataclass
class Entry:
    """One policy (or swept value) across the transcripts."""

    label: str
    policy: str
    swept: dict[str, Any]
    transcripts: int
    cost_usd: float
    raw_cost_usd: float
    tokens_total: int  # sent over every call of every transcript
    cost_saving: float  # over all the transcripts: 1 - cost / cost with no compaction
    median_saving: float  # per transcript
    saving_p25: float
    saving_p75: float
    reduction: float  # tokens, over all the transcripts
    retention: float  # referenced results kept, over all the transcripts (1.0 without references)
    refs: int
    recall: float  # hindsight probes kept, over all the transcripts (1.0 without probes)
    probes: int
    violations_introduced: int
    overflows: int
    summaries: int
    costs_more: int  # transcripts where it cost more than no compaction


@dataclass
class Verdict:
    entries: list[Entry]  # best cost saving first
    recommended: str | None
    runner_up: str | None
    recommendation: str
    margin: float = RETENTION_MARGIN
    no_references: bool = False  # no transcript has a reference: retention says nothing
    swept: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def label_of(policy: str, swept: dict[str, Any], units: dict[str, str] | None = None) -> str:
    """A policy and its swept values, each with its unit ("s08 summary.trigger=20000 chars"); a
    key the policy does not use is "n/a"."""
    return policy + "".join(f" {k}={_shown(v, (units or {}).get(k))}" for k, v in swept.items()
                            if _shown(v, None) != "n/a")


def _shown(value: Any, unit: str | None) -> str:
    if value is None or (isinstance(value, float) and value != value):  # None, or NaN in a frame
        return "n/a"
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a column with an n/a in it is float
    return f"{value} {unit}" if unit else str(value)


def judge(df: "pd.DataFrame", sweep_keys: list[str], margin: float = RETENTION_MARGIN,
          units: dict[str, str] | None = None) -> Verdict:
    """The verdict of a compare's results (one row per run, as ``results.csv``)."""
    entries = []
    for (policy, *values), runs in df.groupby(["policy", *sweep_keys], sort=False, dropna=False):
        swept = {k: _plain(v) for k, v in zip(sweep_keys, values)}
        summed = metrics.sums(runs.to_dict("records"))
        total = {name: m.of(summed) for name, m in metrics.METRICS.items()}  # = metrics.totals
        per = runs["cost_saving"]
        entries.append(Entry(
            label=label_of(policy, swept, units), policy=policy, swept=swept, transcripts=int(runs["transcript"].nunique()),
            cost_usd=round(summed["cost_usd"], 6), raw_cost_usd=round(summed["raw_cost_usd"], 6),
            tokens_total=int(summed["tokens_total"]),
            cost_saving=round(total["cost_saving"], 6),
            median_saving=round(float(per.median()), 6), saving_p25=round(float(per.quantile(0.25)), 6),
            saving_p75=round(float(per.quantile(0.75)), 6),
            reduction=round(total["reduction"], 6),
            retention=round(total["retention"], 6), refs=int(summed["refs"]),
            recall=round(total["recall"], 6), probes=int(summed["probes"]),
            violations_introduced=int(summed["violations_introduced"]), overflows=int(summed["overflows"]),
            summaries=int(summed["summaries"]),
            costs_more=int((runs["cost_usd"] > runs["raw_cost_usd"] + 1e-12).sum()),
        ))
    entries.sort(key=lambda e: -e.cost_saving)
    no_refs = not any(e.refs for e in entries)

    def fatal(e: Entry) -> str | None:
        if e.violations_introduced:
            return f"it introduces {e.violations_introduced} tool-pairing violation(s) the API would reject"
        if e.overflows:
            return f"{e.overflows} of its calls overflow the context window (the API would refuse them)"
        return None

    savers = [e for e in entries if e.cost_saving > 0 and fatal(e) is None]
    best_retention = max((e.retention for e in savers), default=1.0)
    best_recall = max((e.recall for e in savers), default=1.0)

    def why_not(e: Entry) -> str | None:
        if (reason := fatal(e)) is not None:
            return reason
        if e.cost_saving > 0 and e.retention < best_retention - margin - 1e-12:
            return (f"it keeps {_pct(e.retention)} of the referenced tool results, more than {_pct(margin, 0)} "
                    f"below the best of the policies that save ({_pct(best_retention)})")
        if e.cost_saving > 0 and e.recall < best_recall - margin - 1e-12:
            return (f"its contexts hold {_pct(e.recall)} of what the agent later used (probe recall), more than "
                    f"{_pct(margin, 0)} below the best of the policies that save ({_pct(best_recall)})")
        return None

    fit = [e for e in entries if why_not(e) is None]
    if not entries:
        return Verdict([], None, None, "No run finished.", margin, no_refs, list(sweep_keys))
    if not fit:
        reasons = "; ".join(f"{e.label}: {why_not(e)}" for e in entries[:3])
        return Verdict(entries, None, None, f"No policy qualifies ({reasons}).", margin, no_refs, list(sweep_keys))
    best = fit[0]
    text = [_praise(best, len(df["transcript"].unique()))]
    above = [e for e in entries[:entries.index(best)]][:3]  # saved more, and lost
    runner = above[0] if above else next((e for e in entries if e is not best), None)
    for e in above:
        text.append(f"{'The runner-up, ' if e is runner else ''}{e.label} saves {_pct(e.cost_saving)} but lost: "
                    f"{why_not(e)}.")
    if runner is not None and not above:
        gap = best.cost_saving - runner.cost_saving
        reason = (f"it saves {_pct(runner.cost_saving)}, {_pct(gap)} less" if gap > 0 else
                  f"it saves as much ({_pct(runner.cost_saving)}) and comes second in the table's order")
        text.append(f"The runner-up, {runner.label}, lost: {reason}.")
    if not any(e.probes for e in entries):
        text.append("No reply repeats a string first seen in a tool result, so probe recall (1.0 everywhere) does "
                    "not tell the policies apart.")
    if no_refs:
        text.append("No transcript refers back to an earlier tool result, so retention (1.0 everywhere) "
                    "does not tell the policies apart.")
    return Verdict(entries, best.label, runner.label if runner else None, " ".join(text), margin, no_refs,
                   list(sweep_keys))


def _praise(e: Entry, transcripts: int) -> str:
    if e.cost_saving <= 0:
        return (f"Use {e.label}: no policy costs less than sending the whole history with prompt caching "
                f"on these {transcripts} transcript(s).")
    where = f" and costs more than no compaction on {e.costs_more} of {e.transcripts}" if e.costs_more else ""
    return (f"Use {e.label}: it saves {_pct(e.cost_saving)} of the cost over {e.transcripts} transcript(s) "
            f"(median {_pct(e.median_saving)} per transcript){where}, introduces no violation, keeps "
            f"{_pct(e.retention)} of the referenced tool results and {_pct(e.recall)} of what the agent later used "
            f"(probe recall).")


def _pct(x: float, digits: int = 1) -> str:
    return f"{x * 100:.{digits}f}%"


def _plain(v: Any) -> Any:
    """A numpy scalar as the Python value (for JSON and labels)."""
    return v.item() if hasattr(v, "item") else v
