"""The turns of a policy that keeps every message, run by the native core (#59).

A policy with no layer on (``none``, the reference every ``compare`` runs, and any policy whose
layers are all off) sends at each call the whole history as recorded: the loop appends, sizes,
judges against the window and measures, and no layer runs. On the native core that loop is one
crossing a call (``_native.KeepingTurns``, ``native/src/turns.rs``): the messages appended, the
context sized, the prompt cache, raw baseline, violations and retention measured, the record
made, in Rust. ``loop.Turns`` is the reference (``COMPACTLAB_CORE=python`` runs it); the
differential tests hold the two to the same records, summaries and ledgers.

Left to the Python loop: a policy with a layer on, the recording's compactions kept (the context
restarts from their summaries, and recall is measured), exact token counts, a run that keeps
contexts (``keep_contexts``).
"""

from __future__ import annotations

from typing import Any

from ..core import native_module
from .cost.pricing import NativePromptCache
from .measures import Measures
from .records import TurnRecord


def keeping_turns(measures: Measures, env: Any, core: str, *, probes: bool, exact: bool, keeps_contexts: bool,
                  acts: bool) -> Any:
    """The native loop of a run (``_native.KeepingTurns``), or None where the Python loop runs it:
    not on the native core, a policy that ``acts``, a run that can lose a probe (``probes``), exact
    counts (``exact``), a run that keeps contexts."""
    native = native_module() if core == "native" else None
    if native is None or acts or probes or exact or keeps_contexts:
        return None
    cache, raw, violations, retention = measures.prompt_cache, measures.raw, measures.violations, measures.retention
    if not isinstance(cache, NativePromptCache):  # (the native core's measures are the native ones)
        return None
    estimator = env.estimator
    return native.KeepingTurns(cache.core, violations.tracker, violations.logged, raw.base.messages, raw.base.chars,
                               retention.refs, retention.keep, estimator.chars_per_token, estimator.overhead_tokens,
                               TurnRecord)
