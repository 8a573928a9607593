"""API keys kept out of everything compactlab shows, writes or logs.

A key reaches the process from its environment and goes to an SDK client; nothing else holds it.
What comes back may carry it anyway: an error message or a response header that echoes it, a model
answer that repeats it. :func:`scrub` removes every run of 8 characters or more that it shares
with the key; :func:`scrub_logs` makes every log record (the SDKs log request options and
response headers with ``ANTHROPIC_LOG=debug``) pass through it before any handler sees it.
"""

from __future__ import annotations

import logging
from typing import Any

#: the shortest piece of the key that is scrubbed wherever it stands
SECRET_PIECE = 8


def scrub(text: str, secret: str) -> str:
    """``text`` with every run of it that shares SECRET_PIECE or more characters with ``secret``
    replaced by ``[key]``: a server that echoes part of the key, or a cut through it, leaks none."""
    if not secret or not text:
        return text
    if len(secret) < SECRET_PIECE:
        return text.replace(secret, "[key]")
    hidden = bytearray(len(text))
    pieces = {secret[i:i + SECRET_PIECE] for i in range(len(secret) - SECRET_PIECE + 1)}
    for piece in pieces:
        start = text.find(piece)
        while start >= 0:
            hidden[start:start + SECRET_PIECE] = b"\x01" * SECRET_PIECE
            start = text.find(piece, start + 1)
    if not any(hidden):
        return text
    out, i = [], 0
    while i < len(text):
        if hidden[i]:
            while i < len(text) and hidden[i]:
                i += 1
            out.append("[key]")
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


#: the keys handed to a client in this process, scrubbed from every log record
_SECRETS: set[str] = set()
_previous_factory: Any = None


def _record(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record = _previous_factory(*args, **kwargs)
    try:
        message = record.getMessage()
    except Exception:  # (a record whose arguments do not fit its message: left to logging to say)
        return record
    scrubbed = message
    for secret in _SECRETS:
        scrubbed = scrub(scrubbed, secret)
    if scrubbed != message:
        record.msg, record.args = scrubbed, None
    return record


def scrub_logs(secret: str) -> None:
    """Scrub ``secret`` from every log record made from now on in this process, whichever logger
    makes it and whichever handler shows it (the record factory: handlers the SDKs or the user
    add later are covered too)."""
    global _previous_factory
    if not secret:
        return
    _SECRETS.add(secret)
    if _previous_factory is None:
        _previous_factory = logging.getLogRecordFactory()
        logging.setLogRecordFactory(_record)
