"""Text from transcripts made safe for where it is printed or written.

Tool names, tool ids, models, titles, session ids, file and policy names come from files anyone
can write. Before they reach a terminal or a text report, every control character (C0, DEL, C1)
and every bidirectional override is shown as its escape (``\\x1b``, ``\\u202e``) instead of acting
(clearing the screen, moving the cursor, colouring, hiding a link, reordering a line). On top of
that each format has its own rule: a Markdown cell escapes ``|``; a CSV cell that a spreadsheet
would run as a formula gets a leading ``'``; XML gets no character XML 1.0 forbids.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls, DEL, C1 controls, and the bidi embeddings, overrides and isolates
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def visible(text: Any) -> str:
    """``text`` on one line, every control character shown as its escape."""
    text = text if isinstance(text, str) else str(text)
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def visible_lines(text: str) -> str:
    """Like :func:`visible`, but line breaks stay line breaks (a block of several lines)."""
    return "\n".join(visible(line) for line in text.split("\n"))


def md_cell(text: Any) -> str:
    """A Markdown table cell: visible, one line, ``|`` escaped."""
    return visible(text).replace("|", "\\|")


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run: text starting with ``= + - @`` (or a tab or CR)
    gets a leading ``'`` (OWASP's advice); numbers are left alone."""
    if not isinstance(value, str):
        return value
    return "'" + visible(value) if value.startswith(_FORMULA) else visible(value)
