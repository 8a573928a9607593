"""Format: Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Lines are ``{timestamp, type, payload}``. What decides correctness:
- Messages come from ``response_item`` lines: ``message`` (user, developer, assistant; the
  developer's are system-side context, kept out of the messages), ``reasoning`` (a thinking
  block: its summary text, the encrypted content sized as its signature), ``function_call`` /
  ``custom_tool_call`` (a tool_use, ``call_id`` its id), their ``*_output`` (its tool_result) and
  ``web_search_call`` (a server-side tool use that needs no result).
- One call per model response: the response items between two inputs are one assistant message.
  Its usage is ``info.last_token_usage`` of the ``token_count`` event after it (``input_tokens``
  includes the cached ones; ``cached_input_tokens`` are reads); a repeated event with an unchanged
  ``total_token_usage`` is the same call. The model is the latest ``turn_context``'s.
- A ``compacted`` line (``replacement_history``) is a compaction Codex did: kept out of the
  messages as a RecordedCompaction whose summary is that history, as one user message.
- Sanitised logs replace a text by ``[REDACTED_<KIND> len=N sha=…]``: it is kept as a sized
  placeholder (``messages.sized_placeholder``) that every size counts as N characters without the
  text being built, so sizes, calibration and policies work on them; ``inspect`` says how many.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import orjson

from ..plain import pattern
from ..plumbing.files import max_document_bytes, max_line_bytes
from .messages import make_entry, sized_placeholder
from .model import NO_MODEL, BadField, Note, RecordedCompaction, Transcript, TranscriptBuilder, tokens
from .reader import Head, LineReader

NAME = "codex"
DESCRIPTION = "Codex CLI rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl)"

LINE_TYPES = {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
_REDACTED = pattern(r"^\[(REDACTED_[A-Z_]+) len=(\d+) (sha=[0-9a-f]+)\]$")


def sniff(objects: list[dict]) -> float:
    hits = sum(1 for o in objects if o.get("type") in LINE_TYPES and isinstance(o.get("payload"), dict)
               and "timestamp" in o)
    return hits / len(objects) if objects else 0.0


class _Text:
    """Texts of the rollout, a redacted placeholder as a sized placeholder of the text it stands
    for (never built: a tiny file never allocates what it claims). A placeholder may claim no more
    than a line can hold, and all of a file's no more than a document can: the sizes it claims are
    bounded by the limits every input has."""

    def __init__(self) -> None:
        self.redacted = 0
        self.claimed = 0  # characters the placeholders claimed so far
        self.line_limit, self.file_limit = max_line_bytes(), max_document_bytes()

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str):
            return "" if value is None else orjson.dumps(value).decode()
        m = _REDACTED.match(value)
        if m is None:
            return value
        digits = m.group(2)
        n = int(digits) if len(digits) <= 20 else self.line_limit + 1
        if n > self.line_limit:
            raise BadField(f"a redacted text of {digits[:24]}{'…' if len(digits) > 24 else ''} characters: longer "
                           f"than a line can be ({self.line_limit >> 20} MiB)")
        if self.claimed + n > self.file_limit:
            raise BadField(f"redacted texts of more than {self.file_limit >> 20} MiB in all: longer than a transcript "
                           "can be (COMPACTLAB_MAX_DOCUMENT_MB raises the limit)")
        self.redacted += 1
        self.claimed += n
        return sized_placeholder(m.group(1)[:40], n, " " + m.group(3)[:132])


def load(path: str, *, skip_bad_lines: bool = False, head: Head | None = None, **_: object) -> Transcript:
    reader = LineReader(path, skip_bad_lines=skip_bad_lines, head=head)
    builder = TranscriptBuilder(path, NAME)
    text = _Text()
    system: list[str] = []
    reply: list[dict] = []  # the response items of the current model response
    inputs: list[dict] = []  # user blocks (text, tool results) since the last response
    pending_call: int | None = None  # the position of the last response, waiting for its usage
    last_total: Any = None
    model: str | None = None

    def flush_inputs() -> None:
        if inputs:
            builder.add({"role": "user", "content": list(inputs)})
            inputs.clear()

    def flush_reply() -> None:
        nonlocal pending_call
        if reply:
            flush_inputs()
            pending_call = builder.add({"role": "assistant", "content": list(reply)})
            reply.clear()

    def line(lineno: int, obj: dict) -> None:
        nonlocal model, last_total, pending_call
        kind, p = obj.get("type"), obj.get("payload")
        if not isinstance(p, dict):
            return
        if kind == "session_meta":
            builder.session_id = p.get("id") if isinstance(p.get("id"), str) else builder.session_id
            base = (p.get("base_instructions") or {}).get("text") if isinstance(p.get("base_instructions"), dict) else None
            if base:
                system.append(text(base))
            builder.metadata["cli_version"] = p.get("cli_version")
        elif kind == "turn_context":
            if isinstance(p.get("model"), str):
                model = builder.model = p["model"]
        elif kind == "compacted":
            parts = []  # the history Codex restarted from: its messages' texts and its compaction item
            for item in _list(p, "replacement_history"):
                if not isinstance(item, dict):
                    raise BadField(f"replacement_history holds {_kind(item)}, not an item object")
                if item.get("type") == "compaction":
                    parts.append(text(item.get("encrypted_content")))
                parts += [_block(c, text)["text"] for c in _parts(item, "content")]
            summary = make_entry({"role": "user", "content": "\n\n".join(x for x in parts if x) or text(p.get("message"))},
                                 -1_000_000 - len(builder.compactions) - 1)
            flush_reply()
            flush_inputs()
            builder.compactions.append(RecordedCompaction(position=builder.count, summary=summary, trigger="auto"))
        elif kind == "event_msg":
            t = p.get("type")
            if t == "task_started" and isinstance(p.get("model_context_window"), int):
                builder.metadata["model_context_window"] = p["model_context_window"]
            elif t == "token_count" and isinstance(p.get("info"), dict):
                info = p["info"]
                total = info.get("total_token_usage")
                last = info.get("last_token_usage")
                if last is not None and not isinstance(last, dict):
                    raise BadField(f"last_token_usage is {_kind(last)}, not an object")
                usage = _usage(last, model, obj.get("timestamp")) if last is not None else None
                if reply:
                    flush_reply()
                if pending_call is not None and total != last_total and usage is not None:
                    builder.usage[pending_call] = usage
                    pending_call = None
                last_total = total
        elif kind == "response_item":
            t = p.get("type")
            if t == "message" and p.get("role") == "developer":
                system.extend([text(c.get("text")) for c in _parts(p, "content")])
            elif t == "message" and p.get("role") == "user":
                blocks = [_block(c, text) for c in _parts(p, "content")]
                flush_reply()
                inputs.extend(blocks)
            elif t in ("function_call_output", "custom_tool_call_output"):
                block = {"type": "tool_result", "tool_use_id": str(p.get("call_id")), "content": text(p.get("output"))}
                flush_reply()
                inputs.append(block)
            elif t == "message" and p.get("role") == "assistant":
                reply.extend([{"type": "text", "text": text(c.get("text"))} for c in _parts(p, "content")])
            elif t == "reasoning":
                thought = " ".join(text(s.get("text")) for s in _parts(p, "summary"))
                reply.append({"type": "thinking", "thinking": thought, "signature": text(p.get("encrypted_content"))})
            elif t in ("function_call", "custom_tool_call"):
                args = p.get("arguments") if t == "function_call" else p.get("input")
                reply.append({"type": "tool_use", "id": str(p.get("call_id")), "name": text(p.get("name")) or "tool",
                              "input": {"arguments" if t == "function_call" else "input": text(args)}})
            elif t == "web_search_call":
                reply.append({"type": "server_tool_use", "id": str(p.get("id") or f"ws{lineno}"), "name": "web_search",
                              "input": {"action": text(p.get("action"))}})
            # other response items (none seen yet) carry no message: left out, as unknown lines are

    order = _TimeOrder()
    for lineno, obj in reader.objects():
        order.see(lineno, obj.get("timestamp"))
        try:
            line(lineno, obj)
        except BadField as exc:
            reader.bad(lineno, str(exc))
    flush_reply()
    flush_inputs()
    builder.system = "\n\n".join(s for s in system if s) or None
    builder.metadata["redacted_texts"] = text.redacted
    if order.late:
        builder.warnings.append(f"{order.late} line(s) out of time order (the first at line {order.first_late}): "
                                "replayed in the file's order, as written")
    if text.redacted:
        builder.warnings.append(Note(f"{text.redacted} redacted text(s) ([REDACTED_… len=N]) sized as their N characters"))
    if builder.model is None and not any(u.get("model") for u in builder.usage.values()):
        # (never another provider's price: a rollout that names no model is unpriced, and says so)
        builder.model = NO_MODEL
        builder.warnings.append("the rollout records no model (no turn_context names one): its calls are unpriced "
                                "(every price 0); --price-model NAME prices them")
    return builder.build(skipped_lines=reader.skipped)


#: an image's size as text: what a 1,024 x 1,024 image at high detail costs OpenAI's models (765
#: tokens) at about 4 characters a token (a rollout keeps no dimensions, a sanitised one no image)
IMAGE_CHARS = 3060


def _block(c: dict, text: _Text) -> dict:
    """A user content part as a block: text, or an image sized as ``IMAGE_CHARS``."""
    if c.get("type") == "input_image":
        return {"type": "text", "text": sized_placeholder("IMAGE", IMAGE_CHARS)}
    return {"type": "text", "text": text(c.get("text"))}


def _kind(value: Any) -> str:
    return {str: "a string", int: "a number", float: "a number", bool: "true or false", list: "a list",
            dict: "an object"}.get(type(value), "null")


def _list(p: dict, key: str) -> list:
    """``p[key]``, a list (absent: empty); anything else is a bad line."""
    value = p.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadField(f"{key} is {_kind(value)}, not a list")
    return value


def _parts(p: dict, key: str) -> list[dict]:
    """The content parts under ``p[key]``: a list of objects."""
    items = _list(p, key)
    for c in items:
        if not isinstance(c, dict):
            raise BadField(f"{key} holds {_kind(c)}, not a content object")
    return items


class _TimeOrder:
    """Lines whose timestamp is earlier than an earlier line's: a shuffled or reversed rollout."""

    def __init__(self) -> None:
        self.latest: Any = None
        self.late = 0
        self.first_late = 0

    def see(self, lineno: int, stamp: Any) -> None:
        if not isinstance(stamp, str):
            return
        try:
            at = datetime.fromisoformat(stamp)
        except ValueError:
            return
        if at.tzinfo is None:
            at = at.replace(tzinfo=timezone.utc)
        if self.latest is not None and at < self.latest:
            self.late += 1
            self.first_late = self.first_late or lineno
        else:
            self.latest = at


def _usage(last: dict, model: str | None, timestamp: Any) -> dict[str, Any]:
    cached = tokens(last, "cached_input_tokens", "last_token_usage")
    usage: dict[str, Any] = {"input_tokens": max(tokens(last, "input_tokens", "last_token_usage") - cached, 0),
                             "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached,
                             "output_tokens": tokens(last, "output_tokens", "last_token_usage")}
    if model:
        usage["model"] = model
    if isinstance(timestamp, str):
        usage["timestamp"] = timestamp
    return usage


def inspect_facts(transcript: Transcript) -> dict[str, Any]:
    """What inspect adds for a rollout: the redacted texts sized by their length, the window."""
    return {key: transcript.metadata[key] for key in ("redacted_texts", "model_context_window", "cli_version")
            if transcript.metadata.get(key) is not None}
