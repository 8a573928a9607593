"""(#45 §5) A framework's preset works where a preset does: compare with its verdict, check with
its baseline, tune over its typed settings, --jobs."""

from __future__ import annotations

import json

from helpers import SAMPLES

SMALL = SAMPLES / "synth-small.jsonl"
MEDIUM = SAMPLES / "synth-medium.jsonl"


def test_compare_puts_the_frameworks_beside_our_presets_with_a_verdict(cli, tmp_path):
    out = tmp_path / "cmp"
    narrow = tmp_path / "narrow.toml"
    narrow.write_text('extends = "strands-sliding-window"\nname = "strands-12"\n[custom.settings]\nwindow_size = 12\n')
    r = cli("compare", MEDIUM, SMALL, "-p", "anthropic-clear-tool-uses", "-p", "langchain-clear-tool-uses",
            "-p", narrow, "--jobs", "2", "--out", out, "-q", "--charts", "none")
    assert r.exit_code == 0, r.stderr
    doc = json.loads((out / "results.json").read_text())
    labels = {e["label"] for e in doc["verdict"]["entries"]}
    assert labels == {"anthropic-clear-tool-uses", "langchain-clear-tool-uses", "strands-12", "none"}
    runs = {(r["policy"], r["transcript"].rsplit("/", 1)[-1]): r for r in doc["runs"]}
    assert runs[("strands-12", "synth-medium.jsonl")]["custom"] > 0


def test_check_keys_the_baseline_by_the_frameworks_code_and_settings(cli, tmp_path):
    baseline = tmp_path / "baseline.json"
    args = ("check", SMALL, "-p", "strands-sliding-window", "--baseline", baseline)
    assert cli(*args, "--update-baseline").exit_code == 0
    assert cli(*args).exit_code == 0
    r = cli(*args, "--set", "custom.settings.window_size=6", "--format", "json")
    assert json.loads(r.stdout)["results"][0]["fingerprint_changed"] is True


def test_tune_searches_a_frameworks_typed_settings(cli, tmp_path):
    out = tmp_path / "tune"
    r = cli("tune", MEDIUM, "-p", "langchain-clear-tool-uses", "--space", "custom.settings.trigger=10000:60000",
            "--space", "custom.settings.keep=1:8", "--trials", "3", "--out", out, "-q")
    assert r.exit_code == 0, r.stderr
    doc = json.loads((out / "front.json").read_text())
    assert doc["space"] == ["custom.settings.trigger int 10000..60000", "custom.settings.keep int 1..8"]
    assert doc["front"] and all(10_000 <= p["custom.settings.trigger"] <= 60_000 for p in doc["front"])
    bad = cli("tune", MEDIUM, "-p", "strands-sliding-window", "--space", "custom.settings.window_size=0.5:2.5",
              "--trials", "2", "--out", tmp_path / "bad", "-q")
    assert bad.exit_code == 2 and "custom.settings.window_size" in bad.stderr
