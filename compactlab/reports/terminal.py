"""The rich console every terminal writer uses (rich is imported only when a table is drawn)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console

#: width when stdout is a file or a pipe (CI logs, `> out.txt`): wide enough for the tables
PIPE_WIDTH = 120


def console(out: TextIO) -> "Console":
    from rich.console import Console

    tty = hasattr(out, "isatty") and out.isatty()
    # markup off: transcript text, paths and tool ids must print as they are
    return Console(file=out, highlight=False, markup=False, width=None if tty else PIPE_WIDTH)
