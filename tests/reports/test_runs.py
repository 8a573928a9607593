"""The runs' table the reports are written from (``reports/runs.py``, #60 §7: pandas left the
install): its order, its CSV and the DataFrame a pandas user asks for."""

from __future__ import annotations

import csv
import io
import math
import sys
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactlab.reports.runs import Runs, missing


@given(st.lists(st.one_of(st.none(), st.just(math.nan), st.integers(-3, 3), st.floats(-2, 2)), max_size=25),
       st.booleans())
def test_an_order_is_stable_and_puts_what_is_missing_last(values, ascending):
    runs = Runs({"v": values, "at": list(range(len(values)))})
    order = runs.order_by("v", ascending)
    present = [i for i, v in enumerate(values) if not missing(v)]
    # (an independent stable order: by value, then by position, whichever the direction)
    expected = sorted(present, key=lambda i: ((values[i] if ascending else -values[i]), i))
    assert order == expected + [i for i, v in enumerate(values) if missing(v)]


def test_the_csv_is_the_rows_as_the_csv_module_reads_them_back():
    runs = Runs({"transcript": ["a,b.jsonl", "=cmd.jsonl"], "n": [3, None], "share": [0.1, math.nan],
                 "ok": [True, False]})
    text = runs.csv(lambda s: "'" + s if s.startswith("=") else s)
    assert text.splitlines()[0] == "transcript,n,share,ok"
    assert list(csv.reader(io.StringIO(text)))[1:] == [["a,b.jsonl", "3", "0.1", "True"], ["'=cmd.jsonl", "", "", "False"]]


def test_columns_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="different lengths"):
        Runs({"a": [1, 2], "b": [1]})


def test_take_and_rows():
    runs = Runs({"p": ["x", "y", "z"], "c": [3, 1, 2]})
    assert list(runs.take([2, 0]).rows()) == [{"p": "z", "c": 2}, {"p": "x", "c": 3}]
    assert "c" in runs and len(runs) == 3


def test_to_pandas_hands_pandas_a_copy_of_every_column(monkeypatch):
    made = {}

    class DataFrame:
        def __init__(self, columns):
            made.update(columns)

    monkeypatch.setitem(sys.modules, "pandas", types.SimpleNamespace(DataFrame=DataFrame))
    runs = Runs({"policy": ["s08"], "cost_usd": [1.5]})
    assert isinstance(runs.to_pandas(), DataFrame) and made == {"policy": ["s08"], "cost_usd": [1.5]}
    assert made["policy"] is not runs["policy"]  # (a copy: the reports' table is not the user's)


def test_to_pandas_without_pandas_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # (what importing a package not installed does)
    with pytest.raises(ImportError, match=r"pip install 'compactlab\[pandas\]'"):
        Runs({"a": [1]}).to_pandas()


def test_to_pandas_with_pandas():
    pd = pytest.importorskip("pandas", reason="pandas is an optional extra (pip install 'compactlab[pandas]')")
    frame = Runs({"policy": ["s08", "none"], "cost_usd": [1.5, None]}).to_pandas()
    assert list(frame.columns) == ["policy", "cost_usd"] and frame["cost_usd"].isna().tolist() == [False, True]
    assert isinstance(frame, pd.DataFrame)
