"""Transcript loaders: one module per input format, plus detection.

Every format module exposes ``NAME``, ``DESCRIPTION``, ``sniff(objects) -> float`` (how well the
first parsed lines fit, 0..1) and ``load(path, **options) -> Transcript``. ``FORMATS`` is the one
registry: CLI choices and detection come from it.
"""

from __future__ import annotations

from types import ModuleType

from ..errors import InputError
from . import anthropic_messages, claude_code
from .model import RecordedCompaction, Transcript, TranscriptBuilder
from .reader import sniff_objects

FORMATS: dict[str, ModuleType] = {m.NAME: m for m in (anthropic_messages, claude_code)}

__all__ = ["FORMATS", "RecordedCompaction", "Transcript", "TranscriptBuilder", "detect_format", "expand_inputs",
           "load_transcript"]

SESSION_GLOBS = ("*.jsonl", "*.jsonl.gz", "*.json", "*.traj")


def detect_format(path: str) -> str:
    objects = sniff_objects(path)
    if not objects:
        raise InputError(f"{path}: not a transcript: none of its first lines is a JSON object")
    scores = {name: module.sniff(objects) for name, module in FORMATS.items()}
    best = max(scores, key=lambda n: scores[n])
    if scores[best] <= 0:
        raise InputError(
            f"{path}: not a transcript in any known format ({', '.join(FORMATS)})",
            hint="use --input-format NAME to force one",
        )
    return best


def load_transcript(path: str, input_format: str | None = None, **options: object) -> Transcript:
    """Load a transcript file, detecting its format unless ``input_format`` names one."""
    name = input_format or detect_format(path)
    if name not in FORMATS:
        raise InputError(f"unknown input format {name!r} (known: {', '.join(FORMATS)})")
    transcript = FORMATS[name].load(path, **options)
    if not transcript.entries:
        raise InputError(f"{path}: no messages in this transcript")
    return transcript


def expand_inputs(paths: list[str] | tuple[str, ...]) -> list[str]:
    """Files as given; a folder stands for the session files directly in it (not subagents)."""
    import os
    from pathlib import Path

    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted({str(f) for g in SESSION_GLOBS for f in Path(p).glob(g) if f.is_file()})
            if not found:
                raise InputError(f"{p}: a folder with no transcript files ({', '.join(SESSION_GLOBS)})")
            out.extend(found)
        else:
            out.append(p)
    return out
