"""Charts, drawn as SVG text here: tokens per call, cost saving against recall or retention, cost
saving per transcript, and a tune's trials.

Four fixed kinds of chart do not need a plotting library: matplotlib was 96 MB of the install,
0.45 s of CPU to import and about 60 ms a chart; this module draws one in a few milliseconds.
Each chart is one self-contained ``<svg>`` (no script, no style sheet, no ``id``: several sit in
one report.html), embedded inline in the HTML reports and written as a ``.svg`` file beside them.
Every text a transcript or a user gave (a file name, a policy's name) is shown as the text it
is: control characters as escapes, markup escaped.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import Any

#: the marker of each kind of compaction event on a tokens chart
MARKERS = {"summary": "v", "reactive": "X", "manual": "o"}

#: the colours of no compaction and the presets, the same in every report
FIXED_COLOURS = {"none": "#7f7f7f", "s08": "#1f77b4", "s06": "#ff7f0e", "codex": "#2ca02c", "claude-code": "#d62728",
                 "gemini-cli": "#9467bd", "opencode": "#8c564b", "openhands": "#e377c2", "goose": "#bcbd22",
                 "observation-masking": "#17becf", "anthropic-clear-tool-uses": "#393b79", "s20": "#aec7e8",
                 "s06-article": "#ffbb78", "s08-readme": "#98df8a"}
#: the colours any other name (a policy file, a swept value) is given by its hash
OTHER_COLOURS = ["#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#637939", "#8c6d31", "#843c39",
                 "#7b4173", "#5254a3", "#e7969c", "#de9ed6", "#6b6ecf", "#b5cf6b", "#e7ba52"]
#: the colours of series a caller gives none (matplotlib's ten, which the reports used before)
CYCLE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
#: the average width of a character of the chart's font, per pixel of its size (to lay text out)
CHAR_WIDTH = 0.6
#: the <svg> element's attributes a file on its own needs (the XML prologue is the file's, not the inline copy's)
PROLOGUE = '<?xml version="1.0" encoding="UTF-8"?>\n'


def colours(labels: list[str]) -> dict[str, str]:
    """One colour per policy or swept value, the same in every chart and in every report: no
    compaction and the presets each have theirs; any other name gets one from a hash of it (the
    next free one where two names of a report would share it)."""
    import zlib

    out: dict[str, str] = {}
    used = {FIXED_COLOURS[label] for label in labels if label in FIXED_COLOURS}
    for label in labels:
        if label in FIXED_COLOURS:
            out[label] = FIXED_COLOURS[label]
            continue
        start = zlib.crc32(label.encode("utf-8")) % len(OTHER_COLOURS)
        for k in range(len(OTHER_COLOURS)):
            colour = OTHER_COLOURS[(start + k) % len(OTHER_COLOURS)]
            if colour not in used or k == len(OTHER_COLOURS) - 1:
                break
        out[label] = colour
        used.add(colour)
    return out


def text_of(label: str) -> str:
    """A label as SVG text: control characters as escapes (``visible``), then markup escaped."""
    from .text import visible

    return html.escape(visible(label), quote=True)


def file_bytes(svg: str) -> bytes:
    """A chart as a ``.svg`` file of its own."""
    return (PROLOGUE + svg + "\n").encode("utf-8")


# -- numbers on the axes ---------------------------------------------------------------------

Format = Callable[[float, float], str]  # (value, the step between ticks) -> the tick's label


def decimals(step: float) -> int:
    """The fewest decimals that write every multiple of ``step`` exactly (2.5: 1; 0.02: 2; 10: 0)."""
    for d in range(12):
        if abs(round(step, d) - step) <= abs(step) * 1e-6:
            return d
    return 12


def percent(v: float, step: float) -> str:
    """A share as a percentage (−150%, not −1.5), with the decimals the ticks' step needs."""
    return f"{v * 100:,.{decimals(step * 100)}f}%".replace("-", "\u2212")


def number(v: float, step: float) -> str:
    """A count or an amount (tokens, dollars): thousands separated (12,500, not 12500 or 1e4),
    with the decimals the ticks' step needs."""
    return f"{v:,.{decimals(step)}f}".replace("-", "\u2212")


def nice_step(span: float, most: int = 7) -> float:
    """The step between ticks: 1, 2, 2.5 or 5 times a power of ten, the smallest with at most
    ``most`` intervals over ``span``."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(span / most))
    for k in (1, 2, 2.5, 5, 10):
        if span / (k * magnitude) <= most:
            return k * magnitude
    return 10 * magnitude


class Scale:
    """Data to pixels on one axis: linear or logarithmic, the data's range padded by 5% a side
    (a point on the edge is drawn whole), with its ticks."""

    def __init__(self, values: Sequence[float], pixels: tuple[float, float], log: bool = False,
                 fmt: Format = number, pad: float = 0.05) -> None:
        self.log, self.fmt = log, fmt
        finite = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
        lo, hi = (min(finite), max(finite)) if finite else ((1.0, 10.0) if log else (0.0, 1.0))
        if log:
            lo, hi = math.log10(lo), math.log10(hi)
        # one value, or values a float's precision cannot tell apart in ticks (a spread under a
        # billionth of their size: 999,999.9999999999 and 1,000,000 gave five ticks of one label):
        # a unit around them
        if hi - lo < 1e-9 * max(1.0, abs(lo), abs(hi)):
            lo, hi = lo - 0.5, hi + 0.5
        margin = (hi - lo) * pad
        self.lo, self.hi = lo - margin, hi + margin
        self.p0, self.p1 = pixels

    def __call__(self, v: float) -> float:
        if self.log:
            v = math.log10(v) if v > 0 else self.lo
        return self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)

    def ticks(self) -> list[tuple[float, str]]:
        """(value, label) of each tick inside the range."""
        if self.log:
            powers = range(math.ceil(self.lo - 1e-9), math.floor(self.hi + 1e-9) + 1)
            values = [10.0 ** p * k for p in range(math.floor(self.lo), math.ceil(self.hi) + 1)
                      for k in ((1,) if len(powers) >= 2 else (1, 2, 5))]
            values = [v for v in values if self.lo - 1e-9 <= math.log10(v) <= self.hi + 1e-9]
            if len(values) >= 2:
                every = math.ceil(len(values) / 8)  # at most 8 decades labelled
                return [(v, self.fmt(v, v)) for v in values[::every]]
            return self._steps(10.0 ** self.lo, 10.0 ** self.hi)  # under a decade: plain steps
        return self._steps(self.lo, self.hi)

    def _steps(self, lo: float, hi: float) -> list[tuple[float, str]]:
        step = nice_step(hi - lo)
        first = math.ceil(lo / step - 1e-9)
        out = []
        for k in range(first, first + 100):
            v = k * step
            if v > hi + step * 1e-9:
                break
            out.append((v, self.fmt(0.0 if abs(v) < step * 1e-9 else v, step)))
        return out


# -- markers -----------------------------------------------------------------------------------

def marker(kind: str, x: float, y: float, r: float, fill: str, extra: str = "") -> str:
    """One marker centred on (x, y), ``r`` pixels from its centre to its edge."""
    if kind == "o":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{fill}"{extra}/>'
    if kind in ("x", "X"):
        w = 1.2 if kind == "x" else 2.0
        return (f'<path d="M{x - r:.1f},{y - r:.1f}L{x + r:.1f},{y + r:.1f}M{x - r:.1f},{y + r:.1f}L{x + r:.1f},'
                f'{y - r:.1f}" stroke="{fill}" stroke-width="{w}" fill="none"{extra}/>')
    if kind == "*":
        star = " ".join(f"{x + (r if i % 2 == 0 else r * 0.45) * math.cos(math.pi / 2 + i * math.pi / 5):.1f},"
                        f"{y - (r if i % 2 == 0 else r * 0.45) * math.sin(math.pi / 2 + i * math.pi / 5):.1f}"
                        for i in range(10))
        return f'<polygon points="{star}" fill="{fill}"{extra}/>'
    shapes = {"v": ((0, 1), (-1, -0.6), (1, -0.6)), "D": ((0, 1), (0.75, 0), (0, -1), (-0.75, 0))}
    corners = " ".join(f"{x + dx * r:.1f},{y + dy * r:.1f}" for dx, dy in shapes.get(kind, shapes["D"]))
    return f'<polygon points="{corners}" fill="{fill}"{extra}/>'


# -- a chart -------------------------------------------------------------------------------------

Item = Callable[[Scale, Scale], str]


class Chart:
    """One chart: items drawn in the order they are added (what matters most last, on top),
    a legend beside the plot, a title above it; ``render`` lays it out once every extent is known."""

    def __init__(self, title: str, x_label: str, y_label: str, size: tuple[int, int] = (560, 300),
                 x_format: Format = number, y_format: Format = number, y_log: bool = False,
                 rows: list[str] | None = None, grid: str = "xy") -> None:
        self.title, self.x_label, self.y_label = title, x_label, y_label
        self.width, self.height = size
        self.x_format, self.y_format, self.y_log, self.rows, self.grid = x_format, y_format, y_log, rows, grid
        self.items: list[Item] = []
        self.legend: list[tuple[str, str]] = []  # (label, the symbol's SVG at (0, 0))
        self.xs: list[float] = []
        self.ys: list[float] = []

    # what a chart holds
    def line(self, xs: Sequence[float], ys: Sequence[float], colour: str, width: float = 1.3,
             dash: str | None = None, label: str | None = None, cls: str = "line") -> None:
        self.xs.extend(xs)
        self.ys.extend(ys)
        stroke = f' stroke-dasharray="{dash}"' if dash else ""

        def draw(sx: Scale, sy: Scale) -> str:
            pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys))
            return (f'<polyline class="{cls}" points="{pts}" fill="none" stroke="{colour}" stroke-width="{width}"'
                    f'{stroke} stroke-linejoin="round"/>')
        self.items.append(draw)
        if label:
            self.legend.append((label, f'<line x1="0" y1="0" x2="18" y2="0" stroke="{colour}" stroke-width="{width}"{stroke}/>'))

    def points(self, xs: Sequence[float], ys: Sequence[float], colour: str, kind: str = "o", r: float = 3.0,
               opacity: float = 1.0, edge: str | None = None, label: str | None = None,
               titles: Sequence[str] | None = None, cls: str = "points") -> None:
        self.xs.extend(xs)
        self.ys.extend(ys)
        extra = f' stroke="{edge}" stroke-width="0.6"' if edge and kind not in ("x", "X") else ""

        def draw(sx: Scale, sy: Scale) -> str:
            parts = []
            for i, (x, y) in enumerate(zip(xs, ys)):
                shape = marker(kind, sx(x), sy(y), r, colour, extra)
                if titles:  # (a group's title is its tooltip)
                    shape = f"<g><title>{text_of(titles[i])}</title>{shape}</g>"
                parts.append(shape)
            opaque = f' opacity="{opacity}"' if opacity < 1 else ""
            return f'<g class="{cls}"{opaque}>{"".join(parts)}</g>'
        self.items.append(draw)
        if label:
            self.legend.append((label, marker(kind, 9, 0, min(r, 5.0), colour, extra)))

    def hline(self, y: float, colour: str, width: float = 0.8, dash: str | None = None, label: str | None = None) -> None:
        self.ys.append(y)
        stroke = f' stroke-dasharray="{dash}"' if dash else ""
        self.items.append(lambda sx, sy: f'<line class="level" x1="{sx.p0:.1f}" x2="{sx.p1:.1f}" y1="{sy(y):.1f}" '
                                         f'y2="{sy(y):.1f}" stroke="{colour}" stroke-width="{width}"{stroke}/>')
        if label:
            self.legend.append((label, f'<line x1="0" y1="0" x2="18" y2="0" stroke="{colour}" stroke-width="{width}"{stroke}/>'))

    def vline(self, x: float, colour: str, width: float = 0.8, dash: str | None = None, label: str | None = None) -> None:
        self.xs.append(x)
        stroke = f' stroke-dasharray="{dash}"' if dash else ""
        self.items.append(lambda sx, sy: f'<line class="level" x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{sy.p0:.1f}" '
                                         f'y2="{sy.p1:.1f}" stroke="{colour}" stroke-width="{width}"{stroke}/>')
        if label:
            self.legend.append((label, f'<line x1="9" y1="-7" x2="9" y2="7" stroke="{colour}" stroke-width="{width}"{stroke}/>'))

    def note(self, x: float, y: float, text: str) -> None:
        """A label beside a point (6 pixels right of it and above)."""
        self.items.append(lambda sx, sy: f'<text class="note" x="{sx(x) + 6:.1f}" y="{sy(y) - 6:.1f}" font-size="9">'
                                         f'{text_of(text)}</text>')

    def box(self, row: int, values: Sequence[float], colour: str, fliers: bool = True) -> None:
        """A horizontal box of ``values`` on ``row``: the quartiles, the median, whiskers to the
        furthest value within 1.5 times the box's width, the values beyond as small circles."""
        q1, q2, q3 = (quantile(values, q) for q in (0.25, 0.5, 0.75))
        reach = 1.5 * (q3 - q1)
        inside = [v for v in values if q1 - reach <= v <= q3 + reach] or list(values)
        low, high = min(inside), max(inside)
        outside = [v for v in values if v < low or v > high] if fliers else []
        self.xs.extend([low, high, *outside])

        def draw(sx: Scale, sy: Scale) -> str:
            y, h = sy(row), 0.25 * abs(sy(1) - sy(0))
            out = [f'<line x1="{sx(low):.1f}" x2="{sx(q1):.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="black" stroke-width="0.8"/>',
                   f'<line x1="{sx(q3):.1f}" x2="{sx(high):.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="black" stroke-width="0.8"/>',
                   *(f'<line x1="{sx(v):.1f}" x2="{sx(v):.1f}" y1="{y - h / 2:.1f}" y2="{y + h / 2:.1f}" stroke="black" '
                     f'stroke-width="0.8"/>' for v in (low, high)),
                   f'<rect x="{min(sx(q1), sx(q3)):.1f}" y="{y - h:.1f}" width="{abs(sx(q3) - sx(q1)):.1f}" '
                   f'height="{2 * h:.1f}" fill="{colour}" fill-opacity="0.6" stroke="black" stroke-width="0.8"/>',
                   f'<line x1="{sx(q2):.1f}" x2="{sx(q2):.1f}" y1="{y - h:.1f}" y2="{y + h:.1f}" stroke="black" stroke-width="1.2"/>',
                   *(f'<circle cx="{sx(v):.1f}" cy="{y:.1f}" r="2.5" fill="none" stroke="black" stroke-width="0.6"/>'
                     for v in outside)]
            return f'<g class="box">{"".join(out)}</g>'
        self.items.append(draw)

    # laying it out
    def render(self) -> str:
        rows = self.rows
        y_ticks_text = ([text_of(r) for r in rows] if rows is not None else None)
        probe = Scale(self.ys, (0.0, 1.0), self.y_log, self.y_format) if rows is None else None
        y_labels = [label for _, label in probe.ticks()] if probe else (y_ticks_text or [])
        left = 10 + (16 if self.y_label else 0) + 6 + CHAR_WIDTH * 10 * max((len(t) for t in y_labels), default=1)
        top, bottom = 30, 44
        legend_width = (30 + CHAR_WIDTH * 10 * max(len(label) for label, _ in self.legend)) if self.legend else 0
        plot_w, plot_h = self.width, self.height
        width, height = left + plot_w + 12 + legend_width, top + plot_h + bottom
        sx = Scale(self.xs, (left, left + plot_w), False, self.x_format)
        if rows is not None:
            n = max(len(rows), 1)
            sy = Scale([0.0, n - 1.0], (top, top + plot_h), pad=0.5 / (n - 1) if n > 1 else 0.0)
        else:
            sy = Scale(self.ys, (top + plot_h, top), self.y_log, self.y_format)
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
               f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT}" font-size="10" role="img">',
               f'<title>{text_of(self.title)}</title>',
               f'<rect width="{width:.0f}" height="{height:.0f}" fill="white"/>']
        out.append(self._axes(sx, sy, left, top, plot_w, plot_h))
        out.append(f'<svg x="{left:.1f}" y="{top:.1f}" width="{plot_w}" height="{plot_h}" '
                   f'viewBox="{left:.1f} {top:.1f} {plot_w} {plot_h}" overflow="hidden">')
        out += [item(sx, sy) for item in self.items]
        out.append("</svg>")
        out.append(f'<rect x="{left:.1f}" y="{top:.1f}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black" '
                   f'stroke-width="0.8"/>')
        out.append(self._legend(left + plot_w + 12, top + 8))
        out.append(f'<text class="title" x="{left + plot_w / 2:.1f}" y="{top - 12}" text-anchor="middle" font-size="11">'
                   f'{text_of(self.title)}</text>')
        out.append("</svg>")
        return "".join(out)

    def _axes(self, sx: Scale, sy: Scale, left: float, top: float, w: float, h: float) -> str:
        out = ['<g class="axes">']
        for v, label in sx.ticks():
            x = sx(v)
            if "x" in self.grid:
                out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + h}" stroke="#e3e3e3" stroke-width="0.8"/>')
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + h}" y2="{top + h + 4}" stroke="black" stroke-width="0.8"/>')
            out.append(f'<text class="tick" x="{x:.1f}" y="{top + h + 15}" text-anchor="middle">{text_of(label)}</text>')
        ticks = ([(float(i), r) for i, r in enumerate(self.rows)] if self.rows is not None else sy.ticks())
        for v, label in ticks:
            y = sy(v)
            if "y" in self.grid and self.rows is None:
                out.append(f'<line x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e3e3" stroke-width="0.8"/>')
            out.append(f'<line x1="{left - 4}" x2="{left}" y1="{y:.1f}" y2="{y:.1f}" stroke="black" stroke-width="0.8"/>')
            out.append(f'<text class="tick" x="{left - 7}" y="{y + 3.5:.1f}" text-anchor="end">{text_of(label)}</text>')
        out.append(f'<text class="label" x="{left + w / 2:.1f}" y="{top + h + 34}" text-anchor="middle">'
                   f'{text_of(self.x_label)}</text>')
        if self.y_label:
            out.append(f'<text class="label" transform="translate(14,{top + h / 2:.1f}) rotate(-90)" text-anchor="middle">'
                       f'{text_of(self.y_label)}</text>')
        out.append("</g>")
        return "".join(out)

    def _legend(self, x: float, y: float) -> str:
        out = ['<g class="legend">']
        for i, (label, symbol) in enumerate(self.legend):
            at = y + 16 * i
            out.append(f'<g class="entry" transform="translate({x:.1f},{at:.1f})">{symbol}'
                       f'<text x="24" y="3.5">{text_of(label)}</text></g>')
        out.append("</g>")
        return "".join(out)


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile with linear interpolation between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


# -- the four charts -------------------------------------------------------------------------------

def tokens_chart(title: str, raw: list[int], series: list[dict[str, Any]],
                 palette: dict[str, str] | None = None) -> str:
    """series: [{label, tokens, events: {kind: [calls]}, levels: {name: tokens}, key?}]. The raw
    baseline is drawn over the policies (a policy that changes nothing lies under it), each
    policy's trigger levels in its colour and named in the legend, the legend beside the plot; a
    log axis where the raw baseline dwarfs the policies."""
    top = max([*raw, *(t for s in series for t in s["tokens"]), 1])
    low = min([t for s in series for t in s["tokens"] if t > 0] + [top])
    chart = Chart(title, "call", "context tokens sent", (640, 300), number, number, y_log=top / max(low, 1) > 30)
    hues = [(palette or {}).get(s.get("key", s["label"])) or CYCLE[i % len(CYCLE)] for i, s in enumerate(series)]
    for value, name, colour in _levels(series, hues, top):
        chart.hline(value, colour, 0.8, "1,2", name)
    for s, colour in zip(series, hues):
        chart.line(range(len(s["tokens"])), s["tokens"], colour, 1.3, label=s["label"])
        for kind, calls in s.get("events", {}).items():
            if calls:
                chart.points(calls, [s["tokens"][c] for c in calls], colour, MARKERS.get(kind, "o"), 3.2,
                             cls=f"events {kind}")
    chart.line(range(len(raw)), raw, "black", 1.1, "4,3", "raw (no compaction)", cls="raw")
    occurred = {kind for s in series for kind, calls in s.get("events", {}).items() if calls}
    for kind, shape in MARKERS.items():
        if kind in occurred:  # only the markers the chart shows
            chart.legend.append((f"{kind} compaction", marker(shape, 9, 0, 3.2, "grey")))
    return chart.render()


def _levels(series: list[dict[str, Any]], hues: list[str], top: float) -> list[tuple[float, str, str]]:
    """(tokens, legend, colour) of each trigger level drawn: a level several policies share is one
    line, in grey, naming them (or "all")."""
    levels: dict[tuple[str, float], list[tuple[str, str]]] = {}
    for s, colour in zip(series, hues):
        for name, value in s.get("levels", {}).items():
            if value < top * 1.5:
                levels.setdefault((name, value), []).append((s["label"], colour))
    out = []
    for (name, value), owners in levels.items():
        whose = owners[0][0] if len(owners) == 1 else ("all" if len(owners) == len(series) else
                                                       ", ".join(o for o, _ in owners))
        out.append((value, f"{name} {value:,.0f} ({whose})", owners[0][1] if len(owners) == 1 else "grey"))
    return out


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point beats on both axes (both maximised)."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any((x2 >= x and y2 >= y) and (x2 > x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i):
            front.append(i)
    return sorted(front, key=lambda i: points[i])


#: the x axis of the Pareto chart, by the metric it shows
PARETO_AXES = {"recall": "probe recall (what the agent later used, still in the context)",
               "retention": "retention (referenced tool results still intact)"}


def pareto_chart(runs: list[tuple[str, float, float]], overall: list[tuple[str, float, float]],
                 palette: dict[str, str], metric: str = "retention", floor: float | None = None) -> str:
    """Cost saving against recall (or retention): a small point per run (transcript × policy),
    coloured by policy, and a large one per policy over all the transcripts, their Pareto front
    joined; ``floor``: the verdict's floor of that measure (a policy left of it is not recommended),
    drawn as a vertical line, and the break-even of cost (no saving) as a horizontal one."""
    chart = Chart(f"cost saving against {metric}: small points one transcript each, large the policy overall",
                  PARETO_AXES[metric], "cost saving vs no compaction", (520, 320), percent, percent)
    chart.hline(0, "black", 0.6)
    if floor is not None:
        chart.vline(floor, "firebrick", 0.9, "1,2", f"the verdict's {metric} floor ({floor * 100:.1f}%)")
    points = [(r, s) for _, r, s in overall]
    front = pareto_front(points)
    if len({points[i] for i in front}) > 1:  # a front is a line through two distinct points or more
        chart.line([points[i][0] for i in front], [points[i][1] for i in front], "black", 0.8, "5,3",
                   "Pareto front (all transcripts)", cls="front")
    for label in palette:
        xs = [r for lab, r, _ in runs if lab == label]
        ys = [s for lab, _, s in runs if lab == label]
        if xs:
            chart.points(xs, ys, palette[label], "o", 2.0, 0.45, cls="runs")
    shared: dict[tuple[float, float], list[str]] = {}  # policies on one point: one marker naming them all
    for label, r, s in overall:
        shared.setdefault((round(r, 4), round(s, 4)), []).append(label)
    for (r, s), labels in shared.items():
        name = " = ".join(labels)
        chart.points([r], [s], palette.get(labels[0], "grey") if len(labels) == 1 else "white", "o", 5.5,
                     edge="black", label=name, titles=[f"{name}: {metric} {r * 100:.1f}%, saving {s * 100:+.1f}%"],
                     cls="overall")
        if len(labels) > 1:
            chart.note(r, s, ", ".join(labels))
    return chart.render()


def savings_chart(savings: dict[str, list[float]], overall: dict[str, float], palette: dict[str, str],
                  note: str = "") -> str:
    """Cost saving per transcript, a box per policy (its saving over all the transcripts marked);
    what replaces the Pareto chart when no transcript refers back to a tool result."""
    labels = list(savings)
    chart = Chart("cost saving per transcript" + (f" ({note})" if note else ""), "cost saving vs no compaction, per transcript",
                  "", (520, 20 + 32 * max(len(labels), 2)), percent, rows=labels, grid="x")
    chart.vline(0, "black", 0.6)
    fliers = len(labels) * max((len(v) for v in savings.values()), default=0) < 5000
    for row, label in enumerate(labels):
        chart.box(row, savings[label] or [overall[label]], palette.get(label, "lightgrey"), fliers)
    chart.points([overall[label] for label in labels], list(range(len(labels))), "black", "D", 3.2,
                 label="over all transcripts", titles=[f"{label}: {overall[label] * 100:+.1f}% over all transcripts"
                                                       for label in labels], cls="overall")
    return chart.render()


def tune_chart(trials: list[tuple[float, float, bool]], front: list[tuple[float, float]], base: tuple[float, float],
               x_label: str, y_label: str, title: str, shares: tuple[bool, bool] = (True, True),
               floors: tuple[tuple[str, float] | None, tuple[str, float] | None] = (None, None),
               chosen: tuple[float, float, str] | None = None) -> str:
    """Every trial of a tune (x: the second objective, y: the first), the infeasible ones as grey
    crosses, the Pareto front joined and numbered as in tune's table, the base policy as a star;
    ``floors``: the recommendation's floor of the measure on x and on y, where one is (recall,
    retention: what the legend calls it, and its value), drawn as a line; ``chosen``: the point
    the recommendation names, ringed, and what the legend calls it."""
    chart = Chart(title, x_label, y_label, (520, 320), percent if shares[0] else number,
                  percent if shares[1] else number)
    chart.hline(0, "black", 0.6)
    if floors[0] is not None:
        chart.vline(floors[0][1], "firebrick", 0.9, "1,2", floors[0][0])
    if floors[1] is not None:
        chart.hline(floors[1][1], "firebrick", 0.9, "1,2", floors[1][0])
    ok = [(x, y) for x, y, feasible in trials if feasible]
    bad = [(x, y) for x, y, feasible in trials if not feasible]
    if ok:
        chart.points([x for x, _ in ok], [y for _, y in ok], "#4c72b0", "o", 2.5, 0.5, label="trial", cls="trials")
    if bad:
        chart.points([x for x, _ in bad], [y for _, y in bad], "grey", "x", 3.0, 0.7,
                     label="trial with a violation or overflow", cls="infeasible")
    if front:
        pts = sorted(front)
        if len(pts) > 1:
            chart.line([x for x, _ in pts], [y for _, y in pts], "black", 1.0, cls="front")
        chart.points([x for x, _ in pts], [y for _, y in pts], "black", "o", 3.5,
                     label="Pareto front" if len(pts) > 1 else "front point", cls="front-points")
        for number_, (x, y) in enumerate(front, 1):  # numbered as in tune's table and front.csv
            chart.note(x, y, str(number_))
    chart.points([base[0]], [base[1]], "#dd8452", "*", 8.0, edge="black", label="base policy", cls="base")
    if chosen is not None:
        ring = ' stroke="seagreen" stroke-width="1.6"'
        chart.items.append(lambda sx, sy: marker("o", sx(chosen[0]), sy(chosen[1]), 8.5, "none", ring))
        chart.legend.append((chosen[2], marker("o", 9, 0, 5.5, "none", ring)))
    return chart.render()
