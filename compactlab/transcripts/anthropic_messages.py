"""Format 1: Anthropic messages JSONL, one API message per line (what the seeds' write_transcript
writes). API response objects (``{"type": "message", "role": "assistant", ...}``) count too, their
``usage`` kept as recorded usage; a top-level system line is kept as metadata."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Callable, Literal

import orjson

from ..core import line_facts
from .messages import Entry, ResultFact, build_entry
from .model import BadField, RecordedCompaction, Transcript, TranscriptBuilder, TranscriptStream, VERSION, anthropic_usage
from .reader import MAX_DEPTH, Head, LineReader, _depth_exceeds
from .writer import COMPACTION_KEY, METADATA_KEY, SIDECHAINS_KEY

NAME = "anthropic"
DESCRIPTION = "Anthropic Messages API messages, one JSON object per line"


def _is_message_line(obj: dict) -> bool:
    return obj.get("role") in ("user", "assistant") and "message" not in obj


def sniff(objects: list[dict]) -> float:
    """Share of the sampled objects that look like bare API messages (OpenAI-style ones do not)."""
    if not objects or any(o.get("role") == "tool" or "tool_calls" in o for o in objects):
        return 0.0
    hits = sum(1 for o in objects if _is_message_line(o) or o.get("role") == "system" or set(o) == {"system"})
    return hits / len(objects)


def load(path: str, *, skip_bad_lines: bool = False, head: Head | None = None, **_: object) -> Transcript:
    builder = TranscriptBuilder(path, NAME)
    for _entry in _read(builder, LineReader(path, skip_bad_lines=skip_bad_lines, head=head)):
        pass
    return builder.build(skipped_lines=builder.skipped_lines)


def stream(path: str, *, skip_bad_lines: bool = False, head: Head | None = None, **_: object) -> TranscriptStream:
    """The transcript as it is read: one line, one message, handed on and not kept."""
    builder = TranscriptBuilder(path, NAME, keep=False)
    return TranscriptStream(builder, _read(builder, LineReader(path, skip_bad_lines=skip_bad_lines, head=head)))


def message_of(obj: dict) -> dict:
    """The API message of a line: the line itself, or an API response object's role and content."""
    return obj if len(obj) == 2 and "content" in obj else {"role": obj.get("role"), "content": obj.get("content")}


#: the format a converted file was recorded in (its first response object says it: the prior of
#: short recordings is the recording harness's)
RECORDED_FORMAT_KEY = "recorded_format"


def _sidechains(builder: TranscriptBuilder, side: dict) -> bool:
    """The inline subagents' lines and usage a converted file recorded, into the metadata (as the
    Claude Code loader gives them); False where they are not that."""
    lines, usage = side.get("lines"), side.get("usage")
    if type(lines) is not int or lines < 0 or not isinstance(usage, list) or not all(isinstance(u, dict) for u in usage):
        return False
    try:
        calls = [anthropic_usage(u, u.get("model") if isinstance(u.get("model"), str) else None, u.get("timestamp"))
                 for u in usage]
    except BadField:
        return False
    builder.metadata["sidechain_lines"] = builder.metadata.get("sidechain_lines", 0) + lines
    builder.metadata.setdefault("sidechain_usage", []).extend(calls)
    return True


def _not_a_message(builder: TranscriptBuilder, reader: LineReader, lineno: int, obj: dict[str, Any], role: Any) -> bool:
    """Take a line that is not a message of the conversation (the system prompt, what `compactlab
    convert` wrote of sidechains and compactions) or that is bad (said): True; else False."""
    if role == "system" or (role is None and "system" in obj):
        builder.system = obj.get("content", obj.get("system"))
        return True
    if isinstance(obj.get(SIDECHAINS_KEY), dict) and role is None:  # written by `compactlab convert`
        if not _sidechains(builder, obj[SIDECHAINS_KEY]):
            reader.bad(lineno, f"{SIDECHAINS_KEY}: not a count of lines and a list of usage objects")
        return True
    if "message" in obj and role is None:
        reader.bad(lineno, "a Claude Code style line (\"message\" envelope) in an Anthropic messages file")
        return True
    if isinstance(obj.get(COMPACTION_KEY), dict) and role == "user":  # written by `compactlab convert`
        summary = build_entry({"role": "user", "content": obj.get("content")},
                              -1_000_000 - len(builder.compactions) - 1, check=True)
        if not isinstance(summary, Entry):
            reader.bad(lineno, summary or "not a usable message")
            return True
        meta = obj[COMPACTION_KEY]
        time = meta.get("time")
        builder.compactions.append(RecordedCompaction(position=builder.count, summary=summary,
                                                      trigger=meta.get("trigger"), pre_tokens=meta.get("pre_tokens"),
                                                      time=time if isinstance(time, str) else None))
        return True
    return False


def _read(builder: TranscriptBuilder, reader: LineReader, measure: bool = False,
          messages: bool = True, unread: Callable[..., Entry] | None = None,
          placed: list[bytes] | None = None) -> Iterator[Entry]:
    """Add every message of the file to ``builder``, yielding each as it is added (``measure``:
    with the JSON length of every tool result's content among its facts, as the native reader
    always reads them: it measures them as it reads, and a result replaced is measured by them,
    ``Entry.with_result_content``). Where the native core
    runs, the facts of a message line, or of a reply recorded with its usage and model, are read
    from its bytes (``core.line_facts``; ``build_entry`` is its reference) and, without
    ``messages`` (a reader that sends only facts), the line is not parsed at all, only a reply's
    other members: its Entry's message is None, or it is what ``unread`` makes of its facts (an
    entry that reads its message where it is asked for it). ``placed``: where given, before each
    entry is yielded, where its tool results' contents stand on its line is appended to it
    (``read_ahead.Placed``: the native reader's, read with the facts; empty where Python read the
    line), for a reader that sends the facts to a replay that reads the contents from the file."""
    facts = line_facts(ResultFact, True)
    for lineno, raw, obj in reader.lines():
        spans = b""
        if facts is None:
            got = None
        elif placed is None:
            got = facts.read(raw, builder.count)
        elif (read := facts.read_placed(raw, builder.count)) is None:
            got = None
        else:
            found, rest, spans = read
            got = found, rest
        if (entry := line_entry(builder, reader, lineno, raw, obj, got, messages, unread, measure)) is not None:
            if placed is not None:
                placed.append(spans)
            yield entry
    builder.skipped_lines = reader.skipped


def line_entry(builder: TranscriptBuilder, reader: LineReader, lineno: int, raw: bytes, obj: dict | None,
               got: tuple[tuple, bytes | None] | None, messages: bool = True,
               unread: Callable[..., Entry] | None = None, measure: bool = False) -> Entry | None:
    """The message on a line (``obj``: its object where it was parsed) added to ``builder``, or
    None where the line holds none or is bad (said). ``got``: the line's facts as the native
    reader read them (``LineFacts.read``), None where it did not (``_read`` says the rest)."""
    if got is not None:
        # a message line read natively: {"role": "user" | "assistant", "content": ...}, usable,
        # and where it is a reply, its other members (their own JSON object: rest)
        found, rest = got
        if obj is None and messages and (obj := reader.parse(lineno, raw, False)) is None:
            return None  # (not as the native reader read it: said bad by the parser)
        if rest is None:
            read = (unread(*found) if unread is not None and obj is None
                    else Entry(obj, *found))  # type: ignore[arg-type]  # (None: a facts-only reader's)
            builder.add_entry(read)
            return read
        other = obj if obj is not None else _members(rest)
        if other is not None:
            _reply_metadata(builder, reader, lineno, other, deep=False)
            read = (unread(*found) if unread is not None and obj is None
                    else Entry(message_of(obj) if obj is not None else None, *found))  # type: ignore[arg-type]
            if (recorded := _recorded_usage(reader, lineno, other, found[1])) is False:
                return None
            builder.add_entry(read, usage=recorded)
            return read
    if obj is None and (obj := reader.parse(lineno, raw, False)) is None:
        return None
    role = obj.get("role")
    if _not_a_message(builder, reader, lineno, obj, role):
        return None
    message = message_of(obj)
    if message is not obj and not _reply_metadata(builder, reader, lineno, obj):
        return None
    entry = build_entry(message, builder.count, check=True, measure=measure)
    if not isinstance(entry, Entry):
        reader.bad(lineno, entry or "not a usable message")
        return None
    recorded = _recorded_usage(reader, lineno, obj, role) if message is not obj else None
    if recorded is False:
        return None
    builder.add_entry(entry, usage=recorded)
    return entry


def _members(rest: bytes) -> dict | None:
    """A reply's other members, as the native reader handed them (their own JSON object); None
    where orjson does not read them so (then the whole line is parsed, and said bad if it is)."""
    try:
        other = orjson.loads(rest)
    except orjson.JSONDecodeError:
        return None
    return other if type(other) is dict else None


def _reply_metadata(builder: TranscriptBuilder, reader: LineReader, lineno: int, obj: dict,
                    deep: bool = True) -> bool:
    """A reply's members besides its message (an API response object's): False where they nest too
    deep (said bad); else True, the model it names and the format `compactlab convert` recorded
    kept in ``builder``. (``deep``: whether they may; the native reader reads no line nested
    deeper than half the limit.)"""
    # (a member's value is one level below the line's object: its limit is one less)
    if deep and any(isinstance(v, (dict, list)) and _depth_exceeds(v, MAX_DEPTH - 1) for k, v in obj.items()
                    if k != "content"):
        reader.bad(lineno, f"nesting deeper than {MAX_DEPTH} levels")
        return False
    if isinstance(obj.get("model"), str):
        builder.model = obj["model"]
    builder.recorded_from(obj.get(RECORDED_FORMAT_KEY))  # (written by `compactlab convert`)
    if isinstance(obj.get(METADATA_KEY), dict):  # (so is this: what the recording said of itself)
        _recorded_metadata(builder, obj[METADATA_KEY])
    return True


def _recorded_metadata(builder: TranscriptBuilder, said: dict[str, Any]) -> None:
    """What ``compactlab convert`` kept of what the recording said of itself (``writer.METADATA_KEY``),
    each where it is what its source's loader makes of it (anything else is left out)."""
    version, window, stats = said.get("version"), said.get("model_context_window"), said.get("model_stats")
    if isinstance(version, str) and VERSION.fullmatch(version):
        builder.metadata["version"] = version
    if type(window) is int and window > 0:
        builder.metadata["model_context_window"] = window
    cost = stats.get("instance_cost") if isinstance(stats, dict) else None
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        builder.metadata["model_stats"] = {"instance_cost": cost}
    if said.get("acompact") is True:
        builder.metadata["acompact"] = True


def _recorded_usage(reader: LineReader, lineno: int, obj: dict, role: Any) -> dict | None | Literal[False]:
    """A reply's recorded usage (an assistant's ``usage`` object, with its model and time), None
    where it records none, False where it is bad (said)."""
    usage = obj.get("usage")
    if not (type(usage) is dict and usage and role == "assistant"):
        return None
    try:
        return anthropic_usage(usage, obj.get("model"), obj.get("timestamp"))
    except BadField as exc:
        reader.bad(lineno, exc.message)
        return False
