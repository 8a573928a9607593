"""Your own compaction step in Python (#45 §1): named by a policy, by ``-p py:``, or by an entry
point an installed package declares; run in order with the built-in layers, measured by every
measure, and refused with its name when it breaks the contract."""

from __future__ import annotations

import json

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.engine.layers.custom import load_step
from helpers import ROOT, SAMPLES, records_of, examples

MEDIUM = SAMPLES / "synth-medium.jsonl"
SMALL = SAMPLES / "synth-small.jsonl"


def _summary(cli, tmp_path, *args) -> dict:
    r = cli("replay", *args, "--format", "json", "-o", tmp_path / "out", "--force")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)["runs"][0]["summary"]


def test_the_shipped_example_replays_and_is_measured_like_a_preset(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    s = _summary(cli, tmp_path, MEDIUM, "-p", "py:examples/keep_last.py:keep_last")
    assert s["policy"] == "keep_last" and s["custom"] > 0 and s["reduction"] > 0.5
    assert s["recall"] < 1.0 and s["probes"] > 0  # what the agent later used, lost where the step dropped it
    assert s["cost_usd"] < s["raw_cost_usd"]
    out = tmp_path / "cmp"
    r = cli("compare", MEDIUM, SMALL, "-p", "s08", "-p", "examples/keep_last.toml", "--out", out, "-q",
            "--charts", "none")
    assert r.exit_code == 0, r.stderr
    entries = {e["label"]: e for e in json.loads((out / "results.json").read_text())["verdict"]["entries"]}
    assert set(entries) == {"s08", "keep-last", "none"} and entries["keep-last"]["summaries"] == 0


def test_a_step_that_keeps_everything_is_no_compaction(cli, tmp_path):
    same = _summary(cli, tmp_path, MEDIUM, "-p", "py:custom_steps:same")
    none = _summary(cli, tmp_path, MEDIUM, "-p", "none")
    assert same["custom"] == 0
    for key in ("tokens_total", "cost_usd", "recall", "retention", "violations_introduced", "cache_read_tokens"):
        assert same[key] == none[key], key


def test_made_messages_are_new_to_the_cache_and_broken_pairs_are_violations(cli, tmp_path):
    copies = _summary(cli, tmp_path, MEDIUM, "-p", "py:custom_steps:copies")
    none = _summary(cli, tmp_path, MEDIUM, "-p", "none")
    assert copies["custom"] == copies["calls"] and copies["tokens_total"] == none["tokens_total"]
    assert copies["cache_read_tokens"] < none["cache_read_tokens"] and copies["cost_usd"] > none["cost_usd"]
    broken = _summary(cli, tmp_path, MEDIUM, "-p", "py:custom_steps:drops_calls")
    assert broken["violations_introduced"] > 0 and broken["custom"] > 0


def test_it_runs_in_order_with_the_built_in_layers_and_its_settings_are_typed(tmp_path):
    policy = tmp_path / "mine.toml"
    policy.write_text('extends = "s08"\nname = "mine"\norder = ["budget", "custom", "snip", "micro"]\n'
                      '[custom]\nenabled = true\ncall = "custom_steps:keep_ends"\n[custom.settings]\nkeep = 6\n')
    p = load_policy(str(policy))
    assert p.order[1] == "custom" and p.custom.settings == {"keep": 6} and p.fingerprint != load_policy("s08").fingerprint
    run = replay(load_transcript(str(MEDIUM)), p)
    assert run.summary.custom > 0 and run.summary.snipped == 0  # (the step keeps fewer than snip's limit)
    assert any("custom" in e.layers for e in run.events)
    lost = [p for p in run.probe_ledger if p.status == "lost"]
    assert lost and {p.removed_by for p in lost} <= {"custom", "summary", "manual", "micro", "snip", "budget"}
    for bad, said in (({"keep": "many"}, "custom.settings.keep"), ({"kept": 3}, "custom.settings.kept: unknown key")):
        text = policy.read_text().replace("keep = 6", "\n".join(f"{k} = {json.dumps(v)}" for k, v in bad.items()))
        policy.write_text(text)
        with pytest.raises(Exception, match=said.replace(".", r"\.")):
            load_policy(str(policy))
        policy.write_text(text.replace("\n".join(f"{k} = {json.dumps(v)}" for k, v in bad.items()), "keep = 6"))


@pytest.mark.parametrize("step,said", [
    ("raises", "custom step custom_steps:raises raised RuntimeError at call 0: the step's own bug"),
    ("returns_none", "custom step custom_steps:returns_none returned a NoneType at call 0, not a list of messages"),
    ("mutates", "custom step custom_steps:mutates changed a message it was given at call 0"),
    ("reorders", "custom step custom_steps:reorders returned the messages it kept out of their order"),
])
def test_a_step_that_breaks_the_contract_is_refused_with_its_name(cli, tmp_path, step, said):
    r = cli("replay", SMALL, "-p", f"py:custom_steps:{step}", "-o", tmp_path / "out")
    assert r.exit_code == 2 and said in r.stderr, r.stderr
    assert r.stderr.count("\n") <= 2 and "Traceback" not in r.stderr  # one line (and a hint)
    assert not (tmp_path / "out").exists()  # nothing half-written


@pytest.mark.parametrize("ref,said", [
    ("py:no_such_module_here:trim", "no module 'no_such_module_here'"),
    ("py:custom_steps:nothing_of_that_name", "is not a function of it"),
    ("py:missing/file.py:trim", "no such file 'missing/file.py'"),
    ("py:no-such-entry-point", "no such step"),
])
def test_a_step_that_cannot_be_loaded_is_said_before_any_replay(cli, tmp_path, ref, said):
    r = cli("replay", SMALL, "-p", ref, "-o", tmp_path / "out")
    assert r.exit_code == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_an_installed_package_names_its_step_by_an_entry_point(cli, tmp_path, monkeypatch):
    """A package installed into the environment (its module and its dist-info, as pip lays them
    out) declares ``trim = ep_steps:trim`` in group compactlab.layers: ``-p py:trim`` finds it."""
    import importlib

    site = tmp_path / "site"
    (site / "ep_steps-0.1.dist-info").mkdir(parents=True)
    (site / "ep_steps.py").write_text(
        "def trim(messages, facts, settings):\n"
        "    keep = int(settings.get('keep', 4))\n"
        "    if len(messages) <= keep + 1:\n        return messages\n"
        "    tail = messages[-keep:]\n"
        "    while tail and tail[0]['role'] != 'assistant':\n        tail = tail[1:]\n"
        "    return [messages[0], *tail]\n")
    (site / "ep_steps-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-steps\nVersion: 0.1\n")
    (site / "ep_steps-0.1.dist-info" / "entry_points.txt").write_text("[compactlab.layers]\ntrim = ep_steps:trim\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    load_step.cache_clear()
    s = _summary(cli, tmp_path, MEDIUM, "-p", "py:trim")
    assert s["policy"] == "trim" and s["custom"] > 0
    toml = tmp_path / "ep.toml"
    toml.write_text('extends = "none"\norder = ["custom"]\n[custom]\nenabled = true\ncall = "trim"\n'
                    '[custom.settings]\nkeep = 10\n')
    wider = _summary(cli, tmp_path, MEDIUM, "-p", toml)
    assert wider["custom"] > 0 and wider["tokens_total"] > s["tokens_total"]  # its own setting, read as given
    load_step.cache_clear()


def test_the_docs_example_is_the_shipped_one():
    """The docs' 20-line example is examples/keep_last.py's code, line for line (comments and
    spacing aside), so the docs cannot drift from the file the test above runs."""
    readme = (ROOT / "docs" / "your-own-policy.md").read_text()
    section = readme[readme.index("## Your own compaction step"):]
    block = section[section.index("```python") + len("```python"):section.index("```", section.index("```python") + 9)]

    def code(text: str) -> list[str]:
        return [" ".join(line.split("#")[0].split()) for line in text.splitlines() if line.split("#")[0].strip()]

    shipped = code((ROOT / "examples" / "keep_last.py").read_text())
    lines = code(block)
    assert 15 <= len(lines) <= 22 and all(line in shipped for line in lines), [x for x in lines if x not in shipped]


def test_a_changed_implementation_is_a_changed_policy(cli, tmp_path):
    """The fingerprint holds a digest of the file that defines the step: check says the policy
    changed when the code did, under the same name and settings."""
    step = tmp_path / "mine.py"
    step.write_text("def trim(messages, facts, settings):\n    return messages[:1] + messages[-6:] if len(messages) > 7 "
                    "else messages\n")
    ref = f"py:{step}:trim"
    baseline = tmp_path / "baseline.json"
    assert cli("check", SMALL, "-p", ref, "--baseline", baseline, "--update-baseline").exit_code == 0
    before = load_policy(ref).fingerprint
    assert cli("check", SMALL, "-p", ref, "--baseline", baseline).exit_code == 0
    step.write_text(step.read_text().replace("[-6:]", "[-7:]"))
    load_step.cache_clear()
    assert load_policy(ref).fingerprint != before
    r = cli("check", SMALL, "-p", ref, "--baseline", baseline, "--format", "json")
    record = json.loads(r.stdout)["results"][0]
    assert record["fingerprint_changed"] is True, record
    load_step.cache_clear()


def test_tune_searches_the_typed_settings_of_your_own_step(cli, tmp_path, monkeypatch):
    """(#45 §5) ``--space custom.settings.KEY=LO:HI``: a setting the policy leaves at its settings
    dataclass's default is searched from it; an end its type refuses is said before any trial."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "tune"
    r = cli("tune", SMALL, MEDIUM, "-p", "examples/keep_last.toml", "--space", "custom.settings.keep=2:30",
            "--trials", "4", "--out", out, "-q")
    assert r.exit_code == 0, r.stderr
    doc = json.loads((out / "front.json").read_text())
    assert doc["space"] == ["custom.settings.keep int 2..30"] and doc["front"]
    assert all(2 <= p["custom.settings.keep"] <= 30 for p in doc["front"])
    point = (out / "policies" / "front-01.toml").read_text()
    assert "[custom]" in point and f"settings.keep = {doc['front'][0]['custom.settings.keep']}" in point
    assert 'name = "keep_last-front-01"' in point
    bad = cli("tune", SMALL, "-p", "examples/keep_last.toml", "--space", "custom.settings.nothing=1:3", "--trials", "2",
              "--out", tmp_path / "bad", "-q")
    assert bad.exit_code == 2 and "--space custom.settings.nothing: unknown key" in bad.stderr
    monkeypatch.chdir(tmp_path)  # (a front point's base, a file, is found from anywhere: by its absolute path)
    assert cli("replay", SMALL, "-p", out / "policies" / "front-01.toml", "--dry-run", "-q").exit_code == 0


# ---- (#55 §4) a step can't fool a job

@pytest.fixture
def entry_signals():
    """SIGINT handled as the entry point handles it (``interrupts.install``: counted), for the
    in-process CLI; put back after."""
    import signal

    from compactlab.plumbing import interrupts

    before = signal.getsignal(signal.SIGINT)
    if before is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupts._interrupted)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_real_ctrl_c_is_told_from_an_interrupt_code_raised(entry_signals):
    import os
    import signal

    from compactlab.plumbing import interrupts

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        pytest.skip("SIGINT is ignored here: no real Ctrl-C can arrive")
    before = interrupts.delivered()
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as exc:
        assert not interrupts.from_signal(exc, before)
    with pytest.raises(KeyboardInterrupt) as real:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000_000):  # (the handler runs between two bytecodes, at once)
            pass
    assert interrupts.from_signal(real.value, before)

@pytest.mark.parametrize("job", ["replay", "compare1", "compare2", "check"])
@pytest.mark.parametrize("step,said", [
    ("exits", "custom step custom_steps:exits exited (SystemExit: 0) at call 0"),
    ("interrupts", "custom step custom_steps:interrupts raised KeyboardInterrupt at call 0"),
])
def test_a_step_that_exits_or_raises_an_interrupt_fails_every_job(cli, tmp_path, job, step, said, entry_signals):
    out = tmp_path / "out"
    args = {"replay": ["replay"], "compare1": ["compare", "--jobs", "1"], "compare2": ["compare", "--jobs", "2"],
            "check": ["check", "--baseline", tmp_path / "b.json", "--update-baseline"]}[job]
    r = cli(*args, SMALL, "-p", f"py:custom_steps:{step}", *(["-o", out] if job != "check" else []))
    assert r.exit_code == 1, (r.exit_code, r.stderr)
    assert said in r.stderr and "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "b.json").exists()


def test_a_step_that_prints_writes_to_stderr_marked_never_into_the_output(cli, tmp_path):
    r = cli("replay", SMALL, "-p", "py:custom_steps:prints", "--format", "json", "-o", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    json.loads(r.stdout)  # (the output is compactlab's alone)
    assert "\x1b" not in r.stdout + r.stderr
    assert "custom step custom_steps:prints printed (call 0): step says \\x1b[31mred\\x1b[0m" in r.stderr, r.stderr


@pytest.mark.parametrize("step,said", [
    ("tool_use_without_id", "custom step custom_steps:tool_use_without_id returned, at call 0, message 1 block 0: "
                            "a tool_use block without an id"),
    ("result_in_assistant", "block 0: a tool_result block in an assistant message (it belongs in a user message)"),
    ("twice_the_same_id", "two tool_use blocks with id 'dup'"),
])
def test_every_block_a_step_makes_is_validated_with_the_call_and_the_block_named(cli, tmp_path, step, said):
    r = cli("replay", SMALL, "-p", f"py:custom_steps:{step}", "-o", tmp_path / "out")
    assert r.exit_code == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_your_step_enabled_but_not_in_order_is_an_error_never_silently_off(cli, tmp_path):
    policy = tmp_path / "p.toml"
    policy.write_text('extends = "none"\n[custom]\nenabled = true\ncall = "custom_steps:same"\n')
    r = cli("replay", SMALL, "-p", policy, "-o", tmp_path / "out")
    assert r.exit_code == 2 and "custom is enabled but not in order" in r.stderr and "order = ['custom']" in r.stderr, \
        r.stderr


def test_compactlab_debug_shows_the_steps_traceback(cli, tmp_path, monkeypatch):
    r = cli("replay", SMALL, "-p", "py:custom_steps:raises", "-o", tmp_path / "out")
    assert "Traceback" not in r.stderr and "COMPACTLAB_DEBUG=1" in r.stderr
    monkeypatch.setenv("COMPACTLAB_DEBUG", "1")
    r = cli("replay", SMALL, "-p", "py:custom_steps:raises", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "Traceback" in r.stderr and "in raises" in r.stderr \
        and "RuntimeError: the step's own bug" in r.stderr, r.stderr


def test_a_duplicate_id_the_recording_holds_is_the_recordings_not_the_steps(cli, tmp_path):
    """A recording with two tool_use blocks of one id (found on a shared OTLP trace): a step that
    sends it on, made anew (as a framework's step does), is not refused for it."""
    from helpers import tool_session, write_jsonl

    msgs = tool_session(4, prefix="same")
    for m in msgs:  # every call and result of one id
        for b in m["content"] if isinstance(m["content"], list) else []:
            if "id" in b:
                b["id"] = "dup"
            if "tool_use_id" in b:
                b["tool_use_id"] = "dup"
    path = write_jsonl(tmp_path / "dup.jsonl", msgs)
    r = cli("replay", path, "-p", "py:custom_steps:copies", "-o", tmp_path / "out")
    assert r.exit_code == 0, r.stderr


# ---- (#56 §3) a step sees the change: read-only messages, the list kept as it is, facts.unchanged

def test_the_messages_a_step_is_given_are_read_only_to_the_last_block(cli, tmp_path):
    r = cli("replay", SMALL, "-p", "py:custom_steps:mutates_a_block", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "changed a message it was given at call 1" in r.stderr, r.stderr  # (its first list)
    edited = _summary(cli, tmp_path, SMALL, "-p", "py:custom_steps:edits_a_deep_copy")
    assert edited["custom"] > 0


@pytest.mark.parametrize("core", ["python", "native"])
def test_read_only_messages_copy_and_serialise_as_plain_ones(monkeypatch, core):
    import copy

    import orjson

    from compactlab.engine.layers.custom import MessageChanged, _made_read_only

    _core(monkeypatch, core)
    m = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text",
                                                                                           "text": "x"}]}]}
    ro = _made_read_only()(m)
    assert ro == m and orjson.loads(orjson.dumps(ro)) == m and json.loads(json.dumps(ro)) == m
    for change in (lambda: ro.__setitem__("role", "x"), lambda: ro["content"].append(1),
                   lambda: ro["content"][0]["content"][0].update(text="y"), lambda: ro.pop("role")):
        with pytest.raises(MessageChanged):
            change()
    plain = copy.deepcopy(ro)
    plain["content"][0]["content"][0]["text"] = "changed"
    assert type(plain) is dict and type(plain["content"]) is list and ro["content"][0]["content"][0]["text"] == "x"
    assert type(dict(ro)) is dict and type(list(ro["content"])) is list and type(copy.copy(ro)) is dict


def _core(monkeypatch, core: str) -> None:
    from compactlab import core as cores

    if core == "native" and cores.native_module() is None:
        pytest.skip("the native core is not built in this install (installed without a Rust toolchain)")
    monkeypatch.setenv("COMPACTLAB_CORE", core)


def _shape(value, leaves: list) -> object:
    """A value's containers by their exact types, its other values by identity (in ``leaves``)."""
    if type(value) in (dict, list) or type(value).__name__ in ("ReadOnlyDict", "ReadOnlyList"):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        return type(value).__name__, [(k, _shape(v, leaves)) for k, v in items]
    leaves.append(value)
    return "leaf"


def test_the_native_core_makes_a_message_read_only_as_python_does():
    """``_native.read_only`` against ``custom._read_only`` (the reference) on generated values: the
    same containers, each made anew, of the same classes, the same leaves shared (a dict subclass
    other than the read-only one kept as it is), and nesting beyond Python's limit refused."""
    import collections

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from compactlab import core as cores
    from compactlab.engine.layers.custom import ReadOnlyDict, ReadOnlyList, _read_only

    native = cores.native_module()
    if native is None:
        pytest.skip("the native core is not built in this install (installed without a Rust toolchain)")
    leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.floats(allow_nan=False),
                     st.builds(collections.OrderedDict, st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)),
                     st.builds(tuple, st.lists(st.integers(), max_size=2)))
    tree = st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4),
        st.lists(inner, max_size=3).map(ReadOnlyList), st.dictionaries(st.text(max_size=3), inner, max_size=3).map(
            ReadOnlyDict)), max_leaves=30)

    @settings(max_examples=examples(300), deadline=None)
    @given(tree)
    def same(value):
        want = _read_only(value)
        got = native.read_only(value, dict_class=ReadOnlyDict, list_class=ReadOnlyList)
        leaves_want, leaves_got = [], []
        assert _shape(got, leaves_got) == _shape(want, leaves_want)
        assert all(a is b for a, b in zip(leaves_got, leaves_want)) and len(leaves_got) == len(leaves_want)
        if isinstance(value, (dict, list)):
            assert got is not value and got == value

    same()
    deep: list = []
    for _ in range(1100):
        deep = [deep]
    with pytest.raises(RecursionError):
        native.read_only(deep, dict_class=ReadOnlyDict, list_class=ReadOnlyList)


def test_a_step_replays_alike_on_both_cores(monkeypatch):
    import orjson

    runs = []
    for core in ("python", "native"):
        _core(monkeypatch, core)
        runs.append(replay(load_transcript(str(SMALL)), load_policy("py:custom_steps:edits_a_deep_copy")))
    a, b = (orjson.loads(orjson.dumps(r.summary)) for r in runs)
    assert (a.pop("core"), b.pop("core")) == ("python", "native")
    a.pop("timing", None), b.pop("timing", None)
    assert a == b and records_of(runs[0].calls) == records_of(runs[1].calls) and a["custom"] > 0


def test_a_step_is_told_how_many_messages_are_the_ones_given_before():
    import custom_steps

    custom_steps.UNCHANGED.clear()
    run = replay(load_transcript(str(SMALL)), load_policy("py:custom_steps:records_unchanged"))
    seen = custom_steps.UNCHANGED
    assert seen[0][:2] == (0, 0) and len(seen) == run.summary.calls
    for (_, _, before), (_, unchanged, _) in zip(seen, seen[1:]):
        assert unchanged == before  # (nothing changed it: every message given before is given again)


def test_what_a_step_makes_at_a_call_is_bounded(cli, tmp_path, monkeypatch):
    """(#56 §5) A step's returned context had no size bound: what it makes at a call is held to
    COMPACTLAB_MAX_ANSWER_MB, as a process's answer is."""
    monkeypatch.setenv("COMPACTLAB_MAX_ANSWER_MB", "2")
    r = cli("replay", SMALL, "-p", "py:custom_steps:makes_too_much", "-o", tmp_path / "out")
    assert r.exit_code == 2 and "more than 2 MiB of messages it made" in r.stderr, r.stderr
    monkeypatch.setenv("COMPACTLAB_MAX_ANSWER_MB", "8")
    assert cli("replay", SMALL, "-p", "py:custom_steps:makes_too_much", "--dry-run", "-q").exit_code == 0
    monkeypatch.setenv("COMPACTLAB_MAX_ANSWER_MB", "lots")
    r = cli("replay", SMALL, "-p", "py:custom_steps:makes_too_much", "--dry-run", "-q")
    assert r.exit_code == 2 and "COMPACTLAB_MAX_ANSWER_MB=lots: not a number of MiB" in r.stderr, r.stderr
