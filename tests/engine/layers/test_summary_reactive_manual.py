from __future__ import annotations

import pytest

from compactlab.errors import SummarizerError
from compactlab.engine.layers import RunEnv, Summarising, manual, reactive, summary
from compactlab.engine.policy import ManualConfig, ReactiveConfig, SummaryConfig
from compactlab.engine.layers.summary import Breaker
from compactlab.summarizers import StubSummarizer
from helpers import asst, context, tool_session, tu, user


class Failing:
    name = "failing"

    def __init__(self):
        self.calls = 0

    def summarize(self, request):
        self.calls += 1
        raise SummarizerError("model unavailable")


def env(summarizer=None) -> RunEnv:
    return RunEnv(summarizer=summarizer or StubSummarizer())


@pytest.mark.parametrize("delta,fires", [(0, False), (1, True)])
def test_trigger_edge(delta, fires):
    ctx = context(tool_session(3, size=200))
    cfg = SummaryConfig(trigger=ctx.chars - delta)
    out, stats = summary(ctx, cfg, env())
    assert stats.summaries == (1 if fires else 0)
    if fires:
        assert len(out) == 1 and out.messages[0]["content"].startswith("[Compacted]\n\n")
        assert stats.summary_input_chars == ctx.chars and stats.summary_output_chars > 0


def test_token_unit_and_ack_like_s06():
    ctx = context(tool_session(3, size=400))
    cfg = SummaryConfig(trigger=10, unit="tokens", template="[Compressed]\n\n{summary}", ack="Understood. Continuing.")
    out, _ = summary(ctx, cfg, env())
    assert [m["role"] for m in out.messages] == ["user", "assistant"]
    assert out.messages[1]["content"] == "Understood. Continuing."


def test_keep_head_and_tail_are_pair_safe():
    msgs = tool_session(6, size=100)  # 13 messages
    cfg = SummaryConfig(trigger=1, keep_head=2, keep_tail=3)
    out, stats = summary(context(msgs), cfg, env())
    got = out.messages
    # head: [user, asst(tool_use)] takes its result; tail of 3 starts at a result -> takes its tool_use
    assert got[:3] == msgs[:3]
    assert got[3]["content"].startswith("[Compacted]")
    assert got[4:] == msgs[-4:]
    assert stats.lowest_changed == 3


def test_circuit_breaker_opens_after_max_failures():
    failing = Failing()
    e = env(failing)
    ctx = context(tool_session(3, size=200))
    cfg = SummaryConfig(trigger=1, max_failures=3)
    for _ in range(5):
        out, stats = summary(ctx, cfg, e)
        assert out is ctx
    assert failing.calls == 3 and e.state_of(Breaker).open
    assert len(e.ledger.failed_summaries) == 3


def test_reactive_keeps_a_pair_safe_tail():
    msgs = tool_session(5, size=100)  # 11 messages; last 5 start with a tool_result
    out, stats = reactive(context(msgs), Summarising(ReactiveConfig(), SummaryConfig()), env())
    assert stats.reactive == 1
    assert out.messages[0]["content"].startswith("[Reactive compact]\n\n")
    assert out.messages[1:] == msgs[-6:]
    naive, _ = reactive(context(msgs), Summarising(ReactiveConfig(pair_safe=False), SummaryConfig()), env())
    assert naive.messages[1:] == msgs[-5:]


def test_manual_replace_results_appends_its_message():
    msgs = [user("go"), asst(tu("c", "compact"))]
    cfg = ManualConfig(mode="replace_results", message="[Compacted. Continue with summarized context.]")
    out, stats = manual(context(msgs), Summarising(cfg, SummaryConfig()), env())
    assert stats.manual == 1
    assert out.messages[-1] == {"role": "user", "content": "[Compacted. Continue with summarized context.]"}


def test_saved_transcript_is_recorded_but_written_only_when_asked(tmp_path):
    from compactlab.plumbing.outputs import OutputDir

    e = RunEnv(summarizer=StubSummarizer(), out=OutputDir(tmp_path), write_transcripts=False)
    summary(context(tool_session(2)), SummaryConfig(trigger=1), e)
    assert e.ledger.saved_transcripts[0]["path"] is None and not (tmp_path / "transcripts").exists()
    e2 = RunEnv(summarizer=StubSummarizer(), out=OutputDir(tmp_path / "o"), write_transcripts=True)
    summary(context(tool_session(2)), SummaryConfig(trigger=1), e2)
    e2.out.commit()
    rel = e2.ledger.saved_transcripts[0]["path"]
    assert rel and len((tmp_path / "o" / rel).read_text().splitlines()) == 5


@pytest.mark.parametrize("name", ["reactive", "manual"])
def test_reactive_and_manual_summarise_by_the_summary_table_their_config_carries(name):
    """(#26 §4, #44 §3) They summarise as the policy's summary table says, which their config carries
    beside their own table (``Policy.config_for``): the summary's input cut and output limit are the
    table's, and the run's env holds no summary settings."""
    from compactlab.engine.layers import LAYERS
    from compactlab.engine.policy import build_policy

    class Recording:
        name = "recording"

        def __init__(self):
            self.requests = []

        def summarize(self, request):
            self.requests.append(request)
            return StubSummarizer().summarize(request)

    policy = build_policy({"summary": {"input_chars": 300, "max_output_tokens": 123}}, "p")
    config = policy.config_for(name)
    assert isinstance(config, Summarising) and config.summary is policy.summary and config.own is getattr(policy, name)
    assert policy.config_for("micro") is policy.micro  # (a layer that does not summarise: its table)
    recording = Recording()
    _, stats = LAYERS[name](context(tool_session(6, size=400)), config, RunEnv(summarizer=recording))
    assert getattr(stats, name) == 1 and len(recording.requests) == 1
    request = recording.requests[0]
    assert request.max_output_tokens == 123 and request.input_chars == 300 and len(request.input_text) <= 300
    assert not hasattr(RunEnv(summarizer=recording), "summary_config")
