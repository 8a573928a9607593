"""L4 compact_history: over the trigger, replace the context with a summary.

The context is recorded as a saved transcript first (written with ``--write-transcripts``),
then summarised, then replaced with one user message from ``template`` (``[Compacted]\\n\\n...``),
optionally followed by an assistant ``ack`` (s06's "Understood. Continuing."). ``keep_head`` and
``keep_tail`` messages stay verbatim around it, with pair-safe cuts, and only the middle is
summarised. After ``max_failures`` consecutive summarizer failures the layer stops trying
(circuit breaker, seed 001).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..context import Context
from ..config import LayerConfig, NonNegative, Positive, opt
from .base import NOTHING, LayerStats, RunEnv, fill, pair_safe_head, pair_safe_tail, summarize
from .registry import register


def over_trigger(context: Context, config: SummaryConfig, env: RunEnv) -> bool:
    if config.unit == "messages":
        size = len(context)
    elif config.unit == "tokens" and config.measure == "recorded" and env.recorded_tokens is not None:
        size = env.recorded_tokens
    else:
        size = context.chars if config.unit == "chars" else env.estimator.tokens(context.chars)
    return size > config.trigger


def compact(context: Context, config: SummaryConfig, env: RunEnv, *, kind: str, stats: LayerStats,
            keep_head: int = 0, keep_tail: int = 0) -> Context | None:
    """Replace (the middle of) the context with a summary message; None if the summarizer failed."""
    entries = context.entries
    n = len(entries)
    head_end = pair_safe_head(entries, min(keep_head, n))
    tail_start = pair_safe_tail(entries, n - min(keep_tail, n)) if keep_tail else n
    tail_start = max(tail_start, head_end)
    transcript = env.save_transcript(context)
    text = summarize(entries[head_end:tail_start], kind=kind, summary_cfg=config, env=env, stats=stats)
    if text is None:
        return None
    made = [env.new_entry({"role": "user", "content": fill(config.template, text, transcript)})]
    if config.ack:
        made.append(env.new_entry({"role": "assistant", "content": config.ack}))
    stats.changed_at(head_end)
    return context.spliced(head_end, made, tail_start)


@dataclass(frozen=True, slots=True)
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
    max_output_tokens: Positive = opt(2_000, "summary length cap for the summarizer")

    def __post_init__(self) -> None:
        if "{summary}" not in self.template:
            raise ValueError("template must contain {summary}")
        if self.unit == "messages" and self.keep_head + self.keep_tail >= self.trigger:
            raise ValueError(f"keep_head + keep_tail ({self.keep_head + self.keep_tail}) must be smaller than a "
                             f"trigger in messages ({self.trigger}): the summary would not shrink the context")


@register("summary", SummaryConfig)
def summary(context: Context, config: SummaryConfig, env: RunEnv) -> tuple[Context, LayerStats]:
    breaker = env.state_of("summary", Breaker)
    if breaker.open or not context.entries or not over_trigger(context, config, env):
        return context, NOTHING
    stats = LayerStats()
    new = compact(context, config, env, kind="summary", stats=stats,
                  keep_head=config.keep_head, keep_tail=config.keep_tail)
    if new is None:
        breaker.failures += 1
        breaker.open = breaker.failures >= config.max_failures
        return context, stats
    breaker.failures = 0
    stats.summaries = 1
    return new, stats


@dataclass
class Breaker:
    """The summary layer's circuit breaker (seed 001), kept for the run: consecutive failures,
    and whether it opened (then the layer stops asking)."""

    failures: int = 0
    open: bool = False
