"""The live summarizer against a fake Messages API only: never the network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.errors import SummarizerError, UsageError
from compactlab.summarizers import LiveOptions, build_counter, build_summarizer
from compactlab.summarizers.base import SummaryRequest
from compactlab.summarizers.prompts import DATA_NOTICE, PROMPTS
from fake_anthropic import FakeAPI
from helpers import SAMPLES

KEY = "sk-ant-test-SECRET-0123456789"


@pytest.fixture
def api():
    return FakeAPI()


def live(api: FakeAPI, tmp_path: Path, cache: bool = True, prompt: str | None = None) -> LiveOptions:
    import httpx2

    return LiveOptions(api_key=KEY, model="claude-haiku-4-5", base_url="http://fake.test",
                       cache_dir=str(tmp_path / "cache") if cache else None, prompt=prompt,
                       http_client=httpx2.Client(transport=api.transport()))


def request(text: str = '[{"role":"user","content":"fix the bug"}]') -> SummaryRequest:
    return SummaryRequest(messages=[{"role": "user", "content": "fix the bug"}], input_text=text,
                          prompt=PROMPTS["s08"], max_output_tokens=2000, kind="summary", call=3)


def test_one_request_per_summary_as_the_api_expects_it(api, tmp_path):
    s = build_summarizer("anthropic", live(api, tmp_path))
    result = s.summarize(request())
    [req] = api.requests
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    body = req["body"]
    assert body["model"] == "claude-haiku-4-5" and body["max_tokens"] == 2000
    assert "temperature" not in body and "top_p" not in body
    content = body["messages"][0]["content"]
    assert content.startswith(PROMPTS["s08"]) and DATA_NOTICE in content
    assert "<conversation>\n[{\"role\":\"user\",\"content\":\"fix the bug\"}]\n</conversation>" in content
    # the analysis is stripped from the kept summary
    assert result.text == "1. Primary Request: the fake summary 1"
    assert (result.input_tokens, result.output_tokens, result.cached) == (1001, 50, False)


def test_a_rerun_is_served_from_the_cache(api, tmp_path):
    build_summarizer("anthropic", live(api, tmp_path)).summarize(request())
    again = build_summarizer("anthropic", live(api, tmp_path)).summarize(request())
    assert len(api.requests) == 1 and again.cached and again.input_tokens == 1001
    files = list((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 1 and KEY not in files[0].read_text()
    build_summarizer("anthropic", live(api, tmp_path, cache=False)).summarize(request())
    assert len(api.requests) == 2


def test_429_then_success(api, tmp_path):
    api.script = [(429, "rate limited")]
    assert build_summarizer("anthropic", live(api, tmp_path)).summarize(request()).text
    assert len(api.requests) == 2


def test_529_until_the_retries_are_exhausted(api, tmp_path):
    api.script = [(529, "Overloaded")] * 3
    with pytest.raises(SummarizerError, match="HTTP 529"):
        build_summarizer("anthropic", live(api, tmp_path)).summarize(request())
    assert len(api.requests) == 3  # the SDK's 2 retries


def test_prompt_too_long_shrinks_the_input_and_retries_once(api, tmp_path):
    api.script = [(400, "prompt is too long: 250000 tokens > 200000 maximum")]
    text = json.dumps([{"role": "user", "content": "x" * 1000}])
    build_summarizer("anthropic", live(api, tmp_path)).summarize(request(text))
    first, second = (r["body"]["messages"][0]["content"] for r in api.requests)
    assert len(second) < len(first)
    api.script = [(400, "prompt is too long")] * 2
    with pytest.raises(SummarizerError, match="HTTP 400"):
        build_summarizer("anthropic", live(api, tmp_path, cache=False)).summarize(request("other input"))


def test_the_key_never_appears_in_an_error(api, tmp_path):
    api.script = [(401, f"invalid x-api-key {KEY}")]
    with pytest.raises(SummarizerError) as exc:
        build_summarizer("anthropic", live(api, tmp_path)).summarize(request())
    assert KEY not in str(exc.value) and "[key]" in str(exc.value)
    assert KEY not in repr(live(api, tmp_path))


def test_no_piece_of_the_key_survives_a_cut_or_an_echo(api, tmp_path):
    """A server that echoes the key near where the message is cut (500 characters) leaked most of
    it when the cut came before the scrub; pieces of it, echoed apart, must go as well."""
    key = "sk-ant-api03-" + "Zq81xYw0Lm" * 6 + "-AAAA"
    options = LiveOptions(api_key=key, model="claude-haiku-4-5", base_url="http://fake.test", cache_dir=None,
                          prompt=None, http_client=live(api, tmp_path).http_client)
    summarizer = build_summarizer("anthropic", options)
    windows = {key[i:i + 8] for i in range(len(key) - 7)}
    for pad in range(200, 520, 3):  # the key straddles the 500th character for some of them
        api.script = [(400, "x" * pad + key + " and again " + key[20:40] + " " + key[:9])]
        with pytest.raises(SummarizerError) as exc:
            summarizer.summarize(request())
        text = str(exc.value)
        assert len(text) <= 500 and not any(w in text for w in windows), pad


def test_failures_feed_the_circuit_breaker_and_the_replay_goes_on(api, tmp_path):
    api.script = [(529, "Overloaded")] * 100
    t = load_transcript(str(SAMPLES / "synth-medium.jsonl"))
    run = replay(t, load_policy("s08", ["manual.enabled=false"]), summarizer=build_summarizer("anthropic", live(api, tmp_path)))
    assert run.summary.summaries == 0 and len(run.calls) == len(t.call_positions)
    assert [f["kind"] for f in run.failed_summaries] == ["summary"] * 3  # then the breaker opened
    assert len(api.requests) == 9


def test_exact_token_counts_are_cached(api, tmp_path):
    t = load_transcript(str(SAMPLES / "parallel-batch.jsonl"))
    counter = build_counter(live(api, tmp_path))
    run = replay(t, load_policy("none"), counter=counter)
    assert {r["path"] for r in api.requests} == {"/v1/messages/count_tokens"}
    assert [c.tokens for c in run.calls] == [c.raw_tokens for c in run.calls]
    assert run.calls[1].tokens == len(json.dumps(t.messages[:3])) // 3
    n = len(api.requests)
    replay(t, load_policy("none"), counter=build_counter(live(api, tmp_path)))
    assert len(api.requests) == n


def test_missing_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY is not set"):
        LiveOptions.from_env(None, None, False, None)


def test_model_and_base_url_from_the_environment(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-sonnet-4-5")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    opts = LiveOptions.from_env(None, None, True, "claude-code")
    assert (opts.model, opts.base_url, opts.cache_dir, opts.prompt) == ("claude-sonnet-4-5", "http://127.0.0.1:9", None,
                                                                        PROMPTS["claude-code"])
    assert LiveOptions.from_env("m2", "c", False, None).model == "m2"
