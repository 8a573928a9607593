"""The settings a harness lets you change, as tune searches them and as you paste them (#57 §3).

Each harness (``TABLE``) is its preset and the knobs it exposes: for each, the harness's own name
for it, the preset key it sets, and the values searched -- only values the harness takes, within
its clamps (a Claude Code override above the default, or a Codex limit above 90% of the window,
is ignored by the harness, so it is never searched nor suggested). tune searches those values as
the preset's keys, so that the setting printed is the very point replayed; ``render`` prints a
point in the harness's own form (an ``export`` line and a settings.json fragment, config.toml
lines, a Python constructor call, the Messages API's ``context_management`` JSON), and
``parse_setting`` reads such a form back into the preset's keys (what the tests replay).

No compaction is ``off``: the setting that turns it off where the harness has one; where it has
none (Codex, Gemini CLI), no compaction is not a candidate and ``no_off`` says why.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Callable

from ..engine.layers.harness_triggers import (CODEX_RECORDED, GOOSE_DEFAULT, PRESET_WINDOW, QWEN_CODE_DEFAULT,
                                              RESERVE_SETTINGS, RULES, claude_code_lowered, codex_limit, harness_trigger,
                                              qwen_code_ladder)
from ..engine.window import GEMINI_CLI_WINDOW
from ..errors import UsageError
from ..plain import dataclass


@dataclass(frozen=True)
class Knob:
    """One setting a harness exposes: its name there, the preset key it sets, the preset values
    searched, and how a preset value reads as the setting's value (``shown``) and back (``read``)."""

    setting: str
    key: str
    values: tuple[Any, ...]
    shown: Callable[[Any], Any] = lambda v: v
    read: Callable[[Any], Any] = lambda v: v
    #: a short name for a narrow terminal's table
    short: str = ""
    #: the preset values the harness takes, where wider than those searched (lowest, highest)
    takes: tuple[Any, Any] | None = None

    def taken(self, value: Any) -> bool:
        """Whether the harness takes the preset value ``value`` (``takes``, else the range searched)."""
        low, high = self.takes or (min(self.values), max(self.values))
        return bool(low <= value <= high)


@dataclass(frozen=True)
class Harness:
    """A harness or framework whose compaction settings tune searches: its preset and its knobs.
    (A docstring of its own: the standard library writes a class's signature as the docstring of
    one without, and reading it tokenizes, which compiles a pattern of a few milliseconds.)"""

    name: str
    title: str
    preset: str
    knobs: tuple[Knob, ...]
    #: the setting's values (by knob.setting) -> the lines to paste
    render: Callable[[dict[str, Any]], list[str]]
    #: the lines that turn compaction off (empty: the harness has no such setting; ``no_off`` says why)
    off: tuple[str, ...] = ()
    no_off: str = ""
    #: what the harness ignores, said beside the suggestion
    ignored: str = ""
    #: the preset keys the harness's other settings set, which tune keeps at yours and does not search
    #: (Claude Code's CLAUDE_CODE_AUTO_COMPACT_WINDOW: ``summary.trigger_window``)
    kept: tuple[str, ...] = ()
    #: the preset's default is not the harness's own default: the setting is printed even for it
    #: (OpenCode's, whose preset's reserve is not the current source's; and the features a program
    #: turns on, whose own default is no compaction: a framework's middleware, the API's context
    #: editing, Strands' summarizing manager)
    always_set: bool = False

    def space(self, values: dict[str, tuple[Any, ...]] | None = None) -> list[str]:
        """The ``--space`` items of the harness's knobs, in its preset's keys (``values``: a knob's
        values other than its own, by its key: ``claude_code_shares`` of the sessions' window)."""
        values = values or {}
        return [k.key + "=" + "|".join(str(v) for v in values.get(k.key, k.values)) for k in self.knobs]

    def setting_values(self, values: dict[str, Any]) -> dict[str, Any]:
        """A point's preset values as the harness's settings."""
        return {k.setting: k.shown(values[k.key]) for k in self.knobs if k.key in values}


#: Claude Code's window the percentage is taken of (its default; autoCompactWindow changes it), and
#: 2.1.x's default trigger of it (its rule's: 167,000)
CLAUDE_WINDOW = 200_000
CLAUDE_DEFAULT = harness_trigger("claude-code", None, CLAUDE_WINDOW)[0]


def claude_code_shares(window: int = CLAUDE_WINDOW) -> tuple[float, ...]:
    """The ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`` shares tune searches where the sessions' largest
    Claude Code window is ``window``: every whole percentage from 40% to the highest that lowers
    Claude Code's default there (a higher one it ignores): 83% of 200,000, whose default is 167,000;
    96% of the 1M-context window, whose default is 967,000."""
    default = harness_trigger("claude-code", None, window)[0]
    top = max((p for p in range(40, 100) if claude_code_lowered(window, p / 100) < default), default=40)
    return tuple(p / 100 for p in range(40, top + 1))
#: Codex CLI's default limit for the gpt-5.x-codex models and their window (90% of it: 244,800 of
#: 272,000), as its rule has them of the 258,400 their rollouts record (``harness_triggers``)
CODEX_LIMIT, CODEX_WINDOW = codex_limit(CODEX_RECORDED)


def codex_limits(window: int = CODEX_RECORDED) -> tuple[int, ...]:
    """The ``model_auto_compact_token_limit`` values tune searches where the sessions' largest
    recorded Codex window is ``window``: 100,000 up in steps of 8,000 to Codex's default there, 90% of
    the model's window (244,800 of the gpt-5.x-codex models'), the most it takes (a higher one it
    lowers to it)."""
    top = codex_limit(window)[0]
    return (*range(100_000, top, 8_000), top)
#: the reserves Pi's compaction.reserveTokens and OpenCode's compaction.reserved are searched over
#: (the presets' summary.trigger_reserve: their rules take it off each session's window,
#: ``harness_triggers``), and the most either takes
PI_RESERVES = tuple(range(96_000, 4_095, -4_000))
OPENCODE_RESERVES = tuple(range(88_000, -1, -4_000))
MOST_RESERVED = 10_000_000
#: goose's threshold and Qwen Code's are shares of the model's window (their presets' window: 200,000;
#: their defaults: ``harness_triggers``)
GOOSE_WINDOW = QWEN_CODE_WINDOW = 200_000
#: Gemini CLI's, of gemini-2.5-pro's 1,048,576 (``DEFAULT_COMPRESSION_TOKEN_THRESHOLD``)
GEMINI_CLI_DEFAULT = 0.5
#: why no compaction is no setting of Qwen Code 0.17 and later
QWEN_CODE_NO_OFF = ("Qwen Code 0.17 and later ignore contextPercentageThreshold, whose 0 turned compression off "
                    "(QwenLM/qwen-code#4345), and compactlab knows no setting of theirs that does")


def _claude(s: dict[str, Any]) -> list[str]:
    pct = s["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"]
    return [f"export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE={pct}",
            "~/.claude/settings.json: " + json.dumps({"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": str(pct)}})]


def _codex(s: dict[str, Any]) -> list[str]:
    return ["~/.codex/config.toml:", f"model_auto_compact_token_limit = {s['model_auto_compact_token_limit']}"]


def _gemini(s: dict[str, Any]) -> list[str]:
    return ["~/.gemini/settings.json: " + json.dumps({"model": {"compressionThreshold": s["model.compressionThreshold"]}})]


def _opencode(s: dict[str, Any]) -> list[str]:
    return ["opencode.json: " + json.dumps({"compaction": {"reserved": s["compaction.reserved"]}})]


def _pi(s: dict[str, Any]) -> list[str]:
    return ["~/.pi/agent/settings.json: " + json.dumps({"compaction": {"reserveTokens": s["compaction.reserveTokens"]}})]


def _goose(s: dict[str, Any]) -> list[str]:
    return [f"export GOOSE_AUTO_COMPACT_THRESHOLD={s['GOOSE_AUTO_COMPACT_THRESHOLD']}"]


def _qwen_code(s: dict[str, Any]) -> list[str]:
    threshold = s["model.chatCompression.contextPercentageThreshold"]
    return ["~/.qwen/settings.json: "
            + json.dumps({"model": {"chatCompression": {"contextPercentageThreshold": threshold}}})]


def _share_of(window: int) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """A threshold that is a share of ``window`` as the preset's trigger: (the share a trigger is, the
    trigger a share is), each the other's inverse on the searched shares (rounded, not cut: 0.7 of
    200,000 is 140,000, not 139,999)."""
    return (lambda t: round(t / window, 2)), (lambda f: round(window * float(f)))


def _a_share(value: Any) -> float:
    """A share as a setting gives it (``"0.6"``, ``0.6``), as the preset's ``summary.trigger_share``."""
    return round(float(value), 6)


def _call(module: str, name: str, args: str, wrap: str = "") -> list[str]:
    imports = f"from {module} import {name}" if not wrap else f"from {module} import {name}, {wrap}"
    call = f"{name}({args})"
    return [imports, f"{wrap}(edits=[{call}])" if wrap else call]


def _langchain(s: dict[str, Any]) -> list[str]:
    return _call("langchain.agents.middleware", "SummarizationMiddleware",
                 f"model=model, trigger=(\"fraction\", {s['trigger']}), keep=(\"messages\", {s['keep']})")


def _langchain_clear(s: dict[str, Any]) -> list[str]:
    return _call("langchain.agents.middleware", "ClearToolUsesEdit", f"trigger={s['trigger']}, keep={s['keep']}",
                 wrap="ContextEditingMiddleware")


def _strands(s: dict[str, Any]) -> list[str]:
    return _call("strands.agent.conversation_manager", "SlidingWindowConversationManager",
                 f"window_size={s['window_size']}")


def _strands_summarizing(s: dict[str, Any]) -> list[str]:
    return _call("strands.agent.conversation_manager", "SummarizingConversationManager",
                 f"summary_ratio={s['summary_ratio']}, preserve_recent_messages={s['preserve_recent_messages']}")


def _anthropic(s: dict[str, Any]) -> list[str]:
    edit = {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": s["trigger"]},
            "keep": {"type": "tool_uses", "value": s["keep"]},
            "clear_at_least": {"type": "input_tokens", "value": s["clear_at_least"]}}
    return ["the Messages API request (beta context-management-2025-06-27): "
            + json.dumps({"context_management": {"edits": [edit]}})]


def _steps(lo: float, hi: float, step: float, digits: int = 2) -> tuple[Any, ...]:
    n = int(round((hi - lo) / step))
    return tuple(round(lo + i * step, digits) if digits else int(lo + i * step) for i in range(n + 1))


TABLE: dict[str, Harness] = {h.name: h for h in (
    Harness("claude-code", "Claude Code", "claude-code", (
        Knob("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "summary.trigger_share", claude_code_shares(),
             shown=lambda s: round(s * 100) if s else "unset", read=lambda p: round(float(p) / 100, 6), short="pct",
             takes=(0.01, 1.0)),),
            _claude, off=("export DISABLE_AUTO_COMPACT=1", '~/.claude/settings.json: {"autoCompactEnabled": false}'),
            kept=("summary.trigger_window",),
            ignored="an override at or above the default (83.5% of a 200,000-token window on 2.1.x; of a larger "
                    "window, the window less 33,000) is ignored by Claude Code: the search stops at 83%, the most a "
                    "200,000-token session takes (96% where a session ran on the 1M-context window)"),
    Harness("codex", "Codex CLI", "codex", (
        Knob("model_auto_compact_token_limit", "summary.trigger_cap", codex_limits(), short="limit",
             takes=(1_000, 10_000_000)),), _codex,
            no_off="Codex CLI has no setting that turns auto-compaction off (it takes the lesser of "
                   "model_auto_compact_token_limit and 90% of the window)",
            ignored="a limit above 90% of the window (244,800 of 272,000) is lowered to it by Codex: the search "
                    "stops there (at 90% of the largest window the sessions record)"),
    Harness("gemini-cli", "Gemini CLI", "gemini-cli", (
        Knob("model.compressionThreshold", "summary.trigger",
             tuple(round(GEMINI_CLI_WINDOW * f) for f in _steps(0.1, 0.9, 0.05)), *_share_of(GEMINI_CLI_WINDOW),
             short="threshold"),), _gemini,
            no_off="compactlab knows no Gemini CLI setting that turns chat compression off"),
    Harness("opencode", "OpenCode", "opencode", (
        Knob("compaction.reserved", "summary.trigger_reserve", OPENCODE_RESERVES, read=int, short="reserved",
             takes=(0, MOST_RESERVED)),),
            _opencode, always_set=True,
            off=('opencode.json: {"compaction": {"auto": false, "prune": false}}',)),
    Harness("pi", "Pi", "pi", (
        Knob("compaction.reserveTokens", "summary.trigger_reserve", PI_RESERVES,
             shown=lambda r: r or RESERVE_SETTINGS["pi"][1], read=int, short="reserve", takes=(1, MOST_RESERVED)),),
            _pi, off=('~/.pi/agent/settings.json: {"compaction": {"enabled": false}}',)),
    Harness("goose", "goose", "goose", (
        Knob("GOOSE_AUTO_COMPACT_THRESHOLD", "summary.trigger_share", _steps(0.1, 0.95, 0.05),
             shown=lambda s: s or GOOSE_DEFAULT, read=_a_share, short="threshold"),), _goose,
            off=("export GOOSE_AUTO_COMPACT_THRESHOLD=0.0",)),
    Harness("qwen-code", "Qwen Code", "qwen-code", (
        Knob("model.chatCompression.contextPercentageThreshold", "summary.trigger_share", _steps(0.1, 0.95, 0.05),
             shown=lambda s: s or QWEN_CODE_DEFAULT, read=_a_share, short="threshold"),), _qwen_code,
            off=('~/.qwen/settings.json: {"model": {"chatCompression": {"contextPercentageThreshold": 0}}}',)),
    Harness("langchain", "LangChain SummarizationMiddleware", "langchain-summarization", (
        Knob("trigger", "custom.settings.trigger_fraction", _steps(0.5, 0.95, 0.05)),
        Knob("keep", "custom.settings.keep_messages", _steps(4, 60, 4, 0))), _langchain,
            off=("leave SummarizationMiddleware out of create_agent(middleware=[...])",), always_set=True),
    Harness("langchain-clear-tool-uses", "LangChain ClearToolUsesEdit", "langchain-clear-tool-uses", (
        Knob("trigger", "custom.settings.trigger", _steps(20_000, 180_000, 10_000, 0)),
        Knob("keep", "custom.settings.keep", tuple(range(0, 11)))), _langchain_clear,
            off=("leave ContextEditingMiddleware out of create_agent(middleware=[...])",), always_set=True),
    Harness("strands", "Strands SlidingWindowConversationManager", "strands-sliding-window", (
        Knob("window_size", "custom.settings.window_size", _steps(10, 100, 5, 0)),), _strands,
            off=("from strands.agent.conversation_manager import NullConversationManager",
                 "NullConversationManager()")),
    Harness("strands-summarizing", "Strands SummarizingConversationManager", "strands-summarizing", (
        Knob("summary_ratio", "custom.settings.summary_ratio", _steps(0.1, 0.8, 0.05), short="ratio"),
        Knob("preserve_recent_messages", "custom.settings.preserve_recent_messages", _steps(2, 30, 2, 0),
             short="recent")),
            _strands_summarizing,
            off=("from strands.agent.conversation_manager import NullConversationManager",
                 "NullConversationManager()"),
            ignored="Strands clamps summary_ratio to 0.1-0.8: the search stays within it", always_set=True),
    Harness("anthropic-api", "the Messages API's context editing", "anthropic-clear-tool-uses", (
        Knob("trigger", "micro.trigger_tokens", _steps(30_000, 180_000, 10_000, 0)),
        Knob("keep", "micro.keep_recent", tuple(range(1, 11))),
        Knob("clear_at_least", "micro.clear_at_least", _steps(0, 50_000, 5_000, 0), short="at least")), _anthropic,
            off=("send no context_management",), always_set=True),
)}
HARNESSES = tuple(TABLE)


def harness(name: str) -> Harness:
    return TABLE[name]


#: the harnesses whose format is read under another name than theirs (``transcripts.FORMATS``)
FORMAT_HARNESS = {"qwen": "qwen-code"}


def home_of(name: str) -> str:
    """The name harness ``name``'s sessions are found under (``transcripts.homes``) and read as (its
    format): its own, but where ``FORMAT_HARNESS`` names it otherwise (Qwen Code's: ``qwen``)."""
    return next((fmt for fmt, h in FORMAT_HARNESS.items() if h == name), name)


def of_format(fmt: str | None) -> Harness | None:
    """The harness whose sessions are in format ``fmt`` (a format's ``NAME``: ``claude-code``,
    ``qwen``, ...), where its compaction settings are known; None for any other."""
    return TABLE.get(FORMAT_HARNESS.get(fmt or "", fmt or ""))


def of_preset(preset_name: str) -> Harness | None:
    """The harness whose settings preset ``preset_name`` models (None: not a harness's preset)."""
    return next((h for h in TABLE.values() if h.preset == preset_name), None)


def set_otherwise(policy: Any) -> tuple[Harness, str, str] | None:
    """Where ``policy`` is a harness's preset as it is (its default) and you have set that harness
    otherwise (``current``, as tune reads it for its base: the environment, ``~/.claude/
    settings.json``, ``~/.codex/config.toml``): the harness, your setting in words with its source,
    and the ``--set`` options that replay it. None elsewhere (another policy, nothing set, or a
    setting the harness ignores)."""
    from ..engine.policy import load_policy

    h = of_preset(policy.name)
    if h is None or policy.fingerprint != load_policy(h.preset).fingerprint:
        return None
    now = current(h.name, settings_for(harness=h.name))
    if now is None or not now[0]:
        return None
    return h, now[1], " ".join(f"--set {o}" for o in now[0])


def of_policy(policy: Any) -> Harness | None:
    """The harness whose setting ``policy`` is: a policy that is its preset with only what the
    harness lets you set changed (by its name, or whatever its name: a tune's front file,
    ``extends = "claude-code"`` with ``summary.trigger_share`` set). None: no harness's (a preset
    changed elsewhere too)."""
    from ..engine.policy import fingerprint_of

    mine, resolved = bool(getattr(getattr(policy, "custom", None), "enabled", False)), policy.resolved()
    h = of_preset(policy.name)
    if h is not None:  # (by its name, unless changed where the harness has no setting: one trigger for every
        # session, summary.trigger, is none of Claude Code's, say)
        if h.always_set or mine or fingerprint_of(_without(resolved, _set_keys(h))) == _preset_left(h.name):
            return h
        return None
    for h in TABLE.values():
        keys = _set_keys(h)
        if any(k.startswith("custom.") for k in keys) != mine:  # (a framework's preset is a step of its
            continue                                             # own: loading one imports its code)
        if fingerprint_of(_without(resolved, keys)) == _preset_left(h.name):
            return h
    return None


_PRESETS_LEFT: dict[str, str] = {}


def _set_keys(h: Harness) -> list[str]:
    """The preset keys harness ``h``'s settings set: its knobs', and the switch of their layers."""
    keys = [k.key for k in h.knobs]
    return keys + list(h.kept) + sorted({k.split(".")[0] + ".enabled" for k in keys if not k.startswith("custom.")})


def _preset_left(name: str) -> str:
    """The fingerprint of harness ``name``'s preset without its knobs' keys (made once a process)."""
    if name not in _PRESETS_LEFT:
        from ..engine.policy import fingerprint_of, load_policy

        h = TABLE[name]
        _PRESETS_LEFT[name] = fingerprint_of(_without(load_policy(h.preset).resolved(), _set_keys(h)))
    return _PRESETS_LEFT[name]


def _without(resolved: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """A resolved policy without the values at ``keys`` (``table.key``; a copy of each table touched)."""
    out = dict(resolved)
    for key in keys:
        *tables, name = key.split(".")
        node: Any = out
        for part in tables:
            child = node.get(part) if isinstance(node, dict) else None
            if not isinstance(child, dict):
                break
            node[part] = child = dict(child)
            node = child
        else:
            if isinstance(node, dict):
                node.pop(name, None)
    return out


def space(name: str, windows: Iterable[int] = ()) -> list[str]:
    """What tune searches of harness ``name`` on sessions whose windows its rule takes are
    ``windows`` (Claude Code's percentages and Codex's limit reach higher on a larger window)."""
    if name == "claude-code" and max(windows, default=0) > CLAUDE_WINDOW:
        return TABLE[name].space({"summary.trigger_share": claude_code_shares(max(windows))})
    if name == "codex" and max(windows, default=0) > CODEX_RECORDED:
        return TABLE[name].space({"summary.trigger_cap": codex_limits(max(windows))})
    return TABLE[name].space()


def preset(name: str) -> str:
    return TABLE[name].preset


def paste(name: str, values: dict[str, Any] | None) -> list[str]:
    """The setting to paste for a tuned point: ``values`` (the preset's keys; None: no
    compaction). (The preset as it is needs none, unless the harness is always told: the
    callers say so.)"""
    h = TABLE[name]
    if values is None:
        return list(h.off) or [f"none: {h.no_off}"]
    return h.render(h.setting_values(values))


def current(name: str, settings: dict[str, Setting]) -> tuple[list[str], str] | None:
    """Your current setting of harness ``name``, read from where it keeps it (``settings_for``):
    the preset's overrides it stands for, and in words with its source; None where nothing is set
    (the default) or compactlab does not read that harness's settings. A setting the harness
    ignores (an override above the default) is the default, said so."""
    if name == "claude-code":
        off, pct = settings.get("DISABLE_AUTO_COMPACT"), settings.get("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")
        if off is not None and off.value.strip().lower() not in ("", "0", "false"):
            return ["summary.enabled=false"], f"DISABLE_AUTO_COMPACT={off.value} ({off.source}): auto-compaction off"
        given = settings.get("CLAUDE_CODE_AUTO_COMPACT_WINDOW")
        set_to = int(number(given, "CLAUDE_CODE_AUTO_COMPACT_WINDOW", 100_000, 1_000_000)) if given else 0
        parts = [p for p in (_claude_window(given, set_to), _claude_pct(pct, set_to)) if p is not None]
        if parts:
            return [o for sets, _ in parts for o in sets], "; ".join(words for _, words in parts)
    if name in SHARES and (share := settings.get(SHARES[name][0])) is not None:
        key, window, default, _, sep = SHARES[name]
        said = f"{key}{sep}{share.value} ({share.source})"
        at = share_threshold(name, window, settings)[0]
        if at is None:
            return ["summary.enabled=false"], said + ": auto-compaction off"
        if at == round(window * default):
            return [], said + ": the default"
        if name in RULES:  # (a share of each session's window: the preset's rule takes it)
            value = number(share, key, 0, 1)
            return ([f"summary.trigger_share={value:g}"],
                    f"{said}: that share of each session's window ({at:,} of {window:,})")
        return [f"summary.trigger={at}"], f"{said}: {at:,} tokens"
    if name in RESERVES:
        return _current_reserve(name, settings)
    if name == "codex" and (limit := settings.get("model_auto_compact_token_limit")) is not None:
        value = int(number(limit, "model_auto_compact_token_limit", 1_000, 10_000_000))
        said = f"model_auto_compact_token_limit = {limit.value} ({limit.source})"
        return [f"summary.trigger_cap={value}"], (f"{said}: the lesser of it and 90% of each session's window "
                                                  f"({min(value, CODEX_LIMIT):,} of the gpt-5.x-codex models' "
                                                  f"{CODEX_WINDOW:,})")
    return None


def _claude_pct(pct: Setting | None, set_to: int) -> tuple[list[str], str] | None:
    """``current``'s part of Claude Code's ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``, a share of the window
    it is taken of (``set_to``: the window ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` sets; 0: the session's)."""
    if pct is None:
        return None
    value = number(pct, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", 1, 100)
    said = f"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE={pct.value} ({pct.source})"
    if value >= 100:  # (the whole window: never under the default, on any window)
        return [], said + ": above the default, which Claude Code keeps"
    window = min(CLAUDE_WINDOW, set_to or CLAUDE_WINDOW)
    default = harness_trigger("claude-code", None, window)[0]
    lowered, sets = claude_code_lowered(window, value / 100), [f"summary.trigger_share={value / 100:g}"]
    if lowered < default:
        return sets, f"{said}: {value:g}% of each session's window ({lowered:,} of {window:,})"
    return sets, (f"{said}: {value:g}% of each session's window, where under Claude Code's default (not of "
                  f"{window:,}, whose {default:,} it keeps)")


def _claude_window(given: Setting | None, set_to: int) -> tuple[list[str], str] | None:
    """``current``'s part of Claude Code's ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` (or ``autoCompactWindow``,
    ``given``, read as ``set_to``): the window its trigger is taken of, where under the session's
    (Claude Code clamps it to the model's)."""
    if given is None:
        return None
    said = f"CLAUDE_CODE_AUTO_COMPACT_WINDOW={given.value} ({given.source}): the window of each session's trigger"
    at = harness_trigger("claude-code", None, 1_000_000, window_set=set_to)[0]
    if set_to >= CLAUDE_WINDOW:
        said += f", where under the model's: {at:,} of the 1M-context window (a 200,000 model keeps {CLAUDE_DEFAULT:,})"
    else:
        said += f": {at:,}"
    return [f"summary.trigger_window={set_to}"], said


def _current_reserve(name: str, settings: dict[str, Setting]) -> tuple[list[str], str] | None:
    """``current`` of a harness whose setting is a reserve off the window (Pi's, OpenCode's: ``RESERVES``)."""
    key, switch = RESERVES[name]
    if (at := reserve_threshold(name, PRESET_WINDOW, settings)[0]) is None:
        off = settings[switch]
        return ["summary.enabled=false"], f"{switch} = {off.value} ({off.source}): auto-compaction off"
    if (given := settings.get(key)) is None:
        return None
    reserve = int(number(given, key, 0, MOST_RESERVED))
    said = f"{key} = {given.value} ({given.source})"
    if reserve == RESERVE_SETTINGS[name][1]:
        return [], said + ": the default"
    return ([f"summary.trigger_reserve={reserve}"],
            f"{said}: that many tokens off each session's window ({at:,} of {PRESET_WINDOW:,})")


def set_in_projects(name: str, folders: Iterable[str], env: dict[str, str] | None = None,
                    home: str | None = None) -> list[tuple[str, str, list[str]]]:
    """The folders of ``folders`` (where sessions of harness ``name`` were started) whose own project
    settings (``PROJECT_FILES``) make its compaction other than your user-level setting does, each
    with that setting in words and the preset's overrides it stands for: those sessions ran with
    it, and a user-level setting does not change them."""
    if name not in PROJECT_FILES:
        return []
    mine = current(name, settings_for(env=env, home=home, harness=name))
    out = []
    for folder in sorted(set(folders)):
        theirs = current(name, settings_for(env=env, home=home, harness=name, project=folder))
        if (theirs or ([], ""))[0] != (mine or ([], ""))[0]:
            out.append((folder, theirs[1] if theirs else "the default", theirs[0] if theirs else []))
    return out


def projects_otherwise(policy: Any, folders: Iterable[str]) -> list[tuple[str, str, str]]:
    """Where ``policy`` is a harness's preset as it is (its default), the folders of ``folders``
    whose sessions ran with their project's own, other setting (``set_in_projects``): each with
    that setting in words and the ``--set`` options that replay it."""
    from ..engine.policy import load_policy

    h = of_preset(policy.name)
    if h is None or h.name not in PROJECT_FILES or policy.fingerprint != load_policy(h.preset).fingerprint:
        return []
    return [(folder, words, " ".join(f"--set {o}" for o in sets))
            for folder, words, sets in set_in_projects(h.name, folders)]


def newer_qwen_code(files: Iterable[str]) -> list[tuple[str, str]]:
    """The Qwen Code sessions of ``files`` recorded by 0.17 or later (``qwen_code_ladder``), each with
    its version: their compaction is not the ``qwen-code`` preset's, and ignores
    ``contextPercentageThreshold``."""
    from ..transcripts import recorded_version

    out = []
    for f in dict.fromkeys(files):  # (each once: a compare's runs name each session once a policy)
        said = recorded_version(f)
        if said is not None and said[0] == "qwen" and qwen_code_ladder(said[1]):
            out.append((f, said[1]))
    return out


def as_recorded(h: Harness, files: Iterable[str]) -> Harness:
    """``h`` as the sessions of ``files`` ran it: where Qwen Code 0.17 or later recorded any, no line
    that turns compression off (their ``contextPercentageThreshold``, whose 0 did, is ignored), and
    why (``no_off``); ``h`` itself otherwise."""
    if h.name != "qwen-code" or not newer_qwen_code(files):
        return h
    import dataclasses

    return dataclasses.replace(h, off=(), no_off=QWEN_CODE_NO_OFF)


#: the harnesses whose threshold is a share of the window: (the setting, the presets' window, its
#: default, the shares that turn auto-compaction off instead — at or below the first, at or above
#: the second (None: a share over 1 is no setting it takes) —, how a value is said: an environment
#: variable's ``KEY=V``, a settings file's ``KEY = V``). goose's ``check_if_compaction_needed``
#: (context_mgmt/mod.rs) turns it off for ``threshold <= 0.0 || threshold >= 1.0``; Qwen Code's
#: ``chatCompressionService.ts`` for ``threshold <= 0`` ("use 0 to disable compression entirely",
#: its settings' documentation).
SHARES: dict[str, tuple[str, int, float, tuple[float, float | None] | None, str]] = {
    "goose": ("GOOSE_AUTO_COMPACT_THRESHOLD", GOOSE_WINDOW, GOOSE_DEFAULT, (0.0, 1.0), "="),
    "qwen-code": ("model.chatCompression.contextPercentageThreshold", QWEN_CODE_WINDOW, QWEN_CODE_DEFAULT,
                  (0.0, None), " = "),
    "gemini-cli": ("model.compressionThreshold", GEMINI_CLI_WINDOW, GEMINI_CLI_DEFAULT, None, " = "),
}


def share_threshold(name: str, window: int, settings: dict[str, Setting]) -> tuple[int | None, str]:
    """Where harness ``name`` (``SHARES``) auto-compacts on a ``window``-token model with
    ``settings`` (None: it does not): its setting's share of the window (off where the harness
    turns it off for that share) or its default's, and why, in words with the source."""
    key, _, default, off, sep = SHARES[name]
    share = settings.get(key)
    if share is None:
        at = round(window * default)
        return at, f"{name}'s default: {default:g} of {window:,} = {at:,}"
    if off is None:  # (no share turns it off: 0 compresses at every call)
        value = number(share, key, 0, 1)
        return round(window * value), f"{key}{sep}{share.value} ({share.source}): {value:g} of {window:,} = " \
                                      f"{round(window * value):,}"
    low, high = off
    value = number(share, key, float("-inf"), float("inf") if high is not None else 1)
    said = f"{key}{sep}{share.value} ({share.source})"
    if value <= low or (high is not None and value >= high):
        return None, f"auto-compaction off ({said})"
    return round(window * value), f"{said}: {value:g} of {window:,} = {round(window * value):,}"


def qwen_code_threshold(version: str | None, window: int, settings: dict[str, Setting]) -> tuple[int | None, str]:
    """Where Qwen Code ``version`` auto-compresses on a ``window``-token model with ``settings``
    (None: it does not), and why, in words with the sources: 0.17 and later by their own rule
    (``harness_triggers.qwen_code_ladder_trigger``), which no setting read here changes; before, the share
    ``contextPercentageThreshold`` sets (``share_threshold``)."""
    if not qwen_code_ladder(version):
        return share_threshold("qwen-code", window, settings)
    at, words = harness_trigger("qwen-code", version, window)
    key = SHARES["qwen-code"][0]
    if (said := settings.get(key)) is not None:
        words += f"; {key} = {said.value} ({said.source}) is ignored by it"
    return at, words


def reserve_threshold(name: str, window: int, settings: dict[str, Setting]) -> tuple[int | None, str]:
    """Where Pi or OpenCode (``name``, ``RESERVES``) auto-compacts on a ``window``-token model with
    ``settings`` (None: it does not): its rule with the reserve its setting gives, or its default's
    (``harness_triggers``), and why, in words with the source."""
    key, switch = RESERVES[name]
    off = settings.get(switch)
    if off is not None and off.value.strip().lower() in ("false", "0"):
        return None, f"auto-compaction off ({switch} = {off.value}, {off.source})"
    given = settings.get(key)
    reserve = int(number(given, key, 0, MOST_RESERVED)) if given is not None else 0
    at, words = harness_trigger(name, None, window, 0.0, reserve)
    return at, words + (f" ({given.source})" if given is not None else "")


def goose_threshold(window: int, settings: dict[str, Setting]) -> tuple[int | None, str]:
    """Where goose auto-compacts on a ``window``-token model with ``settings`` (``share_threshold``)."""
    return share_threshold("goose", window, settings)


def number(s: Setting, key: str, low: float, high: float) -> float:
    """A setting's number, from ``low`` to ``high`` (else a one-line error naming its source)."""
    try:
        value = float(s.value)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:
        bounds = (f" from {_figure(low)} to {_figure(high)}" if low > float("-inf")
                  else f" of at most {_figure(high)}" if high < float("inf") else "")
        raise UsageError(f"{key}={s.value[:20]} ({s.source}): not a number{bounds}")
    return value


def _figure(bound: float) -> str:
    """A bound as a setting's error says it: a whole number with its thousands (10,000,000, not 1e+07)."""
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def parse_setting(name: str, lines: list[str]) -> dict[str, Any]:
    """The preset values a pasted setting stands for (the inverse of ``render``): the JSON, TOML
    or Python of ``lines`` parsed as the harness reads it."""
    import ast
    import tomllib

    h = TABLE[name]
    got: dict[str, Any] = {}
    text = "\n".join(lines)
    if name == "claude-code":
        doc = json.loads(lines[1].partition(": ")[2])
        got["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"] = doc["env"]["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"]
    elif name == "codex":
        got.update(tomllib.loads("\n".join(lines[1:])))
    elif name == "gemini-cli":
        got["model.compressionThreshold"] = json.loads(text.partition(": ")[2])["model"]["compressionThreshold"]
    elif name == "opencode":
        got["compaction.reserved"] = json.loads(text.partition(": ")[2])["compaction"]["reserved"]
    elif name == "pi":
        got["compaction.reserveTokens"] = json.loads(text.partition(": ")[2])["compaction"]["reserveTokens"]
    elif name == "goose":
        key, _, value = lines[0].removeprefix("export ").partition("=")
        got[key] = float(value)
    elif name == "qwen-code":
        compression = json.loads(text.partition(": ")[2])["model"]["chatCompression"]
        got["model.chatCompression.contextPercentageThreshold"] = compression["contextPercentageThreshold"]
    elif name == "anthropic-api":
        edit = json.loads(text.partition("): ")[2])["context_management"]["edits"][0]
        got.update({k: edit[k]["value"] for k in ("trigger", "keep", "clear_at_least")})
    else:
        call = ast.parse(lines[-1], mode="eval").body
        assert isinstance(call, ast.Call)
        if call.keywords and call.keywords[0].arg == "edits":  # (ContextEditingMiddleware(edits=[edit]))
            inner = call.keywords[0].value
            assert isinstance(inner, ast.List) and isinstance(inner.elts[0], ast.Call)
            call = inner.elts[0]
        for kw in call.keywords:
            if kw.arg != "model":
                value = ast.literal_eval(kw.value)
                got[str(kw.arg)] = value[1] if isinstance(value, tuple) else value
    return {k.key: k.read(got[k.setting]) for k in h.knobs if k.setting in got}


#: what each harness lets you set about its compaction, as its preset models it: (setting, where
#: it is set, its range, its default, what it sets in the preset)
SETTINGS: dict[str, list[tuple[str, str, str, str, str]]] = {
    "claude-code": [
        ("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "environment, or settings.json env: a project's .claude/ over ~/.claude/",
         "1-100 (%), only lower",
         "unset: the window less 33,000 on 2.1.x (167,000 of 200,000), less 45,000 on 2.0.x and 1.x (155,000, an "
         "estimate)",
         "summary.trigger_share = it / 100, of each session's window where under the version's default "
         "(summary.trigger_rule)"),
        ("CLAUDE_CODE_AUTO_COMPACT_WINDOW / autoCompactWindow",
         "environment / settings.json: a project's .claude/ over ~/.claude/", "100,000-1,000,000 tokens, only lower "
         "(Claude Code clamps it to the model's window)", "the model's window (200,000; 1,000,000 with the 1M context)",
         "summary.trigger_window, the window each session's trigger is taken of where under its own"),
        ("DISABLE_AUTO_COMPACT / autoCompactEnabled",
         "environment / settings.json: a project's .claude/ over ~/.claude/", "1 / false", "auto-compaction on",
         "summary.enabled = false"),
    ],
    "codex": [
        ("model_auto_compact_token_limit", "~/.codex/config.toml ($CODEX_HOME)", "tokens, only lower (min with 90% "
         "of the window)", "90% of the model's window (244,800 of the gpt-5.x-codex models' 272,000)",
         "summary.trigger_cap, the lesser of it and 90% of each session's window (summary.trigger_rule)"),
        ("model_context_window", "~/.codex/config.toml ($CODEX_HOME)", "tokens", "the model's (272,000)",
         "the window calls are judged on (--window)"),
    ],
    "gemini-cli": [
        ("model.compressionThreshold", "~/.gemini/settings.json (or the project's .gemini/settings.json)",
         "0-1 (a share of the model's token limit)", "0.5 (524,288 of gemini-2.5-pro's 1,048,576)",
         "summary.trigger = that share of 1,048,576"),
    ],
    "opencode": [
        ("compaction.reserved", "opencode.json(c) (~/.config/opencode/, $OPENCODE_CONFIG, the project's)", "tokens", "min(20,000, the model's max output) in the current source "
         "(session/overflow.ts); none before it (the preset's: 168,000 of 200,000)",
         "summary.trigger_reserve = it, taken with the 32,000 output reserve off each session's window "
         "(summary.trigger_rule)"),
        ("compaction.auto / compaction.prune", "opencode.json", "true / false", "true / true",
         "summary.enabled / micro.enabled"),
    ],
    "pi": [
        ("compaction.reserveTokens", "~/.pi/agent/settings.json (or the project's .pi/settings.json)", "tokens",
         "16,384 (DEFAULT_COMPACTION_SETTINGS: "
         "183,616 of 200,000)", "summary.trigger_reserve = it, taken off each session's window (summary.trigger_rule)"),
        ("compaction.enabled", "~/.pi/agent/settings.json (or the project's .pi/settings.json)", "true / false",
         "true", "summary.enabled"),
    ],
    "goose": [
        ("GOOSE_AUTO_COMPACT_THRESHOLD", "environment", "0-1 (a share of the model's token "
         "limit; 0.0, or 1 and over, turns auto-compaction off)", "0.8 (160,000 of a 200,000-token window)",
         "summary.trigger_share = it, of each session's window (summary.trigger_rule)"),
    ],
    "qwen-code": [
        ("model.chatCompression.contextPercentageThreshold", "~/.qwen/settings.json (or the project's "
         ".qwen/settings.json)", "0-1 (a share of the model's token limit; 0 turns compression off); Qwen Code "
         "0.16 and before: 0.17 and later ignore it",
         "0.7 (140,000 of the 200,000 fallback limit)",
         "summary.trigger_share = it, of each session's window (its contextWindowSize; summary.trigger_rule)"),
    ],
    "langchain-summarization": [
        ("trigger", "SummarizationMiddleware(...)", '("fraction", 0-1), ("tokens", N) or ("messages", N)',
         '("fraction", 0.8) as this preset sets it', "custom.settings.trigger_fraction / trigger_tokens / "
         "trigger_messages"),
        ("keep", "SummarizationMiddleware(...)", '("messages", N), ("tokens", N) or ("fraction", 0-1)',
         '("messages", 20)', "custom.settings.keep_messages / keep_tokens / keep_fraction"),
    ],
    "langchain-clear-tool-uses": [
        ("trigger, keep, clear_at_least", "ClearToolUsesEdit(...)", "tokens, tool results, tokens",
         "100,000, 3, 0", "custom.settings.trigger, keep, clear_at_least"),
    ],
    "strands-sliding-window": [
        ("window_size", "SlidingWindowConversationManager(...)", "messages", "40", "custom.settings.window_size"),
    ],
    "strands-summarizing": [
        ("summary_ratio, preserve_recent_messages", "SummarizingConversationManager(...)",
         "0.1-0.8 (clamped by Strands), messages", "0.3, 10", "custom.settings.summary_ratio, "
         "preserve_recent_messages"),
    ],
    "anthropic-clear-tool-uses": [
        ("trigger, keep, clear_at_least", "context_management.edits[clear_tool_uses_20250919]",
         "input_tokens, tool_uses, input_tokens", "100,000, 3, 0",
         "micro.trigger_tokens, keep_recent, clear_at_least"),
    ],
}


def setting_of(policy: Any) -> tuple[str, list[str]] | None:
    """A harness's or framework's preset as the setting that makes it (the harness's title, the
    lines to paste: none for the harness's default, where there is nothing to set); None where
    ``policy`` is no harness's preset. A value the harness would not take is said, never rounded
    silently."""
    from ..engine.policy import UNKNOWN, load_policy, value_at

    h = of_policy(policy)
    if h is None:
        return None
    if any(not getattr(getattr(policy, k.key.split(".")[0]), "enabled", True) for k in h.knobs):
        return h.title, paste(h.name, None)
    current = policy.resolved()
    values = {k.key: value_at(policy, current, k.key) for k in h.knobs}
    if any(v is UNKNOWN for v in values.values()):
        return None
    default = load_policy(h.preset)
    if values == {k.key: value_at(default, None, k.key) for k in h.knobs}:  # (no lines: nothing to set)
        return h.title, paste(h.name, values) if h.always_set else []
    lines = paste(h.name, values)
    for k in h.knobs:
        v = values[k.key]
        if isinstance(v, (int, float)) and not k.taken(v):
            return h.title, [f"{k.setting}: {k.shown(v)} is not a value {h.title} takes here"
                            + (f" ({h.ignored})" if h.ignored else f" (searched: {k.shown(min(k.values))} to "
                                                                   f"{k.shown(max(k.values))})")]
        if k.read(k.shown(v)) != v:
            lines.append(f"({k.setting}={k.shown(v)} is {k.read(k.shown(v)):,}: {h.title} takes no setting that "
                         f"is {v:,})")
    return h.title, lines


# ---- the settings you have now, read from where each harness keeps them (each with its source)

#: the settings compactlab reads for Claude Code, and the settings.json keys that stand for them
CLAUDE_SETTINGS = ("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "CLAUDE_CODE_AUTO_COMPACT_WINDOW", "DISABLE_AUTO_COMPACT")
#: Codex CLI's (``~/.codex/config.toml``, or ``$CODEX_HOME/config.toml``)
CODEX_SETTINGS = ("model_auto_compact_token_limit",)
#: goose's (the environment)
GOOSE_SETTINGS = ("GOOSE_AUTO_COMPACT_THRESHOLD",)
#: Qwen Code's (``~/.qwen/settings.json``)
QWEN_SETTINGS = ("model.chatCompression.contextPercentageThreshold",)
#: Gemini CLI's (``~/.gemini/settings.json``)
GEMINI_SETTINGS = ("model.compressionThreshold",)
#: Pi's (``~/.pi/agent/settings.json``, or ``$PI_CODING_AGENT_DIR/settings.json``, and a project's
#: ``.pi/settings.json``) and OpenCode's (``~/.config/opencode/opencode.json`` or ``.jsonc``,
#: ``$OPENCODE_CONFIG``, and a project's ``opencode.json`` or ``.jsonc``: JSON with comments)
PI_SETTINGS = (RESERVE_SETTINGS["pi"][0], "compaction.enabled")
OPENCODE_SETTINGS = (RESERVE_SETTINGS["opencode"][0], "compaction.auto")
#: each reserve's setting, and the one that turns that harness's auto-compaction off (``false``)
RESERVES = {"pi": PI_SETTINGS, "opencode": OPENCODE_SETTINGS}
CLAUDE_FILE_KEYS = {"autoCompactWindow": "CLAUDE_CODE_AUTO_COMPACT_WINDOW", "autoCompactEnabled": "DISABLE_AUTO_COMPACT"}
#: the files a project keeps a harness's settings in, under the folder the harness was started in,
#: the most binding first: they override the user's file (Claude Code's local settings over its
#: shared ones, both over ``~/.claude/settings.json``; Qwen Code's over ``~/.qwen/settings.json``)
PROJECT_FILES = {"claude-code": (".claude/settings.local.json", ".claude/settings.json"),
                 "qwen-code": (".qwen/settings.json",), "pi": (".pi/settings.json",),
                 "opencode": ("opencode.json", "opencode.jsonc")}


@dataclass(frozen=True)
class Setting:
    """A setting's value as a harness keeps it, and where it was read."""

    value: str
    source: str  # "--setting", "the environment", "~/.claude/settings.json"


def given_settings(given: list[str] | tuple[str, ...]) -> dict[str, Setting]:
    """The settings given with ``--setting KEY=VALUE`` (each a setting compactlab reads, else a
    one-line error), by the name ``settings_for`` gives each."""
    out: dict[str, Setting] = {}
    known = (*CLAUDE_SETTINGS, *CLAUDE_FILE_KEYS, *CODEX_SETTINGS, *GOOSE_SETTINGS, *QWEN_SETTINGS,
             *GEMINI_SETTINGS, *PI_SETTINGS, *OPENCODE_SETTINGS)
    for item in given:
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in known:
            raise UsageError(f"--setting {item[:80]!r}: not KEY=VALUE of a setting compactlab reads",
                             hint=f"one of {', '.join(known)}")
        key = CLAUDE_FILE_KEYS.get(key.strip(), key.strip())
        value = value.strip()
        if key == "DISABLE_AUTO_COMPACT" and item.partition("=")[0].strip() == "autoCompactEnabled":
            value = "0" if value.lower() in ("true", "1") else "1"
        out.setdefault(key, Setting(value, "--setting"))
    return out


def settings_for(given: list[str] | tuple[str, ...] = (), env: dict[str, str] | None = None,
                 home: str | None = None, harness: str | None = None,
                 project: str | None = None, project_of: str | None = None) -> dict[str, Setting]:
    """The settings that decide Claude Code's, Codex's, goose's, Qwen Code's, Gemini CLI's, Pi's and
    OpenCode's auto-compaction, each with where it came from: ``--setting KEY=VALUE`` first, then the
    environment, then the project's files (``PROJECT_FILES`` under ``project``, the folder a session
    was started in, where it is a folder here), then ``~/.claude/settings.json``, Codex's
    ``config.toml``, ``~/.qwen/settings.json``, ``~/.gemini/settings.json``, Pi's
    ``~/.pi/agent/settings.json`` and OpenCode's ``$OPENCODE_CONFIG`` and
    ``~/.config/opencode/opencode.json(c)``. ``harness``: only
    that harness's (a file of another's that does not parse is not read, so not an error);
    ``project_of``: only that harness's project files (a session's: the folder it ran in holds its
    harness's)."""
    env = dict(os.environ) if env is None else env
    out = given_settings(given)

    def reads(name: str) -> bool:
        return harness is None or harness == name

    for key in (*(CLAUDE_SETTINGS if reads("claude-code") else ()), *(GOOSE_SETTINGS if reads("goose") else ())):
        if key not in out and env.get(key, "").strip():
            out[key] = Setting(env[key].strip(), "the environment")
    root = str(Path(home or env.get("HOME") or Path.home()))
    custom = env.get("OPENCODE_CONFIG", "").strip()
    parsers = {"claude-code": _settings_file, "qwen-code": _qwen_settings, "gemini-cli": _gemini_settings,
               "pi": _pi_settings, "opencode": _opencode_settings}
    here = bool(project) and Path(str(project)).is_dir()
    in_project = [(reads(h) and project_of in (None, h), Path(str(project)) / name, parsers[h])
                  for h, names in PROJECT_FILES.items() if here for name in names]
    files = (*in_project,
             *((reads(h), Path(root) / f".{folder}" / "settings.json", parsers[h])
               for h, folder in (("claude-code", "claude"), ("qwen-code", "qwen"), ("gemini-cli", "gemini"))),
             (reads("codex"), Path(env.get("CODEX_HOME") or Path(root) / ".codex") / "config.toml", _codex_config),
             (reads("pi"), Path(env.get("PI_CODING_AGENT_DIR") or Path(root) / ".pi" / "agent") / "settings.json",
              _pi_settings),
             # (OpenCode's: $OPENCODE_CONFIG over its global config, a project's over both)
             *(((reads("opencode"), Path(custom), _opencode_settings),) if custom else ()),
             *((reads("opencode"), Path(env.get("XDG_CONFIG_HOME") or Path(root) / ".config") / "opencode" / name,
                _opencode_settings) for name in PROJECT_FILES["opencode"]))
    for read, path, parse in files:
        for key, value in (parse(path).items() if read else ()):
            out.setdefault(key, Setting(value, _shown(path, root)))
    return out


def _shown(path: Path, home: str) -> str:
    """A settings file's path as a source: under the home folder, from ``~``."""
    text, home = str(path), home.rstrip("/")
    return "~" + text[len(home):] if home and text.startswith(home + "/") else text


def _read_small(path: Path, parse: Any, what: str) -> Any:
    """A harness's settings file parsed ({} where it is absent or over a MiB); one that does not
    parse is a one-line error naming it."""
    try:
        if not path.is_file() or path.stat().st_size > 1 << 20:
            return {}
        return parse(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not {what} compactlab can read ({exc})") from None


def _codex_config(path: Path) -> dict[str, str]:
    """What Codex's config.toml sets of ``CODEX_SETTINGS`` (nothing where it is absent; a file that
    is no TOML is a one-line error)."""
    import tomllib

    doc = _read_small(path, tomllib.loads, "a Codex config")
    return {k: str(doc[k]) for k in CODEX_SETTINGS if isinstance(doc.get(k), int) and not isinstance(doc.get(k), bool)}


def _json_settings(path: Path, jsonc: bool = False) -> dict[str, Any]:
    """A harness's JSON settings file ({} where it is absent); one that is no JSON object is a
    one-line error naming it. ``jsonc``: JSON with comments and trailing commas (``jsonc``)."""
    doc = _read_small(path, (lambda text: json.loads(jsonc_to_json(text))) if jsonc else json.loads, "a settings file")
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: not a settings file compactlab can read (not a JSON object)")
    return doc


def jsonc_to_json(text: str) -> str:
    """JSON with comments (``//`` to the line's end, ``/* ... */``) and trailing commas, as
    Microsoft's jsonc-parser reads it (OpenCode's configs), written as JSON: each left out, the
    strings as they are."""
    out: list[str] = []
    i, n, pending = 0, len(text), ""  # (pending: a comma kept back until what follows it is seen)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out += (pending, text[i:j + 1])
            pending, i = "", j + 1
        elif text.startswith("//", i):
            i = text.find("\n", i) if "\n" in text[i:] else n
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c == ",":
            out.append(pending)
            pending, i = ",", i + 1
        elif c in "}]":
            out.append(c)  # (a comma just before it: a trailing one, left out)
            pending, i = "", i + 1
        elif c.isspace():
            out.append(c)
            i += 1
        else:
            out += (pending, c)
            pending, i = "", i + 1
    out.append(pending)
    return "".join(out)


def _nested_numbers(path: Path, keys: tuple[str, ...], doc: dict[str, Any] | None = None) -> dict[str, str]:
    """The numbers a JSON settings file (or its ``doc`` read already) sets at ``keys`` (dotted paths
    into its objects); nothing where it is absent; a file that is no JSON object is a one-line error."""
    doc = _json_settings(path) if doc is None else doc
    out: dict[str, str] = {}
    for key in keys:
        node: Any = doc
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, (int, float)) and not isinstance(node, bool):
            out[key] = str(node)
    return out


def _qwen_settings(path: Path) -> dict[str, str]:
    """What Qwen Code's settings file sets of ``QWEN_SETTINGS`` (its ``model.chatCompression``)."""
    return _nested_numbers(path, QWEN_SETTINGS)


def _gemini_settings(path: Path) -> dict[str, str]:
    """What Gemini CLI's settings file sets of ``GEMINI_SETTINGS`` (its ``model`` table)."""
    return _nested_numbers(path, GEMINI_SETTINGS)


def _pi_settings(path: Path) -> dict[str, str]:
    """What Pi's settings file sets of ``PI_SETTINGS`` (its ``compaction`` table)."""
    return _reserve_settings(path, PI_SETTINGS)


def _opencode_settings(path: Path) -> dict[str, str]:
    """What OpenCode's config sets of ``OPENCODE_SETTINGS`` (its ``compaction`` table): JSON with
    comments and trailing commas, as OpenCode reads its ``opencode.json`` and ``opencode.jsonc``."""
    return _reserve_settings(path, OPENCODE_SETTINGS, jsonc=True)


def _reserve_settings(path: Path, keys: tuple[str, str], jsonc: bool = False) -> dict[str, str]:
    """A reserve (a number) and its switch (true / false) a JSON settings file sets at ``keys``."""
    reserve, switch = keys
    doc = _json_settings(path, jsonc)
    out = _nested_numbers(path, (reserve,), doc)
    table = doc.get(switch.split(".")[0])
    name = switch.split(".", 1)[1]
    if isinstance(table, dict) and isinstance(table.get(name), bool):
        out[switch] = str(table[name]).lower()
    return out


def _settings_file(path: Path) -> dict[str, str]:
    """What Claude Code's settings file sets of ``CLAUDE_SETTINGS`` (its ``env`` table, its own
    keys); nothing where it is absent; a file that is no JSON object is a one-line error."""
    doc = _json_settings(path)
    out: dict[str, str] = {}
    env = doc.get("env")
    table: dict[str, Any] = env if isinstance(env, dict) else {}
    for key in CLAUDE_SETTINGS:
        if isinstance(table.get(key), (str, int, float)) and not isinstance(table.get(key), bool):
            out[key] = str(table[key])
    if isinstance(doc.get("autoCompactWindow"), int) and not isinstance(doc.get("autoCompactWindow"), bool):
        out.setdefault("CLAUDE_CODE_AUTO_COMPACT_WINDOW", str(doc["autoCompactWindow"]))
    if doc.get("autoCompactEnabled") is False:
        out.setdefault("DISABLE_AUTO_COMPACT", "1")
    return out
