"""Your harness's compactions, audited (#57 §1): every compaction a recording holds, where it
fired, and where the harness's version and your settings say it should have.

For each recorded compaction (a Claude Code compact boundary, a Codex compacted event, an
OpenHands condensation, a converted file's marked summary): the call it came before, its time,
the context's tokens before it (the harness's own ``preTokens`` where it recorded them, else the
last recorded prompt and reply before it) and after it (the first recorded prompt after), its
share of the window, and, for an automatic compaction of a harness whose rule is known here, the
threshold that the harness's version and the settings imply and whether it fired there: at the
first call past it ("where it fires"), before it (the settings given are not the ones it ran
with), or late.

The settings come from where the harness keeps them, each said with its source: ``--setting
KEY=VALUE`` first, then the environment compactlab runs in, then the harness's settings file
(Claude Code: ``~/.claude/settings.json``, its ``env`` table and ``autoCompactEnabled``), and
before it the project's own files under the folder the session was started in, where that folder is
here (Claude Code's ``.claude/settings.local.json`` and ``.claude/settings.json``, which override
the user's); none is guessed. Claude Code's rule (``CLAUDE_CODE``): the trigger is the window less
a reserve for the reply (20,000 tokens on 2.1.x, 32,000 on 2.0.x) less a 13,000-token buffer
(167,000 of 200,000 on 2.1.x, as its users' issues report it; 155,000 on 2.0.x, from a 2.0.76
session that compacted at 155,979: an estimate); ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`` (a percentage
of the window) can only lower it; ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` (or ``autoCompactWindow``)
sets the window it is taken of; ``DISABLE_AUTO_COMPACT`` (or ``autoCompactEnabled: false``) turns
it off. goose's rule: the share of the window ``GOOSE_AUTO_COMPACT_THRESHOLD`` sets (0.8 by
default; a share at or below 0, or at or above 1, turns it off), on the context its last call's
usage measured. Qwen Code's: 0.17 and later compress at max(70% of the window, the window less
33,000) (QwenLM/qwen-code#4345), 0.16 and before at the share ``contextPercentageThreshold`` sets
(0.7 by default, 0 or below off); a Qwen Code recording does not say whether a compression was
automatic or a ``/compress`` typed, so one the rule does not explain is said to be either. Pi's:
the window less ``compaction.reserveTokens`` (16,384 by default; ``compaction.enabled: false`` off),
and a Pi session does not say whether a compaction was automatic or a ``/compact`` typed either.
OpenCode's, for the compactions it asked for itself: the window less the reply's 32,000 less
``compaction.reserved`` (none by default here; ``compaction.auto: false`` off). Pi's settings are
read from its files (``~/.pi/agent/settings.json``, a project's ``.pi/settings.json``), OpenCode's
from its configs (``~/.config/opencode/opencode.json``, ``$OPENCODE_CONFIG``, a project's
``opencode.json``, or ``.jsonc``, JSON with comments). The rules are
``engine/layers/harness_triggers.py``'s, which the harnesses' presets compact by on the same sessions.
"""

from __future__ import annotations

import os
from typing import Any

from .corpus.harness_settings import (PROJECT_FILES, RESERVES, Setting, goose_threshold, number, of_format,
                                      qwen_code_threshold, reserve_threshold, settings_for)
from .engine.layers.harness_triggers import claude_code_lowered, harness_trigger
from .transcripts import Transcript

def _number(settings: dict[str, Setting], key: str, low: float, high: float) -> float | None:
    s = settings.get(key)
    return None if s is None else number(s, key, low, high)


def claude_code_threshold(version: str | None, window: int, settings: dict[str, Setting]) -> tuple[int | None, str]:
    """Where Claude Code ``version`` auto-compacts with ``settings`` (None: it does not), and why,
    in words with the sources."""
    off = settings.get("DISABLE_AUTO_COMPACT")
    if off is not None and off.value.strip().lower() not in ("", "0", "false"):
        return None, f"auto-compaction off (DISABLE_AUTO_COMPACT, {off.source})"
    given_window = int(_number(settings, "CLAUDE_CODE_AUTO_COMPACT_WINDOW", 100_000, 1_000_000) or 0)
    if given_window and given_window < window:  # (Claude Code clamps it to the model's window)
        window = given_window
        set_by = f" (the window from CLAUDE_CODE_AUTO_COMPACT_WINDOW, {settings['CLAUDE_CODE_AUTO_COMPACT_WINDOW'].source})"
    elif given_window:
        set_by = (f" (CLAUDE_CODE_AUTO_COMPACT_WINDOW={given_window:,}, {settings['CLAUDE_CODE_AUTO_COMPACT_WINDOW'].source}, "
                  f"is over the model's {window:,}, to which Claude Code clamps it)")
    else:
        set_by = ""
    default, words = harness_trigger("claude-code", version, window)
    words += set_by
    pct = _number(settings, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", 1, 100)
    if pct is not None:
        lowered = claude_code_lowered(window, pct / 100)
        source = settings["CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"].source
        if lowered < default:
            return lowered, f"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE={pct:g} ({source}): {pct:g}% of {window:,} = {lowered:,}"
        words += f"; CLAUDE_AUTOCOMPACT_PCT_OVERRIDE={pct:g} ({source}) would raise it, which Claude Code ignores"
    return default, words


def _usage_before(transcript: Transcript, position: int) -> dict[str, Any] | None:
    keys = [p for p in transcript.usage if p < position]
    return transcript.usage[max(keys)] if keys else None


def _usage_after(transcript: Transcript, position: int) -> dict[str, Any] | None:
    keys = [p for p in transcript.usage if p >= position]
    return transcript.usage[min(keys)] if keys else None


def _prompt(usage: dict[str, Any]) -> int:
    return int(usage.get("input_tokens", 0) + usage.get("cache_creation_input_tokens", 0)
               + usage.get("cache_read_input_tokens", 0))


def compactions(transcript: Transcript, window: int, settings: dict[str, Setting],
                harness_window: int | None = None) -> list[dict[str, Any]]:
    """The audit of every compaction the recording holds (see the module's docstring), in order:
    each held to its harness's threshold on ``harness_window`` (the window the recording names,
    before the largest prompt answered raised it: ``Window.harness``; default ``window``)."""
    from bisect import bisect_left

    calls = transcript.call_positions
    fmt = transcript.source_format
    version = transcript.metadata.get("version") if fmt in ("claude-code", "qwen") else None
    out = []
    for n, c in enumerate(transcript.compactions, 1):
        before, after = _usage_before(transcript, c.position), _usage_after(transcript, c.position)
        last = _prompt(before) + int(before.get("output_tokens", 0)) if before is not None else None
        tokens_before = c.pre_tokens if c.pre_tokens is not None else last
        row: dict[str, Any] = {
            "compaction": n, "call": bisect_left(calls, c.position), "message_index": c.position, "time": c.time,
            "trigger": c.trigger, "tokens_before": tokens_before,
            "tokens_before_source": "recorded by the harness" if c.pre_tokens is not None else
            "the last recorded prompt and reply" if last is not None else None,
            "tokens_after": _prompt(after) if after is not None else None, "window": window,
            "share_of_window": round(tokens_before / window, 4) if tokens_before and window else None,
            "threshold": None, "threshold_source": None, "fired": None,
        }
        row["threshold"], row["threshold_source"], row["fired"] = _held(transcript, c, version, harness_window or window,
                                                                         settings, tokens_before)
        out.append(row)
    if out:
        _dropped(transcript, out)
    if fmt == "codex" and out:
        _codex(transcript, out, settings, harness_window or window)
    if fmt == "openhands" and out:
        _openhands(transcript, out)
    if fmt == "claude-code" and out:
        _request_costs(transcript, out)
    return out


def _dropped(transcript: Transcript, rows: list[dict[str, Any]]) -> None:
    """What each compaction dropped that the agent later used: the recording replayed as it ran
    (no policy, its own compactions kept), each string of a tool result that a later reply used
    and the context sent then no longer held (recall's "lost", once per string), charged to the
    latest compaction after the result that first held it and at or before the use."""
    from .engine.loop import replay
    from .engine.policy import load_policy

    run = replay(transcript, load_policy("none"), keep_recorded_compactions=True)
    calls = [row["call"] for row in rows]
    seen: set[str] = set()
    dropped: list[list[str]] = [[] for _ in rows]
    for o in run.lost_probes:
        if o.status != "lost" or o.probe in seen:
            continue
        seen.add(o.probe)
        by = [k for k, c in enumerate(calls) if o.source_call < c <= o.call]
        if by:
            dropped[by[-1]].append(o.probe)
    for row, strings in zip(rows, dropped):
        row["dropped_later_used"] = len(strings)
        row["dropped_examples"] = strings[:3]


#: how long before a compaction its summary request may have begun (seconds)
REQUEST_WINDOW_S = 600.0


def _request_costs(transcript: Transcript, rows: list[dict[str, Any]]) -> None:
    """Each Claude Code compaction's own request: the ``agent-acompact-*`` subagent file that
    began last before it (within ``REQUEST_WINDOW_S``), and what its recording says it cost with
    output (billed beside the session's own calls)."""
    from .engine.cost.pricing import recorded_total, seconds
    from .errors import CompactlabError
    from .transcripts import load_transcript
    from .transcripts.claude_code import subagent_files

    requests = []
    for f in subagent_files(transcript.path):
        if not f["acompact"]:
            continue
        try:
            request = load_transcript(f["path"])
        except CompactlabError:
            continue
        began = [t for u in request.usage.values() if (t := seconds(u.get("timestamp"))) is not None]
        if began:
            requests.append((min(began), recorded_total(request), os.path.basename(f["path"])))
    for row in rows:
        at = seconds(row["time"])
        found = [r for r in requests if at is not None and 0 <= at - r[0] <= REQUEST_WINDOW_S]
        if found:
            _, cost, name = max(found)
            row["request_cost_usd"] = None if cost is None else round(cost, 6)
            row["request_file"] = name


#: OpenHands' LLMSummarizingCondenser: condense once the history passes max_size events (its default)
OPENHANDS_MAX_SIZE = 120


def _codex(transcript: Transcript, rows: list[dict[str, Any]], settings: dict[str, Setting], window: int) -> None:
    """Codex counts what its rollout does not record (the reasoning of earlier turns), so where its
    limit fires is found as the ``codex`` preset models it: replayed with the limit, the lesser of
    ``model_auto_compact_token_limit`` and 90% of the model's window (``harness_triggers``' ``codex``
    rule, of ``window``: the one the rollout records, 95% of the model's)."""
    given = settings.get("model_auto_compact_token_limit")
    cap = int(_number(settings, "model_auto_compact_token_limit", 1_000, 10_000_000) or 0)
    limit, why = harness_trigger("codex", None, window, cap=cap)
    if given is not None:
        why += f" ({given.source})"
    else:
        why += " (model_auto_compact_token_limit unset)"
    _by_preset(transcript, rows, "codex", limit, why + "; measured as Codex does, by the codex preset")


def _openhands(transcript: Transcript, rows: list[dict[str, Any]]) -> None:
    """OpenHands counts events, of which the recording's messages are a view (an action and its
    observation are two), so where its condenser fires is found by replaying the ``openhands``
    preset, which counts them as it does."""
    _by_preset(transcript, rows, "openhands", OPENHANDS_MAX_SIZE,
               f"OpenHands' default: LLMSummarizingCondenser(max_size={OPENHANDS_MAX_SIZE}) events, counted as the "
               "openhands preset counts them")


def _by_preset(transcript: Transcript, rows: list[dict[str, Any]], preset: str, trigger: int, why: str) -> None:
    """Where a harness that counts what its recording does not show fires, found by replaying its
    preset with ``trigger``: the first compaction fired "where it fires" when the replay compacts at
    the same call, else the row says the call the trigger implies; after it the replay's context
    is its own, so a later compaction is not judged (said)."""
    from .corpus.calibration import by_default
    from .engine.loop import replay
    from .engine.policy import load_policy

    calibration, _ = by_default(transcript)
    run = replay(transcript, load_policy(preset, [f"summary.trigger={trigger}"]), calibration=calibration)
    at = next((e.call for e in run.events if "summary" in e.layers and e.call <= rows[0]["call"]), None)
    for k, row in enumerate(rows):
        row["threshold"], row["threshold_source"] = trigger, why
        row["fired"] = ("not judged: after the first compaction the replay's context is not the recording's" if k else
                        f"where it fires: the {preset} preset, replayed with this threshold, compacts at this call"
                        if at == row["call"] else
                        f"the threshold implies call {at}, {row['call'] - at} call(s) earlier: not the one it ran with"
                        if at is not None else "the threshold is not reached by then: not the one it ran with")


def _previous(transcript: Transcript, position: int) -> int | None:
    """The context's size at the check before the one that compacted. Claude Code measures the
    context by the last reply's usage (its prompt and output) before each call: the compaction's
    ``preTokens`` is that of the last call before it, so the check before was that of the call
    before that one (None where not recorded)."""
    keys = sorted(p for p in transcript.usage if p < position)
    if len(keys) < 2:
        return None
    u = transcript.usage[keys[-2]]
    return _prompt(u) + int(u.get("output_tokens", 0))


def _fired(threshold: int | None, tokens: int | None, previous: int | None, set_by: str | None = None,
           typed: str = "") -> str:
    """Whether it fired where ``threshold`` says: at the first check past it (the check before was
    under it). ``set_by``: the setting that set the threshold (said where it was not applied).
    ``typed``: the command that leaves the same record where the recording does not say whether it
    was automatic or typed (Qwen Code's ``/compress``, Pi's ``/compact``), so one the rule does not
    explain is put down to either, not to the settings alone."""
    unsaid = f"a {typed} you typed, or a setting other than the one given (the recording does not say which)"
    if threshold is None:
        return f"off, so {unsaid}" if typed else "fired although auto-compaction is off: not applied"
    if tokens is None:
        return "not known (the recording says no size)"
    if tokens < threshold:
        return (f"at {tokens:,}, before {threshold:,}: {unsaid}" if typed else
                f"fired at {tokens:,}, before {threshold:,}: the settings given are not the ones it ran with")
    if previous is not None and previous >= threshold:
        if typed:
            return (f"late: the context was {previous:,} (past {threshold:,}) a check before, where the automatic one "
                    f"would have fired unless it failed there; or a {typed} you typed")
        return (f"{set_by} implies {threshold:,}, but the context was {previous:,} a check before and it fired only at "
                f"{tokens:,}: not applied" if set_by else
                f"late: the context was {previous:,} (past {threshold:,}) a check before")
    if typed:
        return f"where the automatic one fires: the first check past {threshold:,} (or a {typed} you typed there)"
    return f"where it fires: the first check past {threshold:,}"


def _held(transcript: Transcript, c: Any, version: str | None, window: int, settings: dict[str, Setting],
          tokens_before: int | None) -> tuple[int | None, str | None, str | None]:
    """The threshold the compaction ``c`` is held to, where it came from, and where it fired, by its
    harness's rule (Nones where the harness's rule is not known here, or is judged elsewhere:
    Codex's and OpenHands')."""
    fmt = transcript.source_format
    if fmt == "claude-code" and c.trigger == "auto":
        threshold, why = claude_code_threshold(version, window, settings)
        set_by = why.split(" (", 1)[0] if why.startswith("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE") else None
        return threshold, why, _fired(threshold, tokens_before, _previous(transcript, c.position), set_by)
    if fmt == "goose" and c.trigger == "auto":
        threshold, why = goose_threshold(window, settings)
        set_by = why.split(" (", 1)[0] if why.startswith("GOOSE_AUTO_COMPACT_THRESHOLD") else None
        return threshold, why, _fired(threshold, tokens_before, _previous(transcript, c.position), set_by)
    if fmt == "qwen" and c.trigger is None:
        threshold, why = qwen_code_threshold(version, window, settings)
        return threshold, why, _fired(threshold, tokens_before, _previous(transcript, c.position), typed="/compress")
    if (fmt == "pi" and c.trigger is None) or (fmt == "opencode" and c.trigger == "auto"):
        threshold, why = reserve_threshold(fmt, window, settings)
        key = RESERVES[fmt][0]
        set_by = f"{key} {settings[key].value}" if key in settings else None
        return threshold, why, _fired(threshold, tokens_before, _previous(transcript, c.position), set_by,
                                      typed="/compact" if fmt == "pi" else "")
    if c.trigger == "manual":
        return None, None, "manual (/compact): no threshold"
    if fmt not in ("codex", "openhands"):
        return None, None, "no rule known here for this harness's threshold"
    return None, None, None


def _version(transcript: Transcript) -> str | None:
    """The harness's version where the recording says it (a text: a file format's number is not one)."""
    for key in ("version", "cli_version"):
        if isinstance(said := transcript.metadata.get(key), str) and said:
            return said
    return None


def _harness(transcript: Transcript) -> str | None:
    h = of_format(transcript.source_format)
    return h.name if h is not None else None


def session_settings(transcript: Transcript, given: list[str] | tuple[str, ...] = (),
                     env: dict[str, str] | None = None, home: str | None = None) -> dict[str, Setting]:
    """The settings ``transcript``'s harness ran with, as far as they are read here: ``settings_for``
    of that harness alone (another harness's settings file, even a broken one, is not this session's),
    with the project files of the folder the session was started in (where it is a folder here)."""
    harness = _harness(transcript)
    project = transcript.started_in if harness in PROJECT_FILES else None
    return settings_for(given, env=env, home=home, harness=harness or "", project=project, project_of=harness)


def audit(transcript: Transcript, settings: dict[str, Setting]) -> dict[str, Any]:
    """A recording's compactions audited, with the window they are measured against and where it
    came from, and the harness's version where the recording says."""
    from .engine.window import of_recording

    window = of_recording(transcript)
    return {"transcript": transcript.path, "format": transcript.format,
            # (a file ``compactlab convert`` wrote: the harness that recorded it, whose rules audit it)
            "recorded_format": transcript.metadata.get("recorded_format"),
            "version": _version(transcript),
            "window": window.tokens, "window_source": window.source,
            # (the folder the session was started in; where its harness keeps settings in the
            # project, whether they were read: "read", or "not a folder here")
            "started_in": (cwd := transcript.started_in),
            "project_settings": None if not cwd or _harness(transcript) not in PROJECT_FILES
            else "read" if os.path.isdir(cwd) else "not a folder here",
            "settings": {k: {"value": s.value, "source": s.source} for k, s in settings.items()},
            "compactions": compactions(transcript, window.tokens, settings, window.harness)}
