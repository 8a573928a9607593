"""replay says so, where it is seen, when a policy costs more than no compaction (#17 part 7)."""

from __future__ import annotations

import orjson

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
