"""reactive_compact (seed 000): the API said the prompt is too long.

Summary of the whole context plus its last ``keep_tail`` messages (seed 000 moves the tail cut
so a tool pair is not split; seed 001's ``messages[-5:]`` does not: ``pair_safe = false``).
The engine decides when it runs (over ``window_tokens``) and how often (``max_retries``).
"""

from __future__ import annotations

from ..context import Context
from ..policy import ReactiveConfig, SummaryConfig
from .base import LayerStats, RunEnv, fill, pair_safe_tail, summarize


def reactive(context: Context, config: ReactiveConfig, env: RunEnv, summary_config: SummaryConfig
             ) -> tuple[Context, LayerStats]:
    stats = LayerStats()
    entries = context.entries
    if not entries:
        return context, stats
    env.save_transcript(context)
    text = summarize(entries, kind="reactive", summary_cfg=summary_config, env=env, stats=stats)
    if text is None:
        return context, stats
    tail_start = max(0, len(entries) - config.keep_tail) if config.keep_tail else len(entries)
    if config.pair_safe:
        tail_start = pair_safe_tail(entries, tail_start)
    head = env.new_entry({"role": "user", "content": fill(config.template, text)})
    stats.reactive = 1
    stats.changed_at(0)
    return context.spliced(0, [head], tail_start), stats
