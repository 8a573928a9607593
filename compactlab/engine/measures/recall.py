"""Recall as a measure (``base.Measure``): of the hindsight probes of a call's reply (what the
agent later used of earlier results, ``probes.py``), how many the context sent holds, and how many
more a persisted output it points to holds; every probe's outcome in the run's ledger
(probes.csv), and per probe kind at the end.

Two implementations: ``Recall``, the reference, checks every call's probes against its context;
``IntactFirstRecall`` skips the reading while the context is the recording's own (every probe
kept where its first result stands). ``measures_for`` chooses; a property test holds the two to
the same runs.
"""

from __future__ import annotations

import sys
from collections.abc import Container, Iterable, Mapping, MutableSequence
from typing import Any

from ...plain import NamedTuple
from ..context import Context
from ..records import CompactionEvent
from .base import CallAt, after_first_run
from .probes import KINDS, Checked, Probe, ProbeMemo, ProbeOutcome, check, check_intact


class RecallRow(NamedTuple):
    """A call's probes, those kept and those recoverable (``TurnRecord``'s columns)."""

    probes: int
    probes_kept: int
    probes_recoverable: int


class RecallTotal(NamedTuple):
    """Per probe kind, its probes, kept and recoverable; and whether the probes were indexed
    (``summarize``'s keywords)."""

    probe_kinds: dict[str, dict[str, int]]
    probes_indexed: bool


class Recall:
    """The reference: every call's probes checked against the context sent (``probes.check``).
    ``env``: the run's ``RunEnv``, whose ledger says which layer made or cleared a message."""

    def __init__(self, probes: Mapping[int, list[Probe]], env: Any, indexed: bool = True, native: Any = None,
                 shared: Any = None) -> None:
        self.probes, self.env, self.indexed = probes, env, indexed
        #: the native module where the native core runs (its check, and the ledger's tallies)
        self.native = native
        #: every probe's outcome, call by call: on the native core held in Rust (``_native.ProbeLedger``,
        #: a sequence of ``ProbeOutcome``s its check appends to without making them), else a list
        self.ledger: MutableSequence[ProbeOutcome] = (
            native.ProbeLedger(ProbeOutcome, getattr(probes, "rows", 0) if type(probes) is native.StoredProbes else 0)
            if native is not None else [])
        #: edited messages' texts, results gone (``native``: the native core checks, with a memo of its
        #: own, and ``shared``, the recording's messages it knows for every run: ``shared_messages``)
        self.memo = ProbeMemo(native, shared)
        #: the lowest position a layer changed at the calls since the last check: how many of the
        #: next context's first messages are at most the last checked one's (the native check keeps
        #: what it knows of those)
        self.stable = sys.maxsize

    def at_call(self, at: CallAt, context: Context) -> RecallRow | None:
        if at.changed_from < self.stable:
            self.stable = at.changed_from
        probes = self.probes.get(at.call, ())  # (kept: a stream's go to the probe cache at its end)
        if not probes:
            return None
        checked = self._check(probes, at, context)
        return RecallRow(len(probes), checked.kept, checked.recoverable)

    def natively(self) -> tuple | None:
        """What a native loop asks this recall's row of each call of, itself, where its check is
        the native core's (``_native.LayerTurns``' ``native_recall``: ``at_call`` is its reference):
        the probes by call, the ledger, the check, the run's ledger of what each layer did, and
        whether a context that is the recording's own is not read. None: the loop asks ``at_call``
        (the python core, or another recall than these two, a test's)."""
        native = self.memo.native
        stored = self.native.StoredProbes if self.native is not None else dict
        if native is None or type(self) not in (Recall, IntactFirstRecall) or type(self.probes) not in (dict, stored):
            return None
        return (self.probes, self.ledger, native, self.env.ledger if self.env is not None else None,
                type(self) is IntactFirstRecall)

    def _check(self, probes: list[Probe], at: CallAt, context: Context) -> Checked:
        """``probes.check`` of the context, told how much of it the last one checked had."""
        stable, self.stable = self.stable, sys.maxsize
        return check(probes, context, at.call, self.ledger, self.env, self.memo, stable)

    def finish(self) -> RecallTotal:
        return RecallTotal(self.kinds(), self.indexed)

    def kinds(self) -> dict[str, dict[str, int]]:
        """Per probe kind that occurred: how many probes, kept and recoverable (counted by the
        native core where it runs: ``_native.ledger_kinds``, ``kinds_of`` its reference)."""
        if self.native is None:
            return kinds_of(self.ledger)
        counts = self.native.ledger_kinds(self.ledger, KINDS)
        return {k: {"probes": n, "kept": kept, "recoverable": recoverable}
                for k, (n, kept, recoverable) in zip(KINDS, counts) if n}

    def losses(self, events: list[CompactionEvent]) -> list[CompactionEvent]:
        """``events``, each with the used strings it removed and the call that first needed each
        (found and appended by the native core where it runs: ``_native.append_losses``,
        ``losses_of`` its reference)."""
        if self.native is not None and self.native.append_losses(self.ledger, events):
            return events
        by_call = {e.call: e for e in events}
        for at, text, needed in losses_of(self.ledger, by_call):
            by_call[at].lost.append((text, needed))
        return events


class IntactFirstRecall(Recall):
    """``Recall`` that does not read a context that is the recording's own (``CallAt.intact``):
    every probe is kept there (``probes.check_intact``); a replay of a policy that acts late, or
    never, checks nothing until it acts."""

    def _check(self, probes: list[Probe], at: CallAt, context: Context) -> Checked:
        if at.intact:
            return check_intact(probes, context, at.call, self.ledger)
        return super()._check(probes, at, context)


def kinds_of(ledger: Iterable[ProbeOutcome]) -> dict[str, dict[str, int]]:
    """Per probe kind that occurred in ``ledger``: how many probes, kept and recoverable."""
    out = {k: {"probes": 0, "kept": 0, "recoverable": 0} for k in KINDS}
    for p in ledger:
        row = out[p.kind]
        row["probes"] += 1
        if p.status != "lost":
            row[p.status] += 1
    return {k: v for k, v in out.items() if v["probes"]}


def losses_of(ledger: Iterable[ProbeOutcome], calls: Container[int]) -> list[tuple[int, str, int]]:
    """The probes of ``ledger`` not kept that a layer removed at one of ``calls``: each (that call,
    the probe, the first call that needed it), in that order."""
    first: dict[tuple[int, str], int] = {}
    for p in ledger:
        if p.status != "kept" and p.removed_at in calls:
            key = (p.removed_at, p.probe)
            first[key] = min(first.get(key, p.call), p.call)
    return [(at, text, needed) for (at, text), needed in sorted(first.items(),
                                                               key=lambda kv: (kv[0][0], kv[1], kv[0][1]))]


def shared_messages(memo: dict, native: Any) -> Any:
    """What the native check knows of a recording's own messages (its facts and texts), for the runs
    of it after the first (``_native.KnownMessages``: ``base.after_first_run``)."""
    return after_first_run(memo, _SHARED, native.KnownMessages)


_SHARED = ("recall", "the recording's messages")
