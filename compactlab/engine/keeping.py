"""The turns of a policy that keeps every message, or whose one layer is micro, run by the native
core (#59).

A policy with no layer on (``none``, the reference every ``compare`` runs, and any policy whose
layers are all off) sends at each call the whole history as recorded: the loop appends, sizes,
judges against the window and measures, and no layer runs. On the native core that loop is one
crossing a call (``_native.KeepingTurns``, ``native/src/turns.rs``): the messages appended, the
context sized, the prompt cache, raw baseline, violations and retention measured, the record
made, in Rust. ``loop.Turns`` is the reference (``COMPACTLAB_CORE=python`` runs it); the
differential tests hold the two to the same records, summaries and ledgers.

A policy whose one layer is micro (``observation-masking``, replacing old tool results with a
placeholder) runs on ``_native.MaskingTurns`` the same way: the layer's choice of results made on
the context's facts in Rust (``native/src/micro.rs``), each result replaced by the Python message's
own ``with_result_content``, and recall asked in Python (``Measures.recall_at``) of the context as
that loop holds it (``Held``). ``masks`` says which of micro's options it runs.

Left to the Python loop: a policy with another layer on (or micro with an option ``masks`` names),
the recording's compactions kept (the context restarts from their summaries), exact token counts,
a run that keeps contexts (``keep_contexts``).
"""

from __future__ import annotations

from bisect import bisect_left
from operator import attrgetter
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


#: micro's options the masking loop does not run: a policy with one of them on runs on the Python loop
_NOT_MASKED = ("string_content_only", "clear_inputs", "at_prompts", "idle_minutes")
_ORIGIN = attrgetter("origin")


def masks(policy: Policy) -> bool:
    """Whether ``policy``'s one layer is micro with options the masking loop runs: no other layer
    on (a cheap one, the summary, reactive or manual compaction), micro none of ``_NOT_MASKED``."""
    on = [name for name in policy.order if getattr(policy, name).enabled]
    if on != ["micro"] or policy.summary.enabled or policy.reactive.enabled or policy.manual.enabled:
        return False
    return not any(getattr(policy.micro, name) for name in _NOT_MASKED)


def masking_turns(measures: Measures, policy: Policy, env: RunEnv, *, restarts: bool, keeps_contexts: bool) -> Any:
    """The native loop of a run whose policy ``masks`` (``_native.MaskingTurns``), or None where the
    Python loop runs it: no native measures, the recording's compactions replayed (``restarts``), a
    run that keeps contexts."""
    native = native_module()
    if native is None or measures.native is None or restarts or keeps_contexts or not masks(policy):
        return None
    held = Held()
    recall_at = measures.recall_at

    def recall(call: int, pos: int, changed_from: int, intact: bool, tokens: int, reply_chars: int,
               record: TurnRecord) -> None:
        recall_at(CallAt(call, pos, changed_from, intact, tokens, reply_chars), held, record)

    turns = native.MaskingTurns(measures.native, TurnRecord, policy.config_for("micro"), env.tool_names,
                                env.ledger.cleared_at, recall)
    held.entries = turns.entries
    return turns


class Held:
    """The context of a masking run as recall reads it (``probes.check``): the native loop's list of
    messages, changed in place, every one the transcript's in order (none made, none dropped)."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: list = []

    def find_origin(self, origin: int) -> int | None:
        """``Context.find_origin``: the position of the transcript's message ``origin``."""
        entries = self.entries
        j = bisect_left(entries, origin, key=_ORIGIN)
        return j if origin >= 0 and j < len(entries) and entries[j].origin == origin else None

    def made_in_gap(self, origin: int) -> None:
        """``Context.made_in_gap``: no message here is one a policy made."""
        return None
