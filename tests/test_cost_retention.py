from __future__ import annotations

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.calibration import calibrate
from compactlab.prices import load_prices
from helpers import SAMPLES, asst, results, tool_session, tr, tu, user, write_jsonl


def test_price_table_lookup():
    table = load_prices()
    p = table.lookup("claude-sonnet-4-5-20250929")
    assert p.known and (p.input, p.output) == (3.0, 15.0)
    assert (p.cache_write_5m, p.cache_write_1h, p.cache_read) == pytest.approx((3.75, 6.0, 0.3))
    unknown = table.lookup("my-local-llama")
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
    from compactlab.baseline import retention_refs
    from compactlab.messages import make_entry
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


def test_modelled_cost_of_none_is_within_20_percent_of_the_recorded(shared_transcripts, cli):
    path = shared_transcripts / "claude_code" / "spotter" / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    t = load_transcript(str(path))
    run = replay(t, load_policy("none"), keep_recorded_compactions=True, estimator=calibrate(t).estimator())
    modelled = sum(c.input_cost_usd for c in run.calls)
    recorded = run.summary.recorded_input_cost_usd
    assert recorded > 1 and abs(modelled - recorded) / recorded <= 0.20
    r = cli("replay", path, "-p", "none", "--keep-recorded-compactions", "--calibrate", "--dry-run")
    assert "input cost: modelled / recorded usage" in r.stdout


def test_an_entry_knows_which_of_its_blocks_are_no_longer_the_transcripts():
    """Retention asks whether a referenced result block is still the recorded one: a result
    replaced in place, or any block a rebuilt message does not share, counts as changed."""
    from compactlab.messages import make_entry

    entry = make_entry(results(tr("a", "A" * 50), tr("b", "B" * 50), tr("c", "C" * 50)), 4)
    assert entry.changed == frozenset()
    one = entry.with_result_content(1, "[gone]")
    assert one.changed == {1} and one.with_result_content(0, "[gone]").changed == {0, 1}
    blocks = one.message["content"]
    rebuilt = one.with_message({"role": "user", "content": [blocks[0], blocks[1], dict(blocks[2])]})
    assert rebuilt.changed == {1, 2} and rebuilt.origin == 4
    assert one.with_message({"role": "user", "content": "flat"}).changed == {0, 1, 2}
