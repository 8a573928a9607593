"""The offline stub summarizer (SPEC §8): extractive and deterministic.

It keeps the first user request, the latest user request, the tools used with counts, the files
named in tool inputs, the number of error results and the end of the last assistant text, in at
most ``max_chars`` characters. Same input, same output.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from itertools import chain

from ..transcripts.messages import Entry, cut_text, sized_len, text_of
from .base import SummaryRequest, SummaryResult



def _clip(text: str, n: int) -> str:
    """Whitespace runs made one space, cut to ``n`` chars. A long text is normalised from a
    prefix: the first ``n`` normalised chars of a prefix are those of the whole text."""
    short = " ".join(text[: 4 * n].split()) if len(text) > 4 * n else ""
    text = short if len(short) > n else " ".join(text.split())
    return text if sized_len(text) <= n else cut_text(text, n - 1) + "…"


class StubSummarizer:
    name = "stub"

    def __init__(self, max_chars: int = 2_000) -> None:
        self.max_chars = max_chars

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        entries = request.entries  # their facts: the tools, files and errors are counted already
        first_user = _first_text(entries, "user")
        latest_user = _first_text(reversed(entries), "user")
        last_assistant = _first_text(reversed(entries), "assistant")
        # (tool names and files are facts of assistant messages, results of user ones)
        tools = Counter(chain.from_iterable([e.tool_names for e in entries]))
        files = dict.fromkeys(chain.from_iterable(chain.from_iterable([e.use_files for e in entries])))
        errors = sum([f.is_error for e in entries for f in e.results])
        lines = [f"Summary of {len(entries)} earlier messages (stub summarizer)."]
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
        if sized_len(text) > self.max_chars:
            text = cut_text(text, self.max_chars - 1) + "…"
        # the stub bills like a model would: input and output at ~4 chars a token
        return SummaryResult(
            text=text,
            input_tokens=math.ceil((len(request.prompt) + request.input_chars) / 4),
            output_tokens=math.ceil(len(text) / 4),
        )


def _first_text(entries: Iterable[Entry], role: str) -> str:
    """The text of the first message of ``role`` (in the order given) that has any."""
    for e in entries:
        if e.has_text and e.role == role:
            return stripped_text(e)
    return ""


def stripped_text(entry: Entry) -> str:
    """What the stub quotes of a message: its text, stripped (the native loop's stub summary asks
    it of each message it quotes)."""
    return text_of(entry.message).strip()
