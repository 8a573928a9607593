"""The rich console every terminal writer uses."""

from __future__ import annotations

from typing import TextIO

from rich.console import Console

#: width when stdout is a file or a pipe (CI logs, `> out.txt`): wide enough for the tables
PIPE_WIDTH = 120


def console(out: TextIO) -> Console:
    tty = hasattr(out, "isatty") and out.isatty()
    # markup off: transcript text, paths and tool ids must print as they are
    return Console(file=out, highlight=False, markup=False, width=None if tty else PIPE_WIDTH)
