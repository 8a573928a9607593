"""Golden replays: a small sample through every preset, compared with committed results.

Regenerate after an intended change with ``UPDATE_GOLDEN=1 pytest tests/test_golden.py``.
"""

from __future__ import annotations

import json
import os

import pytest

from compactlab import load_policy, load_transcript, preset_names, replay
from compactlab.core import CORES
from helpers import ROOT, SAMPLES

GOLDEN = ROOT / "tests" / "golden"
CASES = [(sample, preset) for sample in ("synth-small", "manual-compact", "huge-batch") for preset in preset_names()]


@pytest.mark.parametrize("sample,preset", CASES)
def test_golden(sample, preset):
    run = replay(load_transcript(str(SAMPLES / f"{sample}.jsonl")), load_policy(preset)).to_dict()
    run["summary"]["transcript"] = os.path.basename(run["summary"]["transcript"])
    # (the core that ran is no figure: both give these, tests/engine/test_native_core.py holds them so)
    assert run["summary"].pop("core") in CORES
    path = GOLDEN / f"{sample}--{preset}.json"
    if should_update():
        path.write_text(json.dumps(run, indent=1, sort_keys=True) + "\n")
    assert path.is_file(), f"no golden file {path.name}: run with UPDATE_GOLDEN=1"
    assert run == json.loads(path.read_text())


def should_update() -> bool:
    """Only ``UPDATE_GOLDEN=1`` rewrites the golden files (then the test passes against what it
    just wrote); under CI that is an error, never a silent pass."""
    if os.environ.get("UPDATE_GOLDEN", "") != "1":
        return False
    if os.environ.get("CI"):
        pytest.fail("UPDATE_GOLDEN under CI: golden files are compared there, never rewritten")
    return True
