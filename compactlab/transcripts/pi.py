"""Format: Pi coding-agent sessions (badlogic/pi-mono; ``~/.pi/agent/sessions/--<cwd>--/<ts>_<id>.jsonl``)
and those of the harnesses built on it that write the same file (OpenClaw:
``~/.openclaw/agents/<agent>/sessions/*.jsonl``), as the session format v3 documents them.

A first ``session`` line (``id``, ``cwd``, and ``version``: the session file's format, 1 to 3, not
Pi's own; kept as ``session_version``), then entries ``{type, id, parentId,
timestamp}`` that form a tree: a branch made with ``/tree`` stays in the file. What decides
correctness:
- The conversation is the path from the last entry back to the root (the leaf Pi resumes on);
  the entries of other branches are left out (counted: ``inspect`` says how many). An older file
  without ids is one path, in file order.
- A ``message`` entry's ``message.role``: ``user`` (a string, or text and image blocks);
  ``assistant`` (``text``, ``thinking`` and ``toolCall`` blocks: ``id``, ``name``, ``arguments``),
  one model call, with its ``usage`` (``input`` the uncached prompt, ``cacheRead``,
  ``cacheWrite``, ``output``) and ``model``; ``toolResult`` (``toolCallId``, ``content``,
  ``isError``), the results after a call gathered into one user message; ``custom``, an
  extension's message that is sent to the model (a user message).
- A ``compaction`` entry (``summary``, ``firstKeptEntryId``, ``tokensBefore``) is a compaction Pi
  did: it restarts the context from the summary and the messages from the first kept entry on
  (a RecordedCompaction with those as ``kept``); Pi does not record whether it was automatic.
  A ``branch_summary`` on the path is a summary Pi puts into the context (a user message).
- ``model_change``, ``thinking_level_change``, ``session_info``, ``label`` and ``custom`` entries
  are not messages.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import InputError
from .model import BadField, Positions, Transcript, TranscriptBuilder, leaf_path, tokens
from .reader import Head, LineReader

NAME = "pi"
DESCRIPTION = "Pi and OpenClaw sessions (~/.pi/agent/sessions/--<cwd>--/*.jsonl, ~/.openclaw/agents/*/sessions/)"

ENTRY_TYPES = {"message", "compaction", "branch_summary", "model_change", "thinking_level_change", "session_info",
               "label", "custom", "custom_message"}
ROLES = {"user", "assistant", "toolResult", "custom"}


def _header(o: dict) -> bool:
    return o.get("type") == "session" and isinstance(o.get("id"), str) and ("cwd" in o or "version" in o)


def _message(o: dict) -> bool:
    m = o.get("message")
    return o.get("type") == "message" and isinstance(m, dict) and m.get("role") in ROLES


def sniff(objects: list[dict]) -> float:
    if not objects or not any(_header(o) or _message(o) for o in objects):
        return 0.0
    hits = sum(1 for o in objects if _header(o) or _message(o) or (o.get("type") in ENTRY_TYPES and "id" in o))
    return hits / len(objects)


def _path(entries: list[dict]) -> tuple[list[dict], int]:
    """The entries on the path from the last entry back to the root, in order, and how many
    entries of other branches were left out. Entries without ids (an older file) are one path."""
    if not any(isinstance(e.get("id"), str) for e in entries):
        return entries, 0
    return leaf_path(entries, "id", "parentId")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] if isinstance(b, dict) and isinstance(b.get("text"), str) else
                         f"[{b.get('type')}]" if isinstance(b, dict) and isinstance(b.get("type"), str) else
                         orjson.dumps(b).decode() for b in content)
    return "" if content is None else orjson.dumps(content).decode()


def _blocks(content: Any) -> list[dict]:
    """An assistant message's content as Anthropic blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise BadField(f"content is {type(content).__name__}, not a list of blocks")
    out: list[dict] = []
    for b in content:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            out.append({"type": "text", "text": str(b.get("text") or "")})
        elif kind == "thinking":
            out.append({"type": "thinking", "thinking": str(b.get("thinking") or ""), "signature": ""})
        elif kind == "toolCall":
            args = b.get("arguments")
            out.append({"type": "tool_use", "id": str(b.get("id")), "name": str(b.get("name") or "tool"),
                        "input": args if isinstance(args, dict) else {"arguments": args}})
        elif b is not None:
            out.append({"type": "text", "text": _text([b])})
    return out or [{"type": "text", "text": ""}]


def _usage(m: dict, timestamp: Any) -> dict[str, Any] | None:
    u = m.get("usage")
    if not isinstance(u, dict):
        return None
    usage: dict[str, Any] = {"input_tokens": tokens(u, "input", "usage"),
                             "cache_read_input_tokens": tokens(u, "cacheRead", "usage"),
                             "cache_creation_input_tokens": tokens(u, "cacheWrite", "usage"),
                             "output_tokens": tokens(u, "output", "usage")}
    if not any(usage.values()):
        return None
    model = m.get("model") or m.get("modelId")
    if isinstance(model, str) and model:
        usage["model"] = model
    if isinstance(timestamp, str):
        usage["timestamp"] = timestamp
    return usage


def _cost(m: dict) -> float:
    """What Pi itself priced the call at (``usage.cost.total``; 0 where it says nothing)."""
    u = m.get("usage")
    cost = u.get("cost") if isinstance(u, dict) else None
    total = cost.get("total") if isinstance(cost, dict) else None
    return float(total) if isinstance(total, (int, float)) and not isinstance(total, bool) else 0.0


class _Reader:
    """The path's entries into messages: tool results gathered after their call, compactions
    recorded with the positions of the messages they kept."""

    def __init__(self, builder: TranscriptBuilder) -> None:
        self.builder = builder
        self.results: list[dict] = []
        self.at: dict[str, int] = {}  # an entry's id -> the position of its message
        self.cost = 0.0  # what Pi priced the calls at, summed

    def flush(self) -> None:
        if self.results:
            self.builder.add({"role": "user", "content": list(self.results)})
            self.results.clear()

    def entry(self, e: dict) -> None:
        kind, stamp = e.get("type"), e.get("timestamp")
        if kind == "message" and isinstance(e.get("message"), dict):
            self.message(e, e["message"], stamp)
        elif kind == "compaction":
            self.compaction(e)
        elif kind == "branch_summary" and isinstance(e.get("summary"), str):
            self.flush()
            self._add(e, {"role": "user", "content": [{"type": "text", "text": e["summary"]}]})

    def _add(self, e: dict, message: dict, usage: dict | None = None) -> None:
        pos = self.builder.add(message, usage)
        if isinstance(e.get("id"), str):
            self.at[e["id"]] = pos

    def message(self, e: dict, m: dict, stamp: Any) -> None:
        role = m.get("role")
        if role == "toolResult":
            self.results.append({"type": "tool_result", "tool_use_id": str(m.get("toolCallId")),
                                 "content": _text(m.get("content")), **({"is_error": True} if m.get("isError") else {})})
            if isinstance(e.get("id"), str):
                self.at[e["id"]] = self.builder.count  # (the message the results are gathered into)
            return
        self.flush()
        if role in ("user", "custom"):
            self._add(e, {"role": "user", "content": [{"type": "text", "text": _text(m.get("content"))}]})
        elif role == "assistant":
            model = m.get("model")
            if isinstance(model, str) and model:
                self.builder.model = model
            self._add(e, {"role": "assistant", "content": _blocks(m.get("content"))}, _usage(m, stamp))
            self.cost += _cost(m)

    def compaction(self, e: dict) -> None:
        self.flush()
        kept_id = e.get("firstKeptEntryId")
        first = self.at.get(kept_id) if isinstance(kept_id, str) else None
        kept = Positions.of(range(first, self.builder.count)) if first is not None else None
        self.builder.compacted(_text(e.get("summary")), pre_tokens=e.get("tokensBefore"), time=e.get("timestamp"),
                               kept=kept)


def load(path: str, *, skip_bad_lines: bool = False, head: Head | None = None, **_: object) -> Transcript:
    reader = LineReader(path, skip_bad_lines=skip_bad_lines, head=head)
    builder = TranscriptBuilder(path, NAME)
    entries: list[dict] = []
    for lineno, o in reader.objects():
        if _header(o):
            builder.session_id = builder.session_id or o["id"]
            for key in ("version", "cwd", "branchedFrom"):
                if o.get(key) is not None:
                    builder.metadata["session_version" if key == "version" else key] = o[key]
        elif o.get("type") in ENTRY_TYPES:
            entries.append(o)
        else:
            reader.bad(lineno, f"not a Pi session entry (type {orjson.dumps(o.get('type')).decode()[:30]})")
    if not entries:
        raise InputError(f"{path}: a Pi session with no entry")
    path_entries, other = _path(entries)
    builder.metadata["other_branch_entries"] = other
    r = _Reader(builder)
    for e in path_entries:
        try:
            r.entry(e)
        except BadField as exc:
            raise InputError(f"{path}: entry {str(e.get('id'))[:40]}: {exc}") from None
    r.flush()
    builder.metadata["harness_cost_usd"] = round(r.cost, 9)
    if not builder.entries:
        raise InputError(f"{path}: a Pi session with no message on its path")
    return builder.build(skipped_lines=reader.skipped)


def inspect_facts(transcript: Transcript) -> dict[str, Any]:
    """What inspect adds: the entries of branches other than the one the session ended on, and
    what Pi itself priced the session's calls at (its own price table's, not compactlab's)."""
    return {"other_branch_entries": transcript.metadata.get("other_branch_entries", 0),
            "harness_cost_usd": transcript.metadata.get("harness_cost_usd", 0.0)}
