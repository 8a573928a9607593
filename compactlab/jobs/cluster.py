"""Where a corpus job's runs run (``run_corpus``), and a corpus job (compare, check) on workers that
read the files themselves (``run_on_workers``): each task reads files, indexes their probes,
calibrates and prices them and runs every policy on each; the command reads none of them. It says
what the workers found (bad lines, a file's warnings, its calibration, the models it records and
their prices) in the files' order, as it would have said it on reading them, and keeps the runs'
summaries. The workers are a Dask cluster's where they can read the files (#59 §5: the command read
every transcript before the workers read it again, a third of a cluster compare's extra CPU), or the
command's own forked processes (``LocalWorkers``) where the corpus has files enough to share out: a
worker that inherited the transcripts the command had read touched their pages, and each page it
touched was copied (a compare of 200 trajectories faulted 102,000 pages against 18,000 in one
process, and spent a quarter more CPU).

Where the workers cannot all read the files, or a local corpus is a few files (one session and its
sweep: its runs are shared out one by one), ``run_in_parts`` reads them here and the workers get them
(forked after reading, or sent to the cluster: ``corpus.compare``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import field
from typing import Any

from ..corpus.compare import Cluster, GridRun, Job, RunFailure, RunResult, run_job, summarizer_of
from ..corpus.pool import Failure, Pool, can_fork, failure_of
from ..corpus.sharing import Sharing
from ..engine.cost.prices import PriceTable
from ..errors import CompactlabError
from ..plain import NamedTuple, dataclass
from ..plumbing.process import allocator_kept, collector_paused, usable_cores, worker_collecting
from .base import Notify, Settings, Tally, cache_warnings, none_read, parts_of, price_warning, run_in_parts, \
    say_calibration, warn_loaded

class Reading(NamedTuple):
    """How a worker reads, calibrates and runs a file: the settings that decide it (no key, no
    output folder; ``summarizer``: (kind, LiveOptions), each worker builds its own)."""

    input_format: str | None
    skip_bad_lines: bool
    calibrate: bool | None
    write_probes: bool
    prices: PriceTable  # (priced by it, or by --price-model's prices in it; the command says the warnings)
    price_model: str | None
    keep_recorded_compactions: bool
    summarizer: tuple[str, Any]
    cache_ttl: str | None
    cache_model: str | None
    window: int | None


@dataclass
class FileDone:
    """What a worker found of one file and the runs it made of it: a transcript's facts for what the
    command says, or the folder's file that is no transcript (``skipped``), or the error that
    stops the job (``error``: an input the user named that cannot be read)."""

    path: str
    skipped: str | None = None
    error: CompactlabError | None = None
    content_hash: str = ""
    skipped_lines: int = 0
    warnings: list[Any] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    calibrated: bool = False  # (False: --no-calibrate)
    calibration: Any = None
    why: str | None = None
    #: the error of its calibration (``--calibrate`` on a file that records no usage): it stops the
    #: job where the file's calibration is said
    calibration_error: CompactlabError | None = None
    #: why its runs gave nothing where its batch was lost (its worker lost for good), or "" where the
    #: batch was not back when the job was interrupted (the file left out)
    lost: str | None = None
    runs: list[RunResult | Failure] = field(default_factory=list)  # in the grid's order of policies


def run_files(batch: list[tuple[str, str]], policies: list, reading: Reading) -> list[FileDone]:
    """A task: each (path as given, its absolute path) read and run with every policy. The
    worker's collector is paused meanwhile (``collector_paused``) and its allocator keeps what the
    reading frees (``allocator_kept``)."""
    with collector_paused(), allocator_kept():
        summarizer = summarizer_of(reading.summarizer)
        return [_run_file(given, path, policies, reading, summarizer) for given, path in batch]


def _run_file(given: str, path: str, policies: list, r: Reading, summarizer: Any) -> FileDone:
    from ..engine.measures import probe_cache
    from ..transcripts import FolderFile, UnknownFormat, load_transcript
    from .base import calibration_of, recorded_models

    where = given if os.path.abspath(given) == path else path  # (as given where it is the same file here)
    try:
        t = load_transcript(where, r.input_format, skip_bad_lines=r.skip_bad_lines)
        probe_cache.baseline_of(t, write=r.write_probes)
    except UnknownFormat as exc:
        if isinstance(given, FolderFile):
            return FileDone(given, skipped=exc.message.replace(where, given))
        return FileDone(given, error=exc)
    except CompactlabError as exc:
        return FileDone(given, error=exc)
    done = FileDone(given, content_hash=t.content_hash, skipped_lines=t.skipped_lines, warnings=list(t.warnings),
                    models=recorded_models(t), calibrated=r.calibrate is not False)
    try:
        done.calibration, done.why = calibration_of(t, r.calibrate) if done.calibrated else (None, None)
    except CompactlabError as exc:  # (--calibrate on a file without usage: said where its calibration is)
        done.calibration_error = exc
        return done
    cal = done.calibration
    prices = r.prices.lookup(r.price_model) if r.price_model else r.prices
    for k, (policy, swept) in enumerate(policies):
        try:
            run = run_job(Job(k, 0, policy, swept), t, prices, cal, r.keep_recorded_compactions, summarizer,
                          r.cache_ttl, r.cache_model, r.window)
            run.transcript = run.summary.transcript = given
            done.runs.append(run)
        except Exception as exc:
            done.runs.append(failure_of(k, exc))
    return done


def reading_of(settings: Settings) -> Reading:
    return Reading(settings.input_format, settings.skip_bad_lines, settings.calibrate, not settings.dry_run,
                   settings.prices, settings.price_model, settings.keep_recorded_compactions,
                   (settings.summarizer, settings.live), settings.cache_ttl, settings.cache_model, settings.window)


#: a local corpus of at least this many files a worker is read by the workers themselves, a file a
#: task (``LocalWorkers``); fewer are read here and their runs shared out one by one
FILES_PER_WORKER = 4


def run_corpus(files: list[str], policies: list, settings: Settings, notify: Notify,
               advance: Callable[..., None]) -> tuple[Any, list[str], dict[str, str]]:
    """Every policy on every file (compare, check): on the Dask cluster of ``--executor`` read by its
    workers where they share the files, or on local workers that read them where the corpus has
    ``FILES_PER_WORKER`` files a worker (``run_on_workers``), else read here a part at a time
    (``run_in_parts``: run here, on local workers, or sent to the cluster's). The runs, the models
    the transcripts recorded, and each transcript's content hash."""
    if not settings.executor:
        n = settings.jobs or usable_cores()
        if n > 1 and len(files) >= FILES_PER_WORKER * n and can_fork():
            return run_on_workers(LocalWorkers(n), files, policies, settings, notify, advance)
        return run_in_parts(files, policies, settings, notify, advance)
    with Cluster(settings.executor) as cluster:
        if cluster.shares([os.path.abspath(f) for f in files]):
            return run_on_workers(cluster, files, policies, settings, notify, advance)
        return run_in_parts(files, policies, settings, notify, advance, cluster)


class LocalWorkers:
    """``processes`` forked workers of the command that read the files themselves: to
    ``run_on_workers`` what a ``Cluster`` is. A task is one file (a task's cost here is a pipe's
    round trip), handed out in the files' order; a worker that dies loses its file's runs, which
    fail with the reason, and a fresh one takes the next file."""

    def __init__(self, processes: int) -> None:
        self.threads = processes

    def batches(self, items: list[Any]) -> list[list[Any]]:
        return [[item] for item in items]

    def each(self, work: Callable[..., Any], batches: list[Any], *args: Any) -> Iterator[tuple[int, Any]]:
        """``work(batch, *args)`` of each batch on the workers: (the batch's place, what it returned
        or the Failure that lost it), as each finishes; leaving early (an interrupt) kills them."""
        from ..engine import loop  # noqa: F401  (imported once, before the workers are forked)
        from ..engine.measures import probe_cache  # noqa: F401
        from ..summarizers import preload

        for arg in args:  # (a live summarizer's SDK too: a Reading names its kind)
            if isinstance(arg, Reading):
                preload(arg.summarizer[0])

        def task(batch: Any) -> Any:
            worker_collecting()
            return work(batch, *args)

        with Pool(batches, task, self.threads) as pool:
            yield from pool.outcomes()


def run_on_workers(workers: "Cluster | LocalWorkers", files: list[str], policies: list, settings: Settings,
                   notify: Notify, advance: Callable[..., None]) -> tuple[GridRun, list[str], dict[str, str]]:
    """``run_in_parts`` on workers that read the files: the runs, the models the transcripts
    recorded and each one's content hash. What is said of a file is said in the files' order once
    every file before it is back; an input that cannot be read stops the job with its error (the
    first in the files' order); an interrupt keeps the files whose runs are back."""
    batches = workers.batches([(f, os.path.abspath(f)) for f in files])  # (as given, and absolute)
    grid = _Grid(batches, policies, settings, notify)
    try:
        for i, got in workers.each(run_files, batches, policies, reading_of(settings)):
            if isinstance(got, list):
                for f in got:
                    for run in f.runs:
                        if isinstance(run, RunResult):
                            advance(run)
            grid.back[i] = got
            while grid.said in grid.back:
                grid.take(grid.back.pop(grid.said))
    except KeyboardInterrupt as stop:  # what is back is kept, in order (a batch not back: its files left out)
        try:
            for i in range(grid.said, len(batches)):
                grid.take(grid.back.pop(i, None))
            if grid.pending:
                grid.say_part()
        except CompactlabError:  # (an input that cannot be read among them: the interrupt ends the job)
            pass
        if not grid.done.results:
            raise
        grid.done.interrupted = stop
    grid.tally.say(notify)
    if not grid.read and grid.tally.skipped:
        raise none_read(len(grid.tally.skipped))
    grid.done.total = (len(files) - len(grid.tally.skipped)) * len(policies)
    return grid.done, list(grid.models), grid.hashes


def _lost(given: str, reason: str, input_format: str | None) -> FileDone:
    """A file of a batch that did not come back: lost (its worker lost for good, ``reason`` why) or
    not back when the job was interrupted (``reason`` ""). A folder's file that is no transcript is
    skipped, as the worker would have skipped it (its head read here: a lost batch does not make a
    failed run of a file that was never one); the others' runs fail with the reason, or are left out."""
    from ..transcripts import FolderFile, UnknownFormat, detect_format

    if reason and isinstance(given, FolderFile) and input_format is None:
        try:
            detect_format(str.__str__(given))
        except UnknownFormat as exc:
            return FileDone(given, skipped=exc.message)
        except CompactlabError:
            pass  # (unreadable here too: its runs fail with the reason the batch was lost)
    return FileDone(given, lost=reason)


class _Grid:
    """The batches' files taken in the files' order, said a part of the corpus at a time as
    ``run_in_parts`` says them on reading the part (``parts_of``: its files' bad lines and warnings,
    their prices, their calibrations), their runs numbered as it numbers them."""

    def __init__(self, batches: list[list[tuple[str, str]]], policies: list, settings: Settings,
                 notify: Notify) -> None:
        self.batches, self.policies, self.settings, self.notify = batches, policies, settings, notify
        files = [given for batch in batches for given, _ in batch]
        self.parts = [len(part) for part in parts_of(files)]
        self.tally = Tally(sources=len(files))
        self.back: dict[int, list[FileDone] | BaseException | Failure] = {}
        self.said = 0  # the batches taken so far
        self.pending: list[FileDone] = []  # the files taken of the part not yet said
        self.read = 0  # the transcripts said so far
        self.done = GridRun([], [], 0)
        self.sharing = Sharing()
        self.models: dict[str, None] = {}  # (in the order first recorded)
        self.hashes: dict[str, str] = {}

    def take(self, got: list[FileDone] | BaseException | Failure | None) -> None:
        """The next batch: its files, or the error or Failure that lost it (each of its files' runs
        a failure), or None (not back: interrupted; its files are left out)."""
        batch = self.batches[self.said]
        self.said += 1
        if not isinstance(got, list):
            reason = "" if got is None else got.reason if isinstance(got, Failure) else failure_of(0, got).reason
            got = [_lost(given, reason, self.settings.input_format) for given, _ in batch]
        for f in got:
            self.pending.append(f)
            if len(self.pending) == self.parts[0]:
                self.say_part()

    def say_part(self) -> None:
        """What is said of the files of a part (all taken, or the last ones taken: interrupted) and
        their runs kept; an input that cannot be read is raised where ``load_all`` raises it."""
        files, self.pending = self.pending, []
        self.parts[0] -= len(files)
        if not self.parts[0]:
            self.parts.pop(0)
        notify, table = self.notify, self.settings.prices
        transcripts = []
        for f in files:
            if f.error is not None:
                raise f.error
            if f.skipped is not None:
                self.tally.skipped.append(f.skipped)
            elif f.lost is None or f.lost:  # (a file of a lost batch: its runs fail; not back: left out)
                if f.lost is None:
                    warn_loaded(f, notify)
                transcripts.append(f)
        if self.settings.price_model:
            price_warning(table, table.lookup(self.settings.price_model), notify)
        else:
            for f in transcripts:
                for model in f.models:
                    price_warning(table, table.lookup(model), notify)
                cache_warnings(table, notify)
        cache_warnings(table, notify)
        for f in transcripts:
            if f.calibration_error is not None:
                raise f.calibration_error
            if f.calibrated:
                self.tally.estimated += say_calibration(f.path, f.calibration, f.why, self.tally.sources > 1, None,
                                                        notify, self.tally.fits)
        P = len(self.policies)
        for f in transcripts:
            self.read += 1
            self.models.update(dict.fromkeys(f.models))
            if f.lost is None:
                self.hashes[f.path] = f.content_hash
            for k, (policy, swept) in enumerate(self.policies):
                run = f.runs[k] if f.lost is None else Failure(k, f.lost)
                if isinstance(run, Failure):
                    self.done.failures.append(RunFailure((self.read - 1) * P + k, f.path, policy.name, dict(swept),
                                                         run.reason,
                                                         run.error.exit_code if run.error is not None else 1))
                else:
                    run.job = (self.read - 1) * P + k
                    self.done.results.append(run.compacted(self.sharing))
