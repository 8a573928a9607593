"""Next-action's plan (#30): replay every transcript through every policy, sample the calls where a
policy's context differs from the recording's (stratified by whether it lost a probe), build each
sample's pair of requests (the policy's context and the control) and price them before anything is
sent; ``ask`` then sends what the cache does not answer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any

from ..engine.cost.prices import ModelPrices
from ..engine.loop import ReplayOptions, replay
from ..engine.policy import Policy, load_policy
from ..plain import dataclass
from ..transcripts import Transcript
from .actions import Action, action_of, agree, chance, repeats
from .models import Asker, Reply
from .requests import Pair, Tools, build_pair, pair_cost, system_of, tools_of
from .sampling import Candidate, choose, differs, lost_at


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
    #: how often a random recorded action of its transcript agrees with its recorded one (#46 §2)
    chance: float = 0.0
    #: whether repeating the previous recorded action agrees with it
    repeat: bool = False

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
                "skipped": self.skipped, "chance": round(self.chance, 4), "repeat": self.repeat,
                "policy_arm": arm(self.policy_reply), "control_arm": arm(self.control_reply)}


@dataclass(frozen=True)
class StratumFacts:
    """A stratum's candidate calls: how many, how many are sampled, and their mean chance agreements."""

    size: int
    sampled: int
    chance: float
    repeat: float


@dataclass
class Plan:
    """What will be asked: the samples, per policy how many calls were candidates, the tools'
    source, and the estimate of what is not in the cache."""

    samples: list[Sample]
    candidates: dict[str, int]
    tools: dict[str, str]  # transcript -> "recorded" or "built"
    prices: ModelPrices
    #: per policy, per stratum (a probe lost: True), its candidates and their chance agreements
    #: (a random recorded action, the previous one repeated), known offline for all of them
    strata: dict[str, dict[bool, "StratumFacts"]] = field(default_factory=dict)
    seed: int = 0
    systems: dict[str, str] = field(default_factory=dict)  # transcript -> where its system prompt comes from
    requests: int = 0  # requests the cache does not answer
    cached: int = 0  # requests it answers
    notes: list[str] = field(default_factory=list)
    #: the asked model's window where known (genai-prices): a control over it is not sent
    window: int | None = None

    @property
    def estimate_usd(self) -> float:
        return sum(s.estimate_usd for s in self.samples)

    @property
    def enough_usd(self) -> float:
        """The --max-cost that lets the estimate be spent (``ENOUGH_MARGIN`` over it, a cent at
        least: the requests' tokens are an estimate too)."""
        return max(self.estimate_usd * (1 + ENOUGH_MARGIN), 0.01)


#: what the --max-cost next-action suggests leaves over its estimate, said with it
ENOUGH_MARGIN = 0.05


def plan(transcripts: list[Transcript], policies: list[Policy], *, samples: int, seed: int, asker: Asker,
         prices: ModelPrices, calibrations: list[Any] | None = None, price_table: Any = None,
         keep_recorded_compactions: bool = False, system_prompt: tuple[str, str] | None = None) -> Plan:
    """Replay every transcript through every policy, sample the calls, build and price their
    requests (nothing is sent). ``system_prompt``: the text and file of the system prompt sent where
    a format records none (else a stand-in, ``requests.system_of``)."""
    runs = _Runs(transcripts, calibrations or [None] * len(transcripts), price_table, keep_recorded_compactions)
    picks = _pick(runs, policies, samples, seed)
    built = _Built()
    for t in range(len(transcripts)):
        _build_samples(runs, t, policies, picks, asker.options, system_prompt, built)
    built.samples.sort(key=lambda s: ([p.name for p in policies].index(s.policy), s.transcript, s.call))
    result = Plan(built.samples, picks.candidates, built.tools, prices, notes=built.notes, strata=picks.strata,
                  seed=seed, systems=built.systems)
    _price(result, asker, prices)
    return result


class _Runs:
    """The replays a plan makes: each transcript through a policy, keeping the contexts asked for."""

    def __init__(self, transcripts: list[Transcript], calibrations: list[Any], price_table: Any,
                 keep_recorded_compactions: bool) -> None:
        self.transcripts, self.calibrations, self.price_table = transcripts, calibrations, price_table
        self.keep_recorded_compactions = keep_recorded_compactions

    def __call__(self, t: int, policy: Policy, keep: set[int] | frozenset[int] = frozenset(),
                 recorded: bool = False) -> Any:
        return replay(self.transcripts[t], policy, ReplayOptions(
            keep_recorded_compactions=self.keep_recorded_compactions or recorded, prices=self.price_table,
            calibration=self.calibrations[t], keep_contexts=keep))


class _Picks:
    """Each policy's sampled calls (with the probes each lost), its candidates, its strata, and
    each transcript's recorded actions with each call's chance agreement."""

    def __init__(self) -> None:
        self.chosen: dict[str, list[tuple[Candidate, tuple[str, ...]]]] = {}
        self.candidates: dict[str, int] = {}
        self.strata: dict[str, dict[bool, StratumFacts]] = {}
        self.recorded: dict[int, list[Action]] = {}  # each transcript's recorded actions, by call
        self._chance: dict[tuple[int, int], tuple[float, bool]] = {}  # (transcript, call) -> (chance, repeat)

    def chance_at(self, t: int, call: int) -> tuple[float, bool]:
        if (t, call) not in self._chance:
            self._chance[(t, call)] = (chance(self.recorded[t], call), repeats(self.recorded[t], call))
        return self._chance[(t, call)]


def _pick(runs: _Runs, policies: list[Policy], samples: int, seed: int) -> _Picks:
    """For every policy, the calls where its context differs from the recording's and the
    recording acted (the candidates), and a sample of them stratified by whether it lost a probe."""
    picks = _Picks()
    for policy in policies:
        found: list[Candidate] = []
        losses: dict[tuple[int, int], tuple[str, ...]] = {}
        for t, transcript in enumerate(runs.transcripts):
            r = runs(t, policy)
            if t not in picks.recorded:
                picks.recorded[t] = [action_of(_reply(transcript, record.message_index)) for record in r.calls]
            lost: dict[int, list[str]] = {}
            for outcome in r.probe_ledger:
                if outcome.status == "lost":
                    lost.setdefault(outcome.call, []).append(outcome.probe)
            for record in r.calls:
                if differs(record) and picks.recorded[t][record.call].kind != "none":
                    found.append(Candidate(t, record.call, lost_at(record)))
                    losses[(t, record.call)] = tuple(lost.get(record.call, ()))
        picks.candidates[policy.name] = len(found)
        picked = choose(found, samples, seed, policy.name)
        picks.chosen[policy.name] = [(c, losses[(c.transcript, c.call)]) for c in picked]
        picks.strata[policy.name] = {h: _stratum(picks, found, picked, h) for h in (True, False)}
    return picks


def _stratum(picks: _Picks, found: list[Candidate], picked: list[Candidate], lost: bool) -> StratumFacts:
    mine = [picks.chance_at(c.transcript, c.call) for c in found if c.lost is lost]
    return StratumFacts(len(mine), sum(c.lost is lost for c in picked),
                        sum(x for x, _ in mine) / len(mine) if mine else 0.0,
                        sum(y for _, y in mine) / len(mine) if mine else 0.0)


class _Built:
    """The samples a plan builds, and what it says of each transcript's tools and system prompt."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.tools: dict[str, str] = {}
        self.systems: dict[str, str] = {}  # transcript -> where its requests' system prompt comes from
        self.notes: list[str] = []


def _build_samples(runs: _Runs, t: int, policies: list[Policy], picks: _Picks, o: Any,
                   system_prompt: tuple[str, str] | None, built: _Built) -> None:
    """A transcript's sampled calls as request pairs: each policy's context against the control,
    what the agent saw (no policy's compaction, the recording's own replayed: #46 §4)."""
    transcript = runs.transcripts[t]
    wanted = {c.call for picks_ in picks.chosen.values() for c, _ in picks_ if c.transcript == t}
    if not wanted:
        return
    control = runs(t, load_policy("none"), wanted, recorded=True)
    if transcript.compactions:
        built.notes.append(f"{transcript.path}: the control replays the {len(transcript.compactions)} compaction(s) "
                           "the recording made (what the agent saw)")
    kit: Tools = tools_of(transcript.entries)  # (what no API takes is said once per transcript)
    built.tools[transcript.path] = kit.source
    system, built.systems[transcript.path] = system_of(transcript.system, transcript.format, system_prompt)
    known: dict[int, Tools] = {}  # the tools known at a call: used before it (no look-ahead, #46 §3)
    if kit.left_out:
        built.notes.append(f"{transcript.path}: tool(s) {', '.join(kit.left_out[:5])} left out (no API takes such a name)")
    for policy in policies:
        calls = {c.call for c, _ in picks.chosen[policy.name] if c.transcript == t}
        if not calls:
            continue
        r = runs(t, policy, calls)
        per_token = r.summary.calibration.get("chars_per_token") or 4.0  # (as calibrated)
        by_call = {record.call: record for record in r.calls}
        for c, lost_probes in picks.chosen[policy.name]:
            if c.transcript != t:
                continue
            at = by_call[c.call].message_index
            if at not in known:
                known[at] = tools_of(transcript.entries[:at])
            pair = build_pair(o.api, o.model, o.max_tokens, system, known[at], r.contexts[c.call],
                              control.contexts[c.call], per_token)
            odds, again = picks.chance_at(t, c.call)
            built.samples.append(Sample(policy.name, transcript.path, c.call, lost_probes, picks.recorded[t][c.call],
                                        pair, chance=odds, repeat=again))


def _price(result: Plan, asker: Asker, prices: ModelPrices) -> None:
    """Each sample's estimated cost, in the order the requests are sent (a request an earlier one
    makes, or the cache holds, costs nothing; a cached prefix an earlier one wrote is read); a
    control over the asked model's window is not sent."""
    from ..engine.cost.prices import known_window

    o = asker.options
    written: set[str] = set()  # the cached prefixes the requests before write (in the order they are sent)
    asked: set[str] = set()  # the requests an earlier sample makes (the same control of one call, say)

    def answered(body: dict[str, Any]) -> bool:
        key = asker.key_of(body)
        known = key in asked or asker.cached(body, key) is not None
        asked.add(key)
        return known

    window = result.window = known_window(o.model)
    for s in result.samples:
        if window and s.pair.control_tokens > window:  # (the asked model would refuse it: not sent)
            s.skipped = f"the control's {s.pair.control_tokens:,} tokens are over {o.model}'s window ({window:,})"
            continue
        hit = [answered(s.pair.policy_body), answered(s.pair.control_body)]
        result.cached += sum(hit)
        result.requests += 2 - sum(hit)
        s.estimate_usd = pair_cost(s.pair, prices, o.max_tokens, hit[0], hit[1], written)


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
