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
from .measures import Measures
from .records import TurnRecord


def keeping_turns(measures: Measures, *, probes: bool, keeps_contexts: bool, acts: bool) -> Any:
    """The native loop of a run (``_native.KeepingTurns``, measured by its ``measures``' native
    ones), or None where the Python loop runs it: no native measures (the python core, exact
    counts), a policy that ``acts``, a run that can lose a probe (``probes``), a run that keeps
    contexts."""
    native = native_module()
    if native is None or measures.native is None or acts or probes or keeps_contexts:
        return None
    return native.KeepingTurns(measures.native, TurnRecord)
