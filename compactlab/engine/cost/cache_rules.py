"""How each provider's prompt cache decides what a call reads (#29 §1): one rule set per
provider, chosen from the model a call recorded (``--cache-model`` overrides it).

The prefix model (``cost.PromptCache``) finds the part of a call's context unchanged since the
previous call; these rules say how a provider turns that into cached tokens, and how long a cache
entry lives. The prices (reads at a discount, writes at a premium or none) are the model's own,
from genai-prices: Anthropic's writes cost 1.25× input (2× for 1-hour writes), OpenAI's,
DeepSeek's and Gemini's implicit caches write at the input price.

- **anthropic** — explicit cache breakpoints, as Claude Code sets them on the last message: the
  previous call's prompt is read, its reply is written by the next call. Entries live 5 minutes
  or 1 hour after their last use (the TTL of the writes). Source: Anthropic's prompt-caching
  documentation; checked within ±1% against the billed Claude Code sessions (docs/concepts.md).
- **openai** — automatic prefix caching of prompts of 1,024 tokens or more, in steps of 128
  tokens; the previous reply is part of the cached prefix. Entries live 5–10 minutes after their
  last use, up to an hour off-peak. Source: OpenAI's prompt-caching guide; the reply and the
  128-token steps are inferred from the recorded ``cached_input_tokens`` of the shared Codex
  rollouts (on 59 of 80 calls of one, 108 of 285 of another the read is exactly the previous
  prompt plus its reply, rounded down to 128; the rest read a step or a few less).
- **deepseek** — context caching on disk, on by default, in units of 64 tokens; the previous
  request's prompt and reply are cached. Entries last hours. Source: DeepSeek's context-caching
  guide; the rule is inferred from recordings: on the shared mini-swe-agent trajectory the read
  is exactly the previous prompt plus its reply, rounded down to 64 tokens, on 134 of 137 calls
  (on 86% of 7,825 calls of 99 such trajectories, as measured for #29).
- **gemini** — implicit caching (Gemini 2.5 and later) of prompts of 1,024 tokens or more, the
  previous reply included; entries live minutes. Source: Google's context-caching documentation;
  no recording with cached tokens is shared to check it against.

- **none** — no prompt cache: every call's prompt is billed at the input price. Anthropic's cache is
  explicit, so a harness that sets no breakpoints caches nothing; a recording on an Anthropic
  model that read and wrote no cache on any of its calls (two or more with usage) is priced so
  (``uncached_as_recorded``), unless ``--cache-model`` says otherwise.

Whatever the rules, a cache hit the recording shows the model did not predict, or a miss, is
replayed as recorded where the recording's cache events are (``cost.recorded_breaks``).
"""

from __future__ import annotations


from typing import Any

from ...plain import NamedTuple
from ...plumbing.providers import family_of


class CacheRules(NamedTuple):
    provider: str
    #: the previous call's reply is part of the cached prefix (else only its prompt)
    reply_cached: bool
    #: reads are whole multiples of this many tokens (rounded down)
    granularity: int
    #: a prompt shorter than this reads nothing from the cache
    minimum: int
    #: seconds an entry lives after its last use; None: the TTL of the writes (Anthropic)
    lifetime: float | None
    source: str
    #: False: nothing is cached, every prompt is billed at the input price (no write premium)
    caches: bool = True

    def read(self, tokens: int) -> int:
        """The cached tokens a prefix of ``tokens`` tokens reads under these rules."""
        if not self.caches or tokens < self.minimum:
            return 0
        return tokens - tokens % self.granularity if self.granularity > 1 else tokens


RULES: dict[str, CacheRules] = {r.provider: r for r in [
    CacheRules("anthropic", reply_cached=False, granularity=1, minimum=0, lifetime=None,
               source="Anthropic prompt caching: explicit breakpoints, 5-minute or 1-hour TTL"),
    CacheRules("openai", reply_cached=True, granularity=128, minimum=1024, lifetime=3600.0,
               source="OpenAI prompt caching: automatic, 1,024+ tokens in 128-token steps, 5-10 minutes idle "
                      "(the reply and the steps inferred from Codex rollouts)"),
    CacheRules("deepseek", reply_cached=True, granularity=64, minimum=64, lifetime=4 * 3600.0,
               source="DeepSeek context caching on disk, 64-token units (prompt and reply: inferred from "
                      "recordings)"),
    CacheRules("gemini", reply_cached=True, granularity=1, minimum=1024, lifetime=300.0,
               source="Gemini implicit caching, 1,024+ tokens (not checked against a recording)"),
    CacheRules("none", reply_cached=False, granularity=1, minimum=0, lifetime=None, caches=False,
               source="no prompt cache: every prompt at the input price"),
]}

def provider_of(model: str | None) -> str:
    """The provider whose cache serves ``model`` (``family_of``; anything else: anthropic)."""
    return family_of(model) or "anthropic"


def uncached_as_recorded(calls_usage: list[dict[str, Any]], rules: CacheRules) -> bool:
    """Whether a recording under Anthropic's rules shows its harness set no cache breakpoints: two
    or more calls recorded usage, and none of them read or wrote the cache."""
    used = [u for u in calls_usage if u]
    return (rules.provider == "anthropic" and len(used) >= 2
            and not any(u.get("cache_read_input_tokens") or u.get("cache_creation_input_tokens") for u in used))


def rules_for(model: str | None, override: str | None = None) -> CacheRules:
    """The cache rules for a call on ``model``, or the provider ``override`` names."""
    if override is not None:
        if override not in RULES:
            raise ValueError(f"unknown cache model {override!r} (known: {', '.join(RULES)})")
        return RULES[override]
    return RULES[provider_of(model)]
