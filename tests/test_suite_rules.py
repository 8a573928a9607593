"""The suite's own rules: the README's ``pytest`` runs a part of each long test (a fifth of a property
test's examples, a covering part of a matrix, one signal of two), and CI's thorough pass runs the
rest (``COMPACTLAB_THOROUGH=1 pytest -m "slow or property"``)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, strategies as st

import helpers
from helpers import ROOT, covering


def _rows(decorator: pytest.MarkDecorator) -> tuple[list[tuple], list[tuple]]:
    """(the rows the README's suite runs, those it leaves to CI) of a ``covering`` parametrization."""
    quick, slow = [], []
    for param in decorator.args[1]:
        (slow if any(m.name == "slow" for m in param.marks) else quick).append(param.values)
    return quick, slow


def test_a_covering_matrix_runs_every_pair_of_its_first_axes_and_every_value_of_the_others():
    a, b, c = [1, 2], ["x", "y", "z"], [10, 20, 30, 40]
    quick, slow = _rows(covering("a, b, c", a, b, c))
    assert sorted(quick + slow) == sorted(itertools.product(a, b, c))  # every row, once
    assert sorted((x, y) for x, y, _ in quick) == sorted(itertools.product(a, b))  # each pair once
    assert {z for *_, z in quick} == set(c)
    assert len(quick) == 6 and len(slow) == 18


def test_a_covering_matrix_names_a_row_by_its_values_lists_joined():
    decorator = covering("order, how", [["snip", "micro"], ["micro"]], ["loaded"])
    assert [p.id for p in decorator.args[1]] == ["snip+micro-loaded", "micro-loaded"]


def test_a_property_test_runs_a_fifth_of_its_examples_unless_the_run_is_thorough(monkeypatch):
    monkeypatch.setattr(helpers, "THOROUGH", False)
    assert [helpers.examples(n) for n in (300, 60, 25)] == [60, 12, 10]
    monkeypatch.setattr(helpers, "THOROUGH", True)
    assert [helpers.examples(n) for n in (300, 60, 25)] == [300, 60, 25]


@given(st.integers())
def _a_property(n: int) -> None:
    pass


def test_every_property_test_is_marked_for_the_thorough_pass(request):
    [conftest] = [p for p in request.config.pluginmanager.get_plugins()
                  if getattr(p, "__file__", None) == str(ROOT / "tests" / "conftest.py")]

    class Item:
        def __init__(self, obj):
            self.obj, self.marks = obj, []

        def add_marker(self, mark):
            self.marks.append(mark.name)

    items = [Item(_a_property), Item(test_a_covering_matrix_names_a_row_by_its_values_lists_joined)]
    conftest.pytest_collection_modifyitems(items)
    assert [i.marks for i in items] == [["property"], []]


def test_every_property_test_of_this_session_carries_the_mark(request):
    """(the suite as collected: a property test that escaped the mark would never run in full)"""
    from hypothesis import is_hypothesis_test

    collected = [item for item in request.session.items if is_hypothesis_test(getattr(item, "obj", None))]
    assert all(item.get_closest_marker("property") for item in collected)
    if "property" not in (request.config.option.markexpr or "") and len(request.session.items) > 1000:
        assert len(collected) >= 50  # (the whole suite collected: its property tests are there)


def test_ci_runs_what_the_readme_command_leaves_out():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "pytest" in ci and 'COMPACTLAB_THOROUGH=1 pytest -m "slow or property"' in ci
