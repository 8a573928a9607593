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


def prepare() -> None:
    """Import matplotlib now: a process that forks chart workers after this pays its import
    (0.45 s of CPU) once, not once a worker."""
    _plt()


#: the margin around a chart's drawn extent (matplotlib's ``pad_inches`` for a tight box)
PAD_INCHES = 0.1


def _render(fig) -> tuple[str, bytes]:
    """(inline SVG text, PNG bytes) of a figure, which is then closed. The tight box around what
    is drawn is measured once, by one draw, for both (``bbox_inches="tight"`` draws the figure an
    extra time for each file)."""
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(PAD_INCHES)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches=box)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110, bbox_inches=box)
    _plt().close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):], png.getvalue()  # no XML prologue: the SVG is embedded inline


#: the colours of no compaction and the presets, the same in every report
FIXED_COLOURS = {"none": "#7f7f7f", "s08": "#1f77b4", "s06": "#ff7f0e", "codex": "#2ca02c", "claude-code": "#d62728",
                 "gemini-cli": "#9467bd", "opencode": "#8c564b", "openhands": "#e377c2", "goose": "#bcbd22",
                 "observation-masking": "#17becf", "anthropic-clear-tool-uses": "#393b79", "s20": "#aec7e8",
                 "s06-article": "#ffbb78", "s08-readme": "#98df8a"}
#: the colours any other name (a policy file, a swept value) is given by its hash
OTHER_COLOURS = ["#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#637939", "#8c6d31", "#843c39",
                 "#7b4173", "#5254a3", "#e7969c", "#de9ed6", "#6b6ecf", "#b5cf6b", "#e7ba52"]


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


def _legend_outside(ax: Any) -> None:
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)


def _percent() -> Any:
    """A share as a percentage (−150%, not −1.5)."""
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(1.0, decimals=0)


def _thousands() -> Any:
    """Token counts with thousands separators (12,500, not 12500 or 10^4)."""
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 else f"{v:g}")


def tokens_chart(title: str, raw: list[int], series: list[dict[str, Any]],
                 palette: dict[str, str] | None = None) -> tuple[str, bytes]:
    """series: [{label, tokens, events: {kind: [calls]}, levels: {name: tokens}, colour?}]. The raw
    baseline is drawn over the policies (a policy that changes nothing lies under it), each
    policy's trigger levels in its colour and named in the legend, the legend beside the plot."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4.2))
    top = max([*raw, *(t for s in series for t in s["tokens"]), 1])
    levels: dict[tuple[str, float], list[tuple[str, str]]] = {}  # a level several policies share: one line
    for i, s in enumerate(series):
        colour = (palette or {}).get(s.get("key", s["label"])) or f"C{i % 10}"
        ax.plot(range(len(s["tokens"])), s["tokens"], linewidth=1.3, color=colour, label=plain(s["label"]), zorder=2)
        for kind, calls in s.get("events", {}).items():
            if calls:
                ax.scatter(calls, [s["tokens"][c] for c in calls], marker=MARKERS.get(kind, "."), color=colour,
                           s=22, zorder=3)
        for name, value in s.get("levels", {}).items():
            if value < top * 1.5:
                levels.setdefault((name, value), []).append((s["label"], colour))
    for (name, value), owners in levels.items():
        whose = owners[0][0] if len(owners) == 1 else ("all" if len(owners) == len(series) else
                                                       ", ".join(o for o, _ in owners))
        ax.axhline(value, color=owners[0][1] if len(owners) == 1 else "grey", linewidth=0.8, linestyle=":",
                   zorder=1, label=plain(f"{name} {value:,.0f} ({whose})"))
    ax.plot(range(len(raw)), raw, color="black", linestyle=(0, (4, 3)), linewidth=1.1, label="raw (no compaction)",
            zorder=4)
    low = min([t for s in series for t in s["tokens"] if t > 0] + [top])
    if top / max(low, 1) > 30:  # the raw baseline dwarfs the policies: a log axis shows both
        from matplotlib.ticker import NullLocator

        ax.set_yscale("log")
        ax.yaxis.set_minor_locator(NullLocator())  # (unlabelled, ungridded: drawing them cost half the chart)
    occurred = {kind for s in series for kind, calls in s.get("events", {}).items() if calls}
    for kind, marker in MARKERS.items():
        if kind in occurred:  # only the markers the chart shows
            ax.scatter([], [], marker=marker, color="grey", label=f"{kind} compaction")
    ax.yaxis.set_major_formatter(_thousands())
    ax.set_xlabel("call")
    ax.set_ylabel("context tokens sent")
    ax.set_title(plain(title), fontsize=10)
    _legend_outside(ax)
    ax.grid(alpha=0.25)
    return _render(fig)


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
                 palette: dict[str, str], metric: str = "retention", floor: float | None = None) -> tuple[str, bytes]:
    """Cost saving against recall (or retention): a small point per run (transcript × policy),
    coloured by policy, and a large one per policy over all the transcripts, their Pareto front
    joined; ``floor``: the verdict's floor of that measure (a policy left of it is not recommended),
    drawn as a vertical line, and the break-even of cost (no saving) as a horizontal one."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label in palette:
        xs = [r for lab, r, _ in runs if lab == label]
        ys = [s for lab, _, s in runs if lab == label]
        if xs:
            ax.scatter(xs, ys, color=palette[label], s=10, alpha=0.45, zorder=2)
    points = [(r, s) for _, r, s in overall]
    front = pareto_front(points)
    shared: dict[tuple[float, float], list[str]] = {}  # policies on one point: one marker naming them all
    for label, r, s in overall:
        shared.setdefault((round(r, 4), round(s, 4)), []).append(label)
    for (r, s), labels in shared.items():
        ax.scatter([r], [s], color=palette.get(labels[0], "grey") if len(labels) == 1 else "white", s=70,
                   edgecolor="black", linewidth=0.6, zorder=3, label=plain(" = ".join(labels)))
        if len(labels) > 1:
            ax.annotate(plain(", ".join(labels)), (r, s), textcoords="offset points", xytext=(6, 6), fontsize=7)
    if len({points[i] for i in front}) > 1:  # a front is a line through two distinct points or more
        ax.plot([points[i][0] for i in front], [points[i][1] for i in front], color="black", linewidth=0.8,
                linestyle="--", zorder=1, label="Pareto front (all transcripts)")
    ax.xaxis.set_major_formatter(_percent())
    ax.yaxis.set_major_formatter(_percent())
    ax.axhline(0, color="black", linewidth=0.6)
    if floor is not None:
        ax.axvline(floor, color="firebrick", linewidth=0.9, linestyle=":", zorder=1,
                   label=f"the verdict's {metric} floor ({floor * 100:.1f}%)")
    ax.set_xlabel(PARETO_AXES[metric])
    ax.set_ylabel("cost saving vs no compaction")
    ax.set_title(f"cost saving against {metric}: small points one transcript each, large the policy overall",
                 fontsize=9)
    _legend_outside(ax)
    ax.grid(alpha=0.25)
    return _render(fig)


def savings_chart(savings: dict[str, list[float]], overall: dict[str, float], palette: dict[str, str],
                  note: str = "") -> tuple[str, bytes]:
    """Cost saving per transcript, a box per policy (its saving over all the transcripts marked);
    what replaces the Pareto chart when no transcript refers back to a tool result."""
    plt = _plt()
    labels = list(savings)
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * max(len(labels), 2)))
    box = ax.boxplot([savings[label] for label in labels], orientation="horizontal", patch_artist=True, widths=0.5,
                     showfliers=len(labels) * max(len(v) for v in savings.values()) < 5000,
                     medianprops={"color": "black"})
    for patch, label in zip(box["boxes"], labels):
        patch.set_facecolor(palette.get(label, "lightgrey"))
        patch.set_alpha(0.6)
    ax.scatter([overall[label] for label in labels], range(1, len(labels) + 1), marker="D", color="black", s=18,
               zorder=3, label="over all transcripts")
    ax.set_yticks(range(1, len(labels) + 1), [plain(label) for label in labels])
    ax.invert_yaxis()
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_xlabel("cost saving vs no compaction, per transcript")
    ax.set_title(plain("cost saving per transcript" + (f" ({note})" if note else "")), fontsize=9)
    _legend_outside(ax)
    ax.grid(alpha=0.25, axis="x")
    return _render(fig)


def tune_chart(trials: list[tuple[float, float, bool]], front: list[tuple[float, float]], base: tuple[float, float],
               x_label: str, y_label: str, title: str, shares: tuple[bool, bool] = (True, True)) -> tuple[str, bytes]:
    """Every trial of a tune (x: the second objective, y: the first), the infeasible ones as grey
    crosses, the Pareto front joined, the base policy as a star."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ok = [(x, y) for x, y, feasible in trials if feasible]
    bad = [(x, y) for x, y, feasible in trials if not feasible]
    if ok:
        ax.scatter([x for x, _ in ok], [y for _, y in ok], s=14, color="#4c72b0", alpha=0.5, label="trial", zorder=2)
    if bad:
        ax.scatter([x for x, _ in bad], [y for _, y in bad], s=18, color="grey", marker="x", alpha=0.7,
                   label="trial with a violation or overflow", zorder=2)
    if front:
        pts = sorted(front)
        ax.plot([x for x, _ in pts], [y for _, y in pts], color="black", linewidth=1 if len(pts) > 1 else 0,
                marker="o", markersize=5, label="Pareto front" if len(pts) > 1 else "front point", zorder=3)
        for number, (x, y) in enumerate(front, 1):  # numbered as in tune's table and front.csv
            ax.annotate(str(number), (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8, zorder=5)
    if shares[0]:
        ax.xaxis.set_major_formatter(_percent())
    if shares[1]:
        ax.yaxis.set_major_formatter(_percent())
    ax.scatter([base[0]], [base[1]], s=160, marker="*", color="#dd8452", edgecolor="black", linewidth=0.6,
               label="base policy", zorder=4)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(plain(title), fontsize=9)
    _legend_outside(ax)
    ax.grid(alpha=0.25)
    return _render(fig)
