"""A corpus command keeps its runs' summaries packed (#32 §1): they read as the dicts they were,
in a fraction of the memory; results.json is made a chunk of runs at a time, the same bytes."""

from __future__ import annotations

import pickle
import tracemalloc

import orjson
import pandas as pd
import pytest

from compactlab.corpus.packed import Packed


def _summary(i: int) -> dict:
    return {"transcript": f"t{i}.jsonl", "policy": "s08", "calls": 40 + i, "cost_usd": 0.1 * i + 0.03,
            "raw_cost_usd": 1.5, "recall": None if i % 2 else 0.75, "flag": True, "big": 1 << 70,
            "calibration": {"source": "recorded usage", "chars_per_token": 3.9}, "violations_introduced": 0}


def test_a_packed_summary_reads_as_its_dict():
    for i in range(3):
        s = _summary(i)
        p = Packed(s)
        assert p == s and dict(p) == s and list(p) == list(s) and len(p) == len(s)
        assert all(type(p[k]) is type(v) for k, v in s.items())  # an int stays an int, True stays True
        assert p.get("missing", 7) == 7 and "calls" in p and "missing" not in p
        assert pickle.loads(pickle.dumps(p)) == s
        with pytest.raises(KeyError):
            p["missing"]


def test_packed_summaries_share_one_layout_and_take_a_fraction_of_the_dicts_memory():
    """Measured as the main process holds them: each summary unpickled anew (as a worker sends it),
    so that no value object is shared with the source; a summary that kept its values as objects (a
    tuple of them, a dict copy) holds about 2 KB and fails the docstring's 0.7 KB."""
    summaries = [{**{f"metric_{k}": k * 1.5 + i for k in range(30)}, **{f"count_{k}": k + 1000 + i for k in range(25)},
                  "fingerprint": "98f39cbd749c"} for i in range(2000)]
    sent = [pickle.dumps(s) for s in summaries]

    def held(make) -> int:
        tracemalloc.start()
        kept = [make(pickle.loads(b)) for b in sent]
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(kept) == 2000 and kept[7]["count_3"] == 1010 and kept[7]["metric_2"] == 10.0
        return size

    as_dicts = held(lambda s: s)
    packed = held(Packed)
    assert packed / 2000 < 1000 and packed < as_dicts / 5, (packed, as_dicts)


def test_results_json_made_in_chunks_is_the_whole_document(monkeypatch):
    from types import SimpleNamespace

    from compactlab.reports import compare_report
    from compactlab.reports.text import json_bytes

    class Verdict:
        def to_dict(self) -> dict:
            return {"entries": [1, "a []"], "empty": []}

    for n in (0, 1, 2, 5):
        df = pd.DataFrame({"x": range(n), "name": [f"run\u202e{i}" for i in range(n)], "none": [None] * n,
                           "share": [i / 3 for i in range(n)]})
        c = SimpleNamespace(df=df, verdict=Verdict())
        for indent in (False, True):
            option = orjson.OPT_SERIALIZE_NUMPY | (orjson.OPT_INDENT_2 if indent else 0)
            whole = json_bytes({"verdict": Verdict().to_dict(), "runs": df.to_dict(orient="records")}, option)
            for chunk in (1, 2, 1000):
                monkeypatch.setattr(compare_report, "JSON_CHUNK", chunk)
                assert compare_report.results_json(c, indent) == whole, (n, indent, chunk)  # type: ignore[arg-type]


def test_a_compacted_run_reads_as_it_was_and_shares_what_the_grid_holds_equal():
    from compactlab.corpus.compare import RunResult
    from compactlab.corpus.packed import Sharing

    def run(job: int, policy: str, calls: int) -> RunResult:
        summary = {**_summary(1), "policy": policy}
        return RunResult(job, "t.jsonl", policy, {}, summary, tokens=[100 * i for i in range(calls)],
                         raw_tokens=[120 * i for i in range(calls)], events={"summary": [3], "manual": []},
                         levels={"window": 200000.0}, losses=[(4, "micro", 7, ["a/b.py", "x_y"])])

    sharing = Sharing()
    a, b = run(0, "s08", 5).compacted(sharing), run(1, "s06", 5).compacted(sharing)
    fresh = run(0, "s08", 5)
    assert dict(a.summary) == fresh.summary and list(a.tokens) == fresh.tokens
    assert list(a.raw_tokens) == fresh.raw_tokens and a.events == {"summary": (3,), "manual": ()}
    assert a.loss_rows() == fresh.losses and fresh.loss_rows() == fresh.losses
    assert a.raw_tokens is b.raw_tokens and a.levels is b.levels and a.summary["calibration"] is b.summary["calibration"]
    other = run(2, "s08", 6).compacted(sharing)  # another raw series (a swept size key): its own
    assert other.raw_tokens is not a.raw_tokens and list(other.raw_tokens) == [120 * i for i in range(6)]
    big = RunResult(3, "t", "p", {}, {"x": 1}, tokens=[1 << 40]).compacted()
    assert list(big.tokens) == [1 << 40]  # (past 4 bytes: 8)
    assert RunResult(4, "t", "p", {}, {"x": 1}).compacted().loss_rows() == []  # (none lost)
