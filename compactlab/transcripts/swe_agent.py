"""SWE-agent trajectories (``*.traj``): one JSON document ``{history, trajectory, info, ...}``.
``history`` is the conversation as OpenAI-style messages (tool messages answer a list
``tool_call_ids``); ``trajectory[i].messages`` repeats the full prompt of step i and is not
read (it would count the history many times)."""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from .model import NO_MODEL, Transcript, TranscriptBuilder, object_at
from .openai_chat import convert, document_bad
from .openai_chat import inspect_facts as _family_facts
from .reader import read_document

NAME = "swe-agent"
DESCRIPTION = "SWE-agent trajectories (.traj: history, trajectory)"


def sniff_document(doc: Any) -> float:
    ok = isinstance(doc, dict) and isinstance(doc.get("history"), list) and isinstance(doc.get("trajectory"), list)
    return 1.0 if ok else 0.0


#: the model name of SWE-agent's ``ReplayModel``, which replays the actions of a recorded trajectory
REPLAY_MODEL = "replay"


def load(path: str, *, skip_bad_lines: bool = False, document: tuple[Any, str] | None = None, **_: object) -> Transcript:
    doc, sha = document or read_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        raise InputError(f"{path}: not a SWE-agent trajectory (no \"history\" list)")
    builder = TranscriptBuilder(path, NAME)
    info = object_at(doc, "info")
    for key in ("exit_status", "model_stats"):
        if key in info:
            builder.metadata[key] = info[key]
    config = doc.get("replay_config")
    if isinstance(config, str):  # SWE-agent stores it as a JSON string
        try:
            import orjson

            config = orjson.loads(config)
        except ValueError:
            config = None
    model = (((config or {}).get("agent") or {}).get("model") or {}).get("name") if isinstance(config, dict) else None
    if model == REPLAY_MODEL:  # (a recorded run replayed: the model that made it is not named)
        builder.model = NO_MODEL
        # (what that costs, unpriced calls, the price lookup says once a command: jobs.base.price_warning)
        builder.warnings.append("made by SWE-agent's replay model (a recorded run replayed), which names no model")
    elif isinstance(model, str):
        builder.model = model
    skipped = [0]
    convert(enumerate(doc["history"]), builder, document_bad(path, skip_bad_lines, skipped))
    return builder.build(skipped_lines=skipped[0], content_hash=sha)


#: what ``inspect`` shows beyond what every format has: this family's facts
inspect_facts = _family_facts
