"""Charts (matplotlib, imported only here): tokens per call, and cost saving against retention.

Each chart is rendered twice: SVG text to embed in the HTML report (self-contained, no script),
and a PNG file beside it.
"""

from __future__ import annotations

import io
from typing import Any

MARKERS = {"summary": "v", "reactive": "X", "manual": "o"}


def plain(label: str) -> str:
    """A label drawn as the text it is: matplotlib would read ``$...$`` as mathtext (and fail on
    a lone ``$``), and control characters are shown as escapes."""
    from .text import visible

    return visible(label).replace("$", r"\$")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9})
    return plt


def _render(fig) -> tuple[str, bytes]:
    """(inline SVG text, PNG bytes) of a figure, which is then closed."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):], png.getvalue()  # no XML prologue: the SVG is embedded inline


def tokens_chart(title: str, raw: list[int], series: list[dict[str, Any]]) -> tuple[str, bytes]:
    """series: [{label, tokens, events: {kind: [calls]}, levels: {name: tokens}}]."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4.2))
    ax.plot(range(len(raw)), raw, color="black", linestyle="--", linewidth=1, label="raw (no compaction)")
    levels: dict[str, float] = {}
    for s in series:
        (line,) = ax.plot(range(len(s["tokens"])), s["tokens"], linewidth=1.2, label=plain(s["label"]))
        for kind, calls in s.get("events", {}).items():
            if calls:
                ax.scatter(calls, [s["tokens"][c] for c in calls], marker=MARKERS.get(kind, "."), color=line.get_color(),
                           s=22, zorder=3)
        for name, value in s.get("levels", {}).items():
            levels.setdefault(f"{name} {value:,.0f}", value)
    top = max([*raw, *(t for s in series for t in s["tokens"]), 1])
    for name, value in levels.items():
        if value < top * 1.5:
            ax.axhline(value, color="grey", linewidth=0.6, linestyle=":")
            ax.text(max(len(raw) - 1, 0), value, plain(f"{name} "), color="grey", fontsize=7, va="bottom", ha="right")
    low = min([t for s in series for t in s["tokens"] if t > 0] + [top])
    if top / max(low, 1) > 30:  # the raw baseline dwarfs the policies: a log axis shows both
        ax.set_yscale("log")
    for kind, marker in MARKERS.items():
        ax.scatter([], [], marker=marker, color="grey", label=f"{kind} compaction")
    ax.set_xlabel("call")
    ax.set_ylabel("context tokens sent")
    ax.set_title(plain(title), fontsize=10)
    ax.legend(fontsize=7, loc="upper left", ncols=2)
    ax.grid(alpha=0.25)
    return _render(fig)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point beats on both axes (both maximised)."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any((x2 >= x and y2 >= y) and (x2 > x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i):
            front.append(i)
    return sorted(front, key=lambda i: points[i])


def pareto_chart(labels: list[str], retention: list[float], saving: list[float]) -> tuple[str, bytes]:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    points = list(zip(retention, saving))
    front = pareto_front(points)
    ax.scatter(retention, saving, color="tab:blue", s=18, label="run")
    ax.plot([retention[i] for i in front], [saving[i] for i in front], color="tab:red", marker="o", linewidth=1,
            label="Pareto front")
    at: dict[tuple[float, float], list[str]] = {}
    for i in front:  # runs with the same result share one label
        at.setdefault((round(retention[i], 4), round(saving[i], 4)), []).append(labels[i])
    for (x, y), names in at.items():
        text = names[0] + (f" (+{len(names) - 1} more)" if len(names) > 1 else "")
        ax.annotate(plain(text), (x, y), fontsize=7, xytext=(4, 3), textcoords="offset points",
                    ha="right" if x > 0.7 else "left")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xlabel("retention (referenced tool results still intact)")
    ax.set_ylabel("cost saving vs no compaction")
    ax.set_title("cost saving against retention", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.25)
    return _render(fig)
