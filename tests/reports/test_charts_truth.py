"""Charts that tell the truth at a glance (#31 §3): one colour per policy name in every report,
shares as percentages, policies that share a point named together, a front only where one is."""

from __future__ import annotations

from compactlab.reports import charts


def test_a_policy_has_the_same_colour_in_every_report():
    a = charts.colours(["none", "s08", "my-policy.toml", "claude-code"])
    b = charts.colours(["claude-code", "my-policy.toml", "none"])
    assert a["none"] == b["none"] == "#7f7f7f" and a["claude-code"] == b["claude-code"]
    assert a["my-policy.toml"] == b["my-policy.toml"]  # by its name, not its place in the list
    many = charts.colours([f"p{i}" for i in range(10)])
    assert len(set(many.values())) == 10  # names that would share a colour in one report get the next free one


def test_the_pareto_chart_draws_shared_points_once_and_no_front_of_one_point(monkeypatch):
    drawn: dict[str, list] = {"labels": [], "lines": []}
    import matplotlib.axes

    real_scatter, real_plot = matplotlib.axes.Axes.scatter, matplotlib.axes.Axes.plot

    def scatter(self, *a, **k):
        if k.get("label"):
            drawn["labels"].append(k["label"])
        return real_scatter(self, *a, **k)

    def plot(self, *a, **k):
        drawn["lines"].append(k.get("label"))
        return real_plot(self, *a, **k)

    monkeypatch.setattr(matplotlib.axes.Axes, "scatter", scatter)
    monkeypatch.setattr(matplotlib.axes.Axes, "plot", plot)
    overall = [("none", 1.0, 0.0), ("a", 1.0, 0.0), ("b", 1.0, 0.0)]  # three that never acted: one point
    charts.pareto_chart([], overall, charts.colours(["none", "a", "b"]), "recall")
    assert drawn["labels"] == ["none = a = b"] and "Pareto front (all transcripts)" not in drawn["lines"]
    drawn["labels"].clear()
    charts.pareto_chart([], [("none", 1.0, 0.0), ("s08", 0.5, 0.9)], charts.colours(["none", "s08"]), "recall")
    assert drawn["labels"] == ["none", "s08"] and "Pareto front (all transcripts)" in drawn["lines"]
