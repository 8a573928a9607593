"""next-action end to end against fake models on loopback (issue #30 §7): agreement drops exactly
where a policy removed what the next step needed, the control agrees, a rerun sends nothing, the
estimate is what the fake was sent, money comes first, and the key never leaks."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from contextlib import contextmanager

import pytest

from compactlab import load_transcript
from fake_models import FakeModels
from helpers import ROOT, SAMPLES, asst, results, tr, tu, user, write_jsonl

KEY = "sk-ant-nextaction-SECRET-0123456789"
OPENAI_KEY = "sk-openai-nextaction-SECRET-9876543210"


def _session(path, n: int = 24):
    """An agent that lists a folder, then, many calls later, opens the file the listing showed:
    the file's name is only ever in that old listing (``ls`` names the folder, not the file)."""
    filler = "\n".join(f"line {k}: nothing to see here" for k in range(60))
    messages = [user("find the module that parses the config and fix it")]
    for i in range(n):  # (one listing is long: a policy that persists long results changes it alone)
        messages.append(asst(tu(f"ls{i}", "bash", command=f"ls pkg{i}")))
        messages.append(results(tr(f"ls{i}", f"pkg{i}/parser_{i}_impl.py\n{filler * (4 if i == n // 2 else 1)}")))
    for i in range(n):
        messages.append(asst(tu(f"rd{i}", "read_file", path=f"pkg{i}/parser_{i}_impl.py")))
        messages.append(results(tr(f"rd{i}", f"def parse_{i}(): pass\n{filler}")))
    messages.append(asst("Fixed."))
    return write_jsonl(path, messages)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    session = _session(tmp_path / "session.jsonl")
    api = FakeModels([load_transcript(str(session))])
    url, srv = api.serve()
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    api.session = session
    yield api
    srv.shutdown()


@contextmanager
def _serving(transcripts: list, monkeypatch, tmp_path):
    """The fake models of ``transcripts`` on loopback, the Messages API's variables pointing at them."""
    api = FakeModels(transcripts)
    url, srv = api.serve()
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    try:
        yield api
    finally:
        srv.shutdown()


def _run(cli, fake, tmp_path, *extra):
    return cli("next-action", fake.session, "-p", "observation-masking", "--samples", "12", "--format", "json",
               "--out", tmp_path / "out", *extra)


def test_agreement_drops_exactly_where_the_policy_removed_what_the_next_step_needed(cli, fake, tmp_path):
    r = _run(cli, fake, tmp_path)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    samples = doc["samples"]
    assert len(samples) == 12 and len(fake.message_requests) == 24
    lost = [s for s in samples if s["lost_probes"]]
    assert lost and len(lost) < len(samples)  # both strata are represented
    for s, (first, second) in zip(samples, zip(fake.asked[::2], fake.asked[1::2])):  # (sent in sample order)
        # the fake answers with the recorded action exactly when the file it opens is still in the context
        assert s["policy_arm"]["agrees"] is first["held"], s
        assert s["control_arm"]["agrees"] is second["held"] is True, s  # no compaction: every name is there
        assert first["held"] is (not s["lost_probes"]), s  # a lost probe is exactly a removed file name here
    [p] = doc["policies"]
    assert p["samples"] == 12 and p["control_agreement"] == 1.0
    assert p["lost_agreement"] == 0.0 and p["kept_agreement"] == 1.0
    # over every candidate call: each stratum's rate weighted by its share of them (#46 §1)
    share = p["lost_candidates"] / p["candidates"]
    assert p["lost_candidates"] + p["kept_candidates"] == p["candidates"] and 0 < share < 1
    assert p["agreement"] == pytest.approx(1 - share) and p["difference"] == pytest.approx(-share)
    low, high = p["difference_interval"]
    assert -1 <= low < p["difference"] < high < 0  # the policy's context loses agreement, and surely
    # above chance: the rate a random recorded action of the session gets taken out
    assert 0 <= p["chance_agreement"] < 0.5 and p["above_chance"] == pytest.approx(
        (p["agreement"] - p["chance_agreement"]) / (1 - p["chance_agreement"]))
    for name in ("next_action.json", "samples.csv", "report.md"):
        assert (tmp_path / "out" / name).is_file()


def test_a_rerun_sends_nothing_and_says_so(cli, fake, tmp_path):
    first = _run(cli, fake, tmp_path)
    assert first.exit_code == 0, first.stderr
    sent = len(fake.message_requests)
    again = _run(cli, fake, tmp_path, "--force")
    assert again.exit_code == 0, again.stderr
    assert len(fake.message_requests) == sent
    doc = json.loads(again.stdout)
    assert doc["sent"] == 0 and doc["spent_usd"] == 0 and doc["estimate_usd"] == 0
    assert [s["policy_arm"]["agrees"] for s in doc["samples"]] == \
        [s["policy_arm"]["agrees"] for s in json.loads(first.stdout)["samples"]]
    assert "0 request(s)" in again.stderr


#: a policy that only persists each big result at the call it arrives: the context differs in its last
#: message only, so the two requests of a sample share everything before it (a prefix worth caching)
PERSIST_ONLY = """extends = "none"
name = "persist-only"
order = ["budget"]
[budget]
enabled = true
max_chars = 4000
persist_threshold = 4000
preview_chars = 100
"""


@pytest.mark.parametrize("overhead", [0, 20_000])
def test_the_estimate_is_what_the_fake_was_sent(cli, fake, tmp_path, overhead):
    """The estimate counts what is sent (the tools and the messages, as the fake bills them), never
    the calibration's overhead (#46 §5: 25,759 tokens of Claude Code's own prompt, never sent, made
    the estimate 1.28× what a Claude Code session's requests bill)."""
    policy = tmp_path / "persist-only.toml"
    policy.write_text(PERSIST_ONLY)
    r = cli("next-action", fake.session, "-p", policy, "--samples", "8", "--format", "json", "--out", tmp_path / "out",
            "--set", f"size.overhead_tokens={overhead}")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert all("tools" in a["body"] for a in fake.requests if a["path"].endswith("/v1/messages"))  # (billed too)
    sent_tokens = [a["measured_tokens"] for a in fake.asked]
    estimated = [t for s in doc["samples"] for t in (s["policy_tokens"], s["control_tokens"])]
    assert len(estimated) == 16 and estimated == sent_tokens  # request by request, in the order sent
    # the prefix each policy arm writes to the prompt cache is read by its control
    assert sum(s["prefix_tokens"] > 0 for s in doc["samples"]) >= 4
    for s, (first, second) in zip(doc["samples"], zip(fake.asked[::2], fake.asked[1::2])):
        # (the first sample with a prefix writes it; a later one with the same prefix reads it already)
        assert first["usage"]["cache_creation_input_tokens"] + first["usage"]["cache_read_input_tokens"] \
            == s["prefix_tokens"]
        assert second["usage"]["cache_read_input_tokens"] == s["prefix_tokens"]
        assert second["usage"]["cache_creation_input_tokens"] == 0
    # what was billed is the estimate but for the replies, estimated at --max-tokens (256) each
    from compactlab.engine.cost.prices import load_prices

    p = load_prices().lookup("claude-haiku-4-5")
    reply_gap = sum((256 - 20) * p.output / 1e6 for _ in fake.asked)
    assert doc["spent_usd"] == pytest.approx(doc["estimate_usd"] - reply_gap, abs=1e-6)


def test_money_first_the_estimate_stops_an_expensive_run(cli, fake, tmp_path):
    r = _run(cli, fake, tmp_path, "--max-cost", "0.001")
    assert r.exit_code == 2
    assert "above --max-cost $0.00" in r.stderr and "nothing was sent" in r.stderr and "hint: --max-cost" in r.stderr
    assert fake.requests == [] and not (tmp_path / "out").exists()


def test_dry_run_lists_the_samples_and_the_estimate_and_sends_nothing(cli, fake, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")  # (a dry run needs no key)
    r = cli("next-action", fake.session, "-p", "observation-masking", "--samples", "4", "--dry-run",
            "--out", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    assert "next-action samples: 4" in r.stdout and "estimate: $" in r.stdout
    assert fake.requests == [] and not (tmp_path / "out").exists()
    assert "(--max-cost $1.00)" in r.stdout  # (within it)
    # (a transcript by its file's name, as compare's table names it: a narrow terminal cuts a cell's end;
    # the one transcript of every sample named once, in the title, and not in each row)
    assert os.path.basename(str(fake.session)) in r.stdout and str(fake.session) not in r.stdout
    assert r.stdout.count(os.path.basename(str(fake.session))) == 1
    assert f"next-action samples: 4, all of {os.path.basename(str(fake.session))}" in r.stdout
    assert "recorded next action" in r.stdout and "tokens" in r.stdout and "est. cost" in r.stdout
    over = cli("next-action", fake.session, "-p", "observation-masking", "--samples", "4", "--dry-run",
               "--max-cost", "0.0001")
    assert over.exit_code == 0, over.stderr  # (a dry run is shown, not stopped: it says what a run would do)
    estimate = float(over.stdout.split("estimate: $", 1)[1].split(" ", 1)[0])  # (shown to the cent)
    enough = re.search(r"above --max-cost \$0\.00: a run would send nothing \(--max-cost (\d+\.\d\d) spends it: "
                       r"the estimate and 5% more\)", over.stdout)  # (why it is more than the estimate: said)
    assert enough is not None and estimate * 1.04 <= float(enough.group(1)) <= estimate * 1.06 + 0.01, over.stdout
    assert fake.requests == []


def test_a_dry_run_says_which_samples_it_will_not_send_and_why(cli, tmp_path, monkeypatch):
    """The dry run of the bundled session listed four samples at "$0.000" and said nothing more:
    their control (no compaction, 239,728 tokens) is over the asked model's window, so they are
    never sent and count apart. Their cost now reads "not sent", and a line names them, their
    window and how they are counted."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    r = cli("next-action", SAMPLES / "synth-medium.jsonl", "-p", "observation-masking", "-p", "s08",
            "--samples", "10", "--dry-run", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    unsent = [s for s in doc["samples"] if s["skipped"]]
    assert unsent and all(s["control_tokens"] > 200_000 and s["estimate_usd"] == 0 for s in unsent)
    assert all(s["control_tokens"] <= 200_000 for s in doc["samples"] if not s["skipped"])
    # (the dry run's plan as JSON, where it printed its table whatever --format asked)
    assert doc["dry_run"] is True and doc["window"] == 200_000 and doc["model"] == "claude-haiku-4-5"
    assert doc["estimate_usd"] == pytest.approx(sum(s["estimate_usd"] for s in doc["samples"]), abs=1e-5)
    assert doc["requests"] + doc["cached"] <= 2 * (len(doc["samples"]) - len(unsent))
    assert doc["within_max_cost"] is (doc["estimate_usd"] <= doc["max_cost_usd"])
    assert set(doc["candidates"]) == {"observation-masking", "s08"} and "policy_arm" not in doc["samples"][0]
    text = cli("next-action", SAMPLES / "synth-medium.jsonl", "-p", "observation-masking", "-p", "s08",
               "--samples", "10", "--dry-run").stdout
    rows = [line for line in text.splitlines() if re.match(r"^(s08|observation-masking) +\d+ ", line)]
    assert len(rows) == len(doc["samples"]) and sum(row.endswith("not sent") for row in rows) == len(unsent), text
    calls = {p: ", ".join(str(s["call"]) for s in unsent if s["policy"] == p) for p in ("observation-masking", "s08")}
    said = "; ".join(f"{p} call {c}" for p, c in calls.items() if c)
    assert (f"not sent: {len(unsent)} sample(s) whose control (its tokens above) is over claude-haiku-4-5's window "
            f"(200,000 tokens), {said}; each is counted apart as a control the model refuses") in text, text
    from types import SimpleNamespace as NS

    from compactlab.reports.next_action_report import CALLS_NAMED, _calls

    many = [NS(policy="s08", call=c) for c in range(CALLS_NAMED + 3)] + [NS(policy="none", call=7)]
    assert _calls(many) == f"s08 call {', '.join(map(str, range(CALLS_NAMED)))} and 3 more; none call 7"


def test_a_dry_run_with_nothing_to_ask_prints_no_empty_table(cli, tmp_path, monkeypatch):
    """A transcript with no call (or a policy that never changes a context) has no sample: the dry
    run said so under a table of headers only; it now says it in one line."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    path = tmp_path / "one.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n')
    r = cli("next-action", path, "-p", "s08", "--dry-run")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("next-action samples: none\ns08: no call's context differs from no compaction's: "
                               "nothing to ask\nestimate: $0.00 at most for 0 request(s)"), r.stdout
    assert "recorded next action" not in r.stdout


def test_no_key_is_said_before_any_request(cli, fake, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    r = _run(cli, fake, tmp_path)
    assert r.exit_code == 2 and "ANTHROPIC_API_KEY is not set" in r.stderr
    assert fake.requests == []


def test_the_key_never_leaks_even_when_the_server_echoes_it(cli, fake, tmp_path):
    fake.script = [(500, f"internal error for key {KEY}")] * 3  # the SDK retries twice, then gives up
    r = _run(cli, fake, tmp_path, "--samples", "1")
    assert r.exit_code == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["samples"][0]["policy_arm"]["error"].startswith("failed: HTTP 500")
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    for text in (r.stdout, r.stderr, written):
        assert KEY not in text and KEY[8:24] not in text
    assert all(req["headers"].get("authorization") == f"Bearer {KEY}" for req in fake.requests)  # (sent, only there)


def test_a_refused_key_stops_the_command(cli, fake, tmp_path):
    fake.script = [(401, "invalid x-api-key")]
    r = _run(cli, fake, tmp_path)
    assert r.exit_code == 2 and "refused the key" in r.stderr and KEY not in r.stderr


def test_an_openai_compatible_endpoint(cli, fake, tmp_path):
    r = cli("next-action", fake.session, "-p", "observation-masking", "--samples", "6", "--format", "json",
            "--model", "gpt-5-mini", "--out", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["api"] == "openai" and doc["model"] == "gpt-5-mini"
    chats = [q for q in fake.requests if q["path"] == "/chat/completions"]
    assert len(chats) == 12 and all(q["body"]["temperature"] == 0 for q in chats)
    assert all(q["headers"].get("authorization") == f"Bearer {OPENAI_KEY}" for q in chats)
    for s in doc["samples"]:
        assert s["policy_arm"]["agrees"] is (not s["lost_probes"]) and s["control_arm"]["agrees"] is True
    for text in (r.stdout, r.stderr):
        assert OPENAI_KEY not in text


def test_the_table_says_what_agreement_means(cli, fake, tmp_path):
    r = cli("next-action", fake.session, "-p", "observation-masking", "-p", "none", "--samples", "4",
            "--out", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    assert "next-action agreement: claude-haiku-4-5" in r.stdout and "the same tool, and every other field" in r.stdout
    assert "none: no call's context differs from no compaction's: nothing to ask" in r.stdout


def test_an_interrupt_keeps_the_replies_that_came_back(fake, tmp_path):
    """SIGINT while the model is asked: exit 130, the finished samples written, and the cache makes
    the rerun send only what was missing."""
    fake.hold(after=3)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "compactlab", "next-action", str(fake.session), "-p", "observation-masking",
           "--samples", "6", "--format", "json", "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    fake.wait_held(1)
    proc.send_signal(signal.SIGINT)
    fake.release()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert b"interrupted" in err
    doc = json.loads((tmp_path / "out" / "next_action.json").read_text())
    assert doc["interrupted"] is True
    asked = sum(s["policy_arm"] is not None for s in doc["samples"]) + sum(s["control_arm"] is not None
                                                                            for s in doc["samples"])
    assert 3 <= asked <= 4
    before = len(fake.message_requests)
    again = subprocess.run([*cmd, "--force"], env=env, capture_output=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert len(fake.message_requests) - before == 12 - asked  # only what had not come back



def test_on_the_shared_sessions_and_trajectories(cli, shared_transcripts, tmp_path, monkeypatch):
    """Every format the shared folder has a family of: the run completes with both arms answered
    for every sample, and the control agrees at least as often as the policy's context."""
    files = sorted(str(p) for p in [*shared_transcripts.glob("claude_code/spotter/*.jsonl"),
                                    *shared_transcripts.glob("openai/*.traj*"), *shared_transcripts.glob("codex/*.jsonl"),
                                    *shared_transcripts.glob("openhands/basic*.json")])
    with _serving([load_transcript(f) for f in files], monkeypatch, tmp_path) as api:
        r = cli("next-action", *files, "-p", "s08", "-p", "observation-masking", "--samples", "8", "--max-cost", "100",
                "--format", "json", "--out", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    skipped = sum(s["skipped"] is not None for s in doc["samples"])  # (a control over haiku's window: not sent)
    assert len(doc["samples"]) == 16 and len(api.message_requests) == 2 * (16 - skipped)
    assert {s["transcript"] for s in doc["samples"]} - set(files) == set()
    for p in doc["policies"]:
        assert p["samples"] + p["control_refused"] == 8 and p["failed"] == 0
        assert p["control_agreement"] >= p["agreement"]
    assert all(s["policy_arm"]["agrees"] <= s["control_arm"]["agrees"] for s in doc["samples"] if s["skipped"] is None)
    assert "\ufdd0" not in r.stderr  # (Codex's redacted tool names are shown without their mark)


def test_compare_asks_when_asked_and_reports_it(cli, fake, tmp_path):
    out = tmp_path / "cmp"
    r = cli("compare", fake.session, "-p", "observation-masking", "-p", "s08", "--next-action", "4", "--out", out,
            "--charts", "none", "--jobs", "1")
    assert r.exit_code == 0, r.stderr
    doc = json.loads((out / "next_action.json").read_text())
    # none is the control, not asked; a call both policies sampled has one control, asked once
    assert "estimate: $" in r.stderr and len(fake.message_requests) == doc["sent"] <= 16
    assert f"for {doc['sent']} request(s)" in r.stderr  # the estimate counted it once too
    assert [p["policy"] for p in doc["policies"]] == ["observation-masking", "s08"]
    assert (out / "samples.csv").is_file()
    assert "## Next-action agreement" in (out / "report.md").read_text()
    assert "<h2>Next-action agreement</h2>" in (out / "report.html").read_text()
    plain = cli("compare", fake.session, "-p", "s08", "--out", tmp_path / "plain", "--charts", "none", "--jobs", "1")
    assert plain.exit_code == 0 and len(fake.message_requests) == doc["sent"]  # never unless asked
    assert not (tmp_path / "plain" / "next_action.json").exists()


def test_compare_prices_the_next_actions_before_any_run(cli, fake, tmp_path):
    r = cli("compare", fake.session, "-p", "s08", "--next-action", "4", "--max-cost", "0.0001",
            "--out", tmp_path / "cmp", "--charts", "none", "--jobs", "1")
    assert r.exit_code == 2 and "above --max-cost" in r.stderr
    assert fake.requests == [] and not (tmp_path / "cmp").exists()


def test_check_gates_on_next_action_only_when_asked(cli, fake, tmp_path):
    baseline = tmp_path / "baseline.json"
    common = [fake.session, "-p", "observation-masking", "--baseline", baseline]
    assert cli("check", *common, "--update-baseline").exit_code == 0
    assert cli("check", *common).exit_code == 0 and fake.requests == []  # never unless asked
    r = cli("check", *common, "--next-action", "12")
    assert r.exit_code == 1, r.stderr
    assert "error: next-action observation-masking: agreement" in r.stderr and "surely more than 10 points" in r.stderr
    sent = len(fake.message_requests)
    assert sent == 24
    lenient = cli("check", *common, "--next-action", "12", "--next-action-margin", "1")
    assert lenient.exit_code == 0, lenient.stderr
    assert "next-action observation-masking: agreement" in lenient.stderr
    assert len(fake.message_requests) == sent  # the same samples: answered from the cache


def test_every_job_that_asks_says_its_plan_the_same_way_before_any_request(cli, tmp_path, monkeypatch):
    """next-action and compare said the estimate before asking, check said nothing of it; only
    next-action's dry run named the samples not sent (their control over the window). Each job
    that asks now says the same lines first: the samples not sent, then the estimate."""
    session = SAMPLES / "synth-medium.jsonl"
    policies = ["-p", "s08", "-p", "observation-masking"]
    said = {}
    with _serving([load_transcript(str(session))], monkeypatch, tmp_path) as api:
        r = cli("next-action", session, *policies, "--samples", "10", "--max-cost", "5", "--format", "json",
                "--out", tmp_path / "na")
        said["next-action"] = r
        r = cli("compare", session, *policies, "--next-action", "10", "--max-cost", "5", "--dry-run")
        said["compare"] = r
        baseline = tmp_path / "baseline.json"
        assert cli("check", session, *policies, "--baseline", baseline, "--update-baseline").exit_code == 0
        said["check"] = cli("check", session, *policies, "--baseline", baseline, "--next-action", "10",
                            "--max-cost", "5", "--next-action-margin", "1")
    assert api.message_requests  # (next-action and check asked)
    lines = {}
    for job, r in said.items():
        assert r.exit_code == 0, (job, r.output)
        plan = [line for line in r.stderr.splitlines() if line.startswith(("not sent: ", "estimate: $"))]
        assert [line[:9] for line in plan] == ["not sent:", "estimate:"], (job, r.stderr)
        lines[job] = plan[0]
    assert len(set(lines.values())) == 1, lines  # (the very same sentence from each job)
    assert "s08 call 109; observation-masking call 109, 112, 116" in lines["check"]


def test_a_policy_named_twice_and_a_missing_openai_package_are_clear_errors(cli, fake, tmp_path, monkeypatch):
    r = cli("next-action", fake.session, "-p", "s08", "-p", "s08", "--dry-run")
    assert r.exit_code == 2 and "policy s08 named twice" in r.stderr
    import builtins

    real_import = builtins.__import__

    def no_openai(name, *args, **kwargs):
        if name == "openai":
            raise ImportError("No module named 'openai'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_openai)
    r = _run(cli, fake, tmp_path, "--model", "gpt-5-mini", "--samples", "1")
    assert r.exit_code == 2 and "the openai package is not installed" in r.stderr
    assert "pip install 'compactlab[openai]'" in r.stderr and fake.requests == []


def test_a_sample_is_offered_the_tools_used_before_it_never_a_later_one(cli, fake, tmp_path):
    """(#46 §3) No look-ahead: the control's context is every message before the call, so the
    tools it is offered are exactly those its messages call; the policy's arm is offered the same."""
    r = _run(cli, fake, tmp_path)
    assert r.exit_code == 0, r.stderr
    bodies = [q["body"] for q in fake.message_requests]
    by_pair = list(zip(bodies[::2], bodies[1::2]))
    assert by_pair
    for policy_body, control_body in by_pair:
        offered = {t["name"] for t in control_body.get("tools", [])}
        used = {b["name"] for m in control_body["messages"] if m["role"] == "assistant" and isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_use"}
        assert offered == used
        assert {t["name"] for t in policy_body.get("tools", [])} == offered
    whole = {b["name"] for m in json.loads("[" + ",".join(fake.session.read_text().splitlines()) + "]")
             if m.get("role") == "assistant" and isinstance(m.get("content"), list)
             for b in m["content"] if b.get("type") == "tool_use"}
    assert any({t["name"] for t in c.get("tools", [])} < whole for _, c in by_pair)  # an early call lacks a later tool


def _control_tokens(cli, fake, tmp_path) -> list[int]:
    """The controls' tokens of ``_run``'s samples (a first run, its replies not cached)."""
    r = _run(cli, fake, tmp_path / "first", "--no-cache")
    assert r.exit_code == 0, r.stderr
    return sorted(s["control_tokens"] for s in json.loads(r.stdout)["samples"])


def test_a_control_the_model_refuses_is_counted_apart_never_as_a_disagreement(cli, fake, tmp_path):
    """(#46 §4) A control over the asked model's window is rejected (HTTP 400): the sample says
    nothing of the policy and is counted apart, not as a control that disagrees (which favoured
    the policy); the policy's own rejected context would still be a disagreement of the policy."""
    tokens = _control_tokens(cli, fake, tmp_path)
    fake.window = tokens[len(tokens) // 2]
    over = sum(t > fake.window for t in tokens)
    assert 0 < over < len(tokens)
    r = _run(cli, fake, tmp_path, "--no-cache")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    refused = [s for s in doc["samples"] if s["control_arm"] and (s["control_arm"]["error"] or "").startswith("rejected")]
    assert len(refused) == over and all(s["control_arm"]["agrees"] is False for s in refused)
    policy = doc["policies"][0]
    assert policy["control_refused"] == over and policy["samples"] == len(tokens) - over and policy["failed"] == 0
    answered = [s for s in doc["samples"] if s not in refused]
    assert policy["control_agreement"] == sum(s["control_arm"]["agrees"] for s in answered) / len(answered)


def test_a_control_known_to_be_over_the_models_window_is_not_sent(cli, fake, tmp_path, monkeypatch):
    from compactlab.engine.cost import prices

    tokens = _control_tokens(cli, fake, tmp_path)
    window = tokens[len(tokens) // 2]
    over = sum(t > window for t in tokens)
    monkeypatch.setattr(prices, "known_window", lambda model: window)
    before = len(fake.message_requests)
    r = _run(cli, fake, tmp_path, "--no-cache")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    skipped = [s for s in doc["samples"] if s["skipped"]]
    assert len(skipped) == over and all(s["policy_arm"] is None and s["control_arm"] is None for s in skipped)
    assert "over claude-haiku-4-5's window" in skipped[0]["skipped"]
    assert len(fake.message_requests) - before == 2 * (len(tokens) - over)  # nothing sent for them
    assert doc["policies"][0]["control_refused"] == over


def _true_agreement(api: FakeModels, transcripts: list, policy_name: str) -> float:
    """(#46 §6) The fake model's agreement over every candidate call of ``policy_name``: what it
    answers on the policy's context (the recorded step exactly when what that step needs is in it),
    judged by the rule. What the sampled estimate must recover."""
    from compactlab import load_policy, replay
    from compactlab.next_action.actions import action_of, agree, tool_action
    from compactlab.next_action.requests import sendable
    from compactlab.next_action.sampling import differs
    from fake_models import _compact

    from compactlab.jobs.base import calibrations_for

    policy = load_policy(policy_name)
    verdicts = []
    for t, fit in zip(transcripts, calibrations_for(transcripts, None)):  # (as the job replays them)
        calls = replay(t, policy, calibration=fit).calls
        wanted = {c.call for c in calls if differs(c)}
        run = replay(t, policy, keep_contexts=wanted, calibration=fit)
        for c in run.calls:
            recorded = action_of(t.entries[c.message_index].message)
            if c.call not in wanted or recorded.kind == "none":
                continue
            sent = sendable(run.contexts[c.call])
            answer, _, _ = api._decide(api._key_of_user(sent[-1]), _compact(sent[:-1]))
            reply = tool_action(answer["name"], answer["input"]) if "name" in answer else action_of(
                {"role": "assistant", "content": answer["text"]})
            verdicts.append(agree(recorded, reply))
    return sum(verdicts) / len(verdicts)


def test_the_estimate_recovers_a_known_models_true_agreement(cli, fake, tmp_path):
    """(#46 §6) A fake model that takes the recorded step exactly when what it needs is in the
    context: its agreement over every candidate call is known; the sampled, reweighted estimate's
    interval holds it (the unweighted mean of the samples would not: it over-weights lossy calls)."""
    truth = _true_agreement(fake, [load_transcript(str(fake.session))], "observation-masking")
    r = _run(cli, fake, tmp_path)
    assert r.exit_code == 0, r.stderr
    [p] = json.loads(r.stdout)["policies"]
    low, high = p["agreement_interval"]
    assert low <= truth <= high and p["agreement"] == pytest.approx(truth, abs=0.05)


def test_on_the_shared_sessions_the_estimate_recovers_the_known_models_agreement(cli, shared_transcripts, tmp_path,
                                                                                 monkeypatch):
    files = sorted(str(p) for p in [*shared_transcripts.glob("claude_code/spotter/*.jsonl"),
                                    *shared_transcripts.glob("codex/*.jsonl")])
    transcripts = [load_transcript(f) for f in files]
    with _serving(transcripts, monkeypatch, tmp_path) as api:
        r = cli("next-action", *files, "-p", "observation-masking", "-p", "s08", "--samples", "24", "--max-cost", "100",
                "--model", "claude-sonnet-4-6", "--format", "json", "--out", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    for p in json.loads(r.stdout)["policies"]:
        truth = _true_agreement(api, transcripts, p["policy"])
        low, high = p["agreement_interval"]
        assert low <= truth <= high, (p["policy"], truth, p["agreement_interval"])


def test_the_control_is_what_the_agent_saw(cli, fake, tmp_path):
    """(#46 §4) On a recording that compacted, the control replays its compactions: a call after the
    recorded compaction is asked on the recorded summary, not on the history the agent no longer had."""
    from helpers import ClaudeCodeSession

    s = ClaudeCodeSession().user("fix the parser")
    for i in range(8):
        s.assistant(f"a{i}", {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"cat f{i}.py"}})
        s.result(f"t{i}", f"contents of f{i}.py " + "x" * 3000)
    s.line({"type": "system", "subtype": "compact_boundary", "parentUuid": None, "logicalParentUuid": f"u{s.n}",
            "uuid": "b1", "sessionId": "s1", "compactMetadata": {"trigger": "auto", "preTokens": 170000}})
    s.user("This session is being continued... RECORDED-SUMMARY", isCompactSummary=True, isVisibleInTranscriptOnly=True)
    for i in range(8, 14):
        s.assistant(f"a{i}", {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"cat f{i}.py"}})
        s.result(f"t{i}", f"contents of f{i}.py " + "x" * 3000)
    s.assistant("end", {"type": "text", "text": "done"})
    path = s.write(tmp_path / "compacted.jsonl")
    r = cli("next-action", path, "-p", "observation-masking", "--samples", "20", "--format", "json",
            "--out", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    assert "the control replays the 1 compaction(s) the recording made" in r.stderr
    doc = json.loads(r.stdout)
    late = [s["call"] for s in doc["samples"] if s["call"] > 8]
    assert late
    controls = [req["body"]["messages"] for req in fake.message_requests[1::2]]
    after = [m for m, s in zip(controls, doc["samples"]) if s["call"] > 8]
    assert after and all("RECORDED-SUMMARY" in json.dumps(m) and "contents of f0.py" not in json.dumps(m)
                         for m in after)


def test_a_format_with_no_system_prompt_gets_a_stand_in_or_yours_and_the_report_says_which(cli, fake, tmp_path):
    """(#46 §3) The shared Claude Code sessions record no system prompt: a request carries a stand-in
    (or the user's file), never nothing, and the report says which; the Messages API is asked with
    no temperature (the SDK takes none), an OpenAI-compatible one at 0."""
    r = cli("next-action", fake.session, "-p", "observation-masking", "--samples", "2", "--format", "json",
            "--out", tmp_path / "a")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert list(doc["system_prompt"].values()) == ["stand-in (the format records none)"]
    assert "a stand-in for 1 transcript(s)" in r.stderr and "temperature" not in fake.message_requests[0]["body"]
    assert fake.message_requests[0]["body"]["system"].startswith("You are a coding agent")
    mine = tmp_path / "prompt.txt"
    mine.write_text("You are my agent. Be brief.")
    r = cli("next-action", fake.session, "-p", "observation-masking", "--samples", "2", "--format", "json",
            "--system-prompt", mine, "--out", tmp_path / "b", "--no-cache")
    doc = json.loads(r.stdout)
    assert list(doc["system_prompt"].values()) == [f"given ({mine})"]
    assert fake.message_requests[-1]["body"]["system"] == "You are my agent. Be brief."
    table = cli("next-action", fake.session, "-p", "observation-masking", "--samples", "2", "--out", tmp_path / "c")
    assert "system prompt: stand-in for 1 transcript(s)" in table.stdout
    bad = cli("next-action", fake.session, "--system-prompt", tmp_path / "missing.txt", "--dry-run")
    assert bad.exit_code == 2 and "missing.txt" in bad.stderr and "Traceback" not in bad.stderr


def test_replies_are_cached_by_the_snapshot_that_answered(cli, fake, tmp_path):
    """(#46 §3) A reply says which dated snapshot answered the alias: replies are keyed by it, and
    once the alias answers as another snapshot, what the old one said is asked again."""
    from compactlab.next_action.models import Asker, ModelOptions

    r = _run(cli, fake, tmp_path)
    assert r.exit_code == 0, r.stderr
    entries = [json.loads(p.read_text()) for p in (tmp_path / "cache" / "next_action").glob("*.json")]
    assert {e.get("served") for e in entries if "served" in e} == {"claude-haiku-4-5-20251001"}
    assert {e["model"] for e in entries if "action" in e} == {"claude-haiku-4-5-20251001"}
    options = ModelOptions.from_env("claude-haiku-4-5", None, str(tmp_path / "cache"))
    asker = Asker(options)  # (a new run: the snapshot is known from the cache)
    body = {"model": "claude-haiku-4-5", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    before = asker.key_of(body)
    assert asker.snapshot == "claude-haiku-4-5-20251001"
    asker._served("claude-haiku-4-5-20260301")
    assert asker.key_of(body) != before and Asker(options).snapshot == "claude-haiku-4-5-20260301"
    # a rerun after the alias moved asks again what the old snapshot answered
    fake.snapshots["claude-haiku-4-5"] = "claude-haiku-4-5-20260301"
    sent = len(fake.message_requests)
    assert _run(cli, fake, tmp_path, "--force").exit_code == 0
    assert len(fake.message_requests) - sent == 24


@pytest.mark.parametrize("columns", [60, 80, 160])
def test_the_dry_runs_rows_of_two_sessions_say_whose_they_are_on_any_terminal(monkeypatch, columns):
    """At 80 columns the dry run of two Claude Code sessions left their transcript column out: two
    rows of call 72 and nothing to tell them apart, and a line under the table explaining the
    tokens and est. cost columns that were left out too. The transcript is kept (its name cut in
    the middle) and the line explains only the columns shown."""
    import io
    from types import SimpleNamespace as NS

    from compactlab.next_action.actions import Action
    from compactlab.reports.next_action_report import write_plan

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    names = ("/h/.claude/projects/p/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
             "/h/.claude/projects/p/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
    samples = [NS(policy="claude-code", transcript=t, call=72, lost_probes=(),
                  recorded=Action("tool", "Bash", "mix compile", "mix"),
                  pair=NS(policy_tokens=19_373, control_tokens=24_130), estimate_usd=0.046, skipped=None)
               for t in names]
    plan = NS(samples=samples, candidates={"claude-code": 2}, strata={}, estimate_usd=0.1, requests=4, cached=0,
              prices=NS(read="genai-prices"), enough_usd=0.1)
    monkeypatch.setenv("COLUMNS", str(columns))
    out = Terminal()
    write_plan(plan, "claude-haiku-4-5", "anthropic", 1.0, out)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())
    assert max(map(len, text.splitlines())) <= columns, text
    # (each row names its session: in a column, its name cut in the middle, or on a line of its own)
    assert text.count("4d5611e") == 1 and text.count("8463c71") == 1, text
    assert ("19,373 / 24,130" in text) == ("tokens: the context sent" in text), text
    assert ("$0.046" in text) == ("est. cost: the pair's requests at most" in text), text
    assert ("$0.046" in text) == (columns >= 160), text


@pytest.mark.parametrize("columns", [60, 80, 100])
def test_the_dry_runs_table_keeps_the_action_asked_about_in_view_on_a_terminal(monkeypatch, columns):
    """At 80 columns the dry run's table of a trajectory gave the recorded action 11 characters
    ("bash /testbed/d… [c…"): the transcript's name took a column in every row and the figures
    the rest. The one transcript is named in the title, the action keeps room for a few words, and
    a narrow terminal leaves out the pair's estimate, then its tokens (explained below the table).
    The action, folded over two or three lines where its column was narrower than it, is now cut
    in its path's middle to the room the layout leaves it: a row a line, the tool, the file's name
    and the command whole where they fit."""
    import io
    from types import SimpleNamespace as NS

    from compactlab.next_action.actions import Action
    from compactlab.reports.next_action_report import ACTION_LEAST, write_plan

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    action = Action("tool", "bash", "/testbed/django/db/models/fields/reverse_related.py", "grep")
    samples = [NS(policy="s08", transcript="/x/mini-swe-agent__deepseek-chat__django__django-11910.traj.json",
                  call=c, lost_probes=(), recorded=action, pair=NS(policy_tokens=10_226, control_tokens=42_136),
                  estimate_usd=0.052, skipped=None) for c in (4, 79)]
    plan = NS(samples=samples, candidates={"s08": 2}, strata={}, estimate_usd=0.1, requests=4, cached=0,
              prices=NS(read="genai-prices"), enough_usd=0.1)
    monkeypatch.setenv("COLUMNS", str(columns))
    out = Terminal()
    write_plan(plan, "claude-haiku-4-5", "anthropic", 1.0, out)
    lines = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()).splitlines()
    text = "\n".join(lines)
    assert max(map(len, lines)) <= columns, text
    title = text.split("┏")[0].split()
    assert title[:5] == ["next-action", "samples:", "2,", "all", "of"] and "/x/" not in text
    assert "".join(title[5:]) == "mini-swe-agent__deepseek-chat__django__django-11910.traj.json"  # (folded at 60)
    rows = [line for line in lines if line.startswith("│")]
    action_cells = [line.split("│")[4] for line in rows]
    assert min(map(len, action_cells)) >= ACTION_LEAST + 2, text
    assert len(rows) == len(samples), text  # (a row a line: the action cut, not folded)
    for cell in action_cells:
        assert cell.strip().startswith("bash /") and cell.strip().endswith("ated.py [grep]"), text
    assert ("/reverse_related.py [grep]" in text) == (columns >= 100), text  # (at 80 the tokens take the room)
    assert ("10,226 / 42,136" in text) == (columns >= 80) and ("$0.052" in text) == (columns >= 100), text
