"""next-action against a model API that misbehaves (#49): a reply that is malformed JSON, an HTML
page, another shape, usage figures that are no counts, a server that never answers, a Retry-After
of hours. Each is that sample's failure, named in the ledger; the run goes on and ends in bounded
time, never in an internal error."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from helpers import SAMPLES

KEY = "sk-ant-hostile-SECRET-0123456789"


def _message(content, usage) -> bytes:
    return json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
                       "content": content, "stop_reason": "end_turn", "stop_sequence": None, "usage": usage}).encode()


GOOD_USAGE = {"input_tokens": 100, "output_tokens": 5}
TOOL = [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}]
ANSWERS = {
    "malformed": (200, "application/json", b'{"id": "msg_1", "content": [', {}),
    "html": (200, "text/html", b"<html><body>Bad Gateway</body></html>", {}),
    "content as a string": (200, "application/json", _message("just text", GOOD_USAGE), {}),
    "wrong shape": (200, "application/json", json.dumps({"hello": "world"}).encode(), {}),
    "negative usage": (200, "application/json", _message(TOOL, {"input_tokens": -6000, "output_tokens": 5}), {}),
    "absurd usage": (200, "application/json", _message(TOOL, {"input_tokens": 10 ** 20, "output_tokens": 5}), {}),
    "huge": (200, "application/json", b'{"id": "msg_1", "content": [{"type": "text", "text": "' + b"x" * (40 << 20)
             + b'"}], "usage": {"input_tokens": 1, "output_tokens": 1}}', {}),
    "retry-after hours": (429, "application/json", json.dumps({"type": "error", "error": {
        "type": "rate_limit_error", "message": "slow down"}}).encode(), {"retry-after": "36000"}),
}


class Hostile:
    def __init__(self, mode: str) -> None:
        self.mode, self.requests = mode, 0
        self.release = threading.Event()

    def serve(self) -> tuple[str, ThreadingHTTPServer]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                api.requests += 1
                if api.mode == "stalled":
                    api.release.wait(30)  # (the client gives up first: its read timeout)
                    return
                status, kind, body, headers = ANSWERS[api.mode]
                self.send_response(status)
                for k, v in {"content-type": kind, "content-length": str(len(body)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}", server


@pytest.mark.parametrize("mode", [*ANSWERS, "stalled"])
def test_a_misbehaving_api_fails_the_sample_not_the_command(cli, tmp_path, monkeypatch, mode):
    from compactlab.next_action import models

    api = Hostile(mode)
    url, server = api.serve()
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COMPACTLAB_NEXT_ACTION_TIMEOUT", "0.5")
    monkeypatch.setattr(models, "MAX_RETRY_AFTER_S", 0.01)
    monkeypatch.setattr(models, "MAX_REPLY_BYTES", 1 << 20)  # (the test's huge reply: 40 MiB)
    started = time.monotonic()
    try:
        r = cli("next-action", SAMPLES / "synth-medium.jsonl", "-p", "s08", "--samples", "1", "--format", "json",
                "--out", tmp_path / "out")
    finally:
        api.release.set()
        server.shutdown()
    assert time.monotonic() - started < 60
    assert r.exit_code == 1, r.output  # (a sample failed: said, the exit says so)
    doc = json.loads(r.stdout)
    errors = [arm["error"] for s in doc["samples"] for arm in (s["policy_arm"], s["control_arm"]) if arm.get("error")]
    assert errors and all(e.startswith("failed: ") for e in errors), errors
    if mode == "huge":
        assert all("the reply is larger than 1 MiB" in e for e in errors), errors
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr and KEY not in r.stdout + r.stderr
    assert (tmp_path / "out" / "samples.csv").is_file()
    assert api.requests >= 1


def test_ctrl_c_while_a_server_never_answers_ends_at_once(tmp_path):
    """(#49) Ctrl-C while the model's server holds a request (and would for its whole read timeout)
    ends the command at once: 130, one line, whatever replies came kept."""
    import os
    import signal
    import subprocess
    import sys

    from helpers import ROOT

    api = Hostile("stalled")
    url, server = api.serve()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url,
           "COMPACTLAB_CACHE_DIR": str(tmp_path / "cache")}
    p = subprocess.Popen([sys.executable, "-m", "compactlab", "next-action", str(SAMPLES / "synth-medium.jsonl"),
                          "-p", "s08", "--samples", "1", "--out", str(tmp_path / "out"), "-q"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while api.requests == 0 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.01)  # (until the server holds the request: the program is waiting on it)
        assert api.requests >= 1
        asked = time.monotonic()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
        took = time.monotonic() - asked
    finally:
        api.release.set()
        server.shutdown()
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130 and took < 5, (p.returncode, took, err[-300:])
    text = err.decode()
    assert "interrupted" in text and "Traceback" not in text and KEY not in text
