"""``compactlab tune``: a policy's settings searched for a Pareto front."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ..errors import UsageError
from .common import Choice, policy_options, format_option, verbose_option, complete_policy, calibrate_option, cost_options, homed, tune_sessions_options, input_options, inputs_of, subagents_option, notifier, progress_bar, job_settings, end_command


@click.command()
@click.argument("transcripts", nargs=-1, required=False, type=click.Path(path_type=str), metavar="[TRANSCRIPT]...")
@tune_sessions_options
@click.option("-p", "--policy", "base", default="s08", show_default=True, metavar="POLICY", shell_complete=complete_policy,
              help="The base policy whose keys are searched (a preset name or policy TOML).")
@policy_options
@click.option("--space", "spaces", multiple=True, metavar="KEY=LO:HI[:log]|KEY=A|B",
              help="A searched key: an int or float range (log scale with :log) or choices (repeatable), e.g. "
                   "--space summary.trigger=40000:200000 --space micro.keep_recent=1:10.")
@click.option("--trials", type=click.IntRange(1, 100_000), default=200, show_default=True,
              help="Trials the study ends with (with --resume: those already run count).")
@click.option("--objective", "objective", default="cost,recall", show_default=True, metavar="NAME,NAME",
              help="What the front trades off, each maximised: cost (saving), recall, retention, reduction.")
@click.option("--max-violations", type=click.IntRange(0), default=0, show_default=True,
              help="A candidate that introduces more tool-pairing violations (or overflows a window) is rejected.")
@click.option("--sampler", type=Choice(["tpe", "nsga2"]), default="tpe", show_default=True,
              help="Optuna's multi-objective sampler: TPE (fewer trials) or NSGA-II.")
@click.option("--seed", type=int, default=0, show_default=True, help="The sampler's seed: the same seed, the same front.")
@click.option("--jobs", type=click.IntRange(1, 512), default=None, help="Parallel processes [default: the cores].")
@click.option("--executor", default=None, metavar="dask://HOST:PORT",
              help="Run the trials' replays on an existing Dask distributed cluster (extra: compactlab[dask]).")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=str),
              default=os.path.join("reports", "tune"), show_default=True,
              help="Folder for study.journal (Optuna's journal storage), front.csv, front.json, policies/, charts/.")
@click.option("--resume", is_flag=True, help="Continue the study in --out up to --trials.")
@click.option("--chart/--no-chart", default=True, show_default=True, help="Draw charts/tune.svg.")
@click.option("--force", is_flag=True, help="Start anew where --out holds a study (it is deleted).")
@format_option("tune_report", "table")
@calibrate_option
@cost_options
@input_options
@subagents_option
@click.option("-q", "--quiet", is_flag=True, help="No status or warnings on stderr (a progress bar still shows on a terminal).")
@verbose_option
def tune(transcripts: tuple[str, ...], **options: Any) -> None:
    """Search a base policy's keys for the Pareto front of cost saving against probe recall; with
    --harness claude-code, the settings Claude Code lets you change, printed as the line to paste.

    \b
    Examples:
      compactlab tune sessions/ -p s08 --trials 100 \\
          --space summary.trigger=30000:200000
      compactlab tune sessions/ -p s08 --resume --trials 200 \\
          --space micro.keep_recent=1:10
      # Claude Code's own settings, on your sessions
      compactlab tune --harness claude-code --trials 40
    """
    from ..corpus.harness_settings import HARNESSES, home_of, of_format
    from ..jobs.tune import Search, check_search, tune_files
    from ..reports.tune_report import WRITERS

    o, quiet = options, options["quiet"]
    if not o["spaces"] and not o["harness"]:
        raise UsageError("tune needs --space KEY=LO:HI (a policy's keys) or --harness NAME (its settings)",
                         hint="e.g. --space summary.trigger=40000:200000, or --harness claude-code")
    # (a harness named as its sessions' home is: qwen, Qwen Code's, searches qwen-code's settings)
    named = of_format(o["harness"]) if o["harness"] not in (None, *HARNESSES) else None
    harness = named.name if named is not None else o["harness"]
    spec = Search(base=o["base"], overrides=list(o["overrides"]), spaces=list(o["spaces"]), trials=o["trials"],
                  objectives=o["objective"], max_violations=o["max_violations"], sampler=o["sampler"], seed=o["seed"],
                  resume=o["resume"], chart=o["chart"], harness=harness)
    check_search(spec)  # (before the sessions are looked for: a wrong option is the first thing said)
    # (with paths, --harness names the settings searched; with none, also the home searched: Qwen Code's is qwen's)
    home = None if transcripts or harness is None else home_of(harness)
    found = {**o, "harness": home}
    homed(transcripts, home)
    done = tune_files(inputs_of(transcripts, o["subagents"], quiet, found), spec, job_settings(o),
                      lambda result: WRITERS[o["fmt"]](result, sys.stdout), notifier(quiet, o["verbose"]), progress_bar(quiet))
    end_command(done.outcome, quiet)
