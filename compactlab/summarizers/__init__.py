"""Summarizers: the protocol, the offline stub, and the live Anthropic one (plus exact token
counts from the same API)."""

from __future__ import annotations

import os
from dataclasses import field
from typing import Any

from ..errors import UsageError
from ..plain import dataclass
from ..plumbing.folders import default_cache_dir
from .base import Summarizer, SummaryRequest, SummaryResult
from .prompts import PROMPTS
from .stub import StubSummarizer

SUMMARIZERS = ("stub", "anthropic")

__all__ = ["PROMPTS", "SUMMARIZERS", "LiveOptions", "StubSummarizer", "Summarizer", "SummaryRequest",
           "SummaryResult", "build_counter", "build_summarizer"]


#: where the live summarizer's key is read, in this process and in every Dask worker
KEY_VARIABLE = "ANTHROPIC_API_KEY"


@dataclass(frozen=True, eq=False, repr=False)
class LiveOptions:
    """What the live summarizer and token counter need; resolved before any work is done.

    The key never leaves the process: it is left out when the options are pickled (a Dask task,
    a worker process), and a worker reads it from its own environment (``KEY_VARIABLE``)."""

    api_key: str = field(repr=False, compare=False)
    model: str
    base_url: str | None
    cache_dir: str | None  # None: no cache
    prompt: str | None  # explicit prompt text (--summary-prompt), else the policy's
    http_client: Any = None  # tests pass an httpx2 client with a MockTransport
    cache_read_only: bool = False  # --dry-run: the cache is read, never written

    @classmethod
    def from_env(cls, model: str | None, cache_dir: str | None, no_cache: bool, prompt: str | None,
                 http_client: Any = None, read_only: bool = False) -> "LiveOptions":
        from .anthropic_live import DEFAULT_MODEL
        from .prompts import resolve_prompt

        key = os.environ.get(KEY_VARIABLE, "").strip()
        if not key:
            raise UsageError(f"{KEY_VARIABLE} is not set: the live summarizer and --tokens anthropic need it",
                             hint="export ANTHROPIC_API_KEY=..., or use the offline --summarizer stub")
        return cls(
            api_key=key,
            model=model or os.environ.get("ANTHROPIC_MODEL") or DEFAULT_MODEL,
            base_url=os.environ.get("ANTHROPIC_BASE_URL") or None,
            cache_dir=None if no_cache else os.path.abspath(cache_dir or default_cache_dir()),
            prompt=resolve_prompt(prompt, "s08") if prompt else None,
            http_client=http_client,
            cache_read_only=read_only,
        )

    def __repr__(self) -> str:  # never show the key
        return f"LiveOptions(model={self.model!r}, base_url={self.base_url!r}, cache_dir={self.cache_dir!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "api_key"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (in a worker): the key is this process's own, read from its environment."""
        self.__dict__.update(state, api_key=os.environ.get(KEY_VARIABLE, "").strip())

    def key(self) -> str:
        """The key, or a clear error where this process has none (a Dask worker started without it)."""
        if not self.api_key:
            raise UsageError(f"{KEY_VARIABLE} is not set in this process (pid {os.getpid()}): the live summarizer "
                             "needs it", hint="a Dask worker reads the key from its own environment: start the "
                                              f"workers with {KEY_VARIABLE} set")
        return self.api_key


def preload(kind: str) -> None:
    """The modules a summarizer of ``kind`` is built of, imported: called before workers are forked,
    so that each inherits them (the Messages API's SDK costs a process 1.6 s of CPU to import)
    rather than importing them again. A client is each process's own (``build_summarizer``)."""
    if kind == "anthropic":
        import anthropic  # noqa: F401

        from . import anthropic_live  # noqa: F401
        from ..plumbing import model_clients  # noqa: F401


def build_summarizer(kind: str, live: LiveOptions | None = None) -> Summarizer:
    if kind == "stub":
        return StubSummarizer()
    if kind == "anthropic":
        assert live is not None
        from .anthropic_live import AnthropicSummarizer, make_client
        from ..plumbing.cache import DiskCache

        key = live.key()
        client = make_client(key, live.base_url, live.http_client)
        cache = DiskCache(live.cache_dir, "summaries", live.cache_read_only) if live.cache_dir else None
        return AnthropicSummarizer(client, live.model, api_key=key, prompt=live.prompt, cache=cache)
    raise UsageError(f"unknown summarizer {kind!r} (known: {', '.join(SUMMARIZERS)})")


def build_counter(live: LiveOptions, system: Any = None) -> Any:
    from .anthropic_live import AnthropicTokenCounter, make_client
    from ..plumbing.cache import DiskCache

    key = live.key()
    client = make_client(key, live.base_url, live.http_client)
    cache = DiskCache(live.cache_dir, "tokens", live.cache_read_only) if live.cache_dir else None
    return AnthropicTokenCounter(client, live.model, api_key=key, cache=cache, system=system)
