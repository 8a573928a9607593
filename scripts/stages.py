"""Where a corpus command or a replay spends its memory and its recall time, stage by stage: runs
any compactlab command in this process with a few of its library calls timed and the process's
high-water mark (VmHWM, Linux) read as each ends.

    python scripts/stages.py compare FOLDER -p s08 -p claude-code --out OUT --force -q
    python scripts/stages.py replay FILE -p s08 --format json --out OUT -q

Prints, on stderr, per stage: the high-water mark in MB when it began and ended, and the seconds
spent in it (summed over its calls). Used for #32's memory figures (the compare stages: the runs,
the comparison, results.json, the reports) and #28's (the probe check, the probe cache, the probe
ledger's files). What `compactlab bench` cannot show: which stage a peak or a second belongs to.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def high_water() -> int:
    """This process's peak resident memory so far, in MB (0 where /proc is not there)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


STAGES: dict[str, list[Any]] = {}  # name -> [MB at first start, MB at last end, seconds, calls]


def timed(owner: Any, name: str) -> None:
    real = getattr(owner, name)

    def stage(*args: Any, **kwargs: Any) -> Any:
        row = STAGES.get(name)
        if row is None:  # (the high-water mark read at the first start only: /proc is read once a call)
            row = STAGES[name] = [high_water(), 0, 0.0, 0]
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            row[2] += time.perf_counter() - start
            row[3] += 1
            row[1] = high_water()

    setattr(owner, name, stage)


def main() -> None:
    from compactlab.plumbing.process import start

    start()  # as the command's entry point: the collector off (its seconds are the command's)
    import compactlab.jobs.compare as compare_job
    import compactlab.reports.compare_report as compare_report
    import compactlab.reports.replay_report as replay_report
    from compactlab.engine.measures import probe_cache, recall

    timed(compare_job, "run_in_parts")
    for name in ("comparison", "results_files", "report_files"):
        timed(compare_report, name)
    for name in ("key_of", "load"):
        timed(probe_cache, name)
    timed(recall, "check")
    for name in ("probes_csv_bytes", "compactions_csv_bytes"):
        timed(replay_report, name)
    from compactlab.cli import main as cli

    start = time.perf_counter()
    try:
        cli.main(sys.argv[1:], standalone_mode=False, prog_name="compactlab")
    except SystemExit:
        pass
    print(f"{'stage':24} {'MB at start':>12} {'MB at end':>10} {'seconds':>8} {'calls':>7}", file=sys.stderr)
    for name, (began, ended, seconds, calls) in STAGES.items():
        print(f"{name:24} {began:12} {ended:10} {seconds:8.3f} {calls:7}", file=sys.stderr)
    print(f"{'whole command':24} {'':12} {'':10} {time.perf_counter() - start:8.3f}", file=sys.stderr)


if __name__ == "__main__":
    main()
