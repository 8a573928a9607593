"""L2 micro_compact: replace old tool results with a short placeholder.

Every tool_result block but the last ``keep_recent`` whose content is longer than ``min_chars``
gets ``placeholder`` (``{tool_name}`` is filled from the matching tool_use). ``preserve_tools``
are never replaced; ``only_consumed`` limits it to results before the last assistant message
(seed 003), where ``keep_recent`` counts consumed results; ``string_content_only`` skips
list-form contents as seed 003 does. ``keep_by = "turns"`` keeps the results of the last
``keep_recent`` assistant turns instead (observation masking), ``"user_turns"`` those since the
``keep_recent``-th last user prompt (opencode). ``protect_tokens`` keeps, besides, the newest of
the older results up to that many tokens (opencode's prune, gemini-cli's masking);
``at_prompts`` acts only as a new user turn starts (opencode prunes when the agent has answered).
The context-editing options:
``trigger_tokens`` (act only over that size; ``trigger_on = "history"`` compares the history the
client holds, with what the layer cleared counted whole, as the API's server-side edit does),
``clear_at_least`` (act only when it frees that
many tokens) and ``clear_inputs`` (also empty the tool_use input). ``idle_minutes`` acts only on
a call made that long after the previous one by the recording's times (Claude Code's time-based
microcompact: once the prompt cache has expired, clearing costs no cache read). A replacement
that is not shorter is skipped, unless ``clear_short``.

Incremental: once a result is old it stays old while the context only grows, so the layer
remembers in the context's ``memo`` how many results it has already dealt with and looks only at
the ones that became old since (the count survives snips and summaries that keep earlier results).
The count goes into the context it returns, never into the one it was given.
"""

from __future__ import annotations

from typing import Literal

from ..context import Context
from ...transcripts.messages import Entry
from ...config import LayerConfig, NonNegative, opt, section
from .base import NOTHING, CallFacts, LayerStats, RunEnv
from .registry import register


def _cutoff(context: Context, config: MicroConfig, chars_per_token: float) -> int:
    """How many tool results, from the first, are old enough to replace."""
    cut = _kept_by_count(context, config)
    if config.protect_tokens and cut > 0:
        # the newest of the older results, up to protect_tokens, are kept too; the one that
        # crosses the budget and every older one may go (opencode's prune, gemini-cli's masking)
        entries, refs, budget, total = context.entries, context.result_refs, config.protect_tokens * chars_per_token, 0
        while cut > 0:
            pos, k = refs[cut - 1]
            total += entries[pos].results[k].size
            if total > budget:
                break
            cut -= 1
    return max(cut, 0)


def _kept_by_count(context: Context, config: MicroConfig) -> int:
    """The cutoff of keep_recent: results, assistant turns or user turns."""
    if config.only_consumed:
        limit = context.refs_before(context.last_assistant) if context.last_assistant >= 0 else 0
    else:
        limit = context.n_refs
    if config.keep_by == "results":
        return limit - config.keep_recent
    if config.keep_recent == 0:
        return limit
    seen = 0
    user_turns = config.keep_by == "user_turns"
    for pos in range(len(context.entries) - 1, -1, -1):  # the keep_recent-th last turn
        entry = context.entries[pos]
        if (entry.role == "user" and entry.has_text and entry.origin >= 0) if user_turns else entry.role == "assistant":
            seen += 1
            if seen == config.keep_recent:
                return min(limit, context.refs_before(pos))
    return 0


@section
class MicroConfig(LayerConfig):
    """L2 micro_compact: replace old tool results with a placeholder."""

    keep_recent: NonNegative = opt(3, "most recent tool results (or turns, see keep_by) left intact")
    keep_by: Literal["results", "turns", "user_turns"] = opt(
        "results", "count keep_recent in tool results, in assistant turns (observation masking), or in user turns "
                   "(the user's prompts, each with the agent's calls after it: opencode)")
    min_chars: NonNegative = opt(120, "only results longer than this are replaced")
    placeholder: str = opt("[Earlier tool result compacted. Re-run if needed.]",
                           "replacement; {tool_name} is filled in")
    preserve_tools: list[str] = opt(
        [], "tools whose results are never replaced (alias exclude_tools, the context-editing API's name)")
    only_consumed: bool = opt(False, "touch only results before the last assistant message")
    string_content_only: bool = opt(False, "skip results whose content is a list of blocks")
    trigger_tokens: NonNegative = opt(0, "act only while the context is over this many tokens (0: always)")
    clear_at_least: NonNegative = opt(0, "act only if that frees at least this many tokens")
    clear_inputs: bool = opt(False, "also clear the input of the tool_use whose result is replaced")
    idle_minutes: NonNegative = opt(
        0, "act only on a call made this many minutes or more after the previous one, by the recording's times "
           "(its prompt cache has gone cold: Claude Code's time-based microcompact); 0: on every call", added=True)
    at_prompts: bool = opt(
        False, "act only on the first call after a user prompt, when the agent has answered the previous one "
               "(opencode prunes as a user turn ends)", added=True)
    clear_short: bool = opt(
        False, "replace every old result, however short: min_chars and the rule that a replacement must be shorter "
               "are not applied (the API's edit replaces every old result; by default a result the placeholder would "
               "not shorten is left)", added=True)
    trigger_on: Literal["context", "history"] = opt(
        "context", "what trigger_tokens compares: the context as it is, or the history the client holds, with what "
                   "this layer cleared counted whole (the API's context editing runs on the server, on every request, "
                   "over the client's whole history)", added=True)
    protect_tokens: NonNegative = opt(
        0, "also keep the newest of the older results up to this many tokens (opencode's PRUNE_PROTECT, gemini-cli's "
           "tool protection threshold); 0: off", added=True)


@register("micro", MicroConfig, cheap=True)
def micro(context: Context, config: MicroConfig, env: RunEnv) -> tuple[Context, LayerStats]:
    cutoff = _cutoff(context, config, env.estimator.chars_per_token)
    key = f"micro:{id(config)}"
    start = context.memo.get(key)
    if cutoff <= start:
        return context, NOTHING
    cleared = env.state_of(Cleared) if config.trigger_on == "history" else None
    if not _due(context, config, env, cleared.chars.get(key, 0) if cleared else 0):
        return context, NOTHING
    stats = LayerStats()
    chosen, freed = _chosen(context, config, env, start, cutoff)
    if config.clear_at_least and freed / env.estimator.chars_per_token < config.clear_at_least:
        return context, NOTHING  # not worth it yet: look again when more is old
    changes: dict[int, Entry] = {}
    for pos, k, _, text in chosen:
        changes[pos] = (changes.get(pos) or context.entries[pos]).with_result_content(k, text)
        env.ledger.cleared_at[(changes[pos].origin, changes[pos].results[k].block)] = env.now.call
        stats.micro_compacted += 1
        stats.changed_at(pos)
    if config.clear_inputs and chosen:
        # a result's tool_use is normally in the message just before it: look there first
        _clear_inputs(context, {tool_id for _, _, tool_id, _ in chosen}, sorted({p - 1 for p, *_ in chosen if p > 0}),
                      changes, stats)
    result = context.replaced(changes)  # (a copy even with no change: the context given is not written)
    result.memo = context.memo.with_count(key, cutoff)
    if cleared is not None:
        cleared.chars[key] = cleared.chars.get(key, 0) + context.chars - result.chars
    return result, stats


def _due(context: Context, config: MicroConfig, env: RunEnv, cleared_chars: int) -> bool:
    """Whether the layer's triggers hold at this call: its tokens (with what it cleared, for a
    history trigger), a prompt just given, the time idle."""
    if config.trigger_tokens and env.estimator.tokens(context.chars + cleared_chars) <= config.trigger_tokens:
        return False
    return gates_hold(config, env.now)


def gates_hold(config: MicroConfig, now: CallFacts) -> bool:
    """Whether the layer's gates by the recording's prompts and times hold at the call ``now``: a
    prompt just given (``at_prompts``), the time idle (``idle_minutes``)."""
    if config.at_prompts and not now.after_prompt:
        return False
    return not (config.idle_minutes and (now.idle_seconds is None or now.idle_seconds < config.idle_minutes * 60))


def _chosen(context: Context, config: MicroConfig, env: RunEnv, start: int, cutoff: int
            ) -> tuple[list[tuple[int, int, str, str]], int]:
    """The results to clear between ``start`` and ``cutoff`` (position, result index, tool id,
    placeholder), and the characters that frees."""
    preserve = set(config.preserve_tools)
    chosen: list[tuple[int, int, str, str]] = []
    freed = 0
    for pos, k in context.refs_between(start, cutoff):
        fact = context.entries[pos].results[k]
        if (fact.size <= config.min_chars and not config.clear_short) or (
                config.string_content_only and not fact.is_str):
            continue
        name = env.tool_names.get(fact.tool_use_id, "unknown")
        if name in preserve:
            continue
        text = config.placeholder.replace("{tool_name}", name)
        if len(text) >= fact.size and not config.clear_short:
            continue
        chosen.append((pos, k, fact.tool_use_id, text))
        freed += fact.size - len(text)
    return chosen, freed


class Cleared:
    """What the micro layer has taken out of the context in a run, in characters, by its key: what
    a ``trigger_on = "history"`` trigger adds back. (A plain class, as the run's other small
    records: ``dataclass`` would compile its ``__init__`` at every start.)"""

    __slots__ = ("chars",)

    def __init__(self) -> None:
        self.chars: dict[str, int] = {}


def _clear_inputs(context: Context, ids: set[str], likely: list[int], changes: dict[int, Entry],
                  stats: LayerStats) -> None:
    """Empty the inputs of the tool_use blocks whose results were cleared (context editing)."""
    left = set(ids)
    for pos in [*likely, *range(len(context.entries))]:
        if not left:
            return
        entry = changes.get(pos) or context.entries[pos]
        hit = left.intersection(entry.tool_use_ids)
        if not hit:
            continue
        left -= hit
        content = [{**b, "input": {}} if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id") in hit
                   and b.get("input") else b for b in entry.message["content"]]
        if content != entry.message["content"]:
            changes[pos] = entry.with_message({**entry.message, "content": content})
            stats.changed_at(pos)
