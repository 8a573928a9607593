"""mini-swe-agent trajectories (``*.traj.json``): one JSON document ``{info, messages,
trajectory_format, instance_id}`` whose messages are OpenAI-style chat messages; each assistant
message's ``extra.response`` holds the API response, with its usage and model."""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from .model import Transcript, TranscriptBuilder, object_at
from .openai_chat import convert, document_bad, openai_usage
from .openai_chat import inspect_facts as _family_facts
from .reader import read_document

NAME = "mini-swe-agent"
DESCRIPTION = "mini-swe-agent trajectories (.traj.json: messages, trajectory_format)"


def sniff_document(doc: Any) -> float:
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        fmt = doc.get("trajectory_format")
        return 1.0 if isinstance(fmt, str) and fmt.startswith("mini-swe-agent") else 0.0
    return 0.0


def _response(m: dict) -> dict:
    extra = object_at(m, "extra")
    return object_at(extra, "response")


def load(path: str, *, skip_bad_lines: bool = False, document: tuple[Any, str] | None = None, **_: object) -> Transcript:
    doc, sha = document or read_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise InputError(f"{path}: not a mini-swe-agent trajectory (no \"messages\" list)")
    builder = TranscriptBuilder(path, NAME)
    builder.title = doc.get("instance_id") if isinstance(doc.get("instance_id"), str) else None
    builder.metadata["trajectory_format"] = doc.get("trajectory_format")
    info = object_at(doc, "info")
    if isinstance(info.get("model_stats"), dict):
        builder.metadata["model_stats"] = info["model_stats"]
    if isinstance(info.get("exit_status"), str):
        builder.metadata["exit_status"] = info["exit_status"]
    for m in doc["messages"]:
        model = _response(m).get("model") if isinstance(m, dict) else None
        if isinstance(model, str):
            builder.model = model
            break
    skipped = [0]
    convert(enumerate(doc["messages"]), builder, document_bad(path, skip_bad_lines, skipped),
            usage_of=lambda m: openai_usage((r := _response(m)).get("usage"), r.get("model"), r.get("created"))
            or openai_usage(m.get("usage")))
    return builder.build(skipped_lines=skipped[0], content_hash=sha)


#: what ``inspect`` shows beyond what every format has: this family's facts
inspect_facts = _family_facts
