"""The process tricks of the ``compactlab`` command, in one place; only the entry point uses them.

Library code never toggles process state (the garbage collector, signal handlers, the umask,
environment flags, how the process exits): a program that imports compactlab keeps its own.
The command, which owns its process, takes these liberties, each measured:

- :func:`start` turns the cyclic garbage collector off before the CLI is imported. Start-up
  makes tens of thousands of long-lived objects (modules, classes, click's options) and no
  garbage: the collector would only traverse them, some 30 times (~5 ms of every command).
- :class:`collector_off` keeps it off while transcripts are read (they make millions of objects
  and no cycles: a third of the load time of a big file went to the collector), then freezes
  what is alive before turning it back on, so that its first pass does not traverse every object
  just read (~20 ms on 55 MB), and a forked worker never touches those objects' pages.
- :func:`start` also tells pydantic not to scan every installed distribution for plugins
  (``PYDANTIC_DISABLE_PLUGINS``, ~15 ms of importlib.metadata when a policy is validated), keeps
  numpy's OpenBLAS to one thread (``OPENBLAS_NUM_THREADS``, unless set: the thread it starts when
  numpy is imported, for the verdict's bootstrap or by Optuna, spun ~80 ms of CPU waiting for work;
  nothing compactlab computes multiplies matrices), and makes SIGTERM raise like Ctrl-C
  (``interrupts.install``).
- :class:`collector_paused` is the one trick library code uses, and only in a process whose work
  it runs but does not own (a Dask worker's task of ``compare``/``tune``; a batch of trials a
  tune's forked worker runs on its share, ``corpus/shares.py``): the collector off for the task,
  back as it was when the last such task ends. A worker keeps the transcripts it read
  for its next runs (millions of objects, no cycles), and each of the collector's full passes
  traversed them all: 1.0 s of a 4.6 s cluster compare of 200 trajectories (#59 §5). Nothing is
  frozen (a long-lived worker would keep any cyclic garbage frozen with them for good).
- :func:`worker_collecting` turns the collector back on in a worker the command forked to read and
  run files itself (``jobs/cluster.py``'s ``LocalWorkers``), which inherits it off from ``start``:
  on between its files, paused by ``collector_paused`` while it reads and runs one, so that what a
  run leaves in cycles (a step of your own may) is collected as in a replay.
- :func:`finish` ends the process with ``os._exit`` once the output is flushed: the
  interpreter's teardown would free every loaded message one by one (tens of milliseconds for a
  big session) for nothing.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from typing import NoReturn


def start() -> None:
    """Before the CLI is imported: the collector off, pydantic's plugin scan off, SIGTERM as an
    interrupt."""
    gc.disable()
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .interrupts import install

    install()
    readable_streams()


def readable_streams() -> None:
    """stdout and stderr that never fail on a character their encoding lacks (PYTHONIOENCODING=ascii,
    a C locale): it is written as an escape (×: \\xd7) rather than ending the command."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and (getattr(stream, "encoding", "") or "").lower().replace("-", "") != "utf8":
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


class collector_off:
    """The cyclic garbage collector off in the block; what is alive frozen when it is back on."""

    def __enter__(self) -> None:
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        gc.freeze()
        gc.enable()


class collector_paused:
    """The cyclic garbage collector off while any thread of this process is in such a block, then as
    it was before the first one entered (a worker's threads run tasks side by side: the first to
    leave must not turn it back on under the others)."""

    _lock = threading.Lock()
    _inside = 0
    _was_enabled = False

    def __enter__(self) -> None:
        cls = collector_paused
        with cls._lock:
            if cls._inside == 0:
                cls._was_enabled = gc.isenabled()
                gc.disable()
            cls._inside += 1

    def __exit__(self, *exc: object) -> None:
        cls = collector_paused
        with cls._lock:
            cls._inside -= 1
            if cls._inside == 0 and cls._was_enabled:
                gc.enable()


def worker_collecting() -> None:
    """In a worker the command forked to read and run files itself: the collector on (see above)."""
    gc.enable()


def finish(code: int) -> NoReturn:
    """Flush stdout and stderr and exit at once with ``code``, skipping the teardown."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)


def usable_cores() -> int:
    """The cores this process may use: its CPU affinity (``taskset``, a container's cpuset) and the
    cgroup's CPU quota (``cpu.max``, or cgroup v1's ``cpu.cfs_quota_us``), not the machine's count
    (``os.cpu_count`` ignores both)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        cores = min(cores, max(1, int(quota)))  # a quota of 1.5 cores: one whole one to count on
    return max(cores, 1)


#: where the cgroup's CPU quota is read (v2, then v1); a test points these elsewhere
CGROUP_FILES = ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us")


def _cgroup_quota() -> float | None:
    """Cores the cgroup's quota allows (quota / period), or None where there is none."""
    v2, v1 = CGROUP_FILES
    try:
        with open(v2) as f:
            quota, _, period = f.read().strip().partition(" ")
        if quota != "max":
            return int(quota) / int(period or 100_000)
        return None
    except (OSError, ValueError):
        pass
    try:
        with open(v1) as f:
            quota_us = int(f.read().strip())
        with open(os.path.join(os.path.dirname(v1), "cpu.cfs_period_us")) as f:
            period_us = int(f.read().strip())
        return quota_us / period_us if quota_us > 0 and period_us > 0 else None
    except (OSError, ValueError):
        return None
