"""The engine's memo of a loaded transcript (#60 §2): what the engine works out once of a
recording (its raw baseline, what pricing reads of its calls) is kept beside the transcript, not
on it, shared by every run of it, and gone with it."""

from __future__ import annotations

import dataclasses
import gc

from compactlab import load_policy, load_transcript, replay
from compactlab.engine import memo
from compactlab.transcripts import Transcript
from helpers import tool_session, write_jsonl


def test_the_transcript_carries_no_engine_cache():
    names = {f.name for f in dataclasses.fields(Transcript)}
    assert not names & {"raw_baseline", "engine_memo", "baseline", "memo"}


def test_every_run_shares_the_memo_and_it_goes_with_the_transcript(tmp_path):
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", tool_session(8, 2000))))
    first = replay(t, load_policy("s08")).summary
    m = memo.memo_of(t)
    base, runs = m.baseline, dict(m.runs)
    assert base is not None and runs
    again = replay(t, load_policy("s08")).summary
    assert memo.memo_of(t).baseline is base and again.cost_usd == first.cost_usd
    key = id(t)
    del t, m
    gc.collect()
    assert key not in memo._MEMOS
