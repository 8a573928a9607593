from __future__ import annotations

import json
import shutil
from xml.etree import ElementTree as ET

import pytest

from compactlab.corpus.check import compare_record, parse_tolerances
from compactlab.errors import UsageError
from helpers import SAMPLES, write_jsonl, tool_session

BASE = {"violations_introduced": 0, "overflows": 0, "tokens_total": 1000, "cost_usd": 1.0, "reduction": 0.5,
        "retention": 0.8, "recall": 0.9, "recoverable": 0.0}


def summary(**changes) -> dict:
    return {"policy": "s08", "fingerprint": "new", **BASE, **changes}


def record(**changes) -> dict:
    return {"transcript": "t", "policy": "s08", "content_hash": "h", "fingerprint": "old", "metrics": {**BASE, **changes}}


TOL = parse_tolerances([])


def test_same_metrics_pass_and_show_the_fingerprint_change():
    r = compare_record("t", summary(), "h", record(), TOL)
    assert (r.status, r.ok, r.failures) == ("pass", True, [])
    assert r.fingerprint_changed and r.old_fingerprint == "old"


@pytest.mark.parametrize("metric,value,fails", [
    ("tokens_total", 1010, False),   # +1.0%: exactly at the tolerance passes
    ("tokens_total", 1011, True),    # +1.1%
    ("cost_usd", 1.0100001, True),
    ("cost_usd", 1.0099, False),
    ("reduction", 0.49, False),      # -0.01 absolute: at the tolerance
    ("reduction", 0.4899, True),
    ("retention", 0.7899, True),
    ("retention", 0.79, False),
])
def test_tolerance_edges(metric, value, fails):
    r = compare_record("t", summary(**{metric: value}), "h", record(), TOL)
    assert r.ok is not fails
    if fails:
        assert [c.metric for c in r.failures] == [metric]


def test_improvements_pass_and_are_shown():
    r = compare_record("t", summary(tokens_total=500, cost_usd=0.5, reduction=0.7, retention=0.9), "h", record(), TOL)
    assert r.ok and {c.metric for c in r.improvements} == {"tokens_total", "cost_usd", "reduction", "retention"}


def test_new_overflow_fails():
    r = compare_record("t", summary(overflows=1), "h", record(), TOL)
    assert not r.ok and [c.metric for c in r.failures] == ["overflows"]
    assert compare_record("t", summary(overflows=1), "h", record(overflows=1), TOL).ok


def test_introduced_violations_fail_unless_the_baseline_accepted_them():
    assert not compare_record("t", summary(violations_introduced=1), "h", record(), TOL).ok
    accepted = compare_record("t", summary(violations_introduced=1), "h", record(violations_introduced=1), TOL)
    assert accepted.ok and "as in the baseline" in accepted.reasons[0]
    assert not compare_record("t", summary(violations_introduced=2), "h", record(violations_introduced=1), TOL).ok


def test_stale_and_missing_records():
    stale = compare_record("t", summary(tokens_total=5000), "other-hash", record(), TOL)
    assert stale.status == "stale" and not stale.ok and stale.failures == []  # never compared
    assert compare_record("t", summary(), "other-hash", record(), TOL, allow_stale=True).ok
    missing = compare_record("t", summary(), "h", None, TOL)
    assert missing.status == "missing" and not missing.ok


def test_per_metric_tolerances():
    tol = parse_tolerances(["0.05", "cost_usd=0.2"])
    assert tol == {"tokens_total": 0.05, "cost_usd": 0.2, "reduction": 0.05, "retention": 0.05, "recall": 0.05,
                   "recoverable": 0.05}
    assert compare_record("t", summary(cost_usd=1.15), "h", record(), tol).ok
    for bad in ("x", "speed=0.1", "-1"):
        with pytest.raises(UsageError):
            parse_tolerances([bad])


# -- the command ------------------------------------------------------------------------------

@pytest.fixture
def workdir(tmp_path):
    for name in ("synth-small.jsonl", "huge-batch.jsonl", "manual-compact.jsonl"):
        shutil.copy(SAMPLES / name, tmp_path / name)
    return tmp_path


def test_baseline_roundtrip_and_a_regression(cli, workdir, monkeypatch):
    files = sorted(str(p) for p in workdir.glob("*.jsonl"))
    bl = workdir / "reports" / "baseline.json"
    r = cli("check", *files, "--baseline", bl)
    assert r.exit_code == 2 and "no baseline file" in r.stderr and "--update-baseline" in r.stderr
    # (not "compactlab check ... --baseline B --update-baseline": a placeholder to fill in)
    assert "hint: run the same command with --update-baseline to write it from these sessions" in r.stderr
    assert "..." not in r.stderr
    assert cli("check", *files, "--baseline", bl, "--update-baseline").exit_code == 0
    doc = json.loads(bl.read_text())
    assert doc["schema"] == 1 and len(doc["records"]) == 3
    assert doc["records"][0]["transcript"] == "../huge-batch.jsonl"
    ok = cli("check", *files, "--baseline", bl, "--format", "json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["passed"]
    summary_file = workdir / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    junit = workdir / "junit.xml"
    bad = cli("check", *files, "--baseline", bl, "--set", "summary.trigger=400000", "--junit", junit)
    assert bad.exit_code == 1
    assert "worse: tokens_total" in bad.stdout and "fingerprint" in bad.stdout
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1"
    failing = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failing] == ["../huge-batch.jsonl"]
    assert "tokens_total" in failing[0].find("failure").get("message")
    step = summary_file.read_text()
    assert "### compactlab check: 2 passed, 1 failed" in step and "❌ fail" in step


def test_stale_transcript(cli, workdir):
    f = workdir / "synth-small.jsonl"
    bl = workdir / "b.json"
    cli("check", f, "--baseline", bl, "--update-baseline")
    f.write_bytes(f.read_bytes() + b'{"role": "user", "content": "one more"}\n')
    r = cli("check", f, "--baseline", bl)
    assert r.exit_code == 1 and "STALE" in r.stdout
    assert cli("check", f, "--baseline", bl, "--allow-stale").exit_code == 0


def test_update_merges_records(cli, workdir):
    bl = workdir / "b.json"
    cli("check", workdir / "synth-small.jsonl", "--baseline", bl, "--update-baseline")
    cli("check", workdir / "huge-batch.jsonl", "-p", "s06", "--baseline", bl, "--update-baseline")
    keys = [(r["transcript"], r["policy"]) for r in json.loads(bl.read_text())["records"]]
    assert keys == [("huge-batch.jsonl", "s06"), ("synth-small.jsonl", "s08")]
    r = cli("check", workdir / "huge-batch.jsonl", "--baseline", bl)  # s08 for it is not recorded
    assert r.exit_code == 1 and "MISSING" in r.stdout


@pytest.mark.parametrize("content,message", [
    (b"{not json", "malformed baseline: not JSON"),
    (b"[]", "malformed baseline: expected"),
    (b'{"schema": 99, "records": []}', "malformed baseline: expected"),
    (b'{"schema": 1, "records": [{"transcript": "x"}]}', "record 0 needs"),
    # every compared metric, recall too (no baseline without it was ever released: none is read as one)
    (b'{"schema": 1, "records": [{"transcript": "x", "policy": "s08", "metrics": {"tokens_total": 1, "cost_usd": 1, '
     b'"reduction": 0, "retention": 1}}]}', "numeric metrics tokens_total, cost_usd, reduction, retention, recall"),
])
def test_malformed_baseline(cli, workdir, content, message):
    bl = workdir / "b.json"
    bl.write_bytes(content)
    r = cli("check", workdir / "synth-small.jsonl", "--baseline", bl)
    assert r.exit_code == 2 and message in r.stderr and r.stderr.startswith("error: ")


def test_introduced_violation_without_baseline_fails(cli, tmp_path):
    # the naive snip splits pairs: introduced violations on a fresh record fail even after an update
    t = write_jsonl(tmp_path / "t.jsonl", tool_session(60))
    bl = tmp_path / "b.json"
    cli("check", t, "-p", "s08", "--baseline", bl, "--update-baseline")
    r = cli("check", t, "-p", "s08", "--set", "snip.pair_safe=false", "--baseline", bl)
    assert r.exit_code == 1 and "introduced violation" in r.stdout


def test_the_committed_project_baseline_passes(cli):
    from helpers import ROOT

    files = sorted(str(p) for p in SAMPLES.glob("*.jsonl"))
    r = cli("check", *files, "-p", "s08", "-p", "s06", "--baseline", ROOT / "reports" / "baseline.json")
    assert r.exit_code == 0, r.stdout


@pytest.mark.parametrize("drop, fails", [(0.008, False), (0.012, True)])
def test_the_recall_tolerance_is_absolute(cli, tmp_path, drop, fails):
    """(#25 §8) From a baseline recall of 0.5 a drop of 0.008 is within the absolute 0.01 (a relative
    tolerance would allow only 0.005); 0.012 is not."""
    import json

    t = tmp_path / "t.jsonl"
    t.write_bytes((SAMPLES / "synth-small.jsonl").read_bytes())
    baseline = tmp_path / "b.json"
    assert cli("check", t, "-p", "s08", "--baseline", baseline, "--update-baseline", "-q").exit_code == 0
    doc = json.loads(baseline.read_text())
    now = doc["records"][0]["metrics"]["recall"]
    assert 0 < now < 1
    doc["records"][0]["metrics"]["recall"] = now + drop
    baseline.write_text(json.dumps(doc))
    r = cli("check", t, "-p", "s08", "--baseline", baseline, "--format", "json")
    result = json.loads(r.stdout)["results"][0]
    assert (r.exit_code == 1) is fails, r.stdout
    assert any("recall" in str(f) for f in result.get("failures", [])) is fails


def test_edits_that_do_nothing_are_said(cli, tmp_path):
    """(#31 §5) A --set key whose layer is off is named in a warning; check says when a changed
    policy behaved identically; a renamed policy file is matched by its fingerprint, not MISSING."""
    from helpers import SAMPLES

    r = cli("replay", SAMPLES / "synth-small.jsonl", "-p", "claude-code", "--set", "micro.keep_recent=2", "--dry-run")
    assert r.exit_code == 0 and "micro.keep_recent changes nothing: the micro layer is off in claude-code" in r.stderr
    r = cli("compare", SAMPLES / "synth-small.jsonl", "-p", "claude-code", "--set", "micro.keep_recent=2",
            "--dry-run", "--format", "csv")
    assert "micro.keep_recent changes nothing" in r.stderr
    # (one warning whatever the job: check and next-action said nothing of it)
    said = ("warning: micro.keep_recent changes nothing: the micro layer is off in claude-code (--set "
            "micro.enabled=true turns it on)")
    edge = tmp_path / "edge.json"
    for job, extra in (("replay", ["--dry-run"]), ("compare", ["-p", "s08", "--dry-run"]),
                       ("next-action", ["--dry-run"]), ("check", ["-p", "s08", "--baseline", edge, "--update-baseline"])):
        r = cli(job, SAMPLES / "synth-small.jsonl", "-p", "claude-code", "--set", "micro.keep_recent=2", *extra)
        assert r.exit_code == 0, (job, r.output)
        assert r.stderr.splitlines().count(said) == 1, (job, r.stderr)  # (once; s08, whose micro is on, says nothing)
    baseline = tmp_path / "b.json"
    path = SAMPLES / "huge-batch.jsonl"
    assert cli("check", path, "-p", "s08", "--baseline", baseline, "--update-baseline").exit_code == 0
    r = cli("check", path, "-p", "s08", "--set", "summary.max_failures=5", "--baseline", baseline)
    assert r.exit_code == 0 and "policy changed, results identical" in r.stdout
    renamed = tmp_path / "my-s08.toml"
    renamed.write_text('extends = "s08"\nname = "my-s08"\n')
    r = cli("check", path, "-p", renamed, "--baseline", baseline)
    assert r.exit_code == 0 and "matched by fingerprint to the baseline's s08" in r.stdout, r.stdout


def test_check_shows_paths_from_where_it_was_run_not_from_the_baseline(cli, tmp_path, monkeypatch):
    """(#31 §6) The baseline keys its records relative to its own folder (../../…); the table shows
    the transcripts as the user named them, relative to the current folder."""
    from helpers import SAMPLES

    folder = tmp_path / "ci" / "deep"
    folder.mkdir(parents=True)
    (tmp_path / "t.jsonl").write_bytes((SAMPLES / "huge-batch.jsonl").read_bytes())
    monkeypatch.chdir(tmp_path)
    baseline = folder / "b.json"
    assert cli("check", "t.jsonl", "-p", "s08", "--baseline", baseline, "--update-baseline").exit_code == 0
    r = cli("check", "t.jsonl", "-p", "s08", "--baseline", baseline)
    assert r.exit_code == 0 and "\nt.jsonl " in r.stdout and "../" not in r.stdout


def test_check_names_a_transcript_by_its_file_where_none_shares_it_else_by_its_path(cli, tmp_path, monkeypatch):
    """At 80 columns check folded every path mid-word ("sample_transcripts/huge-batc" / "h.jsonl").
    Its table names a transcript by its file's name where no two share one, else by the path as
    the user named it (as compare's and next-action's tables do), and never folds it."""
    from helpers import SAMPLES

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "t.jsonl").write_bytes((SAMPLES / "huge-batch.jsonl").read_bytes())
    (tmp_path / "b" / "u.jsonl").write_bytes((SAMPLES / "synth-small.jsonl").read_bytes())
    monkeypatch.chdir(tmp_path)
    baseline = tmp_path / "b.json"

    def rows(*files: str) -> list[str]:
        assert cli("check", *files, "-p", "s08", "--baseline", baseline, "--update-baseline").exit_code == 0
        r = cli("check", *files, "-p", "s08", "--baseline", baseline)
        assert r.exit_code == 0, r.output
        return [line.split()[0] for line in r.stdout.splitlines()[3:] if line.strip()]

    assert rows("a/t.jsonl", "b/u.jsonl") == ["t.jsonl", "u.jsonl"]
    assert rows("a/t.jsonl", "b/t.jsonl") == ["a/t.jsonl", "b/t.jsonl"]


def test_check_warns_of_a_policy_dearer_than_no_compaction_where_it_fits(cli, tmp_path):
    """(#55 §3) check gates on the baseline, and says by the recommenders' one rule when a policy
    costs more than no compaction where no compaction fits (s06 on huge-batch: $0.2942 against
    $0.2565); not of one that saves (s06 on synth-long, where no compaction overflows)."""
    from compactlab.corpus.guard import dearer_policies

    r = cli("check", SAMPLES / "huge-batch.jsonl", "-p", "s06", "--baseline", tmp_path / "b.json", "--update-baseline")
    assert r.exit_code == 0 and "warning: s06 costs more than no compaction on the transcripts where no compaction " \
        "fits the window" in r.stderr, r.stderr
    r = cli("check", SAMPLES / "synth-long.jsonl", "-p", "s06", "--baseline", tmp_path / "c.json", "--update-baseline")
    assert r.exit_code == 0 and "costs more than no compaction" not in r.stderr, r.stderr
    # where no compaction overflows, its cost there is no bar
    runs = [("a", "p", {"cost_usd": 12.0, "raw_cost_usd": 10.0, "raw_overflows": 3}),
            ("b", "p", {"cost_usd": 5.0, "raw_cost_usd": 10.0, "raw_overflows": 0})]
    assert dearer_policies(runs) == []
    assert dearer_policies([*runs, ("c", "p", {"cost_usd": 16.0, "raw_cost_usd": 10.0, "raw_overflows": 0})]) == ["p"]


@pytest.mark.parametrize("columns", [60, 80, 100])
def test_checks_details_read_as_words_on_a_terminal_the_names_cut_first(monkeypatch, columns):
    """At 80 columns two long trajectory names left the details 8 characters wide: each change
    folded into a tower of word pieces ("tokens_t" / "otal"). The details now keep room for a few
    words a line, the names cut in the middle first; where even that does not fit, each result is
    lines, a value's continuation lines indented under it."""
    import io
    import re

    from compactlab.corpus.check import Change, CheckResult
    from compactlab.reports.check_report import DETAILS_LEAST, write_table

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    names = ["mini-swe-agent__deepseek-chat__django__django-11910.traj.json",
             "swe-agent__function_calling_replace_from_source__marshmallow-code__marshmallow-1867.traj"]
    results = [CheckResult(n, "s08", "fail", ok=False, failures=[Change("recall", 0.8369, 0.6781)],
                           improvements=[Change("tokens_total", 992089, 342756), Change("cost_usd", 0.1881, 0.0574)],
                           fingerprint="a4481317aabb", old_fingerprint="8b1d4323e8e0", shown=n) for n in names]
    monkeypatch.setenv("COLUMNS", str(columns))
    out = Terminal()
    write_table(results, out)
    lines = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()).splitlines()
    text = "\n".join(lines)
    assert max(map(len, lines)) <= columns, text
    for word in ("tokens_total", "cost_usd", "recall", "0.8369", "992,089", "a4481317aabb"):
        assert word in text, (word, text)  # (never a word folded)
    if "┃" in text:  # a table: its details column as wide as the least, or wider
        detail_cells = [line.split("│")[-2] for line in lines if line.count("│") == 5]
        assert detail_cells and min(map(len, detail_cells)) >= DETAILS_LEAST + 2, text
        assert columns >= 80
    else:  # each result as lines, a value's continuation indented under it
        body = lines[1:]
        assert all(line.startswith(("  ", "mini", "swe", "-", "n", "_")) for line in body), text
        assert any(line.startswith("    ") for line in body), text
