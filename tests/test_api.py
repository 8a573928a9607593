import compactlab


def test_public_surface_is_explicit():
    assert sorted(compactlab.__all__) == sorted(set(compactlab.__all__))
    for name in compactlab.__all__:
        assert hasattr(compactlab, name), name
    public = {n for n in dir(compactlab) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(compactlab, n)).__name__ == "module"}
    assert public - modules == set(compactlab.__all__) - {"__version__"}


def test_replay_is_the_function_whatever_was_imported_first():
    """The engine is compactlab.engine.loop; compactlab.replay is the function, however imported."""
    import subprocess
    import sys

    from helpers import SAMPLES

    run = (f"t = load_transcript({str(SAMPLES / 'synth-small.jsonl')!r})\n"
           "print(replay(t, load_policy('s08')).summary.calls, compactlab.replay(t, load_policy('none')).summary.calls,"
           " feeds.READ_BATCH, type(compactlab.replay).__name__)")
    for first in ("import compactlab.engine.loop\nfrom compactlab import load_policy, load_transcript, replay\n",
                  "from compactlab import load_policy, load_transcript, replay\nimport compactlab.engine.loop\n"):
        code = first + "import compactlab\nimport compactlab.engine.feeds as feeds\n" + run
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.split() == ["30", "30", "256", "function"]


def test_replay_takes_two_records_and_a_shorthand_of_their_fields(tmp_path):
    """(#60 §4) ``replay(transcript, policy, ReplayOptions(...), ReplayOutput(...))``; a field of
    either by its name is the same run; a name of neither is a TypeError, as Python says it."""
    import inspect

    import pytest

    from compactlab import ReplayOptions, ReplayOutput, load_policy, load_transcript, replay
    from helpers import tool_session, write_jsonl

    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", tool_session(12, 3000))))
    policy = load_policy("s08", ["summary.trigger=8000"])
    by_records = replay(t, policy, ReplayOptions(cache_ttl="1h", keep_contexts={3}),
                        ReplayOutput(out_dir=tmp_path / "out"))
    by_names = replay(t, policy, cache_ttl="1h", keep_contexts={3}, out_dir=tmp_path / "out2")
    assert by_records.summary.cost_usd == by_names.summary.cost_usd and by_records.summary.cache_ttl == "1h"
    assert list(by_records.contexts) == [3] and (tmp_path / "out").is_dir() and (tmp_path / "out2").is_dir()
    with pytest.raises(TypeError, match="unexpected keyword argument 'cache_tll'"):
        replay(t, policy, cache_tll="1h")
    params = inspect.signature(replay).parameters
    assert [p for p in params if params[p].kind is not inspect.Parameter.VAR_KEYWORD] == [
        "transcript", "policy", "options", "output"]
    assert len(ReplayOptions._fields) + len(ReplayOutput._fields) == 16  # (named tuples: _replace, _fields)


def test_replay_estimates_tokens_as_the_command_line_unless_told_otherwise(tmp_path, cli):
    """``compactlab.replay`` left at ``calibration="auto"`` fits a loaded transcript's recorded usage
    as ``compactlab replay`` does (the library's first example gave half the command line's cost on
    a Claude Code session); None is the policy's estimate; a stream is never fitted; a string that
    is not "auto" is refused."""
    import json

    import pytest

    from compactlab import load_policy, load_transcript, open_transcript, replay
    from helpers import compacting_recording

    path = compacting_recording(tmp_path / "recorded.jsonl", usage=True)
    t, policy = load_transcript(str(path)), load_policy("s08")
    fitted = replay(t, policy).summary
    command = json.loads(cli("replay", path, "--dry-run", "--format", "json").stdout)["runs"][0]["summary"]
    assert fitted.calibration == command["calibration"] and fitted.calibration["source"] == "recorded usage"
    assert (fitted.tokens_total, fitted.cost_usd) == (command["tokens_total"], command["cost_usd"])
    assert replay(t, policy, calibration=None).summary.calibration["source"] == "policy"
    assert replay(open_transcript(str(path)), policy).summary.calibration["source"] == "policy"
    with pytest.raises(ValueError, match="a Calibration, None or 'auto'"):
        replay(t, policy, calibration="recorded usage")


def test_a_transcript_is_named_by_a_string_or_a_path():
    """``load_transcript`` and ``open_transcript`` take a ``pathlib.Path`` as they take a string."""
    from pathlib import Path

    from compactlab import load_transcript, open_transcript
    from helpers import SAMPLES

    name = SAMPLES / "synth-small.jsonl"
    assert isinstance(name, Path)
    by_path, by_string = load_transcript(name), load_transcript(str(name))
    assert by_path.path == by_string.path == str(name) and type(by_path.path) is str
    assert [e.message for e in by_path.entries] == [e.message for e in by_string.entries]
    streamed = open_transcript(name)
    assert streamed is not None and streamed.path == str(name)
