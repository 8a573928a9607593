"""Size measures (SPEC §5): compact-JSON characters and estimated tokens.

``chars`` of a context is the length of the compact JSON text of the message list; it is kept
incrementally from per-message lengths: ``sum(entry.chars) + commas + brackets``.
"""

from __future__ import annotations

import math

from ..plain import NamedTuple


def list_chars(sum_of_items: int, count: int) -> int:
    """Compact JSON length of a list whose items' lengths add up to ``sum_of_items``."""
    return sum_of_items + max(count - 1, 0) + 2


class TokenEstimator(NamedTuple):
    """tokens ≈ overhead + ceil(chars / chars_per_token) (the seeds' heuristic is chars/4)."""

    chars_per_token: float = 4.0
    overhead_tokens: int = 0

    def tokens(self, chars: int) -> int:
        return self.overhead_tokens + math.ceil(chars / self.chars_per_token)


class Calibration(NamedTuple):
    """The token estimate a run used: fitted to the recorded usage (``source`` "recorded usage",
    with its mean absolute percentage error over the ``calls`` it was fitted on), or the policy's
    own (``source`` "policy": no fit, ``mape`` None)."""

    overhead_tokens: int
    chars_per_token: float
    mape: float | None
    calls: int
    source: str = "recorded usage"

    def estimator(self) -> TokenEstimator:
        return TokenEstimator(self.chars_per_token, self.overhead_tokens)

    def to_dict(self) -> dict:
        return self._asdict()
