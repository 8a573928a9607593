"""Who is asked (issue #30 §4, §5): the Anthropic Messages API through the ``anthropic`` SDK, or an
OpenAI-compatible Chat Completions endpoint (OpenAI, DeepSeek, a local server) through the
``openai`` SDK (the extra ``compactlab[openai]``).

- The API is ``--api``, else the model's provider: Anthropic for ``claude-*``, OpenAI-compatible
  for the rest. Keys and base URLs come from the usual variables: ``ANTHROPIC_API_KEY`` /
  ``ANTHROPIC_BASE_URL``, ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``.
- The key is passed to the client explicitly, never printed, never written, and scrubbed from
  every error message (as the live summarizer does).
- Replies are cached on disk (the user's cache folder, ``next_action/``) by a hash of the API and
  the whole request, its model named by the dated snapshot it last answered as (a reply says which
  model answered): a rerun sends nothing and costs nothing, and once an alias names a new snapshot,
  nothing its old one answered is reused.
- The SDKs retry 429 and 5xx; a request that still fails is that sample's failure (named in the
  ledger); a refused key stops the command; a request the API rejects (HTTP 400, e.g. a context
  whose tool results lost their calls) is that arm's answer: "rejected".
"""

from __future__ import annotations

import json
import os
from typing import Any

import orjson

from ..engine.cost.cache_rules import provider_of
from ..errors import UsageError
from ..plain import NamedTuple, dataclass
from ..plumbing import model_clients
from ..plumbing.secrets import scrub
from ..plumbing.cache import DiskCache, digest
from .actions import Action, action_of, tool_action

APIS = ("anthropic", "openai")
#: how long a request may wait for its answer: COMPACTLAB_NEXT_ACTION_TIMEOUT, else the model clients'
#: (a server that accepts the connection and never answers fails the sample)
TIMEOUT_VARIABLES = ("COMPACTLAB_NEXT_ACTION_TIMEOUT", "COMPACTLAB_MODEL_TIMEOUT")


class BadReply(Exception):
    """A reply that is no answer of the API asked (another shape, usage figures that are no
    counts): that sample's failure, named, the run going on."""


def _count(value: Any, what: str) -> int:
    """A token count of a reply's usage: a whole number from 0 to 10^15 (anything else is no count)."""
    if value is None:
        return 0
    if type(value) is int and 0 <= value < 10 ** 15:
        return value
    raise BadReply(f"the reply's usage {what} is {str(value)[:30]}, not a token count")
DEFAULT_MODEL = "claude-haiku-4-5"
#: the environment variables of each API: (key, base URL)
ENVIRONMENT = {"anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
               "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL")}


def api_of(model: str, api: str | None) -> str:
    """``api``, else the one serving ``model``."""
    if api is not None:
        return api
    return "anthropic" if provider_of(model) == "anthropic" else "openai"


@dataclass(frozen=True)
class ModelOptions:
    """Who is asked and how: resolved before any work, the key checked only when a request must
    be sent (a rerun answered from the cache needs none)."""

    api: str
    model: str
    base_url: str | None
    cache_dir: str | None  # None: no cache
    max_tokens: int = 256
    read_only: bool = False  # --dry-run: the cache is read, never written
    http_client: Any = None  # tests: an httpx2 client with a MockTransport

    @classmethod
    def from_env(cls, model: str | None, api: str | None, cache_dir: str | None = None, no_cache: bool = False,
                 max_tokens: int = 256, read_only: bool = False, http_client: Any = None) -> "ModelOptions":
        from ..plumbing.folders import default_cache_dir

        name = model or DEFAULT_MODEL
        which = api_of(name, api)
        return cls(api=which, model=name, base_url=os.environ.get(ENVIRONMENT[which][1]) or None,
                   cache_dir=None if no_cache else os.path.abspath(cache_dir or default_cache_dir()),
                   max_tokens=max_tokens, read_only=read_only, http_client=http_client)

    def api_key(self) -> str:
        variable = ENVIRONMENT[self.api][0]
        key = os.environ.get(variable, "").strip()
        if not key:
            raise UsageError(f"{variable} is not set: next-action asks {self.model} through the {self.api} API",
                             hint=f"export {variable}=...; --dry-run shows the samples and the estimate without it")
        return key


class Reply(NamedTuple):
    """A model's answer to one request: its first action, the usage it was billed (empty when
    answered from the cache), and why there is none (``error``)."""

    action: Action
    usage: dict[str, int]
    cached: bool = False
    error: str | None = None


class Asker:
    """Sends requests to one model and caches the replies."""

    def __init__(self, options: ModelOptions) -> None:
        self.options = options
        self.cache = DiskCache(options.cache_dir, "next_action", options.read_only) if options.cache_dir else None
        self._client: Any = None
        self._secret = ""
        self.sent = 0
        #: the dated snapshot the model's name last answered as (``claude-haiku-4-5`` answers as
        #: ``claude-haiku-4-5-20251001``), kept in the cache: replies are keyed by it, so a reply is
        #: never reused once the alias names another snapshot (#46 §3); None: not seen yet
        self.snapshot: str | None = None
        if self.cache is not None:
            seen = self.cache.get(self._alias_key())
            served = seen.get("served") if seen else None
            self.snapshot = served if isinstance(served, str) and served.startswith(options.model) else None

    def _alias_key(self) -> str:
        return digest("snapshot", self.options.api, self.options.model)

    def key_of(self, body: dict[str, Any]) -> str:
        """A request's cache key: the whole request, its model named by its snapshot where known."""
        if self.snapshot and body.get("model") == self.options.model:
            body = {**body, "model": self.snapshot}
        return digest(self.options.api, orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode())

    def _served(self, model: Any) -> None:
        """A reply says which model answered: a dated snapshot of the alias asked becomes the one
        replies are keyed by, from this reply on."""
        if (isinstance(model, str) and model != self.options.model and model.startswith(self.options.model)
                and model != self.snapshot):
            self.snapshot = model
            if self.cache is not None:
                self.cache.put(self._alias_key(), {"model": self.options.model, "served": model})

    def cached(self, body: dict[str, Any], key: str | None = None) -> Reply | None:
        """The cached reply to ``body`` (whose ``key`` may be known already), if there is one."""
        if self.cache is None:
            return None
        key = key or self.key_of(body)
        hit = self.cache.get(key)
        if hit is None:
            return None
        action = hit.get("action")
        if not isinstance(action, dict) or action.get("kind") not in ("tool", "text", "none"):
            self.cache.ignore(key, "not a reply")
            return None
        return Reply(self._scrubbed(Action(str(action["kind"]), str(action.get("tool") or ""), _str(action.get("target")),
                                           _str(action.get("command")), str(action.get("text") or ""))), {}, cached=True)

    def _scrubbed(self, action: Action) -> Action:
        """``action`` without any piece of the key (a model may repeat what it saw, or was told)."""
        secret = self._secret or os.environ.get(ENVIRONMENT[self.options.api][0], "").strip()
        if not secret:
            return action
        return Action(action.kind, scrub(action.tool, secret),
                      None if action.target is None else scrub(action.target, secret),
                      None if action.command is None else scrub(action.command, secret), scrub(action.text, secret))

    def ask(self, body: dict[str, Any]) -> Reply:
        key = self.key_of(body)  # (a request's body can be megabytes: serialised once)
        hit = self.cached(body, key)
        if hit is not None:
            return hit
        if self._client is None:
            self._client = self._connect()
        self.sent += 1
        try:
            reply = self._anthropic(body) if self.options.api == "anthropic" else self._openai(body)
        except BadReply as exc:
            return Reply(Action("none"), {}, error=f"failed: {scrub(str(exc), self._secret)}")
        except json.JSONDecodeError as exc:  # (the SDK parses a reply that is not JSON: an HTML page, half a body)
            return Reply(Action("none"), {}, error=f"failed: the reply is not JSON ({exc.msg} at {exc.pos})")
        except Exception as exc:  # noqa: BLE001 - sorted by _failure
            return self._failure(exc)
        reply = reply._replace(action=self._scrubbed(reply.action))  # (before it is cached or shown)
        if self.cache is not None:
            self.cache.put(self.key_of(body), {"model": self.snapshot or self.options.model,
                                               "action": reply.action.to_dict(), "usage": reply.usage})
        return reply

    def _connect(self) -> Any:
        """The hardened client every call to a model uses (``plumbing.model_clients``)."""
        self._secret = self.options.api_key()
        o = self.options
        return model_clients.client(o.api, self._secret, o.base_url, o.http_client,
                                    read_timeout=model_clients.seconds(TIMEOUT_VARIABLES, model_clients.READ_TIMEOUT_S))

    def _anthropic(self, body: dict[str, Any]) -> Reply:
        response = self._client.messages.create(**body)
        self._served(getattr(response, "model", None))
        try:  # (an error from here on is the reply's shape, not a bug of the request)
            if not isinstance(response.content, list):
                raise BadReply(f"the reply's content is {type(response.content).__name__}, not a list of blocks")
            blocks = [b.model_dump() if hasattr(b, "model_dump") else dict(b) for b in response.content]
            u = response.usage
            usage = {k: _count(getattr(u, k, 0), k) for k in ("input_tokens", "output_tokens",
                                                              "cache_read_input_tokens", "cache_creation_input_tokens")}
            return Reply(action_of({"role": "assistant", "content": blocks}), usage)
        except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
            raise BadReply(f"the reply is not a Messages API answer ({type(exc).__name__})") from None

    def _openai(self, body: dict[str, Any]) -> Reply:
        response = self._client.chat.completions.create(**body)
        self._served(getattr(response, "model", None))
        try:  # (an error from here on is the reply's shape, not a bug of the request)
            return self._openai_reply(response)
        except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
            raise BadReply(f"the reply is not a Chat Completions answer ({type(exc).__name__})") from None

    def _openai_reply(self, response: Any) -> Reply:
        message = response.choices[0].message if response.choices else None
        calls = getattr(message, "tool_calls", None) or []
        if calls:
            function = calls[0].function
            action = tool_action(str(function.name or ""), function.arguments)
        else:
            text = str(getattr(message, "content", None) or "")
            action = Action("text", text=text) if text.strip() else Action("none")
        u = response.usage
        prompt = _count(getattr(u, "prompt_tokens", 0), "prompt_tokens")
        details = getattr(u, "prompt_tokens_details", None)
        read = _count(getattr(details, "cached_tokens", 0), "cached_tokens") if details is not None else 0
        if read > prompt:
            raise BadReply(f"the reply's usage reads {read} cached tokens of a {prompt}-token prompt")
        usage = {"input_tokens": prompt - read, "cache_read_input_tokens": read, "cache_creation_input_tokens": 0,
                 "output_tokens": _count(getattr(u, "completion_tokens", 0), "completion_tokens")}
        return Reply(action, usage)

    def _failure(self, exc: Exception) -> Reply:
        """A failed request as a reply with its reason (scrubbed of the key); a refused key stops
        the command; anything that is not an API error is a bug and raised."""
        status = getattr(exc, "status_code", None)
        bound = model_clients.bound_reached(exc)
        if bound is not None:  # (raised as it came, or the SDK retried and gave up: a connection error caused by it)
            return Reply(Action("none"), {}, error=f"failed: {bound}")
        if not _api_error(exc):
            raise exc
        text = scrub(f"HTTP {status}: {exc}" if status else f"{type(exc).__name__}: {exc}", self._secret)
        line = " ".join(text.split())[:300]
        if status in (401, 403):
            raise UsageError(f"the {self.options.api} API refused the key ({line})",
                             hint=f"check {ENVIRONMENT[self.options.api][0]}")
        return Reply(Action("none"), {}, error=("rejected: " if status == 400 else "failed: ") + line)


def _api_error(exc: Exception) -> bool:
    import anthropic

    if isinstance(exc, anthropic.AnthropicError):
        return True
    try:
        import openai
    except ImportError:
        return False
    return isinstance(exc, openai.OpenAIError)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
