"""The feeds' protocol and the two in-process feeds (see the package's docstring)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from ...core import in_use
from ..measures.baseline import BaselineBuilder, RawBaseline, baseline_for
from ..memo import memo_of
from ...transcripts.messages import Entry
from ...transcripts import RecordedCompaction, Transcript, TranscriptStream

#: messages a stream reads ahead of the replay
READ_BATCH = 256
#: one call: (call number, position of its assistant message, the messages since the previous
#: call's, that assistant message)
Call = tuple[int, int, list[Entry], Entry]
Restarts = dict[int, RecordedCompaction]


class Feed(Protocol):
    #: whether messages are let go once read (the raw baseline's references go with them)
    streamed: bool
    #: the raw baseline: a row for every call read so far
    baseline: RawBaseline
    #: what the engine works out once of the recording for every run of it (``memo.memo_of``)
    memo: dict[Any, Any]

    # what the recording says of itself (read-only)
    @property
    def path(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def model(self) -> str | None: ...
    @property
    def system(self) -> Any: ...
    @property
    def usage(self) -> dict[int, dict[str, Any]]: ...
    @property
    def compactions(self) -> list[RecordedCompaction]: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def skipped_lines(self) -> int: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def entries(self) -> list[Entry] | None:
        """Every message, for a loaded transcript (exact token counts need the raw history); else None."""

    def call_batches(self, restarts: Restarts | None) -> Iterator[list[Call]]:
        """The calls in order, a batch at a time (a stream's: those of the messages it read together;
        a message's facts, the recording's usage and compactions, are known for the whole batch
        before its first call is replayed); a stream also fills ``restarts`` with the recorded
        compactions as it reads them."""

    def close(self) -> None: ...


class _Recording:
    """The metadata of the transcript or stream a feed reads."""

    def __init__(self, source: Transcript | TranscriptStream) -> None:
        self.source = source

    path = property(lambda self: self.source.path)
    format = property(lambda self: self.source.format)
    name = property(lambda self: self.source.name)
    model = property(lambda self: self.source.model)
    system = property(lambda self: self.source.system)
    usage = property(lambda self: self.source.usage)
    compactions = property(lambda self: self.source.compactions)
    warnings = property(lambda self: self.source.warnings)
    skipped_lines = property(lambda self: self.source.skipped_lines)
    metadata = property(lambda self: self.source.metadata)


class LoadedFeed(_Recording):
    streamed = False

    def __init__(self, transcript: Transcript, probes: bool = True) -> None:
        super().__init__(transcript)
        self.transcript = transcript
        self.baseline = baseline_for(transcript, probes)
        self.entries: list[Entry] = transcript.entries
        self.memo = memo_of(transcript).runs  # (every run of the transcript shares it)

    def call_batches(self, restarts: Restarts | None) -> Iterator[list[Call]]:
        entries = self.entries
        done = 0
        batch: list[Call] = []
        for call, pos in enumerate(self.transcript.call_positions):
            batch.append((call, pos, entries[done:pos], entries[pos]))
            done = pos + 1
            if len(batch) == READ_BATCH:
                yield batch
                batch = []
        if batch:
            yield batch

    def close(self) -> None:
        pass


class StreamFeed(_Recording):
    """A stream read as it is replayed; its baseline built here, unless ``baseline`` comes with it."""

    streamed = True
    entries = None
    #: the probe cache's key, when this stream's probes are to be stored once it is read to the end
    probe_key: str | None = None

    def __init__(self, stream: TranscriptStream, baseline: RawBaseline | None = None, probes: bool = True) -> None:
        super().__init__(stream)
        self.stream = stream
        self.memo: dict[Any, Any] = {}  # (as a loaded one's ``memo_of(t).runs``: a stream is replayed once)
        self._builder: BaselineBuilder | None = None
        if baseline is None:
            self._builder = BaselineBuilder(keep=False, probes=probes, native=in_use())
            baseline = self._builder.base
        self.baseline = baseline

    def call_batches(self, restarts: Restarts | None) -> Iterator[list[Call]]:
        """Read to the end: a bad line after the last call fails the run as it fails a load."""
        base = self._builder
        pending: list[Entry] = []
        call = pos = seen = 0
        compactions = self.source.compactions
        # read a batch, then replay it: alternating message by message is slower (6% of an s08
        # run on 55 MB), and a batch holds only a few hundred messages more in memory
        for batch in self.stream.batches(READ_BATCH):
            calls: list[Call] = []
            for entry in batch:
                if base is not None:
                    base.add(entry)
                while restarts is not None and seen < len(compactions) and compactions[seen].position == pos:
                    restarts[pos] = compactions[seen]  # recorded just before this message
                    seen += 1
                if entry.role == "assistant":
                    calls.append((call, pos, pending, entry))
                    call += 1
                    pending = []
                else:
                    pending.append(entry)
                pos += 1
            if calls:
                yield calls
        if self.probe_key is not None:
            from ..measures import probe_cache

            probe_cache.save(self.probe_key, self.baseline.probes)

    def close(self) -> None:
        self.stream.close()


def as_feed(source: Feed | Transcript | TranscriptStream, probes: bool = True) -> Feed:
    """A feed of a loaded transcript or an (in-process) stream; a feed as it is (``probes`` False:
    a baseline without the hindsight probes, for a run that cannot lose one)."""
    if isinstance(source, Transcript):
        return LoadedFeed(source, probes)
    if isinstance(source, TranscriptStream):
        return StreamFeed(source, probes=probes)
    return source
