"""The context window a recording is judged against: one per transcript, resolved here and nowhere
else, with where it came from (#43 §1).

Order: what the user said (``--window``, else a ``window`` for the model in their price table:
``--prices`` or their prices file) > what the harness recorded or implies (Codex's
``model_context_window``; Claude Code's 200,000 tokens unless its 1M-context window is recorded (the
model's ``[1m]``) or shown by a prompt past 200,000 answered (Claude Code records the model without
the ``[1m]``: anthropics/claude-code#59376); Gemini CLI's token limit, 1,048,576 for every model it
runs; a file ``compactlab convert`` wrote, as the harness it recorded) > the model's window in
genai-prices > 200,000. Whatever the source, the largest prompt the API answered in the recording
is a lower bound: a call the recording shows answered is never an overflow. A policy's own
``reactive.window_tokens`` sets when its reactive compaction fires (as its harness would), never
the overflow judgement of every run on the same recording.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from typing import Any

from ..plain import NamedTuple
from .cost.pricing import prompt_of

#: the window where neither the user, the recording nor genai-prices names one
DEFAULT_WINDOW = 200_000
#: Claude Code's window unless its 1M-context beta is on (the model name then ends in ``[1m]``)
CLAUDE_CODE_WINDOW = 200_000
LONG_CONTEXT_WINDOW = 1_000_000
#: Gemini CLI's token limit (``tokenLimit`` in its core/tokenLimits.ts: 1,048,576 for each model it
#: lists and its default for any other), which its compression and its overflow check are taken of
GEMINI_CLI_WINDOW = 1_048_576


class Window(NamedTuple):
    """A recording's context window: its size, where it came from, and the recorded facts beside it
    (the largest prompt the API answered; where the harness compacted, if it did)."""

    tokens: int
    source: str
    answered: int = 0
    compacted_at: int | None = None
    #: the window its source names, before the largest prompt answered raised it (0: not raised): what
    #: a harness compacts by (``summary.trigger_rule``), where ``tokens`` is what the API took
    named: int = 0

    @property
    def harness(self) -> int:
        """The window a harness takes its trigger of: the one its source names, not raised."""
        return self.named or self.tokens

    def describe(self) -> str:
        """One line: ``200,000 tokens: Claude Code default; the recording compacted at 167,012``."""
        text = f"{self.tokens:,} tokens: {self.source}"
        if self.compacted_at:
            text += f"; the recording compacted at {self.compacted_at:,}"
        elif self.answered and self.answered < self.tokens:
            text += f"; the largest prompt answered {self.answered:,}"
        return text

    def overflows(self, tokens: int) -> bool:
        return tokens > self.tokens


def answered(usage: Iterable[dict[str, Any]]) -> int:
    """The largest prompt the recording shows answered (0: no usage recorded)."""
    return max(map(prompt_of, usage), default=0)


def _positive(value: Any) -> int | None:
    return value if type(value) is int and value > 0 else None


def resolve(*, given: int | None = None, given_source: str = "--window", fmt: str | None = None,
            model: str | None = None, metadata: Mapping[str, Any] | None = None,
            usage: Iterable[dict[str, Any]] = (), compactions: Iterable[Any] = (),
            configured: tuple[int, str] | None = None) -> Window:
    """The window of one recording (see the module docstring); ``configured``: the window a user's
    price table gives the model, and which table (after ``--window``, before the recording's)."""
    from .cost.prices import known_window

    metadata = metadata or {}
    fmt = metadata.get("recorded_format") or fmt  # (a converted file's harness: its source's window)
    compacted = [c.pre_tokens for c in compactions if _positive(getattr(c, "pre_tokens", None))]
    compacted_at = max(compacted) if compacted else None
    largest, named = answered(usage), 0
    if given:
        tokens, source = given, given_source
    elif configured is not None:
        tokens, source = configured[0], f"{model}'s in {configured[1]}"
    elif (recorded := _positive(metadata.get("model_context_window"))) is not None:
        tokens, source = recorded, "the recording's model_context_window"
    elif fmt == "claude-code":
        if model and model.endswith("[1m]"):
            tokens, source = LONG_CONTEXT_WINDOW, "Claude Code with the 1M-context beta"
        elif CLAUDE_CODE_WINDOW < largest <= LONG_CONTEXT_WINDOW:
            # (Claude Code writes the model without the [1m] it strips, anthropics/claude-code#59376: a
            # prompt past 200,000 answered is the API's 1M window, and Claude Code's with it)
            tokens, source = LONG_CONTEXT_WINDOW, (f"Claude Code with the 1M-context window (a prompt past its default "
                                                   f"{CLAUDE_CODE_WINDOW:,} answered)")
        else:
            tokens, source = CLAUDE_CODE_WINDOW, "Claude Code default"
    elif fmt == "gemini-cli":
        tokens, source = GEMINI_CLI_WINDOW, "Gemini CLI's token limit"
    elif (known := known_window(model.removesuffix("[1m]") if model else model)) is not None:
        tokens, source = known, f"{model}'s in genai-prices"
    else:
        tokens, source = DEFAULT_WINDOW, "default (no window known for the model)"
    if largest > tokens:
        source = f"the largest prompt the recording shows answered ({source}: {tokens:,})"
        tokens, named = largest, tokens
    return Window(tokens, source, largest, compacted_at, named)


def of_recording(transcript: Any, given: int | None = None) -> Window:
    """``resolve`` of a loaded recording (a ``Transcript``) as its audit and tune read it: its
    format, the first model its usage names (else its own), its metadata, usage and compactions
    (``given``: ``--window``). A replay resolves it so too, at its first call, with a window your
    prices file gives the model besides."""
    model = next((u.get("model") for u in transcript.usage.values() if u.get("model")), None) or transcript.model
    return resolve(given=given, fmt=transcript.format, model=model, metadata=transcript.metadata,
                   usage=transcript.usage.values(), compactions=transcript.compactions)
