"""L4 compact_history: over the trigger, replace the context with a summary.

The context is recorded as a saved transcript first (written with ``--write-transcripts``),
then summarised, then replaced with one user message from ``template`` (``[Compacted]\\n\\n...``),
optionally followed by an assistant ``ack`` (s06's "Understood. Continuing."). ``keep_head`` and
``keep_tail`` messages stay verbatim around it, with pair-safe cuts, and only the middle is
summarised. After ``max_failures`` consecutive summarizer failures the layer stops trying
(circuit breaker, seed 001).

The harnesses' own variants are options: ``keep_user_tokens`` keeps, instead, the newest user
prompts up to that many tokens and drops every assistant and tool message (Codex);
``keep_tail_fraction`` keeps the newest share of the context, cut before a user prompt, and
``rollback_if_larger`` undoes a summary that would grow the context (gemini-cli);
``count_reasoning`` measures as Codex does, adding the reasoning of earlier turns to the
recorded usage; ``trigger_rule`` compacts where a harness does by default on each recording's own
window, by its recorded version (Claude Code's, Qwen Code's, goose's, Pi's, OpenCode's:
``harness_triggers.py``).
"""

from __future__ import annotations

from typing import Annotated, Generic, Literal, TypeVar

from ..context import Context
from ...config import Bound, LayerConfig, NonNegative, Positive, opt, section
from ...transcripts.messages import Entry, cut_text, is_prompt, sized_len, text_of
from .base import NOTHING, LayerStats, RunEnv, fill, pair_safe_head, pair_safe_tail, summarize
from .harness_triggers import (CAP_SETTINGS, RECORDED_BY, RESERVE_SETTINGS, SHARE_SETTINGS, TITLES, WINDOW_SETTINGS,
                               harness_failures, harness_trigger, preset_window, trigger_at)
from .registry import register


#: the keys a harness's rule takes of its setting, the rules that take each, and what each is
_RULE_SETTINGS = (
    ("trigger_share", SHARE_SETTINGS, "a share of the window for the rule of a harness that takes one"),
    ("trigger_reserve", RESERVE_SETTINGS, "taken off the window by the rule of a harness that takes one"),
    ("trigger_window", WINDOW_SETTINGS, "the window the rule of a harness that takes one is taken of"),
    ("trigger_cap", CAP_SETTINGS, "the most the trigger is by the rule of a harness that takes one"),
)


def over_trigger(context: Context, config: SummaryConfig, env: RunEnv) -> bool:
    """Whether to summarise now: over the trigger at this call (``trigger_now``)."""
    return _size(context, config, env) > trigger_now(config, env)


def _own(config: SummaryConfig, env: RunEnv) -> bool:
    """Whether the recording is the own of the harness whose rule the policy follows, its window
    resolved (the run's first call)."""
    return bool(env.window) and RECORDED_BY[config.trigger_rule] == env.recorded_format


def _rule_window(config: SummaryConfig, env: RunEnv) -> tuple[str | None, int]:
    """The version and the window a policy's harness rule is taken of: the recording's where it is
    that harness's own (``_own``); else none, on the window of the preset's figures."""
    preset = preset_window(config.trigger_rule)
    return (env.harness_version, env.window or preset) if _own(config, env) else (None, preset)


def failures_allowed(config: SummaryConfig, env: RunEnv) -> int:
    """The failed summaries in a row that open the layer's circuit breaker: ``max_failures``, or more
    where the policy follows a harness's rule and the recording's version stops later (Qwen Code
    0.17 and later: 3, QwenLM/qwen-code#4345)."""
    if config.trigger_rule and _own(config, env):
        return max(config.max_failures, harness_failures(config.trigger_rule, env.harness_version) or 0)
    return config.max_failures


def trigger_said(config: SummaryConfig, env: RunEnv) -> tuple[int, str] | None:
    """The trigger a run's summary layer compacts at (``trigger_of``, the run's first call resolved)
    and, in words, the figure in its unit and where it came from; None where the layer is off."""
    if not config.enabled:
        return None
    at, rule = trigger_of(config, env), config.trigger_rule
    if rule:
        version, window = _rule_window(config, env)
        words = harness_trigger(rule, version, window, config.trigger_share, config.trigger_reserve,
                                config.trigger_cap, config.trigger_window)[1]
        where = ("own on the recording's window (summary.trigger_rule)" if _own(config, env) else
                 f"rule on {window:,}, its preset's window (summary.trigger_rule; not {TITLES[rule]}'s own "
                 "recording)")
        return at, f"{at:,} tokens: {TITLES[rule]}'s {where}, {words}"
    if at != config.trigger:
        return at, f"{at:,} tokens (summary.trigger_by_version, for version {env.harness_version})"
    return at, f"{at:,} {config.unit} (summary.trigger)"


def trigger_now(config: SummaryConfig, env: RunEnv) -> int:
    """The trigger at this call (``env.now``): the recording's (``trigger_of``); or, by the policy's
    timing, the earlier trigger where the prompt cache is cold anyway (``idle``: the first call after a
    gap longer than the cache's lifetime) or about to be (``before_expiry``: the last call before such
    a gap), where that is lower."""
    trigger = trigger_of(config, env)
    if (config.timing == "idle" and env.now.cache_cold) or (config.timing == "before_expiry" and env.now.cold_next):
        return min(trigger, config.early_trigger or trigger // 2)
    return trigger


def trigger_of(config: SummaryConfig, env: RunEnv) -> int:
    """The trigger for this recording: where the policy follows a harness's own rule
    (``trigger_rule``), that harness's on the recording's window (``Window.harness``), by its version,
    with the share, the reserve, the cap or the window its settings give (``trigger_share``,
    ``trigger_reserve``, ``trigger_cap``, ``trigger_window``), where the
    recording is that harness's own
    (on any other, on the window its preset's figures are written for: ``harness_triggers``); else
    the harness version's default where the policy gives one for it (``trigger_by_version``: the
    longest prefix of the version) unless ``trigger`` is lower (a setting that lowers the trigger
    lowers it on every version, as Claude Code's CLAUDE_AUTOCOMPACT_PCT_OVERRIDE does), else
    ``trigger``."""
    version, rule = env.harness_version, config.trigger_rule
    if rule:  # (asked at every call: ``_rule_window`` inline, the figure remembered)
        if env.window and RECORDED_BY[rule] == env.recorded_format:
            return trigger_at(rule, version, env.window, config.trigger_share, config.trigger_reserve, config.trigger_cap,
                              config.trigger_window)
        return trigger_at(rule, None, preset_window(rule), config.trigger_share, config.trigger_reserve,
                          config.trigger_cap, config.trigger_window)
    if version and config.trigger_by_version:
        matches = [prefix for prefix in config.trigger_by_version if version.startswith(prefix)]
        if matches:
            return min(config.trigger_by_version[max(matches, key=len)], config.trigger)
    return config.trigger


def _size(context: Context, config: SummaryConfig, env: RunEnv) -> int:
    if config.unit == "messages":
        size = len(context)
    elif config.unit == "tokens" and config.measure == "recorded" and env.now.recorded_tokens is not None:
        size = env.now.recorded_tokens
        if config.count_reasoning:
            size += env.state_of(EarlierReasoning).tokens(context)
    else:
        size = context.chars if config.unit == "chars" else env.estimator.tokens(context.chars)
    return size


def compact(context: Context, config: SummaryConfig, env: RunEnv, *, kind: str, stats: LayerStats,
            keep_head: int = 0, keep_tail: int = 0, tail_start: int | None = None) -> Context | None:
    """Replace (the middle of) the context with a summary message; None if the summarizer failed.
    ``tail_start``: where the kept tail starts, instead of ``keep_tail`` messages."""
    entries = context.entries
    n = len(entries)
    head_end = pair_safe_head(entries, min(keep_head, n))
    if tail_start is None:
        tail_start = pair_safe_tail(entries, n - min(keep_tail, n)) if keep_tail else n
    tail_start = max(tail_start, head_end)
    transcript = env.save_transcript(context)
    text = summarize(entries[head_end:tail_start], kind=kind, summary_cfg=config, env=env, stats=stats)
    if text is None:
        return None
    summary_text = fill(config.template, text, transcript)
    if config.keep_user_tokens:  # Codex: the newest prompts, then the summary; nothing else
        blocks = [{"type": "text", "text": t} for t in newest_prompts(entries[head_end:tail_start], config.keep_user_tokens)]
        made = [env.new_entry({"role": "user", "content": [*blocks, {"type": "text", "text": summary_text}]})]
    else:
        made = [env.new_entry({"role": "user", "content": summary_text})]
    if config.ack:
        made.append(env.new_entry({"role": "assistant", "content": config.ack}))
    stats.changed_at(head_end)
    return context.spliced(head_end, made, tail_start)


def newest_prompts(entries: list[Entry], max_tokens: int) -> list[str]:
    """The texts of the newest user prompts up to ``max_tokens`` (4 characters a token), oldest first;
    the one that crosses the limit cut in its middle, as Codex's build_compacted_history does."""
    kept: list[str] = []
    left = max_tokens * 4
    for entry in reversed(entries):
        if left <= 0:
            break
        if not is_prompt(entry):
            continue
        text = text_of(entry.message)
        size = sized_len(text)
        if size > left:
            half = left // 2
            text = (f"{cut_text(text, half)}\n…{(size - 2 * half + 3) // 4} tokens truncated…\n"
                    f"{cut_text(text, half, from_tail=True)}")
            left = 0
        else:
            left -= size
        kept.append(text)
    return kept[::-1]


def kept_share(entries: list[Entry], config: SummaryConfig) -> int | None | Literal[False]:
    """Where the kept tail of ``keep_tail_fraction`` starts (None: the option is off), or False
    where no prompt is there to cut before, after the kept head: nothing to summarise yet
    (gemini-cli's NOOP)."""
    if not config.keep_tail_fraction:
        return None
    tail = fraction_tail(entries, config.keep_tail_fraction)
    return False if tail <= pair_safe_head(entries, min(config.keep_head, len(entries))) else tail


def fraction_tail(entries: list[Entry], fraction: float) -> int:
    """Where the newest ``fraction`` of the context (by characters) starts, cut before a user prompt
    (gemini-cli's findCompressSplitPoint): the first prompt with at least 1 - fraction of the
    characters before it, else the last prompt (all of it when the context ends with the agent's
    answer); 0 when there is no prompt to cut before."""
    target = (1 - fraction) * sum(e.chars for e in entries)
    before, last = 0, 0
    for i, entry in enumerate(entries):
        if is_prompt(entry) and not entry.results:
            if before >= target:
                return i
            last = i
        before += entry.chars
    if entries and entries[-1].role == "assistant" and not entries[-1].has_tool_use:
        return len(entries)
    return last


class EarlierReasoning:
    """Codex's count of the reasoning it sent in earlier turns (get_non_last_reasoning_items_tokens):
    every reasoning item before the last user prompt, (its encrypted bytes x 3/4 - 650) / 4 tokens.
    Used while the context is the recording's, which only grows: the sums are kept and extended."""

    def __init__(self) -> None:
        self.sums = [0]  # reasoning tokens of the context's first i messages

    def tokens(self, context: Context) -> int:
        entries, sums = context.entries, self.sums
        for entry in entries[len(sums) - 1:]:
            sums.append(sums[-1] + (reasoning_tokens(entry.message) if entry.role == "assistant" else 0))
        last_prompt = next((i for i in range(len(entries) - 1, -1, -1) if is_prompt(entries[i])), 0)
        return sums[last_prompt]


def reasoning_tokens(message: dict) -> int:
    content = message.get("content")
    if not isinstance(content, list):
        return 0
    return sum(-(-max(0, sized_len(b["signature"]) * 3 // 4 - 650) // 4) for b in content
               if isinstance(b, dict) and b.get("type") == "thinking" and isinstance(b.get("signature"), str))


@section
class SummaryConfig(LayerConfig):
    """L4 compact_history: summarise the whole context when it is over the trigger."""

    trigger: Positive = opt(50_000, "summarise when the context is over this size")
    unit: Literal["chars", "tokens", "messages"] = opt(
        "chars", "unit of trigger: context chars, estimated tokens, or messages (events)")
    measure: Literal["estimate", "recorded"] = opt(
        "estimate", "how a token trigger measures the context: by the estimate, or as the harness did, by the previous "
                    "call's recorded usage plus the messages since (while the context is what was recorded)",
        added=True)
    input_chars: Positive = opt(80_000, "summary input: the context's JSON text cut to this")
    input_from: Literal["head", "tail"] = opt("head", "cut the input from the head or the tail")
    template: str = opt("[Compacted]\n\n{summary}", "the summary message; {summary}, {transcript}")
    ack: str = opt("", "optional assistant message after the summary")
    keep_head: NonNegative = opt(0, "messages kept verbatim before the summary (pair-safe)")
    keep_tail: NonNegative = opt(0, "messages kept verbatim after the summary (pair-safe)")
    max_failures: Positive = opt(3, "consecutive summarizer failures that open the circuit breaker")
    prompt: str = opt("s08", "summary prompt name (live summarizer)")
    request: Literal["fresh", "prefix"] = opt(
        "fresh", "how the summary request is built and priced: a fresh request of the cut input, uncached (the seed "
                 "designs), or the conversation as sent plus an instruction, reading the prompt cache (Claude Code, "
                 "Codex)", added=True)
    max_output_tokens: Positive = opt(2_000, "summary length cap for the summarizer")
    count_reasoning: bool = opt(
        False, "with measure = recorded, add the reasoning sent in earlier turns as Codex counts it (each reasoning "
               "item before the last user prompt: (encrypted bytes x 3/4 - 650) / 4 tokens)", added=True)
    keep_user_tokens: NonNegative = opt(
        0, "keep the newest user prompts up to this many tokens before the summary and drop every assistant and tool "
           "message (Codex's compacted history); 0: off", added=True)
    keep_tail_fraction: Annotated[float, Bound(ge=0, le=0.9)] = opt(
        0.0, "keep the newest share of the context (by characters) after the summary, cut before a user prompt "
             "(gemini-cli: 0.3); 0: off", added=True)
    rollback_if_larger: bool = opt(
        False, "undo a summary that leaves the context larger than it was, as a failed one (gemini-cli)", added=True)
    timing: Literal["trigger", "idle", "before_expiry"] = opt(
        "trigger", "when to compact, given the prompt cache: at the trigger only; also at the first call after an idle "
                   "gap longer than the cache's lifetime (the cache is cold: rewriting it costs nothing extra) once over "
                   "early_trigger; or also at the last call before such a gap (while the summary request can read the "
                   "cache)", added=True)
    early_trigger: NonNegative = opt(
        0, "with timing idle or before_expiry: compact early once the context is over this (the trigger's unit); 0: "
           "half the trigger", added=True)
    trigger_by_version: dict[str, int] = opt(
        {}, "the default trigger of recordings of a harness version (the longest prefix of the version the recording "
            "names, e.g. {\"2.0.\" = 155000}), unless trigger is lower; trigger for the others", added=True)
    trigger_rule: Literal["", "claude-code", "qwen-code", "goose", "pi", "opencode", "codex"] = opt(
        "", "the trigger in tokens where that harness compacts on each of its own recordings' windows, by their "
            "version (engine/layers/harness_triggers.py; inspect --compactions holds its compactions to the same), "
            "and on the window its figures are written for on any other recording (200,000; Codex's 258,400), in "
            "place of trigger (which must "
            "be that figure) and trigger_by_version (and, where the version stops trying later than max_failures, "
            "its breaker: Qwen Code 0.17's 3); --set summary.trigger=N turns it off, for one trigger on every "
            "recording; \"\": off", added=True)
    trigger_share: Annotated[float, Bound(ge=0, le=1)] = opt(
        0.0, "with trigger_rule: the share of the window that harness's setting gives (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE "
             "/ 100, which only lowers Claude Code's default; GOOSE_AUTO_COMPACT_THRESHOLD; Qwen Code's "
             "contextPercentageThreshold, which 0.17 and later ignore), taken of each recording's window; 0: the "
             "harness's default", added=True)
    trigger_reserve: NonNegative = opt(
        0, "with trigger_rule pi or opencode: the tokens that harness's setting leaves the window short by "
           "(Pi's compaction.reserveTokens, OpenCode's compaction.reserved), taken off each recording's window; 0: "
           "the harness's default", added=True)
    trigger_cap: NonNegative = opt(
        0, "with trigger_rule codex: the most the trigger is (Codex's model_auto_compact_token_limit: the lesser of it "
           "and 90% of each recording's window); 0: the harness's default", added=True)
    trigger_window: NonNegative = opt(
        0, "with trigger_rule claude-code: the window the trigger (and trigger_share) is taken of, where under each "
           "recording's (CLAUDE_CODE_AUTO_COMPACT_WINDOW or autoCompactWindow, which Claude Code clamps to the "
           "model's); 0: the recording's", added=True)

    def __post_init__(self) -> None:
        if "{summary}" not in self.template:
            raise ValueError("template must contain {summary}")
        if self.trigger_rule and self.unit != "tokens":
            raise ValueError(f"trigger_rule ({self.trigger_rule}) gives a trigger in tokens: set unit = \"tokens\"")
        for key, rules, what in _RULE_SETTINGS:  # (each a setting only some harnesses' rules take)
            if getattr(self, key) and self.trigger_rule not in rules:
                raise ValueError(f"{key} is {what} (trigger_rule {', '.join(rules)}), or give summary.trigger")
        window = preset_window(self.trigger_rule)
        if self.trigger_rule and self.trigger != (rule := harness_trigger(self.trigger_rule, None, window)[0]):
            raise ValueError(f"trigger ({self.trigger}) is not read while trigger_rule gives the trigger "
                             f"({self.trigger_rule}'s {rule:,} of {window:,}): remove trigger_rule for one trigger "
                             "on every recording, or give trigger_share (trigger_reserve) for a share of (tokens off) "
                             "each window")
        for prefix, value in self.trigger_by_version.items():
            if not isinstance(prefix, str) or type(value) is not int or value <= 0:
                raise ValueError(f"trigger_by_version: {prefix!r} = {value!r}: a version prefix and a trigger above 0")
        if self.early_trigger > self.trigger:
            raise ValueError(f"early_trigger ({self.early_trigger}) must not be over the trigger ({self.trigger})")
        if self.unit == "messages" and self.keep_head + self.keep_tail >= self.trigger:
            raise ValueError(f"keep_head + keep_tail ({self.keep_head + self.keep_tail}) must be smaller than a "
                             f"trigger in messages ({self.trigger}): the summary would not shrink the context")


@register("summary", SummaryConfig)
def summary(context: Context, config: SummaryConfig, env: RunEnv) -> tuple[Context, LayerStats]:
    breaker = env.state_of(Breaker)
    if breaker.open or not context.entries or not over_trigger(context, config, env):
        return context, NOTHING
    stats = LayerStats()
    tail = kept_share(context.entries, config)
    if tail is False:
        return context, NOTHING  # no prompt to cut before: nothing to summarise yet (gemini-cli's NOOP)
    new = compact(context, config, env, kind="summary", stats=stats,
                  keep_head=config.keep_head, keep_tail=config.keep_tail, tail_start=tail)
    if new is not None and config.rollback_if_larger and new.chars >= context.chars:
        env.ledger.failed_summaries.append({"call": env.now.call, "kind": "summary",
                                     "error": "the summary would not shrink the context: rolled back"})
        stats.summary_failures += 1
        stats.lowest_changed = None
        new = None
    if new is None:
        breaker.failures += 1
        breaker.open = breaker.failures >= failures_allowed(config, env)
        return context, stats
    breaker.failures = 0
    stats.summaries = 1
    return new, stats


C = TypeVar("C")


class Summarising(Generic[C]):
    """The config of a layer that summarises on its own event (reactive, manual): its own table and
    the policy's summary table, whose prompt, input cut, template and ack it summarises by
    (``Policy.config_for`` makes it; never a default summary table in its place). (A plain class:
    a dataclass's generated code is a millisecond of every command's start.)"""

    __slots__ = ("own", "summary")

    def __init__(self, own: C, summary: SummaryConfig) -> None:
        self.own, self.summary = own, summary

    def __repr__(self) -> str:
        return f"Summarising({self.own!r}, {self.summary!r})"


class Breaker:
    """The summary layer's circuit breaker (seed 001), kept for the run: consecutive failures,
    and whether it opened (then the layer stops asking)."""

    __slots__ = ("failures", "open")

    def __init__(self) -> None:
        self.failures = 0
        self.open = False
