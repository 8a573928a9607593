"""What ``compactlab compare`` does, as one library call (``compare_files``): the grid of policies
x swept values x transcripts run, the verdict shown as soon as the results are in, then the
charts and reports drawn; the output folder is replaced whole when all of it is written.

An interrupt while the grid runs keeps the runs that finished (written, and said); an interrupt
while the charts are drawn keeps results.csv and results.json. A part of a run (interrupted) is
written only where it replaces no complete earlier run: that one is kept. A run that fails is
named and the others go on; the exit status says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..corpus.compare import GridRun, build_grid, harness_settings, sweep_units, triggers, with_reference
from ..corpus.verdict import label_of
from ..engine.policy import acted_by_layer, idle_keys
from ..plain import dataclass
from ..plumbing.interrupts import exit_status
from ..plumbing.outputs import OutputDir
from .cluster import run_corpus
from .base import Notify, Outcome, ShowsProgress, Settings, calibrations_for, failures_said, load_all, no_progress, \
    quietly, say_before_runs

if TYPE_CHECKING:
    from ..reports.compare_report import Comparison
    from .next_action import Asking


#: what a compare runs where it is given no policy: no compaction and the seed designs (and the
#: preset of the harness that recorded the sessions: ``default_policies``)
DEFAULT_POLICIES = ("none", "s06", "s08")


def default_policies(files: list[str], input_format: str | None = None) -> tuple[list[str], str | None]:
    """The policies a compare of ``files`` runs where it is given none: ``DEFAULT_POLICIES``, and,
    where one harness whose compaction settings are known recorded every session (as its verdict
    reads them: ``compare_report.sessions_harness``; ``input_format``: the one the files are read
    as, where given), that harness's preset: what its user runs now, beside which the others are
    read. With the note that says so (None where nothing is added)."""
    from ..corpus.harness_settings import of_format
    from ..transcripts import recorded_format

    h = None
    for path in files:  # (each read as far as its format is known; no further once it is not one harness's)
        found = of_format(recorded_format(path, input_format))
        if found is None or (h is not None and found is not h):
            return list(DEFAULT_POLICIES), None
        h = found
    if h is None or h.preset in DEFAULT_POLICIES:
        return list(DEFAULT_POLICIES), None
    these = 'this session' if len(files) == 1 else 'these sessions'
    return [*DEFAULT_POLICIES, h.preset], (f"comparing {h.preset} too: {h.title}'s own compaction, which recorded "
                                           f"{these} (-p chooses)")


def _listed(grid: "Grid", files: list[str], notes: list[str], input_format: str | None) -> list:
    """The grid's runs (``build_grid``), of its policies or, where it names none, of
    ``default_policies``' (said in ``notes``): not the harness's preset where ``--set`` changes every
    policy (it would not be what its user runs)."""
    chosen, said = ((grid.policies, None) if grid.policies else (list(DEFAULT_POLICIES), None) if grid.overrides
                    else default_policies(files, input_format))
    if said is not None:
        notes.append(said)
    return build_grid(chosen, grid.overrides, grid.sweeps, notes)


@dataclass(kw_only=True)
class Grid:
    """What a compare runs: its policies (empty: ``default_policies``), the --set keys they share,
    and the swept values."""

    policies: list[str] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    sweeps: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Reporting:
    """How a compare reports: the table's sort key, the charts drawn, and the verdict's margin."""

    sort_key: str = "cost_saving"
    charts: str = "auto"  # auto, all, summary, none
    retention_margin: float = 0.05
    next_action: Asking | None = None  # also ask a model for the next action (costs money; None: not)


@dataclass
class Compared:
    """A compare's result: the comparison (None if no run finished), the grid's runs, the files
    written, and how it ended."""

    comparison: Comparison | None
    grid: GridRun | None
    written: list[str]
    outcome: Outcome


def _meta(done: Any, policies: list, reference: Any, sweep_keys: list[str], models: list[str] | None,
          settings: Settings) -> dict[str, Any]:
    """What the reports say of the comparison besides its results: prices, units, the reference,
    the triggers and harness settings, the windows judged on, what was interrupted or failed."""
    from ..reports.compare_report import report_meta

    table = settings.prices
    meta = report_meta(table.read, [settings.price_model] if settings.price_model else models or [table.default_model])
    meta["units"] = sweep_units(policies, sweep_keys)
    meta["reference"] = reference
    meta["triggers"] = triggers(policies, meta["units"], done.results)
    meta["harness_settings"] = harness_settings(policies, meta["units"])
    meta["windows"] = windows_judged(done.results)
    meta["cores"] = sorted({r.summary["core"] for r in done.results})  # (compactlab/core.py: which ran the runs)
    meta["dry_run"] = settings.dry_run  # (the terminal's table names no file a dry run did not write)
    if done.interrupted:
        meta["interrupted"] = f"{len(done.results)} of {done.total} runs"
    if done.failures:
        meta["failed"] = [f"{f.name}: {f.reason}" for f in done.failures]
    return meta


def compare_files(files: list[str], grid: Grid, settings: Settings, reporting: Reporting = Reporting(),
                  show: Callable[[Comparison], None] = lambda _: None, notify: Notify = quietly,
                  progress: ShowsProgress = no_progress) -> Compared:
    """Run the grid over ``files`` into ``settings.out_dir``; ``show`` sees the comparison once its
    results are in place, before the charts are drawn."""
    from ..reports.compare_report import comparison, results_files

    notes: list[str] = []
    listed = _listed(grid, files, notes, settings.input_format)
    policies, reference, added = with_reference(listed, grid.overrides)  # (added: no compaction, as the reference)
    for note in notes:
        notify(note, False)
    keys = [s.partition("=")[0] for s in grid.overrides]  # (a swept one is in the notes already)
    say_before_runs(policies, grid.overrides, notify, but=added, files=files)
    planned = None
    if reporting.next_action is not None:  # (its samples are drawn from the whole corpus: read whole first)
        loaded = load_all(files, settings, notify, progress)
        planned = _next_action_plan(loaded, policies, calibrations_for(loaded, settings.calibrate, quietly),
                                    reporting, settings, notify)
        del loaded
    out_dir = settings.out_dir or os.path.join("reports", "compare")
    out = OutputDir(out_dir, settings.dry_run, settings.force)
    try:
        out.prepare(protect=list(files))
        with progress("compare", len(files) * len(policies)) as advance:
            done, models, _ = run_corpus(files, policies, settings, notify, advance)
        failures_said(done.failures, notify)
        for line in _idle(done, policies, keys + [s.partition("=")[0].strip() for s in grid.sweeps]):
            notify(f"warning: {line}", False)
        if not done.results:
            out.rollback()
            why = "interrupted before any run finished" if done.interrupted else "no run finished"
            status = exit_status(done.interrupted) if done.interrupted else done.exit_code
            return Compared(None, done, [], Outcome(status, [f"{why}; nothing written"]))
        sweep_keys = [s.partition("=")[0].strip() for s in grid.sweeps]
        meta = _meta(done, policies, reference, sweep_keys, models, settings)
        result = comparison(done.results, sweep_keys, reporting.sort_key, meta, reporting.retention_margin)
        staged = results_files(result)
        out.write_all(staged)
        show(result)  # the verdict, before the charts are drawn
        stop, doing = None, ""
        if not out.dry_run:
            reports, stop, doing = _reports(result, done, planned, reporting, settings, progress)
            out.write_all(reports)
            staged.update(reports)
        # the run replaces the folder whole once it is complete; a part of one (interrupted) never
        # replaces a complete earlier run
        committed = out.commit(complete=done.interrupted is None and stop is None)
    except BaseException:
        out.rollback()
        raise
    names = list(staged) if committed else []
    if stop is not None:
        if committed:
            missing = (", ".join(n for n in ("report.md", "report.html") if n not in staged) or "the reports") + \
                (" and the charts" if not any(n.startswith("charts/") for n in staged) else "")
            return Compared(result, done, names, Outcome(exit_status(stop), [
                f"interrupted while {doing}: results.csv and results.json are in {out_dir}/; {missing} are missing"]))
        return Compared(result, done, names, Outcome(exit_status(stop), [
            f"interrupted while {doing}: the earlier complete run in {out_dir}/ is kept, not replaced by a part of "
            "one"]))
    if done.interrupted and not committed and not out.dry_run:
        return Compared(result, done, names, Outcome(exit_status(done.interrupted), [
            f"interrupted: {len(done.results)} of {done.total} runs finished; the earlier complete run in "
            f"{out_dir}/ is kept, not replaced by a part of one"]))
    return Compared(result, done, names, _ending(done, out_dir, names))


def _reports(result: Comparison, done: GridRun, planned: Any, reporting: Reporting, settings: Settings,
             progress: ShowsProgress) -> tuple[dict[str, Any], KeyboardInterrupt | None, str]:
    """The next-action replies (when asked for), the charts and the reports: the files made, the
    interrupt that cut them short, and what was being done then."""
    from ..reports.compare_report import chart_plan, report_files

    files: dict[str, Any] = {}
    if planned is not None:
        from ..reports.next_action_report import result_files

        agreement, stop = planned.ask(progress)
        result.meta["next_action"] = agreement.to_dict()
        answers = result_files(agreement)
        del answers["report.md"]  # (a section of the compare's own reports)
        files.update(answers)
        if stop is not None:
            return files, stop, "asking for next actions"
    try:
        with progress("charts and reports", len(chart_plan(result, done.results, reporting.charts))) as advance:
            files.update(report_files(result, done.results, reporting.charts, advance))
    except KeyboardInterrupt as stop:
        return files, stop, "drawing"
    return files, None, ""


def windows_judged(results: list) -> list[str]:
    """The context windows the runs were judged on, each once with how many transcripts it is of
    (every run of a transcript is judged on the same one: engine/window.py)."""
    by: dict[str, set[str]] = {}
    for r in results:  # (by size and source: the recording's own facts after ";" are each run's)
        described = str(r.summary.get("window_source") or f"{r.summary.get('window_tokens', 0):,} tokens")
        by.setdefault(described.split(";")[0], set()).add(r.transcript)
    return [f"{w} ({len(ts)} transcript{'s' if len(ts) > 1 else ''})"
            for w, ts in sorted(by.items(), key=lambda kv: -len(kv[1]))]


def _next_action_plan(loaded: list, policies: list, calibrations: list, reporting: Reporting, settings: Settings,
                      notify: Notify) -> Any:
    """The next-action requests of ``compare --next-action``, priced before any run (money first:
    above the limit nothing runs); no compaction is left out (its context is the control)."""
    if reporting.next_action is None:
        return None
    from dataclasses import replace

    from .next_action import planned_for, say_plan

    asked = [replace(p, name=label_of(p.name, dict(swept))) for p, swept in policies if p.acts]
    planned = planned_for(loaded, asked, calibrations, reporting.next_action, settings, notify)
    say_plan(planned.plan, reporting.next_action, notify)
    return None if settings.dry_run else planned


def _idle(done: GridRun, policies: list, keys: list[str]) -> list[str]:
    """The --set and --sweep keys that changed nothing: per policy, their layer is on but never
    acted in any of its runs (every swept value). (A layer that is off is said before the runs.)"""
    on = {p.name: {k for k in keys if getattr(getattr(p, k.partition(".")[0], None), "enabled", False)}
          for p, _ in policies}
    by: dict[str, list[Any]] = {}
    for r in done.results:
        by.setdefault(r.policy, []).append(r.summary)
    return [line for name, summaries in by.items()
            for line in idle_keys(name, [k for k in keys if k in on.get(name, ())], acted_by_layer(summaries),
                                  len(summaries))]


def _ending(done: GridRun, out_dir: str, written: list[str]) -> Outcome:
    if done.interrupted:
        return Outcome(exit_status(done.interrupted), [
            f"interrupted: {len(done.results)} of {done.total} runs finished"
            + (f"; they are in {out_dir}/" if written else "")])
    wrote = (f"wrote {out_dir}/: {', '.join(w for w in written if not w.startswith('charts/'))}, charts/"
             if written else None)
    if done.failures:
        return Outcome(done.exit_code, [f"{len(done.failures)} of {done.total} runs failed; the other "
                                        f"{len(done.results)} " + (f"are in {out_dir}/" if written else "are above")],
                       wrote)
    return Outcome(0, [], wrote)
