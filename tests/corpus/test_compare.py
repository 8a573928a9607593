from __future__ import annotations

import json

import orjson

from compactlab.engine.records import NUMERIC_SUMMARY_KEYS
from helpers import SAMPLES, read_csv

T1, T2 = SAMPLES / "synth-small.jsonl", SAMPLES / "manual-compact.jsonl"
# (none does not use summary.trigger: it runs once; s08 and s20 count it in chars)
GRID = ["-p", "none", "-p", "s20", "-p", "s08", "--sweep", "summary.trigger=20000,50000,100000"]


def test_compare_writes_every_row_and_report(cli, tmp_path):
    out = tmp_path / "cmp"
    r = cli("compare", T1, T2, *GRID, "--out", out, "--jobs", "2")
    assert r.exit_code == 0, r.output
    rows = read_csv(out / "results.csv")
    assert len(rows) == 14  # 2 transcripts x (none once + 2 policies x 3 values)
    assert list(rows[0])[:3] == ["transcript", "policy", "summary.trigger"]
    for key in NUMERIC_SUMMARY_KEYS:
        assert key in rows[0], key
    assert {r["policy"] for r in rows} == {"none", "s20", "s08"}
    assert {r["summary.trigger"] for r in rows if r["policy"] != "none"} == {"20000", "50000", "100000"}
    assert all(r["summary.trigger"] == "" for r in rows if r["policy"] == "none")
    assert "--sweep summary.trigger does not apply to none (its summary layer is off): run once" in r.stderr
    rows = json.loads((out / "results.json").read_text())["runs"]
    assert len(rows) == 14 and rows[0]["cost_saving"] >= rows[-1]["cost_saving"]  # sorted by cost saving
    html = (out / "report.html").read_text()
    assert html.count("<svg xmlns") == 4  # two transcripts' token charts, the Pareto chart and the savings per transcript
    # opens offline: nothing is loaded from anywhere (XML namespace URIs are names, not fetches)
    import re

    for banned in ("<script", "<link", "@import", "<img", "<iframe"):
        assert banned not in html
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:)?//""", html)
    assert not re.search(r"url\(\s*['\"]?https?:", html)
    from xml.etree import ElementTree

    pareto = (out / "charts" / "pareto.svg").read_bytes()
    assert pareto.startswith(b"<?xml") and ElementTree.fromstring(pareto).tag == "{http://www.w3.org/2000/svg}svg"
    assert (out / "report.md").read_text().count("charts/") == 4


def test_jobs_1_and_2_give_identical_numbers(cli, tmp_path):
    a = cli("compare", T1, T2, *GRID, "--dry-run", "--jobs", "1", "--format", "json")
    b = cli("compare", T1, T2, *GRID, "--dry-run", "--jobs", "2", "--format", "json")
    assert json.loads(a.stdout)["runs"] == json.loads(b.stdout)["runs"]  # no timing in them
    assert json.loads(a.stdout)["verdict"] == json.loads(b.stdout)["verdict"]
    assert len(json.loads(a.stdout)["runs"]) == 14


def test_compare_matches_replay(cli):
    rows = json.loads(cli("compare", T1, "-p", "s08", "--dry-run", "--format", "json").stdout)["runs"]
    single = json.loads(cli("replay", T1, "-p", "s08", "--dry-run", "--format", "json").stdout)["runs"][0]["summary"]
    for key in ("tokens_total", "cost_usd", "retention", "summaries", "violations_introduced"):
        assert rows[0][key] == single[key], key


def test_compare_errors(cli, tmp_path):
    r = cli("compare", T1, "--sweep", "summary.trigger", "--dry-run")
    assert r.exit_code == 2 and "expected KEY=V1,V2" in r.stderr
    r = cli("compare", T1, "--sweep", "summary.nope=1,2", "--dry-run")
    assert r.exit_code == 2 and "summary.nope: unknown key" in r.stderr
    assert "with --sweep summary.nope=1: summary.nope: unknown key" in r.stderr
    r = cli("compare", T1, "-p", "s08", "--sweep", "summary.triger=1,2", "--dry-run")
    assert "hint: did you mean summary.trigger or summary.trigger_cap or summary.trigger_rule? (compactlab policies show s08 lists" in r.stderr
    # (a swept value is named as the --sweep it came from; a --set one as a --set)
    r = cli("compare", T1, "-p", "s08", "--sweep", "summary.trigger=30000,lots", "--dry-run")
    assert r.exit_code == 2 and "s08 with --sweep summary.trigger=lots: summary.trigger: Input should be" in r.stderr
    r = cli("compare", T1, "-p", "s08", "--set", "summary.trigger=lots", "--sweep", "micro.keep_recent=1,2", "--dry-run")
    assert r.exit_code == 2 and "s08 with --set: summary.trigger: Input should be" in r.stderr
    r = cli("compare", T1, "--sort", "bogus", "--dry-run")
    assert r.exit_code == 2 and "--sort 'bogus'" in r.stderr


def test_unknown_price_model_warns(cli):
    r = cli("compare", T1, "-p", "none", "--price-model", "gpt-99", "--dry-run", "--format", "csv")
    assert r.exit_code == 0 and "no prices for model 'gpt-99'" in r.stderr


def test_replay_chart_is_opt_in(cli, tmp_path):
    cli("replay", T1, "--out", tmp_path / "a")
    assert not (tmp_path / "a" / "chart.svg").exists()
    cli("replay", T1, "--out", tmp_path / "b", "--chart")
    assert b"<svg xmlns" in (tmp_path / "b" / "chart.svg").read_bytes()


def test_a_sweep_says_its_units_and_refuses_to_mix_them(cli):
    r = cli("compare", T1, "-p", "s08", "-p", "s20", "--sweep", "summary.trigger=20000,50000", "--dry-run",
            "--format", "json")
    assert r.exit_code == 0, r.output
    labels = [e["label"] for e in json.loads(r.stdout)["verdict"]["entries"]]
    assert "s08 summary.trigger=20000 chars" in labels and "s20 summary.trigger=50000 chars" in labels
    table = cli("compare", T1, "-p", "s08", "--sweep", "summary.trigger=20000,50000", "--dry-run").stdout
    assert "trigger=20000 chars" in table
    mixed = cli("compare", T1, "-p", "s06", "-p", "s08", "--sweep", "summary.trigger=20000,50000", "--dry-run")
    assert mixed.exit_code == 2
    assert "--sweep summary.trigger: the policies count it in different units (s06 in tokens; s08 in chars)" in mixed.stderr
    assert "--set summary.unit=tokens" in mixed.stderr
    same = cli("compare", T1, "-p", "s06", "-p", "s08", "--set", "summary.unit=tokens", "--sweep",
               "summary.trigger=20000,50000", "--dry-run", "--format", "json")
    assert same.exit_code == 0 and "s08 summary.trigger=20000 tokens" in same.stdout


def test_report_html_shows_beside_each_transcript_chart_what_its_compactions_lost(cli, tmp_path):
    """(#27 §6) Under a transcript's chart: per policy, the events that lost most of what the agent
    later used, their call, layers and a few of the strings (escaped, no script)."""
    out = tmp_path / "cmp"
    r = cli("compare", SAMPLES / "synth-medium.jsonl", "-p", "s06", "-p", "claude-code", "--out", out, "-q")
    assert r.exit_code == 0, r.output
    html = (out / "report.html").read_text()
    table = html[html.index("<table class='losses'>"):]
    table = table[:table.index("</table>")]
    assert "used strings lost" in table and "<td class=l>s06</td>" in table and "manual" in table
    assert "<script" not in html
    # every table's head is aligned as its cells are: text to the left, figures to the right
    import re

    for t in re.findall(r"<table.*?</table>", html, flags=re.S):
        rows = re.findall(r"<tr[^>]*>(.*?)</tr>", t, flags=re.S)
        heads = re.findall(r"<th( class=l)?>", rows[0])
        for row in rows[1:]:
            cells = re.findall(r"<td( class=l)?>", row)
            assert [bool(c) for c in cells] == [bool(h) for h in heads], t[:200]


def test_report_htmls_wide_tables_scroll_in_their_own_box_and_never_break_a_figure_or_name(cli, tmp_path):
    """In Chromium at 1,100 pixels the runs' table of three Codex rollouts pushed the whole page
    sideways, each long transcript name broken at its hyphens into five lines, and the verdict's
    "claude-code" into two. The verdict's and the runs' tables now each scroll in a box of their
    own, the runs' cells are never broken, and the verdict's names are not (its figures may wrap
    at a space: all its columns stay in view)."""
    import re

    out = tmp_path / "cmp"
    r = cli("compare", SAMPLES / "synth-small.jsonl", SAMPLES / "manual-compact.jsonl", "-p", "s08", "-p",
            "claude-code", "--out", out, "-q", "--charts", "none")
    assert r.exit_code == 0, r.output
    html = (out / "report.html").read_text()
    css = html[html.index("<style>") + 7:html.index("</style>")]
    rules = {k.strip(): v for k, v in re.findall(r"([^{}]+)\{([^{}]*)\}", css)}
    assert "overflow-x:auto" in rules[".wide"]
    assert "white-space:nowrap" in rules[".wide td"] and "white-space:nowrap" in rules["table.verdict td.l"]
    boxed = re.findall(r"<div class=['\"]wide['\"]><table( class='verdict')?>", html)
    assert len(boxed) == 2 and boxed[0] == " class='verdict'", boxed  # (the verdict's, then the runs')
    assert html.count("<table") == 2  # (no other table left out of a box)


def _policies_of(cli, *args) -> tuple[list[str], str]:
    import json

    r = cli("compare", SAMPLES / "synth-small.jsonl", *args, "--dry-run", "--format", "json", "-q")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    return [run["policy"] for run in doc["runs"]], doc["verdict"]["reference"]


def test_one_reference_and_one_label_per_run(cli, tmp_path):
    """(#43 §3) A listed none with --set is the reference, not a second run named none; two
    different policies of one name are told apart; a listed none that compacts leaves the
    reference its own name."""
    policies, reference = _policies_of(cli, "-p", "none", "-p", "s08", "--set", "reactive.window_tokens=300000")
    assert sorted(policies) == ["none", "s08"] and reference == "none"
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('extends = "s08"\nname = "mine"\n[summary]\ntrigger = 20000\n')
    b.write_text('extends = "s08"\nname = "mine"\n[summary]\ntrigger = 50000\n')
    policies, reference = _policies_of(cli, "-p", a, "-p", b, "-p", a)
    assert len(policies) == 3 and len(set(policies)) == 3 and reference == "none"  # a once, b, and none
    assert all(p.startswith("mine@") for p in policies if p != "none")
    acting = tmp_path / "none.toml"
    acting.write_text('extends = "s08"\nname = "none"\n')
    policies, reference = _policies_of(cli, "-p", acting)
    assert sorted(policies) == ["none", "none (no compaction)"] and reference == "none (no compaction)"


def test_an_unknown_model_is_said_once_a_command_however_many_transcripts_record_it():
    """(A corpus of 200 trajectories, 100 of which record the model 'replay', said its warning 100
    times, --quiet or not.) Once a price table, which is one a command; a new command says it again."""
    from compactlab.engine.cost.prices import load_prices
    from compactlab.jobs.base import price_warning

    said: list[str] = []
    table = load_prices(cache=False)
    for _ in range(3):
        price_warning(table, table.lookup("replay"), lambda m, always: said.append(m))
    price_warning(table, table.lookup("gpt-99"), lambda m, always: said.append(m))
    assert [m.split(":")[1] for m in said] == [" no prices for model 'replay' and no provider known for it",
                                               " no prices for model 'gpt-99'"]
    again = load_prices(cache=False)
    price_warning(again, again.lookup("replay"), lambda m, always: said.append(m))
    assert len(said) == 3


def test_the_verdict_says_which_violations_the_s08_designs_manual_compaction_makes_and_how_to_avoid_them(cli):
    """compare of the samples refused s08, the default policy, for 11 violations and said no more;
    each is the tool result its manual compaction orphans by design (it summarises before the
    results are appended), which replay's terminal explains for one run. The verdict now says so,
    with the setting that avoids them, only where every violation of the policy is one of those."""
    samples = SAMPLES
    r = cli("compare", samples, "-p", "s08", "-p", "s06", "--dry-run", "--format", "json", "-q")
    assert r.exit_code == 0, r.output
    out = orjson.loads(r.stdout)
    s08 = sum(run["violations_introduced"] for run in out["runs"] if run["policy"] == "s08")
    assert s08 > 0
    assert (f"The violations (s08's {s08}) are each a tool result orphaned by the policy's manual compaction, which "
            "summarises before the tool results are appended, as the s08 design has it: --set "
            "manual.mode=after_results avoids them.") in out["verdict"]["recommendation"]
    after = orjson.loads(cli("compare", samples, "-p", "s08", "--set", "manual.mode=after_results", "--dry-run",
                             "--format", "json", "-q").stdout)
    assert not any(run["violations_introduced"] for run in after["runs"])
    assert "orphaned by the policy's manual compaction" not in after["verdict"]["recommendation"]
    # a policy whose violations are its own (a step that drops calls) is not said to be s08's design
    other = orjson.loads(cli("compare", samples / "synth-small.jsonl", "-p", "py:custom_steps:drops_calls",
                             "--dry-run", "--format", "json", "-q").stdout)
    assert sum(run["violations_introduced"] for run in other["runs"]) > 0
    assert "orphaned by the policy's manual compaction" not in other["verdict"]["recommendation"]


def test_a_compare_of_one_harnesss_sessions_compares_its_preset_too(cli, tmp_path):
    """Given no policy, a compare of sessions one harness recorded (Claude Code here) compares that
    harness's preset beside none, s06 and s08: what its user runs now, so the verdict can say to
    keep it; a converted copy of them is read as they are. Sessions of another format, or of several,
    and a compare given its policies, run what they ran."""
    from compactlab.jobs.compare import DEFAULT_POLICIES, default_policies
    from compactlab.synth import write
    from compactlab.transcripts import recorded_format

    folder = tmp_path / "sessions"
    folder.mkdir()
    for seed in (1, 2):
        write(folder / f"cc{seed}.jsonl", 40, seed=seed, form="claude-code")
    r = cli("compare", folder, "--dry-run", "--format", "json", "--jobs", "1")
    assert r.exit_code == 0, r.output
    assert "comparing claude-code too: Claude Code's own compaction, which recorded these sessions" in r.stderr
    assert {row["policy"] for row in orjson.loads(r.stdout)["runs"]} == {*DEFAULT_POLICIES, "claude-code"}
    converted = tmp_path / "converted.jsonl"
    assert cli("convert", folder / "cc1.jsonl", "-o", converted).exit_code == 0
    assert recorded_format(str(converted)) == "claude-code" and recorded_format(str(T1)) == "anthropic"
    # read as the format it is forced to be (--input-format), a converted file as its source still
    assert recorded_format(str(converted), "anthropic") == "claude-code"
    assert recorded_format(str(folder / "cc1.jsonl"), "claude-code") == "claude-code"
    assert default_policies([str(converted)]) == ([*DEFAULT_POLICIES, "claude-code"], (
        "comparing claude-code too: Claude Code's own compaction, which recorded this session (-p chooses)"))
    # another format's, several harnesses', a file no format reads: the three
    assert default_policies([str(T1)]) == (list(DEFAULT_POLICIES), None)
    assert default_policies([str(folder / "cc1.jsonl"), str(T1)]) == (list(DEFAULT_POLICIES), None)
    (tmp_path / "notes.jsonl").write_text("not json\n")
    assert recorded_format(str(tmp_path / "notes.jsonl")) is None
    # with --set every policy is changed: the harness's preset would not be what its user runs
    r = cli("compare", folder, "--set", "summary.trigger=50000", "--dry-run", "--format", "json", "--jobs", "1")
    assert r.exit_code == 0 and "comparing claude-code too" not in r.stderr
    assert {row["policy"] for row in orjson.loads(r.stdout)["runs"]} == set(DEFAULT_POLICIES)
    r = cli("compare", folder, "-p", "s08", "--dry-run", "--format", "json", "--jobs", "1")
    assert r.exit_code == 0 and "comparing claude-code too" not in r.stderr
    assert {row["policy"] for row in orjson.loads(r.stdout)["runs"]} == {"s08", "none"}


def test_a_compare_of_goose_or_qwen_code_sessions_compares_their_preset_too(cli, tmp_path):
    """goose's and Qwen Code's settings are known too (``harness_settings``): their sessions are
    compared with their preset, a Qwen Code session read in the ``qwen`` format, a goose session
    from its store; and the verdict names the setting their users change."""
    from pathlib import Path

    from compactlab.jobs.compare import DEFAULT_POLICIES, default_policies

    qwen = Path(__file__).resolve().parents[1] / "transcripts" / "data" / "qwen" / "built-compression.jsonl"
    assert default_policies([str(qwen)]) == ([*DEFAULT_POLICIES, "qwen-code"], (  # (its records say 0.19.0: the
        "comparing qwen-code too: Qwen Code's own compaction, which recorded this session (-p chooses)"))  # preset's too)
    r = cli("compare", qwen, "--dry-run", "--format", "json", "--jobs", "1")
    assert r.exit_code == 0, r.output
    assert {row["policy"] for row in orjson.loads(r.stdout)["runs"]} == {*DEFAULT_POLICIES, "qwen-code"}
    from helpers import goose_store

    store = goose_store(tmp_path / "sessions.db")
    session = f"{store}#20251122_1"
    assert default_policies([session]) == ([*DEFAULT_POLICIES, "goose"], (
        "comparing goose too: goose's own compaction, which recorded this session (-p chooses)"))
    # one answer whatever the path: where goose's own compaction never acted, compare says to keep it,
    # as tune --harness goose does, rather than printing the line that turns it off
    doc = orjson.loads(cli("compare", session, "--format", "json", "--out", tmp_path / "c", "--charts", "none").stdout)
    verdict = doc["verdict"]
    assert verdict["recommended"] == "none" and verdict["setting"] == [], verdict
    assert "goose (goose's default) never acted on these sessions either: keep it as it is" in verdict["recommendation"]
    r = cli("tune", session, "--harness", "goose", "--trials", "2", "--out", tmp_path / "t", "-q")
    assert r.exit_code == 0 and "There is nothing to set: the point recommended is goose's default." in r.stdout


def test_a_swept_harness_rule_names_each_values_own_triggers_in_the_verdict(cli, tmp_path):
    """The verdict's words for a preset that follows its harness's rule take the triggers its runs
    compacted at, by grid entry: each swept value's own (they were looked up by the policy's name
    alone, so a swept entry found none and was said to compact at the preset's 183,616)."""
    from pathlib import Path

    pi = (Path(__file__).parent.parent / "transcripts" / "data" / "pi" / "built-tree-compaction.jsonl").read_text()
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "claude.jsonl").write_text(pi)  # (claude-sonnet-4-5: 200,000)
    (folder / "gpt5.jsonl").write_text(pi.replace('"claude-sonnet-4-5"', '"gpt-5"'))  # (400,000)
    r = cli("compare", folder, "-p", "pi", "--sweep", "summary.trigger_reserve=0,30000", "--out", tmp_path / "c")
    assert r.exit_code == 0, r.stderr
    words = " ".join(r.stdout.split())
    assert ("pi summary.trigger_reserve=30000 (summary past 170,000–370,000 tokens, Pi's own on each session's "
            "window)") in words, words
