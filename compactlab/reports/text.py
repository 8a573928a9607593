"""Text from transcripts made safe for where it is printed or written.

Tool names, tool ids, models, titles, session ids, file and policy names come from files anyone
can write. Before they reach a terminal or a text report, every control character (C0, DEL, C1)
and every bidirectional override is shown as its escape (``\\x1b``, ``\\u202e``) instead of acting
(clearing the screen, moving the cursor, colouring, hiding a link, reordering a line). On top of
that each format has its own rule: Markdown escapes ``& < >`` (GitHub renders it as HTML) and a
cell ``|``; JSON escapes what orjson leaves raw (DEL, C1, bidi overrides); a CSV cell that a spreadsheet
would run as a formula gets a leading ``'``; XML gets no character XML 1.0 forbids.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..core import in_use
from ..plain import pattern
from ..transcripts.messages import SIZED_MARK

# C0 controls, DEL, C1 controls, and the bidi embeddings, overrides and isolates
_CONTROL = pattern("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def visible(text: Any) -> str:
    """``text`` on one line, every control character shown as its escape (and the mark of a sized
    placeholder, ``transcripts.messages.SIZED_MARK``, a noncharacter, left out)."""
    text = text if isinstance(text, str) else str(text)
    if not text.isascii() and SIZED_MARK in text:
        text = text.replace(SIZED_MARK, "")
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def visible_lines(text: str) -> str:
    """Like :func:`visible`, but line breaks stay line breaks (a block of several lines)."""
    return "\n".join(visible(line) for line in text.split("\n"))


_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def columns_of(stream: Any) -> int:
    """The width of the terminal ``stream`` writes to ($COLUMNS first, as shutil reads it; 80 where
    it cannot be told): stderr's own, where stdout goes to a file or a pipe."""
    import shutil

    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return shutil.get_terminal_size().columns


def wrapped(text: str, width: int, indent: str = "", least: int = 40) -> str:
    """``text`` broken between words to ``width`` columns (``least`` at the least), line by line (a
    line's own indentation kept, ``indent`` more on its continuation lines); a word longer than a
    line (a path) is left whole, so that it is copied whole from the terminal that folds it."""
    import textwrap

    width = max(width, least)
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[:len(line) - len(line.lstrip(" "))]
        out.append(textwrap.fill(line, width, subsequent_indent=lead + indent, break_long_words=False,
                                 break_on_hyphens=False))
    return "\n".join(out)


def md_text(text: Any) -> str:
    """Text in Markdown (a report, GitHub's step summary, both rendered as HTML): visible, one
    line, and no tag or entity of its own (``<script>``, ``<img onerror=…>`` show as text)."""
    return visible(text).translate(_HTML)


def md_cell(text: Any) -> str:
    """A Markdown table cell: :func:`md_text` with ``|`` escaped."""
    return md_text(text).replace("|", "\\|")


# in UTF-8: DEL, the C1 controls, the bidi embeddings, overrides and isolates (orjson escapes C0 itself)
_JSON_UNSAFE = pattern(b"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def json_bytes(value: Any, option: int = 0) -> bytes:
    """``value`` as JSON (orjson, with ``option``) in which no character acts on a terminal: DEL,
    C1 controls and bidirectional overrides are ``\\u`` escapes, as orjson writes C0 controls."""
    import orjson

    return json_safe(orjson.dumps(value, option=option))


def json_safe(data: bytes) -> bytes:
    """orjson's ``data`` (a document, or a piece of one cut between two of its tokens) with DEL, the
    C1 controls and the bidirectional overrides as ``\\u`` escapes."""
    # (every byte the pattern looks for is DEL or beyond ASCII: a text of ASCII without DEL, most
    # outputs, is had in two passes in C, not the pattern's search at every byte of a large output)
    if (data.isascii() and b"\x7f" not in data) or _JSON_UNSAFE.search(data) is None:
        return data
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group().decode()):04x}".encode(), data)


def write_json_line(out: Any, value: Any, option: int = 0) -> None:
    """``value`` as :func:`json_bytes` writes it, and a line break, on the text stream ``out``
    (stdout), as :func:`write_json_pieces` writes it."""
    import orjson

    write_json_pieces(out, (orjson.dumps(value, option=option),))


def write_json_pieces(out: Any, pieces: Iterable[bytes]) -> None:
    """One JSON document, written by orjson in ``pieces`` (cut between two tokens: a large one made
    as it is written), each made safe as :func:`json_bytes` makes a document, and a line break, on
    the text stream ``out`` (stdout). The bytes themselves go to its binary buffer where it has one
    and they are its text (its encoding UTF-8, or the document ASCII; a line break its text layer
    would not translate), rather than the document decoded into a string and that joined with the
    line break first (a replay's JSON of 5,000 calls was three copies of 4 MB held at once)."""
    buffer = getattr(out, "buffer", None) if os.linesep == "\n" else None
    encoding = (getattr(out, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    safe: Iterable[bytes] = (json_safe(p) for p in pieces)
    if buffer is not None and encoding != "utf8":
        safe = list(safe)  # (ASCII, or written as text in the stream's encoding: known at the end)
        if not all(p.isascii() for p in safe):
            buffer = None
    if buffer is None:
        for piece in safe:
            out.write(piece.decode("utf-8"))
        out.write("\n")
        return
    out.flush()  # (what was written to it before stays before)
    for piece in safe:
        buffer.write(piece)
    buffer.write(b"\n")


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_bytes(rows: Iterable[Sequence[Any]]) -> bytes:
    """``rows`` as ``csv.writer(out, lineterminator="\\n")`` writes them, in UTF-8: every CSV file
    compactlab writes. The native core's writer where it runs (``native/src/csv_text.rs``: the csv
    module spent a call a character looking for the line's end), else the csv module, the reference."""
    native = in_use()
    if native is not None:
        rows = rows if isinstance(rows, list) else list(rows)
        made = native.csv_rows(rows)
        if made is not None:
            return made
    import csv  # (only where a table is written)

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode("utf-8")


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run: text starting with ``= + - @`` (or a tab or CR)
    gets a leading ``'`` (OWASP's advice); numbers are left alone."""
    if not isinstance(value, str):
        return value
    return "'" + visible(value) if value.startswith(_FORMULA) else visible(value)
