"""The Summarizer protocol: what every summarizer takes and returns."""

from __future__ import annotations


from typing import Protocol

import orjson

from ..plain import NamedTuple
from ..transcripts.messages import Entry, Message, cut_text, make_entry, sized_len


class SummaryRequest:
    """What a summarizer is asked to summarise.

    ``input_text`` is the compact JSON text of ``messages`` cut to the policy's ``input_chars``
    from the head or the tail. Given ``limit`` (and ``chars``, the JSON length of the messages,
    known from their facts) instead of a text, it is made on first read: serialising the context
    is most of what a summary costs here, and the stub needs only ``input_chars``.

    The conversation is given as messages or as the engine's entries (``entries=``); each form is
    made from the other on first use. The stub reads the entries' facts, the live summarizer the
    messages.
    """

    __slots__ = ("_messages", "_entries", "prompt", "max_output_tokens", "kind", "call", "input_chars", "_text",
                 "_limit", "_from_tail")

    def __init__(self, messages: list[Message] | None = None, input_text: str | None = None, prompt: str = "",
                 max_output_tokens: int = 2_000, kind: str = "summary", call: int = 0, *,
                 limit: int = 0, chars: int = 0, from_tail: bool = False, entries: list[Entry] | None = None) -> None:
        if (messages is None) == (entries is None):
            raise TypeError("SummaryRequest takes messages or entries")
        self._messages, self._entries = messages, entries  # the conversation being summarised
        self.prompt = prompt  # instruction text (the live summarizer sends it; the stub ignores it)
        self.max_output_tokens = max_output_tokens
        self.kind = kind  # "summary" | "reactive" | "manual"
        self.call = call
        self._text = input_text
        self._limit, self._from_tail = limit, from_tail
        self.input_chars = sized_len(input_text) if input_text is not None else min(limit, chars)

    @property
    def messages(self) -> list[Message]:
        if self._messages is None:
            self._messages = [e.message for e in self._entries or ()]
        return self._messages

    @property
    def entries(self) -> list[Entry]:
        if self._entries is None:
            self._entries = [make_entry(m, i) for i, m in enumerate(self._messages or ())]
        return self._entries

    @property
    def input_text(self) -> str:
        if self._text is None:
            text = orjson.dumps(self.messages).decode("utf-8")
            self._text = cut_text(text, self._limit, self._from_tail)
        return self._text


class SummaryResult(NamedTuple):
    """A summary and what it cost in tokens."""

    text: str
    input_tokens: int
    output_tokens: int
    cached: bool = False


class Summarizer(Protocol):
    name: str

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Return a summary or raise SummarizerError."""
        ...
