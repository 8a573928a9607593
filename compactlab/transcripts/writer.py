"""Writing a transcript as Anthropic messages JSONL (``compactlab convert``).

Assistant messages with recorded usage are written as API response objects, so the usage (and
the model) survive the conversion. A compaction the recording did is written as its summary
message marked ``"recorded_compaction": {...}``, which the Anthropic loader reads back as a
recorded compaction rather than a message: replaying the converted file gives the same records.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from .model import Transcript

COMPACTION_KEY = "recorded_compaction"


def anthropic_lines(transcript: Transcript) -> Iterator[bytes]:
    if transcript.system is not None:
        yield orjson.dumps({"role": "system", "content": transcript.system})
    restarts = {c.position: c for c in transcript.compactions}
    for i, entry in enumerate(transcript.entries + [None]):  # type: ignore[operator]
        if i in restarts:
            c = restarts[i]
            yield orjson.dumps({**c.summary.message, COMPACTION_KEY: {"trigger": c.trigger, "pre_tokens": c.pre_tokens}})
        if entry is None:
            break
        usage = transcript.usage.get(i)
        if usage is not None:
            counts = {k: v for k, v in usage.items() if k not in ("model", "timestamp")}
            line = {"type": "message", "role": "assistant", "content": entry.message["content"], "usage": counts}
            if usage.get("model") or transcript.model:
                line["model"] = usage.get("model") or transcript.model
            if usage.get("timestamp"):
                line["timestamp"] = usage["timestamp"]
            yield orjson.dumps(line)
        else:
            yield orjson.dumps(entry.message)


def to_anthropic_jsonl(transcript: Transcript) -> bytes:
    return b"".join(line + b"\n" for line in anthropic_lines(transcript))
