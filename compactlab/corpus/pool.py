"""Worker processes that are the command's own children (compare and check run their grid here).

Each worker is forked once, inherits what the parent loaded, and is sent job numbers over its
own pipe, one at a time; it sends back the job's result, or why the job failed. The parent waits
on every pipe and on every worker's exit at once, so it always knows which job a worker was
running: a worker that dies (killed, out of memory) is a failed job named as such, and the other
jobs go on, on a fresh worker if need be.

Workers ignore SIGINT and SIGTERM and die with their parent (see ``interrupts.ignore_in_child``);
leaving the ``with`` block, however it is left (an interrupt, an error), kills and reaps every
worker. Nothing here touches a private attribute of the standard library's pools.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from ..errors import CompactlabError
from ..plain import dataclass
from ..plumbing.interrupts import hold_signals, ignore_in_child, release_signals, workers_ready


@dataclass
class Failure:
    """Why job ``index`` gave no result: its error (a CompactlabError), or a crash or death."""

    index: int
    reason: str
    error: CompactlabError | None = None


def failure_of(index: int, exc: BaseException) -> Failure:
    if isinstance(exc, CompactlabError):
        return Failure(index, str(exc), exc)
    return Failure(index, f"internal error: {type(exc).__name__}: {exc}".splitlines()[0])


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def requests(conn: Connection) -> Iterator[Any]:
    """What the parent sends a worker, until it sends None (nothing left) or is gone."""
    while True:
        try:
            got = conn.recv()
        except EOFError:  # the parent is gone
            return
        if got is None:
            return
        yield got


def _worker(conn: Connection, items: Sequence[Any], work: Callable[[Any], Any]) -> None:
    ignore_in_child()
    for index in requests(conn):
        try:
            reply: tuple = (index, work(items[index]))
        except BaseException as exc:
            if os.environ.get("COMPACTLAB_DEBUG") and not isinstance(exc, CompactlabError):
                traceback.print_exc()
            reply = (index, failure_of(index, exc))
        conn.send(reply)


def spawn(context: Any, target: Callable[..., None], *args: Any) -> tuple[Any, Connection]:
    """A forked worker running ``target(its pipe end, *args)``, and the parent's end of the pipe.
    SIGINT and SIGTERM are held back while it is forked (one arriving then would reach the child
    before it ignores them; ``ignore_in_child`` lets them through once it does). One that came
    meanwhile is the parent's as soon as they are let through again: the worker is stopped first."""
    workers_ready()
    held = hold_signals()
    try:
        parent, child = context.Pipe()
        process = context.Process(target=target, args=(child, *args), daemon=True)
        try:
            process.start()
        finally:
            child.close()
    except BaseException:
        release_signals(held)
        raise
    try:
        release_signals(held)  # (a signal held meanwhile is raised here)
    except BaseException:
        kill_and_reap([(process, parent)])
        raise
    return process, parent


def kill_and_reap(workers: Iterable[tuple[Any, Connection]]) -> None:
    """Kill every worker still running, then reap each and close its pipe."""
    workers = list(workers)
    for process, _ in workers:
        if process.exitcode is None:
            try:
                os.kill(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for process, conn in workers:
        process.join()
        conn.close()


class Pending:
    """The jobs not handed out yet, in order, by group (``Pool``'s ``groups``; none: each job its
    own): a worker takes the next of the group it last took from while that group has any left,
    else the first of the next group no worker has taken from, else the last job left of another
    group (a worker is never idle while a job waits)."""

    def __init__(self, n: int, groups: Sequence[Any] | None = None) -> None:
        #: the jobs of each group, in order (a group's jobs need not be consecutive)
        self._jobs: dict[Any, list[int]] = {}
        for index in range(n):
            self._jobs.setdefault(groups[index] if groups is not None else index, []).append(index)
        self._fresh = list(self._jobs)[::-1]  # the groups no worker has taken from, popped in order
        self._last: dict[int, Any] = {}  # worker -> the group it last took from
        self._left = n

    def __bool__(self) -> bool:
        return self._left > 0

    def take(self, worker: int) -> int | None:
        """The job ``worker`` runs next (None: none left)."""
        if not self._left:
            return None
        group = self._last.get(worker)
        if group is None or not self._jobs.get(group):
            while self._fresh and not self._jobs.get(self._fresh[-1]):
                self._fresh.pop()
            if self._fresh:
                group = self._fresh.pop()
            else:  # (every group started: the one with most left shares its last job)
                group = max((g for g, jobs in self._jobs.items() if jobs), key=lambda g: len(self._jobs[g]))
                self._left -= 1
                return self._jobs[group].pop()
        self._last[worker] = group
        self._left -= 1
        return self._jobs[group].pop(0)

    def put_back(self, index: int) -> None:
        """A job handed to a worker that died before it got it: first again for the next worker."""
        self._jobs.setdefault(("put back", index), []).append(index)
        self._fresh.append(("put back", index))
        self._left += 1


def death(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"the worker process was killed ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"the worker process exited ({code})"


class Pool:
    """``processes`` forked workers running ``work(items[i])``; use as a context manager.

    ``groups``: each item's group (a compare's transcript). A worker is given the next item of the
    group it last ran while that group has any left, else the first of a group no worker has
    started (else what is left of another's, at the end): the runs of one transcript go to one
    worker, which works out what they share once (the engine's memo of a recording: pricing's facts
    of its calls), as one process does."""

    def __init__(self, items: Sequence[Any], work: Callable[[Any], Any], processes: int,
                 groups: Sequence[Any] | None = None) -> None:
        self.items, self.work = items, work
        self.processes = max(1, min(processes, len(items)))
        self._context = multiprocessing.get_context("fork")
        self._workers: dict[int, tuple[Any, Connection]] = {}  # pid -> (process, parent's pipe end)
        self._running: dict[int, int] = {}  # pid -> job index
        self._pending = Pending(len(items), groups)

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self) -> int:
        process, parent = spawn(self._context, _worker, self.items, self.work)
        pid = process.pid
        assert pid is not None  # (started)
        self._workers[pid] = (process, parent)
        return pid

    def outcomes(self) -> Iterator[tuple[int, Any | Failure]]:
        """(job index, its result or a Failure) as each job ends, every job once."""
        pending = self._pending
        while self._running or pending:
            while pending and len(self._workers) < self.processes:
                self._assign(self._spawn(), pending)
            by_conn = {conn: pid for pid, (_, conn) in self._workers.items()}
            by_sentinel = {process.sentinel: pid for pid, (process, _) in self._workers.items()}
            ready = wait([*by_conn, *by_sentinel])
            for conn in [r for r in ready if r in by_conn]:  # results before deaths
                pid = by_conn[conn]
                try:
                    index, outcome = conn.recv()  # the job's result, or its Failure
                except (EOFError, OSError):
                    continue  # it died: its sentinel tells
                self._running.pop(pid, None)
                yield index, outcome
                self._assign(pid, pending)
            for sentinel in [r for r in ready if r in by_sentinel]:
                pid = by_sentinel[sentinel]
                process, conn = self._workers.pop(pid)
                process.join()
                conn.close()
                index = self._running.pop(pid, None)
                if index is not None:
                    yield index, Failure(index, death(process.exitcode))

    def _assign(self, pid: int, pending: "Pending") -> None:
        conn = self._workers[pid][1]
        index = pending.take(pid)
        try:
            conn.send(index)  # None: nothing left, it exits
        except OSError:  # it died meanwhile: its sentinel tells, and the job waits for another
            if index is not None:
                pending.put_back(index)
            return
        if index is not None:
            self._running[pid] = index

    def stop(self) -> None:
        """Kill and reap every worker (idempotent)."""
        kill_and_reap(self._workers.values())
        self._workers.clear()
        self._running.clear()
