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
  (``PYDANTIC_DISABLE_PLUGINS``, ~15 ms of importlib.metadata when a policy is validated), and
  makes SIGTERM raise like Ctrl-C (``interrupts.install``).
- :func:`finish` ends the process with ``os._exit`` once the output is flushed: the
  interpreter's teardown would free every loaded message one by one (tens of milliseconds for a
  big session) for nothing.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import NoReturn


def start() -> None:
    """Before the CLI is imported: the collector off, pydantic's plugin scan off, SIGTERM as an
    interrupt."""
    gc.disable()
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
    """Flush stdout and stderr and exit at once with ``code``, skipping the teardown."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)
