"""Lines (and length-prefixed frames) read from a pipe (another process's output), bounded (#56
§1): linear in the bytes, at most ``limit`` bytes a line or a frame, and each by a deadline, not a
timeout per read (a process that writes a byte now and then cannot keep a run waiting past it).
A step's process speaks lines; the read-ahead reader sends frames (``frame``).

The bytes read are kept in one ``bytearray`` and only what was read since the last look is
searched for the newline: a line of n bytes costs O(n), whatever the size of the reads.
"""

from __future__ import annotations

import os
import select
import time

#: the longest line read from a process, unless the caller sets another: 256 MiB
#: (COMPACTLAB_MAX_ANSWER_MB sets it for the step processes)
DEFAULT_LIMIT = 256 << 20


class LineTooLong(Exception):
    """A line longer than the limit (the bytes read so far are let go)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"wrote a line of more than {limit >> 20} MiB ({size:,} bytes read, no end of line)")
        self.size, self.limit = size, limit


class Late(Exception):
    """No whole line by the deadline."""


class Closed(Exception):
    """The other end closed the pipe before a whole line (``partial``: the bytes it did send)."""

    def __init__(self, partial: bytes) -> None:
        super().__init__("closed its output")
        self.partial = partial


class BoundedLines:
    """Whole lines from the file descriptor ``fd`` (without their newline)."""

    def __init__(self, fd: int, limit: int = DEFAULT_LIMIT, chunk: int = 1 << 20) -> None:
        self.fd, self.limit, self.chunk = fd, limit, chunk
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline

    def line(self, seconds: float) -> bytes:
        """The next line, within ``seconds`` from now (``Late``), at most ``limit`` bytes
        (``LineTooLong``); ``Closed`` when the other end closed first."""
        deadline = time.monotonic() + seconds
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                self._scanned = 0
                return line
            self._scanned = len(self._buffer)
            if self._scanned > self.limit:
                size, self._buffer, self._scanned = self._scanned, bytearray(), 0
                raise LineTooLong(size, self.limit)
            self._more(deadline, self.chunk)

    def frame(self, seconds: float) -> bytes:
        """The next frame (an 8-byte little-endian length, then that many bytes), within
        ``seconds`` from now, at most ``limit`` bytes."""
        deadline = time.monotonic() + seconds
        size = int.from_bytes(self._exactly(8, deadline), "little")
        if size > self.limit:
            self._buffer, self._scanned = bytearray(), 0
            raise LineTooLong(size, self.limit)
        return self._exactly(size, deadline)

    def _more(self, deadline: float, most: int) -> None:
        """Read what is there (at most ``most`` bytes) once the descriptor is readable, by the
        deadline (``Late``); ``Closed`` where the other end closed."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise Late()
        ready, _, _ = select.select([self.fd], [], [], left)
        if not ready:
            raise Late()
        data = os.read(self.fd, most)
        if not data:
            partial, self._buffer, self._scanned = bytes(self._buffer), bytearray(), 0
            raise Closed(partial)
        self._buffer += data

    def _exactly(self, n: int, deadline: float) -> bytes:
        while len(self._buffer) < n:
            self._more(deadline, max(self.chunk, n - len(self._buffer)))
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        self._scanned = 0
        return out


def framed(data: bytes) -> bytes:
    """``data`` as a frame ``BoundedLines.frame`` reads."""
    return len(data).to_bytes(8, "little") + data
