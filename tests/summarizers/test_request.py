"""SummaryRequest makes its input text lazily; its length is known without making it."""

from __future__ import annotations

import orjson
import pytest

from compactlab.engine.context import Context
from compactlab.engine.layers import RunEnv, summary
from compactlab.transcripts.messages import make_entry
from compactlab.engine.policy import SummaryConfig
from compactlab.summarizers import SummaryRequest, SummaryResult
from helpers import tool_session


@pytest.mark.parametrize("limit", [10, 500, 10**6])
@pytest.mark.parametrize("from_tail", [False, True])
def test_lazy_text_is_the_cut_json_and_its_length_is_known(limit, from_tail):
    messages = tool_session(3, size=200) + [{"role": "user", "content": "naïve — ünïcödé"}]
    entries = [make_entry(m, i) for i, m in enumerate(messages)]
    chars = Context(entries).chars
    req = SummaryRequest(messages, limit=limit, chars=chars, from_tail=from_tail)
    text = orjson.dumps(messages).decode()
    expected = text[-limit:] if from_tail else text[:limit]
    assert req.input_chars == len(expected)  # before the text exists
    assert req._text is None
    assert req.input_text == expected and req.input_chars == len(req.input_text)


class Recording:
    name = "recording"

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        return SummaryResult(f"read {len(request.input_text)} chars", 1, 1)


def test_the_summary_layer_sends_what_the_seed_cut_and_counts_it():
    messages = tool_session(6, size=900)
    ctx = Context([make_entry(m, i) for i, m in enumerate(messages)])
    rec = Recording()
    cfg = SummaryConfig(trigger=1, input_chars=1000, input_from="tail")
    _, stats = summary(ctx, cfg, RunEnv(summarizer=rec))
    assert rec.requests[0].input_text == orjson.dumps(messages).decode()[-1000:]
    assert stats.summary_input_chars == 1000
