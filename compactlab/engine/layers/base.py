"""What every layer shares: the contract, the run environment, and the stats record.

The layer contract (STYLE lesson 2)::

    layer(context: Context, config: <Layer>Config, env: RunEnv) -> (Context, LayerStats)

(``config``: what ``Policy.config_for`` gives: the layer's table, and for reactive and manual
compaction, which summarise on their own event, ``Summarising(their table, the summary table)``.)

A layer is a pure function of its context and config: it never mutates the context or the
messages it was given (changed messages are copied), returns the same object when it changes
nothing, and reports everything it did in ``LayerStats``, including ``lowest_changed``, the first
message position it altered (the prefix before it is byte-identical, which the cost model and
the incremental invariant checker rely on). Side effects go through ``env``: persisted files,
saved transcripts and summarizer calls.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Protocol, TypeVar

import orjson

from ...plain import NamedTuple, dataclass
from ..context import Context
from ...errors import SummarizerError
from ...transcripts.messages import Entry, Message, make_entry, sized_len
from ...plumbing.outputs import OutputDir
from ..sizing import TokenEstimator, list_chars
from ...summarizers.base import Summarizer, SummaryRequest
from ...summarizers.prompts import prompt_text

T = TypeVar("T")


class SummarySettings(Protocol):
    """How a layer asks for a summary (the policy's summary table, ``summary.SummaryConfig``, is
    one; this module imports no layer, so no cycle even for a type checker)."""

    @property
    def prompt(self) -> str: ...
    @property
    def max_output_tokens(self) -> int: ...
    @property
    def input_chars(self) -> int: ...
    @property
    def input_from(self) -> str: ...
    @property
    def request(self) -> str: ...


@dataclass(init=False, repr=False)  # (compared: a layer's output is repeatable, stats and all)
class LayerStats:
    """What layers did in a call (added up over a run): the counters of ``records.COUNTERS`` (one
    field each, in that order: a test holds them equal), and ``lowest_changed``, the first position
    any of them changed. Its ``__init__`` is written out, as ``TurnRecord``'s (hundreds a run)."""

    def __init__(self, persisted: int = 0, persisted_chars: int = 0, snipped: int = 0, micro_compacted: int = 0,
                 summaries: int = 0, summary_input_chars: int = 0, summary_output_chars: int = 0,
                 summary_input_tokens: int = 0, summary_output_tokens: int = 0, summary_cache_read_tokens: int = 0,
                 reactive: int = 0, manual: int = 0, custom: int = 0, summary_failures: int = 0,
                 lowest_changed: int | None = None) -> None:
        self.persisted = persisted
        self.persisted_chars = persisted_chars
        self.snipped = snipped
        self.micro_compacted = micro_compacted
        self.summaries = summaries
        self.summary_input_chars = summary_input_chars
        self.summary_output_chars = summary_output_chars
        self.summary_input_tokens = summary_input_tokens
        self.summary_output_tokens = summary_output_tokens
        self.summary_cache_read_tokens = summary_cache_read_tokens
        self.reactive = reactive
        self.manual = manual
        self.custom = custom
        self.summary_failures = summary_failures
        self.lowest_changed = lowest_changed

    persisted: int = 0
    persisted_chars: int = 0
    snipped: int = 0
    micro_compacted: int = 0
    summaries: int = 0
    summary_input_chars: int = 0
    summary_output_chars: int = 0
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    summary_cache_read_tokens: int = 0
    reactive: int = 0
    manual: int = 0
    custom: int = 0
    summary_failures: int = 0
    lowest_changed: int | None = None

    def add(self, other: "LayerStats") -> None:
        """Add ``other``'s counts to these; the lowest change of both. Written out field by field:
        on the per-call path a loop over the names would cost ~7% of a replay."""
        # a layer that did nothing changed nothing and costs one test
        if other.lowest_changed is None and not (other.summary_failures or other.summary_input_chars):
            return
        self.persisted += other.persisted
        self.persisted_chars += other.persisted_chars
        self.snipped += other.snipped
        self.micro_compacted += other.micro_compacted
        self.summaries += other.summaries
        self.summary_input_chars += other.summary_input_chars
        self.summary_output_chars += other.summary_output_chars
        self.summary_input_tokens += other.summary_input_tokens
        self.summary_output_tokens += other.summary_output_tokens
        self.summary_cache_read_tokens += other.summary_cache_read_tokens
        self.reactive += other.reactive
        self.manual += other.manual
        self.custom += other.custom
        self.summary_failures += other.summary_failures
        if other.lowest_changed is not None:
            self.changed_at(other.lowest_changed)

    def changed_at(self, position: int) -> None:
        if self.lowest_changed is None or position < self.lowest_changed:
            self.lowest_changed = position


#: what a layer that did nothing returns (shared, never mutated: the engine skips it)
NOTHING = LayerStats()


class CallFacts(NamedTuple):
    """What is known of the call being made, the same for every layer: one value a call, built by
    the loop (``Turns._facts``) before any layer runs, and given to them as ``env.now`` (a tuple:
    made at every call, it costs a fraction of a frozen dataclass)."""

    call: int = 0
    #: seconds since the previous call, from the recording's times (None: not recorded)
    idle_seconds: float | None = None
    #: a user prompt came since the previous call (the agent had answered: a user turn ended)
    after_prompt: bool = False
    #: the context's tokens as the harness measured them (the previous call's recorded usage plus
    #: the messages since), while the context is still the one the recording sent; else None
    recorded_tokens: int | None = None
    #: the tokens of the previous call's prompt the provider's cache holds now (0: none, or
    #: expired): what a summary request built on the conversation reads (summary.request = prefix)
    cached_tokens: int = 0
    #: the prompt cache is cold at this call (the gap since the previous call outlived it)
    cache_cold: bool = False
    #: it will be cold at the next call (the recording's next call comes after a longer gap)
    cold_next: bool = False
    #: the model's window in tokens, as the policy's reactive trigger takes it (its own, else the
    #: recording's): what a step of yours or a framework's compactor compacts to
    window: int = 0


@dataclass(slots=True, eq=False, repr=False)
class LayerLedger:
    """What the layers did in a run, for its reports: the outputs they persisted, the contexts a
    summary replaced, the summaries that failed, and who made or cleared what when (the probe
    ledger puts a lost probe down to it)."""

    persisted_files: list[dict[str, Any]] = field(default_factory=list)
    saved_transcripts: list[dict[str, Any]] = field(default_factory=list)
    failed_summaries: list[dict[str, Any]] = field(default_factory=list)
    #: the layer that made each message a policy made (origin -> "snip", "summary", ...): what the
    #: probe ledger names as having removed the messages it stands in for
    made_by: dict[int, str] = field(default_factory=dict)
    #: the call at which each made message was made (origin -> call)
    made_at: dict[int, int] = field(default_factory=dict)
    #: the call at which a tool result was replaced in place, by micro or budget ((origin, block) -> call)
    cleared_at: dict[tuple[int, int], int] = field(default_factory=dict)
    #: the messages a layer dropped with no message of its own in their place (a step's own edits):
    #: origin -> (the layer, the call), what the probe ledger charges a loss to
    dropped: dict[int, tuple[str, int]] = field(default_factory=dict)


@dataclass(slots=True, eq=False, repr=False)  # (a fact set on it by a name it lacks is an error, not a new attribute)
class RunEnv:
    """What layers may use, passed in, never global: the run's dependencies (the summarizer, the
    estimate, the output folder, the tool names), ``now`` (the facts of the call being made),
    ``state`` (what a layer keeps from call to call) and ``ledger`` (what the layers did)."""

    summarizer: Summarizer
    estimator: TokenEstimator = field(default_factory=TokenEstimator)
    out: OutputDir = field(default_factory=lambda: OutputDir(None))
    tool_names: dict[str, str] = field(default_factory=dict)
    write_transcripts: bool = False
    now: CallFacts = CallFacts()
    #: the version of the harness that wrote the recording, where it says (Claude Code's ``version``)
    harness_version: str | None = None
    #: the window the recording names (``engine/window.py``'s ``Window.harness``), once the first call
    #: has resolved it, and the format of the harness that recorded the session (a converted file's:
    #: its source's): a trigger that follows a harness's own rule is taken of that window on its own
    #: recordings (``summary.trigger_rule``)
    window: int | None = None
    recorded_format: str | None = None
    #: what layers keep from call to call in a run, one object of each kind (``state_of``)
    state: dict[type, Any] = field(default_factory=dict)
    ledger: LayerLedger = field(default_factory=LayerLedger)
    _next_origin: int = -1

    def state_of(self, kind: type[T]) -> T:
        """The run's one ``kind`` of state (a summary layer's circuit breaker, Codex's count of
        earlier reasoning), made by ``kind()`` on first use."""
        state = self.state.get(kind)
        if state is None:
            state = self.state[kind] = kind()
        return state

    def new_entry(self, message: Message, by: str = "summary", call: int | None = None) -> Entry:
        """An Entry for a message a policy made (placeholder, summary): a fresh negative origin;
        ``by``: the layer that made it in place of the messages it removed, at ``call`` (default:
        the call being made, ``now``'s; the native loop, which sets no ``now``, says it)."""
        origin = self._next_origin
        self._next_origin -= 1
        self.ledger.made_by[origin] = by
        self.ledger.made_at[origin] = self.now.call if call is None else call
        return make_entry(message, origin)

    def persist(self, tool_use_id: str, text: str) -> str:
        rel, fresh = self.out.persisted_name(tool_use_id, text)
        if fresh:
            self.out.write_text(rel, text)
            self.ledger.persisted_files.append({"path": rel, "chars": sized_len(text)})
        return rel

    def save_transcript(self, context: Context) -> str:
        """Record the context a summary is about to replace (written only when asked)."""
        saved = self.ledger.saved_transcripts
        rel = f"transcripts/transcript-{self.now.call:05d}-{len(saved) + 1}.jsonl"
        record: dict[str, Any] = {"call": self.now.call, "messages": len(context), "chars": context.chars, "path": None}
        if self.write_transcripts and not self.out.dry_run:
            data = b"".join(orjson.dumps(e.message) + b"\n" for e in context.entries)
            self.out.write_bytes(rel, data)
            record["path"] = rel
        saved.append(record)
        return rel


def pair_safe_head(entries: list[Entry], head_end: int) -> int:
    """Seed 000: a head ending in a tool_use takes the tool_result messages after it."""
    if head_end > 0 and entries[head_end - 1].has_tool_use:
        while head_end < len(entries) and entries[head_end].is_tool_result_message:
            head_end += 1
    return head_end


def pair_safe_tail(entries: list[Entry], tail_start: int) -> int:
    """Seed 000: a tail starting with tool results takes the tool_use message before it."""
    if (
        0 < tail_start < len(entries)
        and entries[tail_start].is_tool_result_message
        and entries[tail_start - 1].has_tool_use
    ):
        tail_start -= 1
    return tail_start


def summarize(
    entries: list[Entry], *, kind: str, summary_cfg: SummarySettings, env: RunEnv, stats: LayerStats,
    prompt: str | None = None,
) -> str | None:
    """Ask the summarizer for a summary of ``entries``; None when it failed (recorded).

    The input is the compact JSON text of the messages cut to ``input_chars`` from the head or
    the tail, as the seeds do with ``json.dumps(messages)[:80000]`` / ``[-80000:]``. ``prompt``:
    the instruction's text in place of the summary table's (a framework's own prompt).
    """
    chars = list_chars(sum(e.chars for e in entries), len(entries))
    request = SummaryRequest(
        entries=entries,
        prompt=prompt if prompt is not None else prompt_text(summary_cfg.prompt),
        max_output_tokens=summary_cfg.max_output_tokens,
        kind=kind,
        call=env.now.call,
        limit=summary_cfg.input_chars,
        chars=chars,
        from_tail=summary_cfg.input_from == "tail",
    )
    try:
        result = env.summarizer.summarize(request)
    except SummarizerError as exc:
        stats.summary_failures += 1
        env.ledger.failed_summaries.append({"call": env.now.call, "kind": kind, "error": str(exc)})
        return None
    stats.summary_input_chars += request.input_chars
    stats.summary_output_chars += len(result.text)
    stats.summary_output_tokens += result.output_tokens
    if summary_cfg.request == "prefix":  # the conversation as sent, plus the instruction: it reads the cache
        est = env.estimator
        instruction = round(len(request.prompt) / est.chars_per_token)
        asked = est.tokens(chars) + instruction
        read = min(env.now.cached_tokens, asked)
        stats.summary_input_tokens += asked
        stats.summary_cache_read_tokens += read
    else:
        stats.summary_input_tokens += result.input_tokens
    return result.text


def fill(template: str, summary: str, transcript: str = "") -> str:
    # str.replace, not str.format: a summary may contain braces
    return template.replace("{transcript}", transcript).replace("{summary}", summary)
