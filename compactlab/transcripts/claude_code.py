"""Format 2: Claude Code session logs (``~/.claude/projects/<project>/<session>.jsonl``).

What decides correctness (SPEC §2):
- Lines carry an envelope (``type``, ``uuid``, ``isSidechain``, ...); only ``user`` and
  ``assistant`` lines hold an API ``message``. Unknown line types are ignored, never fatal, and
  UI data (``toolUseResult``, ``progress``, snapshots) never counts toward context size.
- One API response is written as several assistant lines with the same ``message.id``, one
  content block each, with a repeated ``usage`` (the last line's is kept). They are grouped
  back into one assistant message: one call.
- File order is not API order with parallel tool calls: results can arrive between the lines
  of their own assistant message. The results of a message are gathered by ``tool_use_id`` into
  one user message right after it; remaining adjacent user messages are merged.
- ``isSidechain`` lines of a main session are another conversation (older versions wrote
  subagents inline) and are left out; a subagent file, whose conversation lines are all
  sidechain lines, is its own transcript.
- A ``compact_boundary`` system line followed by an ``isCompactSummary`` user line is a
  compaction Claude Code did. The summary is kept out of the messages and recorded as a
  ``RecordedCompaction``; ``--keep-recorded-compactions`` replays it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .messages import block_type, make_entry
from .model import BadField, RecordedCompaction, Transcript, TranscriptBuilder, anthropic_usage
from .reader import Head, LineReader, message_problem

NAME = "claude-code"
DESCRIPTION = "Claude Code session logs (~/.claude/projects/<project>/<session>.jsonl) and subagent files"

ENVELOPE_TYPES = {"user", "assistant", "system", "summary", "progress", "file-history-snapshot",
                  "queue-operation", "attachment", "ai-title", "last-prompt"}
#: how a user line shown in the transcript only is counted among the lines left out
TRANSCRIPT_ONLY = "transcript-only user line"
#: what a newer Claude Code leaves where it already compacted content
ALREADY_COMPACTED = {"persisted_output": "<persisted-output>", "cleared_tool_result": "[Old tool result content cleared]"}


def sniff(objects: list[dict]) -> float:
    hits = 0
    for o in objects:
        t = o.get("type")
        if "systemPayload" in o or "usageMetadata" in o or isinstance((o.get("message") or {}).get("parts"), list):
            continue  # (Gemini-shaped: a Qwen Code record, whose envelope is this one's)
        if isinstance(o.get("message"), dict) and t in ("user", "assistant"):
            hits += 1
        elif t in ENVELOPE_TYPES and ("sessionId" in o or "uuid" in o or "messageId" in o or "leafUuid" in o):
            hits += 1
    return hits / len(objects) if objects else 0.0


class _Group:
    """One API response: the assistant lines sharing a message.id, and the results of its tools.
    (A plain class: ``dataclass`` would compile its ``__init__`` at every start.)"""

    __slots__ = ("blocks", "results", "usage", "model", "timestamp")

    def __init__(self, timestamp: str | None = None) -> None:
        self.blocks: list[Any] = []
        self.results: list[Any] = []
        self.usage: dict[str, int] | None = None
        self.model: str | None = None
        self.timestamp = timestamp  # when the response began (its first line)


def _as_blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _usage(raw: Any) -> dict[str, Any] | None:
    return anthropic_usage(raw)


def _note_version(builder: TranscriptBuilder, obj: dict) -> None:
    """The Claude Code version that wrote the session (its first line that says): its compaction
    rules (``audit.py``)."""
    if "version" not in builder.metadata and isinstance(obj.get("version"), str) and len(obj["version"]) < 40:
        builder.metadata["version"] = obj["version"]


def sidechain_usage(obj: dict, out: dict[str, dict[str, Any]]) -> None:
    """The usage of an inline subagent's reply (Claude Code 1.0.x wrote subagents into the main
    session's file), once per message (its lines repeat it), with its model and time."""
    message = obj["message"]
    if obj.get("type") != "assistant":
        return
    try:
        usage = anthropic_usage(message.get("usage"), message.get("model") if isinstance(message.get("model"), str)
                                else None, obj.get("timestamp"))
    except BadField:
        return
    if usage:
        out[str(message.get("id") or obj.get("requestId") or obj.get("uuid") or len(out))] = usage


def load(path: str, *, skip_bad_lines: bool = False, head: Head | None = None, **_: object) -> Transcript:
    reader = LineReader(path, skip_bad_lines=skip_bad_lines, head=head)
    builder = TranscriptBuilder(path, NAME)
    r = _Reading(builder, reader)
    subagent: bool | None = None  # decided by the first conversation line
    for lineno, obj in reader.objects():
        kind = obj.get("type")
        _note_version(builder, obj)
        if kind in ("user", "assistant") and isinstance(obj.get("message"), dict):
            if subagent is None:
                subagent = obj.get("isSidechain") is True
            if obj.get("isSidechain") is True and not subagent:
                r.sidechain_lines += 1  # (another conversation: not replayed, but its calls were billed)
                sidechain_usage(obj, r.sidechain_usage)
                continue
            message = obj["message"]
            problem = message_problem(message) if message.get("role") == kind else f"message role is not {kind!r}"
            if problem:
                reader.bad(lineno, problem)
            elif kind == "assistant":
                r.assistant(lineno, obj, message)
            else:
                r.user(obj, message)
            continue
        r.envelope(obj, kind)
    _emit(r.seq, builder)
    finish(builder, bool(subagent), r.sidechain_lines, r.sidechain_usage, r.ignored)
    return builder.build(skipped_lines=reader.skipped)


def finish(builder: TranscriptBuilder, subagent: bool, sidechain_lines: int, sidechain_usage: dict[str, Any],
           ignored: dict[str, int]) -> None:
    """The session's metadata once its lines are read (its messages are in ``builder``): this
    loader's, and the native reading's (``engine/feeds/claude_code_lazily.py``)."""
    builder.metadata.update({
        "subagent": subagent,
        "acompact": Path(builder.path).name.startswith("agent-acompact-"),
        "sidechain_lines": sidechain_lines,
        "sidechain_usage": list(sidechain_usage.values()),
        "ignored_lines": ignored,
    })
    if builder.metadata["acompact"]:
        builder.warnings.append("a Claude Code compaction summarizer call: not self-contained (its prompt "
                                "holds the whole pre-compaction conversation); not used for calibration")


def ignored_label(kind: Any) -> str:
    """How a left-out line of type ``kind`` is counted."""
    return str(kind) if kind in ENVELOPE_TYPES else f"unknown line type {kind!r}"


def recorded_compaction(summary: dict[str, Any], boundary: dict[str, Any], n: int, position: int) -> RecordedCompaction:
    """The ``n``-th compaction (from 1), before message ``position``: its summary's message and the
    boundary line before it (``{}``: none)."""
    given = boundary.get("compactMetadata")
    meta: dict[str, Any] = given if isinstance(given, dict) else {}
    return RecordedCompaction(
        position=position,
        summary=make_entry(summary, -1_000_000 - n),
        trigger=meta.get("trigger"),
        pre_tokens=meta.get("preTokens") if type(meta.get("preTokens")) is int and meta["preTokens"] >= 0 else None,
        time=boundary.get("timestamp") if isinstance(boundary.get("timestamp"), str) else None,
    )


class _Reading:
    """What a session's lines build up, in API order: ("assistant", group) | ("user", message) |
    ("compaction", line), each reply's group by message id, and what was left out."""

    def __init__(self, builder: TranscriptBuilder, reader: LineReader) -> None:
        self.builder, self.reader = builder, reader
        self.seq: list[tuple[str, Any]] = []
        self.groups: dict[str, _Group] = {}
        self.owner: dict[str, _Group] = {}  # tool_use id -> the group that called it
        self.ignored: dict[str, int] = {}
        self.sidechain_lines = 0
        self.sidechain_usage: dict[str, dict[str, Any]] = {}  # an inline subagent's calls: message id -> usage
        self.pending_boundary: dict[str, Any] | None = None

    def assistant(self, lineno: int, obj: dict[str, Any], message: dict[str, Any]) -> None:
        """A reply's line: its blocks join its message's group (one reply may span lines)."""
        try:
            usage = _usage(message.get("usage"))
        except BadField as exc:
            self.reader.bad(lineno, exc.message)
            return
        mid = message.get("id") or obj.get("requestId") or obj.get("uuid") or f"line{lineno}"
        group = self.groups.get(mid)
        if group is None:
            group = self.groups[mid] = _Group(timestamp=obj.get("timestamp") if isinstance(
                obj.get("timestamp"), str) else None)
            self.seq.append(("assistant", group))
        new = _as_blocks(message["content"])
        group.blocks.extend(new)
        for b in new:
            if block_type(b) == "tool_use":
                self.owner[b["id"]] = group
        group.usage = usage or group.usage
        if isinstance(message.get("model"), str):
            group.model = message["model"]

    def user(self, obj: dict[str, Any], message: dict[str, Any]) -> None:
        """A user line: a compaction's summary, a transcript-only line (left out), or a message
        whose tool results go to the reply that called them."""
        if obj.get("isCompactSummary"):
            self.seq.append(("compaction", {"summary": message, "boundary": self.pending_boundary or {}}))
            self.pending_boundary = None
            return
        if obj.get("isVisibleInTranscriptOnly"):
            self.ignored[TRANSCRIPT_ONLY] = self.ignored.get(TRANSCRIPT_ONLY, 0) + 1
            return
        content = message["content"]
        if isinstance(content, list):
            rest = []
            for b in content:
                g = self.owner.get(b.get("tool_use_id")) if block_type(b) == "tool_result" else None
                if g is not None:
                    g.results.append(b)
                else:
                    rest.append(b)
            if len(rest) != len(content):
                if not rest:  # all of it went to the results of its assistant message
                    return
                message = {"role": "user", "content": rest}
        self.seq.append(("user", message))

    def envelope(self, obj: dict[str, Any], kind: Any) -> None:
        """A line that is no message: a compaction's boundary, the session's title, or left out."""
        builder = self.builder
        if kind == "system" and obj.get("subtype") == "compact_boundary":
            self.pending_boundary = obj
        elif kind == "summary" and isinstance(obj.get("summary"), str):
            builder.title = builder.title or obj["summary"]
        elif kind == "ai-title" and isinstance(obj.get("title"), str):
            builder.title = obj["title"]
        else:
            label = ignored_label(kind)
            self.ignored[label] = self.ignored.get(label, 0) + 1
        if builder.session_id is None and isinstance(obj.get("sessionId"), str):
            builder.session_id = obj["sessionId"]


def _emit(seq: list[tuple[str, Any]], builder: TranscriptBuilder) -> None:
    """Turn the API-order sequence into messages, merging adjacent user messages."""
    user_buffer: list[Any] = []

    def flush() -> None:
        if not user_buffer:
            return
        if len(user_buffer) == 1:
            builder.add({"role": "user", "content": user_buffer[0]})
        else:
            builder.add({"role": "user", "content": [b for c in user_buffer for b in _as_blocks(c)]})
        user_buffer.clear()

    n_compactions = 0
    for kind, item in seq:
        if kind == "assistant":
            flush()
            usage = item.usage
            if usage is not None:
                usage = {**usage, **({"model": item.model} if item.model else {}),
                         **({"timestamp": item.timestamp} if item.timestamp else {})}
            builder.add({"role": "assistant", "content": item.blocks}, usage=usage)
            if item.model:
                builder.model = item.model
            if item.results:
                user_buffer.append(item.results)
        elif kind == "user":
            user_buffer.append(item["content"])
        else:  # a recorded compaction: the context restarts here, from its summary
            flush()
            n_compactions += 1
            builder.compactions.append(recorded_compaction(item["summary"], item["boundary"], n_compactions,
                                                           len(builder.entries)))
    flush()


def already_compacted(transcript: Transcript) -> dict[str, int]:
    """Tool results that Claude Code itself had already persisted or cleared."""
    counts = dict.fromkeys(ALREADY_COMPACTED, 0)
    for e in transcript.entries:
        for f in e.results:
            content = e.message["content"][f.block].get("content")
            text = content if isinstance(content, str) else str(content)
            for key, marker in ALREADY_COMPACTED.items():
                if marker in text:
                    counts[key] += 1
    return counts


def subagent_files(path: str) -> list[dict[str, Any]]:
    """The subagent transcripts of a main session: ``<session>/subagents/agent-*.jsonl``."""
    p = Path(path)
    folder = p.with_suffix("") / "subagents"
    if not folder.is_dir():
        return []
    return [{"path": str(f), "acompact": f.name.startswith("agent-acompact-"), "bytes": f.stat().st_size}
            for f in sorted(folder.glob("agent-*.jsonl"))]


def inspect_facts(transcript: Transcript) -> dict[str, Any]:
    """What ``inspect`` shows of a Claude Code session beyond what every format has."""
    meta = transcript.metadata
    return {
        "subagent": meta.get("subagent", False),
        "acompact": meta.get("acompact", False),
        "sidechain_lines": meta.get("sidechain_lines", 0),
        "ignored_lines": meta.get("ignored_lines", {}),
        "already_compacted": already_compacted(transcript),
        "subagents": subagent_files(transcript.path),
    }
