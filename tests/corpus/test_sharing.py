"""A corpus command keeps its runs' summaries as slotted ``RunSummary`` records (#32 §1, #44 §5):
they read as the dicts they were, in a fraction of the memory, with what the runs hold equal held
once; results.json is made a chunk of runs at a time, the same bytes."""

from __future__ import annotations

import pickle
import tracemalloc

import orjson
import pytest

from compactlab import metrics
from compactlab.corpus.compare import NOT_SENT
from compactlab.engine.records import RunSummary


def _summary(i: int, policy: str = "s08") -> RunSummary:
    return RunSummary(transcript=f"t{i}.jsonl", format="anthropic", policy=policy, fingerprint="98f39cbd749c",
                      calls=40 + i, raw_tokens_total=1_000_000 + i, tokens_total=400_000 + i, reduction=0.6 + i / 1e5,
                      peak_tokens=90_000 + i, final_tokens=80_000 + i, cost_usd=0.1 * i + 0.03, raw_cost_usd=1.5 + i,
                      cost_usd_nocache=2.5 + i, raw_cost_usd_nocache=3.5 + i, retention=0.9, refs=300 + i,
                      refs_retained=270 + i, recall=0.75, probes=500 + i, probes_kept=375 + i,
                      cache_read_tokens=300_000 + i, cache_write_tokens=100_000 + i, price_model="claude-sonnet-4-5",
                      calibration={"source": "recorded usage", "chars_per_token": 3.9}, window_tokens=200_000,
                      window_source="200,000 tokens: the price table", summary_cost_usd=0.01 * i)


def test_a_run_summary_reads_by_its_keys_as_its_dict_does():
    s = _summary(3)
    d = s.to_dict()
    assert dict(s) == d and list(s) == list(d) and len(s) == len(d) and s["calls"] == 43
    assert s.get("missing", 7) == 7 and "calls" in s and "missing" not in s and s.get("recall") == 0.75
    assert pickle.loads(pickle.dumps(s)) == s
    with pytest.raises(KeyError):
        s["missing"]
    n = s.numbers
    assert n.probes == 503 and n.recall == pytest.approx(378 / 503) and (n + n).probes == 1006
    assert metrics.sums([s, d]) == n + n  # a summary and its dict total alike


def test_run_summaries_are_held_in_a_fraction_of_the_dicts_memory():
    """Measured as the main process holds them: each summary unpickled anew (as a worker sends it),
    so that no value object is shared with the source, then compacted as compare keeps its runs
    (#32 §1: 30,000 runs as dicts held 150 MB; Packed's arrays held 0.7 KB a run, a slotted summary
    with its names, empty fields and calibration held once about 1.4 KB, its run included)."""
    from compactlab.corpus.compare import RunResult
    from compactlab.corpus.sharing import Sharing

    sent = [pickle.dumps(_summary(i).without(NOT_SENT)) for i in range(2000)]
    sharing = Sharing()

    def held(make) -> int:
        tracemalloc.start()
        kept = [make(pickle.loads(b)) for b in sent]
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(kept) == 2000 and kept[7]["calls"] == 47
        return size

    def compacted(s):
        return RunResult(0, s.transcript, s.policy, {}, s).compacted(sharing).summary

    # (the names the summaries intern, interned once beforehand and kept so: interning them during
    # the measurement could grow the process's table of interned strings, one allocation of
    # megabytes in a process that has interned many, as the suite's has, which no run holds)
    interned_first = [compacted(pickle.loads(b)) for b in sent]
    sharing = Sharing()
    as_dicts = held(lambda s: s.to_dict())
    as_summaries = held(compacted)
    assert len(interned_first) == 2000
    assert as_summaries / 2000 < 1500 and as_summaries < as_dicts / 2, (as_summaries, as_dicts)


def test_results_json_made_in_chunks_is_the_whole_document(monkeypatch):
    from types import SimpleNamespace

    from compactlab.reports import compare_report
    from compactlab.reports.runs import Runs
    from compactlab.reports.text import json_bytes

    class Verdict:
        def to_dict(self) -> dict:
            return {"entries": [1, "a []"], "empty": []}

    for n in (0, 1, 2, 5):
        columns = {"x": list(range(n)), "name": [f"run\u202e{i}" for i in range(n)], "none": [None] * n,
                   "share": [i / 3 for i in range(n)]}
        c = SimpleNamespace(runs=Runs(columns), verdict=Verdict())
        records = [{k: v[i] for k, v in columns.items()} for i in range(n)]
        for indent in (False, True):
            option = orjson.OPT_INDENT_2 if indent else 0
            whole = json_bytes({"verdict": Verdict().to_dict(), "runs": records}, option)
            for chunk in (1, 2, 1000):
                monkeypatch.setattr(compare_report, "JSON_CHUNK", chunk)
                assert compare_report.results_json(c, indent) == whole, (n, indent, chunk)  # type: ignore[arg-type]


def test_a_compacted_run_reads_as_it_was_and_shares_what_the_grid_holds_equal():
    from compactlab.corpus.compare import RunResult
    from compactlab.corpus.sharing import Sharing

    def run(job: int, policy: str, calls: int) -> RunResult:
        return RunResult(job, "t.jsonl", policy, {}, _summary(1, policy), tokens=[100 * i for i in range(calls)],
                         raw_tokens=[120 * i for i in range(calls)], events={"summary": [3], "manual": []},
                         levels={"window": 200000.0}, losses=[(4, "micro", 7, ["a/b.py", "x_y"])])

    sharing = Sharing()
    a, b = run(0, "s08", 5).compacted(sharing), run(1, "s06", 5).compacted(sharing)
    fresh = run(0, "s08", 5)
    assert a.summary == fresh.summary and list(a.tokens) == fresh.tokens
    assert list(a.raw_tokens) == fresh.raw_tokens and a.events == {"summary": (3,), "manual": ()}
    assert a.loss_rows() == fresh.losses and fresh.loss_rows() == fresh.losses
    assert a.raw_tokens is b.raw_tokens and a.levels is b.levels and a.summary.calibration is b.summary.calibration
    other = run(2, "s08", 6).compacted(sharing)  # another raw series (a swept size key): its own
    assert other.raw_tokens is not a.raw_tokens and list(other.raw_tokens) == [120 * i for i in range(6)]
    big = RunResult(3, "t", "p", {}, _summary(2), tokens=[1 << 40]).compacted()
    assert list(big.tokens) == [1 << 40]  # (past 4 bytes: 8)
    assert RunResult(4, "t", "p", {}, _summary(2)).compacted().loss_rows() == []  # (none lost)
