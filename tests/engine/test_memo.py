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


def _run(r) -> tuple:
    import orjson

    return (orjson.dumps(r.summary), orjson.dumps(r.calls), r.probe_ledger, r.events)


#: policies whose recall the native check asks: seeds, a harness's, a sweep's values
_POLICIES = [("s08", []), ("observation-masking", []), ("claude-code", []), ("s08", ["micro.keep_recent=1"]),
             ("s08", ["summary.trigger=20000", "micro.keep_recent=6"])]


def test_the_runs_after_a_recording_s_first_share_what_recall_read_of_its_messages(monkeypatch):
    """Recall's native check keeps what it read of a recording's own messages (its facts and texts)
    for the runs after the first (``recall.shared_messages``), and the violations' tracker their
    facts (``violations.shared_facts``): each run gives what a first run of a fresh load gives,
    whatever ran before it; nothing is kept for a recording replayed once."""
    import pytest

    from compactlab import core
    from compactlab.engine.measures import recall, violations
    from helpers import SAMPLES

    if core.in_use() is None:
        pytest.skip("the native core is not built in this install: no native check to share")
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")
    shared = facts = 0
    for path in sorted(SAMPLES.glob("*.jsonl")):
        t = load_transcript(str(path))
        m = memo.memo_of(t).runs
        for i, (name, sets) in enumerate([("none", []), *_POLICIES * 2]):
            policy = load_policy(name, sets)
            got = replay(t, policy)
            assert (m[violations._SHARED] is False) == (i == 0)  # (made at the second run)
            if i:  # (recall's, at the second run that acts: none does not)
                assert (m[recall._SHARED] is False) == (i == 1)
            assert _run(got) == _run(replay(load_transcript(str(path)), policy)), (path.name, name, sets)
        shared += len(m[recall._SHARED])
        facts += len(m[violations._SHARED])
    assert shared and facts  # (messages were read once for several runs)


def test_shared_messages_hold_across_generated_recordings_and_policies(monkeypatch, tmp_path):
    """The same on generated recordings (orphans, parallel batches, errors, prompts, manual
    compactions), policies drawn too."""
    import orjson
    import pytest
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from compactlab import core
    from strategies import transcripts

    if core.in_use() is None:
        pytest.skip("the native core is not built in this install: no native check to share")
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(transcripts(max_turns=30), st.lists(st.sampled_from(_POLICIES), min_size=2, max_size=4))
    def check(messages, chosen):
        path = tmp_path / "g.jsonl"
        path.write_bytes(b"\n".join(orjson.dumps(x) for x in messages) + b"\n")
        t = load_transcript(str(path))
        for name, sets in chosen:
            policy = load_policy(name, sets)
            assert _run(replay(t, policy)) == _run(replay(load_transcript(str(path)), policy))

    check()
