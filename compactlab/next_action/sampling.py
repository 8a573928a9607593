"""Which calls the next-action check asks about (issue #30 §1).

A call is a candidate for a policy where the context the policy sent differs from what no
compaction sends (the replay's ``chars`` or ``messages`` differ from the raw ones: after a summary,
a snip, a cleared or persisted result) and the recorded reply has an action to compare with. The
candidates fall in two strata: calls at which a hindsight probe was lost, and the others; each
policy's ``n`` samples are drawn across the corpus, half from each stratum where it has enough
(the other takes up what one lacks), with a generator seeded by the seed and the policy's name:
the same inputs and seed, the same samples.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ..engine.records import TurnRecord


@dataclass(frozen=True)
class Candidate:
    """A call a policy's context differs at: ``transcript`` its index in the corpus."""

    transcript: int
    call: int
    lost: bool  # a hindsight probe of the reply was lost (not in the context, not recoverable)


def differs(record: TurnRecord) -> bool:
    """Whether the context the policy sent at this call is not what no compaction sends."""
    return record.chars != record.raw_chars or record.messages != record.raw_messages


def lost_at(record: TurnRecord) -> bool:
    return record.probes - record.probes_kept - record.probes_recoverable > 0


def choose(candidates: list[Candidate], n: int, seed: int, label: str) -> list[Candidate]:
    """``n`` of ``candidates``, stratified by ``lost`` (see the module's docstring), in corpus order."""
    lost = sorted((c for c in candidates if c.lost), key=_order)
    kept = sorted((c for c in candidates if not c.lost), key=_order)
    n = min(n, len(lost) + len(kept))
    from_lost = min(len(lost), math.ceil(n / 2))
    from_kept = min(len(kept), n - from_lost)
    from_lost = n - from_kept  # (the lost stratum takes up what the other lacks)
    rng = random.Random(f"{seed}:{label}")
    chosen = rng.sample(lost, from_lost) + rng.sample(kept, from_kept)
    return sorted(chosen, key=_order)


def _order(c: Candidate) -> tuple[int, int]:
    return c.transcript, c.call
