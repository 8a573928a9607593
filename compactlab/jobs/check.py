"""What ``compactlab check`` does, as one library call (``check_files``): replay the transcripts
through the policies and hold each run to its record in the baseline (or, updating, write the
baseline), then the JUnit file and the GitHub step summary where asked for.

Every destination is checked before any run. An interrupt or a failed run never updates the
baseline; an interrupted check shows what it checked and fails.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Any

from ..corpus.check import (CheckResult, compare_record, find_record, load_baseline, parse_tolerances, record_for,
                            transcript_key, write_baseline)
from ..corpus.compare import build_grid
from ..corpus.guard import dearer_policies
from ..errors import cannot_write
from ..plain import dataclass
from ..plumbing.interrupts import exit_status
from ..plumbing.outputs import atomic_write_bytes, check_destination
from .cluster import run_corpus
from .base import Notify, Outcome, ShowsProgress, Settings, calibrations_for, failures_said, load_all, no_progress, shown, \
    quietly, say_before_runs
from .next_action import Asking, failed_said, planned_for, say_plan


@dataclass(kw_only=True)
class Gate:
    """What a check holds the runs to: the baseline file, its tolerances, and where it reports."""

    baseline: str
    policies: list[str] = field(default_factory=lambda: ["s08"])
    overrides: list[str] = field(default_factory=list)
    tolerances: list[str] = field(default_factory=list)  # X or METRIC=X
    update: bool = False  # write the baseline instead of checking against it
    allow_stale: bool = False
    junit: str | None = None
    #: also ask a model for the next action (costs money, not deterministic across model versions);
    #: a policy fails when its agreement is surely more than ``next_action_margin`` below the control's
    next_action: Asking | None = None
    next_action_margin: float = 0.10


@dataclass
class Checked:
    """A check's results (one per run; empty when the baseline was updated) and how it ended."""

    results: list[CheckResult]
    outcome: Outcome


def _check_destinations(files: list[str], gate: Gate) -> None:
    """Before any run: every file the check would write may be written (none of its inputs)."""
    inputs = [*files] if gate.update else [*files, gate.baseline]  # (what no output may replace)
    if gate.junit:
        check_destination(gate.junit, "--junit", inputs, replaces=(b"<?xml", b"<testsuites"))
    if gate.update:
        check_destination(gate.baseline, "--baseline", inputs)
    elif os.environ.get("GITHUB_STEP_SUMMARY"):
        check_destination(os.environ["GITHUB_STEP_SUMMARY"], "GITHUB_STEP_SUMMARY", inputs)


def _write_junit(gate: Gate, checked: list[CheckResult]) -> None:
    from ..reports.check_report import junit_xml

    if gate.junit:
        try:
            atomic_write_bytes(Path(gate.junit), junit_xml(checked), what="--junit")
        except OSError as exc:
            raise cannot_write(f"--junit {gate.junit}: cannot write", exc) from None


def check_files(files: list[str], gate: Gate, settings: Settings, show: Callable[[list[CheckResult]], None] =
                lambda _: None, notify: Notify = quietly, progress: ShowsProgress = no_progress) -> Checked:
    """Check ``files`` against ``gate.baseline`` (``show`` sees the results before the JUnit file
    and the step summary are written), or with ``gate.update`` write it."""
    from ..reports.check_report import append_step_summary

    tolerance = parse_tolerances(gate.tolerances)
    grid = build_grid(gate.policies, gate.overrides, [])  # (its policy files are inputs too)
    say_before_runs(grid, gate.overrides, notify, files=files)
    _check_destinations(files, gate)
    edited: list[str] = []
    old = {} if gate.update else load_baseline(gate.baseline, edited)
    for line in edited:
        notify(f"warning: {line}", True)
    planned = None
    if gate.next_action is not None and not gate.update:  # (priced before any run: money first)
        loaded = load_all(files, settings, notify, progress)
        planned = planned_for(loaded, [p for p, _ in grid if p.acts], calibrations_for(loaded, settings.calibrate),
                              gate.next_action, settings, notify)
        say_plan(planned.plan, gate.next_action, notify)
        del loaded
    with progress("check", len(files) * len(grid)) as advance:  # (a corpus read in parts: run_in_parts)
        done, _, hashes = run_corpus(files, grid, settings, notify, advance)
    failures_said(done.failures, notify)
    for policy in dearer_policies((r.transcript, r.policy, r.summary) for r in done.results):  # (guard.py's rule)
        notify(f"warning: {policy} costs more than no compaction on the transcripts where no compaction fits the "
               "window: compare would not recommend it (it recommends none there)", True)
    keys = {path: transcript_key(path, gate.baseline) for path in hashes}
    if gate.update:
        if done.interrupted or done.failures:
            why = "interrupted" if done.interrupted else f"{len(done.failures)} run(s) failed"
            status = exit_status(done.interrupted) if done.interrupted else done.exit_code
            return Checked([], Outcome(status, [f"{why}: {gate.baseline} not updated"]))
        write_baseline(gate.baseline, [record_for(keys[r.transcript], r.summary, hashes[r.transcript])
                                       for r in done.results])
        return Checked([], Outcome(wrote=f"wrote {gate.baseline}: {len(done.results)} record(s)"))
    checked = []
    for r in done.results:
        record, renamed_from = find_record(old, keys[r.transcript], r.summary)
        result = compare_record(keys[r.transcript], r.summary, hashes[r.transcript], record, tolerance, gate.allow_stale)
        result.renamed_from = renamed_from
        result.shown = shown(r.transcript)
        checked.append(result)
    show(checked)
    _write_junit(gate, checked)
    append_step_summary(checked)
    failing: list[str] = []
    if planned is not None and not done.interrupted:
        agreement, stop = planned.ask(progress)
        if stop is not None:
            return Checked(checked, Outcome(exit_status(stop), ["interrupted while asking for next actions: the check "
                                                                "is incomplete"]))
        failing = _next_action_gate(agreement, gate.next_action_margin, notify)
        failing += failed_said(agreement)
    if done.interrupted:
        return Checked(checked, Outcome(exit_status(done.interrupted), [
            f"interrupted: {len(done.results)} of {done.total} runs finished (checked above); "
            "the check is incomplete"]))
    return Checked(checked, Outcome(1 if done.failures or failing or not all(r.ok for r in checked) else 0, failing))


def _next_action_gate(agreement: Any, margin: float, notify: Notify) -> list[str]:
    """Each policy's next-action figures said, and the policies whose agreement is surely (the whole
    95% interval) more than ``margin`` below the control's."""
    failing = []
    for p in agreement.policies:
        if p.samples == 0:
            notify(f"next-action {p.policy}: nothing asked (no call's context differs from no compaction's)", False)
            continue
        if p.difference_interval is None:  # (a stratum with candidates and no answered sample)
            notify(f"next-action {p.policy}: {getattr(p, 'unknown', None) or 'no estimate'}", False)
            continue
        if getattr(p, "tells_nothing", False):  # (neither fails nor passes the policy on it: said)
            from ..reports.next_action_report import nothing_line

            notify(f"next-action {nothing_line(p.policy, p.control_agreement, p.chance_agreement)}", False)
            continue
        low, high = p.difference_interval
        line = (f"next-action {p.policy}: agreement {p.agreement:.0%} on its context, {p.control_agreement:.0%} on the "
                f"control over {p.samples} sample(s): difference {p.difference * 100:+.0f} points [{low * 100:+.0f}, "
                f"{high * 100:+.0f}]")
        if high < -margin:
            failing.append(f"{line}: surely more than {margin * 100:.0f} points below the control")
        else:
            notify(line, False)
    notify(agreement.spent_line(), False)
    return failing
