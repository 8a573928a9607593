"""Workers that each keep a fixed share of a corpus (#32 §1): what a tune replays on.

A tune replays every transcript at every trial. Its process reads the corpus a part at a time
(content hashes, prices, calibrations) and keeps none of it; each worker is given a fixed share of
the transcripts (about equal bytes), reads them itself on its first batch (the same bytes, or
those runs fail) and keeps them for every later batch: each transcript is read once per worker,
not once per trial, and the command's process holds run summaries only.

A batch is a list of policies: every worker runs them all on its share and sends each run back as
it ends, its summary alone (``RunResult.scored``: a trial is scored by its runs' summaries; the
series and losses a compare's report draws were pickled, sent and compacted for nothing). A worker
that dies (killed, out of memory) fails the runs it had left, named as such, and a fresh one takes
its share at the next batch. Workers ignore SIGINT and SIGTERM and die with their parent; leaving
the ``with`` block kills and reaps them.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from ..engine.policy import Policy
from ..plain import dataclass
from ..plumbing.interrupts import ignore_in_child
from ..plumbing.process import allocator_kept, collector_paused
from .compare import FileRef, GridRun, Job, RunFailure, RunResult, run_job
from .pool import Failure, death, failure_of, kill_and_reap, requests, spawn


@dataclass(frozen=True)
class Member:
    """A transcript of the corpus, as a worker reads and runs it."""

    ref: FileRef
    prices: Any
    calibration: Any
    size: int  # bytes (for the shares' balance)


@dataclass(frozen=True)
class RunSettings:
    """What every run of a tune shares."""

    keep_recorded_compactions: bool = False
    summarizer: tuple[str, Any] = ("stub", None)  # (kind, LiveOptions): each worker builds its own
    cache_ttl: str | None = None
    cache_model: str | None = None
    window: int | None = None


def shares_of(sizes: Sequence[int], n: int) -> list[list[int]]:
    """The indices of ``sizes`` in ``n`` shares of about equal total (largest first, each to the
    lightest share), each share in index order; no empty share."""
    n = max(1, min(n, len(sizes)))
    shares: list[list[int]] = [[] for _ in range(n)]
    totals = [0] * n
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        k = min(range(n), key=lambda k: (totals[k], k))
        shares[k].append(i)
        totals[k] += sizes[i]
    return [sorted(s) for s in shares]


def _read(member: Member) -> Any:
    from ..engine.measures import probe_cache
    from ..errors import InputError
    from ..transcripts import load_transcript

    ref = member.ref
    t = load_transcript(ref.path, ref.format, skip_bad_lines=ref.skip_bad_lines)
    if t.content_hash != ref.content_hash:
        raise InputError(f"{ref.path}: not the file the command read (it changed while the tune ran)")
    probe_cache.baseline_of(t, write=False)  # (the command stored the probes it found)
    return t


def _worker(conn: Connection, members: Sequence[Member], share: list[int], settings: RunSettings) -> None:
    ignore_in_child()
    from ..summarizers import build_summarizer

    summarizer = build_summarizer(*settings.summarizer)
    held: dict[int, Any] = {}  # the share's transcripts, read at first use and kept
    n = len(members)
    for policies in requests(conn):
        with collector_paused(), allocator_kept():  # (its full passes traversed every transcript of the share)
            for i, policy in enumerate(policies):
                for t in share:
                    index = i * n + t
                    member = members[t]
                    try:
                        if t not in held:
                            held[t] = _read(member)
                        reply: Any = run_job(Job(index, t, policy, ()), held[t], member.prices, member.calibration,
                                             settings.keep_recorded_compactions, summarizer, settings.cache_ttl,
                                             settings.cache_model, settings.window).scored()
                    except Exception as exc:  # that run's error: the others go on
                        reply = failure_of(index, exc)
                    conn.send((index, reply))
        conn.send(None)  # the batch is done


class SharePool:
    """``processes`` forked workers, each keeping a fixed share of ``members``; use as a context
    manager. A batch may be sent while another runs (``submit``): each worker queues it behind the
    batches it has not finished, and the batches are collected in the order sent (``collect``)."""

    def __init__(self, members: Sequence[Member], processes: int, settings: RunSettings = RunSettings()) -> None:
        self.members, self.settings = list(members), settings
        self.shares = shares_of([m.size for m in self.members], processes)
        self._context = multiprocessing.get_context("fork")
        self._workers: dict[int, tuple[Any, Connection]] = {}  # share -> (process, parent's pipe end)
        self._batches: dict[int, list[Policy]] = {}  # the batches sent and not collected, by number
        self._sent = 0  # batches sent so far
        self._queued: dict[int, list[int]] = {}  # share -> the batches its worker has not finished, in order

    def __enter__(self) -> "SharePool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _worker_for(self, k: int) -> Connection:
        if k not in self._workers:
            self._workers[k] = spawn(self._context, _worker, self.members, self.shares[k], self.settings)
        return self._workers[k][1]

    def _send(self, k: int, batch: int) -> None:
        self._queued.setdefault(k, []).append(batch)
        try:
            self._worker_for(k).send(self._batches[batch])
        except OSError:  # it died since: its sentinel tells
            pass

    def submit(self, policies: list[Policy]) -> int:
        """Send a batch to every worker: its number, for ``collect``."""
        batch, self._sent = self._sent, self._sent + 1
        self._batches[batch] = policies
        for k in range(len(self.shares)):
            self._send(k, batch)
        return batch

    def outcomes(self, policies: list[Policy]) -> Iterator[tuple[int, RunResult | Failure]]:
        """(job index ``policy * len(members) + transcript``, its result or a Failure) as each run
        ends, every run once."""
        return self.outcomes_of(self.submit(policies))

    def outcomes_of(self, batch: int) -> Iterator[tuple[int, RunResult | Failure]]:
        """``outcomes`` of a batch sent (the oldest not collected: a worker sends its batches' runs
        in the order it was sent them). A worker that dies fails the runs it had left of this batch;
        a fresh one takes its share and the batches it was sent after this one."""
        policies, n = self._batches[batch], len(self.members)
        left: dict[int, set[int]] = {}  # share -> the runs it has not sent
        for k, share in enumerate(self.shares):
            left[k] = {i * n + t for i in range(len(policies)) for t in share}
        while left:
            by_conn = {self._workers[k][1]: k for k in left}
            by_sentinel = {self._workers[k][0].sentinel: k for k in left}
            ready = wait([*by_conn, *by_sentinel])
            for conn in [r for r in ready if r in by_conn]:  # results before deaths
                k = by_conn[conn]
                try:
                    got = conn.recv()
                except (EOFError, OSError):
                    continue  # it died: its sentinel tells
                if got is None:
                    left.pop(k, None)
                    self._queued[k].pop(0)
                    continue
                index, outcome = got
                left[k].discard(index)
                yield index, outcome
            for sentinel in [r for r in ready if r in by_sentinel]:
                k = by_sentinel[sentinel]
                if k not in left:
                    continue
                process, conn = self._workers.pop(k)
                process.join()
                conn.close()
                later = self._queued.pop(k, [])[1:]
                for index in sorted(left.pop(k)):
                    yield index, Failure(index, death(process.exitcode))
                for queued in later:  # (a fresh worker, sent what this one had not begun)
                    self._send(k, queued)
        del self._batches[batch]

    def run(self, policies: list[Policy]) -> GridRun:
        """Every policy on every transcript: the runs (in job order) and the failures."""
        return self.collect(self.submit(policies))

    def collect(self, batch: int) -> GridRun:
        """The runs of a batch sent (``submit``; the oldest not collected), in job order, and the failures."""
        policies, n = self._batches[batch], len(self.members)
        grid = GridRun([], [], len(policies) * n)
        try:
            for index, outcome in self.outcomes_of(batch):
                if isinstance(outcome, Failure):
                    policy, t = policies[index // n], index % n
                    grid.failures.append(RunFailure(index, self.members[t].ref.path, policy.name, {}, outcome.reason,
                                                    outcome.error.exit_code if outcome.error is not None else 1))
                else:
                    grid.results.append(outcome)
        except KeyboardInterrupt as stop:
            grid.interrupted = stop
            self.stop()  # (a worker in the middle of a batch: the next batch starts fresh ones)
        grid.results.sort(key=lambda r: r.job)
        grid.failures.sort(key=lambda f: f.job)
        return grid

    def stop(self) -> None:
        """Kill and reap every worker (idempotent); the batches out are dropped."""
        kill_and_reap(self._workers.values())
        self._workers.clear()
        self._batches.clear()
        self._queued.clear()
