"""In-process timings of a replay's phases: load, raw baseline, replay (best of N), and of the
streamed replay a single `compactlab replay` does (all three at once, as it reads), in this
process and with the read-ahead process (what `replay` does with a big plain file).

    python scripts/phases.py TRANSCRIPT [POLICY [KEY=VALUE ...]] [--rounds N]

What `compactlab bench` cannot show: where one process spends its time once started. Used for
the speed issue's before/after figures; pair it with `python -X importtime -m compactlab ...`
for the start-up and with py-spy for a sampled profile of any phase.
"""

from __future__ import annotations

import argparse
import gc
import os
import time

from compactlab.engine.measures.baseline import compute_baseline
from compactlab.engine.policy import load_policy
from compactlab.engine.loop import replay
from compactlab.engine.feeds import open_feed
from compactlab.transcripts import load_transcript


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("transcript")
    ap.add_argument("policy", nargs="?", default="s08")
    ap.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    policy = load_policy(args.policy, args.overrides)
    best = {"load": float("inf"), "baseline": float("inf"), "replay": float("inf")}
    for _ in range(args.rounds):
        gc.unfreeze()
        gc.collect()
        t0 = time.perf_counter()
        transcript = load_transcript(args.transcript)
        t1 = time.perf_counter()
        gc.freeze()  # as the CLI does after loading
        transcript.raw_baseline = compute_baseline(transcript)
        t2 = time.perf_counter()
        replay(transcript, policy)
        t3 = time.perf_counter()
        for phase, seconds in (("load", t1 - t0), ("baseline", t2 - t1), ("replay", t3 - t2)):
            best[phase] = min(best[phase], seconds)
        del transcript
        gc.unfreeze()
        gc.collect()
        gc.disable()  # as the CLI does around a streamed replay
        for phase, setting in (("streamed", "0"), ("read ahead", "1")):
            os.environ["COMPACTLAB_READ_AHEAD"] = setting
            t0 = time.perf_counter()
            stream = open_feed(args.transcript)
            if stream.streamed:  # else a format that is always loaded
                replay(stream, policy)
                best[phase] = min(best.get(phase, float("inf")), time.perf_counter() - t0)
        gc.enable()
    print("  ".join(f"{phase} {1000 * s:.0f} ms" for phase, s in best.items()), f"(best of {args.rounds})")


if __name__ == "__main__":
    main()
