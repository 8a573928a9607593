"""The Summarizer protocol: what every summarizer takes and returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..messages import Message


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    messages: list[Message]  # the conversation being summarised
    input_text: str  # its compact JSON text, cut to the policy's input_chars
    prompt: str  # instruction text (the live summarizer sends it; the stub ignores it)
    max_output_tokens: int
    kind: str  # "summary" | "reactive" | "manual"
    call: int


@dataclass(frozen=True, slots=True)
class SummaryResult:
    text: str
    input_tokens: int
    output_tokens: int
    cached: bool = False


class Summarizer(Protocol):
    name: str

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Return a summary or raise SummarizerError."""
        ...
