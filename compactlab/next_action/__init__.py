"""Next-action agreement (issue #30): would the agent still have acted the same on the compacted
context? A sampled, paired, cached check with a live model.

For each policy, calls where its context differs from no compaction's are sampled
(``sampling``); for each, a model is asked twice (``requests``, ``models``): on the context the
policy sent, and on the context with no compaction (the control), both with the recorded system
prompt and tools. Each reply's first action is compared with the action the agent recorded next
(``actions``). Agreement on the policy's context, on the control, and their paired difference with
an interval (``stats``) say how much of the agent's behaviour the policy kept; the control says how
much of the recorded behaviour the model reproduces at all (a different model, or the same one at
another time, acts differently on the very same context).

``plan`` replays and samples and prices the requests before anything is sent; ``ask`` sends what
the cache does not answer; ``tally`` makes the per-policy figures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine.policy import Policy, load_policy
from ..engine.cost.prices import ModelPrices
from ..engine.loop import replay
from ..transcripts import Transcript
from .actions import Action, action_of, agree
from .models import Asker, ModelOptions, Reply
from .requests import Pair, Tools, build_pair, pair_cost, tools_of, usage_cost
from .sampling import Candidate, choose, differs, lost_at
from .stats import Paired, paired_difference, wilson

__all__ = ["Agreement", "Plan", "PolicyAgreement", "Sample", "ask", "plan", "tally"]


@dataclass
class Sample:
    """One sampled call of one policy, its two requests and, once asked, the two replies."""

    policy: str
    transcript: str
    call: int
    lost_probes: tuple[str, ...]  # the probes of the recorded reply the policy's context lost
    recorded: Action
    pair: Pair
    estimate_usd: float = 0.0  # what its requests not answered from the cache will cost at most
    policy_reply: Reply | None = None
    control_reply: Reply | None = None
    #: why the sample is not asked: its control is longer than the asked model takes (None: asked)
    skipped: str | None = None

    @property
    def lost(self) -> bool:
        return bool(self.lost_probes)

    @property
    def control_refused(self) -> bool:
        """The control is one the asked model refuses (over its window, known before asking, or
        rejected when asked): the sample says nothing of the policy and is counted apart, never
        as a disagreement of the control (#46 §4)."""
        reply = self.control_reply
        return self.skipped is not None or (reply is not None and reply.error is not None
                                            and reply.error.startswith("rejected"))

    @property
    def answered(self) -> bool:
        """Both arms have an answer (the policy's rejected request is one: its context is what the
        API refused; a failed one is not), and the control was not refused."""
        return not self.control_refused and all(r is not None and (r.error is None or r.error.startswith("rejected"))
                                                for r in (self.policy_reply, self.control_reply))

    def agrees(self, reply: Reply | None) -> bool | None:
        if reply is None or (reply.error is not None and not reply.error.startswith("rejected")):
            return None
        return reply.error is None and agree(self.recorded, reply.action)

    def to_dict(self) -> dict[str, Any]:
        def arm(reply: Reply | None) -> dict[str, Any] | None:
            if reply is None:
                return None
            return {"action": reply.action.describe(), "agrees": self.agrees(reply), "cached": reply.cached,
                    "error": reply.error, "usage": reply.usage}

        return {"policy": self.policy, "transcript": self.transcript, "call": self.call,
                "lost_probes": list(self.lost_probes), "recorded": self.recorded.describe(),
                "policy_tokens": self.pair.policy_tokens, "control_tokens": self.pair.control_tokens,
                "prefix_tokens": self.pair.prefix_tokens, "estimate_usd": round(self.estimate_usd, 6),
                "skipped": self.skipped, "policy_arm": arm(self.policy_reply), "control_arm": arm(self.control_reply)}


@dataclass
class Plan:
    """What will be asked: the samples, per policy how many calls were candidates, the tools'
    source, and the estimate of what is not in the cache."""

    samples: list[Sample]
    candidates: dict[str, int]
    tools: dict[str, str]  # transcript -> "recorded" or "built"
    prices: ModelPrices
    requests: int = 0  # requests the cache does not answer
    cached: int = 0  # requests it answers
    notes: list[str] = field(default_factory=list)

    @property
    def estimate_usd(self) -> float:
        return sum(s.estimate_usd for s in self.samples)


def plan(transcripts: list[Transcript], policies: list[Policy], *, samples: int, seed: int, asker: Asker,
         prices: ModelPrices, calibrations: list[Any] | None = None, price_table: Any = None,
         keep_recorded_compactions: bool = False) -> Plan:
    """Replay every transcript through every policy, sample the calls, build and price their
    requests (nothing is sent)."""
    calibrations = calibrations or [None] * len(transcripts)
    o = asker.options

    def run(t: int, policy: Policy, keep: set[int] | frozenset[int] = frozenset()) -> Any:
        return replay(transcripts[t], policy, calibration=calibrations[t], prices=price_table,
                      keep_recorded_compactions=keep_recorded_compactions, keep_contexts=keep)

    chosen: dict[str, list[tuple[Candidate, tuple[str, ...]]]] = {}
    candidates: dict[str, int] = {}
    for policy in policies:
        found: list[Candidate] = []
        losses: dict[tuple[int, int], tuple[str, ...]] = {}
        for t, transcript in enumerate(transcripts):
            r = run(t, policy)
            lost: dict[int, list[str]] = {}
            for outcome in r.probe_ledger:
                if outcome.status == "lost":
                    lost.setdefault(outcome.call, []).append(outcome.probe)
            for record in r.calls:
                if differs(record) and action_of(_reply(transcript, record.message_index)).kind != "none":
                    found.append(Candidate(t, record.call, lost_at(record)))
                    losses[(t, record.call)] = tuple(lost.get(record.call, ()))
        candidates[policy.name] = len(found)
        chosen[policy.name] = [(c, losses[(c.transcript, c.call)]) for c in choose(found, samples, seed, policy.name)]
    none = load_policy("none")
    out: list[Sample] = []
    tools: dict[str, str] = {}
    notes: list[str] = []
    for t, transcript in enumerate(transcripts):
        wanted = {c.call for picks in chosen.values() for c, _ in picks if c.transcript == t}
        if not wanted:
            continue
        control = run(t, none, wanted)
        kit: Tools = tools_of(transcript.entries)  # (what no API takes is said once per transcript)
        tools[transcript.path] = kit.source
        known: dict[int, Tools] = {}  # the tools known at a call: used before it (no look-ahead, #46 §3)
        if kit.left_out:
            notes.append(f"{transcript.path}: tool(s) {', '.join(kit.left_out[:5])} left out (no API takes such a name)")
        for policy in policies:
            calls = {c.call for c, _ in chosen[policy.name] if c.transcript == t}
            if not calls:
                continue
            r = run(t, policy, calls)
            per_token = r.summary.calibration.get("chars_per_token") or 4.0  # (as calibrated)
            by_call = {record.call: record for record in r.calls}
            for c, lost_probes in chosen[policy.name]:
                if c.transcript != t:
                    continue
                record = by_call[c.call]
                at = record.message_index
                if at not in known:
                    known[at] = tools_of(transcript.entries[:at])
                pair = build_pair(o.api, o.model, o.max_tokens, transcript.system, known[at], r.contexts[c.call],
                                  control.contexts[c.call], per_token)
                out.append(Sample(policy.name, transcript.path, c.call, lost_probes,
                                  action_of(_reply(transcript, record.message_index)), pair))
    out.sort(key=lambda s: ([p.name for p in policies].index(s.policy), s.transcript, s.call))
    result = Plan(out, candidates, tools, prices, notes=notes)
    written: set[str] = set()  # the cached prefixes the requests before write (in the order they are sent)
    asked: set[str] = set()  # the requests an earlier sample makes (the same control of one call, say)

    def answered(body: dict[str, Any]) -> bool:
        key = asker.key_of(body)
        known = key in asked or asker.cached(body, key) is not None
        asked.add(key)
        return known

    from ..engine.cost.prices import known_window

    window = known_window(o.model)
    for s in out:
        if window and s.pair.control_tokens > window:  # (the asked model would refuse it: not sent)
            s.skipped = f"the control's {s.pair.control_tokens:,} tokens are over {o.model}'s window ({window:,})"
            continue
        hit = [answered(s.pair.policy_body), answered(s.pair.control_body)]
        result.cached += sum(hit)
        result.requests += 2 - sum(hit)
        s.estimate_usd = pair_cost(s.pair, prices, o.max_tokens, hit[0], hit[1], written)
    return result


def _reply(transcript: Transcript, index: int) -> dict | None:
    entries = transcript.entries
    return entries[index].message if 0 <= index < len(entries) else None


def ask(p: Plan, asker: Asker, on_request: Callable[[Reply], None] = lambda _: None) -> None:
    """Ask both arms of every sample, the policy's first (its shared prefix is then in the prompt
    cache for the control). Each reply is kept as it comes: an interrupt keeps what finished."""
    for s in p.samples:
        if s.skipped is not None:
            continue
        if s.policy_reply is None:
            s.policy_reply = asker.ask(s.pair.policy_body)
            on_request(s.policy_reply)
        if s.control_reply is None:
            s.control_reply = asker.ask(s.pair.control_body)
            on_request(s.control_reply)


@dataclass
class PolicyAgreement:
    """A policy's figures: agreement on its context and on the control over the samples answered
    in both arms, their paired difference with Newcombe's 95% interval, and agreement on the
    policy's context where a probe was lost and where none was."""

    policy: str
    candidates: int
    samples: int  # answered in both arms
    failed: int  # samples with a failed request
    control_refused: int  # samples whose control the asked model refuses (over its window): counted apart
    agreement: float | None
    agreement_interval: tuple[float, float] | None
    control_agreement: float | None
    difference: float | None
    difference_interval: tuple[float, float] | None
    lost_samples: int
    lost_agreement: float | None
    kept_samples: int
    kept_agreement: float | None
    spent_usd: float  # billed by the usage the API returned (replies from the cache cost nothing)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for key in ("agreement_interval", "difference_interval"):
            out[key] = list(out[key]) if out[key] is not None else None
        return out


def tally(p: Plan, policies: list[str]) -> list[PolicyAgreement]:
    out = []
    for name in policies:
        mine = [s for s in p.samples if s.policy == name]
        done = [s for s in mine if s.answered]
        first = [bool(s.agrees(s.policy_reply)) for s in done]
        second = [bool(s.agrees(s.control_reply)) for s in done]
        table = Paired(sum(a and b for a, b in zip(first, second)), sum(a and not b for a, b in zip(first, second)),
                       sum(b and not a for a, b in zip(first, second)), sum(not a and not b for a, b in zip(first, second)))
        n = len(done)
        lost = [ok for s, ok in zip(done, first) if s.lost]
        kept = [ok for s, ok in zip(done, first) if not s.lost]
        spent = sum(usage_cost(r.usage, p.prices) for s in mine for r in (s.policy_reply, s.control_reply)
                    if r is not None and r.usage)
        refused = sum(s.control_refused for s in mine)
        out.append(PolicyAgreement(
            policy=name, candidates=p.candidates.get(name, 0), samples=n, failed=len(mine) - n - refused,
            control_refused=refused,
            agreement=sum(first) / n if n else None,
            agreement_interval=tuple(wilson(sum(first), n)) if n else None,  # type: ignore[arg-type]
            control_agreement=sum(second) / n if n else None,
            difference=table.difference if n else None,
            difference_interval=tuple(paired_difference(table)) if n else None,  # type: ignore[arg-type]
            lost_samples=len(lost), lost_agreement=sum(lost) / len(lost) if lost else None,
            kept_samples=len(kept), kept_agreement=sum(kept) / len(kept) if kept else None,
            spent_usd=round(spent, 6)))
    return out


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
        return {"model": self.model, "api": self.api, "rule": "at least 2 of tool, target and command class "
                "(those the recorded action has); text replies: word similarity >= 0.5",
                "policies": [p.to_dict() for p in self.policies],
                "estimate_usd": round(self.plan.estimate_usd, 6), "spent_usd": round(self.spent_usd, 6),
                "sent": self.sent, "interrupted": self.interrupted, "tools": self.plan.tools,
                "samples": [s.to_dict() for s in self.samples]}
