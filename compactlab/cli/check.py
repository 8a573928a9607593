"""``compactlab check``: the CI gate against a baseline."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..metrics import tolerance_help
from .common import policy_options, format_option, quiet_option, verbose_option, policies_option, next_action_options, asking_for, calibrate_option, cost_options, input_options, sessions_options, inputs_of, subagents_option, notifier, progress_bar, job_settings, end_command


@click.command()
@click.argument("transcripts", nargs=-1, required=False, type=click.Path(path_type=str), metavar="[TRANSCRIPT]...")
@sessions_options
@policies_option("s08")
@policy_options
@click.option("--baseline", "baseline_path", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="The baseline JSON file (e.g. reports/baseline.json).")
@click.option("--tolerance", "tolerances", multiple=True, metavar="X|METRIC=X", help=tolerance_help())
@click.option("--update-baseline", is_flag=True, help="Write the current results into the baseline instead.")
@click.option("--allow-stale", is_flag=True, help="A transcript that changed since the baseline does not fail.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Also write a JUnit XML report (one testcase per transcript x policy).")
@format_option("check_report", "table")
@calibrate_option
@cost_options
@next_action_options
@click.option("--next-action-margin", type=click.FloatRange(0, 1), default=0.10, show_default=True,
              help="With --next-action: a policy fails when its agreement is surely (the whole 95% interval) more "
                   "than this share below the control's. Costs money and is not deterministic across model versions.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="With --next-action: where replies are cached [default: $COMPACTLAB_CACHE_DIR, else the user's "
                   "cache folder].")
@click.option("--no-cache", is_flag=True, help="With --next-action: do not read or write the reply cache.")
@input_options
@subagents_option
@quiet_option
@verbose_option
def check(transcripts: tuple[str, ...], **options: Any) -> None:
    """CI gate: fail (exit 1) when a policy breaks tool pairs or loses ground against the baseline.

    \b
    Examples:
      compactlab check sessions/*.jsonl -p s08 \\
          --baseline reports/baseline.json --update-baseline
      compactlab check sessions/*.jsonl -p s08 \\
          --baseline reports/baseline.json --junit check.xml
    """
    from ..jobs.check import Gate, check_files
    from ..reports.check_report import WRITERS

    o, quiet = options, options["quiet"]
    gate = Gate(baseline=o["baseline_path"], policies=list(o["policy_refs"] or ("s08",)),
                overrides=list(o["overrides"]), tolerances=list(o["tolerances"]), update=o["update_baseline"],
                allow_stale=o["allow_stale"], junit=o["junit_path"],
                next_action=asking_for(o, list(o["policy_refs"] or ("s08",))), next_action_margin=o["next_action_margin"])
    done = check_files(inputs_of(transcripts, o["subagents"], quiet, o), gate, job_settings(o),
                       lambda results: WRITERS[o["fmt"]](results, sys.stdout), notifier(quiet, o["verbose"]), progress_bar(quiet))
    end_command(done.outcome, quiet)
