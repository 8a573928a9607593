"""reactive_compact (seed 000): the API said the prompt is too long.

Summary of the whole context plus its last ``keep_tail`` messages (seed 000 moves the tail cut
so a tool pair is not split; seed 001's ``messages[-5:]`` does not: ``pair_safe = false``).
The engine decides when it runs (over ``window_tokens``) and how often (``max_retries``).
"""

from __future__ import annotations

from typing import Annotated

from ..context import Context
from ...config import Bound, LayerConfig, NonNegative, opt, section
from .base import LayerStats, RunEnv, fill, pair_safe_tail, summarize
from .registry import register
from .summary import Summarising


@section
class ReactiveConfig(LayerConfig):
    """reactive_compact: when the prompt is too long, summary + the last messages."""

    window_tokens: NonNegative = opt(0, "the window this policy's harness compacts at (its trigger; 0: the "
                                        "recording's, as every run is judged: --window, else what the recording "
                                        "shows, else the model's)")
    keep_tail: NonNegative = opt(5, "last messages kept after the summary")
    pair_safe: bool = opt(True, "move the tail cut so a tool pair is not split")
    max_retries: Annotated[int, Bound(ge=0, le=10)] = opt(1, "reactive compactions per call before it is an overflow "
                                                              "(at most 10)")
    template: str = opt("[Reactive compact]\n\n{summary}", "the summary message; {summary}")

    def __post_init__(self) -> None:
        if "{summary}" not in self.template:
            raise ValueError("template must contain {summary}")


@register("reactive", ReactiveConfig, summarises=True)
def reactive(context: Context, config: Summarising[ReactiveConfig], env: RunEnv) -> tuple[Context, LayerStats]:
    """(The summary's input cut and prompt are the policy's summary table: ``config.summary``.)"""
    own, summary_config = config.own, config.summary
    stats = LayerStats()
    entries = context.entries
    if not entries:
        return context, stats
    env.save_transcript(context)
    text = summarize(entries, kind="reactive", summary_cfg=summary_config, env=env, stats=stats)
    if text is None:
        return context, stats
    tail_start = max(0, len(entries) - own.keep_tail) if own.keep_tail else len(entries)
    if own.pair_safe:
        tail_start = pair_safe_tail(entries, tail_start)
    head = env.new_entry({"role": "user", "content": fill(own.template, text)})
    stats.reactive = 1
    stats.changed_at(0)
    return context.spliced(0, [head], tail_start), stats
