"""The Summarizer protocol: what every summarizer takes and returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import orjson

from ..messages import Message


class SummaryRequest:
    """What a summarizer is asked to summarise.

    ``input_text`` is the compact JSON text of ``messages`` cut to the policy's ``input_chars``
    from the head or the tail. Given ``limit`` (and ``chars``, the JSON length of the messages,
    known from their facts) instead of a text, it is made on first read: serialising the context
    is most of what a summary costs here, and the stub needs only ``input_chars``.
    """

    __slots__ = ("messages", "prompt", "max_output_tokens", "kind", "call", "input_chars", "_text", "_limit",
                 "_from_tail")

    def __init__(self, messages: list[Message], input_text: str | None = None, prompt: str = "",
                 max_output_tokens: int = 2_000, kind: str = "summary", call: int = 0, *,
                 limit: int = 0, chars: int = 0, from_tail: bool = False) -> None:
        self.messages = messages  # the conversation being summarised
        self.prompt = prompt  # instruction text (the live summarizer sends it; the stub ignores it)
        self.max_output_tokens = max_output_tokens
        self.kind = kind  # "summary" | "reactive" | "manual"
        self.call = call
        self._text = input_text
        self._limit, self._from_tail = limit, from_tail
        self.input_chars = len(input_text) if input_text is not None else min(limit, chars)

    @property
    def input_text(self) -> str:
        if self._text is None:
            text = orjson.dumps(self.messages).decode("utf-8")
            self._text = text[-self._limit:] if self._from_tail else text[: self._limit]
        return self._text


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
