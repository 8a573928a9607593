"""Format: Gemini CLI chat recordings (``~/.gemini/tmp/<project hash>/chats/session-*.json`` or
``.jsonl``), as its ChatRecordingService writes them (google-gemini/gemini-cli,
``packages/core/src/services/chatRecordingService.ts``).

Two shapes: the older JSON document ``{sessionId, projectHash, startTime, lastUpdated, messages,
summary?}``, and the newer append-only JSONL: a first line of that metadata, then one message a
line, ``{"$set": {...}}`` lines updating the metadata, and a message written again (the same
``id``) when it changed (its tool calls completed): the latest version counts, at its first place.

What decides correctness:
- A ``user`` message is a user turn (``content``: a string or Gemini parts); ``info``,
  ``error`` and ``warning`` messages are the CLI's own and not sent to the model.
- A ``gemini`` message is one model response, one call: its ``thoughts`` (subject and
  description) a thinking block, its text, and its ``toolCalls`` as tool_use blocks (``id``,
  ``name``, ``args``); each call's ``result`` (``functionResponse`` parts) is the tool_result in
  the user message after it.
- Its ``tokens`` are the call's usage: ``input`` is the whole prompt (``promptTokenCount``,
  ``cached`` included), ``cached`` the cache reads, ``output`` plus ``thoughts`` the output
  (thinking is billed as output); ``model`` is the call's model.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import InputError
from .model import BadField, Transcript, TranscriptBuilder, tokens
from .reader import Head, LineReader, read_document

NAME = "gemini-cli"
DESCRIPTION = "Gemini CLI chat recordings (~/.gemini/tmp/<project>/chats/session-*.json or .jsonl)"

TYPES = {"user", "gemini", "info", "error", "warning"}
SPOKEN = {"user", "gemini"}


def _is_meta(o: dict) -> bool:
    return isinstance(o.get("sessionId"), str) and "projectHash" in o


def sniff(objects: list[dict]) -> float:
    if not objects:
        return 0.0
    hits = sum(1 for o in objects if _is_meta(o) or (o.get("type") in TYPES and "id" in o and "timestamp" in o)
               or (set(o) == {"$set"}))
    if not any(_is_meta(o) or o.get("type") == "gemini" for o in objects):
        return 0.0
    return hits / len(objects)


def sniff_document(doc: Any) -> float:
    if not isinstance(doc, dict) or not _is_meta(doc) or not isinstance(doc.get("messages"), list):
        return 0.0
    return 1.0


def _text(content: Any) -> str:
    """A message's content (a string, or Gemini parts) as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif isinstance(p, dict):
                parts.append(orjson.dumps(p).decode())
        return "\n".join(parts)
    return "" if content is None else orjson.dumps(content).decode()


def _result(call: dict) -> str:
    """A tool call's result: the output of its functionResponse parts, else the parts as JSON."""
    result = call.get("result")
    if result is None:
        return ""
    parts = result if isinstance(result, list) else [result]
    out = []
    for p in parts:
        response = p.get("functionResponse") if isinstance(p, dict) else None
        if isinstance(response, dict):
            r = response.get("response")
            said = r.get("output", r.get("error")) if isinstance(r, dict) and set(r) <= {"output", "error"} else None
            if isinstance(said, str):
                out.append(said)
            else:
                out.append(_text(r) if not isinstance(r, (dict, list)) else orjson.dumps(r).decode())
        else:
            out.append(_text(p))
    return "\n".join(out)


#: a Gemini CLI message's token keys: the prompt (cached included), its cached part, the output, the thoughts
TOKEN_KEYS = ("input", "cached", "output", "thoughts")


def gemini_usage(t: Any, model: Any, timestamp: Any, keys: tuple[str, str, str, str] = TOKEN_KEYS,
                 where: str = "tokens") -> dict[str, Any] | None:
    """A Gemini-style usage (the prompt counting its cached tokens; thoughts billed as output) in
    the canonical keys; ``keys``: the record's names of the prompt, cached, output and thoughts
    counts (a Qwen Code record's are ``usageMetadata``'s)."""
    if not isinstance(t, dict):
        return None
    prompt_key, cached_key, output_key, thoughts_key = keys
    prompt = tokens(t, prompt_key, where)
    cached = min(tokens(t, cached_key, where), prompt)
    usage: dict[str, Any] = {"input_tokens": prompt - cached, "cache_read_input_tokens": cached,
                             "cache_creation_input_tokens": 0,
                             "output_tokens": tokens(t, output_key, where) + tokens(t, thoughts_key, where)}
    if not any(usage.values()):
        return None  # (a message recorded before its response finished: all zeros)
    if isinstance(model, str):
        usage["model"] = model
    if isinstance(timestamp, str):
        usage["timestamp"] = timestamp
    return usage


def _add(builder: TranscriptBuilder, m: dict) -> None:
    kind = m.get("type")
    if kind == "user":
        text = _text(m.get("content"))
        builder.add({"role": "user", "content": [{"type": "text", "text": text}]})
        return
    blocks: list[dict] = []
    thoughts = m.get("thoughts")
    if isinstance(thoughts, list) and thoughts:
        thought = "\n".join(f"{t.get('subject', '')}: {t.get('description', '')}" for t in thoughts if isinstance(t, dict))
        blocks.append({"type": "thinking", "thinking": thought, "signature": ""})
    text = _text(m.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    if not isinstance(m.get("toolCalls") or [], list):
        raise BadField("toolCalls is not a list")
    calls = [c for c in m.get("toolCalls") or [] if isinstance(c, dict)]
    for c in calls:
        args = c.get("args")
        blocks.append({"type": "tool_use", "id": str(c.get("id")), "name": str(c.get("name") or "tool"),
                       "input": args if isinstance(args, dict) else {}})
    if isinstance(m.get("model"), str):
        builder.model = m["model"]  # (the transcript's model: its last reply's, as every format's)
    builder.add({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]},
                gemini_usage(m.get("tokens"), m.get("model"), m.get("timestamp")))
    if calls:
        builder.add({"role": "user", "content": [{"type": "tool_result", "tool_use_id": str(c.get("id")),
                                                  "content": _result(c),
                                                  **({"is_error": True} if c.get("status") == "error" else {})}
                                                 for c in calls]})


def load(path: str, *, skip_bad_lines: bool = False, head: Head | None = None,
         document: tuple[Any, str] | None = None, **_: object) -> Transcript:
    builder = TranscriptBuilder(path, NAME)
    messages: dict[str, dict] = {}  # by id, in the order first seen; a later version replaces it
    sha = ""
    if document is not None or head is None:
        doc, sha = document or read_document(path)
        if not sniff_document(doc):
            raise InputError(f"{path}: not a Gemini CLI chat recording (no sessionId, projectHash and messages)")
        builder.session_id = doc["sessionId"]
        for i, m in enumerate(doc["messages"]):
            if not isinstance(m, dict):
                raise InputError(f"{path}: message {i} is not an object", hint="a Gemini CLI recording holds objects")
            messages[str(m.get("id", f"#{i}"))] = m
        if isinstance(doc.get("summary"), str):
            builder.metadata["summary"] = doc["summary"]
        skipped = 0
    else:
        reader = LineReader(path, skip_bad_lines=skip_bad_lines, head=head)
        for lineno, o in reader.objects():
            if _is_meta(o):
                builder.session_id = builder.session_id or o["sessionId"]
            elif set(o) == {"$set"} or any(k.startswith("$") for k in o):
                continue  # (metadata updates)
            elif o.get("type") in TYPES:
                messages[str(o.get("id", f"line {lineno}"))] = o
            else:
                reader.bad(lineno, f"not a Gemini CLI record (type {orjson.dumps(o.get('type')).decode()[:30]})")
        skipped = reader.skipped
    builder.metadata["cli_messages"] = sum(1 for m in messages.values() if m.get("type") not in SPOKEN)
    for m in messages.values():
        if m.get("type") not in SPOKEN:
            continue
        try:
            _add(builder, m)
        except BadField as exc:
            raise InputError(f"{path}: message {m.get('id')}: {exc}") from None
    if not builder.entries:
        raise InputError(f"{path}: a Gemini CLI recording with no user or model message")
    return builder.build(skipped_lines=skipped, content_hash=sha)


def inspect_facts(transcript: Transcript) -> dict[str, Any]:
    """What inspect adds: the CLI's own messages (info, errors, warnings) left out of the replay."""
    return {"cli_messages": transcript.metadata.get("cli_messages", 0)}
