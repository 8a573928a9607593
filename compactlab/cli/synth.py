"""``compactlab synth``: a synthetic transcript."""

from __future__ import annotations


import click

from ..errors import cannot_write
from .common import status_line, quiet_option


@click.command()
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="Where to write the transcript (.jsonl).")
@click.option("--calls", default=200, show_default=True, type=click.IntRange(1, 10_000_000),
              help="Number of model calls (assistant messages).")
@click.option("--seed", default=0, show_default=True, type=int, help="Random seed: same seed, same file.")
@click.option("--usage", is_flag=True,
              help="Write it as a recording with usage does: each reply an API response object with its usage "
                   "(then replayed loaded whole and calibrated on it, as a real recording).")
@click.option("--force", is_flag=True, help="Replace --output if it exists.")
@quiet_option
def synth(output: str, calls: int, seed: int, usage: bool, force: bool, quiet: bool) -> None:
    """Write a realistic synthetic coding-agent transcript.

    \b
    Example:
      compactlab synth -o long.jsonl --calls 2000 --seed 7
    """
    from ..plumbing.outputs import check_destination
    from ..synth import write

    check_destination(output, "--output", replaces=(), force=force)
    try:
        size = write(output, calls, seed, usage=usage)
    except OSError as exc:
        raise cannot_write(f"{output}: cannot write", exc) from None
    status_line(quiet, f"wrote {output}: {calls} calls, {size / 1e6:.2f} MB")
