"""The stub summarizer's helpers keep their simple meaning when they take shortcuts."""

from __future__ import annotations

import random

from compactlab.summarizers.stub import _clip


def test_clip_from_a_prefix_is_clip_of_the_whole_text():
    def plain(text: str, n: int) -> str:
        text = " ".join(text.split())
        return text if len(text) <= n else text[: n - 1] + "…"

    rng = random.Random(7)
    for _ in range(3000):
        n = rng.choice([2, 10, 50, 300])
        text = "".join(rng.choice(["a", "bc", " ", "\n", "   ", "\t\t", "word "]) for _ in range(rng.randint(0, 1500)))
        assert _clip(text, n) == plain(text, n)
