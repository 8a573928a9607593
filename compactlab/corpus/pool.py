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
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from ..errors import CompactlabError
from ..plumbing.interrupts import hold_signals, ignore_in_child, release_signals


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


def death(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"the worker process was killed ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"the worker process exited ({code})"


class Pool:
    """``processes`` forked workers running ``work(items[i])``; use as a context manager."""

    def __init__(self, items: Sequence[Any], work: Callable[[Any], Any], processes: int) -> None:
        self.items, self.work = items, work
        self.processes = max(1, min(processes, len(items)))
        self._context = multiprocessing.get_context("fork")
        self._workers: dict[int, tuple[Any, Connection]] = {}  # pid -> (process, parent's pipe end)
        self._running: dict[int, int] = {}  # pid -> job index

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
        pending = list(range(len(self.items)))[::-1]  # popped from the end: in order
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

    def _assign(self, pid: int, pending: list[int]) -> None:
        conn = self._workers[pid][1]
        index = pending.pop() if pending else None
        try:
            conn.send(index)  # None: nothing left, it exits
        except OSError:  # it died meanwhile: its sentinel tells, and the job waits for another
            if index is not None:
                pending.append(index)
            return
        if index is not None:
            self._running[pid] = index

    def stop(self) -> None:
        """Kill and reap every worker (idempotent)."""
        kill_and_reap(self._workers.values())
        self._workers.clear()
        self._running.clear()
