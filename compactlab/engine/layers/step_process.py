"""Your own step in another process (#45 §2): a command compactlab starts and speaks to in JSON
lines over its standard input and output (protocol ``compactlab-step``, version 1; the protocol
page is docs/your-own-policy.md, "Your own step in another process"; the reference
``examples/step_process.py``).

compactlab writes one JSON object a line and reads one back:

- ``{"protocol": "compactlab-step", "version": 1, "settings": {...}}`` at start; the process
  answers ``{"version": 1}`` (and ``"keeps_state": true`` where it keeps the context it returned,
  to be sent only what changed);
- per call, ``{"call": N, "facts": {...}, "from": K, "messages": [...]}``: the context as the
  harness holds it, Anthropic messages, from position ``K`` (0: all of it; more only where the
  process keeps state: its previous answer's first K messages are unchanged); a new conversation
  starts with ``"call": 0``;
- the process answers ``{"messages": [...]}``: the messages to send, each a message or the index
  of a message of the context it was sent (kept as it is).

The command runs once per replaying process and settings (per thread of one: a Dask worker's
threads each start their own; runs of policies that give the same command other settings each
talk to a process started with theirs); every call has ``timeout`` seconds to be answered.
A process that exits, answers late, answers what is not JSON, names an index it was not sent or
speaks another version is refused with its name and the last lines it wrote to its standard error.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import tempfile
import threading
from typing import Any

import orjson

from ...plumbing.lines import DEFAULT_LIMIT, BoundedLines, Closed, Late, LineTooLong

PROTOCOL = "compactlab-step"
VERSION = 1
#: seconds a process has to end once its input is closed, then once sent SIGTERM
GRACE = 1.0


class ProcessFailed(Exception):
    """The process broke the protocol: the message says how (the step's name is added above)."""


class ProcessStep:
    """A step that is a command: callable as a Python step is (``layers.custom``)."""

    def __init__(self, argv: list[str], name: str) -> None:
        self.argv, self.name = argv, name
        self.timeout = 30.0
        self._local = threading.local()  # a thread's own process and what it holds

    @property
    def _s(self) -> "_Talk":
        """This thread's conversation with the process started with the settings of the run it
        is in (``__call__`` says which)."""
        local = self._local
        talks: dict[bytes, _Talk] | None = getattr(local, "talks", None)
        if talks is None or getattr(local, "pid", None) != os.getpid():  # (a forked worker starts its own)
            talks = local.talks = {}
            local.pid = os.getpid()
        key = getattr(local, "settings", b"")
        talk = talks.get(key)
        if talk is None:
            talk = talks[key] = _Talk()
        return talk

    def __call__(self, messages: list[dict], facts: Any, settings: Any) -> list[dict]:
        # (a process is told its settings once, at start: another run's settings are another process's)
        self._local.settings = orjson.dumps(dict(settings), option=orjson.OPT_SORT_KEYS)
        try:
            return self._call(messages, facts, settings)
        except BaseException:  # (a protocol error, a late answer, Ctrl-C, any exception: the run ends
            self.stop()  # here, so the process and whatever it started are ended and reaped first)
            raise

    def _call(self, messages: list[dict], facts: Any, settings: Any) -> list[dict]:
        proc = self._started(settings)
        start = 0
        if self._s.keeps_state and facts.call > 0:
            held = self._s.held
            while start < min(len(held), len(messages)) and held[start] == messages[start]:
                start += 1
        self._send(proc, {"call": facts.call, "facts": facts._asdict(), "from": start, "messages": messages[start:]})
        answer = self._read(proc)
        out = answer.get("messages") if isinstance(answer, dict) else None
        if not isinstance(out, list):
            raise ProcessFailed(f"answered {str(answer)[:60]!r}, not {{\"messages\": [...]}}")
        sent: list[dict] = []
        for item in out:
            if type(item) is int:
                if not 0 <= item < len(messages):
                    raise ProcessFailed(f"kept message {item}, but was sent {len(messages)}")
                sent.append(messages[item])
            else:
                sent.append(item)
        if self._s.keeps_state:
            self._s.held = [orjson.loads(orjson.dumps(m)) for m in sent]
        return sent

    # -- the process -------------------------------------------------------------------------
    def _started(self, settings: Any) -> subprocess.Popen:
        if self._s.proc is not None and self._s.pid == os.getpid() and self._s.proc.poll() is None:
            return self._s.proc
        self._s.stderr = tempfile.TemporaryFile()
        try:  # (in a session of its own: its process group is ended with it, children and all)
            proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._s.stderr,
                                    start_new_session=True)
        except OSError as exc:
            raise ProcessFailed(f"cannot start {self.argv[0]!r}: {exc.strerror or exc}") from None
        assert proc.stdout is not None
        self._s.proc, self._s.pid, self._s.held = proc, os.getpid(), []
        self._s.lines = BoundedLines(proc.stdout.fileno(), answer_limit())
        atexit.register(self._stop, self._s)
        self._send(proc, {"protocol": PROTOCOL, "version": VERSION, "settings": dict(settings)})
        hello = self._read(proc)
        if not isinstance(hello, dict) or hello.get("version") != VERSION:
            raise ProcessFailed(f"speaks {str(hello)[:60]!r}, not {PROTOCOL} version {VERSION} "
                                '(answer the first line with {"version": 1})')
        self._s.keeps_state = hello.get("keeps_state") is True
        return proc

    def _send(self, proc: subprocess.Popen, doc: dict) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(orjson.dumps(doc) + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise ProcessFailed(self._ended(proc)) from None

    def _read(self, proc: subprocess.Popen) -> Any:
        """The next line it writes, as JSON: whole within ``timeout`` seconds of asking (a process
        that drips a byte now and then is late all the same), at most the answer limit."""
        lines = self._s.lines
        assert lines is not None
        try:
            line = lines.line(self.timeout)
        except Late:
            raise ProcessFailed(f"did not answer within {self.timeout:g} s" + self._said()) from None
        except LineTooLong as exc:
            raise ProcessFailed(f"{exc} (COMPACTLAB_MAX_ANSWER_MB raises the limit)" + self._said()) from None
        except Closed:
            raise ProcessFailed(self._ended(proc)) from None
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            raise ProcessFailed(f"answered {line[:60].decode('utf-8', 'replace')!r}, which is not JSON"
                                + self._said()) from None

    def _ended(self, proc: subprocess.Popen) -> str:
        try:
            code = proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            code = None
        return f"ended (exit status {code})" + self._said()

    def _said(self) -> str:
        """The last lines the process wrote to its standard error."""
        if self._s.stderr is None:
            return ""
        f = self._s.stderr
        f.seek(max(0, f.seek(0, os.SEEK_END) - 400))  # (its last bytes: however much it wrote)
        tail = f.read().decode("utf-8", "replace").strip().splitlines()[-3:]
        return f"; it said: {' | '.join(tail)}" if tail else ""

    def stop(self) -> None:
        """End the process of this thread's run (at exit, after a failure, when it is late): its
        input closed, a grace to finish, then its whole process group sent SIGTERM and, still there
        after another grace, SIGKILL, each time until no process of the group runs; it is reaped,
        and so nothing it started holds its pipes or lingers."""
        self._stop(self._s)

    @staticmethod
    def _stop(talk: "_Talk") -> None:
        proc, talk.proc = talk.proc, None
        if proc is None or talk.pid != os.getpid():
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=GRACE)
        except subprocess.TimeoutExpired:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):  # (the group: what it forked goes with it)
            if not _group_runs(proc.pid):
                break
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            _wait_group(proc, GRACE)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdout, talk.stderr):
            if stream is not None:
                stream.close()
        talk.stderr = None


def _group_runs(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (a zombie has ended: its parent reaps it).
    Where /proc cannot tell (not Linux), whether the group can be signalled at all."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _wait_group(proc: subprocess.Popen, seconds: float) -> None:
    """Until no process of ``proc``'s group runs, at most ``seconds`` (its leader reaped on the way)."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        proc.poll()
        if not _group_runs(proc.pid):
            return
        time.sleep(0.01)


def answer_limit() -> int:
    """The most a step may answer: the longest line a step process may write, and the messages a
    step of Python may make at a call (COMPACTLAB_MAX_ANSWER_MB, in MiB; a value that is no
    number of MiB above 0 is a one-line error naming it)."""
    raw = os.environ.get("COMPACTLAB_MAX_ANSWER_MB", "").strip()
    if not raw:
        return DEFAULT_LIMIT
    try:
        mb = float(raw)
    except ValueError:
        mb = float("nan")
    if not 0 < mb <= 1 << 20:
        from ...errors import UsageError

        raise UsageError(f"COMPACTLAB_MAX_ANSWER_MB={raw[:20]}: not a number of MiB above 0 and at most 1,048,576")
    return int(mb * (1 << 20))


class _Talk:
    """One thread's conversation with its process."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.pid = os.getpid()
        self.stderr: Any = None
        self.keeps_state = False
        self.held: list[Any] = []  # what the process holds (its previous answer), where it keeps state
        self.lines: BoundedLines | None = None  # what it writes, a line at a time
