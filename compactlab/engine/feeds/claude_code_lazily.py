"""A big Claude Code session loaded with its messages left unread until something reads them, as a
big Anthropic messages file is (``read_ahead.load_lazily``).

Claude Code writes one reply as several lines (a block each) and a tool's result on a line of its
own, so a message is no line of its file: the loader (``transcripts/claude_code.py``) parsed every
line and kept every message it made (a 5,000-call session of 63 MB: 0.7 s of CPU and 118 MB for
``replay -p s08``, against 0.4 s and 42 MB for the same messages as an Anthropic messages file).
Here the native core reads the session as that loader reads it (``claude_code::read``, that loader
its reference) and writes the messages it makes as the Anthropic messages file of them: a
message a line, each block as it stands on its line (read again from the session, a piece at a
time: the session's bytes are not held), a reply with its recorded usage, model and time. That
file is held in memory (an anonymous file, ``os.memfd_create``: nothing is written anywhere) and
read as a big Anthropic messages file is, each message's facts read natively and the
message left in it. What the loader keeps of the rest (the compactions, the inline subagents'
usage, the lines left out, the version, title and session id) is read as the loader reads it.

It applies where the Anthropic file's lazy loading does (``read_ahead.source_of``): a plain file
of ``read_ahead.MIN_BYTES`` or more (or ``COMPACTLAB_READ_AHEAD=lazy``) on a system with anonymous
files, or a smaller one, whose messages file is held in memory instead (``read_ahead.held``: no
descriptor kept for it; not with ``COMPACTLAB_READ_AHEAD=0``). A session the native reading does
not vouch for (any line the loader would call bad, or reads otherwise: see
``native/src/claude_code.rs``) is loaded by the loader. The transcript is the loader's, message for
message and fact for fact (tested, and replayed alike)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from ...core import in_use
from ...errors import InputError
from ...plumbing.files import MAX_BLANK_LINES, max_line_bytes, open_regular
from ...transcripts import claude_code, load_with
from ...transcripts.model import Transcript, TranscriptBuilder
from .read_ahead import SourceFile, _lazy_entries, small, usable


def applies(path: str) -> bool:
    """Whether the session at ``path`` is loaded so (see the module's docstring)."""
    if in_use() is None:
        return False
    if usable(path, forking=False):
        return hasattr(os, "memfd_create")
    return small(path)  # (its messages file held in memory)


def load_lazily(path: str, skip_bad_lines: bool = False) -> Transcript | None:
    """The Claude Code session at ``path`` loaded with its messages left unread; None where that
    does not apply (``applies``). A session the native reading leaves to the loader is the
    loader's."""
    if not applies(path):
        return None

    def load(path: str, *, skip_bad_lines: bool = False, **_: object) -> Transcript:
        loaded = _load(path, skip_bad_lines)
        return loaded if loaded is not None else claude_code.load(path, skip_bad_lines=skip_bad_lines)

    return load_with(load, path, skip_bad_lines=skip_bad_lines)


def _load(path: str, skip_bad_lines: bool) -> Transcript | None:
    native = in_use()
    assert native is not None  # (``applies``)
    open_regular(path).close()  # (what every input is checked for, and remembered as: no output replaces it)
    try:
        lines = native.claude_code_lines(path, max_line_bytes(), MAX_BLANK_LINES)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if lines is None:
        return None
    if not usable(path, forking=False):
        return _held(path, skip_bad_lines, lines)
    try:  # (a system that makes no anonymous file, or has no memory for one: the loader's)
        held = open(os.memfd_create("compactlab-claude-code", getattr(os, "MFD_CLOEXEC", 0)), "r+b", buffering=0)
    except OSError:
        return None

    def again(read: Callable[[], Any]) -> Any:
        return _again(path, read)

    def blocks() -> Iterator[tuple[int, bytes, int, int]]:
        """Each piece of the messages written, handed on as ``LineReader.blocks`` would read it back
        (whole lines): read by the Anthropic reader as it is written, not read again."""
        at = 0
        while (chunk := again(lines.chunk)) is not None:
            held.write(chunk)  # (an unbuffered file writes it all, or raises)
            yield at, chunk, 0, len(chunk)
            at += len(chunk)

    builder = TranscriptBuilder(path, claude_code.NAME)
    try:
        source = SourceFile(path, held)
        # (a message of many lines may be longer than any of them: the session's lines were held to
        # the reader's limit, the messages they make are not)
        for _entry in _lazy_entries(builder, source, skip_bad_lines, blocks=blocks(), max_line=sys.maxsize):
            pass
        source.recent = None  # (its replay starts from its first message: the last pieces written let go)
        source.size = os.fstat(held.fileno()).st_size  # (its size once written: what a copy of it holds)
        rest = again(lambda: _rest(lines))
    except OSError:  # (no memory for the anonymous file: the loader's)
        held.close()
        return None
    except BaseException:
        held.close()
        raise
    del lines  # (the file it read again: closed)
    rest(builder)
    return builder.build(skipped_lines=builder.skipped_lines)


def _held(path: str, skip_bad_lines: bool, lines: Any) -> Transcript:
    """A small session's messages file held in memory (``SourceFile``'s ``data``), its messages
    left unread in it."""
    chunks = []
    while (chunk := _again(path, lines.chunk)) is not None:
        chunks.append(chunk)
    builder = TranscriptBuilder(path, claude_code.NAME)
    source = SourceFile(path, data=b"".join(chunks))
    for _entry in _lazy_entries(builder, source, skip_bad_lines, max_line=sys.maxsize):
        pass
    rest = _again(path, lambda: _rest(lines))
    del lines  # (the file it read again: closed)
    rest(builder)
    return builder.build(skipped_lines=builder.skipped_lines)


def _again(path: str, read: Callable[[], Any]) -> Any:
    """What the native reading reads again of the session, or the error that says it changed."""
    try:
        return read()
    except OSError as exc:  # (what it read is no longer there: the file changed meanwhile)
        raise InputError(f"{path}: cannot be read again: {exc.strerror or exc}",
                         hint="replay a copy of a file that is being written") from None


def _rest(lines: Any) -> Callable[[TranscriptBuilder], None]:
    """What the loader keeps besides the messages, read as it reads it (``claude_code.load``), to be
    put in the builder once the messages are."""
    version, subagent, sidechain_lines, title, session_id = lines.metadata()
    compactions = [(position, orjson.loads(summary)["message"], orjson.loads(boundary) if boundary is not None else {})
                   for position, summary, boundary in lines.compactions()]
    side: dict[str, dict[str, Any]] = {}
    for reply in lines.sidechain_replies():
        claude_code.sidechain_usage(orjson.loads(reply), side)
    ignored: dict[str, int] = {}
    for kind, transcript_only, n in lines.ignored():
        label = (claude_code.TRANSCRIPT_ONLY if transcript_only
                 else claude_code.ignored_label(orjson.loads(kind) if kind is not None else None))
        ignored[label] = ignored.get(label, 0) + n

    def put(builder: TranscriptBuilder) -> None:
        builder.metadata = {**({"version": version} if version is not None else {}), **builder.metadata}
        builder.title, builder.session_id = title, session_id
        for n, (position, summary, boundary) in enumerate(compactions, 1):
            builder.compactions.append(claude_code.recorded_compaction(summary, boundary, n, position))
        claude_code.finish(builder, subagent, sidechain_lines, side, ignored)

    return put
