"""``compactlab convert``: a transcript in another format."""

from __future__ import annotations


import click

from ..errors import cannot_write
from ..plumbing.process import collector_off
from .common import status_line, quiet_option, input_options


@click.command()
@click.argument("transcript", type=click.Path(path_type=str))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="Where to write the Anthropic messages JSONL.")
@input_options
@click.option("--keep-recorded-compactions/--drop-recorded-compactions", default=True, show_default=True,
              help="Write the recording's compactions where they happened (their summary lines carry a "
                   "\"recorded_compaction\" key, read only by compactlab), so that a replay of the file gives what a "
                   "replay of the source gives. Dropped: plain messages only, and no usage recorded after the first "
                   "compaction (it measured a context the file no longer holds).")
@click.option("--force", is_flag=True, help="Replace --output if it exists.")
@quiet_option
def convert(transcript: str, output: str, skip_bad_lines: bool, input_format: str | None,
            keep_recorded_compactions: bool, force: bool, quiet: bool) -> None:
    """Convert TRANSCRIPT (any supported format) to Anthropic messages JSONL: the messages a
    replay uses, with the usage and what the recording says of itself, so that a replay of the
    file gives the answer a replay of TRANSCRIPT gives.

    \b
    Example:
      compactlab convert rollout-2026-02-23.jsonl \\
          -o session.jsonl
    """
    from pathlib import Path

    from ..plumbing.outputs import atomic_write_bytes, check_destination
    from ..transcripts import load_transcript
    from ..transcripts.writer import to_anthropic_jsonl

    check_destination(output, "--output", [transcript], replaces=(), force=force)
    with collector_off():
        loaded = load_transcript(transcript, input_format, skip_bad_lines=skip_bad_lines)
    try:
        atomic_write_bytes(Path(output), to_anthropic_jsonl(loaded, keep_recorded_compactions), what="--output")
    except OSError as exc:
        raise cannot_write(f"--output {output}: cannot write", exc) from None
    status_line(quiet, f"wrote {output}: {len(loaded.entries)} messages, {len(loaded.call_positions)} calls "
                   f"(from {loaded.format})")
    if loaded.compactions and not keep_recorded_compactions:
        first = min(c.position for c in loaded.compactions)
        dropped = sum(1 for p in loaded.usage if p >= first)
        status_line(quiet, f"{len(loaded.compactions)} recorded compaction(s) left out, and the usage of the {dropped} "
                       "call(s) after the first: it measured a context this file does not hold")
