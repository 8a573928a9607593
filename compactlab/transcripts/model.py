"""The canonical transcript: API messages (as Entries) plus metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..messages import Entry, Message, make_entry


@dataclass(frozen=True, slots=True)
class RecordedCompaction:
    """A compaction the recording already did (e.g. Claude Code's compact_boundary).

    ``position`` is the index in ``Transcript.entries`` of the first message after the boundary;
    with ``--keep-recorded-compactions`` the replay context restarts there from ``summary``.
    """

    position: int
    summary: Entry
    trigger: str | None = None
    pre_tokens: int | None = None


@dataclass
class Transcript:
    path: str
    format: str
    entries: list[Entry]
    title: str | None = None
    session_id: str | None = None
    model: str | None = None
    system: Any = None
    #: recorded API usage per call, keyed by the assistant message's position in ``entries``
    usage: dict[int, dict[str, int]] = field(default_factory=dict)
    compactions: list[RecordedCompaction] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    skipped_lines: int = 0
    #: SHA-256 of the file, when the loader had the bytes anyway; else computed on first use
    known_hash: str = field(default="", repr=False)
    #: the policy-independent raw baseline, computed on first use (``baseline.baseline_for``)
    raw_baseline: Any = field(default=None, repr=False, compare=False)

    @property
    def content_hash(self) -> str:
        """What ``check`` compares to tell a changed transcript: the SHA-256 of the file."""
        if not self.known_hash:
            from .reader import file_sha256

            self.known_hash = file_sha256(self.path)
        return self.known_hash

    @property
    def messages(self) -> list[Message]:
        return [e.message for e in self.entries]

    @cached_property
    def call_positions(self) -> list[int]:
        """Positions of the assistant messages: each is one model call."""
        return [i for i, e in enumerate(self.entries) if e.role == "assistant"]

    @cached_property
    def tool_names(self) -> dict[str, str]:
        """tool_use id -> tool name, over the whole recording (policy-independent)."""
        names: dict[str, str] = {}
        for e in self.entries:
            if e.tool_use_ids:
                for b in e.message["content"]:
                    if isinstance(b, dict) and b.get("type") == "tool_use":
                        names[b["id"]] = b.get("name", "")
        return names

    @property
    def name(self) -> str:
        from pathlib import Path

        p = Path(self.path)
        for suffix in (".gz", ".zst"):
            if p.name.endswith(suffix):
                p = p.with_name(p.name[: -len(suffix)])
        return p.name.split(".")[0] if p.name else "transcript"


class TranscriptBuilder:
    """Collects messages in order and turns them into a Transcript."""

    def __init__(self, path: str, fmt: str) -> None:
        self.path = path
        self.format = fmt
        self.entries: list[Entry] = []
        self.usage: dict[int, dict[str, int]] = {}
        self.compactions: list[RecordedCompaction] = []
        self.metadata: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.system: Any = None
        self.model: str | None = None
        self.title: str | None = None
        self.session_id: str | None = None

    def add(self, message: Message, usage: dict | None = None) -> int:
        return self.add_entry(make_entry(message, len(self.entries)), usage)

    def add_entry(self, entry: Entry, usage: dict | None = None) -> int:
        pos = len(self.entries)
        self.entries.append(entry)
        if usage:
            self.usage[pos] = usage
        return pos

    def build(self, skipped_lines: int = 0, content_hash: str = "") -> Transcript:
        """The transcript; ``content_hash`` when the loader already has it (else computed lazily)."""
        return Transcript(
            path=self.path,
            format=self.format,
            entries=self.entries,
            title=self.title,
            session_id=self.session_id,
            model=self.model,
            system=self.system,
            usage=self.usage,
            compactions=self.compactions,
            metadata=self.metadata,
            warnings=self.warnings,
            skipped_lines=skipped_lines,
            known_hash=content_hash,
        )
