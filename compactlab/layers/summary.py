"""L4 compact_history: over the trigger, replace the context with a summary.

The context is recorded as a saved transcript first (written with ``--write-transcripts``),
then summarised, then replaced with one user message from ``template`` (``[Compacted]\\n\\n...``),
optionally followed by an assistant ``ack`` (s06's "Understood. Continuing."). ``keep_head`` and
``keep_tail`` messages stay verbatim around it, with pair-safe cuts, and only the middle is
summarised. After ``max_failures`` consecutive summarizer failures the layer stops trying
(circuit breaker, seed 001).
"""

from __future__ import annotations

from ..context import Context
from ..policy import SummaryConfig
from .base import NOTHING, LayerStats, RunEnv, fill, pair_safe_head, pair_safe_tail, summarize


def over_trigger(context: Context, config: SummaryConfig, env: RunEnv) -> bool:
    if config.unit == "messages":
        size = len(context)
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


def summary(context: Context, config: SummaryConfig, env: RunEnv) -> tuple[Context, LayerStats]:
    if env.breaker_open or not context.entries or not over_trigger(context, config, env):
        return context, NOTHING
    stats = LayerStats()
    new = compact(context, config, env, kind="summary", stats=stats,
                  keep_head=config.keep_head, keep_tail=config.keep_tail)
    if new is None:
        env.consecutive_failures += 1
        if env.consecutive_failures >= config.max_failures:
            env.breaker_open = True
        return context, stats
    env.consecutive_failures = 0
    stats.summaries = 1
    return new, stats
