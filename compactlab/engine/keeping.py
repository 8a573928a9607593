"""The turns of a policy that keeps every message, or is made of the built-in layers, run by the
native core (#59).

A policy with no layer on (``none``, the reference every ``compare`` runs, and any policy whose
layers are all off) sends at each call the whole history as recorded: the loop appends, sizes,
judges against the window and measures, and no layer runs. On the native core that loop is one
crossing a call (``_native.KeepingTurns``, ``native/src/turns.rs``): the messages appended, the
context sized, the prompt cache, raw baseline, violations and retention measured, the record
made, in Rust. ``loop.Turns`` is the reference (``COMPACTLAB_CORE=python`` runs it); the
differential tests hold the two to the same records, summaries and ledgers.

A policy made of the built-in layers (``s08``, ``s06``, ``observation-masking``, ``claude-code``,
``codex``, ``opencode``, ``openhands``, ``qwen-code``, ``gemini-cli``, ``goose``, ``pi`` among them)
runs on ``_native.LayerTurns`` the same way: snip's and micro's choices made on the context's facts
in Rust (``native/src/layers.rs``), each result replaced by the Python message's own
``with_result_content`` (a recording's runs after the first share micro's replacements of its own
messages: ``shared_replacements``), snip's placeholder made by the run's ``new_entry``; budget's
results persisted in Rust too (each string content read from its line, the note made, the file
written by ``RunEnv.persist``; a list content's text asked of ``budget.result_text``, a text with a
sized placeholder persisted by ``budget.persist_result``); the summary's, reactive and manual
compaction's triggers checked in Rust and, where one is due, the stub's summary made there, or the
layer itself run by Python on the loop's messages (``PythonSteps``: a summary is made of the
messages' text), the loop adopting what it returns; recall's row
of each call asked by the loop of the run's native check itself (``Recall.natively``; a recall of
another kind is asked in Python, ``Measures.recall_at``, of the loop read as a ``Context``: its
``entries``, ``find_origin`` and ``made_in_gap`` are ``Context``'s). ``native_layers`` says which
policies it runs.

What a call's times and prompts decide (``PythonSteps.told``) is judged in Python and told to the
loop at each call: the trigger its summary check compares (lowered where the prompt cache is cold
or about to be, by a summary ``timing``, and by the reasoning read so far where Codex's count adds
the context's: the layer, asked, decides), whether micro's gates hold (``at_prompts``,
``idle_minutes``); a summary request that reads the prompt cache (``request = "prefix"``) reads
the cache's state as the loop left it. So ``claude-code``, ``codex`` and ``opencode`` run on it too.

Left to the Python loop: a step of yours or a framework's, micro's ``clear_inputs`` (it edits the
agent's own messages), Codex's count of reasoning after a snip, the recording's compactions kept
(the context restarts from their summaries), exact token counts, a run that keeps contexts
(``keep_contexts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core import native_module
from ..transcripts.messages import Entry, ResultFact, sized_len
from .context import Context, ResultMemo
from .layers import CallFacts, LayerStats, RunEnv, manual, reactive, summary
from .layers.budget import MAX_PATH, NOTE, persist_result, persisted, result_text
from .layers.micro import gates_hold
from .layers.summary import Breaker, SummaryConfig, kept_share, reasoning_tokens, trigger_now
from .measures import CallAt, Measures
from .measures.base import after_first_run
from .measures.baseline import FREED
from .policy import Policy
from .records import TurnRecord


def keeping_turns(measures: Measures, *, probes: bool, keeps_contexts: bool, acts: bool) -> Any:
    """The native loop of a run (``_native.KeepingTurns``, measured by its ``measures``' native
    ones), or None where the Python loop runs it: no native measures (the python core, exact
    counts), a policy that ``acts``, a run that can lose a probe (``probes``), a run that keeps
    contexts. Its messages are let go as it passes them (``FREED`` in their place: a stream's are
    freed as it is read, not held to the end)."""
    native = native_module()
    if native is None or measures.native is None or acts or probes or keeps_contexts:
        return None
    return native.KeepingTurns(measures.native, TurnRecord, FREED)


#: micro's options the layers' loop does not run: a policy with one of them on runs on the Python loop
_NOT_NATIVE = ("clear_inputs",)
#: the layers of a policy's order the native loop runs
NATIVE_LAYERS = ("budget", "snip", "micro")


def native_layers(policy: Policy) -> list[str] | None:
    """The layers of ``policy`` where the native loop runs them all, else None: budget, snip and
    micro in its order (micro with none of ``_NOT_NATIVE``), then those that summarise, the summary
    layer, reactive and manual compaction (not Codex's count of reasoning after a snip:
    ``summary_runs_natively``)."""
    on: list[str] = [name for name in policy.order if getattr(policy, name).enabled]
    if any(name not in NATIVE_LAYERS for name in on):
        return None
    if "micro" in on and any(getattr(policy.micro, name) for name in _NOT_NATIVE):
        return None
    summarising = [name for name in ("summary", "reactive", "manual") if getattr(policy, name).enabled]
    if summarising and not summary_runs_natively(policy.summary, snips="snip" in on):
        return None
    on += summarising
    return on or None


def summary_runs_natively(config: SummaryConfig, snips: bool = False) -> bool:
    """Whether the native loop runs the layers that summarise by this summary table: all but Codex's
    count of earlier reasoning where snip drops messages (the count's sums follow the context's
    positions, which a snip moves; ``PythonSteps.told`` bounds it by the stream's)."""
    return not (config.count_reasoning and snips)


def shared_replacements(memo: dict | None, messages: int) -> tuple[dict, int] | None:
    """The micro replacements of a recording's own messages that the native loops of its runs after
    the first share (``base.after_first_run``: a tune's trials and a compare's policies replace each
    result once, not once a run), and how many it may hold: a few for each of its ``messages`` (a
    sweep of placeholders makes one each). None for a recording replayed once, or streamed."""
    known = after_first_run(memo, _REPLACED, dict) if memo is not None else None
    return None if known is None else (known, 4 * messages + 256)


_REPLACED = ("micro", "replaced")


def layer_turns(measures: Measures, policy: Policy, env: RunEnv, *, restarts: bool,
                keeps_contexts: bool, shared: tuple[dict, int] | None = None) -> tuple[Any, PythonSteps] | None:
    """The native loop of a run whose policy's layers it runs (``_native.LayerTurns``,
    ``native_layers``) and the steps it has Python run, or None where the Python loop runs it: no
    native measures, the recording's compactions replayed (``restarts``), a run that keeps contexts.
    ``shared``: the recording's micro replacements its runs share (``shared_replacements``)."""
    native = native_module()
    layers = native_layers(policy)
    if native is None or measures.native is None or restarts or keeps_contexts or layers is None:
        return None
    recall_at = measures.recall_at
    natively = measures.native_recall()  # (the loop asks the native check itself)

    def recall(call: int, pos: int, changed_from: int, intact: bool, tokens: int, reply_chars: int,
               record: TurnRecord, context: Any) -> None:
        # (``context``: the native loop itself, read as a ``Context``: its entries, find_origin, made_in_gap)
        recall_at(CallAt(call, pos, changed_from, intact, tokens, reply_chars), context, record)

    steps = PythonSteps(policy, env)
    # (budget's step: Python's persisting, and what the loop persists with itself: ``PythonSteps.persisted``
    # told its stats, the run's files written by ``RunEnv.persist``, the text of a result whose content
    # it does not read, a result whose text it does not hold persisted by Python, ``sized_len``)
    budget = (steps.budget, steps.persisted, env.persist, NOTE, MAX_PATH, result_text, steps.persist_result,
              sized_len)
    cheap = [(name, policy.config_for(name), budget if name == "budget" else None) for name in layers
             if name in NATIVE_LAYERS]
    stub = stub_summary(policy, env, steps) if "summary" in layers else None
    # (manual compaction's stub summary is made by the loop where the summary layer's is: the same
    # summary table, the whole context; ``layers/manual.py`` the reference)
    manual_stub = reactive_stub = None
    if stub is not None:  # (reactive's too, with its own tail and template)
        manual_stub = (steps.manualised,
                       policy.manual.message if policy.manual.mode == "replace_results" else None)
        own = policy.reactive
        reactive_stub = (steps.reactivated, own.keep_tail, own.pair_safe, own.template)
    turns = native.LayerTurns(
        measures.native, TurnRecord, cheap, env.tool_names, env.ledger.cleared_at, env.new_entry, recall,
        (steps.unit, steps.summary, stub) if "summary" in layers else None,
        (policy.reactive.max_retries, steps.reactive, reactive_stub) if "reactive" in layers else None,
        (policy.manual.mode, steps.manual, manual_stub) if "manual" in layers else None, natively,
        shared if "micro" in layers else None,
        entry_copies(native) if "micro" in layers or "budget" in layers else None)
    return turns, steps


def stub_summary(policy: Policy, env: RunEnv, steps: PythonSteps) -> tuple | None:
    """What the native loop makes the summary layer's summary with itself (``LayerTurns``' ``Stub``),
    where the run's summarizer is the stub and the layer uses no option that needs Python: a
    Codex-style or fractional tail, a rollback, the count of reasoning, a request on the prompt
    cache, saved transcripts written. None: the layer runs in Python (``layers/summary.py``, the
    reference: the differential tests hold the two to the same runs)."""
    from ..summarizers.prompts import prompt_text
    from ..summarizers.stub import StubSummarizer, stripped_text

    config = policy.summary
    stub = env.summarizer
    if (type(stub) is not StubSummarizer or stub.max_chars < 1 or config.keep_user_tokens
            or config.keep_tail_fraction or config.rollback_if_larger or config.count_reasoning
            or config.request == "prefix" or env.write_transcripts):
        return None
    return (config.keep_head, config.keep_tail, config.template, config.ack or None, config.input_chars,
            len(prompt_text(config.prompt)), stub.max_chars, stripped_text, env.ledger.saved_transcripts,
            steps.summarised)


def entry_copies(native: Any) -> Any:
    """What makes micro's copies of a message left unread in its file, or of a plain ``Entry``, in
    Rust (``_native.EntryCopies``; ``with_result_content`` of each is the reference)."""
    from .feeds.read_ahead import LazyEntry

    return native.EntryCopies(LazyEntry, ResultFact, Entry)


class PythonSteps:
    """The layers the native loop has Python run on its messages (their text is what they read):
    the summary layer (``layers/summary.py``'s ``summary``, run on a ``Context`` of the loop's
    messages at a call the loop found over its trigger, micro's count of results dealt with as the
    context's memo) and budget's persisting of the last message where the loop leaves it to Python
    (``layers/budget.py``'s ``persisted``: the loop's own parts given, ``budget`` the rest). Each is
    given the facts of the call
    it reads (the call, the recorded tokens); ``stats``: what they did at the call (the loop makes a
    fresh one at every call)."""

    __slots__ = ("summary_config", "budget_config", "reactive_config", "manual_config", "micro_config", "env",
                 "stats", "facts", "unit", "timed", "reasoning", "unread")

    def __init__(self, policy: Policy, env: RunEnv) -> None:
        self.summary_config, self.budget_config, self.env = policy.summary, policy.budget, env
        self.reactive_config, self.manual_config = policy.config_for("reactive"), policy.config_for("manual")
        self.micro_config = policy.micro
        self.stats = LayerStats()
        #: the call's facts as the steps read them (``told``; the window known at the first call)
        self.facts = CallFacts()
        #: what the summary's trigger compares (the native loop's ``Unit``)
        config = policy.summary
        self.unit = ("recorded" if config.unit == "tokens" and config.measure == "recorded" else config.unit)
        summarising = any(getattr(policy, name).enabled for name in ("summary", "reactive", "manual"))
        micro = policy.micro
        #: Codex's count of earlier reasoning: the reasoning of every assistant message read so far
        #: (the loop adds them: ``saw``), what bounds the count of the context's (None: not counted)
        counted = config.enabled and config.count_reasoning and self.unit == "recorded"
        self.reasoning: int | None = 0 if counted else None
        self.unread: list[Entry] = []  # (the assistant messages read since the count was last asked for)
        #: the loop tells each call's times and prompts (``told``): a summary request that reads the
        #: prompt cache, a summary timed by it, micro gated by prompts or the time idle, the count
        self.timed = bool((summarising and (config.request == "prefix" or config.timing != "trigger"))
                          or (micro.enabled and (micro.at_prompts or micro.idle_minutes))
                          or self.reasoning is not None)

    def told(self, facts: CallFacts) -> tuple[int, bool]:
        """A call's ``facts`` (its times, prompts and recorded tokens: the steps' ``env.now``), and
        what the native loop is told of them: the trigger its summary check compares at this call
        (``trigger_now``, lowered by the reasoning read so far where the count adds the context's: an
        upper bound of it, so the loop asks the layer at every call it could act and the layer
        decides), and whether micro's gates hold (``gates_hold``)."""
        self.facts = self.env.now = facts
        config = self.summary_config
        trigger = trigger_now(config, self.env) if config.enabled else 0
        if self.reasoning is not None and facts.recorded_tokens is not None:
            if self.unread:  # (read where the count is asked for: a message's text is parsed only then)
                self.reasoning += sum(reasoning_tokens(e.message) for e in self.unread)
                self.unread.clear()
            trigger -= self.reasoning
        return trigger, gates_hold(self.micro_config, facts)

    def saw(self, entries: Sequence[Entry], as_recorded: bool) -> None:
        """Messages read from the recording, whose reasoning the count's bound adds where it is asked
        for; none once the context is no longer the recording's (``as_recorded``: the recorded tokens,
        and the count with them, are never asked for again)."""
        if self.reasoning is None:
            return
        if not as_recorded:
            self.reasoning, self.unread = None, []
            return
        self.unread.extend(e for e in entries if e.role == "assistant")

    def _now(self, call: int, recorded: int | None = None) -> None:
        f = self.facts
        self.env.now = CallFacts(call, f.idle_seconds, f.after_prompt, recorded, f.cached_tokens, f.cache_cold,
                                 f.cold_next, f.window)

    def summary(self, call: int, recorded: int | None, entries: list[Entry], dealt: int | None
                ) -> tuple[list[Entry] | None, int | None, int | None, bool, bool]:
        """The summary layer at ``call``: the new context's messages (None: unchanged), micro's count
        in it, the first message it changed, whether it summarised, and whether it will never act
        again (its circuit breaker open: the loop stops asking, as the layer stops trying)."""
        env = self.env
        if env.state_of(Breaker).open:
            return None, dealt, None, False, True
        if kept_share(entries, self.summary_config) is False:  # (the layer's own NOOP, before a context is made)
            return None, dealt, None, False, False
        self._now(call, recorded)
        context = Context(entries)
        if dealt is not None:
            context.memo = ResultMemo({"micro": dealt})
        new, stats = summary(context, self.summary_config, env)
        self.stats.add(stats)
        closed = env.state_of(Breaker).open
        if new is context:
            return None, dealt, None, False, closed
        return (new.entries, new.memo.get("micro") if dealt is not None else None, stats.lowest_changed,
                bool(stats.summaries), closed)

    def summarised(self, input_chars: int, output_chars: int, input_tokens: int, output_tokens: int,
                   lowest: int) -> None:
        """A summary the native loop made (``stub_summary``): the layer's stats at the call, as
        ``summarize``, ``compact`` and ``summary`` count them, and its circuit breaker's failures
        cleared, as a summary that worked clears them."""
        self._made("summaries", input_chars, output_chars, input_tokens, output_tokens, lowest)
        self.env.state_of(Breaker).failures = 0

    def manualised(self, input_chars: int, output_chars: int, input_tokens: int, output_tokens: int,
                   lowest: int) -> None:
        """A manual compaction whose stub summary the native loop made: the layer's stats at the call,
        as ``manual`` and ``summarize`` count them (the summary layer's circuit breaker is not its own)."""
        self._made("manual", input_chars, output_chars, input_tokens, output_tokens, lowest)

    def reactivated(self, input_chars: int, output_chars: int, input_tokens: int, output_tokens: int,
                    lowest: int) -> None:
        """A reactive compaction whose stub summary the native loop made: the layer's stats at the
        call, as ``reactive`` and ``summarize`` count them."""
        self._made("reactive", input_chars, output_chars, input_tokens, output_tokens, lowest)

    def persist_result(self, entry: Entry, k: int, text: str, call: int) -> tuple[Entry, int] | None:
        """``budget.persist_result`` of a result the native loop persists with a text it does not
        hold (one with a sized placeholder, or a string Rust cannot hold)."""
        return persist_result(entry, k, text, self.budget_config, self.env, call)

    def persisted(self, persisted: int, persisted_chars: int, lowest: int) -> None:
        """Budget's persisting the native loop did itself (``LayerTurns``' ``persisted_here``): the
        layer's stats at the call, as ``budget`` counts them."""
        stats = LayerStats(persisted=persisted, persisted_chars=persisted_chars)
        stats.changed_at(lowest)
        self.stats.add(stats)

    def _made(self, counter: str, input_chars: int, output_chars: int, input_tokens: int, output_tokens: int,
              lowest: int) -> None:
        """One stub summary's stats added to the call's: ``counter`` (what made it) one, its
        characters and tokens, the first message it changed."""
        stats = LayerStats(summary_input_chars=input_chars, summary_output_chars=output_chars,
                           summary_input_tokens=input_tokens, summary_output_tokens=output_tokens)
        setattr(stats, counter, 1)
        stats.changed_at(lowest)
        self.stats.add(stats)

    def reactive(self, call: int, recorded: int | None, entries: list[Entry], dealt: int | None
                 ) -> tuple[list[Entry] | None, int | None, int | None, bool]:
        """Reactive compaction at ``call`` (the context over the window): as ``summary`` gives back,
        whether it compacted."""
        return self._compaction(reactive, self.reactive_config, call, recorded, entries, dealt, "reactive")

    def manual(self, call: int, recorded: int | None, entries: list[Entry], dealt: int | None
               ) -> tuple[list[Entry] | None, int | None, int | None, bool]:
        """Manual compaction at ``call`` (the previous reply called the compact tool): as
        ``summary`` gives back, whether it compacted."""
        return self._compaction(manual, self.manual_config, call, recorded, entries, dealt, "manual")

    def _compaction(self, layer: Any, config: Any, call: int, recorded: int | None, entries: list[Entry],
                    dealt: int | None, count: str) -> tuple[list[Entry] | None, int | None, int | None, bool]:
        self._now(call, recorded)
        context = Context(entries)
        if dealt is not None:
            context.memo = ResultMemo({"micro": dealt})
        new, stats = layer(context, config, self.env)
        self.stats.add(stats)
        if new is context:
            return None, dealt, None, False
        return (new.entries, new.memo.get("micro") if dealt is not None else None, stats.lowest_changed,
                bool(getattr(stats, count)))

    def budget(self, call: int, last: Entry, pos: int) -> Entry | None:
        """Budget at ``call`` on the context's last message (at ``pos``): the message with its largest
        results persisted, or None where it is left."""
        self._now(call)
        done = persisted(last, self.budget_config, self.env)
        if done is None:
            return None
        entry, stats = done
        stats.changed_at(pos)
        self.stats.add(stats)
        return entry
