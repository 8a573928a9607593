"""The context window is the model's unless the policy sets one (#29 §5): the recording's own
model_context_window, else the window genai-prices knows for the model, else 200,000."""

from __future__ import annotations

import orjson
import pytest

from compactlab.engine.prices import DEFAULT_WINDOW, known_window, window_of
from helpers import SHARED, tool_session, write_jsonl


def test_where_a_window_comes_from():
    assert window_of(272_000, "gpt-5.3-codex") == (272_000, "recorded")
    assert window_of(None, "gpt-4o") == (128_000, "gpt-4o's") and known_window("openai/gpt-4o") == 128_000
    assert window_of(None, "no-such-model") == (DEFAULT_WINDOW, "default") == window_of(0, None)


def summary(cli, path, *args):
    r = cli("replay", path, "--dry-run", "--format", "json", *args)
    assert r.exit_code == 0, r.output
    return orjson.loads(r.stdout)["runs"][0]["summary"]


@pytest.mark.parametrize("model,overflows", [("gpt-4o", True), ("claude-sonnet-4-5", False)])
def test_overflows_are_counted_against_the_models_window(cli, tmp_path, model, overflows):
    """About 150,000 tokens at the end (chars / 4): over gpt-4o's 128k, within Claude's 200k."""
    msgs = [dict(m, model=model) if m["role"] == "assistant" else m for m in tool_session(30, 20_000)]
    path = write_jsonl(tmp_path / "t.jsonl", msgs)
    s = summary(cli, path, "-p", "none", "--no-calibrate")
    assert (s["window_tokens"], s["window_source"]) == (known_window(model), f"{model}'s")
    assert 128_000 < s["peak_tokens"] < 200_000 and (s["overflows"] > 0) == overflows
    s = summary(cli, path, "-p", "none", "--no-calibrate", "--set", "reactive.window_tokens=300000")
    assert (s["window_tokens"], s["window_source"], s["overflows"]) == (300_000, "policy", 0)


def test_a_codex_rollout_is_held_to_the_window_it_recorded(cli):
    rollouts = sorted((SHARED / "transcripts" / "codex").glob("rollout-*.jsonl"))
    if not rollouts:
        pytest.skip("../shared/transcripts is not beside the project")
    from compactlab import load_transcript

    recorded = load_transcript(str(rollouts[0])).metadata["model_context_window"]
    s = summary(cli, rollouts[0], "-p", "none")
    assert recorded > 200_000 and (s["window_tokens"], s["window_source"]) == (recorded, "recorded")
    assert s["overflows"] == 0
