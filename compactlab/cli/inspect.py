"""``compactlab inspect``: what a transcript holds, before any policy."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import CompactlabError, UsageError
from ..plumbing.process import collector_off
from .common import format_option, quiet_option, verbose_option, input_options, sessions_options, inputs_of, subagents_option, notifier


@click.command()
@click.argument("transcripts", nargs=-1, required=False, type=click.Path(path_type=str), metavar="[TRANSCRIPT]...")
@input_options
@format_option("inspect_report", "table", "INSPECT_WRITERS")
@click.option("--top", default=10, show_default=True, type=click.IntRange(0, 1000), help="How many largest results to list.")
@click.option("--compactions", "audit", is_flag=True,
              help="List every compaction the recordings hold, a line each: the call, the time, the tokens before "
                   "and after, the share of the window, and where the harness's version and your settings say it "
                   "should fire (Claude Code, Qwen Code, goose, Pi, OpenCode; Codex and OpenHands by replaying their "
                   "presets).")
@click.option("--setting", "settings", multiple=True, metavar="KEY=VALUE",
              help="With --compactions: a harness setting, as you set it (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60, "
                   "autoCompactWindow=400000, GOOSE_AUTO_COMPACT_THRESHOLD=0.6, compaction.reserveTokens=30000, ...); else "
                   "read where each harness keeps it (the environment, ~/.claude/settings.json, Codex's config.toml, "
                   "~/.pi/agent/settings.json, ...), each said with its source.")
@subagents_option
@sessions_options
@quiet_option
@verbose_option
def inspect(transcripts: tuple[str, ...], **o: Any) -> None:
    """What is in TRANSCRIPT, before any policy: calls, tools, sizes, recorded violations and usage.

    Given several, or a folder, lists the sessions (one line each); given none, your own sessions
    of every harness compactlab reads, from their homes (~/.claude/projects, ~/.codex/sessions,
    ~/.gemini/tmp, the Cline and Roo task folders, OpenCode's and Goose's stores, ~/.qwen, ~/.pi,
    ~/.openclaw, ~/.copilot, Amp's threads).

    \b
    Examples:
      # your sessions, all harnesses
      compactlab inspect
      # this week's Codex sessions
      compactlab inspect --since 7d --harness codex
      compactlab inspect session.jsonl
      compactlab inspect ~/.claude/projects/ --format json
    """
    from ..overview import overview, session_rows
    from ..reports.inspect_report import INSPECT_WRITERS, SESSIONS_WRITERS
    from ..transcripts import load_transcript, one_session

    quiet, fmt, input_format, skip = o["quiet"], o["fmt"], o["input_format"], o["skip_bad_lines"]
    if o["audit"]:
        _audit_compactions(transcripts, o)
        return
    if o["settings"]:
        raise UsageError("--setting is read with --compactions", hint="add --compactions")
    if len(transcripts) == 1 and one_session(transcripts[0]) and not any(o.get(k) for k in ("since", "until")):
        with collector_off():
            loaded = load_transcript(transcripts[0], input_format, skip_bad_lines=skip)
        INSPECT_WRITERS[fmt](overview(loaded, top=o["top"]), sys.stdout)
        return
    from ..jobs.base import none_read, not_transcripts

    with collector_off():
        rows, skipped = session_rows(inputs_of(transcripts, o["subagents"], quiet, o), input_format, skip)
    not_transcripts(skipped, notifier(quiet, o["verbose"]))
    if not rows and skipped:
        raise none_read(len(skipped))
    SESSIONS_WRITERS[fmt](rows, sys.stdout)


def _audit_compactions(transcripts: tuple[str, ...], o: dict[str, Any]) -> None:
    """``inspect --compactions``: each session's recorded compactions audited (``audit.py``)."""
    from ..audit import audit, session_settings
    from ..corpus.harness_settings import given_settings
    from ..reports.inspect_report import COMPACTIONS_WRITERS
    from ..transcripts import load_transcript, one_session

    given_settings(o["settings"])  # (a --setting wrong: said before any session is read; a harness's settings
    # file wrong, with the first of its sessions: another harness's session does not read it)
    files = (list(transcripts) if len(transcripts) == 1 and one_session(transcripts[0])
             else inputs_of(transcripts, o["subagents"], o["quiet"], o))
    audits = []
    with collector_off():
        for path in files:
            try:
                loaded = load_transcript(path, o["input_format"], skip_bad_lines=o["skip_bad_lines"])
                audits.append(audit(loaded, session_settings(loaded, o["settings"])))
            except CompactlabError as exc:
                if len(files) == 1:
                    raise
                notifier(o["quiet"])(f"skipped {path}: {exc}", False)
    COMPACTIONS_WRITERS[o["fmt"]](audits, sys.stdout)
