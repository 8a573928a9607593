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
- :func:`start` also keeps the code ``dataclasses`` generates (:class:`DataclassCode`): it
  compiles every ``__init__``, ``__eq__`` and ``__repr__`` of every dataclass from source at each
  start, ~130 us each: a process that imports what a replay needs took 117 ms, 93 ms with the
  code kept. Compiled once, the code is kept
  beside compactlab's own bytecode (its ``__pycache__``, where Python keeps the ``.pyc`` files,
  and not when Python writes none: ``PYTHONDONTWRITEBYTECODE``) and run from there next time.
- :func:`start` also tells pydantic not to scan every installed distribution for plugins
  (``PYDANTIC_DISABLE_PLUGINS``, ~15 ms of importlib.metadata when a policy is validated), and
  makes SIGTERM raise like Ctrl-C (``interrupts.install``).
- :func:`finish` ends the process with ``os._exit`` once the output is flushed: the
  interpreter's teardown would free every loaded message one by one (tens of milliseconds for a
  big session) for nothing.
"""

from __future__ import annotations

import gc
import marshal
import os
import sys
from types import CodeType
from typing import Any, NoReturn


#: the bytecode's version, as a .pyc file starts with it (importlib's, without importing importlib.util)
MAGIC: bytes = getattr(sys.modules.get("_frozen_importlib_external"), "MAGIC_NUMBER", b"") or marshal.dumps(
    sys.implementation.cache_tag)


class DataclassCode:
    """What ``dataclasses`` compiles, by its source text: read from ``path`` (a marshalled dict,
    written by ``save``), compiled on a miss. Installed as the ``exec`` that module calls (the
    builtin's name in its namespace only): the methods it makes are the same, from the same text."""

    #: entries kept at most; past it, only those this process used are written back
    LIMIT = 4096

    def __init__(self, path: str) -> None:
        self.path = path
        self.codes: dict[str, CodeType] = {}
        self.used: set[str] = set()
        self.added = False
        try:
            st = os.stat(path)
            # only a file of this user's that nobody else may write: it holds code to run (as a .pyc does)
            if st.st_uid == os.getuid() and not st.st_mode & 0o022:
                with open(path, "rb") as f:
                    data = f.read()
                # (the bytecode's magic number first, as a .pyc has it: code of another Python is not run)
                codes = marshal.loads(data[len(MAGIC):]) if data.startswith(MAGIC) else None
                if type(codes) is dict and all(type(k) is str and type(v) is CodeType for k, v in codes.items()):
                    self.codes = codes
        except (OSError, ValueError, EOFError, TypeError, AttributeError):
            pass  # none yet, or not one: compiled again and written anew

    def exec(self, source: Any, globals: Any = None, locals: Any = None, /) -> None:
        if type(source) is str:
            code = self.codes.get(source)
            if code is None:  # (not inheriting this module's __future__ flags: as exec compiles it there)
                code = self.codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
                self.added = True
            self.used.add(source)
            source = code
        exec(source, globals, locals)

    def save(self) -> None:
        """Write the code back if any was compiled (atomically; a folder that cannot be written
        keeps none)."""
        if not self.added:
            return
        codes = self.codes if len(self.codes) <= self.LIMIT else {k: self.codes[k] for k in self.used}
        temp = f"{self.path}.{os.getpid()}.tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + marshal.dumps(codes))
            os.replace(temp, self.path)
            self.added = False
        except (OSError, ValueError):
            try:
                os.unlink(temp)
            except OSError:
                pass


#: the command's dataclass code, once ``start`` installed it
_dataclass_code: DataclassCode | None = None


def dataclass_code_path() -> str | None:
    """Where the dataclass code is kept: beside compactlab's bytecode (None where Python writes
    none, or compactlab's was not cached: a zip)."""
    import compactlab

    cached = getattr(compactlab, "__cached__", None)
    if sys.dont_write_bytecode or not cached or not sys.implementation.cache_tag or not hasattr(os, "getuid"):
        return None  # (nor where a file's owner cannot be told: it would never be read back)
    return os.path.join(os.path.dirname(cached), f"dataclasses.{sys.implementation.cache_tag}.marshal")


def keep_dataclass_code() -> None:
    """Install :class:`DataclassCode` for the dataclasses made from now on."""
    global _dataclass_code
    path = dataclass_code_path()
    if path is None or _dataclass_code is not None:
        return
    import dataclasses

    _dataclass_code = DataclassCode(path)
    dataclasses.exec = _dataclass_code.exec  # type: ignore[attr-defined]


def start() -> None:
    """Before the CLI is imported: the collector off, the dataclass code kept, pydantic's plugin
    scan off, SIGTERM as an interrupt."""
    gc.disable()
    keep_dataclass_code()
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
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


def finish(code: int) -> NoReturn:
    """Flush stdout and stderr and exit at once with ``code``, skipping the teardown (the
    dataclass code compiled meanwhile written first)."""
    if _dataclass_code is not None:
        try:
            _dataclass_code.save()
        except (Exception, KeyboardInterrupt):  # (a second Ctrl-C while it writes: the exit goes on)
            pass
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
