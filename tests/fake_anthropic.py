"""A fake Messages API for tests: an httpx2 MockTransport handler and a loopback HTTP server.

``FakeAPI.script`` is a list of (status, error message) to answer the next requests with; when it
is empty the answer is a successful summary. Every request is recorded (path, headers, body).

``hold(after=n)`` makes every summary request after the n-th wait until ``release()``: a test
that must interrupt a run mid-flight waits with ``wait_held(k)`` until k requests are being held
(the program is then certainly inside those runs) instead of guessing with a sleep.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SUMMARY = "<analysis>private reasoning</analysis>\n<summary>1. Primary Request: the fake summary {n}</summary>"
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
               529: "overloaded_error", 500: "api_error"}


class FakeAPI:
    def __init__(self) -> None:
        self.script: list[tuple[int, str]] = []
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self._gate: threading.Event | None = None
        self._hold_after = 0
        self._held = threading.Semaphore(0)
        #: a text every response echoes in a header (``x-echo``): a server that repeats the key
        self.echo: str | None = None

    def hold(self, after: int = 0) -> None:
        self._gate, self._hold_after = threading.Event(), after

    def release(self) -> None:
        if self._gate is not None:
            self._gate.set()

    def wait_held(self, k: int, timeout: float = 120) -> None:
        """Until k requests are being held (a failsafe timeout only: it fails the test)."""
        for i in range(k):
            assert self._held.acquire(timeout=timeout), f"only {i} of {k} requests arrived"

    @property
    def message_requests(self) -> list[dict]:
        return [r for r in self.requests if r["path"].endswith("/v1/messages")]

    def held_here(self, path: str) -> None:
        """Wait at the gate when ``hold`` asked for it (a model request after the n-th)."""
        gate = self._gate
        if gate is not None and path.endswith(("/v1/messages", "/chat/completions")):
            with self.lock:
                n = len(self.message_requests) + sum(r["path"].endswith("/chat/completions") for r in self.requests) + 1
            if n > self._hold_after:
                self._held.release()
                gate.wait()

    def answer(self, path: str, headers: dict, body: bytes) -> tuple[int, dict, dict]:
        self.held_here(path)
        with self.lock:
            doc = json.loads(body or b"{}")
            self.requests.append({"path": path, "headers": headers, "body": doc})
            if path.endswith("/count_tokens"):
                return 200, {}, {"input_tokens": len(json.dumps(doc["messages"])) // 3}
            if self.script:
                status, message = self.script.pop(0)
                return status, {"retry-after-ms": "1"}, {"type": "error", "error": {
                    "type": ERROR_TYPES.get(status, "api_error"), "message": message}}
            n = len(self.message_requests)
            text = SUMMARY.format(n=n)
            return 200, {}, {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": doc.get("model"),
                             "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                             "stop_sequence": None, "usage": {"input_tokens": 1000 + n, "output_tokens": 50}}

    # -- in-process: an httpx2 transport ---------------------------------------------------------
    def transport(self):
        import httpx2

        def handler(request: "httpx2.Request") -> "httpx2.Response":
            status, headers, body = self.answer(request.url.path, dict(request.headers), request.content)
            return httpx2.Response(status, headers=headers, json=body)

        return httpx2.MockTransport(handler)

    # -- a real loopback server ------------------------------------------------------------------
    def serve(self) -> tuple[str, ThreadingHTTPServer]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                status, headers, doc = api.answer(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                data = json.dumps(doc).encode()
                self.send_response(status)
                echoed = {"x-echo": api.echo} if api.echo else {}
                for k, v in {**headers, **echoed, "content-type": "application/json",
                             "content-length": str(len(data))}.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass  # the client was interrupted meanwhile

            def log_message(self, *args) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # (polled every 10 ms: shutdown() waits for the next poll, 0.5 s by default, at every test's end)
        threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}", server
