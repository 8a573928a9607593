"""A one-line chart of per-call values, made of block characters."""

from __future__ import annotations

from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int = 60) -> str:
    if not values:
        return ""
    if len(values) > width:  # each character shows the peak of its bucket
        step = len(values) / width
        values = [max(values[int(i * step): max(int((i + 1) * step), int(i * step) + 1)]) for i in range(width)]
    top = max(values)
    if top <= 0:
        return BARS[0] * len(values)
    return "".join(BARS[min(len(BARS) - 1, int(v / top * (len(BARS) - 1) + 0.5))] for v in values)
