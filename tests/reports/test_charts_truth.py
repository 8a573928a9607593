"""Charts that tell the truth at a glance (#31 §3): one colour per policy name in every report,
shares as percentages, policies that share a point named together, a front only where one is —
and, read back from the SVG as a reader reads it (a point against the axis' labelled ticks), every
point where its value is."""

from __future__ import annotations

import re
import statistics
from xml.etree import ElementTree

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from compactlab.reports import charts
from helpers import examples


SVG = "{http://www.w3.org/2000/svg}"


def parsed(svg: str) -> ElementTree.Element:
    return ElementTree.fromstring(svg)


def legend(root: ElementTree.Element) -> list[str]:
    return [t.text or "" for g in root.iter(f"{SVG}g") if g.get("class") == "entry" for t in g.iter(f"{SVG}text")]


def group(root: ElementTree.Element, cls: str) -> list[ElementTree.Element]:
    return [e for e in root.iter() if e.get("class") == cls]


def axis(root: ElementTree.Element, which: str) -> list[tuple[float, float]]:
    """(pixel, value) of each labelled tick of the x or y axis, the value read from its label."""
    ticks = [t for t in root.iter(f"{SVG}text") if t.get("class") == "tick"]
    out = []
    for t in ticks:
        anchor = t.get("text-anchor")
        if (which == "x") != (anchor == "middle"):
            continue
        label = (t.text or "").replace("\u2212", "-").replace(",", "")
        value = float(label.rstrip("%")) / (100 if label.endswith("%") else 1)
        out.append((float(t.get("x" if which == "x" else "y") or 0) - (0 if which == "x" else 3.5), value))
    return out


def value_at(ticks: list[tuple[float, float]], pixel: float) -> float:
    (p0, v0), (p1, v1) = ticks[0], ticks[-1]
    return v0 + (pixel - p0) / (p1 - p0) * (v1 - v0)


def test_a_policy_has_the_same_colour_in_every_report():
    a = charts.colours(["none", "s08", "my-policy.toml", "claude-code"])
    b = charts.colours(["claude-code", "my-policy.toml", "none"])
    assert a["none"] == b["none"] == "#7f7f7f" and a["claude-code"] == b["claude-code"]
    assert a["my-policy.toml"] == b["my-policy.toml"]  # by its name, not its place in the list
    many = charts.colours([f"p{i}" for i in range(10)])
    assert len(set(many.values())) == 10  # names that would share a colour in one report get the next free one


def test_the_pareto_chart_draws_shared_points_once_and_no_front_of_one_point():
    overall = [("none", 1.0, 0.0), ("a", 1.0, 0.0), ("b", 1.0, 0.0)]  # three that never acted: one point
    root = parsed(charts.pareto_chart([], overall, charts.colours(["none", "a", "b"]), "recall"))
    assert legend(root) == ["none = a = b"] and not group(root, "front")
    assert [n.text for n in group(root, "note")] == ["none, a, b"]
    root = parsed(charts.pareto_chart([], [("none", 1.0, 0.0), ("s08", 0.5, 0.9)], charts.colours(["none", "s08"]),
                                      "recall", floor=0.95))
    assert legend(root) == ["the verdict's recall floor (95.0%)", "Pareto front (all transcripts)", "none", "s08"]
    assert len(group(root, "front")) == 1


def test_a_point_sits_where_its_value_is_on_the_labelled_axes():
    runs = [("s08", 0.42, 0.91), ("s08", 0.61, -0.35), ("none", 1.0, 0.0)]
    overall = [("s08", 0.5, 0.3), ("none", 1.0, 0.0)]
    root = parsed(charts.pareto_chart(runs, overall, charts.colours(["s08", "none"]), "retention"))
    xs, ys = axis(root, "x"), axis(root, "y")
    assert all(label.endswith("%") for label in (t.text or "" for t in root.iter(f"{SVG}text") if t.get("class") == "tick"))
    drawn = [(float(c.get("cx") or 0), float(c.get("cy") or 0)) for g in group(root, "runs") for c in g]
    assert sorted((round(value_at(xs, x), 2), round(value_at(ys, y), 2)) for x, y in drawn) == \
        sorted((r, s) for _, r, s in runs)
    titles = [t.text for t in root.iter(f"{SVG}title")][1:]
    assert titles == ["s08: retention 50.0%, saving +30.0%", "none: retention 100.0%, saving +0.0%"]


def test_a_tokens_chart_turns_logarithmic_where_the_baseline_dwarfs_the_policy_and_marks_its_events():
    raw = [100 * 2 ** i for i in range(12)]
    root = parsed(charts.tokens_chart("t × s08", raw, [{"label": "s08", "tokens": [100] * 12,
                                                        "events": {"summary": [3, 7], "reactive": []},
                                                        "levels": {"window": 200_000.0}}]))
    labels = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "tick" and t.get("text-anchor") == "end"]
    assert labels == ["100", "1,000", "10,000", "100,000"]  # powers of ten, thousands separated
    assert legend(root) == ["window 200,000 (s08)", "s08", "raw (no compaction)", "summary compaction"]
    [summary] = group(root, "events summary")
    assert len(summary) == 2 and not group(root, "events reactive")
    [line] = group(root, "raw")
    assert len((line.get("points") or "").split()) == 12


def test_the_savings_boxes_are_the_quartiles_of_each_policys_savings():
    values = [-0.4, 0.1, 0.2, 0.25, 0.3, 0.9]
    root = parsed(charts.savings_chart({"s08": values, "none": [0.0, 0.0]}, {"s08": 0.2, "none": 0.0},
                                       charts.colours(["s08", "none"])))
    xs = axis(root, "x")
    box = group(root, "box")[0]
    rect = next(e for e in box if e.tag == f"{SVG}rect")
    left, right = float(rect.get("x") or 0), float(rect.get("x") or 0) + float(rect.get("width") or 0)
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    assert (round(value_at(xs, left), 3), round(value_at(xs, right), 3)) == (round(q1, 3), round(q3, 3))
    fliers = [e for e in box if e.tag == f"{SVG}circle"]
    assert [round(value_at(xs, float(c.get("cx") or 0)), 2) for c in fliers] == [-0.4, 0.9]  # beyond 1.5 × the box
    assert [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "tick" and t.get("text-anchor") == "end"] \
        == ["s08", "none"]


def test_the_tune_chart_numbers_the_front_as_the_table_does_and_marks_the_base():
    root = parsed(charts.tune_chart([(0.1, 0.2, True), (0.3, 0.1, True), (0.2, 0.0, False)], [(0.1, 0.2), (0.3, 0.1)],
                                    (0.0, 0.0), "recall", "cost saving", "tune of s08"))
    assert [n.text for n in group(root, "note")] == ["1", "2"]
    assert legend(root) == ["trial", "trial with a violation or overflow", "Pareto front", "base policy"]
    assert len(group(root, "front")) == 1 and len(group(root, "base")) == 1


def test_the_tune_chart_draws_the_floor_where_it_stands_and_rings_the_point_to_use():
    """tune's chart showed every trial and not the floor its recommendation held them to, nor which
    point it named: the floor of the measure on an axis is a line at its value, the other's named
    in the legend, and the point named is ringed, "if you must" where none passes."""
    root = parsed(charts.tune_chart([(0.9, 0.2, True), (0.97, 0.1, True)], [(0.9, 0.2), (0.97, 0.1)], (0.99, 0.0),
                                    "recall", "cost saving", "tune of s08",
                                    floors=(("the recall floor at 95.0% (retention's, 95.0%, is not drawn)", 0.95),
                                            None), chosen=(0.97, 0.1, "to use if you must compact")))
    assert legend(root)[0] == "the recall floor at 95.0% (retention's, 95.0%, is not drawn)"
    assert legend(root)[-1] == "to use if you must compact"
    xs = axis(root, "x")
    (line,) = group(root, "level")[1:]  # (the first: the break-even of cost)
    assert round(value_at(xs, float(line.get("x1") or 0)), 3) == 0.95
    ring = [c for c in root.iter(f"{SVG}circle") if c.get("fill") == "none" and c.get("stroke") == "seagreen"]
    assert len(ring) == 2 and round(value_at(xs, float(ring[0].get("cx") or 0)), 3) == 0.97  # (the point, the legend's)


def test_hostile_names_are_text_in_a_chart():
    name = "<script>alert(1)</script>\x1b[31m $x^2$ &amp;"
    svg = charts.pareto_chart([(name, 0.5, 0.5)], [(name, 0.5, 0.5)], charts.colours([name]), "recall")
    root = parsed(svg)  # well-formed: the markup is escaped
    assert "<script" not in svg and "\x1b" not in svg
    assert legend(root) == ["<script>alert(1)</script>\\x1b[31m $x^2$ &amp;"]


@pytest.mark.parametrize("fmt,v,step,shown", [(charts.percent, 0.5, 0.1, "50%"), (charts.percent, 0.995, 0.005, "99.5%"),
                                              (charts.percent, -1.5, 0.5, "\u2212150%"),
                                              (charts.number, 12500, 2500, "12,500"), (charts.number, 7.5, 2.5, "7.5"),
                                              (charts.number, 0.5, 0.1, "0.5"), (charts.number, 0.0125, 0.0025, "0.0125"),
                                              (charts.percent, 0.125, 0.025, "12.5%")])
def test_tick_labels(fmt, v, step, shown):
    assert fmt(v, step) == shown


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30), st.booleans())
@example([1000000.0, 999999.9999999999], False)  # (a spread no tick's label tells apart: one value)
@example([-1e6, -999999.9999999, 0.5], False)
def test_ticks_are_inside_the_range_few_and_distinctly_labelled(values, log):
    if log:
        values = [abs(v) + 1 for v in values]
    scale = charts.Scale(values, (0.0, 500.0), log, charts.percent if not log else charts.number)
    ticks = scale.ticks()
    assert 1 <= len(ticks) <= 12
    assert all(-1e-6 <= scale(v) <= 500 + 1e-6 for v, _ in ticks)
    assert len({label for _, label in ticks}) == len(ticks)
    assert all(-1e-6 <= scale(v) <= 500 + 1e-6 for v in values)  # every value inside the plot
    assert re.fullmatch(r"[\u2212\d.,%]+", ticks[0][1]) or "e" in ticks[0][1]


def test_quantiles_match_the_standard_library():
    values = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    assert [round(charts.quantile(values, q), 9) for q in (0.25, 0.5, 0.75)] == \
        [round(q, 9) for q in statistics.quantiles(values, n=4, method="inclusive")]
