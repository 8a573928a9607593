"""The replay engine (SPEC §3): walk a transcript call by call through a policy.

For each call (recorded assistant message): append the messages before it to the working
context (running manual compaction where the previous reply called the compact tool), run the
policy's cheap layers and the summary layer, compact reactively while over the window, then
check and measure the context as it would be sent, keep a TurnRecord, and append the recorded
reply. The context only grows by appends between calls, and layers report the first position
they changed, so sizes and invariants are updated from there instead of from scratch.

The engine walks the calls of a feed (``feeds``: a loaded transcript, whose raw baseline is
computed once and shared by every run over it; a stream read as it goes, its baseline built
alongside, no message outliving its place in the working context; or the read-ahead process).
Prices apply to the token counts once the run is over, when a stream has told which model it
recorded.
"""

from __future__ import annotations

import time
from dataclasses import replace
from operator import attrgetter
from os import PathLike
from collections.abc import Callable, Collection, Iterable
from typing import Any, Protocol

from ..plain import NamedTuple
from .context import Context
from .cost.cache_rules import rules_for
from .cost.pricing import TTL_SECONDS, price_run, prompt_of, seconds
from .cost.prices import ModelPrices, PriceTable, load_prices
from .window import DEFAULT_WINDOW, Window, resolve as resolve_window
from .feeds import Call, Feed, as_feed
from .layers import CHEAP, NOTHING, CallFacts, LayerStats, RunEnv, manual, reactive, summary
from .layers.summary import Breaker, trigger_of, trigger_said
from ..transcripts.messages import Entry, Message, add_tool_names, is_prompt
from ..plumbing.outputs import OutputDir
from .policy import Policy, fingerprint_of
from .records import ACTIONS, CompactionEvent, Run, SummaryCalls, TurnRecord, summarize
from ..core import chosen as chosen_core, native_module
from .measures import CallAt, Recall, measures_for
from .keeping import PythonSteps, keeping_turns, layer_turns, shared_replacements
from .sizing import Calibration, TokenEstimator, list_chars
from ..summarizers import StubSummarizer, Summarizer
from ..transcripts import RecordedCompaction, Transcript, TranscriptStream


#: ``Turns._facts``' default: the recorded tokens not read by its caller
_UNREAD: Any = object()
#: a LayerStats' counts of ACTIONS, in its order (asked in C), and the layers they stand for
_ACTIONS = attrgetter(*ACTIONS)
_LAYERS = tuple(ACTIONS.values())
#: the layers of an event where snip alone, micro alone, and both acted (``_event``'s order)
_NAMED = tuple([layer for layer, stat in zip(_LAYERS, ACTIONS) if stat in acted] for acted in
               (("snipped",), ("micro_compacted",), ("snipped", "micro_compacted")))
_CHARS = attrgetter("chars")
#: each counter of ``ACTIONS`` and the layer an event names for it, in order (the native loop's)
_ACTION_ITEMS = list(ACTIONS.items())


class TokenCounter(Protocol):
    def count(self, messages: list[dict]) -> int: ...


#: ``ReplayOptions.calibration``'s default: the command line's calibration (see there)
AUTO = "auto"


class ReplayOptions(NamedTuple):
    """How a replay runs and what it judges by (every field may be left out).

    ``prices`` are a model's, or a price table (default: the built-in one) to look up the model
    the transcript recorded (else the table's default model). A ``counter`` (exact token counts,
    e.g. ``messages.count_tokens``) measures the contexts sent and the raw ones, and decides the
    reactive window; layer triggers keep using the estimator. It needs a loaded transcript.
    ``cache_ttl`` (``5m`` or ``1h``): the prompt cache's lifetime; default the recording's.
    ``cache_model``: the provider whose prompt-cache rules apply (``cache_rules.RULES``); default
    the one serving the model the recording names. ``on_call`` sees each call's record as it is
    made. ``keep_contexts``: the calls whose sent context (its messages) the run keeps, in
    ``Run.contexts`` (the next-action check asks a model on them). ``calibration``: the fit to the
    recorded usage (``calibration.calibrate``), which replaces the policy's size estimate (and so
    is part of the run's policy and fingerprint); the summary says which estimate the run used.
    ``AUTO`` (the default): ``compactlab.replay`` fits a loaded transcript's as the command line
    does (``jobs.replay.replay``); this engine's own ``replay``, which cannot (a fit replays the
    recording), takes the policy's estimate, as with None.
    ``window``: the context window the calls are judged on (``--window``; default the
    recording's, ``engine/window.py``); the policy's own sets only its reactive trigger.
    ``recall``: the recall measure's implementation (default ``measures.RECALL``; a test holds the
    fast one to the reference, ``measures.Recall``)."""

    summarizer: Summarizer | None = None
    estimator: TokenEstimator | None = None
    keep_recorded_compactions: bool = False
    prices: ModelPrices | PriceTable | None = None
    counter: TokenCounter | None = None
    cache_ttl: str | None = None
    calibration: Calibration | str | None = AUTO
    cache_model: str | None = None
    on_call: Callable[[TurnRecord], None] | None = None
    keep_contexts: Collection[int] = ()
    window: int | None = None
    recall: type[Recall] | None = None


class ReplayOutput(NamedTuple):
    """Where a replay writes: with no ``out_dir`` nothing is written; with one, the persisted
    outputs are written into a fresh folder put in its place when the run ends (and removed if it
    fails). ``out``: a prepared output folder the caller owns (commits or rolls back) instead, to
    write its reports beside the persisted outputs first."""

    out_dir: str | PathLike | None = None
    out: OutputDir | None = None
    dry_run: bool = False
    write_transcripts: bool = False


_OPTION_FIELDS = frozenset(ReplayOptions._fields)
_OUTPUT_FIELDS = frozenset(ReplayOutput._fields)


def replay(transcript: Transcript | TranscriptStream | Feed, policy: Policy, options: ReplayOptions = ReplayOptions(),
           output: ReplayOutput = ReplayOutput(), **given: Any) -> Run:
    """Replay ``transcript`` through ``policy``, run as ``options`` say and written where ``output``
    says (nowhere by default). ``given``: a field of either record by its name, a shorthand for
    one or two of them (``replay(t, policy, calibration=fit)``); any other name is a TypeError."""
    if given:
        options, output = _given(options, output, given)
    o = options
    summarizer, estimator, keep_recorded_compactions, prices, counter = (
        o.summarizer, o.estimator, o.keep_recorded_compactions, o.prices, o.counter)
    cache_ttl, calibration, cache_model, on_call, keep_contexts, window, recall = (
        o.cache_ttl, o.calibration, o.cache_model, o.on_call, o.keep_contexts, o.window, o.recall)
    out_dir, out, dry_run, write_transcripts = output.out_dir, output.out, output.dry_run, output.write_transcripts
    # (a policy that never acts, the recording's compactions not kept, cannot lose a probe: none is looked for)
    looks = policy.acts or keep_recorded_compactions
    feed = as_feed(transcript, probes=looks)
    if feed.entries is None and counter:
        raise ValueError("exact token counts need the whole raw history: load the transcript, do not stream it")
    started = time.perf_counter()
    if isinstance(calibration, str):
        if calibration != AUTO:
            raise ValueError(f"calibration={calibration!r}: a Calibration, None or {AUTO!r}")
        calibration = None  # (AUTO: fitted above this engine, where it can be: ``jobs.replay.replay``)
    if calibration is not None:
        policy = replace(policy, size=replace(policy.size, chars_per_token=calibration.chars_per_token,
                                              overhead_tokens=calibration.overhead_tokens))
        used = calibration.to_dict()
    elif estimator is not None:
        used = Calibration(estimator.overhead_tokens, estimator.chars_per_token, None, 0, "given estimator").to_dict()
    else:
        used = Calibration(policy.size.overhead_tokens, policy.size.chars_per_token, None, 0, "policy").to_dict()
    estimator = estimator or TokenEstimator(policy.size.chars_per_token, policy.size.overhead_tokens)
    owned = out is None
    if out is None:
        out = OutputDir(out_dir, dry_run)
    env = RunEnv(
        summarizer=summarizer or StubSummarizer(),
        estimator=estimator,
        out=out,
        tool_names={},  # filled as the calls are read: a name is known from its tool_use on
        write_transcripts=write_transcripts,
    )
    restarts = {c.position: c for c in feed.compactions} if keep_recorded_compactions else None
    batches = feed.call_batches(restarts)
    # (--price-model: one model's prices, no table to give a window)
    table = (prices or load_prices()) if isinstance(prices, PriceTable) or prices is None else None
    turns = Turns(policy, env, feed, restarts, counter, LoopOptions(
        cache_model=cache_model, cache_ttl=cache_ttl, window=window, keep_contexts=keep_contexts,
        configured_window=table.window if table is not None else _no_window, recall=recall, probes=looks))
    try:
        if owned:
            out.prepare()
        records = turns.run(batches, on_call)
        pricing = price_run(records, feed, prices, cache_ttl, keep_recorded_compactions, rules=turns.cache.rules,
                            rules_given=cache_model is not None,
                            reply_tokens=turns.cache.replies,
                            summarizer_model=getattr(env.summarizer, "model", None),
                            acted=any(getattr(turns.totals, stat) for stat in ACTIONS),
                            summary_calls=turns.summary_calls.calls)
        if feed.streamed or not records:
            # (a stream's usage is known whole only now; a loaded one's was at call 0, if it has one)
            turns.judge_again(records)
    except BaseException:
        if owned:
            out.rollback()
        feed.close()
        raise
    if owned:
        out.commit()

    resolved = policy.resolved()
    measures = turns.measures
    return Run(
        summary=summarize(records, turns.totals, transcript=feed, policy=policy.name,
                          fingerprint=fingerprint_of(resolved), pricing=pricing, calibration=used,
                          persisted_files=env.ledger.persisted_files, saved_transcripts=env.ledger.saved_transcripts,
                          window=(turns.judged.tokens, turns.judged.describe()),
                          summary_request=policy.summary.request, raw_overflows=turns.raw_overflows(records),
                          core=turns.core, summary_calls=turns.summary_calls,
                          trigger=trigger_said(policy.summary, env), **measures.totals()),
        calls=records,
        policy=resolved,
        failed_summaries=env.ledger.failed_summaries,
        probe_ledger=measures.ledger(),
        events=measures.charged(turns.events),
        out_dir=out.path,
        timing={"runtime_s": round(time.perf_counter() - started, 4)},
        contexts=turns.contexts,
    )




def _given(options: ReplayOptions, output: ReplayOutput, given: dict[str, Any]) -> tuple[ReplayOptions, ReplayOutput]:
    unknown = sorted(set(given) - _OPTION_FIELDS - _OUTPUT_FIELDS)
    if unknown:
        raise TypeError(f"replay() got an unexpected keyword argument {unknown[0]!r}")
    return (options._replace(**{k: v for k, v in given.items() if k in _OPTION_FIELDS}),
            output._replace(**{k: v for k, v in given.items() if k in _OUTPUT_FIELDS}))


def _no_window(model: str | None) -> tuple[int, str] | None:
    return None


class LoopOptions(NamedTuple):
    """The run-wide options the loop reads: whose prompt cache (``--cache-model``), its TTL
    (``--cache-ttl``), the window every call is judged on (``--window``), the window a user's
    price table gives a model (``PriceTable.window``), and the calls whose context is kept."""

    cache_model: str | None = None
    cache_ttl: str | None = None
    window: int | None = None
    configured_window: Callable[[str | None], tuple[int, str] | None] = _no_window
    keep_contexts: Collection[int] = ()
    recall: type[Recall] | None = None  # the recall measure's implementation (None: measures.RECALL)
    #: whether the run can lose a probe (its policy acts, or the recording's compactions are kept):
    #: else recall is 1.000 by construction and no probe is looked for
    probes: bool = True


class Turns:
    """The turn loop of SPEC §3, one call at a time: :meth:`turn` takes the messages since the
    previous call and the recorded reply, and returns the call's record. Its steps, in order:

    1. append the messages since the previous call (restarting from a recorded compaction's
       summary where the recording compacted), running a manual compaction the previous reply
       asked for before or after them;
    2. the cheap layers in the policy's order, then the summary layer;
    3. while the context is over the window: reactive compaction, then step 2 again;
    4, 5. measure the context sent (``measures``: the prompt cache, whose unchanged prefix is read
       and the rest written, the raw baseline, violations of the API's rules, retention, recall),
       each a row into the call's record, the call's facts told once;
    6. append the recorded reply.
    """

    def __init__(self, policy: Policy, env: RunEnv, feed: Feed, restarts: dict[int, RecordedCompaction] | None,
                 counter: TokenCounter | None, options: LoopOptions = LoopOptions()) -> None:
        self.policy, self.env, self.restarts, self.counter = policy, env, restarts, counter
        self.raw_entries = feed.entries
        #: each reply's recorded usage and time, as far as read (for the call's facts: ``_facts``)
        self.usage: dict[int, dict] = feed.usage
        self.model: Callable[[], str | None] = lambda: feed.model  # the recording's model, as far as read
        self.metadata: Callable[[], dict[str, Any]] = lambda: feed.metadata
        #: the compactions the recording made, as far as read (a replay that drops them departs there)
        self.recorded_compactions: Callable[[], list[RecordedCompaction]] = lambda: feed.compactions
        self.format: str | None = getattr(feed, "format", None)
        self.cache_model = options.cache_model  # --cache-model: the provider whose cache rules apply
        self.ttl_given = options.cache_ttl  # --cache-ttl
        self.window_given = options.window  # --window
        #: the window a user's price table gives a model, and which table (None: none does)
        self.configured_window = options.configured_window
        self.keep_contexts = options.keep_contexts  # the calls whose sent context is kept
        self.last_time: float | None = None
        self.last_model: str | None = None  # (the previous call's model: the prompt cache is per model)
        self.as_recorded = True  # the context is what the recording sent (no layer has acted yet)
        #: whether the whole history is still what the recording sent (no recorded compaction
        #: passed): as_recorded for a policy that never acts, no compaction's
        self.raw_as_recorded = True
        #: per call, whether the whole history sent then is one the recording shows answered
        self.raw_answered: list[bool] = []
        self.previous_pos: int | None = None
        self.before_previous: int | None = None
        self._usage_keys: list[int] = []
        self.cheap = [(CHEAP[name], policy.config_for(name)) for name in policy.order if getattr(policy, name).enabled]
        #: what reactive and manual compaction run by: their tables and the summary's
        self.reactive_config, self.manual_config = policy.config_for("reactive"), policy.config_for("manual")
        #: the reactive trigger: the policy's own window, else the recording's (at the first call)
        self.window = policy.reactive.window_tokens
        #: the window every call is judged on (engine/window.py; at the first call, again at the end)
        self.judged = Window(policy.reactive.window_tokens or DEFAULT_WINDOW, "not resolved yet")
        self.judged_model: str | None = None  # the model the window was resolved for
        self.manual_tool = policy.manual.tool if policy.manual.enabled else None
        self.context = Context()
        # (a stream's references are let go as they are used)
        #: the core that runs the per-call measures it has (compactlab/core.py: chosen once a run)
        self.core = chosen_core()
        memo = None if feed.streamed else feed.memo  # (what a loaded recording's runs share)
        self.measures = measures_for(feed.baseline, env, counter=counter, entries=feed.entries,
                                     keep_refs=not feed.streamed, recall=options.recall, core=self.core,
                                     acts=options.probes, memo=memo)
        self.cache = self.measures.prompt_cache  # (the layers' facts read what it last sent)
        #: the native loop of a policy that keeps every message (``keeping.py``; None: this one runs)
        self.keeping = keeping_turns(self.measures, probes=options.probes,
                                     keeps_contexts=bool(options.keep_contexts), acts=policy.acts)
        #: the native loop of a policy made of snip, micro and the summary, and its summary step
        #: (``keeping.py``; None: this one runs)
        layered = None if self.keeping is not None else layer_turns(
            self.measures, policy, env, restarts=restarts is not None, keeps_contexts=bool(options.keep_contexts),
            shared=shared_replacements(memo, len(feed.entries or ())))
        self.layered: Any = layered[0] if layered is not None else None
        #: what the run's events are made of: the native core's held in Rust where its loop runs
        #: (``records.rs``; the reference's fields), else the reference
        self.event_class: type = CompactionEvent if layered is None else getattr(
            native_module(), "CompactionEvent", CompactionEvent)
        self.python_steps: PythonSteps | None = layered[1] if layered is not None else None
        #: the native loop takes a batch of calls at a time (``_batch``): no step of the policy reads a
        #: call's times or prompts, nor the recorded tokens (those ``_layered`` tells it a call at a time)
        self.batched = self.python_steps is not None and not self.python_steps.timed and not (
            self.python_steps.unit == "recorded" and policy.summary.enabled)
        self.summary_trigger = 0  # (the summary's trigger for this recording: known at the first call)
        self.ttl = "5m"  # the prompt cache's TTL the run is priced with (a summary request's reads expire by it)
        self.totals = LayerStats()
        #: each call's summary requests (``SummaryCalls``): priced at that call's model and time
        self.summary_calls = SummaryCalls()
        self.done = 0  # messages of the transcript in the context so far
        self.manual_pending = False  # the previous reply called the manual compaction tool
        self.events: list[CompactionEvent] = []  # the calls at which the policy changed the context
        self.contexts: dict[int, list[Message]] = {}

    def run(self, batches: Iterable[list[Call]], on_call: Callable[[TurnRecord], None] | None = None) -> list[TurnRecord]:
        """Every call of ``batches`` (``Feed.call_batches``), in order: their records, each shown to
        ``on_call`` once made (a progress bar: a live summarizer or exact counts make calls slow)."""
        records: list[TurnRecord] = []
        for batch in batches:
            # (a policy that keeps every message, or one the native loop runs whose steps read no
            # call's times nor the recorded tokens: a batch in one crossing; where each call is shown
            # as it is made, a slow one's — a live summary's — a call at a time)
            if self.keeping is not None or (self.batched and on_call is None):
                made = self.kept(batch) if self.keeping is not None else self._batch(batch)
                records += made
                if on_call is not None:
                    for record in made:
                        on_call(record)
                continue
            for call, pos, pending, reply in batch:
                records.append(self.turn(call, pos, pending, reply))
                if on_call is not None:
                    on_call(records[-1])
        return records

    def turn(self, call: int, pos: int, pending: list[Entry], reply: Entry) -> TurnRecord:
        """One call of a run not on the native loop of a policy that keeps every message (that one
        takes a batch of calls at a time: ``kept``)."""
        add_tool_names(self.env.tool_names, reply)  # (a name is known from its tool_use on)
        if call == 0:
            self._first(pos)
        if self.layered is not None:
            return self._layered(call, pos, pending, reply)
        env = self.env
        env.now = now = self._facts(call, pos, pending)
        stats = LayerStats()
        # the context as it would be sent with no layer acting: what an event removed is measured from it
        before = (len(self.context) + len(pending), self.context.chars_sum + sum(map(_CHARS, pending)))
        self._append(pos, pending, stats)  # 1
        if stats.lowest_changed is not None and now.recorded_tokens is not None:  # (a recorded restart, a manual
            env.now = now._replace(recorded_tokens=None)  # compaction: not the context the recording measured)
        self._prepare(stats)  # 2
        tokens = self._fit_window(stats)  # 3
        actions = _ACTIONS(stats)
        acted = any(actions)
        if acted:
            self._event(call, stats, actions, before, tokens, len(self.context))
        ctx = self.context
        if self.keep_contexts and call in self.keep_contexts:
            self.contexts[call] = [e.message for e in ctx.entries]
        intact = self.as_recorded and not acted
        self.raw_answered.append(self.raw_as_recorded and self._answered(pos))
        # over the window, unless the recording shows this very context answered
        overflow = self.judged.overflows(tokens) and not (intact and self._answered(pos))
        record = self._record(call, pos, stats, tokens, overflow)
        changed_from = len(ctx) if stats.lowest_changed is None else stats.lowest_changed
        self.measures.at_call(CallAt(call, pos, changed_from, intact and self.restarts is None, tokens, reply.chars),
                              ctx, record)  # 4, 5
        self._count(call, stats)
        self.as_recorded = self.as_recorded and not acted
        ctx.append(reply)  # 6
        self.done = pos + 1
        self.manual_pending = self.manual_tool in reply.tool_names
        return record

    def kept(self, batch: list[Call]) -> list[TurnRecord]:
        """The calls of a batch of a policy that keeps every message, on the native loop
        (``keeping.py``) in one crossing: what ``turn`` does where no layer runs, the recording's
        departures and answered calls followed here (a call at a time where it has usage or
        compactions; none departs or is answered where it has neither). No layer reads the tool
        names, so they are not learnt."""
        if batch[0][0] == 0:
            self._first(batch[0][1])
        on, (answered, departs) = self.as_recorded, self._followed(batch)
        if answered is not None and departs is not None:  # (no layer acts: the context is the recording's until it departs)
            for k, departed in enumerate(departs):
                on = on and not departed
                answered[k] = on and answered[k]
        records: list[TurnRecord] = self.keeping.turns(batch, self.judged.tokens, answered)
        self.done = batch[-1][1] + 1
        return records

    def _followed(self, batch: list[Call]) -> tuple[list[bool] | None, list[bool] | None]:
        """The recording followed over a batch of calls before the native loop runs it: per call,
        whether the recording shows it answered (its usage) and whether the replay departs from the
        recording there (``_departs``: a recorded compaction before the previous call); None, None
        where the recording has neither usage nor compactions (none is answered, none departs)."""
        if not (self.usage or self.recorded_compactions()):
            self.raw_answered += [False] * len(batch)
            last = [pos for _, pos, _, _ in batch[-2:]]
            self.before_previous = last[0] if len(last) == 2 else self.previous_pos
            self.previous_pos = last[-1]
            return None, None
        answered, departs = [], []
        for _, pos, _, _ in batch:
            raw = self.raw_as_recorded
            self._departs(pos)
            departs.append(raw and not self.raw_as_recorded)
            answered.append(self._answered(pos))
            self.raw_answered.append(self.raw_as_recorded and answered[-1])
        return answered, departs

    def _layered(self, call: int, pos: int, pending: list[Entry], reply: Entry) -> TurnRecord:
        """A call of a policy the native loop runs (``keeping.py``: budget, snip, micro, the summary,
        reactive and manual compaction): what ``turn`` does there, the layers' counts, their event,
        the recorded tokens a summary's trigger may compare, the compact tool's call and the
        recording's departures kept here."""
        steps = self.python_steps
        assert steps is not None
        if call == 0:
            self._first_layered()
        recorded = None
        if steps.unit == "recorded" and self.policy.summary.enabled:
            recorded = self._recorded_tokens(pos, pending)
        else:
            self._departs(pos)
        trigger, micro_due = self.summary_trigger, True
        if steps.timed:  # (the call's times and prompts: what a step reads, the trigger and micro's gates)
            steps.saw(pending, self.as_recorded)
            trigger, micro_due = steps.told(self._facts(call, pos, pending, recorded))
        answered = self._answered(pos)
        self.raw_answered.append(self.raw_as_recorded and answered)
        record, n_before, chars_before, snipped, micro, lowest = self.layered.turn(
            call, pos, pending, reply, self.judged.tokens, self.as_recorded, answered, recorded, trigger,
            self.manual_pending, self.window, micro_due)
        if steps.timed:
            steps.saw((reply,), self.as_recorded)
        if self._stepped(call, record, n_before, chars_before, snipped, micro, lowest):
            self.as_recorded = False
        self.done = pos + 1
        self.manual_pending = self.manual_tool in reply.tool_names
        return record

    def _count(self, call: int, stats: LayerStats) -> None:
        """What the layers did at ``call`` into the run's totals, and its summary requests by call."""
        self.totals.add(stats)
        self.summary_calls.add(call, stats)

    def _first_layered(self) -> None:
        """At the first call of a policy the native loop runs: the summary's trigger for this
        recording, and the window the steps read."""
        assert self.python_steps is not None
        self.summary_trigger = trigger_of(self.policy.summary, self.env) if self.policy.summary.enabled else 0
        self.python_steps.facts = CallFacts(window=self.window)

    def _stepped(self, call: int, record: TurnRecord, n_before: int, chars_before: int, snipped: int, micro: int,
                 lowest: int | None) -> bool:
        """After a call of the native loop: what the layers did (snip's and micro's counts, the
        stats of the steps Python ran) into its record, the run's totals and its event (the context
        before them: ``n_before`` messages of ``chars_before`` characters); whether they acted. The
        steps' stats are made fresh for the next call."""
        steps = self.python_steps
        assert steps is not None
        stats, steps.stats = steps.stats, LayerStats()
        stats.snipped, stats.micro_compacted = snipped, micro
        if lowest is not None:
            stats.changed_at(lowest)
        if stats.lowest_changed is not None or stats.summary_failures or stats.summary_input_chars:
            record.persisted, record.persisted_chars = stats.persisted, stats.persisted_chars
            record.summarized, record.summary_input_chars, record.summary_output_chars = (
                stats.summaries, stats.summary_input_chars, stats.summary_output_chars)
            record.reactive, record.manual = stats.reactive, stats.manual
            self._count(call, stats)
            actions = _ACTIONS(stats)
            if any(actions):
                self._event(call, stats, actions, (n_before, chars_before), record.tokens, record.messages)
                return True
        return False

    def _batch(self, batch: list[Call]) -> list[TurnRecord]:
        """The calls of a batch on the native loop in one crossing (``_native.LayerTurns.turns``):
        what ``turn`` and ``_layered`` do a call at a time, the recording's departures and answered
        calls followed here first (as ``kept`` follows them), a call whose steps Python ran handed
        back to ``_stepped``, and snip's and micro's own events made by the loop."""
        if batch[0][0] == 0:
            self._first(batch[0][1])
            self._first_layered()
        as_recorded = self.as_recorded  # (the departures are the loop's to apply, call by call)
        answered, departs = self._followed(batch)
        records, self.as_recorded, self.manual_pending, snipped, micro, lowest, made = self.layered.turns(
            batch, self.judged.tokens, as_recorded, answered, departs, self.summary_trigger, self.manual_pending,
            self.window, self.manual_tool, self._stepped, self.events, self.event_class, _NAMED,
            (_ACTION_ITEMS, self.summary_calls.rows, self._breaker))
        if lowest is not None:
            (summaries, reactive_n, manual_n, input_chars, output_chars, input_tokens, output_tokens, persisted,
             persisted_chars) = made
            self.totals.add(LayerStats(snipped=snipped, micro_compacted=micro, summaries=summaries,
                                       summary_input_chars=input_chars, summary_output_chars=output_chars,
                                       summary_input_tokens=input_tokens, summary_output_tokens=output_tokens,
                                       reactive=reactive_n, manual=manual_n, persisted=persisted,
                                       persisted_chars=persisted_chars, lowest_changed=lowest))
        self.done = batch[-1][1] + 1
        return records

    def _breaker(self) -> Breaker:
        """The summary layer's circuit breaker, whose failures a stub summary the native loop counts
        clears (as ``PythonSteps.summarised`` clears them)."""
        return self.env.state_of(Breaker)

    def _answered(self, pos: int) -> bool:
        """Whether the recording shows the call whose reply is at ``pos`` answered (its usage)."""
        usage = self.usage.get(pos) if self.usage else None
        return usage is not None and prompt_of(usage) > 0

    def _resolve_window(self, model: str | None) -> Window:
        return resolve_window(given=self.window_given, fmt=self.format, model=model, metadata=self.metadata(),
                              usage=self.usage.values() if self.usage else (), compactions=self.recorded_compactions(),
                              configured=self.configured_window(model))

    def judge_again(self, records: list[TurnRecord]) -> None:
        """The window resolved again once the whole recording is read (a stream's later calls may show
        a larger prompt answered): a call under the final window is no overflow. (With no call,
        it is resolved here: a transcript whose one message has no reply still says where it came
        from.)"""
        final = self._resolve_window(self.judged_model or self.model())
        if final != self.judged:
            for r in records:
                if r.overflow and not final.overflows(r.tokens):
                    r.overflow = False
            self.judged = final

    def raw_overflows(self, records: list[TurnRecord]) -> int:
        """The calls whose whole history would overflow the window judged on (as no compaction's
        would, but where the recording shows the call answered)."""
        return sum(1 for r, answered in zip(records, self.raw_answered)
                   if self.judged.overflows(r.raw_tokens) and not answered)

    def _event(self, call: int, stats: LayerStats, actions: tuple[int, ...], before: tuple[int, int],
               tokens: int, after: int) -> None:
        """Record what the layers did at this call (an event of compactions.csv): ``actions``, the
        counts of ``ACTIONS``; ``before``, the messages and the sum of their characters with no
        layer acting; ``after``, the messages sent."""
        layers = [layer for layer, count in zip(_LAYERS, actions) if count]
        n, chars = before
        self.events.append(self.event_class(call, layers, n, after,
                                            self.env.estimator.tokens(list_chars(chars, n)), tokens,
                                            stats.micro_compacted + stats.persisted, stats.snipped,
                                            stats.summaries + stats.reactive + stats.manual))

    def next_time(self, pos: int) -> float | None:
        """The time of the recording's next call after the reply at ``pos`` (None: not known, or
        not read yet)."""
        usage = self.usage
        if not usage:
            return None
        keys = self._usage_keys
        if len(keys) != len(usage):
            keys = self._usage_keys = sorted(usage)
        from bisect import bisect_right

        k = bisect_right(keys, pos)
        return seconds(usage[keys[k]].get("timestamp")) if k < len(keys) else None

    def _first(self, pos: int) -> None:
        """At the first call: the provider's cache and the window, by the model it recorded."""
        usage = self.usage.get(pos) or {}
        model = usage.get("model") or self.model()
        self.ttl = self.ttl_given or ("1h" if usage.get("cache_creation_1h_input_tokens") else "5m")
        self.cache.rules = rules_for(model, self.cache_model)
        self.judged_model = model
        self.judged = self._resolve_window(model)
        if not self.window:
            self.window = self.judged.tokens
        version = self.metadata().get("version")
        self.env.harness_version = version if isinstance(version, str) else None
        self.env.window = self.judged.harness  # (a harness's trigger: the window named, not raised by a prompt)
        self.env.recorded_format = self.metadata().get("recorded_format") or self.format

    def _facts(self, call: int, pos: int, pending: list[Entry], recorded: Any = _UNREAD) -> CallFacts:
        """The facts of this call (``CallFacts``), the same for every layer (``recorded``: the
        recorded tokens where the caller read them, ``_recorded_tokens``). Asked at every call: the
        time since the previous one is counted from it."""
        usage = (self.usage.get(pos) or {}) if self.usage else {}
        now = seconds(usage.get("timestamp")) if usage else None
        idle = now - self.last_time if now is not None and self.last_time is not None else None
        lifetime = self.cache.rules.lifetime or TTL_SECONDS[self.ttl]
        cold = call > 0 and (idle or 0) > lifetime
        # (a request on another model than the previous call's finds the cache empty, as pricing has
        # it: each call's recorded model, else the recording's; none where it records no usage)
        model = (usage.get("model") or self.model()) if self.usage else None
        switched, self.last_model = call > 0 and model != self.last_model, model
        # (the next call's time: only a before_expiry timing asks, so no other replay pays for the look-up)
        following = self.next_time(pos) if self.policy.summary.timing == "before_expiry" else None
        self.last_time = now
        return CallFacts(call, idle, any(map(is_prompt, pending)),
                         self._recorded_tokens(pos, pending) if recorded is _UNREAD else recorded,
                         0 if cold or switched else self.cache.sent_tokens, cold,
                         now is not None and following is not None and following - now > lifetime, self.window)

    def _recorded_tokens(self, pos: int, pending: list[Entry]) -> int | None:
        """The context's size as the harness measured it before this call (the previous call's
        recorded prompt and output tokens, plus the estimate of the messages since), while the
        context is still the one the recording sent; else None."""
        usage = self._departs(pos)
        if not usage or not self.as_recorded:
            return None
        new = sum(e.chars for e in pending)
        est = self.env.estimator
        return (prompt_of(usage) + int(usage.get("output_tokens", 0))
                + (est.tokens(new) - est.overhead_tokens if new else 0))

    def _departs(self, pos: int) -> dict | None:
        """At the call whose reply is at ``pos``: where the recording compacted before the previous
        call and the replay did not, the context is no longer the recording's from here on (that
        call's usage measured the recording's smaller context). The previous call's usage."""
        prev, self.previous_pos = self.previous_pos, pos
        before, self.before_previous = self.before_previous, prev
        usage = self.usage.get(prev) if prev is not None and self.usage else None
        if self.restarts is None and self.raw_as_recorded and prev is not None and any(
                (before if before is not None else -1) < c.position <= prev for c in self.recorded_compactions()):
            self.as_recorded = self.raw_as_recorded = False
        return usage

    def _append(self, pos: int, pending: list[Entry], stats: LayerStats) -> None:
        policy, env = self.policy, self.env
        first = self.done
        if self.manual_pending and policy.manual.mode != "after_results":
            self.context, st = manual(self.context, self.manual_config, env)
            stats.add(st)
            if st.manual and policy.manual.mode == "replace_results":
                # seed 004 appends its own message instead of the tool results
                self.context.extend(e for e in pending if not e.results)
                first, pending = pos, []
        self._extend(first, pending, pos, stats)
        if self.manual_pending and policy.manual.mode == "after_results":
            self.context, st = manual(self.context, self.manual_config, env)
            stats.add(st)

    def _extend(self, first: int, pending: list[Entry], pos: int, stats: LayerStats) -> None:
        """The messages since the previous call (positions ``first``..), restarting the context
        from the summary of a recorded compaction where one happened, up to the call at ``pos``."""
        restarts = self.restarts
        if not restarts:
            self.context.extend(pending)
            return
        ctx = self.context
        for i, entry in enumerate([*pending, None], first):
            if i in restarts:  # a compaction the recording did: restart from its summary
                ctx = Context(self._restart(restarts[i]))
                stats.changed_at(0)
            if entry is not None:
                ctx.append(entry)
        assert i == pos
        self.context = ctx

    def _restart(self, c: RecordedCompaction) -> list[Entry]:
        """The context a recorded compaction restarted from: its summary, among the messages the
        harness kept (an OpenHands condensation), as recorded; a stream, which holds no earlier
        message, restarts from the summary alone."""
        if not c.kept or self.raw_entries is None:
            return [c.summary]
        kept = [self.raw_entries[p] for p in c.kept]
        return [*kept[:c.summary_at], c.summary, *kept[c.summary_at:]]

    def _prepare(self, stats: LayerStats) -> None:
        ctx, env = self.context, self.env
        for layer, config in self.cheap:
            ctx, st = layer(ctx, config, env)
            if st is not NOTHING:
                stats.add(st)
        if self.policy.summary.enabled:
            ctx, st = summary(ctx, self.policy.summary, env)
            if st is not NOTHING:
                stats.add(st)
        self.context = ctx

    def _measure(self) -> int:
        ctx = self.context
        return self.counter.count(ctx.messages) if self.counter else self.env.estimator.tokens(ctx.chars)

    def _fit_window(self, stats: LayerStats) -> int:
        """The tokens sent: reactive compaction while over the window, at most max_retries times."""
        policy = self.policy
        tokens = self._measure()
        retries = 0
        while policy.reactive.enabled and retries < policy.reactive.max_retries and tokens > self.window:
            retries += 1
            self.context, st = reactive(self.context, self.reactive_config, self.env)
            stats.add(st)
            if not st.reactive:
                break  # it changed nothing
            self._prepare(stats)
            tokens = self._measure()
        return tokens

    def _record(self, call: int, pos: int, stats: LayerStats, tokens: int, overflow: bool) -> TurnRecord:
        """The call's record as the loop knows it: the context sent, what the layers did; the
        measures fill in the rest (``measures``: the cache's reads and writes among them)."""
        ctx = self.context
        # positionally, in TurnRecord's field order, without a dict of keywords a call (a test
        # holds the counters' columns to records.TURN_COUNTERS)
        return TurnRecord(call, pos, 0, 0, 0, len(ctx), ctx.chars, tokens,
                          stats.persisted, stats.persisted_chars, stats.snipped, stats.micro_compacted,
                          stats.summaries, stats.summary_input_chars, stats.summary_output_chars, stats.reactive,
                          stats.manual, overflow, 0, 0, 0, 0)
