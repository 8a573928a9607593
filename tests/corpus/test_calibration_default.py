"""Calibration by default (#17 part 5): wherever a transcript records the usage of enough calls,
its runs estimate tokens by the fit; the fit used is in summary.json, results and the baseline,
and a change of it is never silent."""

from __future__ import annotations

import orjson
import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.corpus.calibration import MIN_CALLS, calibrate
from helpers import asst, results, tool_session, tr, tu, user, write_jsonl

OVERHEAD, CPT = 1500, 2.5  # what the made-up tokenizer charges: overhead + chars / 2.5


def with_usage(turns: int, size: int = 2000, **extra) -> list[dict]:
    """A tool session whose assistant lines record the prompt tokens the made-up tokenizer counts
    for everything before them."""
    msgs = tool_session(turns, size)
    out, chars = [], 0
    for m in msgs:
        line = dict(m)
        if m["role"] == "assistant":
            line.update(usage={"input_tokens": OVERHEAD + round(chars / CPT), "output_tokens": 10}, **extra)
        chars += len(orjson.dumps(m))
        out.append(line)
    return out


def summary_of(cli, path, *args):
    r = cli("replay", path, "--dry-run", "--format", "json", *args)
    assert r.exit_code == 0, r.output
    return orjson.loads(r.stdout)["runs"][0]["summary"], r.stderr


def test_a_transcript_with_recorded_usage_is_calibrated_unless_told_not_to(cli, tmp_path):
    path = write_jsonl(tmp_path / "usage.jsonl", with_usage(12))
    s, err = summary_of(cli, path, "-p", "s08")
    cal = s["calibration"]
    assert cal["source"] == "recorded usage" and cal["calls"] == 12 and cal["mape"] < 0.05
    assert cal["chars_per_token"] == pytest.approx(CPT, rel=0.1) and "calibrated:" in err
    off, _ = summary_of(cli, path, "-p", "s08", "--no-calibrate")
    assert off["calibration"] == {"overhead_tokens": 0, "chars_per_token": 4.0, "mape": None, "calls": 0,
                                  "source": "policy"}
    assert off["fingerprint"] != s["fingerprint"]  # a calibrated run is told apart
    assert off["tokens_total"] < s["tokens_total"]  # chars / 4 undercounts this tokenizer


def test_the_calibrated_estimate_is_the_runs_policy(tmp_path):
    t = load_transcript(str(write_jsonl(tmp_path / "usage.jsonl", with_usage(12))))
    cal = calibrate(t)
    run = replay(t, load_policy("s08"), calibration=cal)
    assert run.policy["size"] == {"chars_per_token": cal.chars_per_token, "overhead_tokens": cal.overhead_tokens}
    assert run.summary.calibration == cal.to_dict()


def test_too_few_calls_with_usage_keep_the_policys_estimate_and_say_so(cli, tmp_path):
    path = write_jsonl(tmp_path / "few.jsonl", with_usage(MIN_CALLS - 1))
    s, err = summary_of(cli, path, "-p", "none")
    assert s["calibration"]["source"] == \
        f"default ratio (no prior for anthropic), its overhead fitted to {MIN_CALLS - 1} call(s)"
    r = cli("replay", path, "-p", "none", "--dry-run")  # (said as a phrase: "the default ratio", not "the no prior")
    assert "tokens estimated by" in r.stdout and "the default ratio (no prior for anthropic), its overhead" in r.stdout
    assert s["calibration"]["chars_per_token"] == 4.0  # (the policy's ratio: only the overhead is fitted)
    assert f"only {MIN_CALLS - 1} call(s) with recorded usage" in err
    r = cli("replay", path, "--dry-run", "--calibrate")  # asked for: still no fit of 1 to 4 calls (#29 §4)
    assert r.exit_code == 0 and "calibrated:" not in r.stderr and "no prior for anthropic" in r.stderr


def claude_code_lines(calls: int) -> list[dict]:
    """A Claude Code session of ``calls`` calls, each recording its prompt tokens."""
    lines = []
    for i, m in enumerate(with_usage(calls)):
        message = {k: v for k, v in m.items() if k in ("role", "content")}
        if m["role"] == "assistant":
            message.update(model="claude-sonnet-4-5", usage=m["usage"], id=f"msg_{i}")
        lines.append({"type": m["role"], "uuid": f"u{i}", "parentUuid": f"u{i - 1}" if i else None,
                      "sessionId": "s", "timestamp": f"2026-01-01T00:00:{i:02d}Z", "message": message})
    return lines


@pytest.mark.parametrize("calls", [1, MIN_CALLS - 1])
def test_a_short_recording_is_priced_by_its_formats_prior_labelled_so(cli, tmp_path, calls):
    """(#29 §4, #43 §7) Fewer than five calls with usage: never a fit of two parameters to what there
    is, but the format's prior for the characters a token holds (data/priors.toml) with the
    overhead those calls do tell fitted to them (the median gap), in replay, compare and inspect,
    each saying so."""
    from compactlab import load_transcript
    from compactlab.corpus.calibration import prior_for, recorded_tokens, sent_chars

    prior = prior_for("claude-code")
    assert prior is not None and prior.source.startswith("prior for claude-code")
    path = write_jsonl(tmp_path / "short.jsonl", claude_code_lines(calls))
    t = load_transcript(str(path))
    gaps = sorted(y - x / prior.chars_per_token for x, y in zip(sent_chars(t), recorded_tokens(t)))
    overhead = max(0, round((gaps[(len(gaps) - 1) // 2] + gaps[len(gaps) // 2]) / 2))
    # (how far the prior's own fit is off, said with it: the estimate is no better)
    source = (f"prior for claude-code ({prior.calls} calls of shared recordings, mape {prior.mape:.2f}), its overhead "
              f"fitted to {calls} call(s)")
    s, err = summary_of(cli, path, "-p", "none")
    assert s["format"] == "claude-code" and s["calibration"]["source"] == source
    assert (s["calibration"]["chars_per_token"], s["calibration"]["overhead_tokens"]) == (prior.chars_per_token, overhead)
    assert "tokens by the claude-code prior's chars / " in err and "an estimate" in err
    r = cli("replay", path, "--dry-run")
    assert f"the {source}" in r.stdout and "an estimate" in r.stdout
    r = cli("replay", path, "--dry-run", "--format", "json", "--calibrate")
    assert orjson.loads(r.stdout)["runs"][0]["summary"]["calibration"]["source"] == source
    r = cli("inspect", path, "--format", "json")
    info = orjson.loads(r.stdout)
    assert info["calibration"]["source"] == source and info["raw_tokens_by"].startswith("the prior for")
    r = cli("compare", path, "-p", "s08", "--dry-run", "--format", "json")
    assert {run["calibration"] for run in orjson.loads(r.stdout)["runs"]} == {source}


def test_no_usage_is_no_calibration_and_no_warning(cli, tmp_path):
    path = write_jsonl(tmp_path / "plain.jsonl", tool_session(8))
    s, err = summary_of(cli, path)
    assert s["calibration"]["source"] == "policy" and "warning" not in err
    r = cli("replay", path, "--dry-run", "--calibrate")
    assert r.exit_code == 2 and "no recorded usage to calibrate on" in r.stderr


def test_an_absurd_fit_is_refused(cli, tmp_path):
    msgs = with_usage(8)
    for m in msgs:
        if "usage" in m:
            m["usage"] = {"input_tokens": 3, "output_tokens": 1}  # a broken recording
    s, err = summary_of(cli, write_jsonl(tmp_path / "broken.jsonl", msgs))
    assert s["calibration"]["source"] == "policy" and "unusable" in err


def test_compare_and_check_record_the_calibration(cli, tmp_path):
    path = write_jsonl(tmp_path / "usage.jsonl", with_usage(12))
    r = cli("compare", path, "-p", "none", "-p", "s08", "--out", tmp_path / "c", "-q")
    assert r.exit_code == 0, r.output
    rows = orjson.loads((tmp_path / "c" / "results.json").read_bytes())["runs"]
    assert {row["calibration"] for row in rows} == {"recorded usage"}
    assert all(row["chars_per_token"] == pytest.approx(CPT, rel=0.1) and row["calibration_mape"] < 0.05 for row in rows)
    assert "calibration_mape" in (tmp_path / "c" / "results.csv").read_text().splitlines()[0]

    baseline = tmp_path / "baseline.json"
    assert cli("check", path, "-p", "s08", "--baseline", baseline, "--update-baseline").exit_code == 0
    record = orjson.loads(baseline.read_bytes())["records"][0]
    assert record["calibration"]["source"] == "recorded usage"
    assert cli("check", path, "-p", "s08", "--baseline", baseline).exit_code == 0
    r = cli("check", path, "-p", "s08", "--baseline", baseline, "--no-calibrate", "--format", "json")
    assert r.exit_code == 1
    result = orjson.loads(r.stdout)["results"][0]
    assert result["calibration_changed"] and result["status"] == "fail"
    assert any("calibration changed" in reason for reason in result["reasons"])


def test_a_baseline_whose_calibration_is_said_in_older_words_still_passes(cli, tmp_path):
    """The gate compared a prior's or a default's calibration by its source's words: a rewording
    ("no prior for anthropic" became "default ratio (no prior for anthropic)") failed every
    baseline of a short recording as "calibration changed". It compares what decides the tokens."""
    path = write_jsonl(tmp_path / "few.jsonl", with_usage(MIN_CALLS - 1))
    baseline = tmp_path / "baseline.json"
    assert cli("check", path, "-p", "s08", "--baseline", baseline, "--update-baseline").exit_code == 0
    doc = orjson.loads(baseline.read_bytes())
    doc["records"][0]["calibration"]["source"] = f"no prior for anthropic, its overhead fitted to {MIN_CALLS - 1} call(s)"
    baseline.write_bytes(orjson.dumps(doc))
    assert cli("check", path, "-p", "s08", "--baseline", baseline).exit_code == 0
    doc["records"][0]["calibration"]["overhead_tokens"] += 100  # (another estimate: a change)
    baseline.write_bytes(orjson.dumps(doc))
    r = cli("check", path, "-p", "s08", "--baseline", baseline)
    assert r.exit_code == 1 and "calibration changed" in r.stdout


def test_a_big_plain_file_with_usage_in_its_first_lines_is_loaded_to_be_calibrated(cli, tmp_path, monkeypatch):
    """A file the read-ahead process would read as it is replayed is loaded instead when its first
    lines record usage; one whose usage starts later is streamed and says it was not calibrated."""
    from compactlab.engine.feeds import read_ahead

    monkeypatch.setattr(read_ahead, "usable", lambda path, forking=True: True)  # any size: the read-ahead path
    early = write_jsonl(tmp_path / "early.jsonl", with_usage(12))
    s, _ = summary_of(cli, early)
    assert s["calibration"]["source"] == "recorded usage"
    late_msgs = tool_session(40, 200) + with_usage(12)[1:]
    late = write_jsonl(tmp_path / "late.jsonl", late_msgs)
    s, err = summary_of(cli, late)
    assert s["calibration"]["source"] == "policy"
    assert "past the file's first lines: not calibrated" in err
    s, _ = summary_of(cli, late, "--calibrate")
    assert s["calibration"]["source"] == "recorded usage"


def test_exactly_min_calls_with_usage_are_calibrated(cli, tmp_path):
    """(#25 §8) "at least 5": five calls with usage are enough, four are not."""
    assert MIN_CALLS == 5
    s, err = summary_of(cli, write_jsonl(tmp_path / "five.jsonl", with_usage(MIN_CALLS)), "-p", "none")
    assert s["calibration"]["source"] == "recorded usage" and s["calibration"]["calls"] == MIN_CALLS
    assert "calibrated:" in err


@pytest.mark.parametrize("mape, used", [(0.49, True), (0.5, True), (0.51, False)])
def test_a_fit_whose_mape_is_over_a_half_is_refused(tmp_path, monkeypatch, mape, used):
    import compactlab.corpus.calibration as calibration
    from compactlab.corpus.calibration import Calibration, by_default

    t = load_transcript(str(write_jsonl(tmp_path / "u.jsonl", with_usage(8))))
    fitted = Calibration(overhead_tokens=1500, chars_per_token=2.5, mape=mape, calls=8)
    monkeypatch.setattr(calibration, "calibrate", lambda transcript, sent=None: fitted)
    cal, why = by_default(t)
    assert (cal is fitted) is used
    assert (why is None) is used and (used or f"mape {mape}" in why)


@pytest.mark.parametrize("cpt, used", [(0.49, False), (0.5, True), (20.0, True), (20.5, False)])
def test_a_fit_of_absurd_characters_per_token_is_refused(tmp_path, monkeypatch, cpt, used):
    import compactlab.corpus.calibration as calibration
    from compactlab.corpus.calibration import Calibration, by_default

    t = load_transcript(str(write_jsonl(tmp_path / "u.jsonl", with_usage(8))))
    fitted = Calibration(overhead_tokens=10, chars_per_token=cpt, mape=0.01, calls=8)
    monkeypatch.setattr(calibration, "calibrate", lambda transcript, sent=None: fitted)
    assert (by_default(t)[0] is fitted) is used


def test_inspect_and_replay_give_one_number_for_the_raw_peak(cli, tmp_path):
    """(#27 §7) inspect's token figures are the replay's estimate (calibrated where a replay is),
    and say which; uncalibrated they say chars / 4."""
    path = write_jsonl(tmp_path / "usage.jsonl", with_usage(12))
    info = orjson.loads(cli("inspect", path, "--format", "json").stdout)
    s, _ = summary_of(cli, path, "-p", "none")
    assert info["raw_tokens_by"].startswith("calibrated: ") and max(info["raw_tokens_per_call"]) == s["peak_tokens"]
    table = cli("inspect", path).stdout
    assert "raw context tokens (25/50/75/100% of calls)" in table
    # (the fit said with the formula, in one row: the formula was shown twice, as "calibration" too)
    assert next(line for line in table.splitlines() if line.startswith("tokens estimated by")).split(None, 3)[3] \
        == f"{info['raw_tokens_by']} (mape {info['calibration']['mape']:.3f}, {info['calibration']['calls']} calls)"
    assert "\ncalibration " not in table
    plain = write_jsonl(tmp_path / "plain.jsonl", tool_session(8))
    info = orjson.loads(cli("inspect", plain, "--format", "json").stdout)
    s, _ = summary_of(cli, plain, "-p", "none")
    assert info["raw_tokens_by"] == "chars / 4 (not calibrated)" and max(info["raw_tokens_per_call"]) == s["peak_tokens"]


def test_modelled_and_recorded_sit_side_by_side_only_where_they_compare_like_with_like(cli, tmp_path):
    """(#27 §7) A policy that acted is not "modelled / recorded" against the session's bill."""
    path = write_jsonl(tmp_path / "usage.jsonl", with_usage(12))
    acted = cli("replay", path, "-p", "observation-masking", "--set", "micro.keep_recent=1", "--dry-run").stdout
    assert "modelled / recorded" not in acted and "input cost of the session as recorded (its usage)" in acted
    same = cli("replay", path, "-p", "none", "--keep-recorded-compactions", "--dry-run").stdout
    assert "input cost: modelled / recorded usage" in same


def test_a_converted_short_recording_keeps_its_harnesss_prior(cli, tmp_path):
    """convert writes the recording's format on its first response object, so a short recording
    converted to Anthropic messages is priced by its own harness's prior, not chars / 4."""
    src = write_jsonl(tmp_path / "short.jsonl", claude_code_lines(3))
    out = tmp_path / "converted.jsonl"
    assert cli("convert", src, "-o", out, "-q").exit_code == 0
    s, _ = summary_of(cli, out, "-p", "none")
    assert s["format"] == "anthropic" and s["calibration"]["source"].startswith("prior for claude-code")
    assert s["tokens_total"] == summary_of(cli, src, "-p", "none")[0]["tokens_total"]


def test_every_shared_short_recording_models_its_recorded_tokens_within_20_percent(shared_transcripts):
    """(#43 §7) On every shared recording of under 5 calls with usage, whatever its format (OTLP
    too), the replay of what it sent models the prompt tokens it recorded within ±20% (before the
    overhead was fitted: -94% on a 4-call trace)."""
    from compactlab import load_policy, load_transcript, replay
    from compactlab.corpus.calibration import by_default, prompt_tokens, usable_calls

    seen = []
    for path in sorted(shared_transcripts.rglob("*")):
        if not path.is_file() or path.suffix not in (".json", ".jsonl", ".traj") or "truth" in path.name \
                or "subagents" in path.parts:
            continue
        try:
            t = load_transcript(str(path))
        except Exception:
            continue  # (not a transcript: a manifest, a settings file)
        if not 0 < usable_calls(t) < MIN_CALLS:
            continue
        run = replay(t, load_policy("none"), keep_recorded_compactions=True, calibration=by_default(t)[0])
        answered = [c for c in run.calls if prompt_tokens(t.usage.get(c.message_index) or {}) > 0]
        recorded = sum(prompt_tokens(t.usage[c.message_index]) for c in answered)
        assert abs(sum(c.tokens for c in answered) / recorded - 1) <= 0.20, path.name
        seen.append(t.format)
    assert "otlp" in seen and len(seen) >= 5


def test_the_chars_sent_are_the_replay_of_no_compaction_that_keeps_the_recorded_ones(tmp_path):
    """sent_chars takes the raw baseline's chars where the recording never compacted (no replay
    of its own), and replays no compaction with the recorded compactions kept where it did."""
    from compactlab.corpus.calibration import sent_chars
    from compactlab.transcripts.writer import COMPACTION_KEY

    def chars(t) -> list[int]:
        return [c.chars for c in replay(t, load_policy("none"), keep_recorded_compactions=True).calls]

    plain = load_transcript(str(write_jsonl(tmp_path / "p.jsonl", tool_session(30, 400))))
    from compactlab.engine.memo import memo_of

    assert sent_chars(plain) == chars(plain) and memo_of(plain).baseline is not None
    lines = tool_session(30, 400)
    lines.insert(21, {"role": "user", "content": "summary so far", COMPACTION_KEY: {"trigger": "auto"}})
    compacted = load_transcript(str(write_jsonl(tmp_path / "c.jsonl", lines)))
    assert compacted.compactions and sent_chars(compacted) == chars(compacted)
    base = memo_of(compacted).baseline
    assert sent_chars(compacted) != list(base.chars if base else [])

    # its replay looks for no probe (what made a calibrated replay of none 1.5x dearer on a Claude
    # Code session): the chars are the same, and a replay that wants the probes after it has them
    used = [user("start")]
    for i in range(30):  # (each reply names what the result before it held: a probe each)
        used += [asst(f"so handler_{i - 1}_value it is", tu(f"t{i}", "bash", command=f"cmd {i}")),
                 results(tr(f"t{i}", f"def handler_{i}_value(): pass\n" + "x" * 400))]
    used.insert(21, {"role": "user", "content": "summary so far", COMPACTION_KEY: {"trigger": "auto"}})
    write_jsonl(tmp_path / "u.jsonl", used)
    fresh, alone = (load_transcript(str(tmp_path / "u.jsonl")) for _ in range(2))
    assert sent_chars(fresh) == chars(alone)
    assert (b := memo_of(fresh).baseline) is not None and not b.probes_indexed
    after, before = (orjson.loads(orjson.dumps(replay(t, load_policy("s08"), keep_recorded_compactions=True).summary))
                     for t in (fresh, alone))
    assert after["probes"] > 20 and after == before
