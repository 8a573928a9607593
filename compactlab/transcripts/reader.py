"""Reading transcript files line by line: the bad-input rules of SPEC §2.

Files are opened read-only and read with a 1 MiB buffer; lines are split on ``\\n`` only (never
``str.splitlines``, which also splits on U+2028 inside strings); invalid UTF-8 is decoded with
replacement. Every bad line becomes a ``BadLineError`` naming the file and physical line, or is
skipped and counted when the caller asks for that.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

import orjson

from ..core import in_use
from ..errors import BadLineError, InputError
from ..plain import dataclass
from ..plumbing.digests import Digest, remembered
from ..plumbing.sha256 import hex_of
from ..plumbing.files import (MAX_BLANK_LINES, compressed, max_document_bytes, max_line_bytes, open_regular,
                              stat_stamp, zst_problem)
from .messages import build_entry


class UnknownFormat(InputError):
    """A file whose content fits no known format (a folder's README, a harness's own log): of
    several inputs, skipped and counted."""

BUFFER = 1 << 20
#: the piece of a file ``LineReader.blocks`` reads at a time: each piece is a new ``bytes``, and a
#: 1 MiB one each time is memory the allocator maps afresh (a replay of 55 MB kept every message:
#: 7,200 page faults with 1 MiB pieces, 6,100 with 256 KiB ones; 226 against 213 ms of CPU, 30
#: interleaved runs), where a piece of 256 KiB is the same memory again. (A line a piece cuts goes
#: on in the next, which the native core's ``read_on`` makes of that line's bytes copied and the
#: rest read after them: the bench's 55 MB file is read once, where reading each cut line again
#: read 9 MB more, and pieces joined in Python copied 16 MB more.)
BLOCK = 1 << 18
#: what the reading of a file's head (``peek``, ``read_head``) asks of it at a time: its first lines
#: are usually a small part of 1 MiB (the head of the bench's 55 MB file, 64 lines, is 350 KB), and
#: each 1 MiB read was a fresh buffer to fault in and copy (two of them: about 3 ms and 740 page
#: faults of a replay's start)
HEAD_BUFFER = 1 << 16
MAX_DEPTH = 200


def open_checked(path: str, buffer: int = BUFFER) -> BinaryIO:
    """Open an input for buffered binary reading (read-only, a regular file only), decompressing
    ``.gz`` and ``.zst`` as a stream; OS problems become one-line errors. ``buffer``: the bytes read
    from the file (or the decompressor) at a time."""
    f = open_regular(path)
    if path.endswith(".gz"):
        import gzip

        return gzip.GzipFile(fileobj=io.BufferedReader(f, buffer), mode="rb")  # type: ignore[return-value]
    if path.endswith(".zst"):
        try:
            import zstandard
        except ImportError:
            f.close()
            raise InputError(f"{path}: reading .zst needs the zstandard package",
                             hint="pip install 'compactlab[zstd]'") from None
        try:
            problem = zst_problem(f)
        except OSError as exc:
            f.close()
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
        if problem is not None:
            f.close()
            raise InputError(f"{path}: not a whole zstd file: {problem}")
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(f, closefd=True, read_across_frames=True),
                                 buffer)
    return io.BufferedReader(f, buffer)


@contextmanager
def _reading(path: str) -> Iterator[None]:
    """Read errors, a truncated or corrupt compressed stream among them, as one-line errors."""
    try:
        yield
    except (OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read: {exc or type(exc).__name__}") from None
    except Exception as exc:
        if type(exc).__name__ == "ZstdError":  # zstandard's own error type
            raise InputError(f"{path}: cannot read: {exc}") from None
        raise


def iter_raw_lines(path: str, offset: int = 0, first: int = 1, buffer: int = BUFFER) -> Iterator[tuple[int, bytes]]:
    """(physical line number, raw bytes) for every line, streaming, from byte ``offset`` (an
    uncompressed file) whose line is number ``first``. Lines split on ``\\n`` only (never on
    U+2028 or a lone ``\\r``), in C. A line longer than ``max_line_bytes`` (decompressed) or more
    than ``MAX_BLANK_LINES`` blank lines in a row end the reading with an error: what a
    decompression bomb looks like, never a transcript. ``buffer``: the bytes read at a time (a
    caller that reads a few lines asks fewer than the 1 MiB a whole file's reading does)."""
    f = open_checked(path, buffer)
    limit = max_line_bytes()
    blank = 0
    try:
        with _reading(path):
            if offset:
                f.seek(offset)
            readline = f.readline
            lineno = first
            piece = min(limit + 1, BUFFER)
            while raw := readline(piece):
                if len(raw) == piece and raw[-1] != 10:  # a long line: read on in pieces, counted
                    raw = _long_line(path, lineno, raw, readline, limit)
                if len(raw) > limit:
                    raise too_long(path, lineno, limit)
                if raw.isspace():
                    blank += 1
                    if blank > MAX_BLANK_LINES:
                        raise too_many_blank_lines(path, lineno)
                else:
                    blank = 0
                yield lineno, raw
                lineno += 1
    finally:
        f.close()


def too_many_blank_lines(path: str, lineno: int) -> InputError:
    return InputError(f"{path}:{lineno}: more than {MAX_BLANK_LINES:,} blank lines in a row: not a transcript")


def too_long(path: str, lineno: int, limit: int) -> InputError:
    return InputError(f"{path}:{lineno}: a line longer than {limit >> 20} MiB (decompressed): not a transcript line",
                      hint="COMPACTLAB_MAX_LINE_MB raises the limit")


def _long_line(path: str, lineno: int, start: bytes, readline: Callable[[int], bytes], limit: int) -> bytes:
    """The rest of a line that filled a whole piece, refused as soon as its decompressed bytes
    pass ``limit``: before the pieces are joined (a bomb's line never needs twice its size)."""
    pieces, size = [start], len(start)
    while size <= limit:
        more = readline(BUFFER)
        if not more:
            break
        pieces.append(more)
        size += len(more)
        if more[-1] == 10:
            break
    if size > limit:
        pieces.clear()
        raise too_long(path, lineno, limit)
    return b"".join(pieces)


def file_sha256(path: str) -> str:
    """SHA-256 of a file's bytes (decompressed for .gz): what ``check`` calls its content."""
    import hashlib

    h = hashlib.sha256()
    f = open_checked(path)
    try:
        with _reading(path):
            while chunk := f.read(BUFFER):
                h.update(chunk)
    finally:
        f.close()
    return h.hexdigest()


def _depth_exceeds(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            return True
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values() if isinstance(x, (dict, list)))
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return False


def _brackets(raw: bytes) -> int:
    """How many ``{`` and ``[`` a line holds (the native core's ``brackets`` counts them as this
    does, by memchr: CPython's ``count`` reads a byte at a time)."""
    return raw.count(b"{") + raw.count(b"[")


def bracket_counter() -> Callable[[bytes], int]:
    """How ``parse_object`` counts a line's brackets: natively where the native core runs, else
    ``_brackets`` (its reference). A caller that parses many lines asks once."""
    native = in_use()
    return native.brackets if native is not None else _brackets


def parse_object(raw: bytes, check_depth: bool = True, brackets: Callable[[bytes], int] | None = None) -> dict:
    """Parse one line into a JSON object or raise ValueError with the reason.

    ``check_depth=False`` when the caller checks nesting itself where it can hide (message
    blocks), which spares counting brackets over every byte of every line. ``brackets``: how they
    are counted (``bracket_counter``'s, asked here where it is not given)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if not raw.strip(b"\x00 \t\r\n"):
            raise ValueError("NUL bytes (a file cut short by a crash?)") from None
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:  # invalid UTF-8 is not an error: decode with replacement
            try:
                value = orjson.loads(raw.decode("utf-8", errors="replace"))
            except orjson.JSONDecodeError as exc2:
                raise ValueError(f"invalid JSON: {exc2}") from None
        else:
            raise ValueError(f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        kind = "null" if value is None else type(value).__name__
        raise ValueError(f"not a JSON object (a {kind})")
    # orjson stops at 1024 levels itself; SPEC allows 200. Count brackets first (fast, in C).
    if check_depth and (brackets or bracket_counter())(raw) > MAX_DEPTH and _depth_exceeds(value, MAX_DEPTH):
        raise ValueError(f"nesting deeper than {MAX_DEPTH} levels")
    return value


def reparse(raw: bytes) -> dict:
    """A line that ``LineReader.objects`` yielded, parsed again as it was then."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = None
    return value if type(value) is dict else parse_object(raw, check_depth=False)


def message_problem(message: dict) -> str | None:
    """Why ``message`` is not a usable API message, or None."""
    problem = build_entry(message, 0, check=True, facts=False)
    return problem if isinstance(problem, str) else None


class Head:
    """The first lines of a JSONL file as format detection parsed them, kept for the loader: a
    session file is often only a few times longer than what detection reads, and parsing those
    lines twice cost a folder of small sessions an eighth of its replay time."""

    __slots__ = ("lines", "end", "offset")

    def __init__(self, lines: list[tuple[int, bytes, dict | None]], end: int, offset: int | None) -> None:
        self.lines = lines  # (line number, raw, the object; None: not one)
        self.end = end  # number of the last line read
        self.offset = offset  # byte offset after it; None for a compressed stream (read again)

    @property
    def objects(self) -> list[dict]:
        return [obj for _, _, obj in self.lines if obj is not None]


def _read_on(file: BinaryIO, kept: bytes, start: int, want: int, at: int) -> bytes:
    """What ``LineReader.blocks`` reads next: ``kept`` from ``start``, then up to ``want`` bytes of
    ``file`` from ``at`` (where ``kept`` ends in it), fewer where the file ends. The reference of the
    native core's ``read_on``, which makes the one bytes object of both in place; here they are
    joined, a copy of the whole piece (the Python engine reads a file's lines with ``lines``)."""
    return kept[start:] + os.pread(file.fileno(), want, at)


@dataclass(eq=False, repr=False)
class LineReader:
    """Iterates parsed objects of a JSONL file, applying the bad-line policy. With the ``head``
    detection read, its lines are not read or parsed again."""

    path: str
    skip_bad_lines: bool = False
    skipped: int = 0
    head: Head | None = None
    #: (byte offset, length) of the line last yielded, read without a head from an uncompressed
    #: file; what the read-ahead process tells the replay so that it can parse the line again
    span: tuple[int, int] | None = None
    #: with spans: read up to this byte (a file read as it was when its size was taken, though it grows)
    limit: int | None = None

    def bad(self, lineno: int, reason: str) -> None:
        if not self.skip_bad_lines:
            raise BadLineError(self.path, lineno, reason)
        self.skipped += 1

    def objects(self, check_depth: bool = True) -> Iterator[tuple[int, dict]]:
        """(physical line number, object) of every non-blank line. The usual line, a JSON object
        needing no depth check, takes one orjson call; anything else goes through parse_object."""
        parse, brackets = self.parse, bracket_counter()
        for lineno, raw, value in self.lines():
            if value is None and (value := parse(lineno, raw, check_depth, brackets)) is None:
                continue
            yield lineno, value

    def lines(self) -> Iterator[tuple[int, bytes, dict | None]]:
        """(physical line number, raw bytes, object) of every non-blank line: the object detection
        parsed (the head's lines), else None (``parse`` reads it; the caller may read the bytes
        first). ``span`` is the line's while it is handed on."""
        offset, first = 0, 1
        head = self.head
        if head is not None and head.offset is not None:
            # (a head line's None: not an object with detection's depth check; parsed as the caller checks)
            yield from head.lines
            offset, first = head.offset, head.end + 1
        at = offset if head is None else -1  # lines read by detection are not counted: no spans
        limit = self.limit
        for lineno, raw in iter_raw_lines(self.path, offset, first):
            if at >= 0:
                if limit is not None and at + len(raw) > limit:
                    raw = raw[: limit - at]
                    if not raw:
                        break
                self.span = (at, len(raw))
                at += len(raw)
            if raw.isspace():  # a blank line (no copy, unlike raw.strip())
                continue
            yield lineno, raw, None

    def blocks(self) -> Iterator[tuple[int, bytes, int, int]]:
        """The lines of an uncompressed file up to ``limit``, a block of whole lines at a time
        (about ``BLOCK``): (the byte offset of ``data``, ``data``, where in it the block starts,
        where it ends). What a reader that splits the lines itself is given. Each piece starts
        where the last one's last whole line ended: the line a piece cut goes on in the next, read
        once (``read_on``), and a line longer than a piece is read on into one twice as long, then
        twice again. Only the file's last line may lack its line break, or a line longer than a
        line may be (``max_line_bytes``): that one comes as a block of its own, more bytes of it
        than that, and nothing after it (the caller, which counts the lines, says which line is too
        long)."""
        longest = max_line_bytes()
        stop = self.limit  # (None: to the file's end)
        at = 0  # the offset of the next piece: a line's start
        size = BLOCK
        kept, cut = b"", 0  # (the last piece, and where its cut line starts: what the next goes on from)
        native = in_use()
        read = native.read_on if native is not None else _read_on
        f = open_regular(self.path)
        try:
            with _reading(self.path):
                while (want := size if stop is None else min(size, stop - at)) > 0:
                    carried = len(kept) - cut  # (read already: what the next piece starts with)
                    more = read(f, kept, cut, want - carried, at + carried) if want > carried else \
                        kept[cut:cut + want]
                    if not more:
                        return
                    end = more.rfind(b"\n") + 1
                    if end:
                        yield at, more, 0, end
                        at += end
                        size = BLOCK
                        kept, cut = more, end
                    elif len(more) < size or len(more) > longest:  # the last line, or one too long
                        yield at, more, 0, len(more)
                        return
                    else:  # (a line longer than the piece: read on, in a longer one)
                        kept, cut, size = more, 0, min(2 * size, longest + 1)
        finally:
            f.close()

    def parse(self, lineno: int, raw: bytes, check_depth: bool = True,
              brackets: Callable[[bytes], int] | None = None) -> dict | None:
        """The object on a line, or None once the bad-line policy has dealt with it (``check_depth``
        False: one orjson call for the usual line; ``brackets``: as ``parse_object`` counts them)."""
        if not check_depth:
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                pass
            else:
                if type(value) is dict:
                    return value
        try:  # (anything else: parse_object says what is wrong with it)
            return parse_object(raw, check_depth, brackets)
        except ValueError as exc:
            self.bad(lineno, str(exc))
            return None


def read_head(path: str, limit: int = 64) -> Head:
    """The first ``limit`` non-blank lines, parsed (bad lines are the loader's business).

    Empty, or none of them a JSON object: an error that says what was wrong with the first line."""
    lines: list[tuple[int, bytes, dict | None]] = []
    offset = end = 0
    first_problem: str | None = None
    brackets = bracket_counter()
    for end, raw in iter_raw_lines(path, buffer=HEAD_BUFFER):
        offset += len(raw)
        if raw.isspace():
            continue
        try:
            lines.append((end, raw, parse_object(raw, brackets=brackets)))
        except ValueError as exc:
            lines.append((end, raw, None))
            first_problem = first_problem or f"line {end}: {exc}"
        if len(lines) >= limit:
            break
    if not lines:
        raise InputError(f"{path}: empty file, no transcript lines")
    head = Head(lines, end, None if compressed(path) else offset)
    if not head.objects:
        raise UnknownFormat(f"{path}: not a transcript: none of its first lines is a JSON object ({first_problem})")
    return head


#: how much of a JSON document is read at a time (16 MiB)
DOCUMENT_PART = 1 << 24


def read_document(path: str) -> tuple[Any, str]:
    """A whole-file JSON document (a trajectory) and the SHA-256 of its bytes (the one remembered
    for a plain file read at the stat it was hashed at, ``plumbing.digests``); a file:line error
    when it does not parse."""
    f = open_checked(path)
    cap = max_document_bytes()
    chunks: list[bytes] = []
    total = 0
    # (a plain file read at one stat: its digest may be remembered, ``plumbing.digests``)
    plain = not compressed(path)
    before = after = None
    at = time.time_ns()
    try:
        with _reading(path):
            if plain:
                before = stat_stamp(os.fstat(f.fileno()))
            # a part at a time, never the cap at once (f.read(cap + 1) would ask for a GiB before
            # reading a byte); a file that does not start as JSON is refused at its first part
            while total <= cap:
                chunk = f.read(min(DOCUMENT_PART, cap + 1 - total))
                if not chunk:
                    break
                if not chunks and chunk.lstrip()[:1] not in (b"{", b"[", b""):
                    raise BadLineError(path, 1, "invalid JSON document: it does not start with { or [")
                chunks.append(chunk)
                total += len(chunk)
            if plain:
                after = stat_stamp(os.fstat(f.fileno()))
    finally:
        f.close()
    raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    del chunks
    if len(raw) > cap:
        raise InputError(f"{path}: a JSON document larger than {cap >> 20} MiB (decompressed)",
                         hint="COMPACTLAB_MAX_DOCUMENT_MB raises the limit")
    if not raw.strip():
        raise InputError(f"{path}: empty file, no transcript")
    stamp = before if before is not None and before == after else None
    sha = Digest((remembered(path, stamp) if stamp is not None else None) or hex_of(raw), stamp,
                 at)
    try:
        return orjson.loads(raw), sha
    except orjson.JSONDecodeError as exc:
        if "utf-8" in str(exc.msg).lower():  # (only bad UTF-8 is worth a second, replacing, parse)
            try:
                return orjson.loads(raw.decode("utf-8", errors="replace")), sha
            except orjson.JSONDecodeError:
                pass
        line = raw[: exc.pos].count(b"\n") + 1 if isinstance(exc.pos, int) else 1
        raise BadLineError(path, line, f"invalid JSON document: {exc.msg}") from None


def peek(path: str, limit: int = 65536) -> bytes:
    """The first bytes of a file (decompressed), to tell a JSON document from JSON lines."""
    f = open_checked(path, limit)
    try:
        with _reading(path):
            return f.read(limit)
    finally:
        f.close()


def is_document(path: str) -> bool:
    """A JSON document (a list, or an object spread over lines) rather than JSON lines."""
    head = peek(path).lstrip()
    if head[:1] == b"[":
        return True
    if head[:1] != b"{":
        return False
    first, _, rest = head.partition(b"\n")
    first = first.strip()
    if first == b"{":
        return True  # an indented document
    try:
        obj = orjson.loads(first.decode("utf-8", errors="replace"))
    except orjson.JSONDecodeError:
        return False  # a broken first line of a JSONL file: the bad-line rules apply
    # one object on one line: a document only when it holds a conversation list
    return not rest.strip() and isinstance(obj, dict) and any(isinstance(obj.get(k), list) for k in ("messages", "history"))
