"""SIGINT and SIGTERM end every command the same way.

Ctrl-C raises ``KeyboardInterrupt`` in the main thread; the entry point makes SIGTERM raise
:class:`Terminated`, a ``KeyboardInterrupt`` too, so a ``kill`` unwinds through the same paths as
Ctrl-C: output folders rolled back, worker processes stopped and reaped, the runs that finished
reported, and exit status 128 + the signal's number (130 for SIGINT, 143 for SIGTERM).

A signal the process was started with ignored (``nohup``, a background job's SIGINT) stays
ignored. :func:`deferred` holds both signals back while a few renames put a finished run in
place, so an interrupt never lands between them. An interrupt that Python raised inside a
finalizer, which it would print and lose, is sent again (``redeliver``).
"""

from __future__ import annotations

import _thread
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt."""

    signum = signal.SIGTERM


def interrupt_in(exc: BaseException) -> KeyboardInterrupt | None:
    """The interrupt an error stands for, if one caused it: Python wraps one raised while a class
    is made (``__set_name__``: "RuntimeError: Error calling __set_name__ ...") in another error."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return None


def exit_status(exc: BaseException) -> int:
    """128 + the signal that interrupted: 130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


#: the signals this process's handlers have raised as interrupts (``install``): an interrupt
#: that came with none is one that code raised (``from_signal``)
_delivered = 0


def _terminated(signum: int, frame: object) -> None:
    global _delivered
    _delivered += 1
    raise Terminated()


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C, as Python's own handler raises it, counted."""
    global _delivered
    _delivered += 1
    raise KeyboardInterrupt()


def delivered() -> int:
    """How many SIGINT and SIGTERM this process's handlers have raised so far."""
    return _delivered


def from_signal(exc: KeyboardInterrupt, before: int) -> bool:
    """Whether ``exc``, raised since ``delivered()`` was ``before``, is a signal's (Ctrl-C, SIGTERM),
    not one that code raised (a user's step that raises KeyboardInterrupt): certain where the
    handlers are ours (``install``) or the signals ignored (a worker); otherwise taken as one."""
    if _delivered != before:
        return True
    handler = signal.getsignal(signal.SIGINT)
    return not (handler is _interrupted or handler is signal.SIG_IGN)


def install() -> None:
    """SIGTERM raises :class:`Terminated` in the main thread, unless it was ignored at start, and
    SIGINT is counted as it is raised (``from_signal``); an interrupt that Python would ignore is
    delivered again (``redeliver``)."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, _terminated)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted)
    if sys.unraisablehook is not redeliver:
        global _next_hook
        _next_hook = sys.unraisablehook
        sys.unraisablehook = redeliver


_next_hook = sys.unraisablehook


def redeliver(unraisable: Any) -> None:
    """``sys.unraisablehook``: Python runs a signal's handler wherever the main thread is, a
    finalizer included (an object's ``__del__``, a weakref callback); the interrupt it raises
    there is printed as "Exception ignored" and lost, and the command goes on as if never
    interrupted (a tune ran all its trials). Such an interrupt is instead sent again, the same
    signal, once this hook has returned (``_send_again``); any other error goes to the hook that
    was there before."""
    exc = unraisable.exc_value
    if isinstance(exc, KeyboardInterrupt):
        # (not from here: the handler would run, and raise, inside this hook; the low-level start
        # does not wait for the thread, so the hook returns first)
        # (to the main thread, where Python runs signal handlers and where this one was raised)
        import threading

        _thread.start_new_thread(_send_again, (int(getattr(exc, "signum", signal.SIGINT)),
                                               threading.main_thread().ident or _thread.get_ident()))
        return
    _next_hook(unraisable)


def _send_again(signum: int, thread: int) -> None:
    """Sent to the thread that raised it (``pthread_kill``: the main thread, the only one that runs
    Python's handlers), waking it from a wait as the first one did. A signal sent to the process
    may be handed to any thread that does not block it, and one handed to another thread only
    sets a flag that a main thread asleep in a wait does not see."""
    signal.pthread_kill(thread, signum)


def ignore_in_child() -> None:
    """For a forked worker: both signals are its parent's business (the parent stops it), and it
    dies with its parent even when that is killed outright (Linux: PR_SET_PDEATHSIG). Forked with
    them held back (``hold_signals``), it lets them through once it ignores them."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    prctl = _prctl()
    if prctl is not None:  # (not Linux: the parent still stops its workers on any signal it can catch)
        prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG


_PRCTL: list[Any] = []  # libc's prctl once looked up (None: there is none)


def workers_ready() -> None:
    """Before forking workers that ``ignore_in_child``: libc's ``prctl`` looked up here, once, for
    them to inherit (each would import ctypes again: 3 to 7 ms a worker)."""
    _prctl()


def _prctl() -> Any:
    """libc's ``prctl`` (None: not Linux), looked up once."""
    if not _PRCTL:
        try:
            import ctypes

            _PRCTL.append(ctypes.CDLL(None, use_errno=True).prctl)
        except (OSError, AttributeError):
            _PRCTL.append(None)
    return _PRCTL[0]


def hold_signals() -> Any:
    """Hold SIGINT and SIGTERM back (until ``release_signals``); what to give it."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS) if hasattr(signal, "pthread_sigmask") else None


def release_signals(held: Any) -> None:
    """Let held signals through again: one that came meanwhile is delivered (its handler runs) here."""
    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def let_signals_through() -> None:
    """Unblock SIGINT and SIGTERM (the entry point holds them from its first line): one that came
    while they were held is delivered here, as an interrupt raised by the caller."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


@contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held back in this block and delivered after it."""
    held = hold_signals()
    try:
        yield
    finally:
        release_signals(held)
