"""The canonical transcript: API messages (as Entries) plus metadata."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import field
from functools import cached_property
from itertools import islice
from typing import Any

import orjson

from ..errors import InputError
from ..plain import NamedTuple, dataclass, pattern
from ..plumbing.files import COMPRESSED, compressed
from .messages import Entry, Message, ResultFact, add_tool_names, make_entry


#: the token counts of an Anthropic usage object a transcript keeps per call
USAGE_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


class BadField(InputError):
    """A recorded field that no agent writes (a token count that is no count, a list that is
    not a list): the loader reports it as a bad line (file:line) or a bad file, exit 2."""


#: more tokens than any call ever took (1e15): a count past it is damage (2**63, 1e20), not usage
MAX_TOKENS = 10 ** 15


def tokens(raw: dict, key: str, where: str = "usage") -> int:
    """The token count ``raw[key]``: a whole number of at least 0 (absent or null: 0)."""
    value = raw.get(key)
    if value is None:
        return 0
    if type(value) is int and 0 <= value < MAX_TOKENS:
        return value
    if type(value) is float and value.is_integer() and 0 <= value < MAX_TOKENS:
        return int(value)
    if type(value) is str and value.isdigit() and len(value) < 16:
        return int(value)
    import orjson

    try:
        shown = orjson.dumps(value).decode()
    except TypeError:  # (an integer past 64 bits)
        shown = str(value)
    raise BadField(f"{where}.{key} is {shown[:40]}, not a token count")


def object_at(d: dict, key: str) -> dict:
    """``d[key]`` when it is an object (a JSON object of a recording), else an empty one."""
    value = d.get(key)
    return value if isinstance(value, dict) else {}


def epoch_time(created: Any) -> str | None:
    """A response's ``created`` (seconds since the epoch) as an ISO 8601 time, or None."""
    if isinstance(created, (int, float)) and not isinstance(created, bool) and 0 < created < 1e11:
        from datetime import datetime, timezone

        return datetime.fromtimestamp(created, timezone.utc).isoformat()
    return None


#: the model of a recording that names none (a Codex rollout with no turn_context, a SWE-agent
#: trajectory made by its replay model): never another provider's price, unpriced and said so
NO_MODEL = "(no model recorded)"


def anthropic_usage(raw: Any, model: str | None = None, timestamp: Any = None) -> dict[str, Any] | None:
    """A call's recorded usage in the canonical keys: the token counts; of the cache writes, those
    made with a 1-hour TTL (``cache_creation.ephemeral_1h_input_tokens``, billed at another rate)
    as ``cache_creation_1h_input_tokens``; the model of that call and when it was made (ISO 8601),
    where the recording says."""
    if not isinstance(raw, dict):
        return None
    usage: dict[str, Any] = {k: tokens(raw, k) for k in USAGE_KEYS}
    created = raw.get("cache_creation")
    one_hour = created.get("ephemeral_1h_input_tokens") if isinstance(created, dict) else \
        raw.get("cache_creation_1h_input_tokens")
    if isinstance(one_hour, (int, float)) and one_hour > 0:
        usage["cache_creation_1h_input_tokens"] = min(int(one_hour), usage["cache_creation_input_tokens"])
    if isinstance(model, str) and model:
        usage["model"] = model
    if isinstance(timestamp, str) and timestamp:
        usage["timestamp"] = timestamp
    return usage


def leaf_path(items: list[dict], key: str, parent_key: str) -> tuple[list[dict], int]:
    """A tree of records (each naming its parent) as the path from the last one back to the root,
    in order (the branch a harness resumes on), and how many records are off it. A record with
    no id, or a parent not in the file, ends the path."""
    by_id = {r[key]: r for r in items if isinstance(r.get(key), str)}
    path, seen = [], set()
    node: dict | None = items[-1]
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        path.append(node)
        parent = node.get(parent_key)
        node = by_id.get(parent) if isinstance(parent, str) else None
    path.reverse()
    return path, len(items) - len(path)


class Note(str):
    """A loader's remark that is no problem (a transcript's ``warnings`` may hold them): said with
    ``--verbose`` only, where a warning is always said."""


class Positions:
    """Sorted positions, kept as runs ``(start, stop)``: what a condensation keeps is mostly one or
    two runs, however many messages (20,000 condensations each holding every position it kept
    took 1.84 GB for a 10.7 MB log). Immutable (a plain class: a frozen dataclass compiles four
    methods at every start)."""

    __slots__ = ("runs",)
    runs: tuple[tuple[int, int], ...]

    def __init__(self, runs: tuple[tuple[int, int], ...] = ()) -> None:
        object.__setattr__(self, "runs", runs)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Positions are immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Positions are immutable: cannot delete {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Positions, (self.runs,))

    @classmethod
    def of(cls, positions: Iterable[int]) -> "Positions":
        runs: list[tuple[int, int]] = []
        for p in sorted(set(positions)):
            if runs and runs[-1][1] == p:
                runs[-1] = (runs[-1][0], p + 1)
            else:
                runs.append((p, p + 1))
        return cls(tuple(runs))

    def __iter__(self) -> Iterator[int]:
        for start, stop in self.runs:
            yield from range(start, stop)

    def __len__(self) -> int:
        return sum(stop - start for start, stop in self.runs)

    def __bool__(self) -> bool:
        return bool(self.runs)

    def __eq__(self, other: object) -> bool:  # (equal to the tuple of its positions too)
        if isinstance(other, Positions):
            return self.runs == other.runs
        return isinstance(other, tuple) and tuple(self) == other

    def __hash__(self) -> int:
        return hash(tuple(self))


class RecordedCompaction(NamedTuple):
    """A compaction the recording already did (e.g. Claude Code's compact_boundary).

    ``position`` is the index in ``Transcript.entries`` of the first message after the boundary;
    with ``--keep-recorded-compactions`` the replay context restarts there from ``summary``, or,
    where the harness kept some of the earlier messages (an OpenHands condensation keeps the events
    it did not forget), from those messages (``kept``: their positions) with the summary at
    ``summary_at`` among them.
    """

    position: int
    summary: Entry
    trigger: str | None = None
    pre_tokens: int | None = None
    kept: "Positions | tuple[int, ...] | None" = None
    summary_at: int = 0
    #: when it happened, as the recording says (ISO 8601), where it says
    time: str | None = None


@dataclass(eq=False, repr=False)
class Transcript:
    """A loaded transcript: its messages as Entries, and what the recording said about them."""

    path: str
    format: str
    entries: list[Entry]
    title: str | None = None
    session_id: str | None = None
    #: the model of its last reply that names one (every format's loader keeps the latest): what a
    #: call that records none is priced at, and the summarizer's model where none is given
    model: str | None = None
    system: Any = None
    #: recorded API usage per call, keyed by the assistant message's position in ``entries``
    #: (``anthropic_usage``'s keys: token counts, 1-hour cache writes, the call's model)
    usage: dict[int, dict[str, Any]] = field(default_factory=dict)
    compactions: list[RecordedCompaction] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    skipped_lines: int = 0
    #: SHA-256 of the file, when the loader had the bytes anyway; else computed on first use
    known_hash: str = field(default="", repr=False)
    #: the file's stat (``files.stat_stamp``) where it was the same before and after it was loaded
    #: (a line-per-message file's: what was read is what a hash of it with that stat holds)
    stamp: tuple[int, ...] | None = field(default=None, repr=False)

    @property
    def content_hash(self) -> str:
        """What ``check`` compares to tell a changed transcript: the SHA-256 of the file. Of a plain
        file read as it was hashed (``stamp``), the digest remembered for it where one is trusted
        (``plumbing.digests``: the probe cache's key is the same digest), else hashed now."""
        if not self.known_hash:
            from ..plumbing.digests import remembered
            from .reader import file_sha256

            stamp = self.stamp
            known = remembered(self.path, stamp) if stamp is not None and not compressed(self.path) else None
            self.known_hash = known or file_sha256(self.path)
        return self.known_hash

    @property
    def messages(self) -> list[Message]:
        return [e.message for e in self.entries]

    @property
    def source_format(self) -> str:
        """The format the session was recorded in: its own, or, for a file ``compactlab convert``
        wrote, its source's (whose harness's rules and prior apply to it)."""
        return str(self.metadata.get("recorded_format") or self.format)

    @cached_property
    def started_in(self) -> str | None:
        """The folder the session says it was started in, whose project settings override the
        user's (``corpus.harness_settings.PROJECT_FILES``): its loader's ``cwd`` (Qwen Code, goose,
        Pi, Copilot CLI), else a Claude Code session's first record that says (``homes.started_in``,
        read once). None where it does not say, or says a relative folder (not one here)."""
        cwd = self.metadata.get("cwd")
        if isinstance(cwd, str) and cwd:
            return cwd if os.path.isabs(cwd) else None
        if self.format == "claude-code" and self.path:
            from .homes import started_in

            return started_in(self.path)
        return None

    @cached_property
    def call_positions(self) -> list[int]:
        """Positions of the assistant messages: each is one model call."""
        return [i for i, e in enumerate(self.entries) if e.role == "assistant"]

    @cached_property
    def tool_names(self) -> dict[str, str]:
        """tool_use id -> tool name, over the whole recording (policy-independent)."""
        names: dict[str, str] = {}
        for e in self.entries:
            add_tool_names(names, e)
        return names

    @property
    def name(self) -> str:
        return transcript_name(self.path)


def transcript_name(path: str) -> str:
    """The file name without folder, compression suffix and extensions (names output folders)."""
    name = os.path.basename(path.rstrip("/"))
    for suffix in COMPRESSED:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name.split(".")[0] if name else "transcript"


class TranscriptStream:
    """A transcript read while it is replayed (SPEC §10: stream a single replay): ``entries()``
    gives its messages one at a time, ``batches(n)`` a list at a time, and nothing keeps them, so
    memory holds only the working context. The metadata (model, usage, compactions, skipped
    lines, warnings) fills in as the messages are read and is complete once they are exhausted;
    a stream can be walked once.

    ``messages`` yields Entries, or lists of them when ``batched`` (a reader that batches itself:
    its batches are kept as they come).
    """

    def __init__(self, builder: "TranscriptBuilder", messages: Iterator[Any],
                 on_close: Callable[[], None] | None = None, batched: bool = False) -> None:
        self._builder = builder
        self._messages: Iterator[Any] | None = messages
        self._reading = messages
        self._on_close = on_close
        self._batched = batched

    def close(self) -> None:
        """Stop reading (a replay that failed part-way, or never started): the file is closed, a
        reader process stopped."""
        close = getattr(self._reading, "close", None)
        if close is not None:
            close()
        if self._on_close is not None:
            self._on_close()

    def entries(self) -> Iterator[Entry]:
        for batch in self.batches(1):
            yield from batch

    def batches(self, size: int) -> Iterator[list[Entry]]:
        """The messages in lists of ``size`` (or as the reader batches them)."""
        if self._messages is None:
            raise RuntimeError(f"{self.path}: a streamed transcript can be read only once")
        messages, self._messages = self._messages, None
        if self._batched:
            yield from messages
        else:
            while batch := list(islice(messages, size)):
                yield batch
        if not self._builder.count:
            raise InputError(f"{self.path}: no messages in this transcript")

    path = property(lambda self: self._builder.path)
    format = property(lambda self: self._builder.format)
    model = property(lambda self: self._builder.model)
    system = property(lambda self: self._builder.system)
    usage = property(lambda self: self._builder.usage)
    compactions = property(lambda self: self._builder.compactions)
    warnings = property(lambda self: self._builder.warnings)
    skipped_lines = property(lambda self: self._builder.skipped_lines)
    metadata = property(lambda self: self._builder.metadata)
    name = property(lambda self: transcript_name(self._builder.path))


#: what a format's name, or a harness's version, a converted file records may be (``recorded_from``,
#: ``anthropic_messages._recorded_metadata``)
_NAME = pattern(r"[a-z0-9][a-z0-9_-]{0,31}")
VERSION = pattern(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}")


class TranscriptBuilder:
    """Collects messages in order and turns them into a Transcript."""

    def __init__(self, path: str, fmt: str, keep: bool = True) -> None:
        from ..core import line_facts

        #: the native reader of a message's facts where the native core runs (``add``), else None
        self._facts = line_facts(ResultFact, True)  # (measured as it reads: for a result replaced)
        self.path = path
        self.format = fmt
        self.keep = keep  # False: a stream's messages are counted, not kept
        self.count = 0  # messages added: the position of the next one
        self.skipped_lines = 0
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
        """``message`` (a loader's, in the canonical model) added with its facts: read by the native
        core from its compact JSON where it runs and the message is one it reads (the facts of a
        line of Anthropic messages: ``LineFacts.read``), else by ``make_entry``, the reference."""
        facts = self._facts
        if facts is not None:
            try:
                raw = orjson.dumps(message)
            except orjson.JSONEncodeError:
                raw = None  # (what orjson cannot write: make_entry says what is wrong)
            got = facts.read(raw, self.count) if raw is not None else None
            if got is not None and got[1] is None:  # (a message and nothing else: its own facts)
                return self.add_entry(Entry(message, *got[0]), usage)
        return self.add_entry(make_entry(message, self.count), usage)

    def compacted(self, summary: str, trigger: str | None = None, pre_tokens: Any = None, time: Any = None,
                  kept: "Positions | None" = None, summary_at: int = 0) -> None:
        """A compaction the harness recorded here, before the next message: restarting from
        ``summary`` (a user message; with ``kept``, among those messages at ``summary_at``); a
        size that is no positive whole number, or a time that is no text, is not recorded."""
        from .messages import make_entry

        entry = make_entry({"role": "user", "content": summary}, -1_000_000 - len(self.compactions) - 1)
        self.compactions.append(RecordedCompaction(
            position=self.count, summary=entry, trigger=trigger, kept=kept, summary_at=summary_at,
            pre_tokens=pre_tokens if type(pre_tokens) is int and pre_tokens > 0 else None,
            time=time if isinstance(time, str) else None))

    def add_entry(self, entry: Entry, usage: dict | None = None) -> int:
        pos = self.count
        self.count += 1
        if self.keep:
            self.entries.append(entry)
        if usage:
            self.usage[pos] = usage
        return pos

    def add_entries(self, entries: list[Entry], usage: Iterable[tuple[int, dict]] = (), model: str | None = None,
                    recorded_format: str | None = None) -> None:
        """Messages read in order (``add_entry`` of each), with the usage some recorded (each with
        its position), and the last model and recorded format their replies named (None: none)."""
        self.count += len(entries)
        if self.keep:
            self.entries.extend(entries)
        self.usage.update(usage)
        if model is not None:
            self.model = model
        self.recorded_from(recorded_format)

    def recorded_from(self, fmt: Any) -> None:
        """The format a file ``compactlab convert`` wrote was recorded in (its first reply says),
        where it reads as a format's name (anything else, which compactlab never writes, is left
        out: it is shown to a person and compared with the formats' names)."""
        if isinstance(fmt, str) and _NAME.fullmatch(fmt):
            self.metadata["recorded_format"] = fmt

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
