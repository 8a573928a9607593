"""Tests that kill plausible bugs the rest of the suite let through (issue 15 §7): each pins a
behaviour a mutation of the code got past."""

from __future__ import annotations

import os

import orjson
import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.corpus.calibration import fit
from compactlab.errors import SummarizerError
from compactlab.engine.measures.violations import InvariantTracker, check_context
from compactlab.transcripts.messages import make_entry
from compactlab.summarizers import StubSummarizer
from helpers import SAMPLES, asst, results, tool_session, tr, tu, user, write_jsonl


# -- invariants: a batch answered only in part -------------------------------------------------

def test_a_batch_answered_in_part_reports_the_unanswered_use():
    messages = [user("go"), asst(tu("a"), tu("b")), results(tr("a"))]
    entries = [make_entry(m, i) for i, m in enumerate(messages)]
    found = [(v.kind, v.message_index, v.tool_use_id) for v in check_context(entries)]
    assert found == [("orphan_tool_use", 1, "b")]
    tracker = InvariantTracker()
    tracker.update(entries, 0)
    assert [(v.kind, v.tool_use_id) for v in tracker.violations()] == [("orphan_tool_use", "b")]


# -- cache accounting when position 0 changes ---------------------------------------------------

def test_a_change_at_position_0_reads_only_the_overhead_from_the_cache(tmp_path):
    """A summary without keep_head (or a recorded-compaction restart) rewrites the context from
    its first message: the system prompt and tools (the overhead) are still read from the cache,
    and everything else is written."""
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", tool_session(20, size=3_000))))
    policy = load_policy("s08", ["size.overhead_tokens=1500", "summary.trigger=20000", "summary.keep_head=0",
                                 "snip.enabled=false", "micro.enabled=false", "budget.enabled=false"])
    run = replay(t, policy)
    fired = [c for c in run.calls if c.summarized]
    assert fired, "the summary must fire for this test to mean anything"
    for c in fired:
        assert c.cache_read_tokens == 1500 and c.cache_write_tokens == c.tokens - 1500
    later = run.calls[fired[0].call + 1]
    assert not later.summarized and later.cache_read_tokens > 1500  # the next call reads what was written


# -- calibration.fit, with no shared transcripts ----------------------------------------------

def test_fit_recovers_a_known_overhead_and_chars_per_token():
    chars = [10_000, 40_000, 90_000, 160_000, 250_000]
    tokens = [3_000 + round(c / 3.5) for c in chars]
    cal = fit(chars, tokens)
    assert cal.overhead_tokens == pytest.approx(3_000, abs=2) and cal.chars_per_token == pytest.approx(3.5, abs=0.001)
    assert cal.mape < 0.001 and cal.calls == 5


def test_fit_falls_back_to_a_line_through_the_origin_for_a_negative_intercept():
    chars = [10_000, 20_000, 40_000]
    tokens = [2_000, 5_500, 12_500]  # a straight fit would cross below zero
    cal = fit(chars, tokens)
    assert cal.overhead_tokens == 0 and 2.0 < cal.chars_per_token < 5.0


def test_fit_of_too_few_calls():
    with pytest.raises(ValueError, match="no call with recorded prompt tokens"):
        fit([100, 200], [0, 0])
    one = fit([8_000, 9_000], [0, 2_000])  # one usable call: a line through it and the origin
    assert one.overhead_tokens == 0 and one.chars_per_token == 4.5 and one.calls == 1


# -- the summary circuit breaker; reactive compaction with a failing summarizer ----------------

class Flaky(StubSummarizer):
    """Fails on the calls (summary requests, counted from 1) it is told to."""

    def __init__(self, failing: set[int]) -> None:
        super().__init__()
        self.failing, self.asked = failing, 0

    def summarize(self, request):
        self.asked += 1
        if self.asked in self.failing:
            raise SummarizerError(f"failure {self.asked}")
        return super().summarize(request)


def _summary_run(tmp_path, summarizer, max_failures=3):
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", tool_session(60, size=2_000))))
    policy = load_policy("s08", ["summary.trigger=15000", f"summary.max_failures={max_failures}",
                                 "snip.enabled=false", "micro.enabled=false"])
    return replay(t, policy, summarizer=summarizer)


def test_the_breaker_counts_consecutive_failures_only(tmp_path):
    # two failures, a success, two failures: never three in a row, so summaries go on to the end
    flaky = Flaky({1, 2, 4, 5})
    run = _summary_run(tmp_path, flaky)
    assert len(run.failed_summaries) == 4 and run.summary.summaries >= 3
    assert flaky.asked > 6
    # three in a row opens it: no request after the third
    stuck = Flaky(set(range(1, 100)))
    run = _summary_run(tmp_path, stuck)
    assert stuck.asked == 3 and run.summary.summaries == 0


def test_reactive_compaction_with_a_failing_summarizer_is_an_overflow_not_a_crash(tmp_path):
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", tool_session(30, size=2_000))))
    policy = load_policy("none", ["reactive.enabled=true", "reactive.window_tokens=5000", "reactive.max_retries=3"])
    run = replay(t, policy, summarizer=Flaky(set(range(1, 1000))), window=5000)
    assert run.summary.reactive == 0 and run.summary.overflows > 0
    assert all(f["kind"] == "reactive" for f in run.failed_summaries)
    assert len(run.failed_summaries) == run.summary.overflows  # one try a call: nothing changed, no retry


# -- boundaries ---------------------------------------------------------------------------------

def test_a_result_of_exactly_the_threshold_is_not_persisted(tmp_path):
    policy = load_policy("s08", ["snip.enabled=false", "micro.enabled=false", "summary.enabled=false",
                                 "budget.max_chars=1000", "budget.persist_threshold=30000"])
    for size, persisted in ((30_000, 0), (30_001, 1)):
        msgs = [user("go"), asst(tu("a", "read_file")), results(tr("a", "x" * size)), asst("done")]
        run = replay(load_transcript(str(write_jsonl(tmp_path / "t.jsonl", msgs))), policy)
        assert run.summary.persisted == persisted, size


def test_a_context_of_exactly_the_window_is_sent_as_it_is():
    t = load_transcript(str(SAMPLES / "synth-small.jsonl"))
    peak = replay(t, load_policy("none")).summary.peak_tokens
    at = replay(t, load_policy("none", ["reactive.enabled=true"]), window=peak)
    assert at.summary.reactive == 0 and at.summary.overflows == 0
    over = replay(t, load_policy("none"), window=peak - 1)
    assert over.summary.overflows == 1
    # a policy's own window is when it compacts, not what a call is judged on
    trigger = replay(t, load_policy("none", ["reactive.enabled=false", f"reactive.window_tokens={peak - 1}"]))
    assert trigger.summary.overflows == 0 and trigger.summary.window_tokens == 200_000


# -- the shape of what is written ---------------------------------------------------------------

SUMMARY_KEYS = [
    "transcript", "format", "policy", "fingerprint", "calls", "raw_tokens_total", "tokens_total", "reduction",
    "peak_tokens", "final_tokens", "snipped", "micro_compacted", "persisted", "persisted_files", "summaries",
    "summary_input_tokens", "summary_output_tokens", "reactive", "manual", "overflows", "violations_introduced",
    "violations_inherited", "violations", "saved_transcripts", "cost_usd", "raw_cost_usd", "cost_usd_nocache",
    "raw_cost_usd_nocache", "retention", "skipped_lines", "refs", "refs_retained", "recall", "probes", "probes_kept",
    "recoverable", "probes_recoverable", "probe_kinds", "probes_indexed", "cache_read_tokens", "cache_write_tokens", "price_model", "priced_by", "recorded_input_cost_usd", "recorded_cost_usd", "billed_cost_usd", "sidechain_calls", "recorded_sidechain_cost_usd", "cache_ttl",
    "cache_expired_calls", "calibration", "recorded_cache_breaks", "cache_warm_start_tokens",
    "cache_breaks_replayed", "cache_ledger", "cache_model", "window_tokens", "window_source", "summary_trigger", "summary_trigger_source", "summary_cost_usd",
    "summary_request", "summary_cache_read_tokens", "custom", "raw_overflows", "core", "recorded_format"]
RESULT_KEYS = [
    "transcript", "policy", "calls", "raw_tokens_total", "tokens_total", "reduction", "peak_tokens", "final_tokens",
    "snipped", "micro_compacted", "persisted", "summaries", "summary_input_tokens", "summary_output_tokens",
    "reactive", "manual", "overflows", "violations_introduced", "violations_inherited", "cost_usd", "raw_cost_usd",
    "cost_usd_nocache", "raw_cost_usd_nocache", "retention", "skipped_lines", "refs", "refs_retained", "recall",
    "probes", "probes_kept", "recoverable", "probes_recoverable", "cache_read_tokens", "cache_write_tokens", "recorded_input_cost_usd", "recorded_cost_usd", "billed_cost_usd", "sidechain_calls", "recorded_sidechain_cost_usd",
    "window_tokens", "summary_trigger", "summary_cost_usd", "summary_cache_read_tokens", "custom", "raw_overflows", "cost_saving", "fingerprint", "calibration", "chars_per_token", "overhead_tokens", "calibration_mape"]


def test_the_keys_of_summary_json_and_results_json_are_pinned(cli, tmp_path):
    assert cli("replay", SAMPLES / "synth-small.jsonl", "--out", tmp_path / "r", "-q").exit_code == 0
    doc = orjson.loads((tmp_path / "r" / "summary.json").read_bytes())
    assert list(doc) == ["summary", "policy", "failed_summaries", "timing"]
    assert list(doc["summary"]) == SUMMARY_KEYS
    assert cli("compare", SAMPLES / "synth-small.jsonl", "-p", "s08", "--out", tmp_path / "c", "-q").exit_code == 0
    rows = orjson.loads((tmp_path / "c" / "results.json").read_bytes())["runs"]
    assert [list(r) for r in rows] == [RESULT_KEYS, RESULT_KEYS]  # s08 and the reference, no compaction


def test_openai_cached_tokens_are_split_between_input_and_cache_reads():
    from compactlab.transcripts.openai_chat import openai_usage

    usage = openai_usage({"prompt_tokens": 1000, "completion_tokens": 50,
                          "prompt_tokens_details": {"cached_tokens": 600}})
    assert usage == {"prompt_tokens": 1000, "input_tokens": 400, "cache_creation_input_tokens": 0,
                     "cache_read_input_tokens": 600, "output_tokens": 50}
    deepseek = openai_usage({"prompt_tokens": 1000, "completion_tokens": 5, "prompt_cache_hit_tokens": 250})
    assert deepseek["input_tokens"] == 750 and deepseek["cache_read_input_tokens"] == 250


# -- golden files are rewritten only when asked, never under CI --------------------------------

@pytest.mark.parametrize("value, ci, wanted", [("1", None, True), ("0", None, False), ("yes", None, False),
                                               ("", None, False), ("1", "true", "error")])
def test_golden_files_are_rewritten_only_with_update_golden_1(monkeypatch, value, ci, wanted):
    from test_golden import should_update

    monkeypatch.setenv("UPDATE_GOLDEN", value)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    if wanted == "error":
        with pytest.raises(pytest.fail.Exception, match="UPDATE_GOLDEN under CI"):
            should_update()
    else:
        assert should_update() is wanted
    assert os.environ["UPDATE_GOLDEN"] == value
