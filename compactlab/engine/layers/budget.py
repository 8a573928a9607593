"""L3 tool_result_budget (seed 000): persist the largest results of the newest message.

If the tool_result blocks of the last message total more than ``max_chars``, the largest ones
over ``persist_threshold`` are written to ``tool-results/<safe id>.txt`` and replaced with a
``<persisted-output>`` note holding the path and a preview, largest first, until under budget.
A replacement that would not be smaller than the original is skipped (never larger).
"""

from __future__ import annotations


from ..context import Context
from ...transcripts.messages import Entry, content_text, cut_text, sized_len
from ...config import LayerConfig, NonNegative, Positive, opt, section
from .base import NOTHING, LayerStats, RunEnv
from .registry import register

MAX_PATH = 100  # "tool-results/" + a safe name of at most ~75 chars + ".txt"
NOTE = "<persisted-output>\nFull output: {path}\nPreview:\n{preview}\n</persisted-output>"


@section
class BudgetConfig(LayerConfig):
    """L3 tool_result_budget: persist the largest results of the last message to disk."""

    max_chars: Positive = opt(200_000, "budget for the tool_result content of the last message")
    persist_threshold: Positive = opt(30_000, "only results larger than this are persisted")
    preview_chars: NonNegative = opt(2_000, "chars of the output kept inline as a preview")

    def __post_init__(self) -> None:
        if self.preview_chars >= self.persist_threshold:
            raise ValueError("preview_chars must be smaller than persist_threshold")


@register("budget", BudgetConfig, cheap=True)
def budget(context: Context, config: BudgetConfig, env: RunEnv) -> tuple[Context, LayerStats]:
    if not context.entries:
        return context, NOTHING
    done = persisted(context.entries[-1], config, env)
    if done is None:
        return context, NOTHING
    entry, stats = done
    pos = len(context.entries) - 1
    stats.changed_at(pos)
    return context.replaced({pos: entry}), stats


def persisted(last: Entry, config: BudgetConfig, env: RunEnv) -> tuple[Entry, LayerStats] | None:
    """``last`` (the context's last message) with its largest results persisted, and what that did;
    None where the budget leaves it (not a user message of results, under the budget, nothing worth
    persisting). The native loop asks it of a last message whose results are over the budget."""
    if last.role != "user" or not last.results:
        return None
    total = sum(f.size for f in last.results)
    if total <= config.max_chars:
        return None
    stats = LayerStats()
    entry = last
    for k in sorted(range(len(last.results)), key=lambda k: last.results[k].size, reverse=True):
        if total <= config.max_chars:
            break
        fact = last.results[k]
        if fact.size <= config.persist_threshold:
            continue
        done = persist_result(entry, k, result_text(last, fact.block), config, env, env.now.call)
        if done is None:
            continue  # the note would not be smaller than what it replaces
        entry, note_len = done
        total += note_len - fact.size
        stats.persisted += 1
        stats.persisted_chars += fact.size
    return (entry, stats) if stats.persisted else None


def result_text(entry: Entry, block: int) -> str:
    """The text budget persists of the result at ``block``: its content's (``content_text``; of a
    message left in its file, its content alone read)."""
    return content_text(entry.block_content(block))


def persist_result(entry: Entry, k: int, text: str, config: BudgetConfig, env: RunEnv,
                   call: int) -> tuple[Entry, int] | None:
    """``entry`` with its k-th result (whose ``text`` is ``result_text``'s) written to its file and
    replaced at ``call`` by the note, and the note's length; None where the note would not be
    smaller than what it replaces. (The native loop persists most results itself, as this does:
    ``LayerTurns``' ``persisted_here``; it asks this of a text it does not hold.)"""
    fact = entry.results[k]
    preview = cut_text(text, config.preview_chars)
    if len(NOTE) + sized_len(preview) + MAX_PATH >= fact.size:
        return None
    note = NOTE.format(path=env.persist(fact.tool_use_id, text), preview=preview)
    env.ledger.cleared_at[(entry.origin, fact.block)] = call
    return entry.with_result_content(k, note), sized_len(note)
