"""Reading an Anthropic messages file in a second process while the replay runs (SPEC §10).

A streamed replay spends about half its time reading: parsing each line, computing the message's
facts and the raw baseline. On a machine with a second core, a forked reader does that part and
sends the replay, batch by batch, only what it needs: each message's facts, the byte span of its
line, the baseline rows of the calls read, and the recorded compactions. The replay keeps the
file open and parses a line again only when something reads that message's content (a persisted
output, a quoted summary line, a saved transcript): most messages are never parsed in the
replaying process at all, and a tool result a layer replaces is measured from its facts. Both
read the file as it was when it was opened: lines appended meanwhile are not read.

The reader also builds the raw baseline and, unless the probe cache has them, looks for the
hindsight probes as it reads; it sends both with the messages. The probes are checked in the
replaying process (a second process checking them on copies of the replay's contexts cost more
than it saved on the sessions users have: +9.6% instructions on a 5,000-call file, +42% on a
1,000-call one; removed for #44).

Used for a plain (uncompressed) file of at least ``MIN_BYTES``, on a system with ``fork`` and two
cores or more, where the reader has the probes to look for. Where it has none (the probe cache has
them, or the policy cannot lose one) and the native core runs, the file is streamed in the
replaying process with its messages left in the file instead (``stream_lazily``): the reader would
only send the facts the native core reads in this process for less (5,000 calls: 2.15 -> 1.88 G
instructions for ``none``, 4.88 -> 4.56 G for ``s08``, the wall time the same).
A smaller file is streamed or loaded so too, its messages left unread in its bytes held in memory
(``held``: no descriptor is kept for it, as a corpus job holding many transcripts could not keep
one each). ``COMPACTLAB_READ_AHEAD=0`` turns all of these off, ``=1`` forces the reader whatever
the size and ``=lazy`` leaves the messages in the open file whatever the size. The results are
those of the in-process stream, byte for byte (tested).

The pipe (1 MiB) holds a few dozen batches: the reader stays at most that far ahead. A bad line
is reported by the reader as the in-process stream reports it; a replay that stops early (an
error, Ctrl-C) closes the stream, which stops the reader and reaps it. Where the file cannot be
opened again or no process can be forked, ``stream`` gives None and the file is read in-process.
"""

from __future__ import annotations

import io
import os
import signal
import struct
from collections.abc import Iterator
from typing import Any, BinaryIO

import orjson

from ...core import in_use, line_facts
from ..measures.baseline import BaselineBuilder, RawBaseline, stream_baseline
from ...errors import CompactlabError, InputError
from ...plumbing.interrupts import Terminated, exit_status, hold_signals, release_signals
from ...plumbing.lines import BoundedLines, Closed, Late, LineTooLong, framed
from ...plumbing.process import usable_cores
from ...plumbing.files import MAX_BLANK_LINES, compressed, max_line_bytes, open_regular
from ...transcripts.messages import NO_IDS, SIZED_MARK, Entry, Message, ResultFact, json_len
from ...transcripts import anthropic_messages
from ...transcripts.model import Transcript, TranscriptBuilder, TranscriptStream
from ...transcripts.reader import LineReader, reparse, too_long, too_many_blank_lines
from .base import StreamFeed

#: smaller files are read in-process: a second process costs more than it saves
MIN_BYTES = 4 << 20
#: messages per batch sent to the replay
BATCH = 256
#: what a replay reads of the recording's metadata at its first call (the harness a converted file
#: was recorded by and its version, the recording's window), sent with each batch as it is read
FIRST_READ = ("recorded_format", "version", "model_context_window")
PIPE_BYTES = 1 << 20
#: the largest batch the reader may send, and how long the replay waits for one (a reader that
#: hangs ends the replay with an error, never holds it)
FRAME_LIMIT = 1 << 30
FRAME_SECONDS = 600.0


def usable(path: str, forking: bool = True) -> bool:
    """Whether ``path`` is read ahead in a second process (see the module docstring); without
    ``forking``, whether its messages may be left in the file as it is read (``load_lazily``)."""
    setting = os.environ.get("COMPACTLAB_READ_AHEAD", "")
    if (setting == "0" or not hasattr(os, "pread") or (forking and not hasattr(os, "fork"))
            or compressed(path)):
        return False
    try:
        size = os.path.getsize(path)
    except OSError:
        return False
    if size == 0:
        return False
    forced = setting == "1" or (setting == "lazy" and not forking)
    return forced or (size >= MIN_BYTES and (not forking or usable_cores() >= 2))


#: where the tool results' contents stand on their line: ``(block, start, end)`` each, the line's
#: bytes, packed as three little-endian 32-bit numbers (``placed``: a line's are held as long as its
#: message; the native core's facts place them, ``LineFacts.entries``; none placed: ``b""``)
Placed = bytes
PLACED = struct.Struct("<III")


def placed(spans: Placed) -> Iterator[tuple[int, int, int]]:
    """The ``(block, start, end)`` of each result's content a line's ``Placed`` says, in order."""
    return PLACED.iter_unpack(spans)


#: what stands just before a result's content on a line orjson wrote
CONTENT_KEY = b'"content":'
#: ``SourceFile.content_at``'s "not where the facts placed it"
NOT_PLACED = object()


class SourceFile:
    """The transcript file as it was when the stream was opened: a message is parsed again from
    its line when something reads it (``os.pread``: no shared file position, and a file cut
    short meanwhile is an error, not a crash). A small file's bytes are held in memory instead
    (``data``: no descriptor is kept for it, as a corpus job could not keep one for each of its
    files); a source pickled (a transcript sent to a worker) is sent as its bytes, so held."""

    def __init__(self, path: str, file: io.FileIO | None = None, data: bytes | None = None) -> None:
        self.path = path
        #: the file's bytes where they are held (``fd`` is then -1: the native check reads them here)
        self.data = data
        #: the file (``file``: one open already, named ``path`` in what is said of it: the lines a
        #: Claude Code session makes, held in memory by ``claude_code_lazily``)
        self._file = None if data is not None else file if file is not None else open(path, "rb", buffering=0)
        #: the open file's descriptor (the native check reads a line by it: ``os.pread``)
        self.fd = -1 if self._file is None else self._file.fileno()
        self.size = len(data) if data is not None else os.fstat(self.fd).st_size
        #: the blocks of the file the native reader read last (``LineFacts.entries`` keeps them):
        #: the native check cuts the lines it reads again from them (None: not read natively)
        self.recent = native.RecentBlocks() if self._file is not None and (native := in_use()) is not None else None

    def __reduce__(self) -> tuple[Any, ...]:
        return SourceFile, (self.path, None, self.data if self.data is not None else self._line_at(0, self.size))

    def _line_at(self, offset: int, length: int) -> bytes:
        if self.data is not None:
            raw = self.data[offset:offset + length]
        else:
            raw = os.pread(self.fd, length, offset)
        if len(raw) != length:
            raise InputError(f"{self.path}: the file was cut short while it was replayed")
        return raw

    def blocks(self) -> Iterator[tuple[int, bytes, int, int]]:
        """A held file's lines as ``LineReader.blocks`` reads a file's: its whole lines as one
        block, a last line without its break as a block of its own."""
        data = self.data
        assert data is not None
        cut = data.rfind(b"\n") + 1
        if cut:
            yield 0, data, 0, cut
        if cut < len(data):
            yield cut, data[cut:], 0, len(data) - cut

    def _changed(self) -> InputError:
        return InputError(f"{self.path}: the file changed while it was replayed (a line read again is not the "
                          "one read)", hint="replay a copy of a file that is being written")

    def text_at(self, offset: int, length: int) -> str:
        """The line at ``offset``, its line break left out, as text."""
        try:
            return self._line_at(offset, length).decode().removesuffix("\n")
        except UnicodeDecodeError:
            raise self._changed() from None

    def content_at(self, offset: int, start: int, end: int) -> Any:
        """The value at bytes ``start:end`` of the line at ``offset``: a tool result's content
        where the line's facts placed it. ``NOT_PLACED`` where no ``"content":`` stands just
        before it (a line of other spacing: the caller reads the message, which also says whether
        the file changed); a value that no longer parses is the file changed."""
        raw = self._line_at(offset + start - len(CONTENT_KEY), end - start + len(CONTENT_KEY))
        if not raw.startswith(CONTENT_KEY):
            return NOT_PLACED
        try:
            return orjson.loads(memoryview(raw)[len(CONTENT_KEY):])
        except ValueError:
            raise self._changed() from None

    def spliced_at(self, offset: int, length: int, spans: Placed, latest: dict[int, Any]) -> str | None:
        """The line at ``offset`` with the contents of the tool results ``latest`` names (by block)
        written in their places (``spans``: where the line's facts placed each), its line break left
        out: the message so changed as orjson writes it where the line is what orjson wrote of the
        message (the caller's length check says). None where a result named is not placed, or where
        no ``"content":`` stands before it."""
        raw = self._line_at(offset, length)
        pieces: list[bytes] = []
        at = 0
        for block, start, end in placed(spans):
            if block in latest:
                if raw[start - len(CONTENT_KEY):start] != CONTENT_KEY:
                    return None
                pieces += (raw[at:start], orjson.dumps(latest[block]))
                at = end
        if len(pieces) != 2 * len(latest):
            return None
        pieces.append(raw[at:])
        try:
            return b"".join(pieces).decode().removesuffix("\n")
        except UnicodeDecodeError:
            raise self._changed() from None

    def message_at(self, offset: int, length: int, role: str | None = None) -> Message:
        """The message on the line at ``offset``, as it was read (``role``: the one its facts say):
        a line that is no longer one, or no longer that message's, is an error that says the file
        changed, never a crash or another message."""
        raw = self._line_at(offset, length)
        try:
            message = anthropic_messages.message_of(reparse(raw))
        except ValueError:
            message = None
        if message is None or (role is not None and message.get("role") != role):
            raise self._changed()
        return message


class LazyEntry(Entry):
    """An Entry whose message stays where it was read until something reads it: its facts came
    from the reader process; the line is parsed again (``source.message_at``) on first use, with
    the tool-result contents replaced since (``patches``) applied. A tool result a layer replaces
    is measured from its facts, the message still unread. Where its facts placed its results'
    contents on the line (``placed``), the message's compact JSON with those replaced, and an
    unchanged result's content, are read from the line without reading the message."""

    __slots__ = ("_message", "_lazy")

    def __init__(self, chars: int, role: str, origin: int, tool_use_ids: tuple[str, ...], tool_names: tuple[str, ...],
                 use_files: tuple, results: tuple, misplaced: tuple[str, ...], empty: bool, has_text: bool,
                 lazy: tuple["SourceFile", int, int, tuple[tuple[int, Any], ...], Placed], use_set: Any = None,
                 result_set: Any = None, changed: frozenset[int] = frozenset()) -> None:
        super().__init__({}, chars, role, origin, tool_use_ids, tool_names, use_files, results, misplaced, empty,
                         has_text, use_set, result_set, changed)
        self._message: Message | None = None  # unread (the setter took the placeholder above)
        self._lazy = lazy

    @property  # type: ignore[override]
    def message(self) -> Message:
        message = self._message
        if message is None:
            source, offset, length, patches, _ = self._lazy
            message = source.message_at(offset, length, self.role)
            if patches:
                content = list(message["content"])
                for block, new_content in patches:
                    content[block] = {**content[block], "content": new_content}
                message = {**message, "content": content}
            self._message = message
        return message

    @message.setter
    def message(self, value: Message | None) -> None:
        self._message = value

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        """Its slots as they stand, the message unread left unread (``message`` is read through
        the property: a pickled copy, a Dask worker's, reads it from its source's bytes)."""
        return None, {n: getattr(self, n) for n in _STATE if hasattr(self, n)}

    def json_text(self) -> str:
        """The message's compact JSON: its line as it stands, where the message is unread and
        unchanged and the line is what orjson writes of it, else written from the message. The line
        is that where it is as long as the message's compact JSON (``chars``): orjson writes each
        character in its shortest form, so any other spacing, escape or member makes a line longer
        (a sized placeholder, counted as its N, excepted: such a line is written)."""
        if self._message is None:
            source, offset, length, patches, spans = self._lazy
            text = (source.text_at(offset, length) if not patches
                    else source.spliced_at(offset, length, spans, self._patched()) if spans else None)
            if text is not None and len(text) == self.chars and SIZED_MARK not in text:
                return text  # (changed: the changed results' contents written where they stood)
        return super().json_text()

    def _patched(self) -> dict[int, Any]:
        """Left unread: the changed blocks are the patched ones, each with its last patch."""
        return dict(self._lazy[3])

    def changed_contents(self) -> list[Any]:
        if self._message is not None:
            return super().changed_contents()
        latest = self._patched()
        return [latest[b] for b in sorted(latest)]

    def block_content(self, block: int) -> Any:
        if self._message is None:
            latest = self._patched()
            if block in latest:
                return latest[block]
            source, offset, _, _, spans = self._lazy
            for b, start, end in placed(spans):  # (the content alone read from the line)
                if b == block:
                    if (content := source.content_at(offset, start, end)) is not NOT_PLACED:
                        return content
                    break
        return super().block_content(block)

    def with_result_content(self, k: int, new_content: Any) -> Entry:
        fact = self.results[k]
        if self._message is not None or fact.json_size < 0:  # read by now: as any Entry
            return super().with_result_content(k, new_content)
        source, offset, length, patches, spans = self._lazy  # left unread: note the change, measure by facts
        new_json = json_len(new_content)
        return LazyEntry(self.chars - fact.json_size + new_json, self.role, self.origin, self.tool_use_ids,
                         self.tool_names, self.use_files, self.results_with(k, new_content, new_json),
                         self.misplaced_results, self.empty, self.has_text,
                         (source, offset, length, (*patches, (fact.block, new_content)), spans),
                         self._use_set, self._result_set, self.changed | {fact.block})


#: a LazyEntry's slots as pickled: all but ``message``, its property's
_STATE = tuple(n for cls in LazyEntry.__mro__ for n in getattr(cls, "__slots__", ()) if n != "message")


def small(path: str) -> bool:
    """Whether ``path`` is a small plain file whose bytes are held in memory to leave its messages
    unread in them: one that ``usable`` leaves (under ``MIN_BYTES``), unless
    ``COMPACTLAB_READ_AHEAD=0``."""
    if os.environ.get("COMPACTLAB_READ_AHEAD", "") == "0" or compressed(path):
        return False
    try:
        return 0 < os.path.getsize(path) < MIN_BYTES
    except OSError:
        return False


def held(path: str) -> SourceFile | None:
    """The source of a ``small`` file with its bytes held in memory; None elsewhere (and where it
    cannot be read: the loader says why)."""
    if not small(path):
        return None
    try:
        with open_regular(path) as f:
            if not 0 < os.fstat(f.fileno()).st_size < MIN_BYTES:
                return None
            data = f.readall()
    except (OSError, CompactlabError):
        return None
    return SourceFile(path, data=data) if 0 < len(data) < MIN_BYTES else None


def source_of(path: str) -> SourceFile | None:
    """What a transcript read with its messages left unread reads them again from (the native core
    in use): the file, where ``usable`` says so (a big plain file, or ``COMPACTLAB_READ_AHEAD=lazy``),
    else a small plain file's bytes held in memory (``held``); None where neither applies."""
    if in_use() is None:
        return None
    if usable(path, forking=False):
        try:
            return SourceFile(path)
        except OSError:
            return None
    return held(path)


def load_lazily(path: str, skip_bad_lines: bool = False) -> Transcript | None:
    """The Anthropic messages file at ``path`` loaded whole with its messages left unread: each
    line the native core reads is kept as its facts (a ``LazyEntry``), parsed again where something
    reads its message, as the read-ahead feed's are (a file of usage loaded to calibrate on holds
    no message it does not read). None where this does not apply (``source_of``: the native core,
    which reads the facts; a plain file, read again by offset, or a small one's bytes held)."""
    from ...transcripts import load_with

    source = source_of(path)
    if source is None:
        return None

    def load(path: str, *, skip_bad_lines: bool = False, **_: object) -> Transcript:
        builder = TranscriptBuilder(path, anthropic_messages.NAME)
        for _entry in _lazy_entries(builder, source, skip_bad_lines):
            pass
        source.recent = None  # (its replay starts from its first line: the reader's last blocks let go)
        return builder.build(skipped_lines=builder.skipped_lines)

    return load_with(load, path, skip_bad_lines=skip_bad_lines)


def stream_lazily(path: str, skip_bad_lines: bool = False) -> StreamFeed | None:
    """The Anthropic messages file at ``path`` streamed in this process with its messages left in
    the file, as ``load_lazily`` loads one, and its raw baseline (without the probes) built as its
    lines are read: what a stream costs where the reader process would only send the messages'
    facts (no probe to look for), without the pickling and the second process's upkeep. None where
    it does not apply (as ``load_lazily``), or where ``COMPACTLAB_READ_AHEAD=1`` asks for the
    reader process."""
    native = in_use()
    if native is None or os.environ.get("COMPACTLAB_READ_AHEAD", "") == "1" or (source := source_of(path)) is None:
        return None
    builder = TranscriptBuilder(path, anthropic_messages.NAME, keep=False)
    base = RawBaseline(probes_indexed=False)
    entries = _lazy_entries(builder, source, skip_bad_lines, stream_baseline(native, base))
    return StreamFeed(TranscriptStream(builder, entries), baseline=base)


def _lazy_entries(builder: TranscriptBuilder, source: SourceFile, skip_bad_lines: bool,
                  baseline: Any = None, blocks: Iterator[tuple[int, bytes, int, int]] | None = None,
                  max_line: int | None = None) -> Iterator[Entry]:
    """Every message of ``source`` added to ``builder`` (and to ``baseline``, a ``stream_baseline``,
    where one is given) and yielded: the lines the native core reads as their facts (a
    ``LazyEntry``), the lines Python reads with their message. The native core splits the file's
    lines too, a block at a time (``LineFacts.entries``), and a reply's usage, model and time with
    them; each line it leaves (a line or a reply's members it does not read, a blank or long one
    past the limits) is read here as ``iter_raw_lines`` and ``anthropic_messages._read`` read every
    line (their reference). ``blocks``: the file's blocks as ``LineReader.blocks`` gives them, handed in by a
    caller that writes them (``claude_code_lazily``) rather than read back from the file; ``max_line``:
    the longest line it takes (default ``max_line_bytes``)."""
    path = source.path
    reader = LineReader(path, skip_bad_lines=skip_bad_lines, limit=source.size)
    facts = line_facts(ResultFact, True)
    limits = max_line if max_line is not None else max_line_bytes(), MAX_BLANK_LINES
    make = LazyEntry, NO_IDS  # (each LazyEntry made as its __init__ makes one, its `changed` the shared empty set)

    def unread(*found: Any) -> LazyEntry:  # (read natively: its facts; the lines Python reads keep their message)
        offset, length = reader.span  # type: ignore[misc]
        return LazyEntry(*found, (source, offset, length, (), b""))  # type: ignore[call-arg]  # (the ten facts)

    lineno, blank = 1, 0
    if blocks is None:
        blocks = reader.blocks() if source.data is None else source.blocks()
    for at, block, i, stop in blocks:
        while i < stop:
            made, i, lines, blank, got, recorded = facts.entries(block, i, stop, at, builder.count, blank, limits,
                                                                 make, source, baseline)
            lineno += lines
            if made:
                builder.add_entries(made, *recorded)
                yield from made
            if i == stop:
                break
            end = block.find(b"\n", i, stop) + 1 or stop
            raw = block[i:end]
            if len(raw) > limits[0]:
                raise too_long(path, lineno, limits[0])
            if raw.isspace():  # (a blank line past the limit)
                raise too_many_blank_lines(path, lineno)
            blank = 0
            reader.span = (at + i, len(raw))
            if got is None:
                got = facts.read(raw, builder.count)
            if (entry := anthropic_messages.line_entry(builder, reader, lineno, raw, None, got, False, unread,
                                                       True)) is not None:
                if baseline is not None:
                    baseline.add(entry)
                yield entry
            i = end
            lineno += 1
    builder.skipped_lines = reader.skipped


class ReadAheadFeed(StreamFeed):
    """A stream whose messages' facts and baseline rows a forked reader sends."""


def open_feed(path: str, skip_bad_lines: bool, probes: bool = True) -> ReadAheadFeed | None:
    """The Anthropic messages file at ``path`` as a feed whose reading happens in a forked
    process; None if that cannot be had (the caller reads it in-process, and reports what is
    wrong with it). With ``probes``, the reader looks for the hindsight probes as it reads and
    sends them."""
    name = anthropic_messages.NAME
    try:
        source = SourceFile(path)
        r, w = os.pipe()
    except OSError:
        return None
    try:
        import fcntl

        fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError):
        pass  # the default pipe size only means more switches
    held = hold_signals()  # (across the fork: a signal between it and the reader's handling would run the
    try:                   # replay's code in the reader, or leave no reader for the replay to stop)
        pid = os.fork()
    except OSError:  # a process limit
        release_signals(held)
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the reader: never returns
        os.close(r)
        _reader(path, name, skip_bad_lines, source.size, w, probes, held)
    os.close(w)
    release_signals(held)  # (one that came meanwhile is raised here: the reader is the replay's to stop)
    builder = TranscriptBuilder(path, name, keep=False)
    base = RawBaseline(probes_indexed=probes)
    reader = _Reader(pid, os.fdopen(r, "rb", PIPE_BYTES))
    stream = TranscriptStream(builder, _received(builder, base, source, reader), on_close=reader.close, batched=True)
    return ReadAheadFeed(stream, baseline=base)


class _Reader:
    """The replay's end of the reader process: its pipe, and how to stop it."""

    def __init__(self, pid: int, pipe: BinaryIO) -> None:
        self.pid, self.pipe = pid, pipe
        self.done = False  # it sent everything and exits by itself

    def interrupted(self) -> KeyboardInterrupt | None:
        """The interrupt that ended the reader, if one did (it is reaped)."""
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return None
        self.pid = -1
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        return Terminated() if code == exit_status(Terminated()) else KeyboardInterrupt() if code == 130 else None

    def close(self) -> None:
        """Stop the reader unless it is done, and reap it (idempotent)."""
        self.pipe.close()
        if self.pid < 0:
            return
        if not self.done:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.pid = -1


def _reader(path: str, name: str, skip_bad_lines: bool, size: int, fd: int, probes: bool = True,
            held: Any = None) -> None:
    """The forked process: read, send, and exit without running the parent's exit handlers.
    ``held``: the signal mask the parent forked with held back, let through once here where an
    interrupt ends the reader cleanly."""
    code = 0
    try:
        release_signals(held)
        # SIGINT as its parent has it: ignored stays ignored (nohup, a background job); else
        # Ctrl-C raises here too, and the reader exits with INTERRUPTED for the replay to see
        with os.fdopen(fd, "wb", PIPE_BYTES) as out:
            try:
                _read_and_send(path, name, skip_bad_lines, out, size, probes)
            except CompactlabError as exc:
                _send(out, ("error", exc))
            except Exception:
                import traceback

                _send(out, ("crash", traceback.format_exc()))
    except KeyboardInterrupt as exc:  # Ctrl-C (or SIGTERM) to the process group: 130 (143)
        code = exit_status(exc)
    except BaseException:  # the replay stopped reading (a broken pipe) or is gone
        code = 1
    finally:
        os._exit(code)


def _read_and_send(path: str, name: str, skip_bad_lines: bool, out: BinaryIO, size: int | None = None,
                   probes: bool = True) -> None:
    """Read the file (its first ``size`` bytes: what the replay can read again) and send it."""
    from ...transcripts.anthropic_messages import _read

    builder = TranscriptBuilder(path, name, keep=False)
    reader = LineReader(path, skip_bad_lines=skip_bad_lines, limit=size)
    baseline = BaselineBuilder(keep=False, probes=probes, native=in_use())
    base = baseline.base
    rows: list[tuple] = []
    calls = compactions = 0

    def send() -> None:
        nonlocal calls, compactions
        n = len(base.messages)
        base_rows = [(base.messages[c], base.chars[c], base.violation_counts.pop(c, None), base.refs.pop(c, None),
                      baseline.found.pop(c, None)) for c in range(calls, n)]
        # the usage and model read so far go with the batch: the replay's cache rules and window
        # follow the model its first call recorded
        usage = {row[4]: builder.usage[row[4]] for row in rows if row[3] == "assistant" and row[4] in builder.usage}
        _send(out, ("batch", rows, base_rows, builder.compactions[compactions:], usage, builder.model,
                    {k: builder.metadata[k] for k in FIRST_READ if k in builder.metadata}))
        out.flush()  # now: a batch is a few kB, and the replay is waiting for it
        rows.clear()
        calls, compactions = n, len(builder.compactions)

    # (the messages are read only where the probes are looked for: else their facts are all it sends;
    # with them, where each message's results' contents stand on its line: the replay reads a
    # content, or the line with contents replaced, from the file without parsing the message)
    placed: list[bytes] = []
    for e in _read(builder, reader, measure=True, messages=probes, placed=placed):
        baseline.add(e)
        span = reader.span
        assert span is not None
        rows.append((*span, e.chars, e.role, e.origin, e.tool_use_ids, e.tool_names, e.use_files, e.results,
                     e.misplaced_results, e.empty, e.has_text, placed.pop()))
        if len(rows) == BATCH:
            send()
    send()
    meta = {key: getattr(builder, key) for key in ("count", "usage", "metadata", "warnings", "system", "model",
                                                     "title", "session_id")}
    meta["skipped_lines"] = reader.skipped
    _send(out, ("end", meta))


def _send(out: BinaryIO, message: tuple) -> None:
    """One message to the replay, as a frame (``plumbing.lines``: read bounded, by a deadline)."""
    import pickle  # (only where a file is read ahead: not every replay's start)

    out.write(framed(pickle.dumps(message, pickle.HIGHEST_PROTOCOL)))


def _received(builder: TranscriptBuilder, base: Any, source: SourceFile, reader: _Reader) -> Iterator[list[Entry]]:
    """The messages as the reader sends them, a batch of lazy Entries at a time, filling ``base``
    and ``builder``."""
    import pickle

    frames = BoundedLines(reader.pipe.fileno(), FRAME_LIMIT)
    try:
        while True:
            try:  # (what compactlab's own forked reader pickled: a batch of facts, never a file's bytes)
                message = pickle.loads(frames.frame(FRAME_SECONDS))
            except Closed:
                stop = reader.interrupted()
                if stop is not None:  # the same Ctrl-C reached it first: the replay's own is coming
                    raise stop from None
                raise RuntimeError(f"{builder.path}: the read-ahead process ended without a word") from None
            except (Late, LineTooLong) as exc:
                raise InputError(f"{builder.path}: the read-ahead process "
                                 + ("sent nothing whole for " + f"{FRAME_SECONDS:g} s" if isinstance(exc, Late)
                                    else str(exc).replace("wrote a line", "sent a batch")),
                                 hint="COMPACTLAB_READ_AHEAD=0 reads the file in this process") from None
            kind = message[0]
            if kind == "batch":
                _, rows, base_rows, compactions, usage, model, said = message
                builder.metadata.update(said)  # (what the first call reads of the recording, as it is read)
                builder.compactions.extend(compactions)
                builder.usage.update(usage)
                builder.model = builder.model or model
                for messages, chars, counts, refs, probes in base_rows:
                    call = len(base.messages)
                    base.messages.append(messages)
                    base.chars.append(chars)
                    if counts is not None:
                        base.violation_counts[call] = counts
                    if refs is not None:
                        base.refs[call] = refs
                    if probes is not None:
                        base.probes[call] = probes
                builder.count += len(rows)
                yield [LazyEntry(chars, role, origin, use_ids, names, use_files, results, misplaced, empty, has_text,
                                 (source, offset, length, (), spans))
                       for (offset, length, chars, role, origin, use_ids, names, use_files, results, misplaced, empty,
                            has_text, spans) in rows]
            elif kind == "end":
                for key, value in message[1].items():
                    if key == "warnings":  # (after any the replay's side said already)
                        builder.warnings.extend(value)
                    else:
                        setattr(builder, key, value)
                reader.done = True
                return
            elif kind == "error":
                reader.done = True
                raise message[1]
            else:
                raise RuntimeError(f"{builder.path}: the read-ahead process failed:\n{message[1]}")
    finally:
        reader.close()


__all__ = ["MIN_BYTES", "ReadAheadFeed", "SourceFile", "held", "load_lazily", "open_feed", "small", "source_of",
           "stream_lazily", "usable"]
