"""Writing a transcript as Anthropic messages JSONL (``compactlab convert``).

The messages a replay uses, one line each, as it uses them (two of one role in a row stay two: a
reply is a call, and the API takes such turns as one). Assistant messages with recorded usage are
written as API response objects, so the usage (and the model, and the time) survive the
conversion; the first reply also says what the recording said of itself (``METADATA_KEY``). With
``keep_recorded_compactions`` (``convert``'s default) a compaction the recording did is written
where it happened as its summary message marked ``"recorded_compaction": {"trigger",
"pre_tokens"}`` (a key only compactlab reads: its Anthropic loader takes such a line as a recorded
compaction, not a message): a replay of the file then gives what a replay of the source gives,
calibration included (it fits the usage to the contexts the recording sent); the usage of the
recording's inline subagents (Claude Code 1.0.x sidechains) is one line, ``"recorded_sidechains"``,
so that what they cost survives too. Without it the
recording's compactions are left out, and so is the usage of every call after the first of them:
that usage measured a context the file no longer holds (kept, it would fit the plain history to
smaller numbers and mislead the calibration).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from .model import Transcript

COMPACTION_KEY = "recorded_compaction"
#: what the recording said of itself that a replay or its report reads, written on the first reply
#: (with the format it was recorded in) so that it survives: the harness's version (a preset's
#: trigger by version), Codex's window, what the harness says it billed (mini-swe-agent, SWE-agent),
#: that it is a Claude Code compaction summarizer's call (not calibrated on)
METADATA_KEY = "recorded_metadata"
#: a line of the recording's inline subagents (sidechains: another conversation, not replayed, but
#: billed): how many lines they were and each call's usage, so that their recorded cost survives
SIDECHAINS_KEY = "recorded_sidechains"


def anthropic_lines(transcript: Transcript, keep_recorded_compactions: bool = False) -> Iterator[bytes]:
    yield from _head_lines(transcript)
    restarts = {c.position: c for c in transcript.compactions} if keep_recorded_compactions else {}
    # without the compactions, the usage recorded after the first one describes another context
    usage_until = len(transcript.entries) if keep_recorded_compactions or not transcript.compactions else \
        min(c.position for c in transcript.compactions)
    first_usage, recorded = True, _recorded(transcript)
    for i, entry in enumerate(transcript.entries + [None]):  # type: ignore[operator]
        if i in restarts:
            c = restarts[i]
            said = {"trigger": c.trigger, "pre_tokens": c.pre_tokens, **({"time": c.time} if c.time else {})}
            yield orjson.dumps({**c.summary.message, COMPACTION_KEY: said})
        if entry is None:
            break
        usage = transcript.usage.get(i) if i < usage_until else None
        if usage is not None:
            yield orjson.dumps(_usage_line(transcript, entry, usage, recorded if first_usage else {}))
            first_usage = False
        elif (not transcript.usage and (transcript.model or recorded)
              and entry.message.get("role") == "assistant" and first_usage):
            # (no usage: the model on the first reply, for its prices, and what the recording says of itself)
            first_usage = False
            yield orjson.dumps({"type": "message", "role": "assistant", "content": entry.message["content"],
                                **({"model": transcript.model} if transcript.model else {}), **recorded})
        else:  # (each message as the replay has it: two of a role in a row stay two, a reply being a call)
            yield orjson.dumps(entry.message)


def _head_lines(transcript: Transcript) -> Iterator[bytes]:
    """The system prompt, and the recording's inline subagents' lines and usage."""
    if transcript.system is not None:
        yield orjson.dumps({"role": "system", "content": transcript.system})
    side = [u for u in transcript.metadata.get("sidechain_usage") or () if isinstance(u, dict)]
    if side or transcript.metadata.get("sidechain_lines"):
        yield orjson.dumps({SIDECHAINS_KEY: {"lines": int(transcript.metadata.get("sidechain_lines") or 0),
                                             "usage": side}})


def _usage_line(transcript: Transcript, entry: Any, usage: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
    """A reply with its recorded usage, model and time, and ``recorded`` (the first one's: what the
    recording says of itself, ``_recorded``)."""
    line = {"type": "message", "role": "assistant", "content": entry.message["content"],
            "usage": {k: v for k, v in usage.items() if k not in ("model", "timestamp")}}
    if usage.get("model") or transcript.model:
        line["model"] = usage.get("model") or transcript.model
    if usage.get("timestamp"):
        line["timestamp"] = usage["timestamp"]
    line.update(recorded)
    return line


def _recorded(transcript: Transcript) -> dict[str, Any]:
    """What the first reply says of the recording: the format it was recorded in (none for an
    Anthropic messages file of its own) and what it said of itself that a replay reads
    (``METADATA_KEY``), as a converted file's loader reads them back."""
    meta = transcript.metadata
    out: dict[str, Any] = {}
    fmt = meta.get("recorded_format") or (transcript.format if transcript.format != "anthropic" else None)
    if fmt:
        out["recorded_format"] = fmt
    kept: dict[str, Any] = {k: meta[k] for k in ("version", "model_context_window") if k in meta}
    if meta.get("acompact"):  # (a compaction summarizer's call: never calibrated on)
        kept["acompact"] = True
    stats = meta.get("model_stats")
    if isinstance(stats, dict) and "instance_cost" in stats:
        kept["model_stats"] = {"instance_cost": stats["instance_cost"]}
    if kept:
        out[METADATA_KEY] = kept
    return out


def to_anthropic_jsonl(transcript: Transcript, keep_recorded_compactions: bool = False) -> bytes:
    return b"".join(line + b"\n" for line in anthropic_lines(transcript, keep_recorded_compactions))
