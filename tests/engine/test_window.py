"""One context window per recording, resolved in one place (#43 §1, §2): --window, else what the
harness recorded or implies, else the model's; the largest prompt the recording shows answered is
a lower bound; a policy's own window sets its reactive trigger, never the overflow judgement."""

from __future__ import annotations

import orjson
import pytest

from compactlab.engine.cost.prices import known_window
from compactlab.engine.window import DEFAULT_WINDOW, Window, resolve
from compactlab.transcripts.model import RecordedCompaction
from helpers import SHARED, tool_session, write_jsonl


def test_where_a_window_comes_from():
    assert resolve(given=50_000, metadata={"model_context_window": 272_000}) == Window(50_000, "--window")
    assert resolve(model="gpt-5.3-codex", metadata={"model_context_window": 272_000}).source == \
        "the recording's model_context_window"
    assert resolve(fmt="claude-code", model="claude-opus-4-6") == Window(200_000, "Claude Code default")
    assert resolve(fmt="claude-code", model="claude-sonnet-4-5[1m]").tokens == 1_000_000
    # (Claude Code records the model without its [1m]: a prompt past 200,000 answered is the 1M window)
    past = [{"input_tokens": 5, "cache_read_input_tokens": 200_000}]
    w = resolve(fmt="claude-code", model="claude-opus-4-6", usage=past)
    assert w == Window(1_000_000, "Claude Code with the 1M-context window (a prompt past its default 200,000 answered)",
                       200_005) and w.harness == 1_000_000
    assert w.describe() == ("1,000,000 tokens: Claude Code with the 1M-context window (a prompt past its default 200,000 "
                            "answered); the largest prompt answered 200,005")
    assert resolve(fmt="claude-code", model="claude-opus-4-6", usage=[{"input_tokens": 200_000}]).tokens == 200_000
    assert resolve(fmt="anthropic", model="claude-sonnet-4-5", usage=past).named == 200_000  # (another harness: raised)
    assert resolve(model="gpt-4o") == Window(128_000, "gpt-4o's in genai-prices") and known_window("openai/gpt-4o") == 128_000
    assert resolve(model="no-such-model").tokens == DEFAULT_WINDOW == resolve().tokens
    # (a Gemini CLI session: the harness's token limit, whatever its model; genai-prices knows few of them,
    # and a session of gemini-3.1-pro-preview was judged on the 200,000 of no known window)
    for model in ("gemini-3.1-pro-preview-customtools", "gemini-2.5-pro", "gemini-2.0-flash", None):
        assert resolve(fmt="gemini-cli", model=model) == Window(1_048_576, "Gemini CLI's token limit")
    assert resolve(fmt="gemini-cli", model="gemini-2.5-pro", metadata={"model_context_window": 500_000}).tokens == 500_000


def test_the_largest_prompt_answered_is_a_lower_bound_whatever_the_source():
    usage = [{"input_tokens": 10, "cache_read_input_tokens": 80_000, "cache_creation_input_tokens": 2_000},
             {"input_tokens": 50_000}]
    w = resolve(model="deepseek-chat", usage=usage)  # (64,000 in genai-prices)
    assert (w.tokens, w.answered) == (82_010, 82_010)
    assert w.source == "the largest prompt the recording shows answered (deepseek-chat's in genai-prices: 64,000)"
    w = resolve(model="gpt-4o", usage=usage)
    assert (w.tokens, w.answered, w.source) == (128_000, 82_010, "gpt-4o's in genai-prices")  # (above it: kept)
    w = resolve(given=60_000, usage=usage)
    assert w.tokens == 82_010 and "--window: 60,000" in w.source


def test_a_window_says_where_the_harness_compacted():
    from compactlab.transcripts.messages import Entry

    done = RecordedCompaction(10, Entry.__new__(Entry), "auto", 167_731)
    w = resolve(fmt="claude-code", model="claude-opus-4-6", compactions=[done])
    assert w.describe() == "200,000 tokens: Claude Code default; the recording compacted at 167,731"


def summary(cli, path, *args):
    r = cli("replay", path, "--dry-run", "--format", "json", *args)
    assert r.exit_code == 0, r.output
    return orjson.loads(r.stdout)["runs"][0]["summary"]


@pytest.mark.parametrize("model,overflows", [("gpt-4o", True), ("claude-sonnet-4-5", False)])
def test_overflows_are_counted_against_the_models_window_and_a_policy_window_is_only_a_trigger(cli, tmp_path, model,
                                                                                            overflows):
    """About 150,000 tokens at the end (chars / 4): over gpt-4o's 128k, within Claude's 200k."""
    msgs = [dict(m, model=model) if m["role"] == "assistant" else m for m in tool_session(30, 20_000)]
    path = write_jsonl(tmp_path / "t.jsonl", msgs)
    s = summary(cli, path, "-p", "none", "--no-calibrate")
    assert (s["window_tokens"], s["window_source"]) == (known_window(model), f"{known_window(model):,} tokens: "
                                                                            f"{model}'s in genai-prices")
    assert 128_000 < s["peak_tokens"] < 200_000 and (s["overflows"] > 0) == overflows
    again = summary(cli, path, "-p", "none", "--no-calibrate", "--set", "reactive.window_tokens=300000")
    assert (again["window_tokens"], again["overflows"]) == (s["window_tokens"], s["overflows"])  # (a trigger only)
    wide = summary(cli, path, "-p", "none", "--no-calibrate", "--window", "300000")
    assert (wide["window_tokens"], wide["overflows"]) == (300_000, 0) and wide["window_source"].endswith("--window")


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_the_recording_shows_answered_is_never_an_overflow(cli, tmp_path, stream):
    """deepseek-chat's table window is 64k; the recording answered prompts of up to ~110k tokens."""
    msgs = tool_session(30, 14_000)
    k = 0
    for m in msgs:
        if m["role"] == "assistant":
            k += 1
            m["model"] = "deepseek-chat"
            m["usage"] = {"input_tokens": 3_700 * k, "output_tokens": 20}
    path = write_jsonl(tmp_path / "t.jsonl", msgs)
    args = ["--calibrate"] if not stream else ["--no-calibrate"]
    s = summary(cli, path, "-p", "none", *args)
    assert s["window_tokens"] >= 3_700 * 30 and "largest prompt the recording shows answered" in s["window_source"]
    assert s["overflows"] == 0


def test_a_codex_rollout_is_held_to_the_window_it_recorded(cli):
    rollouts = sorted((SHARED / "transcripts" / "codex").glob("rollout-*.jsonl"))
    if not rollouts:
        pytest.skip("../shared/transcripts is not beside the project")
    from compactlab import load_transcript

    recorded = load_transcript(str(rollouts[0])).metadata["model_context_window"]
    s = summary(cli, rollouts[0], "-p", "none")
    assert recorded > 200_000 and s["window_tokens"] == recorded
    assert s["window_source"] == f"{recorded:,} tokens: the recording's model_context_window" or \
        "largest prompt answered" in s["window_source"]
    assert s["overflows"] == 0


def test_claude_code_sessions_that_compacted_are_judged_on_200k(cli):
    session = SHARED / "transcripts" / "claude_code" / "spotter-compactions" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    if not session.is_file():
        pytest.skip("../shared/transcripts is not beside the project")
    s = summary(cli, session, "-p", "none")
    assert s["window_tokens"] == 200_000
    assert s["window_source"] == "200,000 tokens: Claude Code default; the recording compacted at 167,731"
    cc = summary(cli, session, "-p", "claude-code")
    assert (cc["window_tokens"], cc["window_source"]) == (s["window_tokens"], s["window_source"])
    assert s["overflows"] > 0  # (no compaction past 200k: the recording's own compaction shows why)
    gem = summary(cli, session, "-p", "gemini-cli")  # (its own 1M window is its trigger, not the judgement)
    assert (gem["window_tokens"], gem["window_source"]) == (s["window_tokens"], s["window_source"])


def test_a_compare_says_the_windows_its_transcripts_were_judged_on():
    from types import SimpleNamespace

    from compactlab.jobs.compare import windows_judged

    def run(transcript, source):
        return SimpleNamespace(transcript=transcript, summary={"window_source": source, "window_tokens": 1})

    results = [run("a", "200,000 tokens: Claude Code default; the recording compacted at 167,731"),
               run("a", "200,000 tokens: Claude Code default; the recording compacted at 167,731"),
               run("b", "200,000 tokens: Claude Code default; the largest prompt answered 17,437"),
               run("c", "258,400 tokens: the recording's model_context_window")]
    assert windows_judged(results) == ["200,000 tokens: Claude Code default (2 transcripts)",
                                       "258,400 tokens: the recording's model_context_window (1 transcript)"]


def test_a_users_prices_file_gives_a_model_its_window_and_prices(cli, tmp_path, monkeypatch):
    """(#43 §1, §5) The user's prices file (their config folder, or --prices) may give a model its
    window: it comes after --window and before what the recording implies."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "prices.toml").write_text('read = "2026-11-27"\n[models."gpt-4o"]\ninput = 2.0\noutput = 8.0\n'
                                        'cache_read = 0.5\ncache_write_5m = 2.0\nwindow = 150000\n')
    monkeypatch.setenv("COMPACTLAB_CONFIG_DIR", str(config))
    msgs = [dict(m, model="gpt-4o") if m["role"] == "assistant" else m for m in tool_session(30, 20_000)]
    path = write_jsonl(tmp_path / "t.jsonl", msgs)
    s = summary(cli, path, "-p", "none", "--no-calibrate")
    assert s["window_tokens"] == 150_000 and s["window_source"] == f"150,000 tokens: gpt-4o's in {config / 'prices.toml'}"
    assert s["overflows"] == 0  # (genai-prices' 128,000 would make some)
    assert summary(cli, path, "-p", "none", "--no-calibrate", "--window", "100000")["window_tokens"] == 100_000
    from compactlab.engine.cost.prices import load_prices

    assert load_prices().lookup("gpt-4o").input == 2.0
    (config / "prices.toml").write_text('[models."gpt-4o"]\ninput = 2.0\noutput = 8.0\nwindow = "big"\n')
    r = cli("replay", path, "--dry-run")
    assert r.exit_code == 2 and "models.gpt-4o.window must be a context window in tokens" in r.stderr


def test_a_window_genai_prices_gives_is_read_from_it_once_then_from_the_cache(tmp_path, monkeypatch):
    """(#44 §7) A model priced by compactlab's corrections (deepseek-chat) never asks genai-prices
    for its prices, only for its window: the command's own price source keeps that window in the
    cache, so the next process reads it there (it imported genai-prices' data, 0.2 s, at every
    start of every compare worker); a dry run's read-only source reads the cache and writes none."""
    from compactlab.engine.cost import prices as prices_module

    asked: list[str] = []
    real = prices_module.GenaiPrices._info
    monkeypatch.setattr(prices_module.GenaiPrices, "_info", lambda self, m: asked.append(m) or real(self, m))
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "dry"))

    def another_process() -> None:
        monkeypatch.setattr(prices_module, "_DEFAULT", {})
        known_window.cache_clear()

    another_process()
    prices_module.load_prices(cache=False)
    assert known_window("deepseek-chat") == 64_000 and asked == ["deepseek-chat"]
    another_process()
    assert known_window("deepseek-chat") == 64_000 and len(asked) == 2  # a dry run wrote nothing
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "run"))
    for _ in range(3):  # three processes of a command that may write its cache
        another_process()
        prices_module.load_prices()
        assert known_window("deepseek-chat") == 64_000
    assert len(asked) == 3  # genai-prices asked by the first only
    known_window.cache_clear()
