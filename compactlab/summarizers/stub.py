"""The offline stub summarizer (SPEC §8): extractive and deterministic.

It keeps the first user request, the latest user request, the tools used with counts, the files
named in tool inputs, the number of error results and the end of the last assistant text, in at
most ``max_chars`` characters. Same input, same output.
"""

from __future__ import annotations

import math
from collections import Counter

from ..messages import block_type, files_in_input, text_of
from .base import SummaryRequest, SummaryResult


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


class StubSummarizer:
    name = "stub"

    def __init__(self, max_chars: int = 2_000) -> None:
        self.max_chars = max_chars

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        first_user = latest_user = last_assistant = ""
        tools: Counter[str] = Counter()
        files: dict[str, None] = {}
        errors = 0
        for m in request.messages:
            content = m.get("content")
            if m.get("role") == "user":
                text = text_of(m).strip()
                if text:
                    first_user = first_user or text
                    latest_user = text
                if isinstance(content, list):
                    errors += sum(1 for b in content if block_type(b) == "tool_result" and b.get("is_error"))
            elif m.get("role") == "assistant":
                text = text_of(m).strip()
                if text:
                    last_assistant = text
                if isinstance(content, list):
                    for b in content:
                        if block_type(b) == "tool_use":
                            tools[str(b.get("name"))] += 1
                            files.update(dict.fromkeys(files_in_input(b.get("input"))))
        lines = [f"Summary of {len(request.messages)} earlier messages (stub summarizer)."]
        if first_user:
            lines.append(f"First request: {_clip(first_user, 300)}")
        if latest_user and latest_user != first_user:
            lines.append(f"Latest request: {_clip(latest_user, 300)}")
        if tools:
            lines.append("Tools used: " + ", ".join(f"{n}×{c}" for n, c in sorted(tools.items(), key=lambda t: (-t[1], t[0]))))
        if files:
            lines.append("Files: " + ", ".join(list(files)[:40]))
        lines.append(f"Error results: {errors}")
        if last_assistant:
            lines.append(f"Last assistant text: …{_clip(last_assistant[-400:], 400)}")
        text = "\n".join(lines)
        if len(text) > self.max_chars:
            text = text[: self.max_chars - 1] + "…"
        # the stub bills like a model would: input and output at ~4 chars a token
        return SummaryResult(
            text=text,
            input_tokens=math.ceil((len(request.prompt) + len(request.input_text)) / 4),
            output_tokens=math.ceil(len(text) / 4),
        )
