"""The paired requests of one sample (issue #30 §2), as the API takes them, and what they will cost.

Each sample is two requests with the recorded system prompt and the agent's tools: the context the
policy sent at that call, then the context with no compaction (the control). The messages are the
replay's, with what a fresh request cannot carry taken out: thinking blocks (their signatures are
the recorded model's; thinking is not asked for) and server-side tool blocks (web search). The
tools are the recorded definitions where the format keeps them, otherwise built from the recorded
calls: each tool the agent called, with the argument keys it was called with (``tools_of``).

Both requests share the messages before the first one the policy changed; a cache breakpoint at
the end of that shared prefix (Anthropic; OpenAI-compatible APIs cache prefixes by themselves)
makes the control read it from the prompt cache where it is long enough to be cached
(``CACHE_MINIMUM`` tokens). The estimate prices exactly these requests: the tokens of what is sent
(the system prompt, the tools and the messages: their characters at the transcript's calibrated
characters a token, or 4, and never the calibration's overhead, which stands for what the harness
sent and these requests do not), the prefix written by the first and read by the second, and each
reply at ``max_tokens`` (an upper bound).
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from ..engine.cost.prices import MTOK, ModelPrices
from ..engine.sizing import list_chars
from ..plain import dataclass, pattern
from ..transcripts.messages import Entry, Message, content_text, json_len

#: blocks a fresh request cannot carry (the recorded model's thinking, server-side tools)
UNSENT_BLOCKS = frozenset({"thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result"})
#: the shortest shared prefix, in tokens, that is marked for the prompt cache
CACHE_MINIMUM = 1024
#: a tool name the APIs take
_TOOL_NAME = pattern(r"^[A-Za-z0-9_-]{1,64}$")


#: the system prompt a request carries where the format records none (#46 §3): the first line the
#: harness publishes of its own, else a plain coding agent's; ``--system-prompt FILE`` gives yours
STAND_INS = {
    "claude_code": "You are Claude Code, Anthropic's official CLI for Claude. You are an interactive CLI tool that "
                   "helps users with software engineering tasks. Use the tools available to you to assist the user.",
}
STAND_IN = ("You are a coding agent working in a software repository. Use the tools available to you to complete "
            "the user's task, one step at a time.")


def system_of(recorded: Any, fmt: str, given: tuple[str, str] | None) -> tuple[Any, str]:
    """The system prompt a sample's requests carry, and where it comes from: the recording's, else
    the user's (``given``: its text and its file), else the stand-in for the format."""
    if recorded:
        return recorded, "recorded"
    if given is not None:
        return given[0], f"given ({given[1]})"
    return STAND_INS.get(fmt, STAND_IN), "stand-in (the format records none)"


@dataclass(frozen=True)
class Tools:
    """The agent's tools: each name with its argument keys, and where they come from."""

    specs: tuple[tuple[str, tuple[str, ...]], ...]
    source: str  # "recorded" (the format keeps the definitions) or "built" (from the recorded calls)
    left_out: tuple[str, ...] = ()  # names no API takes

    def anthropic(self) -> list[dict[str, Any]]:
        return [{"name": name, "description": _description(name),
                 "input_schema": {"type": "object", "properties": {k: {} for k in keys}}}
                for name, keys in self.specs]

    def openai(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": name, "description": _description(name),
                                                  "parameters": {"type": "object",
                                                                 "properties": {k: {} for k in keys}}}}
                for name, keys in self.specs]


def _description(name: str) -> str:
    return f"The agent's {name} tool (its arguments as the recorded agent called it)."


def tools_of(entries: list[Entry]) -> Tools:
    """The tools built from the tool calls of ``entries``: names and argument keys, in order. A
    sample is offered those of the calls before it: what the agent had used by then, never a tool
    it first used later (#46 §3)."""
    keys: dict[str, dict[str, None]] = {}
    for e in entries:
        if e.role != "assistant" or not e.tool_use_ids:
            continue
        for block in e.message.get("content") or ():
            if isinstance(block, dict) and block.get("type") == "tool_use":
                name = str(block.get("name") or "")
                args = block.get("input")
                keys.setdefault(name, {}).update(dict.fromkeys(args) if isinstance(args, dict) else {})
    left_out = tuple(n for n in keys if not _TOOL_NAME.match(n))
    return Tools(tuple((n, tuple(k)) for n, k in keys.items() if _TOOL_NAME.match(n)), "built", left_out)


def sendable(messages: list[Message]) -> list[Message]:
    """The messages as a fresh request carries them (``UNSENT_BLOCKS`` taken out; an assistant
    message left with nothing says so in a word)."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in UNSENT_BLOCKS for b in content):
            content = [b for b in content if not (isinstance(b, dict) and b.get("type") in UNSENT_BLOCKS)]
            content = content or [{"type": "text", "text": "(thinking)"}]
        out.append({"role": m.get("role"), "content": content})
    return out


def shared_prefix(first: list[Message], second: list[Message]) -> int:
    """How many leading messages the two contexts share (the same message objects: a replay
    shares what it did not change)."""
    n = 0
    for a, b in zip(first, second):
        if a is not b and a != b:
            break
        n += 1
    return n


@dataclass
class Pair:
    """The two requests of one sample and their estimate."""

    policy_body: dict[str, Any]
    control_body: dict[str, Any]
    policy_tokens: int  # estimated input tokens of each request
    control_tokens: int
    prefix_tokens: int  # of them, the shared prefix the control reads from the cache (0: not cached)
    prefix_key: str = ""  # what the prefix is (a digest): samples that share it write it once


def build_pair(api: str, model: str, max_tokens: int, system: Any, tools: Tools, policy: list[Message],
               control: list[Message], chars_per_token: float = 4.0) -> Pair:
    """The two requests of a sample, each with its estimate: what it sends, at ``chars_per_token``
    (the transcript's calibrated one; its overhead is no part of these requests)."""
    shared = shared_prefix(policy, control)
    sent = [sendable(policy), sendable(control)]
    # what each request sends besides its messages, billed as input and cached before them
    specs = tools.anthropic() if api == "anthropic" else tools.openai()
    head = [system or None, specs if tools.specs else None]  # what each request sends before its messages
    fixed = (json_len(system) if system else 0) + (json_len(specs) if tools.specs else 0)

    def tokens_of(messages: list[Message]) -> int:
        return math.ceil((fixed + list_chars(sum(json_len(m) for m in messages), len(messages))) / chars_per_token)

    if api != "anthropic":  # (an OpenAI-compatible API caches a long prefix by itself)
        prefix = tokens_of(sent[1][:shared]) if shared else 0
        bodies = [openai_body(model, max_tokens, system, tools, m) for m in sent]
        cached = prefix >= CACHE_MINIMUM
        return Pair(bodies[0], bodies[1], tokens_of(sent[0]), tokens_of(sent[1]), prefix if cached else 0,
                    _digest(head, sent[1][:shared]) if cached else "")
    breakpoint = shared if shared and tokens_of(sent[1][:shared]) >= CACHE_MINIMUM else 0
    bodies = [anthropic_body(model, max_tokens, system, tools, m, breakpoint) for m in sent]
    measured = [unmarked(b["messages"]) for b in bodies]  # (as billed: the marks are no content)
    return Pair(bodies[0], bodies[1], tokens_of(measured[0]), tokens_of(measured[1]),
                tokens_of(measured[1][:breakpoint]) if breakpoint else 0,
                _digest(head, measured[1][:breakpoint]) if breakpoint else "")


def _digest(head: Any, messages: list[Message]) -> str:
    """What a cached prefix is: what comes before the messages (the system prompt, the tools:
    samples offered other tools cache other prefixes) and the messages."""
    import hashlib

    return hashlib.sha256(orjson.dumps([head, messages])).hexdigest()


def unmarked(messages: list[Message]) -> list[Message]:
    """The messages without their cache marks."""
    return [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b
                              for b in m["content"]]}
            if isinstance(m.get("content"), list) and any(isinstance(b, dict) and "cache_control" in b
                                                          for b in m["content"]) else m
            for m in messages]


def anthropic_body(model: str, max_tokens: int, system: Any, tools: Tools, messages: list[Message],
                   breakpoint: int) -> dict[str, Any]:
    """A Messages API request; ``breakpoint``: the messages before it are marked for the cache.
    (No temperature: the 2.x SDK has none; the model's default applies.)"""
    if breakpoint:
        messages = list(messages)
        last = messages[breakpoint - 1]
        content = last["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        if blocks and isinstance(blocks[-1], dict):
            blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
            messages[breakpoint - 1] = {**last, "content": blocks}
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if system:
        body["system"] = system if isinstance(system, (str, list)) else str(system)
    if tools.specs:
        body["tools"] = tools.anthropic()
    return body


def openai_body(model: str, max_tokens: int, system: Any, tools: Tools, messages: list[Message]) -> dict[str, Any]:
    """A Chat Completions request (temperature 0) of the same conversation."""
    from ..engine.cost.cache_rules import provider_of

    chat: list[dict[str, Any]] = []
    if system:
        chat.append({"role": "system", "content": system if isinstance(system, str) else content_text(system)})
    for m in messages:
        chat.extend(_chat_messages(m))
    limit = "max_completion_tokens" if provider_of(model) == "openai" else "max_tokens"
    body: dict[str, Any] = {"model": model, limit: max_tokens, "temperature": 0, "messages": chat}
    if tools.specs:
        body["tools"] = tools.openai()
    return body


def _chat_messages(m: Message) -> list[dict[str, Any]]:
    """One Anthropic message as Chat Completions messages: a user message's tool results become
    ``tool`` messages (before its text), an assistant's tool calls ``tool_calls``."""
    content = m.get("content")
    role = m.get("role")
    if not isinstance(content, list):
        return [{"role": role, "content": content if isinstance(content, str) else content_text(content)}]
    texts, calls, results = [], [], []
    for b in content:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            texts.append(str(b.get("text", "")))
        elif kind == "tool_use":
            calls.append({"id": str(b.get("id")), "type": "function",
                          "function": {"name": str(b.get("name")), "arguments": orjson.dumps(b.get("input")).decode()}})
        elif kind == "tool_result":
            results.append({"role": "tool", "tool_call_id": str(b.get("tool_use_id")),
                            "content": content_text(b.get("content"))})
        else:
            texts.append(orjson.dumps(b).decode())
    if role == "assistant":
        message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
        if calls:
            message["tool_calls"] = calls
        return [message]
    return results + ([{"role": "user", "content": "\n".join(texts)}] if texts or not results else [])


def pair_cost(pair: Pair, prices: ModelPrices, max_tokens: int, policy_cached: bool, control_cached: bool,
              written: set[str] | None = None) -> float:
    """What the requests not answered from the cache will cost at most (USD): the shared prefix
    written by the first sent (unless an earlier sample wrote it: ``written``, updated) and read by
    the second, the rest at the input price, each reply at ``max_tokens``."""
    cost = 0.0
    prefix = pair.prefix_tokens
    written = set() if written is None else written
    for tokens, cached in ((pair.policy_tokens, policy_cached), (pair.control_tokens, control_cached)):
        if cached:
            continue
        p = prices.at(tokens)
        shared = p.cache_read if pair.prefix_key in written else p.cache_write_5m
        cost += (prefix * shared + (tokens - prefix) * p.input + max_tokens * p.output) / MTOK
        if prefix:
            written.add(pair.prefix_key)
    return cost


def usage_cost(usage: dict[str, int], prices: ModelPrices) -> float:
    """What a request cost by the usage the API returned (Anthropic's keys; an OpenAI-compatible
    reply's usage is put in them when read)."""
    fresh = int(usage.get("input_tokens") or 0)
    read = int(usage.get("cache_read_input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    p = prices.at(fresh + read + write)
    return (fresh * p.input + read * p.cache_read + write * p.cache_write_5m
            + int(usage.get("output_tokens") or 0) * p.output) / MTOK
