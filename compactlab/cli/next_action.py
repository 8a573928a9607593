"""``compactlab next-action``: would the agent still act the same?"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from .common import Choice, status_line, policy_options, format_option, quiet_option, verbose_option, force_option, policies_option, asking_for, calibrate_option, input_options, sessions_options, inputs_of, subagents_option, notifier, progress_bar, job_settings, end_command


@click.command(name="next-action")
@click.argument("transcripts", nargs=-1, required=False, type=click.Path(path_type=str), metavar="[TRANSCRIPT]...")
@sessions_options
@policies_option("s08")
@policy_options
@click.option("--model", default=None,
              help="The model asked [default: $COMPACTLAB_NEXT_ACTION_MODEL, else claude-haiku-4-5].")
@click.option("--api", type=Choice(["anthropic", "openai"]), default=None,
              help="The Messages API ($ANTHROPIC_API_KEY, $ANTHROPIC_BASE_URL) or an OpenAI-compatible endpoint "
                   "($OPENAI_API_KEY, $OPENAI_BASE_URL; extra compactlab[openai]) [default: by the model's provider].")
@click.option("--samples", type=click.IntRange(1, 10_000), default=20, show_default=True,
              help="Calls asked about per policy, across the transcripts (two requests each).")
@click.option("--seed", type=int, default=0, show_default=True, help="The sampling's seed.")
@click.option("--max-cost", type=click.FloatRange(0), default=1.0, show_default=True, metavar="USD",
              help="Send nothing if the estimate is above this many dollars.")
@click.option("--max-tokens", type=click.IntRange(16, 8192), default=256, show_default=True,
              help="The longest reply asked for (the first action is all that is read).")
@click.option("--system-prompt", "system_prompt_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              metavar="FILE", help="The system prompt sent where the format records none (Claude Code's does not) "
                                   "[default: a stand-in, said in the report].")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Where replies are cached [default: $COMPACTLAB_CACHE_DIR, else the user's cache folder].")
@click.option("--no-cache", is_flag=True, help="Do not read or write the reply cache.")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=str), default=os.path.join("reports", "next-action"),
              show_default=True, help="Folder for next_action.json, samples.csv and report.md.")
@format_option("next_action_report", "table")
@click.option("--dry-run", is_flag=True, help="List the samples and the estimate; send and write nothing.")
@force_option
@click.option("--keep-recorded-compactions", is_flag=True, help="Replay the compactions the recording did.")
@calibrate_option
@click.option("--prices", "prices_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="A price table TOML whose models take precedence over genai-prices and its corrections.")
@input_options
@subagents_option
@quiet_option
@verbose_option
def next_action(transcripts: tuple[str, ...], **options: Any) -> None:
    """Would the agent still act the same? Ask a model for the next action on each policy's context.

    Costs money: a sample of calls is sent twice (the policy's context and no compaction's),
    priced first (--max-cost, --dry-run); replies are cached, so a rerun is free.

    \b
    Examples:
      compactlab next-action sessions/ -p s08 \\
          -p observation-masking --dry-run
      compactlab next-action sessions/ -p s08 --samples 40 \\
          --max-cost 5
      # an OpenAI model ($OPENAI_API_KEY)
      compactlab next-action sessions/ -p s08 \\
          --model gpt-5-mini
    """
    from ..jobs.next_action import next_action_files, say_plan
    from ..reports.next_action_report import PLAN_WRITERS, WRITERS

    o, quiet = options, options["quiet"]
    asking = asking_for(o, list(o["policy_refs"] or ("s08",)), o["samples"], o["model"], o["api"])
    if o["system_prompt_file"]:
        from ..plumbing.files import read_regular_text

        asking.system_prompt = (read_regular_text(o["system_prompt_file"], "--system-prompt"), o["system_prompt_file"])
    model = asking.model

    def show_plan(plan: Any) -> None:  # (a dry run's table or JSON; else the lines said before any request)
        if o["dry_run"]:
            PLAN_WRITERS[o["fmt"]](plan, model.model, model.api, asking.max_cost, sys.stdout)
        else:
            say_plan(plan, asking, lambda line, _: status_line(quiet, line))

    done = next_action_files(inputs_of(transcripts, o["subagents"], quiet, o), asking, job_settings(o), notifier(quiet, o["verbose"]),
                             progress_bar(quiet), show_plan)
    if done.result is not None:
        WRITERS[o["fmt"]](done.result, sys.stdout)
    end_command(done.outcome, quiet)
