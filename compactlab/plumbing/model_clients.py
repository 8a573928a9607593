"""The one way compactlab makes a client of a model's API (#56 §4): the live summarizer, exact
token counts and next-action alike get the official SDK's client, hardened the same way.

- **Connect and read timeouts** (``CONNECT_TIMEOUT_S``; the read timeout ``READ_TIMEOUT_S``, or
  ``COMPACTLAB_MODEL_TIMEOUT`` / next-action's ``COMPACTLAB_NEXT_ACTION_TIMEOUT``).
- **A deadline per request** (``DEADLINE_S``, ``COMPACTLAB_REQUEST_DEADLINE``): a reply still
  coming after it fails, so that a server that drips a byte within every read timeout cannot hold
  a run.
- **A cap on the reply** (``MAX_REPLY_BYTES``), by its Content-Length or as it comes.
- **Retries bounded**: at most ``RETRIES`` a request, each waiting at most ``MAX_RETRY_AFTER_S``
  whatever a server's Retry-After says (the SDKs obey up to 49 days), and a client's waits in all
  at most ``RETRY_BUDGET_S``: past it, a request that would wait fails with a line that says so.

The key is passed explicitly, and the SDKs' debug logs are scrubbed of it (``secrets``).
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..errors import UsageError
from .secrets import scrub_logs

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 120.0
DEADLINE_S = 600.0
MAX_REPLY_BYTES = 16 << 20
RETRIES = 2
MAX_RETRY_AFTER_S = 60.0
RETRY_BUDGET_S = 180.0


class ReplyTooLarge(Exception):
    """A reply past MAX_REPLY_BYTES (read no further)."""


class DeadlinePassed(Exception):
    """A reply still coming when its request's deadline passed."""


class RetryBudgetSpent(Exception):
    """A client that has waited its whole retry budget, asked to wait again."""


BOUNDS = (ReplyTooLarge, DeadlinePassed, RetryBudgetSpent)


def bound_reached(exc: BaseException) -> BaseException | None:
    """The bound that ended a request (a reply too large, a deadline, the retry budget), raised as
    it came or as the cause of the SDK's connection error once it gave up; else None."""
    found: list[BaseException] = []
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            break
        if isinstance(seen, BOUNDS):
            found.append(seen)
        seen = seen.__cause__ or seen.__context__
    # (the retry budget spent on retrying a reply too large or too slow: that reply's bound is the news)
    return next((b for b in found if not isinstance(b, RetryBudgetSpent)), found[0] if found else None)


def seconds(names: tuple[str, ...], default: float, at_most: float = 3600) -> float:
    """A number of seconds from the first of the environment variables ``names`` that is set (a
    one-line error naming it where it is no number above 0 and at most ``at_most``), else ``default``."""
    for name in names:
        raw = os.environ.get(name, "").strip()
        if not raw:
            continue
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not 0 < value <= at_most:
            raise UsageError(f"{name}={raw[:20]}: not a number of seconds above 0 and at most {at_most:g}")
        return value
    return default


def _http_client(sdk: Any, deadline: float, limit: int) -> Any:
    """The SDK's own HTTP client (its defaults) on a transport that reads a reply only up to
    ``limit`` bytes and only until ``deadline`` seconds after the request was sent."""
    import httpx2

    class Bounded(httpx2.SyncByteStream):
        def __init__(self, inner: Any, ends: float) -> None:
            self.inner, self.ends = inner, ends

        def __iter__(self) -> Any:
            n = 0
            for chunk in self.inner:
                n += len(chunk)
                if n > limit:
                    raise ReplyTooLarge(f"the reply is larger than {limit >> 20} MiB")
                if time.monotonic() > self.ends:
                    raise DeadlinePassed(f"the reply was still coming {deadline:g} s after the request "
                                         "(COMPACTLAB_REQUEST_DEADLINE)")
                yield chunk

        def close(self) -> None:
            self.inner.close()

    class Transport(httpx2.HTTPTransport):
        def handle_request(self, request: Any) -> Any:
            ends = time.monotonic() + deadline
            response = super().handle_request(request)
            length = response.headers.get("content-length", "")
            if length.isdigit() and int(length) > limit:
                response.close()
                raise ReplyTooLarge(f"the reply is larger than {limit >> 20} MiB ({int(length):,} bytes)")
            response.stream = Bounded(response.stream, ends)
            return response

    return sdk.DefaultHttpxClient(transport=Transport())


def _bounded_retries(client_class: Any, most: float, budget: float) -> Any:
    """``client_class`` (the SDK's) waiting at most ``most`` seconds before a retry and ``budget``
    in all."""
    class Bounded(client_class):  # type: ignore[misc, valid-type]
        waited = 0.0

        def _calculate_retry_timeout(self, *args: Any, **kwargs: Any) -> float:
            wait = min(float(super()._calculate_retry_timeout(*args, **kwargs)), most)
            if self.waited + wait > budget:
                raise RetryBudgetSpent(f"the API asked to retry again, past the {budget:g} s of waiting a run "
                                       "allows (its Retry-After or the SDK's backoff)")
            type(self).waited += wait  # (the run's: every copy the SDK makes of the client counts)
            return wait

    return Bounded


def client(sdk_name: str, api_key: str, base_url: str | None = None, http_client: Any = None,
           read_timeout: float | None = None) -> Any:
    """A hardened client of ``sdk_name`` ("anthropic" or "openai"; see the module's docstring);
    ``http_client``: a test's own transport, used as given (its reply cap and deadline are then
    the test's)."""
    sdk: Any
    if sdk_name == "anthropic":
        import anthropic

        sdk = anthropic
    else:
        try:
            import openai
        except ImportError:
            raise UsageError("the openai package is not installed: an OpenAI-compatible endpoint needs it",
                             hint="pip install 'compactlab[openai]'") from None
        sdk = openai
    scrub_logs(api_key)  # (the SDKs' debug logs show headers that echo it)
    read = read_timeout if read_timeout is not None else seconds(("COMPACTLAB_MODEL_TIMEOUT",), READ_TIMEOUT_S)
    deadline = seconds(("COMPACTLAB_REQUEST_DEADLINE",), DEADLINE_S, at_most=86400)
    kwargs: dict[str, Any] = {"api_key": api_key, "max_retries": RETRIES,
                              "timeout": sdk.Timeout(read, connect=CONNECT_TIMEOUT_S),
                              "http_client": http_client or _http_client(sdk, deadline, MAX_REPLY_BYTES)}
    if base_url:
        kwargs["base_url"] = base_url
    cls = sdk.Anthropic if sdk_name == "anthropic" else sdk.OpenAI
    return _bounded_retries(cls, MAX_RETRY_AFTER_S, RETRY_BUDGET_S)(**kwargs)
