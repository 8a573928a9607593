from __future__ import annotations

import pytest
from click.testing import CliRunner

from helpers import SAMPLES, SHARED


@pytest.fixture
def cli():
    """Invoke the compactlab CLI in-process: cli("replay", path, ...) -> Result."""
    from compactlab.cli import main

    runner = CliRunner()

    def invoke(*args: str, **kw):
        return runner.invoke(main, [str(a) for a in args], catch_exceptions=False, **kw)

    return invoke


@pytest.fixture
def samples():
    return SAMPLES


@pytest.fixture
def shared_transcripts():
    path = SHARED / "transcripts"
    if not path.is_dir():
        pytest.skip(f"../shared/transcripts is absent ({path}): real-transcript tests need the shared folder")
    return path
