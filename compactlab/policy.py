"""Typed policy configuration (SPEC §4): one pydantic model per layer, loaded from TOML.

Unknown keys, wrong types and impossible combinations are errors that name the key. A policy
file may say ``extends = "s08"`` to start from a preset. ``--set layer.key=value`` overrides any
key; the value is read as a TOML value (``true``, ``3``, ``"text"``, ``["a"]``) and as a plain
string when it is not one. The fingerprint is a short hash of the resolved behaviour (name and
description excluded), stored in every report.
"""

from __future__ import annotations

import hashlib
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import PolicyError

CHEAP_LAYERS = ("budget", "snip", "micro")


class LayerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = Field(True, description="run this layer at all")


class BudgetConfig(LayerConfig):
    """L3 tool_result_budget: persist the largest results of the last message to disk."""

    max_chars: int = Field(200_000, ge=1, description="budget for the tool_result content of the last message")
    persist_threshold: int = Field(30_000, ge=1, description="only results larger than this are persisted")
    preview_chars: int = Field(2_000, ge=0, description="chars of the output kept inline as a preview")

    @model_validator(mode="after")
    def _preview_smaller(self) -> "BudgetConfig":
        if self.preview_chars >= self.persist_threshold:
            raise ValueError("preview_chars must be smaller than persist_threshold")
        return self


class SnipConfig(LayerConfig):
    """L1 snip_compact: keep head and tail messages, drop the middle."""

    max_messages: int = Field(50, ge=2, description="snip when the context has more messages than this")
    keep_head: int = Field(3, ge=0, description="messages kept from the start")
    pair_safe: bool | Literal["head"] = Field(
        True, description="move the cut so no tool pair is split: true, false (naive cut) or 'head' (head only)"
    )
    placeholder: str = Field("[snipped {n} messages]", description="user message put in place of the middle")

    @model_validator(mode="after")
    def _head_below_max(self) -> "SnipConfig":
        if self.keep_head >= self.max_messages:
            raise ValueError(f"keep_head ({self.keep_head}) must be smaller than max_messages ({self.max_messages})")
        return self


class MicroConfig(LayerConfig):
    """L2 micro_compact: replace old tool results with a placeholder."""

    keep_recent: int = Field(3, ge=0, description="most recent tool results (or turns, see keep_by) left intact")
    keep_by: Literal["results", "turns"] = Field(
        "results", description="count keep_recent in tool results, or in assistant turns (observation masking)"
    )
    min_chars: int = Field(120, ge=0, description="only results longer than this are replaced")
    placeholder: str = Field(
        "[Earlier tool result compacted. Re-run if needed.]", description="replacement; {tool_name} is filled in"
    )
    preserve_tools: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("preserve_tools", "exclude_tools"),
        description="tools whose results are never replaced (the context-editing API calls them exclude_tools)",
    )
    only_consumed: bool = Field(False, description="touch only results before the last assistant message")
    string_content_only: bool = Field(False, description="skip results whose content is a list of blocks")
    trigger_tokens: int = Field(0, ge=0, description="act only while the context is over this many tokens (0: always)")
    clear_at_least: int = Field(0, ge=0, description="act only if that frees at least this many tokens")
    clear_inputs: bool = Field(False, description="also clear the input of the tool_use whose result is replaced")


class SummaryConfig(LayerConfig):
    """L4 compact_history: summarise the whole context when it is over the trigger."""

    trigger: int = Field(50_000, ge=1, description="summarise when the context is over this size")
    unit: Literal["chars", "tokens", "messages"] = Field(
        "chars", description="unit of trigger: context chars, estimated tokens, or messages (events)")
    input_chars: int = Field(80_000, ge=1, description="summary input: the context's JSON text cut to this")
    input_from: Literal["head", "tail"] = Field("head", description="cut the input from the head or the tail")
    template: str = Field("[Compacted]\n\n{summary}", description="the summary message; {summary}, {transcript}")
    ack: str = Field("", description="optional assistant message after the summary")
    keep_head: int = Field(0, ge=0, description="messages kept verbatim before the summary (pair-safe)")
    keep_tail: int = Field(0, ge=0, description="messages kept verbatim after the summary (pair-safe)")
    max_failures: int = Field(3, ge=1, description="consecutive summarizer failures that open the circuit breaker")
    prompt: str = Field("s08", description="summary prompt name (live summarizer)")
    max_output_tokens: int = Field(2_000, ge=1, description="summary length cap for the summarizer")

    @model_validator(mode="after")
    def _template(self) -> "SummaryConfig":
        if "{summary}" not in self.template:
            raise ValueError("template must contain {summary}")
        if self.unit == "messages" and self.keep_head + self.keep_tail >= self.trigger:
            raise ValueError(f"keep_head + keep_tail ({self.keep_head + self.keep_tail}) must be smaller than a "
                             f"trigger in messages ({self.trigger}): the summary would not shrink the context")
        return self


class ReactiveConfig(LayerConfig):
    """reactive_compact: when the prompt is too long, summary + the last messages."""

    window_tokens: int = Field(200_000, ge=1, description="context window; over it the API says prompt too long")
    keep_tail: int = Field(5, ge=0, description="last messages kept after the summary")
    pair_safe: bool = Field(True, description="move the tail cut so a tool pair is not split")
    max_retries: int = Field(1, ge=0, description="reactive compactions per call before it is an overflow")
    template: str = Field("[Reactive compact]\n\n{summary}", description="the summary message; {summary}")

    @model_validator(mode="after")
    def _template(self) -> "ReactiveConfig":
        if "{summary}" not in self.template:
            raise ValueError("template must contain {summary}")
        return self


class ManualConfig(LayerConfig):
    """The model's own compact tool (SPEC §3 step 2)."""

    tool: str = Field("compact", min_length=1, description="name of the manual compaction tool")
    mode: Literal["before_results", "after_results", "replace_results"] = Field(
        "before_results",
        description="summarise before appending the tool results (seed 000), after them (seed 003), "
        "or instead of them, appending `message` (seed 004)",
    )
    message: str = Field("", description="user message appended after the summary in replace_results mode")

    @model_validator(mode="after")
    def _message(self) -> "ManualConfig":
        if self.mode == "replace_results" and not self.message:
            raise ValueError("mode 'replace_results' needs a message")
        return self


class SizeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    chars_per_token: float = Field(4.0, gt=0, description="token estimate: chars / chars_per_token")
    overhead_tokens: int = Field(0, ge=0, description="tokens of system prompt and tools not in the transcript")


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = "custom"
    description: str = ""
    order: list[Literal["budget", "snip", "micro"]] = Field(default_factory=lambda: list(CHEAP_LAYERS))
    budget: BudgetConfig = BudgetConfig()
    snip: SnipConfig = SnipConfig()
    micro: MicroConfig = MicroConfig()
    summary: SummaryConfig = SummaryConfig()
    reactive: ReactiveConfig = ReactiveConfig()
    manual: ManualConfig = ManualConfig()
    size: SizeConfig = SizeConfig()

    @model_validator(mode="after")
    def _order_unique(self) -> "Policy":
        if len(set(self.order)) != len(self.order):
            raise ValueError("order lists a layer twice")
        return self

    def resolved(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @property
    def fingerprint(self) -> str:
        data = {k: v for k, v in self.resolved().items() if k not in ("name", "description")}
        return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]


# -- loading ---------------------------------------------------------------------------------

def preset_names() -> list[str]:
    files = resources.files("compactlab").joinpath("presets")
    return sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".toml"))


def _preset_text(name: str) -> str:
    res = resources.files("compactlab").joinpath("presets").joinpath(f"{name}.toml")
    if not res.is_file():
        raise PolicyError(f"unknown policy {name!r}", hint=f"presets: {', '.join(preset_names())}; or give a TOML path")
    return res.read_text(encoding="utf-8")


def _parse_toml(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{where}: invalid TOML: {exc}") from None


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _raw_policy(ref: str, seen: tuple[str, ...] = ()) -> tuple[dict, str]:
    """The policy's TOML data with ``extends`` resolved, and where it came from."""
    if ref in seen:
        raise PolicyError(f"policy {ref!r} extends itself ({' -> '.join(seen + (ref,))})")
    is_path = ref.endswith(".toml") or "/" in ref or Path(ref).is_file()
    if is_path:
        path = Path(ref)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PolicyError(f"{ref}: no such policy file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyError(f"{ref}: cannot read policy file: {exc}") from None
        data = _parse_toml(text, ref)
        data.setdefault("name", path.stem)
    else:
        data = _parse_toml(_preset_text(ref), f"preset {ref}")
    parent = data.pop("extends", None)
    if parent is not None:
        if not isinstance(parent, str):
            raise PolicyError(f"{ref}: extends must be a policy name or path")
        base, _ = _raw_policy(parent, seen + (ref,))
        base.pop("name", None)
        base.pop("description", None)
        data = _merge(base, data)
    return data, ref


def parse_override(item: str) -> tuple[list[str], Any]:
    """``layer.key=value`` -> (["layer", "key"], value)."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise PolicyError(f"--set {item!r}: expected KEY=VALUE such as summary.trigger=40000")
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    return key.split("."), parsed


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    data = _merge({}, data)
    for item in overrides:
        path, value = parse_override(item)
        node = data
        for part in path[:-1]:
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            elif not isinstance(nxt, dict):
                raise PolicyError(f"--set {item}: {part!r} is not a table")
            node = nxt
        node[path[-1]] = value
    return data


def build_policy(data: dict, where: str) -> Policy:
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "policy"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise PolicyError(f"{where}: {loc}: {msg}{more}") from None


def load_policy(ref: str, overrides: list[str] | tuple[str, ...] = ()) -> Policy:
    """A preset name or TOML path, with ``--set`` overrides applied."""
    data, where = _raw_policy(ref)
    if overrides:
        data = apply_overrides(data, list(overrides))
        where = f"{where} with --set"
    return build_policy(data, where)
