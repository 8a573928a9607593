"""What ``compactlab next-action`` does, as one library call (``next_action_files``): replay and
sample, price the requests, stop if they cost more than allowed (or show them: ``--dry-run``),
ask the model, and put the figures and the ledger in the output folder.

Money first: nothing is sent before the estimate is made and is within ``max_cost``. An interrupt
while the model is asked keeps every reply that came back (in the cache, and in the files written
with what finished) and exits 130/143.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import field

from ..engine.policy import load_policy
from ..errors import UsageError
from ..next_action import Agreement, Plan, ask, plan, tally
from ..next_action.models import Asker, ModelOptions
from ..next_action.plan import ENOUGH_MARGIN
from ..plain import dataclass
from ..plumbing.interrupts import exit_status
from ..plumbing.outputs import OutputDir
from .base import Notify, Outcome, ShowsProgress, Settings, calibrations_for, load_all, no_progress, price_warning, \
    quietly, say_before_runs


#: where the files go without --out
DEFAULT_OUT = os.path.join("reports", "next-action")


@dataclass(kw_only=True)
class Asking:
    """What a next-action check asks: of which policies, how many samples, of whom, for how much."""

    policies: list[str] = field(default_factory=lambda: ["s08"])
    overrides: list[str] = field(default_factory=list)
    samples: int = 20
    seed: int = 0
    model: ModelOptions
    max_cost: float = 1.0
    #: the system prompt sent where a format records none: its text and its file (None: a stand-in)
    system_prompt: tuple[str, str] | None = None


@dataclass
class Asked:
    """How it went: the plan (None if the inputs failed first), the result once asked, the files
    written, and the ending."""

    plan: Plan | None
    result: Agreement | None
    written: list[str]
    outcome: Outcome


def next_action_files(files: list[str], asking: Asking, settings: Settings, notify: Notify = quietly,
                      progress: ShowsProgress = no_progress,
                      show_plan: Callable[[Plan], None] = lambda _: None) -> Asked:
    """Check ``files`` under ``asking`` into ``settings.out_dir``; ``show_plan`` sees the samples and
    the estimate before anything is sent (and is all a dry run does)."""
    policies = [load_policy(ref, asking.overrides) for ref in asking.policies]
    say_before_runs([(p, ()) for p in policies], asking.overrides, notify, files=files)
    names = [p.name for p in policies]
    if len(set(names)) < len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise UsageError(f"policy {', '.join(twice)} named twice: each policy is asked about once",
                         hint="give a policy file a name of its own (name = \"...\") to compare variants")
    out_dir = settings.out_dir or DEFAULT_OUT
    out = OutputDir(out_dir, settings.dry_run, settings.force)
    try:
        out.prepare(protect=files)  # (before any work: a folder that cannot be used costs nothing)
        loaded = load_all(files, settings, notify, progress)
        calibrations = calibrations_for(loaded, settings.calibrate, notify)
        planned = planned_for(loaded, policies, calibrations, asking, settings, notify)
        show_plan(planned.plan)
        if settings.dry_run:
            return Asked(planned.plan, None, [], Outcome(0))
        result, interrupted = planned.ask(progress)
        written = _write(result, out, complete=interrupted is None)
    except BaseException:
        out.rollback()
        raise
    if interrupted is not None:
        where = f"cache and {out_dir}/" if written else f"cache; the earlier complete run in {out_dir}/ is kept"
        return Asked(planned.plan, result, written, Outcome(exit_status(interrupted), [
            f"interrupted: the replies that came back are kept ({where})"]))
    errors = failed_said(result)
    return Asked(planned.plan, result, written, Outcome(1 if errors else 0, errors,
                                                        f"wrote {out_dir}/: {', '.join(written)}" if written else None))


@dataclass
class Planned:
    """A plan priced and within its limit, and who will answer it (``ask`` sends it)."""

    plan: Plan
    asker: Asker
    names: list[str]  # the policies, in order

    def ask(self, progress: ShowsProgress = no_progress) -> tuple[Agreement, BaseException | None]:
        """Ask what the cache does not answer: the result, and the interrupt that cut it short."""
        o = self.asker.options
        if self.plan.requests:
            o.api_key()  # (a missing key is said before the first request, not at it)
        interrupted: BaseException | None = None
        try:
            with progress("asking", self.plan.requests) as advance:
                ask(self.plan, self.asker, advance)
        except KeyboardInterrupt as stop:
            interrupted = stop
        return (Agreement(o.model, o.api, tally(self.plan, self.names), self.plan.samples, self.plan, self.asker.sent,
                          interrupted=interrupted is not None), interrupted)


def say_plan(plan: Plan, asking: Asking, notify: Notify) -> None:
    """What a job that asks the model says of its plan before any request (next-action, compare and
    check alike): the samples not sent, then the estimate."""
    from ..reports.next_action_report import plan_lines

    for line in plan_lines(plan, asking.model.model, asking.model.api, asking.max_cost):
        notify(line, False)


def planned_for(loaded: list, policies: list, calibrations: list, asking: Asking, settings: Settings,
                notify: Notify = quietly) -> Planned:
    """Sample and price the requests for ``policies`` over the ``loaded`` transcripts; above
    ``asking.max_cost`` a UsageError (nothing is sent; a dry run only shows it)."""
    from ..reports.text import visible

    model = asking.model
    prices = price_warning(settings.prices, settings.prices.lookup(model.model), notify)
    asker = Asker(model)
    p = plan(loaded, policies, samples=asking.samples, seed=asking.seed, asker=asker, prices=prices,
             calibrations=calibrations, price_table=settings.prices,
             keep_recorded_compactions=settings.keep_recorded_compactions, system_prompt=asking.system_prompt)
    for note in p.notes:
        notify(visible(note) if "the control replays" in note else f"warning: {visible(note)}", False)
    stand_ins = sum(source.startswith("stand-in") for source in p.systems.values())
    if stand_ins:
        notify(f"next-action system prompt: a stand-in for {stand_ins} transcript(s) whose format records none "
               "(--system-prompt FILE sends yours)", False)
    if any(source == "built" for source in p.tools.values()):
        notify("next-action tools: built from the recorded calls' names and argument keys (no format here keeps "
               "the definitions)", False)
    if asker.cache is not None:
        for problem in asker.cache.problems:
            notify(f"warning: {problem}", False)
    if not settings.dry_run and p.estimate_usd > asking.max_cost:
        raise UsageError(f"the next-action requests would cost about ${p.estimate_usd:,.2f} at most ({p.requests} "
                         f"request(s) to {model.model}), above --max-cost ${asking.max_cost:,.2f}: nothing was sent",
                         hint=f"--max-cost {p.enough_usd:.2f} spends it (the estimate and {ENOUGH_MARGIN:.0%} more); "
                              "fewer samples cost less; --dry-run lists them")
    return Planned(p, asker, [policy.name for policy in policies])


def failed_said(result: Agreement) -> list[str]:
    failed = sum(a.failed for a in result.policies)
    return [f"{failed} next-action sample(s) have a failed request (samples.csv names each); the figures are of "
            "the others"] if failed else []


def _write(result: Agreement, out: OutputDir, complete: bool) -> list[str]:
    """The result's files put in place (none where an interrupted run would replace a complete one)."""
    from ..reports.next_action_report import result_files

    files = result_files(result)
    out.write_all(files)
    return list(files) if out.commit(complete) else []

