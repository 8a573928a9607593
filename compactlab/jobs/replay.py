"""Replays into their output folders, from the first file opened to the last folder put in place:
what ``compactlab replay`` does, as one library call (``replay_files``).

Each file is read while it is replayed unless a calibration or exact counts need it whole first,
so months of sessions never sit in memory together. Tokens are estimated by the fit to the
recorded usage wherever a transcript records enough of it (``calibrate`` None, the default), by
the policy's estimate with ``calibrate`` False. Each run writes into its own folder
(``reports/<transcript>-<policy>[-<fingerprint>]``, or ``--out``), staged and put in place whole
when the run is over (``outputs.OutputDir``); several transcripts replayed into one ``--out`` are
one run, a folder each inside it. Ctrl-C or SIGTERM keeps the runs that had finished (and their
folders) and says so in the result; any other failure removes what the unfinished run wrote and
is raised. What a user should hear on the way (a warning, a status line) goes to ``notify``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..corpus.calibration import MIN_CALLS, usable_calls
from ..engine.feeds import Feed, Opening
from ..engine.policy import Policy, acted_by_layer, idle_keys
from ..engine.cost.prices import ModelPrices
from ..engine.records import Run
from ..plain import dataclass
from ..plumbing.outputs import OutputDir, run_folder_name
from ..reports.terminal import UNKNOWN
from ..plumbing.process import collector_off
from ..errors import CompactlabError
from ..transcripts import FolderFile, UnknownFormat
from ..plumbing.interrupts import exit_status
from .base import Notify, Outcome, Reading, Settings, ShowsProgress, calibrated_line, no_progress, calibrations_for, \
    none_read, not_transcripts, price_warnings, prices_for, quietly, warn_loaded

if TYPE_CHECKING:
    from ..engine.loop import ReplayOptions, ReplayOutput


@dataclass(kw_only=True, eq=False, repr=False)
class ReplaySettings(Settings):
    """The settings of every job, and what a replay adds: its one policy, whether --set changed
    it, and whether it saves the contexts and draws its chart."""

    policy: Policy
    overridden: bool = False  # --set changed the policy: its default folder name says so
    overrides: tuple[str, ...] = ()  # the --set given (a key that changed nothing is said)
    write_transcripts: bool = False
    chart: bool = False

    @property
    def reading(self) -> Reading:
        """A policy that never acts cannot lose a probe (unless the recording's compactions are
        kept): its replay does not look for them."""
        return super().reading._replace(probes=self.policy.acts or self.keep_recorded_compactions)


class Replayed:
    """The runs that finished, of how many files, and the interrupt that stopped the rest. (A
    plain class, as ``base.Outcome``.)"""

    __slots__ = ("runs", "total", "interrupted", "folder", "kept")

    def __init__(self, runs: list[Run], total: int) -> None:
        self.runs, self.total = runs, total
        self.interrupted: KeyboardInterrupt | None = None
        #: the one folder that holds them all (several transcripts into one --out), else None
        self.folder: str | None = None
        #: that folder, when it held an earlier complete run that an interrupted one did not replace
        self.kept: str | None = None

    def outcome(self) -> Outcome:
        """How the replay ended: interrupted (what was kept, exit 130/143), or where each run
        wrote (a status line: stderr, silenced by --quiet; never on stdout)."""
        if self.interrupted is not None:
            if self.kept:
                return Outcome(exit_status(self.interrupted), [
                    f"interrupted: {len(self.runs)} of {self.total} transcripts replayed; the earlier complete run "
                    f"in {self.kept} is kept, not replaced by a part of one"])
            where = self.folder or ", ".join(r.out_dir for r in self.runs if r.out_dir)
            return Outcome(exit_status(self.interrupted), [
                f"interrupted: {len(self.runs)} of {self.total} transcripts replayed"
                + (f"; their reports are in {where}" if where else "")])
        wrote = [f"wrote {r.out_dir}/summary.json, calls.csv, probes.csv, compactions.csv"
                 for r in self.runs if r.out_dir]
        return Outcome(0, [], "\n".join(wrote) or None)


def replay_prepared(first: str, reading: Reading, prepare: Callable[[], tuple[list[str], ReplaySettings]],
                    notify: Notify = quietly, progress: ShowsProgress = no_progress) -> Replayed:
    """:func:`replay_files`, with the reading of the file ``first`` started before ``prepare``
    builds the files' list and the settings (a command's policy takes a while to build; a big file
    is meanwhile read by a second process, where it is read so). An error of that file is raised
    after ``prepare``'s own, as if it had been opened in turn."""
    # (a folder, a glob no shell expanded, or none given: nothing to start early)
    opening = reading.opening(first) if first and os.path.isfile(first) else None
    problem: CompactlabError | None = None
    try:
        try:  # (reads only the first lines: the collector stays as start-up left it)
            if opening is not None:
                opening.start()
        except CompactlabError as exc:
            problem, opening = exc, None
        files, settings = prepare()
        if problem is not None:
            raise problem
        if opening is not None and (files[:1] != [first] or settings.reading != reading):
            opening.close()
            opening = None
    except BaseException:
        if opening is not None:
            opening.close()
        raise
    return replay_files(files, settings, notify, opening, progress)


def replay_files(files: list[str], settings: ReplaySettings, notify: Notify = quietly,
                 first: Opening | None = None, progress: ShowsProgress = no_progress) -> Replayed:
    """Replay each file through ``settings.policy`` into its output folder (``first``: the first
    file's opening, its reading started already: :func:`replay_prepared`)."""
    s = settings
    done = Replayed([], len(files))
    fits: list = []  # the fits of the files replayed: one line for them all, each with --verbose
    skipped: list[str] = []  # files of folders that are no transcript
    used: set[str] = set()
    shared = OutputDir(s.out_dir, s.dry_run, s.force) if s.out_dir is not None and len(files) > 1 else None
    try:
        for i, path in enumerate(files):
            feed: Feed | None = None
            out = None
            try:
                try:
                    feed = open_for_replay(first if i == 0 and first is not None else s.reading.opening(path), notify)
                except UnknownFormat as exc:
                    if not isinstance(path, FolderFile):
                        raise
                    skipped.append(exc.message)
                    continue
                out = _out_for(feed, s, shared, used)
                out.prepare(protect=files)
                run = _replay_one(feed, s, out, notify, progress, fits, several=len(files) > 1)
                if shared is None:
                    out.commit()
            except BaseException:
                if out is not None:
                    out.discard()
                if feed is not None:  # a stream not read to the end: stop its reading (and reader)
                    feed.close()
                raise
            done.runs.append(run)
            del feed
    except KeyboardInterrupt as exc:  # the transcripts replayed so far are kept and reported
        if not done.runs:
            if shared is not None:
                shared.rollback()
            raise
        done.interrupted = exc
    except BaseException:
        if shared is not None:
            shared.rollback()
        raise
    _said_of_all(done, s, fits, skipped, len(files), notify)
    if shared is not None:
        try:
            if shared.commit(complete=done.interrupted is None):
                done.folder = shared.path
            else:
                done.kept = shared.path
        except BaseException:
            shared.rollback()
            raise
    return done


def _out_for(feed: Feed, s: ReplaySettings, shared: OutputDir | None, used: set[str]) -> OutputDir:
    """A file's output folder: its own, or one inside the folder of several (``shared``)."""
    name = run_folder_name(feed.name, s.policy, s.overridden, used)
    if shared is not None:
        return shared.sub(name)
    return OutputDir(os.path.join("reports", name) if s.out_dir is None else s.out_dir, s.dry_run, s.force)


def _replay_one(feed: Feed, s: ReplaySettings, out: OutputDir, notify: Notify, progress: ShowsProgress,
                fits: list, several: bool) -> Run:
    """One file replayed into ``out`` with its files written (its fit added to ``fits``)."""
    from ..engine.loop import ReplayOptions, ReplayOutput, replay
    from ..reports import write_chart, write_files
    from ..summarizers import build_counter, build_summarizer

    price = prices_for([feed], s.price_model, s.prices, notify)[0]
    calibration = calibrations_for([feed], s.calibrate, notify, details=several)[0]
    if calibration is not None and calibration.source == "recorded usage":
        fits.append(calibration)
    counter = build_counter(s.live, feed.system) if s.tokens == "anthropic" else None
    # requests to an API, or code of your own (or a framework's) at every call: a person may wait
    slow = s.summarizer != "stub" or counter is not None or s.policy.custom.enabled
    # (a stream's calls are counted as they are read: a bar without an end)
    total = (len(feed.transcript.call_positions) if hasattr(feed, "transcript") else UNKNOWN) if slow else 0
    with collector_off(), progress(f"replaying {os.path.basename(feed.path)}", total) as advance:
        run = replay(feed, s.policy,
                     ReplayOptions(summarizer=build_summarizer(s.summarizer, s.live),
                                   keep_recorded_compactions=s.keep_recorded_compactions, prices=price,
                                   counter=counter, cache_ttl=s.cache_ttl, calibration=calibration,
                                   cache_model=s.cache_model, on_call=advance if total else None, window=s.window),
                     ReplayOutput(out=out, write_transcripts=s.write_transcripts))
    if feed.streamed:  # read now: its model, bad lines and warnings are known
        if not isinstance(price, ModelPrices):
            price_warnings(price, feed, notify)
        warn_loaded(feed, notify)
        if s.calibrate is None and usable_calls(feed) >= MIN_CALLS:
            notify(f"warning: {feed.path}: recorded usage past the file's first lines: not calibrated "
                   "(the file was read as it was replayed); --calibrate fits it", False)
    if not run.calls:  # (its figures are all zero: said why, lest they read as a policy that did nothing)
        notify(f"note: {feed.path}: no call to replay (it holds no reply of the model)", False)
    if run.failed_summaries:
        notify(f"warning: {feed.path}: {len(run.failed_summaries)} summar(y/ies) failed, at call(s) "
               + ", ".join(str(f["call"]) for f in run.failed_summaries[:10])
               + f": {run.failed_summaries[0]['error']}", False)
    write_files(run, out)
    if s.chart and (unchartable := write_chart(run, s.policy, out)):
        notify(f"warning: {feed.path}: chart.svg not drawn: {unchartable}", True)
    return run


def _said_of_all(done: Replayed, s: ReplaySettings, fits: list, skipped: list[str], n_files: int,
                 notify: Notify) -> None:
    """What is said once of all the files: their fits, the folder files that are no transcript,
    the --set keys whose layer never acted."""
    if n_files > 1 and fits:
        notify(calibrated_line(fits), False)
    not_transcripts(skipped, notify)
    if skipped and not done.runs and not done.interrupted:
        raise none_read(len(skipped))
    policy = s.policy
    keys = [k for k in (o.partition("=")[0].strip() for o in s.overrides)
            if getattr(getattr(policy, k.partition(".")[0], None), "enabled", False)]
    for line in idle_keys(policy.name, keys, acted_by_layer([r.summary for r in done.runs]), len(done.runs)):
        notify(f"warning: {line}", False)


def open_for_replay(opening: Opening, notify: Notify = quietly) -> Feed:
    """One file's feed: read while it is replayed (its warnings come after the run) where its
    format and the settings allow; else loaded (its warnings now)."""
    with collector_off():
        feed = opening.feed()
    if not feed.streamed:
        warn_loaded(feed, notify)
    return feed


def replay(transcript: Any, policy: Policy, options: ReplayOptions | None = None, output: ReplayOutput | None = None,
           **given: Any) -> Run:
    """``compactlab.replay``: the engine's replay (``engine.loop.replay``: its arguments), the
    tokens estimated as the command line estimates them unless told otherwise: where
    ``calibration`` is left at ``AUTO`` and no ``estimator`` is given, a loaded transcript's fit to
    its recorded usage (``calibration.by_default``: at least 5 calls; fewer, its format's prior;
    none, the policy's estimate), so that the library and ``compactlab replay`` give one answer.
    A stream (``open_transcript``), read once, is not fitted: the policy's estimate, as the
    summary's calibration says. ``calibration=None`` asks for the policy's estimate."""
    from ..corpus.calibration import by_default
    from ..engine import loop
    from ..transcripts import Transcript

    options = options if options is not None else loop.ReplayOptions()
    calibration = given.get("calibration", options.calibration)
    if (isinstance(calibration, str) and calibration == loop.AUTO and given.get("estimator", options.estimator) is None
            and isinstance(source := getattr(transcript, "transcript", transcript), Transcript)):  # (a loaded feed's)
        given["calibration"] = by_default(source)[0]
    return loop.replay(transcript, policy, options, output if output is not None else loop.ReplayOutput(), **given)
