"""Format: Cline, Roo Code and Kilo Code task histories: a task folder's
``api_conversation_history.json`` (under the VS Code extension's global storage, e.g.
``~/.config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks/<task id>/``; Roo Code's is
``rooveterinaryinc.roo-cline``, Kilo Code's ``kilocode.kilo-code``), with ``ui_messages.json``
beside it where present.

What decides correctness (from cline/cline's ``src/core/storage/disk.ts`` and
``src/shared/ExtensionMessage.ts``, Roo Code's alike):
- ``api_conversation_history.json`` is the list of messages the extension sent, in the Anthropic
  Messages API's own shape (``role``, ``content`` as a string or blocks: ``text``, ``image``,
  ``tool_use``, ``tool_result``; older versions call tools in XML inside the text, which stays
  text). Extra keys a version adds (``ts``) are dropped; a message that is not a usable API
  message is a bad record naming its index.
- Every assistant message is one call. ``ui_messages.json`` (the messages the panel showed) holds
  one ``say: "api_req_started"`` per request, its ``text`` a JSON object with ``tokensIn``,
  ``tokensOut``, ``cacheWrites``, ``cacheReads`` (and ``cost``): the n-th request's usage is the
  n-th call's (``tokensIn`` the uncached input, as Anthropic counts it), its ``ts`` the call's
  time. Where the counts differ (a request that failed and was retried leaves no reply) the
  requests are matched from the last reply backwards, and the transcript says so.
- Without ``ui_messages.json`` the calls have no usage (the policy's token estimate is used).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

import orjson

from ..errors import CompactlabError, InputError
from .messages import build_entry
from .model import BadField, Transcript, TranscriptBuilder, tokens
from .reader import read_document

NAME = "cline"
DESCRIPTION = "Cline / Roo Code / Kilo Code task histories (api_conversation_history.json, ui_messages.json beside it)"

BLOCKS = {"text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking", "document"}
UI_FILE = "ui_messages.json"


def sniff_document(doc: Any) -> float:
    """A JSON list of Anthropic API messages (blocks with a type, no OpenAI tool calls)."""
    if not isinstance(doc, list) or not doc:
        return 0.0
    head = [m for m in doc[:50] if isinstance(m, dict)]
    if not head or any(m.get("role") not in ("user", "assistant") or "tool_calls" in m for m in head):
        return 0.0
    blocks = [b for m in head if isinstance(m.get("content"), list) for b in m["content"] if isinstance(b, dict)]
    return 0.9 if blocks and all(b.get("type") in BLOCKS or isinstance(b.get("type"), str) for b in blocks) \
        and any(b.get("type") in BLOCKS for b in blocks) else 0.0


def _time(ts: Any) -> str | None:
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and 0 < ts < 1e14:
        return datetime.fromtimestamp(ts / 1000, timezone.utc).isoformat().replace("+00:00", "Z")
    return None


def requests_of(ui: Any, where: str) -> list[dict[str, Any]]:
    """The usage of each API request the panel recorded (``api_req_started``), in order."""
    out = []
    for i, m in enumerate(ui if isinstance(ui, list) else []):
        if not isinstance(m, dict) or m.get("say") != "api_req_started" or not isinstance(m.get("text"), str):
            continue
        try:
            info = orjson.loads(m["text"])
        except orjson.JSONDecodeError:
            continue  # (a request still running: no usage yet)
        if not isinstance(info, dict) or "tokensIn" not in info:
            continue
        at = f"{where} message {i}"
        usage: dict[str, Any] = {"input_tokens": tokens(info, "tokensIn", at),
                                 "cache_creation_input_tokens": tokens(info, "cacheWrites", at),
                                 "cache_read_input_tokens": tokens(info, "cacheReads", at),
                                 "output_tokens": tokens(info, "tokensOut", at)}
        if (when := _time(m.get("ts"))) is not None:
            usage["timestamp"] = when
        out.append(usage)
    return out


def load(path: str, *, skip_bad_lines: bool = False, document: tuple[Any, str] | None = None, **_: object) -> Transcript:
    doc, sha = document or read_document(path)
    if not isinstance(doc, list):
        raise InputError(f"{path}: not a task history (a JSON list of API messages)")
    builder = TranscriptBuilder(path, NAME)
    skipped = 0
    replies: list[int] = []
    for i, m in enumerate(doc):
        message: dict[str, Any] | None = {"role": m.get("role"), "content": m.get("content")} if isinstance(m, dict) \
            else None
        problem: Any = build_entry(message, i, check=True, facts=False) if message is not None else "not an object"
        if problem is not None:
            if skip_bad_lines:
                skipped += 1
                continue
            raise InputError(f"{path}: message {i}: {problem}", hint="use --skip-bad-lines to skip and count it")
        assert message is not None
        pos = builder.add(message)
        if message["role"] == "assistant":
            replies.append(pos)
    ui_path = os.path.join(os.path.dirname(path) or ".", UI_FILE)
    if os.path.basename(path) != UI_FILE and os.path.lexists(ui_path):
        try:
            ui = read_document(ui_path)[0]
            requests = requests_of(ui, UI_FILE)
        except (CompactlabError, BadField) as exc:
            builder.warnings.append(f"{UI_FILE} not read ({exc}): no recorded usage")
            requests = []
        if requests and len(requests) != len(replies):
            builder.warnings.append(f"{len(requests)} API request(s) in {UI_FILE} for {len(replies)} repl(y/ies): "
                                    "matched from the last one backwards")
        for pos, usage in zip(reversed(replies), reversed(requests)):
            builder.usage[pos] = usage
        builder.metadata["api_requests"] = len(requests)
    return builder.build(skipped_lines=skipped, content_hash=sha)


def inspect_facts(transcript: Transcript) -> dict[str, Any]:
    """What inspect adds: the API requests ui_messages.json recorded (their usage is the calls')."""
    return {"api_requests": transcript.metadata["api_requests"]} if "api_requests" in transcript.metadata else {}
