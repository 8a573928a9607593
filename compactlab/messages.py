"""Block helpers shared by everything, and the per-message facts computed once per message.

A message is an Anthropic Messages API dict ``{"role", "content"}`` and is never mutated once
loaded. :class:`Entry` wraps one with the facts that the layers, the invariant checker and the
size measures need (compact-JSON length, tool ids, tool-result sizes), so per-call work reads
facts instead of re-scanning content. A layer that changes a message builds a new message and a
new Entry for it (copy-on-write); everything else is shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

Message = dict[str, Any]

#: tool_use input keys that name a file (used by the stub summarizer and retention)
FILE_KEYS = ("path", "file_path", "notebook_path")


def block_type(block: Any) -> str | None:
    return block.get("type") if isinstance(block, dict) else None


def json_len(value: Any) -> int:
    """Length in characters of the compact JSON text of ``value`` (as orjson writes it)."""
    raw = orjson.dumps(value)
    return len(raw) if raw.isascii() else len(raw.decode("utf-8"))


def content_size(content: Any) -> int:
    """SPEC §4 content-size rule for a tool_result's content.

    A string's length; for a list of blocks the sum of the text lengths of its text blocks plus
    the compact-JSON length of every other block.
    """
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        total = 0
        for block in content:
            if block_type(block) == "text" and isinstance(block.get("text"), str):
                total += len(block["text"])
            else:
                total += json_len(block)
        return total
    return json_len(content)


def content_text(content: Any) -> str:
    """The text a layer persists or previews: the string, or text blocks joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if block_type(block) == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(orjson.dumps(block).decode("utf-8"))
        return "\n".join(parts)
    return orjson.dumps(content).decode("utf-8")


def text_of(message: Message) -> str:
    """Plain text of a message's string content or text blocks (tool results excluded)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"] for b in content if block_type(b) == "text" and isinstance(b.get("text"), str)
        )
    return ""


def tool_uses(message: Message) -> list[dict]:
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return []
    return [b for b in content if block_type(b) == "tool_use"]


def files_in_input(tool_input: Any) -> list[str]:
    if not isinstance(tool_input, dict):
        return []
    return [v for k in FILE_KEYS if isinstance(v := tool_input.get(k), str) and v]


@dataclass(frozen=True, slots=True)
class ResultFact:
    """One tool_result block of a user message."""

    block: int  # index in the message's content list
    tool_use_id: str
    size: int  # content-size rule
    is_str: bool  # content is a plain string
    is_error: bool


@dataclass(frozen=True, slots=True)
class Entry:
    """A message plus facts computed once. Never mutated; copies are new Entries."""

    message: Message
    chars: int  # compact JSON length of the message
    role: str
    origin: int  # index in the transcript's messages; negative for messages a policy made
    tool_use_ids: tuple[str, ...]
    results: tuple[ResultFact, ...]
    misplaced_results: tuple[str, ...]  # ids of tool_result blocks after a non-tool_result block
    empty: bool

    @property
    def has_tool_use(self) -> bool:
        return bool(self.tool_use_ids)

    @property
    def is_tool_result_message(self) -> bool:
        return bool(self.results)

    def with_message(self, message: Message) -> "Entry":
        """The copy-on-write step: a changed message keeps its origin, facts are recomputed."""
        return make_entry(message, self.origin)


def make_entry(message: Message, origin: int) -> Entry:
    role = message.get("role")
    content = message.get("content")
    use_ids: list[str] = []
    results: list[ResultFact] = []
    misplaced: list[str] = []
    if isinstance(content, list):
        if role == "assistant":
            use_ids = [b["id"] for b in content if block_type(b) == "tool_use"]
        elif role == "user":
            seen_other = False
            for i, b in enumerate(content):
                if block_type(b) == "tool_result":
                    c = b.get("content")
                    results.append(
                        ResultFact(i, b["tool_use_id"], content_size(c), isinstance(c, str) or c is None,
                                   bool(b.get("is_error")))
                    )
                    if seen_other:
                        misplaced.append(b["tool_use_id"])
                else:
                    seen_other = True
        empty = len(content) == 0
    else:
        empty = not content
    return Entry(
        message=message,
        chars=json_len(message),
        role=role if isinstance(role, str) else "",
        origin=origin,
        tool_use_ids=tuple(use_ids),
        results=tuple(results),
        misplaced_results=tuple(misplaced),
        empty=empty,
    )


def user_text(text: str) -> Message:
    return {"role": "user", "content": text}
