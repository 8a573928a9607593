"""Format: Amp threads (Sourcegraph's Amp; ``~/.local/share/amp/threads/T-*.json``): one JSON document
a thread, ``{v, id, created, title?, messages, env?, meta?}``, rewritten in place as it grows.

What decides correctness:
- ``messages`` are Anthropic-style: ``role`` and ``content`` blocks (``text``, ``thinking``,
  ``tool_use``, ``tool_result``); each assistant message is one model call.
- A ``tool_result`` is Anthropic's (``tool_use_id``, ``content``) or Amp's own: ``toolUseID`` and
  ``run`` (``status`` ``done`` with its ``result``; ``error`` with ``error.message``;
  ``cancelled``). A result object is read as Amp's readers read it: its ``output``, else its
  ``content``, else its ``diff``; ``{"success": …}`` as "success"/"failed"; a list of strings one
  a line; anything else as its JSON.
- An assistant message's ``usage`` is the call's (``inputTokens`` uncached, ``cacheReadInputTokens``,
  ``cacheCreationInputTokens``, ``outputTokens``, ``model``, ``timestamp``). OpenAI bills no cache
  writes, so on an OpenAI model ``cacheCreationInputTokens`` are uncached input (Amp puts the
  uncached prompt there for such threads, as third-party readers note).
- Amp's "handoff" starts a new thread: no compaction is recorded in a thread.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import InputError
from .model import BadField, Transcript, TranscriptBuilder, tokens
from .reader import read_document

NAME = "amp"
DESCRIPTION = "Amp threads (~/.local/share/amp/threads/T-*.json)"


def sniff_document(doc: Any) -> float:
    ok = (isinstance(doc, dict) and isinstance(doc.get("id"), str) and doc["id"].startswith("T-")
          and isinstance(doc.get("messages"), list) and "v" in doc)
    return 1.0 if ok else 0.0


def sniff(objects: list[dict]) -> float:
    """A thread written on one line."""
    return 1.0 if len(objects) == 1 and sniff_document(objects[0]) else 0.0


def result_text(value: Any) -> str:
    """A tool's result as Amp's readers show it (see the module docstring)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        for key in ("output", "content", "diff"):
            if value.get(key) not in (None, ""):
                v = value[key]
                return v if isinstance(v, str) else orjson.dumps(v).decode()
        if set(value) == {"success"}:
            return "success" if value["success"] else "failed"
    if isinstance(value, list):
        if not value:
            return ""
        if all(isinstance(v, str) for v in value):
            return "\n".join(value)
    return orjson.dumps(value).decode()


def _result(block: dict) -> dict:
    """A tool_result block, Amp's ``run`` read into Anthropic's ``content``."""
    call_id = block.get("tool_use_id") or block.get("toolUseID")
    if "run" not in block:
        content = block.get("content")
        return {"type": "tool_result", "tool_use_id": str(call_id),
                "content": content if isinstance(content, (str, list)) else result_text(content),
                **({"is_error": True} if block.get("is_error") else {})}
    run = block["run"] if isinstance(block.get("run"), dict) else {}
    status = run.get("status")
    if status == "error":
        error = run.get("error")
        said = error.get("message") if isinstance(error, dict) and isinstance(error.get("message"), str) else \
            "[unknown error]"
        return {"type": "tool_result", "tool_use_id": str(call_id), "content": said, "is_error": True}
    if status == "cancelled":
        return {"type": "tool_result", "tool_use_id": str(call_id), "content": "[cancelled]", "is_error": True}
    return {"type": "tool_result", "tool_use_id": str(call_id), "content": result_text(run.get("result"))}


def _blocks(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if content is None:  # (a message recorded with its usage only)
        return [{"type": "text", "text": ""}]
    if not isinstance(content, list):
        raise BadField(f"content is {type(content).__name__}, not a list of blocks")
    out: list[dict] = []
    for b in content:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "tool_result":
            out.append(_result(b))
        elif kind == "tool_use":
            args = b.get("input")
            out.append({"type": "tool_use", "id": str(b.get("id")), "name": str(b.get("name") or "tool"),
                        "input": args if isinstance(args, dict) else {}})
        elif kind == "thinking":
            out.append({"type": "thinking", "thinking": str(b.get("thinking") or ""), "signature": ""})
        elif kind == "text":
            out.append({"type": "text", "text": str(b.get("text") or "")})
        elif b is not None:
            out.append({"type": "text", "text": orjson.dumps(b).decode()})
    return out or [{"type": "text", "text": ""}]


def _usage(u: Any) -> dict[str, Any] | None:
    if not isinstance(u, dict):
        return None
    from ..plumbing.providers import family_of

    model = u.get("model") if isinstance(u.get("model"), str) and u.get("model") else None
    usage: dict[str, Any] = {"input_tokens": tokens(u, "inputTokens", "usage"),
                             "cache_read_input_tokens": tokens(u, "cacheReadInputTokens", "usage"),
                             "cache_creation_input_tokens": tokens(u, "cacheCreationInputTokens", "usage"),
                             "output_tokens": tokens(u, "outputTokens", "usage")}
    if family_of(model) == "openai":  # (no cache writes on OpenAI: what Amp put there is uncached input)
        usage["input_tokens"] += usage["cache_creation_input_tokens"]
        usage["cache_creation_input_tokens"] = 0
    if not any(usage.values()):
        return None
    if model:
        usage["model"] = model
    if isinstance(u.get("timestamp"), str):
        usage["timestamp"] = u["timestamp"]
    return usage


def load(path: str, *, document: tuple[Any, str] | None = None, **_: object) -> Transcript:
    doc, sha = document or read_document(path)
    if not sniff_document(doc):
        raise InputError(f"{path}: not an Amp thread (no v, a T- id and messages)")
    builder = TranscriptBuilder(path, NAME)
    builder.session_id = doc["id"]
    if isinstance(doc.get("title"), str):
        builder.title = doc["title"]
    trees = ((doc.get("env") or {}).get("initial") or {}).get("trees") if isinstance(doc.get("env"), dict) else None
    if isinstance(trees, list) and trees and isinstance(trees[0], dict) and isinstance(trees[0].get("displayName"), str):
        builder.metadata["project"] = trees[0]["displayName"]
    for i, m in enumerate(doc["messages"]):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise InputError(f"{path}: message {i} is not a user or assistant message")
        try:
            blocks = _blocks(m.get("content"))
        except BadField as exc:
            raise InputError(f"{path}: message {i}: {exc}") from None
        usage = _usage(m.get("usage")) if m["role"] == "assistant" else None
        if usage and usage.get("model"):
            builder.model = usage["model"]
        builder.add({"role": m["role"], "content": blocks}, usage)
    if not builder.entries:
        raise InputError(f"{path}: an Amp thread with no message")
    return builder.build(content_hash=sha)
