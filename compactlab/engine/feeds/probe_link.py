"""The hindsight probes checked by the read-ahead process while the replay goes on (#28 §5).

Checking a call's probes against the context it sent is most of what recall costs a replay whose
probes are in the probe cache (13 µs a probe, 17,000 probes in the bench's 55 MB session), and the
read-ahead process, which then only reads the file, has time to spare. So where such a file is read
ahead, its probes stay in that process (read from the cache there) and are checked there, on
copies of the replay's contexts. (A file not indexed yet keeps the reader busy indexing it: its
probes are sent to the replay and checked there, as before.)

- the replay's contexts note each append, replacement and splice in an operation log
  (``Context.log``), the layers' notes of what made or cleared a message go to it too
  (``Noting``), and so does each call with probes (``CHECK``). Every few dozen calls the log is
  pickled to the reader down a pipe of its own, never blocking the replay (what the pipe cannot
  take yet waits for the next time). A context travels as a number, a message of the file as its
  position, a tool result replaced in a message left unread as the new content, any other
  message a layer changed or made as itself (a lazy one without its parsed line);
- the reader plays the log again on copies of the same messages (``Mirror``: the same ``Context``
  methods on the same arguments make the same contexts) and checks each call's probes with
  ``probes.check`` where the replay would have: the same function on the same context;
- when the replay is over it sends ``DONE``; the reader answers with each call's counts and the
  ledger, which the replay puts into its records.

The reader reads first: it checks while its pipe to the replay is full (the replay has batches to
go on with) and once the file is read. With the checks there, the replay builds the raw baseline
itself (the reader has work enough): the replay's own share of recall is the log and the answer.
The results are those of a check in the replaying process, byte for byte (tested).
"""

from __future__ import annotations

import os
import pickle
import select
import struct
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any

from .. import probe_cache
from ..context import APPEND, NEW, REPLACED, SPLICED, Context
from ..baseline import BaselineBuilder
from ..probes import Probe, ProbeMemo, ProbeOutcome, check
from ...transcripts.messages import Entry

#: the log's other operations: (CHECK, call, context), (SET, which, key, value) for a layer's note
#: in ``RunEnv.made_by`` (0), ``made_at`` (1) or ``cleared_at`` (2), (KEEP, context) after which
#: only that context is played on, (DONE,)
CHECK, SET, KEEP, DONE = 10, 11, 12, 13
#: the replay sends its log every this many calls
EVERY = 32
_LENGTH = struct.Struct("<I")


class Noting(dict):  # type: ignore[type-arg]
    """A ``RunEnv`` note (``made_by``, ``made_at``, ``cleared_at``) that logs each value set."""

    __slots__ = ("_log", "_which")

    def __init__(self, log: list[tuple], which: int) -> None:
        super().__init__()
        self._log, self._which = log, which

    def __setitem__(self, key: Any, value: Any) -> None:
        dict.__setitem__(self, key, value)
        self._log.append((SET, self._which, key, value))


class ProbeLink:
    """The replay's end: the log, its pipe to the reader, and the answer at the end."""

    def __init__(self, fd: int, is_read: Callable[[Entry], bool], as_sent: Callable[[Entry, Entry], Any]) -> None:
        self.log: list[tuple] = []
        self.fd = fd
        os.set_blocking(fd, False)
        #: whether an unchanged message of the file is the one the reader read (sent as its position)
        self.is_read = is_read
        #: a changed message as sent (given the one it was made from): what changed, or itself
        self.as_sent = as_sent
        self._keys: dict[int, tuple[int, Context]] = {}  # id -> (number, the context: kept alive)
        self._next = 0
        self._pending = b""
        self._calls = 0
        self.closed = False
        self.reader: Any = None  # (read_ahead._Reader: its pipe brings the answer)

    def new(self, ctx: Context) -> Context:
        """``ctx`` (made afresh by the engine) noting its operations, from its messages on."""
        ctx.log = self.log
        self.log.append((NEW, ctx, list(ctx.entries)))
        return ctx

    def notes(self) -> tuple[Noting, Noting, Noting]:
        return Noting(self.log, 0), Noting(self.log, 1), Noting(self.log, 2)

    def check(self, call: int, ctx: Context) -> None:
        self.log.append((CHECK, call, ctx))

    def call_done(self, ctx: Context) -> None:
        """The end of a call (``ctx``: the engine's context now): sent every ``EVERY`` calls."""
        self._calls += 1
        if self._calls % EVERY == 0:
            self._send(ctx, wait=False)

    def _encode(self, log: list[tuple]) -> list[tuple]:
        """The log with contexts as numbers, messages of the file as positions, changed ones as
        their changes where that is enough (``as_sent``)."""
        keys, is_read, as_sent = self._keys, self.is_read, self.as_sent

        def key(ctx: Context) -> int:
            held = keys.get(id(ctx))
            if held is None:
                held = keys[id(ctx)] = (self._next, ctx)
                self._next += 1
            return held[0]

        def ref(e: Entry) -> Any:
            return e.origin if not e.changed and e.origin >= 0 and is_read(e) else e

        out: list[tuple] = []
        add = out.append
        last, last_key = None, -1  # (most operations are on the context of the one before)
        for op in log:
            kind = op[0]
            if kind == APPEND:
                ctx, e = op[1], op[2]
                if ctx is not last:
                    last, last_key = ctx, key(ctx)
                add((APPEND, last_key, e.origin if not e.changed and e.origin >= 0 and is_read(e) else e))
            elif kind == SET or kind == DONE:
                add(op)
            elif kind == REPLACED:
                was = op[1].entries
                add((REPLACED, key(op[1]), key(op[2]), [(pos, as_sent(was[pos], e)) for pos, e in op[3].items()]))
            elif kind == CHECK:
                if op[2] is not last:
                    last, last_key = op[2], key(op[2])
                add((CHECK, op[1], last_key))
            elif kind == SPLICED:
                add((SPLICED, key(op[1]), key(op[2]), op[3], list(map(ref, op[4])), op[5]))
            elif kind == NEW:
                add((NEW, key(op[1]), list(map(ref, op[2]))))
            elif kind == KEEP:
                add((KEEP, key(op[1])))
        return out

    def _send(self, ctx: Context, wait: bool, end: bool = False) -> None:
        log = self.log
        log.append((KEEP, ctx))
        if end:
            log.append((DONE,))
        data = pickle.dumps(self._encode(log), pickle.HIGHEST_PROTOCOL)
        log.clear()
        self._keys = {id(ctx): self._keys[id(ctx)]}  # (every other context of the log is gone)
        self._pending += _LENGTH.pack(len(data)) + data
        if wait:
            os.set_blocking(self.fd, True)
        while self._pending:
            try:
                n = os.write(self.fd, self._pending)
            except BlockingIOError:
                return  # the reader is busy reading: the rest goes with the next
            except BrokenPipeError:  # the reader is gone: what it said (an error) comes on its own pipe
                self._pending = b""
                return
            self._pending = self._pending[n:]

    def finish(self, ctx: Context) -> tuple[dict[int, tuple[int, int, int]], list[ProbeOutcome]]:
        """Send the rest and ``DONE``; the reader's answer (it has sent its last batch): each
        checked call's (probes, kept, recoverable), and the ledger. The reader is then done, and
        reaped."""
        reader = self.reader
        try:
            self._send(ctx, wait=True, end=True)
            self.close()
            try:
                message = pickle.load(reader.pipe)
            except EOFError:
                stop = reader.interrupted()
                if stop is not None:
                    raise stop from None
                raise RuntimeError("the read-ahead process ended without a word") from None
            reader.done = message[0] == "probes"
        finally:
            reader.close()
        if message[0] != "probes":
            if message[0] == "error":
                raise message[1]
            raise RuntimeError(f"the read-ahead process failed while it checked the probes:\n{message[1]}")
        _, counts, columns = message
        return counts, list(map(tuple.__new__, repeat(ProbeOutcome), zip(*columns)))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)


class Mirror:
    """The reader's end: the messages of the file as read (by position), the contexts played again,
    each call's probes, and what the checks found."""

    def __init__(self, fd: int, as_made: Callable[[Entry, Any], Entry]) -> None:
        self.fd = fd
        self.as_made = as_made
        #: messages of the file not yet appended by the replay (let go once they are)
        self.read: dict[int, Entry] = {}
        #: each call's probes, until it is checked
        self.probes: dict[int, list[Probe]] = {}
        self.contexts: dict[int, Context] = {}
        self.env = _Notes()
        self.memo = ProbeMemo()
        self.ledger: list[ProbeOutcome] = []
        #: each checked call's (probes, kept, recoverable)
        self.counts: dict[int, tuple[int, int, int]] = {}
        self.done = False
        self._buf = bytearray()
        self._at = 0  # where the next part starts in _buf

    def step(self) -> bool:
        """Play one part of what the replay has sent, without waiting for it; False if there is
        none yet (or the replay is done)."""
        if self.done:
            return False
        part = self._part()
        if part is None:
            if not select.select([self.fd], [], [], 0)[0]:
                return False
            if not self._receive():
                raise EOFError("the replay stopped before it was done")
            part = self._part()
            if part is None:
                return True  # (a part's start: the rest is on its way)
        self._play_part(part)
        return True

    def serve(self) -> None:
        """Play the rest, waiting for it, up to ``DONE``."""
        while not self.done:
            part = self._part()
            if part is not None:
                self._play_part(part)
            elif not self._receive():
                raise EOFError("the replay stopped before it was done")

    def answer(self) -> tuple[str, dict[int, tuple[int, int, int]], list[tuple]]:
        """What the replay is sent at the end: each checked call's counts, and the ledger a column
        at a time (a few lists pickle faster than 17,000 rows)."""
        return "probes", self.counts, list(zip(*self.ledger))

    def _receive(self) -> bool:
        """Read what the pipe holds (False: the replay closed it)."""
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            return False
        self._buf += chunk
        return True

    def _part(self) -> memoryview | None:
        """The next whole part received, if there is one."""
        buf = self._buf
        if len(buf) - self._at < 4:
            return None
        (n,) = _LENGTH.unpack_from(buf, self._at)
        if len(buf) - self._at - 4 < n:
            return None
        return memoryview(buf)[self._at + 4: self._at + 4 + n]

    def _play_part(self, part: memoryview) -> None:
        log = pickle.loads(part)
        self._at += 4 + len(part)
        part.release()
        if self._at > (1 << 20):  # (let go of what was played)
            del self._buf[:self._at]
            self._at = 0
        self.play(log)

    def _entry(self, e: Any) -> Entry:
        return e if isinstance(e, Entry) else self.read.pop(e)

    def play(self, log: list[tuple]) -> None:
        contexts = self.contexts
        for op in log:
            kind = op[0]
            if kind == APPEND:
                contexts[op[1]].append(self._entry(op[2]))
            elif kind == REPLACED:
                was = contexts[op[1]]
                entries, made = was.entries, self.as_made
                contexts[op[2]] = was.replaced({pos: made(entries[pos], e) for pos, e in op[3]})
            elif kind == SPLICED:
                contexts[op[2]] = contexts[op[1]].spliced(op[3], list(map(self._entry, op[4])), op[5])
            elif kind == SET:
                self.env.notes[op[1]][op[2]] = op[3]
            elif kind == CHECK:
                call = op[1]
                probes = self.probes.pop(call, ())
                if probes:
                    found = check(probes, contexts[op[2]], call, self.ledger, self.env, self.memo)
                    self.counts[call] = (len(probes), found.kept, found.recoverable)
            elif kind == NEW:
                contexts[op[1]] = Context(map(self._entry, op[2]))
            elif kind == KEEP:
                kept = contexts[op[1]]
                contexts.clear()
                contexts[op[1]] = kept
            elif kind == DONE:
                self.done = True


class ReaderProbes:
    """The reader's side of the link: the file's probes (read from the probe cache when its pipe to
    the replay first fills, or once the file is read; indexed again, and stored, if the entry
    proves unusable), each call's number of them for the replay (-1 while not known), and the
    mirror that checks them."""

    def __init__(self, fd: int, as_made: Callable[[Entry, Any], Entry], key: str, write_cache: bool) -> None:
        self.mirror = Mirror(fd, as_made)
        self.key, self.write_cache = key, write_cache
        #: the probes are in the probe cache, not read yet (or unusable: then indexed at the end)
        self.pending = True
        self._tried = False
        self._numbers: dict[int, int] = {}
        self._call = 0
        self.warnings: list[str] = []

    def read(self, entry: Entry, copy: Entry) -> None:
        """A message as read (``copy``: the lazy copy the contexts are played on)."""
        if entry.role == "assistant":
            call, held = self._call, self.mirror.probes
            if self.pending:
                self._numbers[call] = -1
            elif call in held:
                self._numbers[call] = len(held[call])
            self._call += 1
        self.mirror.read[entry.origin] = copy

    def numbers(self) -> dict[int, int]:
        """The calls' numbers of probes since the last time (a batch's)."""
        out, self._numbers = self._numbers, {}
        return out

    def waits_on(self) -> list[int]:
        """What brings the reader more work on the probes: the log's pipe, once the probes are known."""
        return [] if self.pending else [self.mirror.fd]

    def read_cache(self) -> bool:
        """Read the probes from the cache if that is still to be done (False: it is not)."""
        if not self.pending or self._tried:
            return False
        self._tried = True
        loaded = probe_cache.load(self.key, self.warnings)
        if loaded is not None:
            self.mirror.probes, self.pending = loaded, False
        return True

    def step(self) -> bool:
        """One step of the reader's work on the probes while the replay has batches to go on with:
        the cache read (the first time), else one part of the log played and checked; False when
        there is nothing to do yet."""
        if self.pending:
            return self.read_cache()
        return self.mirror.step()

    def finish(self, again: Callable[[], Iterable[Entry]]) -> tuple[str, dict[int, tuple[int, int, int]], list[tuple]]:
        """The file is read: its probes indexed now if the cache's entry proved unusable (``again``:
        its messages, read again; stored for the next replay); the rest played, up to ``DONE``; the
        answer for the replay."""
        self.read_cache()  # (if not read yet: the pipe took every batch as it came)
        if self.pending:
            builder = BaselineBuilder(keep=False)  # (the baseline's own indexing, as in-process)
            for entry in again():
                builder.add(entry)
            found = builder.base.probes
            if self.write_cache:
                probe_cache.save(self.key, found)
            self.mirror.probes, self.pending = found, False
        self.mirror.serve()
        return self.mirror.answer()


class _Notes:
    """The replay's ``RunEnv`` notes as the check reads them."""

    __slots__ = ("made_by", "made_at", "cleared_at", "notes")

    def __init__(self) -> None:
        self.made_by: dict[int, str] = {}
        self.made_at: dict[int, int] = {}
        self.cleared_at: dict[tuple[int, int], int] = {}
        self.notes = (self.made_by, self.made_at, self.cleared_at)


__all__ = ["CHECK", "EVERY", "Mirror", "Noting", "ProbeLink", "ReaderProbes"]
