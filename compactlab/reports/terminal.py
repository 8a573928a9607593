"""What every stdout table writer prints through.

On a terminal, rich draws boxed, coloured tables that fit the window. Into a pipe or a file (CI
logs, ``| grep``, ``> out.txt``) the same tables come out as plain aligned text: one line a row,
nothing wrapped or folded, so a long path stays whole and every row can be grepped; and rich,
a fifth of a small replay's run time to import, is not imported at all.
"""

from __future__ import annotations

import os
import re
from typing import Any, TextIO

from .text import visible, visible_lines


#: the fewest characters a name cut in the middle keeps
CUT_LEAST = 16


#: the longest line of a header rich draws: a longer name (``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``,
#: ``summary.keep_recent_tokens``) is broken after its ``_`` or ``.``, never inside a word
HEAD_LINE = 20


def _head_lines(header: str) -> str:
    """``header`` as rich draws it: a name longer than ``HEAD_LINE`` broken into lines after its
    separators (``_``, ``.``), each as long as it can be; the words of a header of words stay
    rich's to wrap."""
    if len(header) <= HEAD_LINE or " " in header:
        return header
    lines = [""]
    for part in re.findall(r"[^_.]+[_.]?|[_.]", header):
        if lines[-1] and len(lines[-1]) + len(part) > HEAD_LINE:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def _longest_word(header: str, whole: bool = False) -> int:
    """The least width a header is drawn in without a word of it broken (``whole``: nor a name
    broken after its separators)."""
    return max((len(word) for word in (header if whole else _head_lines(header)).split()), default=0)


def cut_apart(cells: list[str], width: int) -> list[str] | None:
    """Each of ``cells`` in ``width`` characters, those longer cut in the middle at one place for
    all, so that the names that were apart stay apart (a sweep's labels differ in a value near
    their end: cut evenly, all three read "s08 summ…000 chars"): where the long ones share a start
    (or an end), the cut keeps whole what follows it (precedes it), "s08 s…120000 chars"; else the
    most even cut that keeps them apart. None where no cut does."""
    apart = len(set(cells))
    keep = width - 1  # (the characters kept of a cut name: its head and its tail)
    long = [c for c in cells if len(c) > width]
    heads = []
    if len(long) > 1:
        start, end = os.path.commonprefix(long), os.path.commonprefix([c[::-1] for c in long])
        heads = [keep - max(len(c) - len(start) for c in long), max(len(c) - len(end) for c in long)]
    balanced = sorted(range(1, keep), key=lambda h: (abs(2 * h - keep), h))
    for head in [h for h in heads if 0 < h < keep] + balanced:
        cut = [c if len(c) <= width else c[:head] + "…" + c[len(c) - (keep - head):] for c in cells]
        if len(set(cut)) == apart:
            return cut
    return None


#: the longest cell :meth:`Table.plain` right-aligns in a last column (a longer one is left-aligned)
PLAIN_FIGURE = 32

#: the longest "header: value" a row printed as lines runs together with the others on one line
STACKED_SHORT = 32

#: the widest a key/value table's value column is drawn on a terminal (replay's summary, inspect's
#: facts): a wide terminal does not push the figures far from their names; a sentence wraps there
VALUE_WIDEST = 64


class Table:
    """A table as the writers describe it; :class:`Printer` renders it. Column options are rich's
    (``justify``, ``style``, ``overflow``, ``min_width``, ``no_wrap``), and ``cut="middle"``: on a
    narrow terminal the column's long names are cut in the middle, before any column is left out;
    ``shorten``: a function of a row's index and a width that gives its cell in that width, called
    on a terminal for a cell longer than the room the layout leaves its column (a recorded action's
    path cut where it says least), so that the row stays one line rather than folding; plain text
    uses ``justify`` and the cells as given."""

    def __init__(self, title: str = "", show_header: bool = True) -> None:
        self.title = visible(title)
        self.show_header = show_header
        self.columns: list[tuple[str, dict[str, Any]]] = []
        self.rows: list[tuple[tuple[str, ...], str | None]] = []
        self.simple = False  # drawn with a rule under the header only (two spaces between columns)

    def add_column(self, header: str = "", essential: bool = True, **options: Any) -> None:
        """A column; ``essential`` False: left out of the compact layout of a narrow terminal."""
        self.columns.append((header, {**options, "essential": essential, "at": len(self.columns)}))

    def add_row(self, *cells: str, style: str | None = None) -> None:
        """A row; its cells (names and ids from transcripts) with control characters made visible."""
        self.rows.append((tuple(map(visible, cells)), style))

    def _widths(self) -> list[int]:
        grid = [tuple(h for h, _ in self.columns)] if self.show_header else []
        grid += [cells for cells, _ in self.rows]
        return [max((len(row[i]) for row in grid), default=0) for i in range(len(self.columns))]

    def narrowest_boxed(self, whole_heads: bool = False) -> int:
        """The least width rich can draw this table in: unwrappable columns whole, the others
        folded down to their ``min_width`` (else 8) but no narrower than their header's longest
        word (no header is broken inside a word: a narrower terminal takes the short headers;
        ``whole_heads``: nor a long name after its separators), plus borders and padding."""
        widths = [w if opts.get("no_wrap") else min(w, max(opts.get("min_width") or 8,
                                                             _longest_word(head, whole_heads)))
                  for w, (head, opts) in zip(self._widths(), self.columns)]
        return sum(widths) + (3 * len(widths) - 3 if self.simple else 3 * len(widths) + 1)

    def plain(self) -> str:
        """Aligned columns two spaces apart, a rule under the header, no trailing spaces. The last
        column, right-justified, is aligned on its cells of ``PLAIN_FIGURE`` characters or fewer
        (the figures); a longer one (a sentence, a path) starts where the column starts, rather
        than pushing every figure as far right as it ends."""
        widths = self._widths()
        grid = [tuple(h for h, _ in self.columns)] if self.show_header else []
        right = [opts.get("justify") == "right" for _, opts in self.columns]
        if right and right[-1]:
            widths[-1] = max((len(row[-1]) for row in grid + [c for c, _ in self.rows]
                              if len(row[-1]) <= PLAIN_FIGURE), default=widths[-1])

        def line(cells: tuple[str, ...]) -> str:
            return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()

        lines = [self.title] if self.title else []
        if self.show_header:
            lines += [line(grid[0]), line(tuple("-" * w for w in widths))]
        lines += [line(cells) for cells, _ in self.rows]
        return "\n".join(lines) + "\n"

    def compact(self) -> "Table | None":
        """The table with its essential columns only (None if it has no other)."""
        narrowed = self.narrowed()
        return narrowed[-1] if narrowed else None

    def narrowed(self) -> "list[Table]":
        """The table with one more of its other columns left out each time, the rightmost first,
        down to its essential columns only (a narrow terminal shows the widest that fits)."""
        optional = [i for i, (_, opts) in enumerate(self.columns) if not opts.get("essential", True)]
        if len(optional) == len(self.columns):
            return []
        out = []
        for n in range(1, len(optional) + 1):
            dropped = set(optional[-n:])
            keep = [i for i in range(len(self.columns)) if i not in dropped]
            t = Table(self.title, self.show_header)
            t.simple = self.simple
            t.columns = [self.columns[i] for i in keep]
            t.rows = [(tuple(cells[i] for i in keep), style) for cells, style in self.rows]
            out.append(t)
        return out

    def cut_to(self, width: int) -> "Table | None":
        """The table with its ``cut`` columns' cells (a long name: ``cut="middle"``) shortened in
        the middle, as little as it takes to be drawn in ``width`` and at the place that keeps
        names apart (``cut_apart``); None when cutting them to ``CUT_LEAST`` characters is not
        enough, or no cut keeps them apart (or it has none)."""
        cut = [i for i, (_, opts) in enumerate(self.columns) if opts.get("cut")]
        excess = self.narrowest_boxed() - width
        if excess <= 0:
            return self
        if not cut:
            return None
        widths = self._widths()
        room = {i: widths[i] - CUT_LEAST for i in cut if widths[i] > CUT_LEAST}
        if sum(room.values()) < excess:
            return None
        target = dict(enumerate(widths))
        for i in sorted(room, key=lambda i: -widths[i]):  # (the widest first)
            take = min(room[i], excess)
            target[i] -= take
            excess -= take
        columns = {}
        for i in room:
            cut_cells = cut_apart([cells[i] for cells, _ in self.rows], target[i])
            if cut_cells is None:
                return None  # (names no cut keeps apart: another layout, not a table of look-alikes)
            columns[i] = cut_cells
        t = Table(self.title, self.show_header)
        t.simple = self.simple
        t.columns = [(h, {**opts, "no_wrap": True} if i in room else opts) for i, (h, opts) in enumerate(self.columns)]
        t.rows = [(tuple(columns[i][k] if i in room else c for i, c in enumerate(cells)), style)
                  for k, (cells, style) in enumerate(self.rows)]
        return t

    def fitted(self, width: int) -> "Table":
        """The table with the cells of its ``shorten`` column made to fit the room the others leave
        it in ``width`` (each of them drawn whole: ``no_wrap``), each in one line; itself where
        none is too long, or where another column could also be narrowed (rich shares the room out
        then) or the room is less than the column's ``min_width``."""
        at = [i for i, (_, opts) in enumerate(self.columns) if opts.get("shorten")]
        if len(at) != 1 or not all(opts.get("no_wrap") for i, (_, opts) in enumerate(self.columns) if i != at[0]):
            return self
        i = at[0]
        head, opts = self.columns[i]
        widths = self._widths()
        borders = 3 * len(widths) - 3 if self.simple else 3 * len(widths) + 1
        room = width - borders - sum(w for k, w in enumerate(widths) if k != i)
        if widths[i] <= room or room < max(opts.get("min_width") or 0, len(head) if self.show_header else 0):
            return self
        shorten = opts["shorten"]
        t = Table(self.title, self.show_header)
        t.simple = self.simple
        t.columns = [(h, {**o, "no_wrap": True} if k == i else o) for k, (h, o) in enumerate(self.columns)]
        t.rows = [((*cells[:i], visible(shorten(k, room))[:room] if len(cells[i]) > room else cells[i], *cells[i + 1:]),
                   style) for k, (cells, style) in enumerate(self.rows)]
        return t

    def shortened(self) -> "Table | None":
        """The table with the short headers its columns have (``short=``), drawn without vertical
        rules: the last layout a narrow terminal tries before rows as lines (None: no short header)."""
        if not any(opts.get("short") for _, opts in self.columns):
            return None
        t = Table(self.title, self.show_header)
        t.columns = [(opts.get("short") or h, opts) for h, opts in self.columns]
        t.rows = self.rows
        t.simple = True
        return t

    def stacked(self, width: int | None = None) -> list[tuple[str, str | None]]:
        """Each row as lines: its first cell, then "header: value" for the others (a terminal too
        narrow for any table), the short ones (a figure, a name) run together, "·" between them,
        on as few lines of ``width`` as they take (a line is broken between two of them, never
        inside one), each longer one on a line of its own; with the row's style."""
        lines: list[tuple[str, str | None]] = [(self.title, None)] if self.title else []
        headers = [h for h, _ in self.columns]
        for k, (cells, style) in enumerate(self.rows):
            lines.append((cells[0], style))
            pairs = [f"{h}: {self._shortened(k, i, c, width)}" for i, (h, c) in enumerate(zip(headers, cells)) if i and c]
            run: list[str] = []
            for pair in (p for p in pairs if len(p) <= STACKED_SHORT):
                if run and width is not None and len("  " + " · ".join([*run, pair])) > width:
                    lines.append(("  " + " · ".join(run), style))
                    run = []
                run.append(pair)
            if run:
                lines.append(("  " + " · ".join(run), style))
            lines += [(f"  {p}", style) for p in pairs if len(p) > STACKED_SHORT]
        return lines

    def _shortened(self, k: int, i: int, cell: str, width: int | None) -> str:
        """Row ``k``'s cell of column ``i`` as a stacked line shows it: made by the column's
        ``shorten`` to fit ``width`` after its header where it would not (else as it is)."""
        header, opts = self.columns[i]
        room = None if width is None else width - len(f"  {header}: ")
        shorten = opts.get("shorten")
        if shorten is None or room is None or len(cell) <= room or room < (opts.get("min_width") or 1):
            return cell
        return visible(shorten(k, room))[:room]

    def rich(self, whole_heads: bool = False) -> Any:
        """The rich table; a long name in a header is broken after its separators, unless
        ``whole_heads`` (the terminal has room for it on one line)."""
        from rich.table import Table as RichTable
        from rich.text import Text

        extra: dict[str, Any] = {}
        if self.simple:
            from rich import box

            extra = {"box": box.SIMPLE_HEAD, "pad_edge": False, "show_edge": False}
        table = RichTable(title=self.title or None, show_header=self.show_header, title_justify="left", **extra)
        for header, options in self.columns:
            table.add_column(header if whole_heads else _head_lines(header),
                             **{k: v for k, v in options.items() if k not in ("essential", "cut", "short", "shorten", "at")})
        # (as in plain text: a right-justified last column's sentence, longer than a figure, starts
        # at the column's start rather than wrapping into ragged lines flush right)
        last_right = bool(self.columns) and self.columns[-1][1].get("justify") == "right"
        for cells, style in self.rows:
            if last_right and cells and len(cells[-1]) > PLAIN_FIGURE:
                cells = (*cells[:-1], Text(cells[-1], justify="left"))  # type: ignore[arg-type]
            table.add_row(*cells, style=style)
        return table


class Printer:
    """Prints tables and lines of text to ``out``: with rich on a terminal, plainly elsewhere."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._console: Any = None
        if hasattr(out, "isatty") and out.isatty():
            from rich.console import Console

            # markup off: transcript text, paths and tool ids must print as they are
            self._console = Console(file=out, highlight=False, markup=False)

    def table(self, table: Table) -> list[str]:
        """Plain into a pipe or file (every column, each row whole); on a terminal boxed, and when
        the terminal is narrower than the table can be drawn: without as few of its other columns
        as it takes (the rightmost first), down to its essential ones, or, if even those do not
        fit, each row as lines (never a row wrapped mid-word). The headers of the columns shown (in
        their long form), for a line under the table to explain only those."""
        if self._console is None:
            self.out.write(table.plain())
            return [h for h, _ in table.columns]
        width = self._console.width
        short = table.shortened()
        layouts = (table, *table.narrowed(), *((short, *short.narrowed()) if short is not None else ()))
        # the widest layout that fits with every name whole, else with a long name cut in the middle
        fits = next((t for t in layouts if t.narrowest_boxed() <= width), None) or next(
            (c for t in layouts if (c := t.cut_to(width)) is not None), None)
        if fits is not None:  # (the widest layout that fits, a long name cut in the middle before a column goes)
            fits = fits.fitted(width)
            self._console.print(fits.rich(whole_heads=fits.narrowest_boxed(whole_heads=True) <= width))
            shown = fits
        else:
            from .text import wrapped

            # (a value's continuation lines under the value, not flush left: each row reads as one
            # item; a name longer than a line, a path, left whole for the terminal to fold)
            shown = table.compact() or table
            for line, style in shown.stacked(width):
                self._console.print(wrapped(line, width, "  " if line.startswith("  ") else "", least=1), style=style,
                                    overflow="fold")
        kept = {opts["at"] for _, opts in shown.columns}  # (each layout's columns keep their place's mark)
        return [h for h, opts in table.columns if opts["at"] in kept]

    def text(self, line: str, style: str | None = None, indent: str = "") -> None:
        """One line of text; a terminal shows it in ``style``, broken between words, its
        continuation lines as indented as the line itself and ``indent`` more (an item of a list
        reads as one). Control characters in it are shown, not obeyed."""
        line = visible_lines(line)
        if self._console is None:
            self.out.write(line + "\n")
        else:
            from .text import wrapped

            self._console.print(wrapped(line, self._console.width, indent), style=style)


#: a progress total not known in advance (a stream's calls): a bar that counts without an end
UNKNOWN = -1


class Progress:
    """A rich progress bar on stderr while a grid runs, when stderr is a terminal and it is
    ``enabled``; otherwise nothing. Entered, it gives the function to call as each job ends."""

    def __init__(self, label: str, total: int, enabled: bool = True) -> None:
        import sys

        self.label, self.total = label, total
        self.enabled = enabled and sys.stderr.isatty()
        self.bar: Any = None

    def __enter__(self) -> Any:
        if not self.enabled:
            return lambda _result: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.progress import Progress as Bar

        self.bar = Bar(self.label, BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                       console=Console(stderr=True, highlight=False, markup=False), transient=True)
        self.bar.start()
        _LIVE.append(self)
        task = self.bar.add_task("runs", total=None if self.total == UNKNOWN else self.total)
        return lambda _result: self.bar.advance(task)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.stop()
            if self in _LIVE:
                _LIVE.remove(self)


#: the progress bars showing now (a line said meanwhile is printed above the bar, not through it)
_LIVE: list[Progress] = []


def say(line: str) -> bool:
    """Print ``line`` on stderr above the progress bar showing now, if one is (True); else do
    nothing (False: the caller prints it)."""
    if not _LIVE:
        return False
    _LIVE[-1].bar.console.print(visible_lines(line), overflow="fold")
    return True
