"""Hindsight probes (#20 §1): what the agent later used, and whether the context sent still held it."""

from __future__ import annotations

import csv

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlab import load_policy, load_transcript, replay
from compactlab.engine.measures.probes import own_sources, tokens, vocabulary
from helpers import asst, lines_run, own_source_pattern, results, tr, tu, user, write_jsonl, examples


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
    none = replay(t, load_policy("none")).summary  # (by construction: not measured, as replay and compare say)
    assert none.probes == 0 and not none.probes_indexed and none.recall == 1.0
    idle = replay(t, load_policy(*LOOKS)).summary
    assert idle.probes == 6 and idle.recall == 1.0
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


def test_probes_csv_is_the_ledger_of_every_probe(cli, tmp_path):
    """(#28 §1) One row per probe per call: kept ones too, each with its kind and status; the layer
    and call that removed it only where it was not kept."""
    path = write_jsonl(tmp_path / "t.jsonl", used_later(5))
    r = cli("replay", path, "-p", "observation-masking", "--set", "micro.keep_recent=1", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    assert "recall (hindsight probes)" in r.stdout and "probes by kind" in r.stdout
    rows = list(csv.DictReader((tmp_path / "o" / "probes.csv").open()))
    assert list(rows[0]) == ["call", "probe", "kind", "source_call", "source_tool", "status", "removed_by",
                             "removed_at"]
    assert len(rows) == 5 and {r["kind"] for r in rows} == {"identifier"}
    lost = [r for r in rows if r["status"] == "lost"]
    kept = [r for r in rows if r["status"] == "kept"]
    assert lost and kept and len(lost) + len(kept) == 5
    assert {r["removed_by"] for r in lost} == {"micro"} and all(r["removed_at"] for r in lost)
    assert all(r["removed_by"] == "" and r["removed_at"] == "" for r in kept)
    # no compaction cannot lose a probe: its replay does not look for them, and says so
    r = cli("replay", path, "-p", "none", "--out", tmp_path / "n")
    assert r.exit_code == 0 and "not measured (a policy that never acts" in r.stdout
    assert (tmp_path / "n" / "probes.csv").read_text().splitlines() == [",".join(rows[0])]


def test_a_string_the_user_or_the_agent_wrote_first_is_no_probe(tmp_path):
    msgs = [user("please fix parse_config_file"), asst(tu("a", command="cat my_new_helper.py")),
            results(tr("a", "parse_config_file my_new_helper.py other_symbol_x")),
            asst(tu("b", command="grep parse_config_file my_new_helper.py other_symbol_x"))]
    run = replay(load_transcript(str(write_jsonl(tmp_path / "t.jsonl", msgs))), load_policy(*LOOKS))
    assert run.summary.probes == 1  # other_symbol_x: the prompt named the first, the agent the second


def test_recall_joins_check_and_compare(cli, tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", used_later(6))
    base = tmp_path / "b.json"
    assert cli("check", path, "-p", "observation-masking", "--baseline", base, "--update-baseline").exit_code == 0
    worse = cli("check", path, "-p", "observation-masking", "--set", "micro.keep_recent=1", "--baseline", base)
    assert worse.exit_code == 1 and "recall" in worse.stdout
    r = cli("compare", path, "-p", "none", "-p", "observation-masking", "--dry-run", "--format", "json")
    verdict = __import__("json").loads(r.stdout)["verdict"]
    # (none never acts: its recall is 1.000 by construction, its probes not looked for, as `replay -p none` says)
    assert {e["policy"]: e["probes"] for e in verdict["entries"]} == {"none": 0, "observation-masking": 6}


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


#: a policy that acts, so its replay looks for the probes, and never changes the context: every
#: probe found is kept (a policy that never acts, none, looks for none: recall 1.000 by construction)
LOOKS = ("observation-masking", ["micro.keep_recent=100000"])


def _run(tmp_path, msgs, policy=None, sets=()):
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", msgs)))
    return replay(t, load_policy(*LOOKS) if policy is None else load_policy(policy, list(sets)))


def test_kept_means_anywhere_in_the_context_the_agents_own_messages_included(tmp_path):
    """(#28 §1) Masking clears the result that showed a path but keeps the agent's own command that
    named it since: the probe is still in the context, so it is kept."""
    msgs = [user("fix it"), asst(tu("a", command="ls src")), results(tr("a", "src/deep/payment_gateway.py\n" + "x " * 300)),
            asst(tu("b", command="cat src/deep/payment_gateway.py")), results(tr("b", "def pay(): pass\n" + "y " * 300))]
    for i in range(4):
        msgs += [asst(tu(f"c{i}", command=f"echo step{i}")), results(tr(f"c{i}", "z " * 300))]
    msgs += [asst(tu("d", command="python -m pytest src/deep/payment_gateway.py"))]
    run = _run(tmp_path, msgs, "observation-masking", ["micro.keep_recent=1"])
    final = [p for p in run.probe_ledger if p.probe == "src/deep/payment_gateway.py"]
    assert [p.status for p in final] == ["kept", "kept"] and final[-1].kind == "path"
    assert run.summary.recall == 1.0
    # without the agent's own mention in between, the same clearing loses it
    run = _run(tmp_path, msgs[:3] + msgs[5:], "observation-masking", ["micro.keep_recent=1"])
    assert [p.status for p in run.probe_ledger if p.probe == "src/deep/payment_gateway.py"] == ["lost"]


def test_a_persisted_output_is_recoverable_not_lost(tmp_path, cli):
    """(#28 §1) A result persisted to disk with a preview and a path: the string beyond the preview
    is not in the context, but the agent can read it again: recoverable, reported beside recall."""
    big = "head of the output\n" + "w " * 3000 + "\nthe culprit is reconcile_ledger_v2 here\n"
    msgs = [user("fix it"), asst(tu("a", command="cat big.log")), results(tr("a", big)),
            asst(tu("b", command="grep reconcile_ledger_v2 src"))]
    sets = ["snip.enabled=false", "micro.enabled=false", "summary.enabled=false", "reactive.enabled=false",
            "budget.persist_threshold=100", "budget.preview_chars=10", "budget.max_chars=100"]
    run = _run(tmp_path, msgs, "s08", sets)
    [p] = run.probe_ledger
    assert (p.status, p.removed_by) == ("recoverable", "budget")
    s = run.summary
    assert (s.probes, s.probes_kept, s.probes_recoverable, s.recall, s.recoverable) == (1, 0, 1, 0.0, 1.0)
    assert s.probe_kinds == {"identifier": {"probes": 1, "kept": 0, "recoverable": 1}}
    r = cli("compare", tmp_path / "t.jsonl", "-p", "s08", *[a for x in sets for a in ("--set", x)], "--dry-run",
            "--format", "json")
    entry = next(e for e in __import__("json").loads(r.stdout)["verdict"]["entries"] if e["policy"] == "s08")
    assert entry["recoverable"] == 1.0 and entry["recall"] == 0.0


def test_generic_names_and_strings_the_prompt_or_agent_held_inside_longer_tokens_are_no_probes(tmp_path):
    """(#28 §2) A dunder, a builtin, a standard-library name, self.<word>; a name inside a longer
    token of the task prompt or of the agent's own earlier input: none is evidence of a result."""
    msgs = [user("the bug is in self.add_id_index of the registry"),
            asst(tu("w", command="cat > t.py <<EOF\nfrom app.helpers.format_amount import x\nEOF")),
            results(tr("w", "")),
            asst(tu("a", command="cat app.py")),
            results(tr("a", "class Thing:\n  def __init__(self): self.name = 1\n  add_id_index = logging.getLogger\n"
                            "  import os.path; format_amount(); ZX_unique_token_77\n"))]
    msgs += [asst(tu("b", command="grep -e __init__ -e self.name -e add_id_index -e logging.getLogger -e os.path "
                                  "-e format_amount -e isinstance -e ZX_unique_token_77 app.py"))]
    run = _run(tmp_path, msgs)
    assert [p.probe for p in run.probe_ledger] == ["ZX_unique_token_77"]


def test_line_navigation_and_copied_phrases_are_probes_of_their_own_kinds(tmp_path):
    """(#28 §3) grep -n printed line 412; the agent then reads 'sed -n 405,430p' (within 30 lines):
    a line probe. A quoted message of 12+ characters with a space, copied from a result: a phrase."""
    msgs = [user("fix it"), asst(tu("a", command="grep -n duration forms.py")),
            results(tr("a", "forms.py:412:        'invalid': _('Enter a valid duration.'),\n")),
            asst(tu("b", command="sed -n '405,430p' forms.py")),
            results(tr("b", "ok")),
            asst(tu("c", command="grep -rn 'Enter a valid duration' tests/"))]
    run = _run(tmp_path, msgs)
    kinds = {p.kind: p for p in run.probe_ledger}
    assert set(kinds) == {"line", "phrase"}, run.probe_ledger
    assert kinds["line"].call == 1 and kinds["line"].source_call == 0 and "412" in kinds["line"].probe
    assert kinds["phrase"].probe == "Enter a valid duration" and kinds["phrase"].source_call == 0
    assert run.summary.probe_kinds["line"]["probes"] == 1
    # far from any printed number, or printed by no result: no line probe
    far = msgs[:3] + [asst(tu("b", command="sed -n '900,930p' forms.py"))]
    assert not [p for p in _run(tmp_path, far).probe_ledger if p.kind == "line"]


def test_no_compaction_builds_no_probe_index(tmp_path, cli, monkeypatch):
    """(#28 §5) A policy that never acts cannot lose a probe: its replay builds no index at all."""
    from compactlab.engine.measures import baseline

    built = []
    real = baseline.ProbeIndex

    def counting(*a, **k):
        built.append(1)
        return real(*a, **k)

    monkeypatch.setattr(baseline, "ProbeIndex", counting)
    path = write_jsonl(tmp_path / "t.jsonl", used_later(3))
    r = cli("replay", path, "-p", "none", "--dry-run", "--format", "json")
    summary = __import__("json").loads(r.stdout)["runs"][0]["summary"]
    assert r.exit_code == 0 and not built and summary["probes_indexed"] is False and summary["recall"] == 1.0
    assert cli("replay", path, "-p", "s08", "--dry-run", "-q").exit_code == 0 and built


def test_recall_switched_off_is_said_not_measured(cli, tmp_path, monkeypatch):
    """COMPACTLAB_PROBES=0: no index for any policy; the replay says recall and losses are not
    measured rather than printing 1.000 and 'lost nothing'."""
    monkeypatch.setenv("COMPACTLAB_PROBES", "0")
    path = write_jsonl(tmp_path / "t.jsonl", used_later(4))
    r = cli("replay", path, "-p", "observation-masking", "--set", "micro.keep_recent=1", "--dry-run")
    assert r.exit_code == 0, r.output
    assert "not measured (COMPACTLAB_PROBES=0)" in r.stdout and "is not measured (recall is off)" in r.stdout
    assert "lost strings" not in r.stdout


def test_a_probe_only_a_summary_made_before_its_use_holds_is_kept(tmp_path):
    """(#46 §8) The summary replaces the result and the agent's message that held the string before
    the agent uses it again: the summary is then the only message holding it, and it is kept."""
    msgs = [user("find the bug"), asst(tu("a", command="cat ledger.txt")),
            results(tr("a", "the culprit is reconcile_ledger_v3 here\n" + "filler " * 200)),
            asst("So the culprit is reconcile_ledger_v3.", tu("b", command="echo noted")), results(tr("b", "ok"))]
    for i in range(12):
        msgs += [asst(tu(f"c{i}", command=f"echo {i}")), results(tr(f"c{i}", "z " * 400))]
    msgs += [asst("Back to it.", tu("d", command="grep -rn reconcile_ledger_v3 src"))]
    run = _run(tmp_path, msgs, "s08", ["summary.trigger=6000", "snip.enabled=false", "micro.enabled=false",
                                       "budget.enabled=false", "reactive.enabled=false"])
    t = load_transcript(str(tmp_path / "t.jsonl"))
    last = replay(t, load_policy("s08", ["summary.trigger=6000", "snip.enabled=false", "micro.enabled=false",
                                         "budget.enabled=false", "reactive.enabled=false"]),
                  keep_contexts={run.calls[-1].call}).contexts[run.calls[-1].call]
    holding = [m for m in last if "reconcile_ledger_v3" in str(m)]
    assert run.summary.summaries >= 1 and len(holding) == 1 and "stub summarizer" in str(holding[0])
    final = [p for p in run.probe_ledger if p.probe == "reconcile_ledger_v3" and p.call == run.calls[-1].call]
    assert [p.status for p in final] == ["kept"]


def test_a_probe_a_persisted_preview_holds_is_kept_not_recoverable(tmp_path):
    """(#46 §8) The result goes to disk, its preview (the head) still shows the string: kept."""
    big = "the culprit is reconcile_ledger_v2 here\n" + "w " * 3000
    msgs = [user("fix it"), asst(tu("a", command="cat big.log")), results(tr("a", big)),
            asst(tu("b", command="grep reconcile_ledger_v2 src"))]
    run = _run(tmp_path, msgs, "s08", ["snip.enabled=false", "micro.enabled=false", "summary.enabled=false",
                                       "reactive.enabled=false", "budget.persist_threshold=300",
                                       "budget.preview_chars=200", "budget.max_chars=100"])
    [p] = run.probe_ledger
    assert run.summary.persisted == 1 and p.status == "kept"


def test_a_name_inside_a_longer_token_of_the_prompt_is_no_probe(tmp_path):
    """(#46 §8) The prompt names test_add_id_index; a result shows add_id_index; the agent's use of it
    is no evidence of the result."""
    msgs = [user("make test_add_id_index pass"), asst(tu("a", command="cat registry.py")),
            results(tr("a", "def add_id_index(self): pass\nQQ_fresh_token_91 = 1\n")),
            asst(tu("b", command="grep -e add_id_index -e QQ_fresh_token_91 registry.py"))]
    assert [p.probe for p in _run(tmp_path, msgs).probe_ledger] == ["QQ_fresh_token_91"]


@pytest.mark.parametrize("lines, probe", [("420,440", True), ("470,480", False), ("560,580", False),
                                          ("712,730", False)])
def test_a_line_probe_is_near_a_printed_number_only(tmp_path, lines, probe):
    """(#46 §8) Within LINE_NEAR (30) lines of a printed line number, a line probe; 58, 148, 300 lines
    away, none (a looser nearness passes the other test's 488)."""
    msgs = [user("fix it"), asst(tu("a", command="grep -n duration forms.py")),
            results(tr("a", "forms.py:412:        'invalid': 1,\n")),
            asst(tu("b", command=f"sed -n '{lines}p' forms.py"))]
    assert bool([p for p in _run(tmp_path, msgs).probe_ledger if p.kind == "line"]) is probe


@pytest.mark.parametrize("name, is_generic", [
    ("logging.getLogger", True), ("os.path.join", True), ("isinstance", True), ("__init__", True),
    ("self.name", True), ("Enum.map", True), ("Map.new", True), ("JSON.stringify", True), ("to_string", True),
    ("phx-click", True), ("LiveView", True),
    ("self.add_id_index", False), ("Ash.UUID.generate", False), ("string.ts", False), ("this.pushEvent", False),
    ("reconcile_ledger_v2", False), ("Map.ex", False),
])
def test_generic_names_of_every_language_here(name, is_generic):
    """(#46 §8) The exclusion of names known without a result, run on its own."""
    from compactlab.engine.measures.probes import generic

    assert generic(name) is is_generic


@pytest.mark.parametrize("name, is_common", [
    # a framework's public names (#58 §1: the vocabulary built from pinned packages)
    ("django.urls", True), ("models.CharField", True), ("on_delete", True), ("max_length", True),
    ("django.db.models.Q", True), ("pd.DataFrame", True), ("np.float64", True), ("TestCase", True),
    ("addEventListener", True), ("getBoundingClientRect", True), ("ExUnit.Case", True), ("on_exit", True),
    # English compounds and acronyms
    ("real-time", True), ("built-in", True), ("--end-to-end", True), ("CI/CD", True),
    # the session's own
    ("transcript-row", False), ("data-render-mode", False), ("container.querySelectorAll", False),
    ("self.on_delete", False), ("Ash.UUID.generate", False), ("src/app", False), ("render_assistant_block", False),
])
def test_names_known_without_a_result(name, is_common):
    from compactlab.engine.measures.probes import common

    assert common(name) is is_common


def test_a_frameworks_names_are_the_sessions_own_when_it_works_on_its_source():
    """In a session on Django's own tree (a result shows ./django/... or /testbed/django/...), Django's
    names are probes; an installed copy (site-packages) does not make them the session's, and a name
    another framework also has is the session's as soon as one of them is its own."""
    from compactlab.engine.measures.probes import common, own_frameworks

    django = own_frameworks("./django/db/models/fields/related.py:12: class ForeignKey")
    assert django and own_frameworks("/testbed/django/db/x.py") == django
    assert own_frameworks('File "/usr/lib/python3/site-packages/django/core/x.py", line 3') == 0
    assert own_frameworks("see mydjango/x.py and node_modules/django/y.py") == 0
    assert common("remote_field") and not common("remote_field", django)
    assert common("field_name") and not common("field_name", django)  # (pydantic and starlette have it too)
    assert common("TestCase", django)  # (the standard library's too, and never a session's own)
    assert common("CharField", own_frameworks("flask/app.py"))


#: texts of paths into frameworks' trees near every bound of the pattern, words beyond ASCII among them
#: (Python's ``\w`` is Unicode's: ``é``, ``٣`` and ``ß`` glue to a name, ``—`` and ``\u00a0`` do not)
SOURCE_TEXTS = st.lists(st.one_of(
    st.sampled_from(["django/", "flask/", "_pytest/", "pytest/", "numpy/", "djangox/", "site-packages/",
                     "dist-packages/", "node_modules/", "packages/", "x-", "db/", "a", ".py", ".pyc", ".p", "py", ".",
                     "/", "-", " ", "\n", "é", "٣", "ß", "—", "\u00a0", ":"]),
    st.characters(codec="utf-8", exclude_categories=["Cs"])), max_size=40).map("".join)


@settings(max_examples=examples(400), deadline=None)
@given(SOURCE_TEXTS)
def test_the_frameworks_own_sources_are_read_as_the_pattern_reads_them(text):
    """``own_sources``, in linear time, finds what the pattern it replaced finds (``re.findall``):
    the same folders in the same order, on texts of any characters."""
    assert own_sources(text, vocabulary().bit_of) == own_source_pattern().findall(text)


@pytest.mark.parametrize("text", [
    "django/a.py", "x-django/a.py", ".django/a.py", "mydjango/a.py", "site-packages/django/a.py",
    "dist-packages/flask/b.py", "node_modules/flask/b.py", "xnode_modules/flask/b.py", "django/a.pyc", "django/a.py_",
    "django/a.pyé", "django/a.py—", "django/.py", "django.py", "/django/x.py django/y.py", "django/a.py/flask/b.py",
    "django/a.pyx/flask/b.py", "django/a.py.flask/b.py", "djangox/a.py", "_pytest/main.py", "a_pytest/main.py",
    "é/django/a.py", "édjango/a.py", "a/b/django/c/d.py", "django//x.py", "a.b/django/c.py", ""])
def test_the_frameworks_own_sources_at_the_patterns_bounds(text):
    assert own_sources(text, vocabulary().bit_of) == own_source_pattern().findall(text)


def test_a_long_path_of_folders_names_is_read_in_linear_time():
    """A path of many folders' names and no ``.py`` (``django/django/…``, a hostile transcript's)
    cost the pattern a pass to the path's end per name (quadratic); the reading here grows with
    it in step (lines of Python counted, never timed)."""
    folders = vocabulary().bit_of
    own_sources("django/x.py", folders)  # (its patterns compiled first, as they are once a process: not counted)
    for name, end in (("django/", "x.pyc"), ("lib/", "x.py"), ("packages/django/", "x.py")):  # (no .py; each name)
        small, big = name * 2_000 + end, name * 8_000 + end
        ratio = lines_run(lambda: own_sources(big, folders)) / lines_run(lambda: own_sources(small, folders))
        assert ratio < 4.5 and own_sources(big, folders) == []
    assert own_sources("lib/" * 8_000 + "django/x.py", folders) == ["django"]


def test_a_session_on_djangos_tree_keeps_djangos_names_as_probes(tmp_path):
    """The switch, through the index: the same reply's ``remote_field`` is a probe after a result that
    shows Django's own source, and is not after one that shows an installed copy."""
    def run(path: str) -> list[str]:
        msgs = [user("fix it"), asst(tu("a", command="grep -rn rel .")),
                results(tr("a", f"{path}:12:        remote_field = rel\n")),
                asst(tu("b", command="python -c 'print(remote_field)'"))]
        return [p.probe for p in _run(tmp_path, msgs).probe_ledger]

    assert "remote_field" in run("./django/db/models/fields/related.py")
    assert "remote_field" not in run("/usr/lib/python3/site-packages/django/db/models/fields/related.py")


def test_the_vocabulary_is_the_one_the_probe_cache_was_versioned_with():
    """A rebuilt vocabulary changes what counts as a probe: bump probe_cache.INDEX_VERSION and this
    digest together (or cached probes of the old vocabulary are read as this one's)."""
    import hashlib
    from pathlib import Path

    from compactlab.engine.measures import probe_cache
    from compactlab.engine.measures.probes import vocabulary

    data = Path(probe_cache.__file__).parents[2] / "data" / "vocabulary.txt"
    assert (probe_cache.INDEX_VERSION, hashlib.sha256(data.read_bytes()).hexdigest()[:12]) == (5, "180bf668b3c9")
    v = vocabulary()
    assert len(v.names) > 40_000 and v.bit_of["django"] and v.bit_of["_pytest"] == v.bit_of["pytest"]


def test_the_vocabulary_read_a_prefix_at_a_time_answers_as_the_whole_file_parsed():
    """``Names`` parses only the lines of the prefixes asked for (start-up, #60 §1): every name of
    the file, and names it lacks (before, between and after its lines, one character long, sharing a
    prefix), get what a parse of the whole file gives."""
    from pathlib import Path

    from compactlab.engine.measures import probes

    text = (Path(probes.__file__).parents[2] / "data" / "vocabulary.txt").read_text(encoding="utf-8")
    body = probes._split_header(text)[1]
    pairs = body.split()
    whole = dict(zip(pairs[::2], pairs[1::2]))
    names = probes.Names(body)
    assert len(names) == len(whole)
    assert all(names.get(n) == m for n, m in whole.items())
    missing = ["", "A", "z", "~~", "\U0010ffff", "django.nope", "aaaaaa", "zzzzzz", "0", "_", "É",
               *(n + "_" for n in list(whole)[::997]), *(n[:-1] for n in list(whole)[::991] if n[:-1] not in whole)]
    fresh = probes.Names(body)
    assert [fresh.get(n) for n in missing] == [whole.get(n) for n in missing]
    tiny = probes.Names("a\t1\nab\t2\nb\t4\nbc\t8\n")
    assert [tiny.get(n) for n in ("a", "ab", "abc", "b", "bc", "c", "", "aa")] == ["1", "2", None, "4", "8", None, None, None]


def test_a_compare_where_no_policy_acts_says_so_and_not_that_no_reply_repeats_a_string(cli, tmp_path):
    """Policies that never act look for no probe (recall 1.000 by construction): the verdict's note
    says none acted, not that the transcripts have no string a reply repeats (they have six)."""
    path = write_jsonl(tmp_path / "t.jsonl", used_later(6))
    r = cli("compare", path, "-p", "none", "-p", "none", "--set", "reactive.enabled=false", "--dry-run",
            "--format", "json")
    assert r.exit_code == 0, r.output
    notes = __import__("json").loads(r.stdout)["verdict"]["recommendation"]
    assert "No policy acted, so probe recall" in notes and "No reply repeats" not in notes
    r = cli("compare", path, "-p", "none", "-p", "observation-masking", "--dry-run", "--format", "json")
    notes = __import__("json").loads(r.stdout)["verdict"]["recommendation"]
    assert "probe recall (1.0 everywhere)" not in notes  # (masking looked, and lost some)


def test_a_transcript_loaded_whole_has_each_reply_read_once(tmp_path, monkeypatch):
    """What is wanted of a transcript loaded whole is every reply's strings; the index then reads
    the replies again for their probes: it takes the strings read for what is wanted (each reply
    tokenised once), and finds the probes it finds reading them itself."""
    from compactlab.core import in_use
    from compactlab.engine.measures import baseline, probes

    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", used_later(6))))
    read: list[int] = []
    real = probes.reply_strings
    monkeypatch.setattr(probes, "reply_strings", lambda e, *a, **k: read.append(e.origin) or real(e, *a, **k))
    got = baseline.compute_baseline(t).probes
    replies = [e.origin for e in t.entries if e.role == "assistant"]
    assert sorted(read) == replies  # (once each)
    read.clear()
    native = in_use()
    builder = baseline.BaselineBuilder(system=t.system, wanted=probes.wanted_strings(t.entries, native), native=native)
    for e in t.entries[: t.call_positions[-1] + 1]:
        builder.add(e)
    assert sorted(read) == sorted(replies * 2)  # (for what is wanted, then again by the index)
    assert builder.base.probes == got and sum(map(len, got.values())) >= 6
