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
  just read (~20 ms on 55 MB), and a forked worker never touches those objects' pages. Only in
  the command's process: called by a program that imports compactlab, it pauses the collector
  for the block and freezes nothing (what is frozen is never collected, cycles included).
- :func:`start` also tells pydantic not to scan every installed distribution for plugins
  (``PYDANTIC_DISABLE_PLUGINS``, ~15 ms of importlib.metadata when a policy is validated), keeps
  numpy's OpenBLAS to one thread (``OPENBLAS_NUM_THREADS``, unless set: the thread it starts when
  numpy is imported, for the verdict's bootstrap or by Optuna, spun ~80 ms of CPU waiting for work;
  nothing compactlab computes multiplies matrices), and makes SIGTERM raise like Ctrl-C
  (``interrupts.install``).
- :func:`start` has glibc's allocator keep the memory the command frees, as its own sliding
  thresholds keep it at their most (``core.keep_freed``, set as the native module is loaded; not
  where the environment sets the allocator's thresholds): a replay reads its file a block of about
  256 KiB at a time and frees each a few blocks later, and past twice the largest block freed the
  heap's top went back to the system and was faulted in again at the next (1,300 of a 5,000-call
  replay's 10,500 page faults, about 1% of its CPU).
- :class:`collector_paused` is a trick library code uses, and only in a process whose work
  it runs but does not own (a Dask worker's task of ``compare``/``tune``; a batch of trials a
  tune's forked worker runs on its share, ``corpus/shares.py``): the collector off for the task,
  back as it was when the last such task ends. A worker keeps the transcripts it read
  for its next runs (millions of objects, no cycles), and each of the collector's full passes
  traversed them all: 1.0 s of a 4.6 s cluster compare of 200 trajectories (#59 §5). Nothing is
  frozen (a long-lived worker would keep any cyclic garbage frozen with them for good).
- :class:`allocator_kept`, beside it in the same tasks, undoes for the task what a Dask nanny
  sets for its workers' C library (``MALLOC_TRIM_THRESHOLD_=65536``: every freed buffer of
  128 KiB or more handed back to the system and faulted in again at the next; a worker's task ran
  a quarter dearer than the same work in a process of its own) and hands the free memory back
  when the last one ends, as the setting asks.
- :func:`worker_collecting` turns the collector back on in a worker the command forked to read and
  run files itself (``jobs/cluster.py``'s ``LocalWorkers``), which inherits it off from ``start``:
  on between its files, paused by ``collector_paused`` while it reads and runs one, so that what a
  run leaves in cycles (a step of your own may) is collected as in a replay.
- :func:`finish` ends the process with ``os._exit`` once the output is flushed: the
  interpreter's teardown would free every loaded message one by one (tens of milliseconds for a
  big session) for nothing.
"""

from __future__ import annotations

import functools
import gc
import os
import sys
import threading
from typing import Any, NoReturn


#: whether this process is the command's own (``start`` ran): only then does ``collector_off``
#: freeze what is alive
_command = False


def start() -> None:
    """Before the CLI is imported: the collector off, pydantic's plugin scan off, SIGTERM as an
    interrupt."""
    global _command
    _command = True
    gc.disable()
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .interrupts import install

    install()
    readable_streams()
    if _allocator_untold():
        from ..core import keep_freed

        keep_freed(KEPT_MMAP, KEPT_TRIM)


def _allocator_untold() -> bool:
    """Whether the environment leaves glibc's allocator its defaults (no ``MALLOC_*_`` threshold, no
    ``glibc.malloc`` tunable): only then does the command set its own (``start``)."""
    told = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
    return not any(name in os.environ for name in told) and "glibc.malloc." not in os.environ.get("GLIBC_TUNABLES", "")


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
    """In the command's process (``start`` ran): the cyclic garbage collector off in the block,
    what is alive frozen when it is back on. In any other (a program that imports compactlab and
    runs a job, a test through click's runner) it is ``collector_paused``: off for the block, then
    as it was, nothing frozen. Frozen there, the cycles a job made (233,000 objects in a test
    worker after 500 tests) would never be collected, and the caller's process grew with every job."""

    def __init__(self) -> None:
        self._paused = None if _command else collector_paused()

    def __enter__(self) -> None:
        if self._paused is not None:
            self._paused.__enter__()
            return
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._paused is not None:
            self._paused.__exit__(*exc)
            return
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


#: glibc's ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: while a task runs: the most glibc's own sliding thresholds reach on a 64-bit machine (a freed
#: block up to 32 MiB kept for the next, the heap's top trimmed past 64 MiB)
KEPT_MMAP, KEPT_TRIM = 32 << 20, 64 << 20
#: glibc's mmap threshold where the environment fixes the thresholds without naming it
GLIBC_MMAP_THRESHOLD = 128 << 10


class allocator_kept:
    """glibc's allocator keeps the memory a task frees while any thread of this process is in such
    a block, where the environment told it to hand memory back at once (``MALLOC_TRIM_THRESHOLD_``,
    which a Dask nanny sets to 65536 for its workers: every buffer of 128 KiB or more that a file's
    reading frees went back to the system and was faulted in again at the next, 77,000 page faults
    and a quarter more CPU for a batch of 100 trajectories); the thresholds as the environment set
    them, and the free memory handed back (``malloc_trim``: what the setting is for), when the last
    one leaves. Elsewhere (no such setting, one in ``GLIBC_TUNABLES``, another C library) it does
    nothing."""

    _lock = threading.Lock()
    _inside = 0
    #: the thresholds to set back (mmap, trim), taken by the first block in
    _set_back: tuple[int, int] = (GLIBC_MMAP_THRESHOLD, 0)
    _libc: Any = None  # (this block's: the C library it set, or None where it did nothing)

    def __enter__(self) -> None:
        self._libc = _trimming_libc()
        if self._libc is None:
            return
        cls = allocator_kept
        with cls._lock:
            if cls._inside == 0:
                mmap = _environment_number("MALLOC_MMAP_THRESHOLD_")
                cls._set_back = (GLIBC_MMAP_THRESHOLD if mmap is None else mmap,
                                 _environment_number("MALLOC_TRIM_THRESHOLD_") or 0)
                self._libc.mallopt(M_MMAP_THRESHOLD, KEPT_MMAP)
                self._libc.mallopt(M_TRIM_THRESHOLD, KEPT_TRIM)
            cls._inside += 1

    def __exit__(self, *exc: object) -> None:
        if self._libc is None:
            return
        cls = allocator_kept
        with cls._lock:
            cls._inside -= 1
            if cls._inside == 0:
                mmap, trim = cls._set_back
                self._libc.mallopt(M_MMAP_THRESHOLD, mmap)
                self._libc.mallopt(M_TRIM_THRESHOLD, trim)
                self._libc.malloc_trim(0)


def _environment_number(name: str) -> int | None:
    """A threshold the environment gives glibc (a whole number of bytes), or None."""
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() else None


def _trimming_libc() -> Any:
    """This process's C library where it is glibc and the environment sets its trim threshold (by
    the variable alone: where ``GLIBC_TUNABLES`` sets the allocator's, what to set back is not known)."""
    if _environment_number("MALLOC_TRIM_THRESHOLD_") is None or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return None
    return _glibc()


@functools.cache
def _glibc() -> Any:
    """This process's C library if it is glibc (``mallopt`` and ``malloc_trim``), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # (glibc's own: musl has a mallopt that does nothing)
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        return libc
    except (OSError, AttributeError):
        return None


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
