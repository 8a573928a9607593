"""``compactlab bench``: speed and memory against the parse floor."""

from __future__ import annotations


import click



@click.command()
@click.option("--calls", default=5000, show_default=True, type=click.IntRange(10, 1_000_000),
              help="Calls of the main synthetic transcript (5,000 is about 55 MB).")
@click.option("--rounds", default=5, show_default=True, type=click.IntRange(1, 100), help="Interleaved rounds (medians).")
@click.option("--jobs", default=2, show_default=True, type=click.IntRange(1, 512), help="--jobs of the compare figures.")
@click.option("--no-reference", is_flag=True, help="Skip the straightforward re-serialise-every-call reference.")
@click.option("--dir", "workdir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Where to write the synthetic inputs [default: a temporary folder, removed after].")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Also write the figures as JSON.")
@click.option("--corpus", is_flag=True,
              help="Also compare folders of 200, 2,000 and 10,000 small sessions x 2 policies (time, and "
                   "the main process's peak memory).")
@click.option("--tune", "tune_too", is_flag=True,
              help="Also time a tune of 200 trials over 20 transcripts of about 100 calls.")
@click.option("--trajectories", type=click.Path(exists=True, file_okay=False, path_type=str), default=None,
              metavar="FOLDER", help="Also time compare x 2 policies, with reports, of 200 sessions made of the "
                                     "recorded ones in FOLDER (e.g. ../shared/transcripts/openai).")
@click.option("--dask", is_flag=True,
              help="Also compare the --trajectories on a local Dask cluster of --jobs one-thread workers against "
                   "--jobs local processes, in CPU (every process of both; extra: compactlab[dask]).")
@click.option("--instructions", is_flag=True,
              help="Also count the instructions of the floor and of replay -p s08 and -p none (valgrind's "
                   "callgrind, every process: a minute or two) and hold them to their targets.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False, path_type=str), default=None,
              metavar="PYTHON", help="Also run the --trajectories compare (again and first) and the --tune with "
                                     "another install's compactlab (PYTHON -m compactlab: the head #59 was filed "
                                     "at, say), interleaved with this one's, and hold each to #59's 2.5x in CPU.")
def bench(calls: int, rounds: int, jobs: int, no_reference: bool, workdir: str | None, json_out: str | None,
          corpus: bool, tune_too: bool, trajectories: str | None, dask: bool, instructions: bool,
          baseline: str | None) -> None:
    """Measure speed and memory against the parse floor, on synthetic transcripts."""
    from pathlib import Path

    import orjson

    from ..bench import run
    from ..plumbing.outputs import atomic_write_bytes, check_destination

    if json_out:
        check_destination(json_out, "--json", replaces=(b"{",))
    figures = run(calls=calls, rounds=rounds, workdir=workdir, naive=not no_reference, jobs=jobs, corpus=corpus,
                  tune=tune_too, trajectories=trajectories, instructions=instructions, dask=dask,
                  baseline=baseline)
    if json_out:
        atomic_write_bytes(Path(json_out), orjson.dumps(figures, option=orjson.OPT_INDENT_2) + b"\n", what="--json")
