"""L2 micro_compact: replace old tool results with a short placeholder.

Every tool_result block but the last ``keep_recent`` whose content is longer than ``min_chars``
gets ``placeholder`` (``{tool_name}`` is filled from the matching tool_use). ``preserve_tools``
are never replaced; ``only_consumed`` limits it to results before the last assistant message
(seed 003), where ``keep_recent`` counts consumed results; ``string_content_only`` skips
list-form contents as seed 003 does. A replacement that is not shorter is skipped.

Incremental: once a result is old it stays old while the context only grows, so the layer
remembers in ``context.memo`` how many results it has already dealt with and looks only at the
ones that became old since.
"""

from __future__ import annotations

from ..context import Context
from ..messages import Entry
from ..policy import MicroConfig
from .base import LayerStats, RunEnv


def micro(context: Context, config: MicroConfig, env: RunEnv) -> tuple[Context, LayerStats]:
    stats = LayerStats()
    refs = context.result_refs
    if config.only_consumed:
        limit = context.refs_before(context.last_assistant) if context.last_assistant >= 0 else 0
    else:
        limit = len(refs)
    cutoff = limit - config.keep_recent
    key = f"micro:{id(config)}"
    start = context.memo.get(key, 0)
    if cutoff <= start:
        return context, stats
    preserve = set(config.preserve_tools)
    changes: dict[int, Entry] = {}
    for pos, k in refs[start:cutoff]:
        entry = changes.get(pos) or context.entries[pos]
        fact = entry.results[k]
        if fact.size <= config.min_chars or (config.string_content_only and not fact.is_str):
            continue
        name = env.tool_names.get(fact.tool_use_id, "unknown")
        if name in preserve:
            continue
        text = config.placeholder.replace("{tool_name}", name)
        if len(text) >= fact.size:
            continue
        content = list(entry.message["content"])
        content[fact.block] = {**content[fact.block], "content": text}
        changes[pos] = entry.with_message({**entry.message, "content": content})
        stats.micro_compacted += 1
        stats.changed_at(pos)
    result = context.replaced(changes) if changes else context
    result.memo[key] = cutoff  # a cache of derived facts, not content
    return result, stats
