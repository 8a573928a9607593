"""(#58 §4) Rules that a change could break without a test noticing, each held here: which
recordings are priced with no prompt cache, which window wins, what next_action.json says of its
rule, and a next-action comparison whose control agrees no more than chance."""

from __future__ import annotations

import pytest

from compactlab.engine.cost.cache_rules import RULES, uncached_as_recorded
from compactlab.engine.window import resolve


@pytest.mark.parametrize("provider, usage, expected", [
    ("anthropic", [{"input_tokens": 900}, {"input_tokens": 1000}], True),  # (no breakpoints set: nothing cached)
    ("anthropic", [{"input_tokens": 900}, {"input_tokens": 10, "cache_read_input_tokens": 990}], False),
    ("anthropic", [{"input_tokens": 900}], False),  # (one call tells nothing)
    ("openai", [{"input_tokens": 900}, {"input_tokens": 1000}], False),  # (OpenAI caches on its own: a miss, not none)
    ("deepseek", [{"input_tokens": 900}, {"input_tokens": 1000}], False),
    ("gemini", [{"input_tokens": 900}, {"input_tokens": 1000}], False),
])
def test_only_an_anthropic_recording_that_cached_nothing_is_priced_with_no_cache(provider, usage, expected):
    assert uncached_as_recorded(usage, RULES[provider]) is expected


def test_the_window_of_your_prices_file_beats_the_recordings():
    """The documented order: --window, then your prices file's window for the model, then the
    recording's (a Codex rollout's model_context_window), then the price table's."""
    meta = {"model_context_window": 258_400}
    mine = resolve(fmt="codex", model="gpt-5.1-codex", metadata=meta, configured=(100_000, "my-prices.toml"))
    assert (mine.tokens, mine.source) == (100_000, "gpt-5.1-codex's in my-prices.toml")
    given = resolve(given=50_000, fmt="codex", model="gpt-5.1-codex", metadata=meta, configured=(100_000, "x"))
    assert given.tokens == 50_000
    assert resolve(fmt="codex", model="gpt-5.1-codex", metadata=meta).tokens == 258_400


def test_next_action_json_states_the_rule_in_force():
    from compactlab.next_action.actions import RULE, Action, agree

    assert "2 of" not in RULE and "same tool" in RULE and "program" in RULE
    shell = Action("tool", tool="bash", target="src/a.py", command="sed")
    # the rule as stated: the tool alone does not agree; the program and the target both must
    assert not agree(shell, Action("tool", tool="bash", target="src/a.py", command="cat"))
    assert not agree(shell, Action("tool", tool="bash", target="src/b.py", command="sed"))
    assert agree(shell, Action("tool", tool="Bash", target="/repo/src/a.py", command="sed"))


def test_a_control_no_better_than_chance_makes_the_comparison_tell_nothing():
    """(#58) 0 of 12 controls agreeing against a chance of 5%: the headline is not a result; check
    neither fails nor passes the policy on it, and says why."""
    from types import SimpleNamespace

    from compactlab.jobs.check import _next_action_gate
    from compactlab.next_action import at_chance
    from compactlab.reports.next_action_report import _rows

    assert at_chance(0.0, 0.05) and at_chance(0.05, 0.05) and not at_chance(0.2, 0.05)
    p = {"policy": "p", "samples": 12, "failed": 0, "above_chance": -0.01, "above_chance_interval": [-0.01, 0.4],
         "agreement": 0.0, "agreement_interval": [0, 0.2], "chance_agreement": 0.05, "control_agreement": 0.0,
         "difference": 0.0, "difference_interval": [-0.3, -0.2], "lost_agreement": None, "lost_samples": 0,
         "kept_agreement": None, "kept_samples": 0, "candidates": 12, "tells_nothing": True}
    assert _rows({"policies": [p]})[0][2] == "tells nothing"
    said: list[str] = []
    ns = SimpleNamespace(**{**p, "difference_interval": (-0.3, -0.2)})
    failing = _next_action_gate(SimpleNamespace(policies=[ns], spent_line=lambda: "spent"), 0.10,
                                lambda line, *_: said.append(line))
    assert failing == [] and "tells nothing" in said[0] and "no more than chance (5%)" in said[0]
    p["tells_nothing"] = False
    assert _rows({"policies": [p]})[0][2] == "-1% [-1, 40]"


@pytest.mark.parametrize("policy, overrides", [
    ("none", ["custom.enabled=true", "custom.call=custom_steps:keep_ends", "order=['custom']"]),  # (drops only)
    ("s08", []), ("claude-code", []), ("observation-masking", []), ("opencode", []), ("s06", []),
])
def test_every_loss_is_charged_to_the_event_that_dropped_it(samples, policy, overrides):
    """(#58 §2) Summaries, snips, masks and a step's own edits alike: every probe recall reports
    lost names the call of the compaction event that removed it, and the events' losses are
    exactly those (call, string) pairs."""
    from compactlab import load_policy, load_transcript, replay

    run = replay(load_transcript(str(samples / "synth-long.jsonl")), load_policy(policy, overrides))
    lost = [o for o in run.probe_ledger if o.status != "kept"]  # (lost, or recoverable: removed either way)
    assert any(o.status == "lost" for o in lost), policy
    calls = {e.call for e in run.events}
    assert all(o.removed_at in calls for o in lost), {(o.removed_by, o.removed_at) for o in lost
                                                      if o.removed_at not in calls}
    assert {(e.call, text) for e in run.events for text, _ in e.lost} == {(o.removed_at, o.probe) for o in lost}
