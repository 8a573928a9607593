"""What a transcript may print, and where (issue 15 §5): control characters are shown, never
obeyed; CSV cells are never formulas; Markdown tables, JUnit XML and the SVG charts stay well formed; a `$` in a
name is text in a chart, and a chart that fails never costs the runs."""

from __future__ import annotations

from xml.etree import ElementTree as ET

import orjson
import pytest

from helpers import SAMPLES, asst, results, tr, tu, user, write_jsonl

ESC = "\x1b"
EVIL_ID = "id\x1b[2J\x1b]8;;http://evil.example\x07click\x1b]8;;\x07|x\nnext"
EVIL_TOOL = "read\x1b[31m\u202e|file"


@pytest.fixture
def hostile(tmp_path):
    msgs = [user("go"), asst(tu(EVIL_ID, EVIL_TOOL, path="a.py")), results(tr(EVIL_ID, "x" * 50)),
            # an orphan result the policy did not make: a recorded violation with the hostile id
            results(tr("orphan\x1b[1m", "y")), asst("done")]
    path = write_jsonl(tmp_path / "t\x1b[1m$x$.jsonl", msgs)
    return path


def assert_inert(text: str) -> None:
    assert ESC not in text and "\x07" not in text and "\u202e" not in text, repr(text)


@pytest.mark.parametrize("fmt", ["table", "md"])
def test_inspect_shows_escapes_instead_of_obeying_them(cli, hostile, fmt):
    r = cli("inspect", hostile, "--format", fmt)
    assert r.exit_code == 0
    assert_inert(r.stdout)
    assert "\\x1b[31m" in r.stdout and "\\u202e" in r.stdout and "\\x1b[1m" in r.stdout
    if fmt == "md":
        for line in r.stdout.splitlines():
            if line.startswith("| read"):
                assert line.count(" | ") == 3  # the tool's `|` is escaped: still four cells


@pytest.mark.parametrize("fmt", ["table", "md", "csv"])
def test_replay_output_is_inert(cli, hostile, fmt):
    r = cli("replay", hostile, "-p", "s08", "--set", "snip.pair_safe=false", "--format", fmt, "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert_inert(r.stdout + r.stderr)


def test_a_policy_name_is_inert_in_tables_and_reports(cli, tmp_path):
    policy = tmp_path / "p.toml"
    policy.write_text('extends = "s08"\nname = "=HYPERLINK(\\"http://evil\\")\\u001b[2J|x"\n')
    out = tmp_path / "cmp"
    r = cli("compare", SAMPLES / "synth-small.jsonl", "-p", policy, "--out", out)
    assert r.exit_code == 0, r.stderr
    assert_inert(r.stdout)
    for name in ("report.md", "report.html", "results.csv"):
        assert_inert((out / name).read_text())
    csv = (out / "results.csv").read_text().splitlines()[1]
    assert ',"\'=HYPERLINK(' in csv  # a spreadsheet shows it as text
    md_row = next(line for line in (out / "report.md").read_text().splitlines() if "HYPERLINK" in line)
    assert "\\|x" in md_row
    r = cli("compare", SAMPLES / "synth-small.jsonl", "-p", policy, "--format", "csv", "--dry-run", "-q")
    assert ',"\'=HYPERLINK(' in r.stdout
    r = cli("policies", "show", policy)
    assert_inert(r.stdout)


def test_a_recorded_model_name_is_inert_in_the_compare_reports(cli, tmp_path):
    msgs = [user("go"), {"role": "assistant", "model": "claude\x1b[2J|evil", "content": "hi"}, user("more"),
            {"role": "assistant", "model": "claude\x1b[2J|evil", "content": "done"}]
    t = write_jsonl(tmp_path / "m.jsonl", msgs)
    out = tmp_path / "cmp"
    r = cli("compare", t, "-p", "none", "--out", out)
    assert r.exit_code == 0, r.stderr
    assert_inert(r.stderr)
    for name in ("report.md", "report.html"):
        text = (out / name).read_text()
        assert_inert(text) and "claude\\x1b[2J" in text


def test_junit_xml_is_well_formed_with_a_control_character_in_a_file_name(cli, tmp_path):
    t = tmp_path / "odd\x01\x1b.jsonl"
    t.write_bytes((SAMPLES / "synth-small.jsonl").read_bytes())
    baseline, junit = tmp_path / "b.json", tmp_path / "j.xml"
    assert cli("check", t, "--baseline", baseline, "--update-baseline", "-q").exit_code == 0
    r = cli("check", t, "--baseline", baseline, "--junit", junit)
    assert r.exit_code == 0
    case = ET.fromstring(junit.read_bytes()).find(".//testcase")
    assert case.get("name") == "odd\\x01\\x1b.jsonl"
    summary = tmp_path / "step.md"
    r = cli("check", t, "--baseline", baseline, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert_inert(summary.read_text()) and "\x01" not in summary.read_text()


def test_dollars_in_names_are_text_to_the_charts(cli, tmp_path):
    t = tmp_path / "cost $5 and $x^2$ $.jsonl"
    t.write_bytes((SAMPLES / "synth-small.jsonl").read_bytes())
    out = tmp_path / "cmp"
    r = cli("compare", t, "-p", "none", "-p", "s08", "--out", out, "-q")
    assert r.exit_code == 0, r.stderr
    assert "could not be drawn" not in (out / "report.md").read_text()
    assert (out / "charts" / "pareto.svg").stat().st_size > 1000
    r = cli("replay", t, "--chart", "--out", tmp_path / "one", "-q")
    assert r.exit_code == 0 and r.stderr == "" and (tmp_path / "one" / "chart.svg").exists()


def test_a_chart_that_fails_never_costs_the_runs(cli, tmp_path, monkeypatch):
    import compactlab.reports.charts as charts

    def broken(*args, **kwargs):
        raise ValueError("no fonts today")

    monkeypatch.setattr(charts, "tokens_chart", broken)
    out = tmp_path / "cmp"
    r = cli("compare", SAMPLES / "synth-small.jsonl", "-p", "none", "-p", "s08", "--out", out, "-q")
    assert r.exit_code == 0
    assert len((out / "results.csv").read_text().splitlines()) == 3
    md = (out / "report.md").read_text()
    assert "Charts could not be drawn: tokens per call: synth-small.jsonl: ValueError: no fonts today" in md
    assert "charts/pareto.svg" in md  # the charts that could be drawn are there
    r = cli("replay", SAMPLES / "synth-small.jsonl", "--chart", "--out", tmp_path / "one", "-q")
    assert r.exit_code == 0 and "chart.svg not drawn: ValueError: no fonts today" in r.stderr
    assert orjson.loads((tmp_path / "one" / "summary.json").read_bytes())["summary"]["calls"] > 0


HTML = "<script>alert(1)</script><img src=x onerror=alert(2)>"
C1 = "\u009b2J\u202egnp.exe"


def test_markdown_outputs_show_html_as_text(cli, tmp_path):
    """(#25 §6) report.md, replay's and inspect's Markdown and the GitHub step summary (rendered as
    HTML) never carry a tag from a transcript or a policy name."""
    policy = tmp_path / "p.toml"
    policy.write_text(f'extends = "s08"\nname = "{HTML.replace(chr(34), "")}"\n')
    t = tmp_path / f"{HTML.replace('/', '_')}.jsonl"
    t.write_bytes((SAMPLES / "synth-small.jsonl").read_bytes())
    out = tmp_path / "cmp"
    assert cli("compare", t, "-p", "none", "-p", policy, "--out", out, "-q").exit_code == 0
    texts = [(out / "report.md").read_text()]
    texts.append(cli("replay", t, "-p", policy, "--format", "md", "--dry-run", "-q").stdout)
    texts.append(cli("inspect", t, "--format", "md").stdout)
    baseline, summary = tmp_path / "b.json", tmp_path / "step.md"
    assert cli("check", t, "-p", policy, "--baseline", baseline, "--update-baseline", "-q").exit_code == 0
    cli("check", t, "-p", policy, "--baseline", baseline, env={"GITHUB_STEP_SUMMARY": str(summary)})
    texts.append(summary.read_text())
    for text in texts:
        assert "<script" not in text and "<img" not in text, text[:400]
        assert "&lt;script&gt;" in text or "&lt;img" in text


@pytest.mark.parametrize("command", [["replay", "--format", "json", "--dry-run"], ["inspect", "--format", "json"],
                                     ["compare", "-p", "none", "--format", "json", "--dry-run"],
                                     ["check", "--format", "json"]])
def test_json_output_escapes_c1_controls_and_bidi_overrides(cli, tmp_path, command):
    t = tmp_path / f"name{C1}.jsonl"
    t.write_bytes((SAMPLES / "synth-small.jsonl").read_bytes())
    extra = []
    if command[0] == "check":
        baseline = tmp_path / "b.json"
        assert cli("check", t, "--baseline", baseline, "--update-baseline", "-q").exit_code == 0
        extra = ["--baseline", baseline]
    r = cli(command[0], t, *command[1:], *extra, "-q")
    assert r.exit_code == 0, r.output
    assert "\u009b" not in r.stdout and "\u202e" not in r.stdout
    assert "\\u009b" in r.stdout and "\\u202e" in r.stdout
    assert orjson.loads(r.stdout)  # still JSON, the name intact once parsed
    assert C1 in r.stdout.encode().decode("unicode_escape", errors="ignore") or C1 in str(orjson.loads(r.stdout))
