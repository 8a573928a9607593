"""Next-action's figures (#30, #46): each policy's agreement on its context and on the control,
their paired difference and agreement above chance, estimated over every candidate call from the
stratified samples (``stats``); and the check's whole result (``Agreement``)."""

from __future__ import annotations

from typing import Any

from ..plain import dataclass
from .actions import RULE
from .plan import Plan, Sample, StratumFacts
from .requests import usage_cost
from .stats import Paired, Stratum, population, wilson

#: how each API is asked: one draw an arm (cached), at temperature 0 where the API takes one
TEMPERATURE = {"anthropic": "the model's default (the Messages API of the anthropic SDK 2.x takes no temperature)",
               "openai": "0"}


@dataclass
class PolicyAgreement:
    """A policy's figures over every candidate call (#46 §1, §2): agreement on its context and on
    the control, their paired difference, and agreement above chance, each estimated from the
    stratified samples reweighted to the strata's real shares of the candidates, with a 95%
    interval (``stats.population``); the chance agreements beside them; and each stratum's own
    figures (a probe lost, none lost: its candidates, samples answered, agreement)."""

    policy: str
    candidates: int
    samples: int  # answered in both arms
    failed: int  # samples with a failed request
    control_refused: int  # samples whose control the asked model refuses (over its window): counted apart
    agreement: float | None
    agreement_interval: tuple[float, float] | None
    control_agreement: float | None
    control_interval: tuple[float, float] | None
    difference: float | None
    difference_interval: tuple[float, float] | None
    chance_agreement: float | None  # a random recorded action of the same transcript
    repeat_agreement: float | None  # the previous recorded action repeated
    above_chance: float | None  # (agreement - chance) / (1 - chance): the headline
    above_chance_interval: tuple[float, float] | None
    lost_candidates: int
    lost_samples: int
    lost_agreement: float | None
    lost_interval: tuple[float, float] | None  # Wilson's, of the stratum alone
    kept_candidates: int
    kept_samples: int
    kept_agreement: float | None
    kept_interval: tuple[float, float] | None
    spent_usd: float  # billed by the usage the API returned (replies from the cache cost nothing)
    #: why there is no estimate over every candidate (a stratum with candidates and no answered sample)
    unknown: str | None = None
    #: the control (no compaction) agrees with the recording no more than chance: the model asked
    #: does not do what the agent did even on the full context, so the comparison tells nothing
    tells_nothing: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for key in ("agreement_interval", "control_interval", "difference_interval", "above_chance_interval",
                    "lost_interval", "kept_interval"):
            out[key] = list(out[key]) if out[key] is not None else None
        return out


def tally(p: Plan, policies: list[str]) -> list[PolicyAgreement]:
    return [_tally(p, name) for name in policies]


def _tally(p: Plan, name: str) -> PolicyAgreement:
    """A policy's figures (``PolicyAgreement``) from its samples and its strata."""
    mine = [s for s in p.samples if s.policy == name]
    done = [s for s in mine if s.answered]
    refused = sum(s.control_refused for s in mine)
    facts = p.strata.get(name) or {}
    tables = {h: _paired([s for s in done if s.lost is h]) for h in (True, False)}
    est = population([Stratum(facts[h].size, tables[h], facts[h].chance, facts[h].repeat)
                      for h in (True, False) if h in facts], seed=p.seed) if facts else None
    unknown = None
    if est is None and done:
        empty = [("a probe lost" if h else "none lost") for h in (True, False)
                 if h in facts and facts[h].size and not tables[h].n]
        unknown = f"no answered sample where {' or '.join(empty)}: no estimate over every candidate call"
    return PolicyAgreement(
        policy=name, candidates=p.candidates.get(name, 0), samples=len(done),
        failed=len(mine) - len(done) - refused, control_refused=refused,
        **_estimates(est), **_stratum_figures(facts, tables),
        spent_usd=round(sum(usage_cost(r.usage, p.prices) for s in mine for r in (s.policy_reply, s.control_reply)
                            if r is not None and r.usage), 6),
        unknown=unknown, tells_nothing=est is not None and at_chance(est.control.value, est.chance))


def _estimates(est: Any) -> dict[str, Any]:
    """The population estimates over every candidate call, each with its interval (None: none)."""
    if est is None:
        return dict.fromkeys(("agreement", "agreement_interval", "control_agreement", "control_interval",
                              "difference", "difference_interval", "chance_agreement", "repeat_agreement",
                              "above_chance", "above_chance_interval"))
    return {"agreement": est.agreement.value, "agreement_interval": (est.agreement.low, est.agreement.high),
            "control_agreement": est.control.value, "control_interval": (est.control.low, est.control.high),
            "difference": est.difference.value, "difference_interval": (est.difference.low, est.difference.high),
            "chance_agreement": est.chance, "repeat_agreement": est.repeat,
            "above_chance": est.above_chance.value,
            "above_chance_interval": (est.above_chance.low, est.above_chance.high)}


def _stratum_figures(facts: dict[bool, StratumFacts], tables: dict[bool, Paired]) -> dict[str, Any]:
    """Each stratum's own figures: its candidates, samples answered, agreement and Wilson interval."""
    out: dict[str, Any] = {}
    for lost, name in ((True, "lost"), (False, "kept")):
        out.update({f"{name}_candidates": facts[lost].size if lost in facts else 0,
                    f"{name}_samples": tables[lost].n, f"{name}_agreement": _rate(tables[lost]),
                    f"{name}_interval": _wilson(tables[lost])})
    return out


def at_chance(control: float, chance: float) -> bool:
    """Whether the control's agreement is no more than chance's: the comparison tells nothing."""
    return control <= chance + 1e-12


def _paired(samples: list[Sample]) -> Paired:
    """The paired outcomes of answered samples: agreed on the policy's context and on the control."""
    pairs = [(bool(s.agrees(s.policy_reply)), bool(s.agrees(s.control_reply))) for s in samples]
    return Paired(sum(a and b for a, b in pairs), sum(a and not b for a, b in pairs),
                  sum(b and not a for a, b in pairs), sum(not a and not b for a, b in pairs))


def _rate(t: Paired) -> float | None:
    """The policy arm's agreement of a stratum's own samples."""
    return (t.both + t.first_only) / t.n if t.n else None


def _wilson(t: Paired) -> tuple[float, float] | None:
    return tuple(wilson(t.both + t.first_only, t.n)) if t.n else None  # type: ignore[return-value]


@dataclass
class Agreement:
    """A next-action check's result: who was asked, the per-policy figures, every sample, what
    it cost, and whether it was cut short."""

    model: str
    api: str
    policies: list[PolicyAgreement]
    samples: list[Sample]
    plan: Plan
    sent: int  # requests sent (the others were answered from the cache)
    interrupted: bool = False

    @property
    def spent_usd(self) -> float:
        return sum(p.spent_usd for p in self.policies)

    def spent_line(self) -> str:
        asked = sum(r is not None for s in self.samples for r in (s.policy_reply, s.control_reply))
        cut = f" (interrupted: {asked} of {2 * len(self.samples)} asked)" if self.interrupted else ""
        return (f"spent ${self.spent_usd:,.4f} by the usage the API returned: {self.sent} request(s) sent, "
                f"{asked - self.sent} answered from the cache{cut}; the estimate was "
                f"${self.plan.estimate_usd:,.4f} at most")

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "api": self.api, "rule": RULE,
                "policies": [p.to_dict() for p in self.policies],
                "estimate_usd": round(self.plan.estimate_usd, 6), "spent_usd": round(self.spent_usd, 6),
                "sent": self.sent, "interrupted": self.interrupted, "tools": self.plan.tools,
                "system_prompt": self.plan.systems, "temperature": TEMPERATURE[self.api],
                "samples": [s.to_dict() for s in self.samples]}
