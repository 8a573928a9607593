"""Strands Agents' conversation managers as policy steps: ``SlidingWindowConversationManager``
(``sliding_window``) and ``SummarizingConversationManager`` (``summarizing``), the framework's own
code run on the recorded messages.

The messages become Strands' (Bedrock's shape: ``{"role", "content": [{"text"}, {"toolUse"},
{"toolResult"}, {"reasoningContent"}]}``), one for one; a block Strands has no kind for is a text
of its JSON, so it counts as much as it weighs. A message the manager left as it was comes back as
the very one given; one it changed or made is converted back, each block it left kept as given.

The manager is kept for the run (``facts.state``) and is driven as an agent drives it:

- at the first call after a user prompt, the agent's previous invocation has ended:
  ``apply_management`` on the messages before the prompt (the sliding window trims to its size);
- before every model call, its hooks: proactive compression when ``proactive_threshold`` is set
  (the projected tokens by Strands' own estimate, over the run's window as the model's
  ``context_window_limit``), then the per-turn management of ``per_turn``;
- while the context is over the window (the run's estimate: where the model would refuse it),
  ``reduce_context`` with a ``ContextWindowOverflowException``, as the agent does on that error,
  until it fits or the manager gives up (then the call overflows).

Its summaries come from compactlab's summarizer: the model Strands calls is a stand-in whose
``stream`` answers with ``facts.summarize``, asked with Strands' own summarization prompt.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import orjson

from . import imported, installed_version, require
from ..plain import dataclass

if TYPE_CHECKING:
    from strands._async import run_async
    from strands.agent.conversation_manager import SlidingWindowConversationManager, SummarizingConversationManager
    from strands.types.exceptions import ContextWindowOverflowException

require("strands", "strands")  # (the extra: said when the step is loaded, not run)

#: its log goes where a program that configures logging sends it, never raw to the terminal: what
#: it reports (a failed summary) compactlab reports itself
logging.getLogger("strands").addHandler(logging.NullHandler())
VERSION = installed_version("strands-agents")
#: the model Strands asks for a summary (a ``strands`` Model: made by ``_load``)
_Summarizer: Any


def _load() -> None:
    """Strands' classes, imported when a step first runs (a policy of these steps is loaded, listed
    and fingerprinted without them: importing Strands costs about half a second)."""
    if "_Summarizer" in globals():
        return
    with imported("strands"):
        from strands._async import run_async
        from strands.agent.conversation_manager import (
            SlidingWindowConversationManager,
            SummarizingConversationManager,
        )
        from strands.agent.conversation_manager.compression.context_compression import DEFAULT_SUMMARIZATION_PROMPT
        from strands.models.model import Model
        from strands.types.exceptions import ContextWindowOverflowException

    class Summarizer(Model):
        """The model Strands asks for a summary: it answers with compactlab's summarizer."""

        def __init__(self, facts: Any) -> None:
            self.facts = facts

        def update_config(self, **model_config: Any) -> None:
            pass

        def get_config(self) -> Any:
            return {"context_window_limit": self.facts.window}

        def structured_output(self, output_model: Any, prompt: Any, system_prompt: str | None = None,
                              **kwargs: Any) -> Any:
            raise NotImplementedError("compactlab's stand-in model gives summaries only")

        async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: str | None = None,
                         **kwargs: Any) -> Any:
            # (the last message is Strands' "Please summarize this conversation.")
            text = self.facts.summarize([from_strands(m) for m in messages[:-1]],
                                        system_prompt or DEFAULT_SUMMARIZATION_PROMPT)
            yield {"messageStart": {"role": "assistant"}}
            yield {"contentBlockDelta": {"delta": {"text": text}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}

    globals().update(run_async=run_async, SlidingWindowConversationManager=SlidingWindowConversationManager,
                     SummarizingConversationManager=SummarizingConversationManager,
                     ContextWindowOverflowException=ContextWindowOverflowException,
                     _Summarizer=Summarizer)  # (last: what _load's first line tests)


#: reduce_context calls on one call before the step stops asking (an agent would retry as often)
MAX_REDUCTIONS = 64


@dataclass
class SlidingWindowSettings:
    """``SlidingWindowConversationManager``'s arguments (its defaults); ``per_turn`` 0 is False, 1
    True, N every Nth model call; ``proactive_threshold`` 0 is off, else its compression threshold."""

    window_size: int = 40
    should_truncate_results: bool = True
    per_turn: int = 0
    proactive_threshold: float = 0.0


@dataclass
class SummarizingSettings:
    """``SummarizingConversationManager``'s arguments (its defaults); ``proactive_threshold`` 0 is
    off, else its compression threshold."""

    summary_ratio: float = 0.3
    preserve_recent_messages: int = 10
    proactive_threshold: float = 0.0


def sliding_window(messages: list[dict], facts: Any, settings: SlidingWindowSettings) -> list[dict]:
    """Strands' ``SlidingWindowConversationManager``, driven as an agent drives it."""
    _load()

    def make() -> Any:
        per_turn: bool | int = settings.per_turn if settings.per_turn > 1 else bool(settings.per_turn)
        return SlidingWindowConversationManager(settings.window_size, settings.should_truncate_results,
                                                per_turn=per_turn, proactive_compression=_proactive(settings))

    return _drive(messages, facts, make)


sliding_window.settings = SlidingWindowSettings  # type: ignore[attr-defined]
sliding_window.identity = f"strands-agents {VERSION}"  # type: ignore[attr-defined]


def summarizing(messages: list[dict], facts: Any, settings: SummarizingSettings) -> list[dict]:
    """Strands' ``SummarizingConversationManager``, driven as an agent drives it."""
    _load()

    def make() -> Any:
        return SummarizingConversationManager(settings.summary_ratio, settings.preserve_recent_messages,
                                              proactive_compression=_proactive(settings))

    return _drive(messages, facts, make)


summarizing.settings = SummarizingSettings  # type: ignore[attr-defined]
summarizing.identity = f"strands-agents {VERSION}"  # type: ignore[attr-defined]


def _proactive(settings: Any) -> Any:
    return {"compression_threshold": settings.proactive_threshold} if settings.proactive_threshold else None


def _drive(messages: list[dict], facts: Any, make: Any) -> list[dict]:
    state = facts.state
    if "manager" not in state:
        state["manager"] = make()
    manager = state["manager"]
    model = _Summarizer(facts)
    held = [to_strands(m) for m in messages]
    agent = SimpleNamespace(messages=list(held), model=model, aux_model=model)
    if facts.after_prompt and facts.call > 0:  # the previous invocation ended before this prompt
        last = max((i for i, m in enumerate(held) if m["role"] == "assistant"), default=-1)
        if last >= 0:
            since = agent.messages[last + 1:]
            agent.messages = agent.messages[:last + 1]
            manager.apply_management(agent)
            agent.messages.extend(since)
    projected = run_async(lambda: model.count_tokens(agent.messages))
    event: Any = SimpleNamespace(agent=agent, projected_input_tokens=projected)  # (what the hooks read of one)
    manager._on_before_model_call_threshold(event)
    if isinstance(manager, SlidingWindowConversationManager):
        manager._on_before_model_call(event)
    for _ in range(MAX_REDUCTIONS):
        if facts.count(_back(agent.messages, held, messages)) <= facts.window:
            break
        try:
            manager.reduce_context(agent, e=ContextWindowOverflowException("the prompt is over the model's window"))
        except ContextWindowOverflowException:
            break  # it cannot reduce further: the agent would fail here, and the call overflows
    return _back(agent.messages, held, messages)


# --- the messages, to Strands' and back -------------------------------------------------------


def _back(now: list[dict], held: list[dict], given: list[dict]) -> list[dict]:
    """The manager's messages as Anthropic messages: one it kept as it was is the one given."""
    place = {id(m): i for i, m in enumerate(held)}
    out = []
    for m in now:
        i = place.get(id(m))
        if i is None:
            out.append(from_strands(m))
        elif m == to_strands(given[i]):
            out.append(given[i])
        else:  # changed in place (a truncated tool result): each block it left is kept as given
            out.append(_changed(m, given[i]))
    return out


def _changed(m: dict, given: dict) -> dict:
    content = given["content"]
    if isinstance(content, str) or len(content) != len(m["content"]):
        return from_strands(m)
    blocks = [b if _block_to(b) == s else _block_from(s) for b, s in zip(content, m["content"])]
    return {**given, "content": blocks}


def to_strands(m: dict) -> dict:
    content = m["content"]
    blocks = [{"text": content}] if isinstance(content, str) else [_block_to(b) for b in content]
    return {"role": m["role"], "content": blocks}


def _block_to(b: Any) -> dict:
    if not isinstance(b, dict):
        return {"text": str(b)}
    kind = b.get("type")
    if kind == "text":
        return {"text": b.get("text", "")}
    if kind == "tool_use":
        return {"toolUse": {"toolUseId": b.get("id", ""), "name": b.get("name", ""), "input": b.get("input")}}
    if kind == "tool_result":
        content = b.get("content")
        parts = ([{"text": content}] if isinstance(content, str) else
                 [_block_to(p) for p in content] if isinstance(content, list) else [])
        return {"toolResult": {"toolUseId": b.get("tool_use_id", ""), "content": parts,
                               "status": "error" if b.get("is_error") else "success"}}
    if kind == "thinking":
        return {"reasoningContent": {"reasoningText": {"text": b.get("thinking", ""),
                                                       "signature": b.get("signature", "")}}}
    return {"text": orjson.dumps(b).decode()}  # (an image, a document: as much as it weighs)


def from_strands(m: dict) -> dict:
    return {"role": m["role"], "content": [_block_from(b) for b in m["content"]]}


def _block_from(s: dict) -> dict:
    if "toolUse" in s:
        use = s["toolUse"]
        return {"type": "tool_use", "id": use.get("toolUseId", ""), "name": use.get("name", ""),
                "input": use.get("input")}
    if "toolResult" in s:
        result = s["toolResult"]
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.get("toolUseId", ""),
                                 "content": [_block_from(p) for p in result.get("content", [])]}
        if result.get("status") == "error":
            block["is_error"] = True
        return block
    if "reasoningContent" in s:
        text = s["reasoningContent"].get("reasoningText", {})
        return {"type": "thinking", "thinking": text.get("text", ""), "signature": text.get("signature", "")}
    if "text" in s:
        return {"type": "text", "text": s["text"]}
    return {"type": "text", "text": orjson.dumps(s, default=str).decode()}
