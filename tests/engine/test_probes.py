"""Hindsight probes (#20 §1): what the agent later used, and whether the context sent still held it."""

from __future__ import annotations

import csv

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.engine.probes import tokens
from helpers import asst, results, tr, tu, user, write_jsonl


def used_later(n: int) -> list[dict]:
    """n tool calls, each reading a file whose output names a distinctive symbol; after them the
    agent uses every symbol again, newest first, one call each (so each use is further from its read)."""
    msgs = [user("find the bug")]
    for i in range(n):
        msgs += [asst(tu(f"r{i}", command=f"cat part{i}.txt")),
                 results(tr(f"r{i}", f"line one\nthe handler is compute_total_{i}0000 here\n" + "filler text " * 30))]
    for i in reversed(range(n)):
        msgs += [asst(tu(f"u{i}", command=f"grep compute_total_{i}0000 src")), results(tr(f"u{i}", "ok"))]
    return msgs


def test_the_strings_a_probe_is_made_of():
    found = tokens('File "/src/app/models.py", line 1234, in save_all: KeyError: plain words stay out; '
                   "see https://example.org/x and obj.method and parseHTTPHeader")
    assert {"/src/app/models.py".strip("/"), "1234", "save_all", "KeyError", "https://example.org/x",
            "obj.method", "parseHTTPHeader"} <= found
    assert not {"plain", "words", "stay"} & found


def test_recall_falls_as_the_masking_window_shrinks(tmp_path):
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", used_later(6))))
    none = replay(t, load_policy("none")).summary
    assert none.probes == 6 and none.recall == 1.0  # by construction
    recalls = [replay(t, load_policy("observation-masking", [f"micro.keep_recent={k}"])).summary.recall
               for k in (12, 8, 4, 1)]
    assert recalls == sorted(recalls, reverse=True) and recalls[0] == 1.0 and recalls[-1] < 0.5
    assert len(set(recalls)) >= 3  # it falls step by step, not all at once


def test_a_summary_that_quotes_a_probe_keeps_it(tmp_path):
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", used_later(4))))
    # a summary of everything before the uses: the stub quotes the head of its input (the first reads)
    run = replay(t, load_policy("s08", ["summary.trigger=3000", "summary.input_chars=200000", "snip.enabled=false",
                                        "micro.enabled=false"]))
    assert run.summary.summaries >= 1
    assert run.summary.recall > 0 and run.summary.probes == 4
    lost_texts = {p.probe for p in run.lost_probes}
    kept = {f"compute_total_{i}0000" for i in range(4)} - lost_texts
    assert kept, "the summary quotes some of the symbols"
    # and a placeholder instead loses them, each in the ledger with its source and the layer
    masked = replay(t, load_policy("observation-masking", ["micro.keep_recent=1"]))
    assert {(p.removed_by, p.source_tool) for p in masked.lost_probes} == {("micro", "bash")}
    assert all(p.source_call < p.call for p in masked.lost_probes)


def test_probes_csv_is_the_ledger_of_the_lost_ones(cli, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", used_later(5))
    r = cli("replay", path, "-p", "observation-masking", "--set", "micro.keep_recent=1", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    assert "recall (hindsight probes)" in r.stdout
    rows = list(csv.DictReader((tmp_path / "o" / "probes.csv").open()))
    assert rows and set(rows[0]) == {"call", "probe", "source_call", "source_tool", "removed_by", "removed_at"}
    assert {r["removed_by"] for r in rows} == {"micro"}
    assert cli("replay", path, "-p", "none", "--out", tmp_path / "n").exit_code == 0
    assert (tmp_path / "n" / "probes.csv").read_text() == "call,probe,source_call,source_tool,removed_by,removed_at\n"


def test_a_string_the_user_or_the_agent_wrote_first_is_no_probe(tmp_path):
    msgs = [user("please fix parse_config_file"), asst(tu("a", command="cat my_new_helper.py")),
            results(tr("a", "parse_config_file my_new_helper.py other_symbol_x")),
            asst(tu("b", command="grep parse_config_file my_new_helper.py other_symbol_x"))]
    run = replay(load_transcript(str(write_jsonl(tmp_path / "t.jsonl", msgs))), load_policy("none"))
    assert run.summary.probes == 1  # other_symbol_x: the prompt named the first, the agent the second


def test_recall_joins_check_and_compare(cli, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", used_later(6))
    base = tmp_path / "b.json"
    assert cli("check", path, "-p", "observation-masking", "--baseline", base, "--update-baseline").exit_code == 0
    worse = cli("check", path, "-p", "observation-masking", "--set", "micro.keep_recent=1", "--baseline", base)
    assert worse.exit_code == 1 and "recall" in worse.stdout
    r = cli("compare", path, "-p", "none", "-p", "observation-masking", "--dry-run", "--format", "json")
    verdict = __import__("json").loads(r.stdout)["verdict"]
    assert {e["policy"]: e["probes"] for e in verdict["entries"]} == {"none": 6, "observation-masking": 6}


LAYERS = {
    "micro": ("observation-masking", ["micro.keep_recent=1"]),
    "budget": ("s08", ["snip.enabled=false", "micro.enabled=false", "summary.enabled=false", "reactive.enabled=false",
                       "budget.persist_threshold=100", "budget.preview_chars=10", "budget.max_chars=100"]),
    "snip": ("s08", ["budget.enabled=false", "micro.enabled=false", "summary.enabled=false", "reactive.enabled=false",
                     "snip.max_messages=4", "snip.keep_head=1"]),
    "summary": ("s08", ["budget.enabled=false", "micro.enabled=false", "snip.enabled=false", "reactive.enabled=false",
                        "summary.trigger=2000", "summary.input_chars=10"]),
}


@pytest.mark.parametrize("layer", list(LAYERS))
def test_the_ledger_names_the_use_the_source_and_the_layer_exactly(tmp_path, layer):
    """(#25 §8) In used_later(4) the read of compute_total_{i}0000 is call i and its use is call
    4 + (3 - i): each lost probe's call, source call, tool and the layer that removed it are those."""
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", used_later(4))))
    preset, sets = LAYERS[layer]
    run = replay(t, load_policy(preset, sets))
    assert run.lost_probes, "the layer loses some"
    for p in run.lost_probes:
        i = int(p.probe.removeprefix("compute_total_")) // 10000
        assert (p.call, p.source_call, p.source_tool, p.removed_by) == (4 + (3 - i), i, "bash", layer), p
    assert run.summary.probes - run.summary.probes_kept == len(run.lost_probes)


@pytest.mark.parametrize("layer", list(LAYERS))
def test_each_compaction_event_says_what_it_removed_and_which_used_strings_it_lost(tmp_path, cli, layer):
    """(#27 §6) Every lost probe names the event (the call) whose layer removed it; each event
    lists those strings with the call that first needed them; compactions.csv has every event."""
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", used_later(4))))
    preset, sets = LAYERS[layer]
    run = replay(t, load_policy(preset, sets))
    events = {e.call: e for e in run.events}
    assert events and all(e.messages_after <= e.messages_before for e in events.values())
    assert all(e.tokens_after < e.tokens_before for e in events.values() if layer != "micro" or e.results_cleared)
    for p in run.lost_probes:
        assert p.source_call < p.removed_at <= p.call or p.removed_at == p.call, p
        assert p.removed_by in events[p.removed_at].layers, p
        assert (p.probe, min(q.call for q in run.lost_probes if q.probe == p.probe and q.removed_at == p.removed_at)) \
            in events[p.removed_at].lost
    assert sum(len(e.lost) for e in events.values()) == len({(p.removed_at, p.probe) for p in run.lost_probes})
    out = tmp_path / "o"
    r = cli("replay", tmp_path / "t.jsonl", "-p", preset, *[a for s in sets for a in ("--set", s)], "--out", out)
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader((out / "compactions.csv").open()))
    assert [int(r["call"]) for r in rows] == sorted(events) and rows[0]["layers"]
    assert "compaction event(s);" in r.stdout and "of them lost strings the agent later used" in r.stdout
