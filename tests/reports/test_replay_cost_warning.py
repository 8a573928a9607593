"""replay says so, where it is seen, when a policy costs more than no compaction (#17 part 7)."""

from __future__ import annotations

import orjson
import pytest

from helpers import SAMPLES

SMALL = SAMPLES / "synth-small.jsonl"


def test_a_policy_dearer_than_no_compaction_is_said_with_its_reason(cli):
    dear = cli("replay", SMALL, "-p", "observation-masking", "--dry-run")
    summary = orjson.loads(cli("replay", SMALL, "-p", "observation-masking", "--dry-run", "--format", "json").stdout)
    s = summary["runs"][0]["summary"]
    assert s["cost_usd"] > s["raw_cost_usd"]  # (what the test is about)
    line = next(line for line in dear.stdout.splitlines() if line.startswith("This policy costs more"))
    assert f"${s['cost_usd']:,.4f} against ${s['raw_cost_usd']:,.4f}" in line
    assert f"{s['cache_write_tokens']:,} of its {s['tokens_total']:,} tokens are cache writes" in line
    md = cli("replay", SMALL, "-p", "observation-masking", "--dry-run", "--format", "md").stdout
    assert "**This policy costs more than no compaction" in md
    cheap = cli("replay", SMALL, "-p", "s08", "--dry-run")
    assert "costs more than no compaction" not in cheap.stdout
    # (the write premium is Anthropic's: a DeepSeek or OpenAI cache miss is billed at the input price)
    assert s["cache_model"] == "anthropic" and "1.25× for Anthropic's 5-minute writes" in line
    other = cli("replay", SMALL, "-p", "observation-masking", "--dry-run", "--cache-model", "openai")
    line = next(line for line in other.stdout.splitlines() if line.startswith("This policy costs more"))
    assert "cache writes (at the input price or above) where" in line and "Anthropic" not in line


@pytest.mark.parametrize("reduction, said", [
    (0.5, "although it sends 50% fewer tokens"),
    (0.095, "although it sends 10% fewer tokens"),
    (0.05, "although it sends 5.0% fewer tokens"),
    (1 - 106_580 / 106_617, "although it sends under 0.1% fewer tokens"),  # (a real session: it said "0% fewer")
    (0.001, "although it sends 0.1% fewer tokens"),
    (0.0, "and sends no fewer tokens"),
    (-0.2, "and sends no fewer tokens"),  # (a summary added: it said "-20% fewer")
    (None, "and sends no fewer tokens"),
])
def test_the_cost_warnings_say_a_small_saving_of_tokens_as_small_and_none_as_none(cli, tmp_path, reduction, said):
    from compactlab.reports.replay_report import fewer_tokens

    assert fewer_tokens(reduction) == said


def test_compare_explains_a_dearer_run_with_the_same_words(cli):
    r = cli("compare", SMALL, "-p", "observation-masking", "--dry-run", "--format", "md")
    s = orjson.loads(cli("replay", SMALL, "-p", "observation-masking", "--dry-run", "--format", "json").stdout)
    from compactlab.reports.replay_report import fewer_tokens

    assert f"with no compaction, {fewer_tokens(s['runs'][0]['summary']['reduction'])}: " in r.stdout
