"""Your own step in another process (#45 §2): a command compactlab starts and speaks to in JSON
lines over its standard input and output (protocol ``compactlab-step``, version 1; the protocol
page is README's "Your own step in another process", the reference ``examples/step_process.py``).

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

The command runs once per replaying process (per thread of one: a Dask worker's threads each
start their own); every call has ``timeout`` seconds to be answered.
A process that exits, answers late, answers what is not JSON, names an index it was not sent or
speaks another version is refused with its name and the last lines it wrote to its standard error.
"""

from __future__ import annotations

import atexit
import os
import select
import subprocess
import tempfile
import threading
from typing import Any

import orjson

PROTOCOL = "compactlab-step"
VERSION = 1


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
        talk = getattr(self._local, "talk", None)
        if talk is None or talk.pid != os.getpid():  # (a forked worker starts its own)
            talk = self._local.talk = _Talk()
        return talk

    def __call__(self, messages: list[dict], facts: Any, settings: Any) -> list[dict]:
        try:
            return self._call(messages, facts, settings)
        except ProcessFailed:
            raise
        except BaseException:  # (Ctrl-C while it works: it is ended and reaped before compactlab exits)
            self.stop()
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
        try:
            proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._s.stderr)
        except OSError as exc:
            raise ProcessFailed(f"cannot start {self.argv[0]!r}: {exc.strerror or exc}") from None
        self._s.proc, self._s.pid, self._s.buffer, self._s.held = proc, os.getpid(), b"", []
        atexit.register(self.stop)
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
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._s.buffer:
            ready, _, _ = select.select([fd], [], [], self.timeout)
            if not ready:
                self.stop()
                raise ProcessFailed(f"did not answer within {self.timeout:g} s" + self._said())
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise ProcessFailed(self._ended(proc))
            self._s.buffer += chunk
        line, _, self._s.buffer = self._s.buffer.partition(b"\n")
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
        self._s.stderr.seek(0)
        tail = self._s.stderr.read()[-400:].decode("utf-8", "replace").strip().splitlines()[-3:]
        return f"; it said: {' | '.join(tail)}" if tail else ""

    def stop(self) -> None:
        """End the process (at exit, or when it is late): its input closed, then killed if it lingers."""
        proc, self._s.proc = self._s.proc, None
        if proc is None or self._s.pid != os.getpid():
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=1)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()


class _Talk:
    """One thread's conversation with its process."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.pid = os.getpid()
        self.stderr: Any = None
        self.keeps_state = False
        self.held: list[Any] = []  # what the process holds (its previous answer), where it keeps state
        self.buffer = b""
