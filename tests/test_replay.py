from __future__ import annotations

import copy

import orjson
import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.errors import SummarizerError
from compactlab.engine.records import SUMMARY_KEYS, TURN_COLUMNS
from compactlab.synth import generate
from helpers import SAMPLES, tool_session, write_jsonl

SPEC_TURN = ("call message_index raw_messages raw_chars raw_tokens messages chars tokens persisted persisted_chars "
             "snipped micro_compacted summarized summary_input_chars summary_output_chars reactive manual overflow "
             "violations_introduced violations_inherited cache_read_tokens cache_write_tokens input_cost_usd refs "
             "refs_retained probes probes_kept probes_recoverable").split()
SPEC_RUN = ("transcript format policy fingerprint calls raw_tokens_total tokens_total reduction peak_tokens "
            "final_tokens snipped micro_compacted persisted persisted_files summaries summary_input_tokens "
            "summary_output_tokens reactive manual overflows violations_introduced violations_inherited violations "
            "saved_transcripts cost_usd raw_cost_usd cost_usd_nocache raw_cost_usd_nocache retention skipped_lines"
            ).split()  # (runtime_s, in SPEC §7, is out of the records since #18: Run.timing)


def test_schema_uses_exactly_the_spec_names():
    assert TURN_COLUMNS == SPEC_TURN
    # the stable keys come first, in SPEC order; the extras after them are documented in records.py
    assert SUMMARY_KEYS[: len(SPEC_RUN)] == SPEC_RUN
    assert SUMMARY_KEYS[len(SPEC_RUN):] == ["refs", "refs_retained", "recall", "probes", "probes_kept", "recoverable",
                                            "probes_recoverable", "probe_kinds", "probes_indexed", "cache_read_tokens", "cache_write_tokens",
                                            "price_model", "priced_by", "recorded_input_cost_usd", "recorded_cost_usd", "billed_cost_usd", "sidechain_calls", "recorded_sidechain_cost_usd", "cache_ttl",
                                            "cache_expired_calls", "calibration", "recorded_cache_breaks", "cache_warm_start_tokens",
    "cache_breaks_replayed", "cache_ledger", "cache_model", "window_tokens", "window_source", "summary_trigger", "summary_trigger_source", "summary_cost_usd",
    "summary_request", "summary_cache_read_tokens", "custom", "raw_overflows", "core", "recorded_format"]


@pytest.fixture(scope="module")
def medium():
    return load_transcript(str(SAMPLES / "synth-medium.jsonl"))


def test_none_reproduces_the_raw_baseline(medium):
    run = replay(medium, load_policy("none"))
    assert len(run.calls) == len(medium.call_positions)
    for rec in run.calls:
        assert (rec.messages, rec.chars, rec.tokens) == (rec.raw_messages, rec.raw_chars, rec.raw_tokens)
        prefix = medium.messages[: rec.message_index]
        assert rec.chars == len(orjson.dumps(prefix).decode())
    assert run.summary.reduction == 0 and run.summary.tokens_total == run.summary.raw_tokens_total
    assert run.summary.overflows == sum(r.raw_tokens > 200_000 for r in run.calls) > 0


def test_replay_does_not_touch_the_transcript(medium):
    before = copy.deepcopy(medium.messages)
    for name in ("s08", "s06", "s06-article", "s20", "s08-readme"):
        replay(medium, load_policy(name))
    assert medium.messages == before


def test_replay_is_deterministic(medium):
    a = replay(medium, load_policy("s08")).to_dict()
    b = replay(medium, load_policy("s08")).to_dict()
    assert a == b


def test_naive_snip_introduces_violations_pair_safe_does_not(tmp_path):
    # no compact tool calls here: s08's manual orphan does not enter
    msgs = [m for m in generate(200, 9) if "compact" not in orjson.dumps(m).decode()]
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", msgs)))
    safe = replay(t, load_policy("s08")).summary
    naive = replay(t, load_policy("s08-readme")).summary
    assert safe.snipped > 0 and safe.violations_introduced == 0
    assert naive.violations_introduced > 0
    assert {v["kind"] for v in naive.violations if v["introduced"]} <= {"orphan_tool_use", "orphan_tool_result"}


def test_manual_modes(tmp_path):
    t = load_transcript(str(SAMPLES / "manual-compact.jsonl"))
    before = replay(t, load_policy("s08")).summary
    assert before.manual == 1
    assert [(v["kind"], v["tool_use_id"], v["introduced"]) for v in before.violations] == [
        ("orphan_tool_result", "toolu_mc_compact", True)]  # seed 000's orphan, reported not hidden
    after = replay(t, load_policy("s08", ["manual.mode=after_results"])).summary
    assert after.manual == 1 and after.violations_introduced == 0
    s20 = replay(t, load_policy("s20"))
    assert s20.summary.manual == 1 and s20.summary.violations_introduced == 0
    call = next(r for r in s20.calls if r.manual)
    assert call.messages == 2  # [summary, "[Compacted. Continue with summarized context.]"]
    off = replay(t, load_policy("s08", ["manual.enabled=false"])).summary
    assert off.manual == 0


def test_recorded_orphan_is_inherited_not_introduced():
    t = load_transcript(str(SAMPLES / "recorded-orphan.jsonl"))
    for name in ("none", "s08"):
        s = replay(t, load_policy(name)).summary
        assert (s.violations_introduced, s.violations_inherited) == (0, 1)
        assert [(v["kind"], v["tool_use_id"], v["call"]) for v in s.violations] == [
            ("orphan_tool_result", "toolu_ro_lost", 2)]


def test_huge_batch_is_persisted(tmp_path):
    t = load_transcript(str(SAMPLES / "huge-batch.jsonl"))
    run = replay(t, load_policy("s08", ["summary.enabled=false"]), out_dir=tmp_path)
    assert run.summary.persisted == 1 and run.calls[1].persisted == 1
    [f] = run.summary.persisted_files
    assert (tmp_path / f["path"]).stat().st_size == f["chars"]
    largest = max(t.messages[2]["content"], key=lambda b: len(b["content"]))
    assert (tmp_path / f["path"]).read_text() == largest["content"]
    assert run.calls[1].tokens < run.calls[1].raw_tokens


def test_reactive_runs_and_overflow_is_recorded(tmp_path):
    msgs = tool_session(30, size=4000)
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", msgs)))
    off = replay(t, load_policy("none"), window=10000)
    assert off.summary.overflows == sum(r.raw_tokens > 10000 for r in off.calls) > 0
    on = replay(t, load_policy("none", ["reactive.enabled=true"]), window=10000)
    assert on.summary.reactive > 0 and on.summary.overflows == 0
    assert all(r.tokens <= 10000 for r in on.calls)


class FailAfter:
    name = "flaky"

    def __init__(self, ok: int):
        self.ok = ok
        self.asked = 0

    def summarize(self, request):
        from compactlab.summarizers import StubSummarizer

        self.asked += 1
        if self.ok <= 0:
            raise SummarizerError("overloaded")
        self.ok -= 1
        return StubSummarizer().summarize(request)


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_failed_summaries_are_reported_and_the_replay_goes_on(medium, limit):
    flaky = FailAfter(1)
    run = replay(medium, load_policy("s08", [f"summary.max_failures={limit}"]), summarizer=flaky)
    assert run.summary.summaries == 1 and len(run.calls) == len(medium.call_positions)
    # every failure is one request, said with its call and layer; the summary layer's breaker opens
    # at its limit (no summary is asked for after), the manual layer goes on asking
    assert flaky.asked == 1 + len(run.failed_summaries)
    assert [f["kind"] for f in run.failed_summaries].count("summary") == limit
    assert all(f["error"] == "overloaded" and f["call"] >= 13 for f in run.failed_summaries)
    calls = [f["call"] for f in run.failed_summaries]
    assert calls == sorted(calls)


def test_out_dir_none_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    t = load_transcript(str(SAMPLES / "huge-batch.jsonl"))
    run = replay(t, load_policy("s08"))
    assert run.summary.persisted == 1 and list(tmp_path.iterdir()) == []
