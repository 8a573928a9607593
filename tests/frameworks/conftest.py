"""What the frameworks' steps are tested with: a call's facts as the custom layer gives them."""

from __future__ import annotations

import pytest

from compactlab.engine.layers import LayerStats, RunEnv
from compactlab.engine.layers.custom import StepFacts, _Run
from compactlab.engine.layers.summary import SummaryConfig
from compactlab.summarizers import StubSummarizer


class Call:
    """The facts of calls of one run (its state and summarizer shared), made one call at a time."""

    def __init__(self, summarizer=None) -> None:
        self.env = RunEnv(summarizer=summarizer or StubSummarizer())
        self.stats = LayerStats()

    def __call__(self, call: int = 1, *, window: int = 200_000, after_prompt: bool = False, tokens: int = 0) -> StepFacts:
        facts = StepFacts(call, tokens, None, after_prompt, None, False, window)
        facts._run = _Run(self.env, SummaryConfig(), self.stats)
        return facts


@pytest.fixture
def facts() -> Call:
    return Call()


@pytest.fixture(scope="session")
def shared_sessions():
    """Every session of ../shared/transcripts that loads (subagents' left out), loaded once."""
    from compactlab import load_transcript
    from compactlab.errors import CompactlabError
    from helpers import SHARED

    root = SHARED / "transcripts"
    if not root.is_dir():
        pytest.skip(f"../shared/transcripts is absent ({root}): real-transcript tests need the shared folder")
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".jsonl", ".json") and "subagents" not in path.parts:
            try:
                out[str(path.relative_to(root))] = load_transcript(str(path))
            except CompactlabError:  # (not a transcript: a truth file, a harness's own log)
                continue
    assert len(out) >= 10, "the shared folder's sessions did not load"
    return out
