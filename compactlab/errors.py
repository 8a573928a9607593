"""One error family, translated once at the CLI boundary into a one-line message and exit status.

Library code raises these; ``cli.py`` catches ``CompactlabError`` and prints ``error: <message>``
(plus ``hint: ...`` when there is one) with ``exit_code``. Nothing below the CLI prints or exits.
"""

from __future__ import annotations


class CompactlabError(Exception):
    """Base of every error compactlab reports to a user."""

    exit_code = 2
    #: more than the line, for COMPACTLAB_DEBUG=1 (the traceback of a user's own code that raised)
    detail = ""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:  # one line, always
        return self.message.replace("\n", " ")

    def __reduce__(self) -> tuple:
        # whatever a subclass's __init__ takes: errors cross to and from worker processes
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(cls: type[CompactlabError], args: tuple, state: dict) -> CompactlabError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class InputError(CompactlabError):
    """An input file is missing, unreadable or not a transcript, or a line in it is bad."""


class BadLineError(InputError):
    """One physical line of a transcript is unusable (`file:line: reason`)."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}", hint="use --skip-bad-lines to skip and count bad lines")
        self.path = path
        self.line = line
        self.reason = reason


class PolicyError(CompactlabError):
    """A policy file or override is invalid (names the key)."""


class UsageError(CompactlabError):
    """Options that cannot work together, or an output location that cannot be used."""


class SummarizerError(CompactlabError):
    """A summarizer failed to produce a summary (counts toward the circuit breaker)."""


class DiskFull(CompactlabError):
    """An output that could not be written for want of space: the run failed, as a crashed one
    does (exit 1); what it had written is removed."""

    exit_code = 1


def cannot_write(what: str, exc: OSError, hint: str | None = None) -> CompactlabError:
    """The error of an output that could not be written (``what``: "--out X: cannot write Y"): the
    disk full or a quota reached (exit 1), else what the system said (exit 2)."""
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"{what}: no space left on the device", hint=hint or "free some space, or write elsewhere")
    return UsageError(f"{what}: {exc.strerror or exc}", hint=hint)


def spelt_like(word: str, names: list[str]) -> list[str]:
    """The names spelt most like ``word``, a mistyped one (at most two), for a hint."""
    import difflib

    return difflib.get_close_matches(word, names, n=2, cutoff=0.6)


def did_you_mean(close: list[str]) -> str:
    """A hint's start naming ``close`` (``spelt_like``): "did you mean X? ", or nothing."""
    return f"did you mean {' or '.join(close)}? " if close else ""
