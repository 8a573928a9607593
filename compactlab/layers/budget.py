"""L3 tool_result_budget (seed 000): persist the largest results of the newest message.

If the tool_result blocks of the last message total more than ``max_chars``, the largest ones
over ``persist_threshold`` are written to ``tool-results/<safe id>.txt`` and replaced with a
``<persisted-output>`` note holding the path and a preview, largest first, until under budget.
A replacement that would not be smaller than the original is skipped (never larger).
"""

from __future__ import annotations

from ..context import Context
from ..messages import content_text
from ..policy import BudgetConfig
from .base import NOTHING, LayerStats, RunEnv

MAX_PATH = 100  # "tool-results/" + a safe name of at most ~75 chars + ".txt"
NOTE = "<persisted-output>\nFull output: {path}\nPreview:\n{preview}\n</persisted-output>"


def budget(context: Context, config: BudgetConfig, env: RunEnv) -> tuple[Context, LayerStats]:
    if not context.entries:
        return context, NOTHING
    last = context.entries[-1]
    if last.role != "user" or not last.results:
        return context, NOTHING
    total = sum(f.size for f in last.results)
    if total <= config.max_chars:
        return context, NOTHING
    stats = LayerStats()
    entry = last
    for k in sorted(range(len(last.results)), key=lambda k: last.results[k].size, reverse=True):
        if total <= config.max_chars:
            break
        fact = last.results[k]
        if fact.size <= config.persist_threshold:
            continue
        text = content_text(last.message["content"][fact.block].get("content"))
        preview = text[: config.preview_chars]
        if len(NOTE) + len(preview) + MAX_PATH >= fact.size:
            continue  # the note would not be smaller than what it replaces
        note = NOTE.format(path=env.persist(fact.tool_use_id, text), preview=preview)
        entry = entry.with_result_content(k, note)
        total += len(note) - fact.size
        stats.persisted += 1
        stats.persisted_chars += fact.size
    if not stats.persisted:
        return context, stats
    pos = len(context.entries) - 1
    stats.changed_at(pos)
    return context.replaced({pos: entry}), stats
