"""A prompt cache per provider (#29 §1): rules chosen from the recorded model, checked against
recordings made by those providers' caches (synthetic ones here, the shared rollouts when present)."""

from __future__ import annotations

import orjson
import pytest

from compactlab.engine.cost.cache_rules import RULES, provider_of, rules_for
from corpus.test_calibration_default import CPT, OVERHEAD
from helpers import SHARED, tool_session, write_jsonl


def test_each_model_is_served_by_its_providers_cache():
    assert [provider_of(m) for m in ("claude-sonnet-4-5", "gpt-5.3-codex", "openai/gpt-4o", "o3-mini",
                                     "deepseek-chat", "gemini-2.5-pro", "vertex_ai/gemini-2.0", None, "llama-3")] == \
        ["anthropic", "openai", "openai", "openai", "deepseek", "gemini", "gemini", "anthropic", "anthropic"]
    assert rules_for("gpt-4o", "deepseek") is RULES["deepseek"]
    with pytest.raises(ValueError, match="unknown cache model"):
        rules_for(None, "nope")


def test_reads_come_in_the_providers_steps_above_its_minimum():
    openai, deepseek, anthropic = RULES["openai"], RULES["deepseek"], RULES["anthropic"]
    assert [openai.read(n) for n in (1023, 1024, 1151, 1152, 5000)] == [0, 1024, 1024, 1152, 4992]
    assert [deepseek.read(n) for n in (63, 64, 130)] == [0, 64, 128]
    assert anthropic.read(1234) == 1234 and not anthropic.reply_cached and openai.reply_cached


def recording(model: str, rule, turns: int = 30, miss_at: int | None = None) -> list[dict]:
    """A tool session whose every call records the prompt the made-up tokenizer counts and the
    cached tokens ``rule`` gives (the previous prompt, plus its reply where the rule caches it),
    on ``model``; ``miss_at``: that call's cache missed all but 1,024 tokens."""
    out, chars, prev = [], 0, None
    for m in tool_session(turns, 3000):
        line = dict(m)
        if m["role"] == "assistant":
            prompt = OVERHEAD + round(chars / CPT)
            reply = round(len(orjson.dumps(m)) / CPT)
            cached = 0 if prev is None else rule(prev, prompt)
            if len(out) // 2 == miss_at:
                cached = 1024
            line.update(model=model, usage={"input_tokens": prompt - cached, "cache_read_input_tokens": cached,
                                            "output_tokens": reply})
            prev = (prompt, reply)
        chars += len(orjson.dumps(m))
        out.append(line)
    return out


def ledger(cli, path, *args):
    r = cli("replay", path, "-p", "none", "--dry-run", "--format", "json", *args)
    assert r.exit_code == 0, r.output
    s = orjson.loads(r.stdout)["runs"][0]["summary"]
    return s["cache_model"], s["cache_ledger"]


def test_a_deepseek_recording_is_priced_by_deepseeks_cache_and_not_by_anthropics(cli, tmp_path):
    def deepseek(prev, prompt):  # the previous prompt and reply, in 64-token units
        return min(prev[0] + prev[1], prompt) // 64 * 64

    path = write_jsonl(tmp_path / "t.jsonl", recording("deepseek-chat", deepseek))
    model, own = ledger(cli, path)
    assert model == "deepseek" and abs(own["cost_error"]) < 0.01, own
    assert all(abs(m - r) <= 64 for _, m, r in own["per_call"][1:])  # call by call, within a unit
    model, anthropic = ledger(cli, path, "--cache-model", "anthropic")
    assert model == "anthropic" and abs(anthropic["cost_error"]) > 2 * abs(own["cost_error"]) + 0.005


def test_a_miss_the_recording_shows_is_replayed_as_recorded(cli, tmp_path):
    def openai(prev, prompt):
        return min(prev[0] + prev[1], prompt) // 128 * 128

    path = write_jsonl(tmp_path / "t.jsonl", recording("gpt-4o", openai, miss_at=20))
    model, plain = ledger(cli, path)
    _, kept = ledger(cli, path, "--keep-recorded-compactions")
    assert model == "openai" and plain == kept, (plain, kept)  # a miss is no compaction: replayed under any policy
    assert abs(plain["cost_error"]) < 0.01, plain
    # call 20 reads what the cache kept (the rules alone would read its whole prefix, 20 calls long)
    assert [(c, m) for c, m, r in plain["per_call"] if r == 1024 and c > 0] == [(20, 1024)]
    assert plain["per_call"][19][1] > 10 * 1024


@pytest.mark.parametrize("folder", ["codex", "openai"])
def test_the_shared_openai_family_recordings_are_priced_within_their_targets(cli, folder):
    """Modelled no compaction against the input cost the recorded usage implies, with the
    recording's cache misses replayed: within 5% on every Codex rollout of 10+ calls, within 2% on
    the OpenAI-style trajectories that record cached tokens."""
    root = SHARED / "transcripts" / folder
    if not root.is_dir():
        pytest.skip("../shared/transcripts is not beside the project")
    checked = 0
    for path in sorted(root.iterdir()):
        r = cli("replay", path, "-p", "none", "--dry-run", "--format", "json", "--keep-recorded-compactions")
        s = orjson.loads(r.stdout)["runs"][0]["summary"] if r.exit_code == 0 else None
        if s is None or not s["cache_ledger"] or s["calls"] < 10 or not s["cache_ledger"]["recorded_read_tokens"]:
            continue
        limit = 0.05 if folder == "codex" else 0.02
        assert s["cache_model"] in ("openai", "deepseek") and abs(s["cache_ledger"]["cost_error"]) <= limit, \
            (path.name, s["cache_ledger"]["cost_error"])
        checked += 1
    assert checked


@pytest.mark.parametrize("model,provider", [("azure/gpt-4o", "openai"), ("openrouter/openai/gpt-4o-mini", "openai"),
                                            ("together_ai/deepseek-ai/DeepSeek-V3", "deepseek"),
                                            ("vertex_ai/gemini-2.5-pro", "gemini"), ("bedrock/claude-sonnet-4-5", "anthropic"),
                                            ("gpt-5.3-codex", "openai")])
def test_a_provider_prefixed_name_gets_its_models_cache_rules(model, provider):
    """(#43 §8) ``provider/model`` names (litellm's) are the model's provider's, never Anthropic's by default."""
    from compactlab.engine.cost.cache_rules import family_of, rules_for

    assert rules_for(model).provider == provider and family_of(model) == provider
