"""Manual compaction: the model called the compact tool (SPEC §3 step 2).

The whole context is summarised as the summary layer would (its template, input cut and ack).
Where the recorded tool results go depends on ``mode`` and is decided by the engine:
``before_results`` appends them after the summary (seed 000: an orphaned tool_result, reported,
by design), ``after_results`` summarises them too (seed 003), ``replace_results`` drops them and
appends ``message`` (seed 004).
"""

from __future__ import annotations

from ..context import Context
from ..policy import ManualConfig, SummaryConfig
from .base import LayerStats, RunEnv
from .summary import compact


def manual(context: Context, config: ManualConfig, env: RunEnv, summary_config: SummaryConfig
           ) -> tuple[Context, LayerStats]:
    stats = LayerStats()
    if not context.entries:
        return context, stats
    new = compact(context, summary_config, env, kind="manual", stats=stats)
    if new is None:
        return context, stats
    stats.manual = 1
    if config.mode == "replace_results":
        new.append(env.new_entry({"role": "user", "content": config.message}))
    return new, stats
