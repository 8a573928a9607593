"""``compactlab replay``: one policy (or several) over transcripts, call by call."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import UsageError
from .common import Choice, status_line, policy_options, format_option, verbose_option, force_option, complete_policy, summarizer_options, calibrate_option, cost_options, input_options, sessions_options, inputs_of, subagents_option, standard_input, notifier, progress_bar, job_settings, end_command


@click.command()
@click.argument("transcripts", nargs=-1, required=False, type=click.Path(path_type=str), metavar="[TRANSCRIPT]...")
@sessions_options
@click.option("-p", "--policy", "policy_refs", multiple=True, metavar="POLICY", shell_complete=complete_policy,
              help="A preset name, a policy TOML file, or py:module:function [default: s08]; one (compare runs several).")
@policy_options
@summarizer_options
@click.option("--tokens", type=Choice(["estimate", "anthropic"]), default="estimate", show_default=True,
              help="Measure tokens by estimate (the fit to the recorded usage, else chars / 4) or exactly with "
                   "messages.count_tokens.")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=str), default=None,
              help="Output folder [default: reports/<transcript>-<policy>/; with several transcripts, "
                   "one folder each inside --out].")
@format_option("replay_report", "table")
@click.option("--dry-run", is_flag=True, help="Write no file at all; only print.")
@force_option
@click.option("--write-transcripts", is_flag=True, help="Also write the context saved before each summary.")
@click.option("--keep-recorded-compactions", is_flag=True,
              help="Replay the compactions the recording did (Claude Code compact boundaries).")
@calibrate_option
@click.option("--chart", is_flag=True, help="Also draw the tokens-per-call chart (chart.svg) in the output folder.")
@cost_options
@input_options
@subagents_option
@click.option("-q", "--quiet", is_flag=True, help="No status or warnings on stderr.")
@verbose_option
def replay(transcripts: tuple[str, ...], **options: Any) -> None:
    """Replay each TRANSCRIPT (a file, or a folder of sessions) call by call through a policy.

    \b
    Examples:
      compactlab replay session.jsonl
      compactlab replay ~/.claude/projects/app/ -p claude-code
      compactlab replay session.jsonl --set snip.enabled=false
    """
    o, quiet, refs = options, options["quiet"], options["policy_refs"]
    if len(refs) > 1:
        raise UsageError(f"replay runs one policy; {len(refs)} given ({', '.join(refs)})",
                         hint=f"compactlab compare TRANSCRIPT {' '.join('-p ' + p for p in refs)} runs them side by side")
    if "-" in transcripts:
        with standard_input(transcripts) as spooled:
            ctx = click.get_current_context()
            return ctx.invoke(replay, **{**ctx.params, "transcripts": (spooled,)})
    from ..jobs.base import Reading
    from ..jobs.replay import ReplaySettings, replay_prepared

    def prepare() -> tuple[list[str], Any]:
        from ..engine.policy import load_policy
        from ..jobs.base import say_before_runs

        settings = job_settings(o, ReplaySettings, policy=load_policy(refs[0] if refs else "s08", o["overrides"]),
                             overridden=bool(o["overrides"]))
        files = inputs_of(transcripts, o["subagents"], quiet, o)
        say_before_runs([(settings.policy, ())], o["overrides"], lambda line, _: status_line(quiet, line), files=files)
        if o["fmt"] == "json-run" and len(files) != 1:
            raise UsageError(f"--format json-run prints one run; {len(files)} transcripts given",
                             hint="--format json prints {\"runs\": [...]} for any number")
        return files, settings

    reading = Reading(o["input_format"], o["skip_bad_lines"], o["calibrate"], o["tokens"],
                      probes=refs[:1] != ("none",) or bool(o["overrides"]), dry_run=o["dry_run"])
    done = replay_prepared((transcripts or ("",))[0], reading, prepare, notifier(quiet, o["verbose"]), progress_bar(quiet))
    from ..reports import write_runs

    write_runs(done.runs, o["fmt"], sys.stdout)
    end_command(done.outcome(), quiet)
