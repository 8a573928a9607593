"""Manual compaction: the model called the compact tool (SPEC §3 step 2).

The whole context is summarised as the summary layer would (its template, input cut and ack).
Where the recorded tool results go depends on ``mode`` and is decided by the engine:
``before_results`` appends them after the summary (seed 000: an orphaned tool_result, reported,
by design), ``after_results`` summarises them too (seed 003), ``replace_results`` drops them and
appends ``message`` (seed 004).
"""

from __future__ import annotations

from typing import Annotated, Literal

from ..context import Context
from ...config import Bound, LayerConfig, opt, section
from .base import LayerStats, RunEnv
from .registry import register
from .summary import Summarising, compact


@section
class ManualConfig(LayerConfig):
    """The model's own compact tool (SPEC §3 step 2)."""

    tool: Annotated[str, Bound(min_length=1)] = opt("compact", "name of the manual compaction tool")
    mode: Literal["before_results", "after_results", "replace_results"] = opt(
        "before_results", "summarise before appending the tool results (seed 000), after them (seed 003), "
        "or instead of them, appending `message` (seed 004)")
    message: str = opt("", "user message appended after the summary in replace_results mode")

    def __post_init__(self) -> None:
        if self.mode == "replace_results" and not self.message:
            raise ValueError("mode 'replace_results' needs a message")


@register("manual", ManualConfig, summarises=True)
def manual(context: Context, config: Summarising[ManualConfig], env: RunEnv) -> tuple[Context, LayerStats]:
    """(Summarised as the policy's summary table says: ``config.summary``.)"""
    own, summary_config = config.own, config.summary
    stats = LayerStats()
    if not context.entries:
        return context, stats
    new = compact(context, summary_config, env, kind="manual", stats=stats)
    if new is None:
        return context, stats
    stats.manual = 1
    if own.mode == "replace_results":
        new.append(env.new_entry({"role": "user", "content": own.message}))
    return new, stats
