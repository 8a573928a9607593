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


def test_a_frameworks_preset_is_listed_and_fingerprinted_without_importing_the_framework():
    """Importing LangChain costs about a second and Strands half of one: a preset of their steps is
    loaded, listed and fingerprinted without either (the module finds the framework when it is
    loaded, so a missing extra is still said then, and imports it when a step first runs)."""
    import subprocess
    import sys

    from helpers import ROOT

    code = ("import sys\n"
            "from compactlab.engine.policy import load_policy, preset_names\n"
            "names = [n for n in preset_names() if n.startswith(('langchain-', 'strands-'))]\n"
            "prints = {n: load_policy(n).fingerprint for n in names}\n"
            "assert len(names) == 4 and len(set(prints.values())) == 4, prints\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('langchain', 'langchain_core', 'strands')))\n"
            "from compactlab.frameworks import langchain\n"
            "print(len(langchain.SUMMARY_INSTRUCTIONS) > 100, 'langchain' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "True True"]  # (none of them; then LangChain's own prompt, read)
