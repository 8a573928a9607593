"""The live summarizer: the Messages API through the official SDK (``anthropic`` 2.x on httpx2).

- The key is passed to the client explicitly and never appears in output, reports, cache files
  or error messages (they are scrubbed of it).
- The client is the one every call to a model gets (``plumbing.model_clients``): connect and read
  timeouts, a deadline per request, a cap on the reply; the SDK retries 429 and 529, each wait
  capped and the run's waits bounded. A failure after that raises SummarizerError, which the
  summary layer counts toward its circuit breaker.
- A 400 "prompt is too long" shrinks the summary input by half and retries once.
- Summaries are cached on disk by a hash of (model, prompt, input): a rerun makes no request,
  and a cached summary is billed as if made, so a policy's cost does not depend on the cache.
- No temperature or top_p: the 2.x SDK rejects them.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import SummarizerError, UsageError
from ..plumbing.secrets import scrub
from .base import SummaryRequest, SummaryResult
from ..plumbing.cache import DiskCache, digest
from .prompts import DATA_NOTICE, clean_summary

DEFAULT_MODEL = "claude-haiku-4-5"


def make_client(api_key: str, base_url: str | None = None, http_client: Any = None) -> Any:
    """The Messages API's client, hardened as every call to a model is (``plumbing.model_clients``:
    timeouts, a deadline per request, a cap on the reply, bounded retries)."""
    from ..plumbing.model_clients import client

    return client("anthropic", api_key, base_url, http_client)


def _too_long(exc: Exception) -> bool:
    return getattr(exc, "status_code", None) == 400 and "too long" in str(exc).lower()


class _LiveCaller:
    """What both live callers share: the client, the model, the cache, and a key kept out of
    every message they raise."""

    def __init__(self, client: Any, model: str, api_key: str, cache: DiskCache | None) -> None:
        self.client = client
        self.model = model
        self.cache = cache
        self._secret = api_key
        self.requests = 0

    def _describe(self, exc: Exception, what: str) -> str:
        """A one-line account of an API failure, without the key; a non-API error is re-raised."""
        import anthropic

        from ..plumbing.model_clients import bound_reached

        bound = bound_reached(exc)
        if bound is not None:  # (a reply too large, a deadline, the retry budget: the request's end, said)
            return scrub(f"{what} failed: {bound}", self._secret)[:500]
        if isinstance(exc, json.JSONDecodeError):  # (the SDK read a reply that is no JSON: the server's fault)
            return f"{what} failed: the reply is not JSON ({str(exc)[:80]})"
        if not isinstance(exc, anthropic.AnthropicError):
            raise exc  # a bug, not an API failure
        status = getattr(exc, "status_code", None)
        text = f"{what} failed ({f'HTTP {status}' if status else type(exc).__name__}): {exc}"
        return scrub(text, self._secret)[:500]  # scrubbed whole first: a cut must not leave part of the key


class AnthropicSummarizer(_LiveCaller):
    name = "anthropic"

    def __init__(self, client: Any, model: str, *, api_key: str = "", prompt: str | None = None,
                 cache: DiskCache | None = None) -> None:
        super().__init__(client, model, api_key, cache)
        self.prompt_override = prompt

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        prompt = self.prompt_override if self.prompt_override is not None else request.prompt
        text = request.input_text
        key = digest(self.model, prompt, text)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return SummaryResult(scrub(hit["text"], self._secret), hit["input_tokens"], hit["output_tokens"], cached=True)
        try:
            response = self._create(prompt, text, request.max_output_tokens)
        except Exception as exc:  # noqa: BLE001 - sorted below
            if not _too_long(exc):
                raise self._failure(exc) from None
            # shrink the input and retry once (keeping the newest half)
            text = text[len(text) // 2:]
            try:
                response = self._create(prompt, text, request.max_output_tokens)
            except Exception as exc2:  # noqa: BLE001
                raise self._failure(exc2) from None
        try:  # (a reply that is no Messages API answer: a page, another shape, usage that is no count)
            if not isinstance(response.content, list):
                raise TypeError(type(response.content).__name__)
            parts = [b.text for b in response.content if getattr(b, "type", None) == "text" and isinstance(b.text, str)]
            counts = [response.usage.input_tokens or 0, response.usage.output_tokens or 0]
        except (AttributeError, TypeError):
            raise SummarizerError(f"summarizer request failed: the reply is no Messages API answer "
                                  f"({type(response).__name__})") from None
        if not all(type(n) is int and 0 <= n < 10 ** 9 for n in counts):
            raise SummarizerError(f"summarizer request failed: the reply's usage is no count of tokens "
                                  f"({str(counts)[:60]})")
        # (a model may repeat the key if a transcript holds it: never into a summary, a report or the cache)
        summary = scrub(clean_summary("\n".join(parts)), self._secret) or "(empty summary)"
        result = SummaryResult(summary, counts[0], counts[1])
        if self.cache is not None:
            self.cache.put(key, {"model": self.model, "text": result.text, "input_tokens": result.input_tokens,
                                 "output_tokens": result.output_tokens})
        return result

    def _create(self, prompt: str, text: str, max_tokens: int) -> Any:
        self.requests += 1
        content = f"{prompt}\n\n{DATA_NOTICE}\n\n<conversation>\n{text}\n</conversation>"
        return self.client.messages.create(model=self.model, max_tokens=max_tokens,
                                           messages=[{"role": "user", "content": content}])

    def _failure(self, exc: Exception) -> SummarizerError:
        return SummarizerError(self._describe(exc, "summarizer request"))


class AnthropicTokenCounter(_LiveCaller):
    """Exact prompt tokens from ``messages.count_tokens``, cached on disk by content."""

    def __init__(self, client: Any, model: str, *, api_key: str = "", cache: DiskCache | None = None,
                 system: Any = None) -> None:
        super().__init__(client, model, api_key, cache)
        self.system = system
        self._seen: dict[str, int] = {}

    def count(self, messages: list[dict]) -> int:
        import orjson

        if not messages:
            return 0
        body = orjson.dumps(messages).decode("utf-8")
        key = digest(self.model, str(self.system), body)
        if key in self._seen:
            return self._seen[key]
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self._seen[key] = int(hit["input_tokens"])
            return self._seen[key]
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.system:
            kwargs["system"] = self.system
        self.requests += 1
        try:
            tokens = int(self.client.messages.count_tokens(**kwargs).input_tokens)
        except Exception as exc:  # noqa: BLE001 - sorted by _describe
            raise UsageError(self._describe(exc, "token counting")) from None
        if self.cache is not None:
            self.cache.put(key, {"model": self.model, "input_tokens": tokens})
        self._seen[key] = tokens
        return tokens

