"""Which provider a model name is one of: the one table of model-name prefixes every part reads
(the cache rules, the price stand-ins, a loader that reads usage by provider)."""

from __future__ import annotations

#: model-name prefixes of each provider's models (the first match wins)
_PREFIXES = (("claude", "anthropic"), ("anthropic", "anthropic"), ("gpt-", "openai"), ("o1", "openai"),
             ("o3", "openai"), ("o4", "openai"), ("codex", "openai"), ("openai", "openai"), ("chatgpt", "openai"),
             ("deepseek", "deepseek"), ("gemini", "gemini"), ("google", "gemini"), ("vertex", "gemini"))


def family_of(model: str | None) -> str | None:
    """The provider whose models ``model`` is named like (a litellm-style ``provider/model`` too:
    ``azure/gpt-4o``, ``openrouter/openai/gpt-4o-mini``, ``together_ai/deepseek-ai/DeepSeek-V3``),
    or None for a name of no provider known here."""
    name = (model or "").lower()
    for part in (name.rsplit("/", 1)[-1], name):
        for prefix, provider in _PREFIXES:
            if part.startswith(prefix):
                return provider
    return None
