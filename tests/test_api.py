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
