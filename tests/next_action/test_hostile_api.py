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
    "echoes the key": (200, "application/json", _message([{"type": "text", "text": f"the key is {KEY}; "
                                                         f"<summary>{KEY} again</summary>"}, *TOOL], GOOD_USAGE), {}),
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
                if api.mode == "drip":  # a byte within every read timeout, never the whole reply
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", "100000")
                    self.end_headers()
                    for _ in range(300):
                        if api.release.wait(0.1):
                            return
                        try:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        except OSError:
                            return
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
        # (polled every 10 ms: shutdown() waits for the next poll, 0.5 s by default, at every test's end)
        threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}", server


def _hostile(monkeypatch, tmp_path, mode):
    """The hostile server, and every bound of the one model client made small for it."""
    from compactlab.plumbing import model_clients

    api = Hostile(mode)
    url, server = api.serve()
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COMPACTLAB_NEXT_ACTION_TIMEOUT", "0.5")
    monkeypatch.setenv("COMPACTLAB_MODEL_TIMEOUT", "0.5")
    monkeypatch.setenv("COMPACTLAB_REQUEST_DEADLINE", "1.0")  # (twice the read timeout: the drip outlasts it)
    monkeypatch.setattr(model_clients, "MAX_RETRY_AFTER_S", 0.01)
    monkeypatch.setattr(model_clients, "RETRY_BUDGET_S", 0.015)  # (the second wait of a run is past it)
    monkeypatch.setattr(model_clients, "MAX_REPLY_BYTES", 1 << 20)  # (the test's huge reply: 40 MiB)
    return api, server


#: what each failing mode's error says (the bound that ended it)
SAID = {"huge": "the reply is larger than 1 MiB", "drip": "still coming 1 s after the request",
        "retry-after hours": "of waiting a run allows"}
MODES = [*ANSWERS, "stalled", "drip"]


def _no_key_anywhere(r, *folders) -> None:
    assert KEY not in r.stdout + r.stderr
    for folder in folders:
        for f in folder.rglob("*") if folder.exists() else ():
            if f.is_file():
                assert KEY.encode() not in f.read_bytes(), f


@pytest.mark.parametrize("mode", MODES)
def test_a_misbehaving_api_fails_the_sample_not_the_command(cli, tmp_path, monkeypatch, mode):
    api, server = _hostile(monkeypatch, tmp_path, mode)
    started = time.monotonic()
    try:
        r = cli("next-action", SAMPLES / "synth-medium.jsonl", "-p", "s08", "--samples", "1", "--format", "json",
                "--out", tmp_path / "out")
    finally:
        api.release.set()
        server.shutdown()
    assert time.monotonic() - started < 60
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    _no_key_anywhere(r, tmp_path / "out", tmp_path / "cache")
    assert (tmp_path / "out" / "samples.csv").is_file() and api.requests >= 1
    if mode == "echoes the key":  # (an answer: its words stored scrubbed, everywhere)
        assert r.exit_code == 0, r.output
        return
    assert r.exit_code == 1, r.output  # (a sample failed: said, the exit says so)
    doc = json.loads(r.stdout)
    errors = [arm["error"] for s in doc["samples"] for arm in (s["policy_arm"], s["control_arm"]) if arm.get("error")]
    assert errors and all(e.startswith("failed: ") for e in errors), errors
    if mode in SAID:
        assert any(SAID[mode] in e for e in errors), errors


@pytest.mark.parametrize("mode", MODES)
def test_the_live_summarizer_meets_the_same_server_with_the_same_client(cli, tmp_path, monkeypatch, mode):
    """(#56 §4) The summarizer's client is next-action's: the same bounds end the same requests,
    its failures are failed summaries (the run goes on), and the key is in no file it writes."""
    api, server = _hostile(monkeypatch, tmp_path, mode)
    started = time.monotonic()
    try:
        r = cli("replay", SAMPLES / "synth-medium.jsonl", "-p", "s08", "--set", "summary.trigger=4000",
                "--set", "summary.max_failures=1", "--set", "manual.enabled=false",  # (one failure opens the breaker)
                "--summarizer", "anthropic", "--format", "json", "-o", tmp_path / "out")
    finally:
        api.release.set()
        server.shutdown()
    assert time.monotonic() - started < 90
    assert r.exit_code == 0, r.output
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    _no_key_anywhere(r, tmp_path / "out", tmp_path / "cache")
    run = json.loads((tmp_path / "out" / "summary.json").read_bytes())
    failed = run["failed_summaries"]
    if mode == "echoes the key":
        assert not failed and run["summary"]["summaries"] > 0
        return
    assert failed and api.requests >= 1, run
    if mode in SAID:
        assert any(SAID[mode] in f["error"] for f in failed), failed


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
