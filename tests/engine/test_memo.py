"""The engine's memo of a loaded transcript (#60 §2): what the engine works out once of a
recording (its raw baseline, what pricing reads of its calls) is kept beside the transcript, not
on it, shared by every run of it, and gone with it."""

from __future__ import annotations

import dataclasses
import gc

from compactlab import load_policy, load_transcript, replay
from compactlab.engine import memo
from compactlab.transcripts import Transcript
from helpers import tool_session, write_jsonl, records_of, examples


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

    return (orjson.dumps(r.summary), records_of(r.calls), r.probe_ledger, r.events)


#: policies whose recall the native check asks: seeds, a harness's, a sweep's values
_POLICIES = [("s08", []), ("observation-masking", []), ("claude-code", []), ("s08", ["micro.keep_recent=1"]),
             ("s08", ["summary.trigger=20000", "micro.keep_recent=6"]),
             ("s08", ["micro.keep_recent=1", "micro.placeholder=[{tool_name}: gone]"])]


def test_the_runs_after_a_recording_s_first_share_what_recall_read_of_its_messages(monkeypatch):
    """Recall's native check keeps what it read of a recording's own messages (its facts and texts)
    for the runs after the first (``recall.shared_messages``), and the violations' tracker their
    facts (``violations.shared_facts``), and the native loop micro's replacements of them
    (``keeping.shared_replacements``): each run gives what a first run of a fresh load gives,
    whatever ran before it; nothing is kept for a recording replayed once."""
    import pytest

    from compactlab import core
    from compactlab.engine import keeping
    from compactlab.engine.measures import recall, violations
    from helpers import SAMPLES

    if core.in_use() is None:
        pytest.skip("the native core is not built in this install: no native check to share")
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")
    shared = facts = replaced = 0
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
        replaced += len(m[keeping._REPLACED])
        assert len(m[keeping._REPLACED]) <= 4 * len(t.entries) + 256 + 1  # (its limit, the last pair over it)
    assert shared and facts and replaced  # (messages were read, results replaced, once for several runs)


def test_a_shared_replacement_is_the_one_a_run_makes_and_the_memo_stops_at_its_limit(monkeypatch, tmp_path):
    """Micro's replacements shared by a recording's runs: the same entry object at every run (a
    result replaced again in a message already changed is found too), equal to what ``Entry``
    makes; a memo at its limit keeps no more, and the runs give the same."""
    import pytest

    from compactlab import core
    from compactlab.engine import keeping

    if core.in_use() is None:
        pytest.skip("the native core is not built in this install: no native loop to share")
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")
    from compactlab.engine import loop
    from helpers import asst, results, tr, tu, user

    messages = [user("start")]
    for i in range(30):  # (three results a message: micro replaces them one call at a time; each
        # command reads a file the results before named: recall's probes)
        messages += [asst(f"step {i}", *(tu(f"t{i}_{j}", "bash", command=f"cat src/m{i - 1}_{j}/a.py")
                                         for j in range(3))),
                     results(*(tr(f"t{i}_{j}", f"src/m{i}_{j}/a.py " + "x" * 3000) for j in range(3)))]
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", messages)))
    policy = load_policy("s08", ["micro.keep_recent=1", "summary.enabled=false"])
    runs = [replay(t, policy) for _ in range(3)]
    known = memo.memo_of(t).runs[keeping._REPLACED]
    made = {key: entry for key, entry in known.items() if type(key) is tuple}
    assert made and any(source.changed for source, _, _ in made)  # (a chain: a second result of a message)
    for (source, k, text), entry in made.items():
        fresh = source.with_result_content(k, text)
        assert (entry.message, entry.chars, entry.results, entry.changed) == (
            fresh.message, fresh.chars, fresh.results, fresh.changed)
        assert known[entry] is None  # (a replacement may be a source)
    assert _run(runs[1]) == _run(runs[2]) == _run(runs[0])
    # recall's check knows the shared replacements for every run, as it knows the recording's own
    # messages; no other changed message (each run's own)
    from compactlab.engine.measures import recall

    read = memo.memo_of(t).runs[recall._SHARED]
    assert any(entry in read for entry in made.values())
    assert len(read) <= len(t.entries) + len(made)
    # at its limit the memo keeps no more: what a run makes then is its own, the same figures
    fresh = load_transcript(str(tmp_path / "t.jsonl"))
    def at_two(runs_memo: dict, messages: int) -> tuple[dict, int] | None:
        got = keeping.shared_replacements(runs_memo, messages)
        return None if got is None else (got[0], 2)

    monkeypatch.setattr(loop, "shared_replacements", at_two)
    again = [replay(fresh, policy) for _ in range(3)]
    assert len(memo.memo_of(fresh).runs[keeping._REPLACED]) <= 3
    # (a replacement a run made for itself is not known for the others: the check's memo stays bounded)
    assert len(memo.memo_of(fresh).runs[recall._SHARED]) <= len(fresh.entries) + 3
    assert [_run(r) for r in again] == [_run(r) for r in runs]


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

    @settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
    @given(transcripts(max_turns=30), st.lists(st.sampled_from(_POLICIES), min_size=2, max_size=4))
    def check(messages, chosen):
        path = tmp_path / "g.jsonl"
        path.write_bytes(b"\n".join(orjson.dumps(x) for x in messages) + b"\n")
        t = load_transcript(str(path))
        for name, sets in chosen:
            policy = load_policy(name, sets)
            assert _run(replay(t, policy)) == _run(replay(load_transcript(str(path)), policy))

    check()
