"""``compactlab compare``: policies across transcripts, with a verdict."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from .common import Choice, policy_options, format_option, verbose_option, force_option, policies_option, summarizer_options, next_action_options, asking_for, calibrate_option, cost_options, input_options, sessions_options, inputs_of, subagents_option, notifier, progress_bar, job_settings, end_command


@click.command()
@click.argument("transcripts", nargs=-1, required=False, type=click.Path(path_type=str), metavar="[TRANSCRIPT]...")
@sessions_options
@policies_option("none, s06, s08 and, for the sessions of one harness, its preset")
@policy_options
@summarizer_options
@click.option("--sweep", "sweeps", multiple=True, metavar="LAYER.KEY=V1,V2,...",
              help="Run every policy with each of these values (repeatable: the product is swept).")
@click.option("--jobs", type=click.IntRange(1, 512), default=None, help="Parallel processes [default: the cores].")
@click.option("--executor", default=None, metavar="dask://HOST:PORT",
              help="Run the grid on an existing Dask distributed cluster (extra: compactlab[dask]).")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=str), default=os.path.join("reports", "compare"),
              show_default=True, help="Folder for results.csv, results.json, report.md, report.html, charts/.")
@click.option("--sort", "sort_key", default="cost_saving", show_default=True, help="Column to sort the table by.")
@click.option("--charts", type=Choice(["auto", "all", "summary", "none"]), default="auto", show_default=True,
              help="Charts to draw: the corpus charts and the 6 transcripts where the policies differ most (auto), "
                   "every transcript's (all), the corpus charts only (summary), none.")
@click.option("--retention-margin", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="How far below no compaction's recall and retention (an absolute share) a recommended policy "
                   "may keep.")
@format_option("compare_report", "table")
@click.option("--dry-run", is_flag=True, help="Write no file; only print.")
@force_option
@click.option("--keep-recorded-compactions", is_flag=True, help="Replay the compactions the recording did.")
@calibrate_option
@cost_options
@next_action_options
@input_options
@subagents_option
@click.option("-q", "--quiet", is_flag=True, help="No status or warnings on stderr (a progress bar still shows on a terminal).")
@verbose_option
def compare(transcripts: tuple[str, ...], **options: Any) -> None:
    """Which policy, which thresholds? Replay every TRANSCRIPT through every POLICY x swept value.

    \b
    Examples:
      compactlab compare sessions/ -p s08 -p claude-code \\
          -p observation-masking
      compactlab compare sessions/ -p s08 \\
          --sweep summary.trigger=30000,60000,120000
      # asks a model: costs money
      compactlab compare sessions/ -p s08 -p codex \\
          --next-action 20
    """
    from ..jobs.compare import Grid, Reporting, compare_files
    from ..reports.compare_report import WRITERS

    o, quiet = options, options["quiet"]
    grid = Grid(policies=list(o["policy_refs"]), overrides=list(o["overrides"]),
                sweeps=list(o["sweeps"]))
    reporting = Reporting(sort_key=o["sort_key"], charts=o["charts"], retention_margin=o["retention_margin"],
                          next_action=asking_for(o, grid.policies))
    settings = job_settings(o, tokens="estimate")
    done = compare_files(inputs_of(transcripts, o["subagents"], quiet, o), grid, settings, reporting,
                         lambda result: WRITERS[o["fmt"]](result, sys.stdout), notifier(quiet, o["verbose"]), progress_bar(quiet))
    end_command(done.outcome, quiet)
