"""OpenAI-style chat messages (``role: tool``, ``tool_calls``), as JSONL or as a JSON document
holding the list (or ``{"messages": [...]}``), mapped to the canonical Anthropic model:

- assistant ``tool_calls`` -> ``tool_use`` blocks, input = the parsed ``arguments`` (arguments
  that are not valid JSON are kept verbatim, as a string, and counted);
- ``reasoning_content`` -> a ``thinking`` block first;
- the run of ``role: tool`` messages after an assistant message -> one user message of
  ``tool_result`` blocks (``tool_call_id``, or SWE-agent's list ``tool_call_ids``), followed by
  any user text of the same run (the API wants the results first);
- ``system`` kept as metadata, other roles (``exit``, ...) kept as metadata and shown by inspect;
- per-call usage (``prompt_tokens``, cached tokens) kept as recorded usage.

The mini-swe-agent and SWE-agent loaders reuse ``convert``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

from ..errors import InputError
from .model import Transcript, TranscriptBuilder, epoch_time, object_at, tokens
from .reader import Head, LineReader, is_document, read_document

NAME = "openai"
DESCRIPTION = "OpenAI-style chat messages with tool_calls and role: tool (JSONL, or a JSON list)"
ROLES = {"system", "developer", "user", "assistant", "tool"}


def _evidence(o: dict) -> bool:
    return o.get("role") == "tool" or "tool_calls" in o or "tool_call_id" in o or "reasoning_content" in o


def sniff(objects: list[dict]) -> float:
    if not any(_evidence(o) for o in objects):
        return 0.0  # plain user/assistant text lines are Anthropic messages
    return sum(1 for o in objects if o.get("role") in ROLES | {"exit"}) / len(objects)


def sniff_document(doc: Any) -> float:
    msgs = doc.get("messages") if isinstance(doc, dict) else doc
    if not isinstance(msgs, list) or not msgs:
        return 0.0
    dicts = [m for m in msgs[:50] if isinstance(m, dict)]
    return 0.5 if dicts and all(m.get("role") in ROLES | {"exit"} for m in dicts) else 0.0


def openai_usage(raw: Any, model: Any = None, created: Any = None) -> dict[str, Any] | None:
    """Recorded usage in the canonical keys, from an OpenAI-style ``usage`` object; with the
    response's ``model`` and ``created`` (seconds since the epoch) as the call's model and time."""
    if not isinstance(raw, dict) or "prompt_tokens" not in raw:
        return None
    prompt = tokens(raw, "prompt_tokens")
    details = object_at(raw, "prompt_tokens_details")
    cached = tokens(details, "cached_tokens", "usage.prompt_tokens_details") or tokens(raw, "prompt_cache_hit_tokens")
    usage: dict[str, Any] = {"prompt_tokens": prompt, "input_tokens": prompt - cached, "cache_creation_input_tokens": 0,
                             "cache_read_input_tokens": cached, "output_tokens": tokens(raw, "completion_tokens")}
    if isinstance(model, str) and model:
        usage["model"] = model
    if (at := epoch_time(created)) is not None:
        usage["timestamp"] = at
    return usage


def _parts(content: Any) -> list[Any] | None:
    """A content as blocks: text parts become text blocks, other parts are kept as they are."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        out = []
        for p in content:
            if not isinstance(p, dict):
                return None
            if p.get("type") == "text" and isinstance(p.get("text"), str):
                out.append({"type": "text", "text": p["text"]})
            else:
                out.append(p)
        return out
    return None


class Converter:
    """Feeds OpenAI-style messages, in order, into a TranscriptBuilder."""

    def __init__(self, builder: TranscriptBuilder, bad: Callable[[Any, str], None],
                 usage_of: Callable[[dict], dict | None] = lambda m: openai_usage(m.get("usage"), m.get("model"),
                                                                                  m.get("created"))) -> None:
        self.b = builder
        self.bad = bad
        self.usage_of = usage_of
        self.results: list[dict] = []
        self.user_blocks: list[Any] = []
        self.user_texts: list[str] = []
        builder.metadata.setdefault("other_roles", [])
        builder.metadata.setdefault("invalid_arguments", 0)

    def flush(self) -> None:
        if self.results or self.user_blocks:
            blocks = self.results + self.user_blocks
            if not self.results and len(self.user_texts) == 1 and len(self.user_blocks) == 1:
                self.b.add({"role": "user", "content": self.user_texts[0]})
            else:
                self.b.add({"role": "user", "content": blocks})
        self.results, self.user_blocks, self.user_texts = [], [], []

    def feed(self, where: Any, m: Any) -> None:
        if not isinstance(m, dict):
            return self.bad(where, "a message that is not a JSON object")
        role = m.get("role")
        if role in ("system", "developer"):
            if self.b.system is None:
                self.b.system = m.get("content")
            else:
                self.b.metadata.setdefault("more_system", []).append(m.get("content"))
            return None
        if role == "assistant":
            return self._assistant(where, m)
        if role == "tool":
            return self._tool(where, m)
        if role == "user":
            parts = _parts(m.get("content"))
            if parts is None:
                return self.bad(where, "user content is neither a string nor a list of parts")
            if isinstance(m.get("content"), str):
                self.user_texts.append(m["content"])
            self.user_blocks.extend(parts if parts else [{"type": "text", "text": ""}])
            return None
        content = m.get("content")
        self.b.metadata["other_roles"].append({"role": str(role), "where": where,
                                               "chars": len(content) if isinstance(content, str) else 0})
        return None

    def _assistant(self, where: Any, m: dict) -> None:
        blocks: list[Any] = []
        if isinstance(m.get("reasoning_content"), str) and m["reasoning_content"]:
            blocks.append({"type": "thinking", "thinking": m["reasoning_content"]})
        parts = _parts(m.get("content"))
        if parts is None:
            return self.bad(where, "assistant content is neither a string nor a list of parts")
        blocks.extend(parts)
        calls = m.get("tool_calls") or []
        if not isinstance(calls, list):
            return self.bad(where, "tool_calls is not a list")
        for i, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(call.get("id"), str) or not isinstance(fn.get("name"), str):
                return self.bad(where, f"tool call {i} has no string id and function name")
            blocks.append({"type": "tool_use", "id": call["id"], "name": fn["name"], "input": self._args(fn.get("arguments"))})
        self.flush()
        text_only = len(blocks) == 1 and blocks[0].get("type") == "text"
        content: Any = blocks[0]["text"] if text_only else blocks
        if not blocks:
            content = ""
        self.b.add({"role": "assistant", "content": content}, usage=self.usage_of(m))
        return None

    def _args(self, raw: Any) -> Any:
        if not isinstance(raw, str):
            return raw if raw is not None else {}
        try:
            return orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:
            self.b.metadata["invalid_arguments"] += 1
            return raw  # kept verbatim

    def _tool(self, where: Any, m: dict) -> None:
        ids = m.get("tool_call_ids") if isinstance(m.get("tool_call_ids"), list) else [m.get("tool_call_id")]
        if not ids or not all(isinstance(i, str) for i in ids):
            return self.bad(where, "tool message without a string tool_call_id")
        content = m.get("content")
        if isinstance(content, list):
            parts = _parts(content)
            if parts is None:
                return self.bad(where, "tool content is neither a string nor a list of parts")
            content = parts
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            return self.bad(where, "tool content is neither a string nor a list of parts")
        if self.user_blocks:  # a tool message after user text starts a new user message
            self.flush()
        for tid in ids:
            self.results.append({"type": "tool_result", "tool_use_id": tid, "content": content})
        return None


def convert(items: Iterable[tuple[Any, Any]], builder: TranscriptBuilder, bad: Callable[[Any, str], None],
            usage_of: Callable[[dict], dict | None] | None = None) -> None:
    conv = Converter(builder, bad, usage_of) if usage_of else Converter(builder, bad)
    for where, m in items:
        conv.feed(where, m)
    conv.flush()


def document_bad(path: str, skip: bool, counter: list[int]) -> Callable[[Any, str], None]:
    """The bad-input rule for a message inside a JSON document (named by its index)."""

    def bad(where: Any, reason: str) -> None:
        if not skip:
            raise InputError(f"{path}: message {where}: {reason}", hint="use --skip-bad-lines to skip and count it")
        counter[0] += 1

    return bad


def load(path: str, *, skip_bad_lines: bool = False, document: tuple[Any, str] | None = None,
         head: Head | None = None, **_: object) -> Transcript:
    builder = TranscriptBuilder(path, NAME)
    if document is None and is_document(path):
        document = read_document(path)
    if document is not None:
        doc, sha = document
        msgs = doc.get("messages") if isinstance(doc, dict) else doc
        if not isinstance(msgs, list):
            raise InputError(f"{path}: not a list of chat messages")
        skipped = [0]
        convert(enumerate(msgs), builder, document_bad(path, skip_bad_lines, skipped))
        return builder.build(skipped_lines=skipped[0], content_hash=sha)
    reader = LineReader(path, skip_bad_lines=skip_bad_lines, head=head)
    convert(reader.objects(), builder, reader.bad)
    return builder.build(skipped_lines=reader.skipped)


def inspect_facts(transcript: Transcript) -> dict[str, Any]:
    """What ``inspect`` shows of an OpenAI-style trajectory (this family: openai, mini-swe-agent,
    swe-agent) beyond what every format has."""
    meta = transcript.metadata
    return {key: meta[key] for key in ("other_roles", "invalid_arguments", "exit_status", "model_stats",
                                      "trajectory_format") if key in meta}
