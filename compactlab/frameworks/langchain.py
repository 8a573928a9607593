"""LangChain v1's compactors as policy steps: ``SummarizationMiddleware`` (``summarization``) and
``ContextEditingMiddleware`` with ``ClearToolUsesEdit`` (``clear_tool_uses``), the framework's own
code run on the recorded messages.

The messages become LangChain's: a user message's tool results one ``ToolMessage`` each (then a
``HumanMessage`` with the rest of it), an assistant message an ``AIMessage`` whose tool uses are
its ``tool_calls``. Each carries the place it came from in its ``id`` (which the middleware keep),
so what comes back is put together again from the parts it was made of.

How each runs as it does in an agent:

- ``SummarizationMiddleware`` is a ``before_model`` hook that rewrites the agent's state: what it
  summarised stays summarised (the step's answer is the context from then on). Its model is a
  stand-in with the run's window as its profile (``max_input_tokens``, what a ``fraction`` counts
  in) and its summaries come from compactlab's summarizer, through the middleware's own
  ``summarizer`` hook, asked with its default prompt's instructions. The last reply carries the
  usage its provider reported (``usage_metadata``: the previous call's prompt and reply, by the
  run's estimate), on which the middleware triggers as it does in an agent.
- ``ContextEditingMiddleware`` wraps the model call: it edits the request only, and the agent's
  state keeps every tool result. So the step keeps what it cleared (``facts.state``), puts it back
  before the edit runs again, and the edit sees the whole history at every call, as in an agent.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Literal

from . import imported, installed_version, require
from ..plain import dataclass

if TYPE_CHECKING:
    from langchain.agents.middleware.context_editing import ClearToolUsesEdit, ContextEditingMiddleware
    from langchain.agents.middleware.summarization import SummarizationMiddleware
    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

require("langchain", "langchain", "langchain_core")  # (the extra: said when the step is loaded, not run)

#: its log goes where a program that configures logging sends it, never raw to the terminal: what
#: it reports (a failed summary) compactlab reports itself
logging.getLogger("langchain").addHandler(logging.NullHandler())
VERSION = installed_version("langchain")
#: the instructions of LangChain's summary prompt (the messages go to the summarizer as data), set
#: by ``_load`` with LangChain's classes
SUMMARY_INSTRUCTIONS: str


def _load() -> None:
    """LangChain's classes, imported when a step first runs or converts (a policy of these steps is
    loaded, listed and fingerprinted without them: importing LangChain costs about a second)."""
    if "AIMessage" in globals():
        return
    with imported("langchain"):
        from langchain.agents.middleware.context_editing import ClearToolUsesEdit, ContextEditingMiddleware
        from langchain.agents.middleware.summarization import DEFAULT_SUMMARY_PROMPT, SummarizationMiddleware
        from langchain.agents.middleware.types import ModelRequest
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    globals().update(ClearToolUsesEdit=ClearToolUsesEdit, ContextEditingMiddleware=ContextEditingMiddleware,
                     SummarizationMiddleware=SummarizationMiddleware, ModelRequest=ModelRequest,
                     GenericFakeChatModel=GenericFakeChatModel, BaseMessage=BaseMessage, HumanMessage=HumanMessage,
                     ToolMessage=ToolMessage,
                     SUMMARY_INSTRUCTIONS=DEFAULT_SUMMARY_PROMPT.split("<messages>")[0].strip(),
                     AIMessage=AIMessage)  # (last: what _load's first line tests)


def __getattr__(name: str) -> Any:
    """LangChain's names and the summary's instructions, read from outside before a step ran."""
    if name in ("SUMMARY_INSTRUCTIONS", "AIMessage", "BaseMessage", "HumanMessage", "ToolMessage"):
        _load()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- the steps -------------------------------------------------------------------------------


@dataclass
class SummarizationSettings:
    """``SummarizationMiddleware``'s arguments. ``trigger`` is each non-zero ``trigger_*`` (any of
    them: LangChain's list of clauses), ``keep`` the first non-zero of ``keep_tokens``,
    ``keep_fraction`` and ``keep_messages``."""

    trigger_tokens: int = 0
    trigger_fraction: float = 0.8
    trigger_messages: int = 0
    keep_messages: int = 20
    keep_tokens: int = 0
    keep_fraction: float = 0.0
    trim_tokens_to_summarize: int = 4000
    #: who counts the tokens its trigger and keep compare: LangChain's count_tokens_approximately
    #: (its default), or the run's estimate (what compactlab's own layers compare)
    tokens: Literal["langchain", "compactlab"] = "langchain"


def summarization(messages: list[dict], facts: Any, settings: SummarizationSettings) -> list[dict]:
    """LangChain's ``SummarizationMiddleware.before_model`` on the agent's messages."""
    _load()
    parts = _Parts(messages)

    def summarize(chosen: list[Any]) -> str:
        return str(facts.summarize(from_langchain(chosen), SUMMARY_INSTRUCTIONS))

    counter = {} if settings.tokens == "langchain" else {"token_counter": _counter(facts, parts)}
    model = GenericFakeChatModel(messages=iter(()), profile={"max_input_tokens": facts.window})
    _report_usage(parts, messages, facts, str(model._get_ls_params().get("ls_provider")))
    middleware = SummarizationMiddleware(
        model,
        trigger=_trigger(settings) or None, keep=_keep(settings),
        trim_tokens_to_summarize=settings.trim_tokens_to_summarize or None, summarizer=summarize, **counter)
    update = middleware.before_model({"messages": parts.lc}, None)  # type: ignore[arg-type]
    if update is None:
        return messages
    return parts.back(update["messages"][1:])  # (the first: RemoveMessage(REMOVE_ALL_MESSAGES))


summarization.settings = SummarizationSettings  # type: ignore[attr-defined]
summarization.identity = f"langchain {VERSION}"  # type: ignore[attr-defined]


def _report_usage(parts: "_Parts", messages: list[dict], facts: Any, provider: str) -> None:
    """The usage the provider reported with the last reply, on its ``AIMessage``, as an agent's
    message carries it: the previous call's prompt and reply, by the run's estimate (fit to the
    recording's usage). The middleware triggers on it, and scales its approximate count by it."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    if last < 0:
        return
    ai = parts.made.get(f"cl{last}")
    if isinstance(ai, AIMessage):
        total = int(facts.count(messages[:last + 1]))
        ai.usage_metadata = {"input_tokens": total, "output_tokens": 0, "total_tokens": total}
        ai.response_metadata = {**ai.response_metadata, "model_provider": provider}


def _counter(facts: Any, parts: "_Parts | None" = None) -> Any:
    """The run's estimate as a LangChain token counter: of the messages as ``parts`` puts them back
    (a message left as it was is the very one given, whose size is known), else converted."""
    def count(messages: Any) -> int:
        return int(facts.count(parts.back(list(messages)) if parts is not None else from_langchain(list(messages))))

    return count


def _trigger(s: SummarizationSettings) -> list[Any]:
    clauses = (("tokens", s.trigger_tokens), ("fraction", s.trigger_fraction), ("messages", s.trigger_messages))
    return [(kind, value) for kind, value in clauses if value]


def _keep(s: SummarizationSettings) -> Any:
    if s.keep_tokens:
        return ("tokens", s.keep_tokens)
    if s.keep_fraction:
        return ("fraction", s.keep_fraction)
    return ("messages", s.keep_messages)


@dataclass
class ClearToolUsesSettings:
    """``ClearToolUsesEdit``'s arguments (its defaults)."""

    trigger: int = 100_000
    clear_at_least: int = 0
    keep: int = 3
    clear_tool_inputs: bool = False
    exclude_tools: list[str] = field(default_factory=list)
    placeholder: str = "[cleared]"
    #: who counts the tokens its trigger compares (see SummarizationSettings.tokens)
    tokens: Literal["langchain", "compactlab"] = "langchain"


def clear_tool_uses(messages: list[dict], facts: Any, settings: ClearToolUsesSettings) -> list[dict]:
    """LangChain's ``ContextEditingMiddleware`` with one ``ClearToolUsesEdit``, on the request the
    agent would send (the whole history: what it cleared at earlier calls is put back first)."""
    _load()
    cleared: dict[str, Any] = facts.state.setdefault("cleared", {})  # tool_use id -> what it held
    whole = _restore(messages, cleared, settings.placeholder)
    parts = _Parts(whole)
    edit = ClearToolUsesEdit(trigger=settings.trigger, clear_at_least=settings.clear_at_least, keep=settings.keep,
                             clear_tool_inputs=settings.clear_tool_inputs, exclude_tools=tuple(settings.exclude_tools),
                             placeholder=settings.placeholder)
    sent: list[list[Any]] = []

    def handler(request: ModelRequest) -> Any:
        sent.append(request.messages)
        return AIMessage(content="")

    request = ModelRequest(model=GenericFakeChatModel(messages=iter(())), messages=parts.lc)
    counter = None if settings.tokens == "langchain" else _counter(facts, parts)
    middleware = ContextEditingMiddleware(edits=[edit], token_counter=counter)
    if middleware._resolve_token_counter(request)(parts.lc) <= settings.trigger:
        return messages  # (the edit's own first test: under its trigger it changes nothing; its copy is skipped)
    middleware.wrap_model_call(request, handler)
    out = parts.back(sent[0])  # (the edit drops no message: one for each of the whole history's)
    for before, after in zip(whole, out):
        _remember(before, after, cleared)
    # a message sent as it was given (nothing cleared, or cleared as at the last call) is the one given
    return [g if m is w or m == g else m for m, w, g in zip(out, whole, messages)]


clear_tool_uses.settings = ClearToolUsesSettings  # type: ignore[attr-defined]
clear_tool_uses.identity = f"langchain {VERSION}"  # type: ignore[attr-defined]


def _restore(messages: list[dict], cleared: dict[str, Any], placeholder: str) -> list[dict]:
    """The messages as the agent holds them: the tool results (and inputs) cleared at earlier calls
    put back."""
    if not cleared:
        return messages
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list) and any(
                b.get("type") in ("tool_result", "tool_use") and (b.get("tool_use_id") or b.get("id")) in cleared
                for b in content if isinstance(b, dict)):
            m = {**m, "content": [_put_back(b, cleared, placeholder) for b in content]}
        out.append(m)
    return out


def _put_back(block: Any, cleared: dict[str, Any], placeholder: str) -> Any:
    if not isinstance(block, dict):
        return block
    if block.get("type") == "tool_result" and block.get("tool_use_id") in cleared:
        held = cleared[block["tool_use_id"]]
        if "content" in held and block.get("content") == placeholder:
            return {**block, "content": held["content"]}
    if block.get("type") == "tool_use" and block.get("id") in cleared:
        held = cleared[block["id"]]
        if "input" in held and block.get("input") == {}:
            return {**block, "input": held["input"]}
    return block


def _remember(before: dict, after: dict, cleared: dict[str, Any]) -> None:
    """What the edit cleared in a message, kept to be put back at the next call."""
    if before is after or not isinstance(before["content"], list) or not isinstance(after["content"], list):
        return
    for b, a in zip(before["content"], after["content"]):
        if not isinstance(b, dict) or b == a:
            continue
        if b.get("type") == "tool_result":
            cleared.setdefault(b["tool_use_id"], {})["content"] = b.get("content")
        elif b.get("type") == "tool_use":
            cleared.setdefault(b["id"], {})["input"] = b.get("input")


# --- the messages, to LangChain's and back ----------------------------------------------------


class _Parts:
    """Anthropic messages as LangChain messages (``lc``), each tagged with where it came from in
    its ``id`` (``cl<message>`` or ``cl<message>.<tool result>``), and put back together."""

    def __init__(self, messages: list[dict]) -> None:
        _load()
        self.messages = messages
        self.lc: list[Any] = []  # (LangChain's AnyMessage)
        self.made: dict[str, BaseMessage] = {}  # id -> the part as it was made
        self.count: list[int] = []  # each message's parts
        names: dict[str, str] = {}
        for i, m in enumerate(messages):
            made = _to_langchain(i, m, names)
            self.count.append(len(made))
            for part in made:
                self.made[part.id or ""] = part
            self.lc.extend(made)

    def back(self, lc: Sequence[BaseMessage]) -> list[dict]:
        """The messages the framework answered with, as Anthropic messages: a message all of whose
        parts came back unchanged is the very one given."""
        out: list[dict] = []
        k = 0
        while k < len(lc):
            i = _origin(lc[k])
            if i is None or i >= len(self.messages):
                out.append(_from_langchain(lc[k]))
                k += 1
                continue
            group = [lc[k]]
            k += 1
            while k < len(lc) and _origin(lc[k]) == i:
                group.append(lc[k])
                k += 1
            out.append(self._message(i, group))
        return out

    def _message(self, i: int, group: list[BaseMessage]) -> dict:
        given = self.messages[i]
        if len(group) == self.count[i] and all(p is self.made.get(p.id or "") or p == self.made.get(p.id or "")
                                               for p in group):
            return given
        content = given["content"]
        if isinstance(content, str):  # (one part: a text the framework changed)
            return {**given, "content": group[0].content}
        by_id = {p.id: p for p in group}
        blocks: list[Any] = []
        k = 0
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                part = by_id.get(f"cl{i}.{k}")
                k += 1
                if part is not None:
                    blocks.append(b if part.content == _result_content(b) else {**b, "content": part.content})
            elif isinstance(b, dict) and b.get("type") == "tool_use":
                ai = by_id.get(f"cl{i}")
                if isinstance(ai, AIMessage):
                    args = next((c["args"] for c in ai.tool_calls if c.get("id") == b.get("id")), b.get("input"))
                    blocks.append(b if args == b.get("input") else {**b, "input": args})
            elif f"cl{i}" in by_id:
                blocks.append(b)
        return {**given, "content": blocks}


def _origin(message: BaseMessage) -> int | None:
    tag = message.id or ""
    if not tag.startswith("cl"):
        return None
    head = tag[2:].split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _to_langchain(i: int, m: dict, names: dict[str, str]) -> list[BaseMessage]:
    content = m["content"]
    if m["role"] == "assistant":
        if isinstance(content, str):
            return [AIMessage(content=content, id=f"cl{i}")]
        calls = []
        rest = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_use":
                names[b.get("id", "")] = b.get("name", "")
                args = b.get("input")
                calls.append({"id": b.get("id"), "name": b.get("name", ""), "args": args if isinstance(args, dict)
                              else {"input": args}, "type": "tool_call"})
            else:
                rest.append(b)
        return [AIMessage(content=rest, tool_calls=calls, id=f"cl{i}")]
    if isinstance(content, str):
        return [HumanMessage(content=content, id=f"cl{i}")]
    parts: list[BaseMessage] = []
    rest = []
    for b in content:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            tool_id = b.get("tool_use_id", "")
            parts.append(ToolMessage(content=_result_content(b), tool_call_id=tool_id, name=names.get(tool_id),
                                     status="error" if b.get("is_error") else "success", id=f"cl{i}.{len(parts)}"))
        else:
            rest.append(b)
    if rest or not parts:
        parts.append(HumanMessage(content=rest, id=f"cl{i}"))
    return parts


def _result_content(block: dict) -> Any:
    content = block.get("content")
    return "" if content is None else content


def from_langchain(messages: Sequence[BaseMessage]) -> list[dict]:
    """LangChain messages as Anthropic messages, tool messages folded into the user message they
    answer (what a summarizer is given)."""
    _load()
    out: list[dict] = []
    for m in messages:
        message = _from_langchain(m)
        if out and message["role"] == out[-1]["role"] == "user" and isinstance(m, ToolMessage):
            previous = out[-1]["content"]
            blocks = previous if isinstance(previous, list) else [{"type": "text", "text": previous}]
            out[-1] = {"role": "user", "content": [*blocks, *message["content"]]}
        else:
            out.append(message)
    return out


def _from_langchain(m: BaseMessage) -> dict:
    content = m.content
    if isinstance(m, ToolMessage):
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": content}
        if m.status == "error":
            block["is_error"] = True
        return {"role": "user", "content": [block]}
    if isinstance(m, AIMessage):
        blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) and content else list(
            content if isinstance(content, list) else [])
        blocks += [{"type": "tool_use", "id": c.get("id"), "name": c["name"], "input": c["args"]} for c in m.tool_calls]
        return {"role": "assistant", "content": blocks if m.tool_calls or not isinstance(content, str) else content}
    return {"role": "user", "content": content}
