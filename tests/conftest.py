from __future__ import annotations

import hypothesis
import pytest
from click.testing import CliRunner

from helpers import SAMPLES, SHARED, examples

# a property test that names no number of examples: 100 in a thorough run, a fifth in the README's suite
# (on top of the profile in force, e.g. Hypothesis's own "ci" under CI)
hypothesis.settings.register_profile("compactlab", hypothesis.settings.default, max_examples=examples(100))
hypothesis.settings.load_profile("compactlab")


@pytest.hookimpl(tryfirst=True)  # (before -m selects: `pytest -m property` finds them)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every property test is marked ``property``: CI runs them again with every example they name
    (``COMPACTLAB_THOROUGH=1 pytest -m "slow or property"``)."""
    for item in items:
        if hypothesis.is_hypothesis_test(getattr(item, "obj", None)):
            item.add_marker(pytest.mark.property)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What every test module imported (the package, its dependencies, tens of thousands of objects
    that live as long as the worker) is frozen out of the collector's full passes, each of which
    otherwise traverses it all again (the command freezes what it has read for the same reason:
    ``plumbing/process.py``); nothing collectable is frozen with it. A full pass waits for a hundred
    passes of the middle generation rather than ten: a worker keeps what the frameworks' tests
    import, and its full passes took 12 s of the suite's CPU (2 s so); a test's own cycles are young,
    collected by the first two generations as before."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(700, 10, 1000)


@pytest.fixture(autouse=True, scope="session")
def _own_cache_folder(tmp_path_factory):
    """The user's cache folder (prices, live summaries), config folder (their prices file) and home
    (their harnesses' sessions and settings) are the session's own, never the real ones; a test
    that needs another sets COMPACTLAB_CACHE_DIR, COMPACTLAB_CONFIG_DIR or HOME itself."""
    import os

    harness = ("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "CLAUDE_CODE_AUTO_COMPACT_WINDOW", "DISABLE_AUTO_COMPACT", "CODEX_HOME",
               "GOOSE_AUTO_COMPACT_THRESHOLD", "PI_CODING_AGENT_DIR", "OPENCODE_CONFIG", "XDG_CONFIG_HOME")
    before = {k: os.environ.get(k) for k in ("COMPACTLAB_CACHE_DIR", "COMPACTLAB_CONFIG_DIR", "HOME", *harness)}
    os.environ["COMPACTLAB_CACHE_DIR"] = str(tmp_path_factory.mktemp("user-cache"))
    os.environ["COMPACTLAB_CONFIG_DIR"] = str(tmp_path_factory.mktemp("user-config"))  # (no user prices file)
    # (nor the user's harness settings or sessions: tune --harness and inspect read them from HOME and the environment)
    os.environ["HOME"] = str(tmp_path_factory.mktemp("home"))
    for k in harness:
        os.environ.pop(k, None)
    yield
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


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
