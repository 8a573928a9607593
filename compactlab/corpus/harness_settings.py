"""The settings a harness lets you change, as tune searches them and as you paste them (#57 §3).

One harness so far, Claude Code: its one compaction setting a user changes per project is
``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``, the auto-compact threshold as a whole percentage of the
window, which can only lower the default (167,000 of 200,000 on 2.1.x: 83.5%). tune searches it
as the claude-code preset's ``summary.trigger`` at each whole percentage it can take (``SPACE``),
so that the setting printed is the very point replayed; no compaction is
``DISABLE_AUTO_COMPACT=1``.
"""

from __future__ import annotations

import json

HARNESSES = ("claude-code",)
#: the window the percentage is taken of (Claude Code's default; autoCompactWindow changes it)
CLAUDE_WINDOW = 200_000
#: the percentages searched: from 40% to the last whole one under the 2.1.x default (83.5%)
CLAUDE_PERCENTS = range(40, 84)


def space(harness: str) -> str:
    """The ``--space`` of the harness's settings, in its preset's keys."""
    return "summary.trigger=" + "|".join(str(CLAUDE_WINDOW * p // 100) for p in CLAUDE_PERCENTS)


def preset(harness: str) -> str:
    return harness


def paste(harness: str, trigger: int | None, default: bool) -> list[str]:
    """The setting to paste for a tuned point: ``trigger`` (the preset's summary.trigger; None: no
    compaction), ``default``: the preset as it is (no setting to make)."""
    if trigger is None:
        return ["export DISABLE_AUTO_COMPACT=1",
                '~/.claude/settings.json: {"autoCompactEnabled": false}']
    if default:
        return ["no setting: Claude Code's default (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE unset)"]
    pct = trigger * 100 // CLAUDE_WINDOW
    return [f"export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE={pct}",
            "~/.claude/settings.json: " + json.dumps({"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": str(pct)}})]


def trigger_of_percent(pct: int) -> int:
    """The preset's summary.trigger a pasted percentage stands for."""
    return CLAUDE_WINDOW * pct // 100


#: what each harness lets you set about its compaction, as its preset models it: (setting, where
#: it is set, its range, its default, what it sets in the preset)
SETTINGS: dict[str, list[tuple[str, str, str, str, str]]] = {
    "claude-code": [
        ("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "environment, or ~/.claude/settings.json env", "1-100 (%), only lower",
         "unset: 83.5% on 2.1.x (167,000), 77.5% on 2.0.x and 1.x (155,000, an estimate)",
         "summary.trigger = that share of the window (summary.trigger_by_version: the version's default)"),
        ("CLAUDE_CODE_AUTO_COMPACT_WINDOW / autoCompactWindow", "environment / ~/.claude/settings.json",
         "100,000-1,000,000 tokens", "the model's window (200,000)", "the window the trigger is taken of"),
        ("DISABLE_AUTO_COMPACT / autoCompactEnabled", "environment / ~/.claude/settings.json", "1 / false",
         "auto-compaction on", "summary.enabled = false"),
    ],
    "codex": [
        ("model_auto_compact_token_limit", "~/.codex/config.toml ($CODEX_HOME)", "tokens",
         "90% of the gpt-5.x-codex models' 272,000 (244,800)", "summary.trigger"),
        ("model_context_window", "~/.codex/config.toml ($CODEX_HOME)", "tokens", "the model's (272,000)",
         "the window calls are judged on (--window)"),
    ],
}
