"""The per-call seam (#60 §3, docs/architecture.md): a measure returns its figures for a call as a
small typed row of ints whose fields are the record's columns, and its total as a typed row of
``summarize``'s keywords; the loop stores them without naming a measure."""

from __future__ import annotations

import inspect

from compactlab import load_policy, load_transcript, replay
from compactlab.engine import measures as M
from compactlab.engine.records import TURN_COLUMNS, summarize
from helpers import asst, results, tool_session, tr, tu, user, write_jsonl


def _run_capturing(tmp_path, monkeypatch) -> tuple[list, list, object]:
    rows: list = []
    totals: list = []
    from compactlab.engine.cost.pricing import NativePromptCache

    def named(m: object) -> str:  # (the native core's cache is the prompt cache too: the same seam)
        return "PromptCache" if isinstance(m, NativePromptCache) else type(m).__name__

    for cls in (M.PromptCache, NativePromptCache, M.RawSize, M.Violations, M.Retention, M.Recall, M.IntactFirstRecall):
        at_call, finish = cls.at_call, cls.finish

        def wrapped_at(self, at, context, _f=at_call):
            row = _f(self, at, context)
            rows.append((named(self), row))
            return row

        def wrapped_finish(self, _f=finish):
            total = _f(self)
            totals.append((named(self), total))
            return total

        if "at_call" in vars(cls):  # (not a subclass's inherited one: it would be wrapped twice)
            monkeypatch.setattr(cls, "at_call", wrapped_at)
            monkeypatch.setattr(cls, "finish", wrapped_finish)
    msgs = tool_session(12, size=3000) + [asst(tu("z", "Read", file_path="src/app_main.py")),
                                           results(tr("z", "src/app_main.py: def handle_payment_v2()")),
                                           asst(tu("y", "Read", file_path="src/app_main.py")),
                                           results(tr("y", "ok")),
                                           asst(tu("x", "bash", command="grep -n handle_payment_v2 src")),
                                           results(tr("x", "none")), user("thanks")]
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", msgs)))
    # (the Python measures, the reference: the native core measures all but recall in one crossing,
    # ``_native.CallMeasures``, held to them by the differential tests)
    monkeypatch.setenv("COMPACTLAB_CORE", "python")
    run = replay(t, load_policy("s08", ["micro.keep_recent=1", "micro.min_chars=10"]))
    return rows, totals, run


def test_a_measure_returns_rows_of_ints_named_by_the_records_columns(tmp_path, monkeypatch):
    rows, totals, run = _run_capturing(tmp_path, monkeypatch)
    columns = set(TURN_COLUMNS)
    kinds = {name for name, row in rows if row is not None}
    assert {"PromptCache", "RawSize", "Violations", "Retention"} <= kinds and kinds & {"Recall", "IntactFirstRecall"}
    for name, row in rows:
        if row is None:
            continue
        assert isinstance(row, tuple) and set(row._fields) <= columns, (name, row)
        assert all(type(v) is int for v in row), (name, row)  # plain data: what a native core returns
    # what the rows said is what the records hold
    last = [row for name, row in rows if name == "RawSize"][-1]
    assert (run.calls[-1].raw_messages, run.calls[-1].raw_chars) == (last.raw_messages, last.raw_chars)


def test_a_measures_total_is_a_row_of_summarizes_keywords(tmp_path, monkeypatch):
    _, totals, run = _run_capturing(tmp_path, monkeypatch)
    keywords = set(inspect.signature(summarize).parameters)
    assert len(totals) == 5
    for name, total in totals:
        assert isinstance(total, tuple) and set(total._fields) <= keywords, (name, total)
    assert run.summary.violations == dict(totals)["Violations"].violations


def test_the_loop_names_no_measure():
    """The loop reaches the measures only through ``Measures`` (measures_for's registry)."""
    from compactlab.engine import loop

    source = inspect.getsource(loop)
    assert "measures.recall" not in source and "RawSize" not in source and "Violations(" not in source


def test_the_prompt_cache_is_told_each_calls_facts_once(tmp_path, monkeypatch):
    """(#60 §3) The loop calls the prompt cache once per call, as a measure, and its rows are the
    records' reads and writes."""
    rows, _, run = _run_capturing(tmp_path, monkeypatch)
    cache = [row for name, row in rows if name == "PromptCache"]
    assert len(cache) == len(run.calls)
    # (pricing replays recorded cache events over the rows at the end; this recording has none)
    assert [(r.cache_read_tokens, r.cache_write_tokens) for r in run.calls] == [tuple(row) for row in cache]
    assert cache[0].cache_read_tokens == 0 and any(row.cache_read_tokens for row in cache[1:])
