"""The turns of a policy that keeps every message, or is made of snip and micro, run by the native
core (#59).

A policy with no layer on (``none``, the reference every ``compare`` runs, and any policy whose
layers are all off) sends at each call the whole history as recorded: the loop appends, sizes,
judges against the window and measures, and no layer runs. On the native core that loop is one
crossing a call (``_native.KeepingTurns``, ``native/src/turns.rs``): the messages appended, the
context sized, the prompt cache, raw baseline, violations and retention measured, the record
made, in Rust. ``loop.Turns`` is the reference (``COMPACTLAB_CORE=python`` runs it); the
differential tests hold the two to the same records, summaries and ledgers.

A policy made of the snip and micro layers (``observation-masking``, replacing old tool results
with a placeholder, among them) runs on ``_native.LayerTurns`` the same way: the layers' choices
made on the context's facts in Rust (``native/src/layers.rs``), each result replaced by the Python
message's own ``with_result_content``, snip's placeholder made by the run's ``new_entry``, and
recall asked in Python (``Measures.recall_at``) of the context as that loop holds it (the loop
itself: its ``entries``, ``find_origin`` and ``made_in_gap`` are ``Context``'s). ``native_layers``
says which policies it runs.

Left to the Python loop: a policy with another layer on (or micro with an option ``native_layers`` names),
the recording's compactions kept (the context restarts from their summaries), exact token counts,
a run that keeps contexts (``keep_contexts``).
"""

from __future__ import annotations

from typing import Any

from ..core import native_module
from .layers import RunEnv
from .measures import CallAt, Measures
from .policy import Policy
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


#: micro's options the layers' loop does not run: a policy with one of them on runs on the Python loop
_NOT_NATIVE = ("string_content_only", "clear_inputs", "at_prompts", "idle_minutes")
#: the layers the native loop runs
NATIVE_LAYERS = ("snip", "micro")


def native_layers(policy: Policy) -> list[str] | None:
    """The layers of ``policy`` in its order where the native loop runs them all (snip and micro,
    micro with none of ``_NOT_NATIVE``; the summary, reactive and manual compaction off), else
    None."""
    on: list[str] = [name for name in policy.order if getattr(policy, name).enabled]
    if (not on or any(name not in NATIVE_LAYERS for name in on)
            or policy.summary.enabled or policy.reactive.enabled or policy.manual.enabled):
        return None
    if "micro" in on and any(getattr(policy.micro, name) for name in _NOT_NATIVE):
        return None
    return on


def layer_turns(measures: Measures, policy: Policy, env: RunEnv, *, restarts: bool, keeps_contexts: bool) -> Any:
    """The native loop of a run whose policy's layers it runs (``_native.LayerTurns``,
    ``native_layers``), or None where the Python loop runs it: no native measures, the recording's
    compactions replayed (``restarts``), a run that keeps contexts."""
    native = native_module()
    layers = native_layers(policy)
    if native is None or measures.native is None or restarts or keeps_contexts or layers is None:
        return None
    recall_at = measures.recall_at

    def recall(call: int, pos: int, changed_from: int, intact: bool, tokens: int, reply_chars: int,
               record: TurnRecord, context: Any) -> None:
        # (``context``: the native loop itself, read as a ``Context``: its entries, find_origin, made_in_gap)
        recall_at(CallAt(call, pos, changed_from, intact, tokens, reply_chars), context, record)

    return native.LayerTurns(measures.native, TurnRecord, [(name, policy.config_for(name)) for name in layers],
                             env.tool_names, env.ledger.cleared_at, env.new_entry, recall)
