from __future__ import annotations

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.engine.cost.prices import load_prices
from helpers import SAMPLES, asst, results, tool_session, tr, tu, user, write_jsonl


def test_price_table_lookup():
    table = load_prices()
    p = table.lookup("claude-sonnet-4-5-20250929")
    assert p.known and (p.input, p.output) == (3.0, 15.0)
    assert (p.cache_write_5m, p.cache_write_1h, p.cache_read) == pytest.approx((3.75, 6.0, 0.3))
    unknown = table.lookup("claude-future-9")
    assert not unknown.known and unknown.input == table.lookup(table.default_model).input
    assert table.read


def test_none_costs_exactly_the_raw_baseline():
    t = load_transcript(str(SAMPLES / "synth-medium.jsonl"))
    s = replay(t, load_policy("none")).summary
    assert s.cost_usd == s.raw_cost_usd and s.cost_usd_nocache == s.raw_cost_usd_nocache > s.cost_usd > 0
    assert s.retention == 1.0 and s.refs > 0


def test_cache_reads_and_writes_per_call(tmp_path):
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", tool_session(5, size=400))))
    run = replay(t, load_policy("none"))
    first, second = run.calls[0], run.calls[1]
    assert (first.cache_read_tokens, first.cache_write_tokens) == (0, first.tokens)
    assert second.cache_read_tokens == first.tokens  # nothing changed: the whole previous prompt is read
    assert second.cache_write_tokens == second.tokens - first.tokens
    price = load_prices().lookup(None)
    assert second.input_cost_usd == pytest.approx(price.input_cost(second.cache_read_tokens, second.cache_write_tokens))


def test_a_policy_that_rewrites_the_cached_prefix_costs_more_than_none(tmp_path, cli):
    # small results, many calls: s08 snips at message 3 on every call and rewrites ~47 cached messages
    t_path = write_jsonl(tmp_path / "t.jsonl", tool_session(200, size=300))
    t = load_transcript(str(t_path))
    s08 = replay(t, load_policy("s08")).summary
    none = replay(t, load_policy("none")).summary
    assert s08.tokens_total < none.tokens_total
    assert s08.cost_usd > s08.raw_cost_usd == none.cost_usd
    assert s08.cache_write_tokens > none.cache_write_tokens
    r = cli("compare", t_path, "-p", "none", "-p", "s08", "--out", tmp_path / "cmp", "--jobs", "1")
    assert "cost more than no compaction" in r.stdout
    md = (tmp_path / "cmp" / "report.md").read_text()
    assert "## Costs more than no compaction" in md and "cache writes" in md
    assert 'class="dear"' in (tmp_path / "cmp" / "report.html").read_text()


def test_summary_calls_are_billed():
    t = load_transcript(str(SAMPLES / "synth-medium.jsonl"))
    run = replay(t, load_policy("s08"))
    s = run.summary
    price = load_prices().lookup(None)
    inputs = sum(c.input_cost_usd for c in run.calls)
    assert s.summaries > 0 and s.summary_input_tokens > 0
    assert s.cost_usd == pytest.approx(inputs + price.summary_cost(s.summary_input_tokens, s.summary_output_tokens), abs=1e-5)


def test_retention_counts_references_to_intact_results(tmp_path):
    msgs = [user("go"),
            asst(tu("r1", "read_file", path="a.py")), results(tr("r1", "A" * 500)),
            asst(tu("r2", "read_file", path="b.py")), results(tr("r2", "B" * 500)),
            asst(tu("r3", "bash", command="x")), results(tr("r3", "C" * 500)),
            asst(tu("r4", "bash", command="y")), results(tr("r4", "D" * 500)),
            asst(tu("e1", "edit_file", path="a.py")), results(tr("e1", "ok")),
            asst("done")]
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", msgs)))
    none = replay(t, load_policy("none"))
    assert [c.refs for c in none.calls] == [0, 0, 0, 0, 1, 0] and none.summary.retention == 1.0
    micro = replay(t, load_policy("none", ["micro.enabled=true", "order=[\"micro\"]"]))
    assert micro.calls[4].refs == 1 and micro.calls[4].refs_retained == 0  # a.py's read was replaced
    assert micro.summary.retention == 0.0
    keep = replay(t, load_policy("none", ["micro.enabled=true", "order=[\"micro\"]", "micro.preserve_tools=[\"read_file\"]"]))
    assert keep.summary.retention == 1.0


def test_a_reused_tool_id_forgets_its_earlier_file():
    from compactlab.engine.measures.baseline import retention_refs
    from compactlab.transcripts.messages import make_entry
    from compactlab.transcripts import Transcript

    msgs = [user("go"),
            asst(tu("x", "read_file", path="a.py")), results(tr("x", "A" * 50)),  # result at message 2
            asst(tu("x", "bash", command="ls")), results(tr("x", "B" * 50)),  # id x again, no file
            asst(tu("y", "read_file", path="a.py")), results(tr("y", "C" * 50)),  # refers to message 2
            asst(tu("z", "read_file", path="a.py")), results(tr("z", "D")),  # refers to message 6
            asst("done")]
    t = Transcript(path="t.jsonl", format="anthropic", entries=[make_entry(m, i) for i, m in enumerate(msgs)])
    refs = retention_refs(t)
    assert refs == {2: [(2, 0)], 3: [(6, 0)]}  # calls are numbered from 0


def test_no_references_means_retention_one(tmp_path):
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", tool_session(3))))
    s = replay(t, load_policy("s08")).summary
    assert (s.refs, s.retention) == (0, 1.0)


def _usage_implied_input_cost(path, table) -> float:
    """What a Claude Code session's usage fields imply its input was billed, read straight from
    its lines (each API response once, by message id; main chain only), at list prices."""
    import orjson

    by_id: dict = {}
    for line in path.read_bytes().splitlines():
        try:
            o = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        m = o.get("message") if isinstance(o, dict) else None
        if o.get("type") != "assistant" or o.get("isSidechain") or not isinstance(m, dict) or not m.get("id"):
            continue
        if isinstance(m.get("usage"), dict):
            by_id[m["id"]] = (m.get("model"), m["usage"], o.get("timestamp"))
    total = 0.0
    for model, u, when in by_id.values():
        if str(model).startswith("<"):
            continue
        from datetime import datetime

        p = table.lookup(model, datetime.fromisoformat(when).timestamp() if when else None)
        one = (u.get("cache_creation") or {}).get("ephemeral_1h_input_tokens") or 0
        total += (u.get("input_tokens", 0) * p.input + (u.get("cache_creation_input_tokens", 0) - one) * p.cache_write_5m
                  + one * p.cache_write_1h + u.get("cache_read_input_tokens", 0) * p.cache_read) / 1e6
    return total


def test_replaying_none_as_recorded_costs_what_the_usage_implies(shared_transcripts, cli):
    """#17's target: on every real Claude Code session of 100 calls or more, the replay of
    ``none`` with the recorded compactions and no other flag reports the recorded input cost
    within 1% of what its usage implies, and models its cost within 5% of it."""
    import orjson

    table = load_prices()
    checked = 0
    for path in sorted((shared_transcripts / "claude_code").glob("*/*.jsonl")):
        r = cli("replay", path, "-p", "none", "--keep-recorded-compactions", "--format", "json", "--dry-run", "-q")
        assert r.exit_code == 0, r.output
        s = orjson.loads(r.stdout)["runs"][0]["summary"]
        if s["calls"] < 100:
            continue
        checked += 1
        implied = _usage_implied_input_cost(path, table)
        assert s["recorded_input_cost_usd"] == pytest.approx(implied, rel=0.01), path.name
        assert s["cost_usd"] == pytest.approx(implied, rel=0.05), path.name
        assert s["calibration"]["source"] == "recorded usage"
        ledger = s["cache_ledger"]
        assert ledger["calls"] == s["calls"] and abs(ledger["read_error"]) <= 0.05, path.name
    if not checked:
        pytest.skip("no Claude Code session of 100 calls or more in ../shared/transcripts")


def test_an_entry_knows_which_of_its_blocks_are_no_longer_the_transcripts():
    """Retention asks whether a referenced result block is still the recorded one: a result
    replaced in place, or any block a rebuilt message does not share, counts as changed."""
    from compactlab.transcripts.messages import make_entry

    entry = make_entry(results(tr("a", "A" * 50), tr("b", "B" * 50), tr("c", "C" * 50)), 4)
    assert entry.changed == frozenset()
    one = entry.with_result_content(1, "[gone]")
    assert one.changed == {1} and one.with_result_content(0, "[gone]").changed == {0, 1}
    blocks = one.message["content"]
    rebuilt = one.with_message({"role": "user", "content": [blocks[0], blocks[1], dict(blocks[2])]})
    assert rebuilt.changed == {1, 2} and rebuilt.origin == 4
    assert one.with_message({"role": "user", "content": "flat"}).changed == {0, 1, 2}


def test_inspect_lists_the_recorded_cache_breaks_and_the_ledger(shared_transcripts, cli):
    """The spotter session's call 137 read only the system prompt's cached tokens 5 s after the
    previous call: a recorded cache break, listed by inspect and replayed by any replay (the
    harness rewrote its prompt; no policy changes that)."""
    import orjson

    path = shared_transcripts / "claude_code" / "spotter" / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    if not path.is_file():
        pytest.skip(f"{path.name} is not in ../shared/transcripts")
    info = orjson.loads(cli("inspect", path, "--format", "json").stdout)
    assert [(b["call"], b["read_tokens"]) for b in info["recorded_cache_breaks"]] == [(137, 21478)]
    assert info["cache_warm_start_tokens"] > 0 and abs(info["cache_ledger"]["read_error"]) < 0.02
    table = cli("inspect", path).stdout
    assert "recorded cache breaks" in table and "cache model vs recording" in table
    plain = orjson.loads(cli("replay", path, "-p", "none", "--format", "json", "--dry-run", "-q").stdout)["runs"][0]["summary"]
    assert plain["recorded_cache_breaks"] == [137] and plain["cache_breaks_replayed"]


def test_many_runs_that_cost_more_are_said_in_one_sentence_after_the_charts(tmp_path, cli):
    """(#31 §4) Four such runs: one sentence with the count and the worst three, each run's own
    explanation folded away; in report.md and report.html the charts come first."""
    paths = [write_jsonl(tmp_path / f"t{i}.jsonl", tool_session(120 + 10 * i, size=300)) for i in range(4)]
    r = cli("compare", *paths, "-p", "s08", "--out", tmp_path / "cmp", "--jobs", "1", "-q", "--charts", "summary")
    assert r.exit_code == 0, r.output
    md = (tmp_path / "cmp" / "report.md").read_text()
    section = md[md.index("## Costs more than no compaction"):]
    assert md.index("## Charts") < md.index("## Costs more than no compaction")
    assert "- 4 runs cost more than no compaction" in section and section.count("The worst: ") == 1
    assert section.count("× s08 (+") == 3 and "<details><summary>each of them</summary>" in section
    html = (tmp_path / "cmp" / "report.html").read_text()
    assert html.index("<h2>Charts</h2>") < html.index("<h2>Costs more than no compaction</h2>")
