"""The native core against the Python engine, its reference (#59): the same recordings through every
built-in preset and a sweep of settings on both cores give the same summaries (but the ``core``
that ran), the same per-call records, the same probe ledger and the same compaction events; the
native prompt-cache model, fed generated calls, gives the rows the Python one gives; and the core is
chosen in one place, ``COMPACTLAB_CORE``, with a one-line error for a wrong value."""

from __future__ import annotations

import math
import random
from pathlib import Path

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from compactlab import ReplayOptions, load_policy, load_transcript, preset_names, replay
from compactlab import core
from compactlab.engine.cost.cache_rules import RULES
from compactlab.engine.cost.pricing import NativePromptCache, PromptCache
from compactlab.engine.loop import Turns
from compactlab.engine.measures import CallAt
from compactlab.engine.sizing import TokenEstimator
from compactlab.errors import UsageError
from helpers import SAMPLES, SHARED, assert_same_run, built, compacting_recording, examples, on_both_cores, records_of
from strategies import policies, transcripts

NATIVE = core.native_module()
needs_native = pytest.mark.skipif(NATIVE is None, reason="the native core is not built in this install (it was "
                                                         "installed without a Rust toolchain): nothing to compare")


@pytest.fixture(scope="module")
def monkeypatch_session():
    """An environment a hypothesis test may change at every example (the function-scoped
    ``monkeypatch`` is one for all of a test's examples)."""
    with pytest.MonkeyPatch.context() as mp:
        yield mp


class ExactCounter:
    """Exact token counts (deterministic, not the estimate's): the prefix is then a share by characters."""

    def count(self, messages: list[dict]) -> int:
        return len(orjson.dumps(messages)) // 3 + 7


#: the settings swept on every recording besides the presets' own: each provider's cache rules, the
#: 1-hour TTL, exact counts
SWEEP: list[dict] = [{}, {"cache_model": "openai"}, {"cache_model": "deepseek"}, {"cache_model": "gemini"},
                     {"cache_model": "none"}, {"cache_ttl": "1h"}, {"counter": ExactCounter()}]


def _run(monkeypatch, which: str, path: str, preset: str, options: dict):
    monkeypatch.setenv("COMPACTLAB_CORE", which)
    run = replay(load_transcript(path), load_policy(preset), ReplayOptions(**options))
    assert run.summary.core == which
    return run


def differences(monkeypatch, path: str, presets: list[str], sweep: list[dict]) -> list[str]:
    """Where the two cores' runs of ``path`` differ: a preset and setting, and the first thing."""
    out = []
    for preset in presets:
        for options in sweep:
            a, b = (_run(monkeypatch, c, path, preset, options) for c in ("python", "native"))
            sa, sb = (orjson.loads(orjson.dumps(r.summary)) for r in (a, b))
            sa.pop("core"), sb.pop("core")
            said = f"{Path(path).name} {preset} {sorted(options)}"
            if sa != sb:
                out.append(f"{said}: summary {[k for k in sa if sa[k] != sb.get(k)]}")
            elif records_of(a.calls) != records_of(b.calls):
                first = next(i for i, (x, y) in enumerate(zip(a.calls, b.calls)) if x != y)
                out.append(f"{said}: call {first} {a.calls[first]} != {b.calls[first]}")
            elif a.probe_ledger != b.probe_ledger or a.events != b.events:
                out.append(f"{said}: probe ledger or events")
    return out


@needs_native
@pytest.mark.parametrize("sample", ["synth-small", "manual-compact", "huge-batch", "recorded-orphan", "parallel-batch"])
def test_both_cores_replay_the_samples_alike_under_every_preset(monkeypatch, sample):
    assert not differences(monkeypatch, str(SAMPLES / f"{sample}.jsonl"), preset_names(), [{}])


@needs_native
def test_both_cores_replay_alike_under_every_cache_rule_ttl_and_exact_counts(monkeypatch):
    assert not differences(monkeypatch, str(SAMPLES / "synth-medium.jsonl"), ["s08", "none", "claude-code"], SWEEP)


def _shared_recordings() -> list[Path]:
    root = SHARED / "transcripts"
    return [p for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in (".json", ".jsonl", ".traj")
            and not p.name.endswith(".truth.json") and "subagents" not in p.parts] if root.is_dir() else []


@needs_native
@pytest.mark.slow
def test_both_cores_replay_every_shared_recording_alike_under_every_preset_and_setting(monkeypatch, shared_transcripts):
    from compactlab.errors import CompactlabError

    problems, replayed = [], 0
    for path in _shared_recordings():
        try:
            if not load_transcript(str(path)).call_positions:
                continue
        except CompactlabError:  # (not a transcript: a harness's own log, a fixture's truth)
            continue
        replayed += 1
        problems += differences(monkeypatch, str(path), preset_names(), [{}])
        problems += differences(monkeypatch, str(path), ["s08", "none"], SWEEP[1:])
    assert replayed >= 10
    assert not problems, "\n".join(problems[:20])


class FakeContext:
    """What the prompt cache reads of a context: its entries' characters and their sums."""

    class E:
        __slots__ = ("chars",)

        def __init__(self, chars: int) -> None:
            self.chars = chars

    def __init__(self, chars: list[int]) -> None:
        self.entries = [self.E(c) for c in chars]
        self.chars_sum = sum(chars)
        self.chars = self.chars_sum + max(len(chars) - 1, 0) + 2

    def __len__(self) -> int:
        return len(self.entries)


@st.composite
def call_sequences(draw):
    """Calls as the loop makes them: the context last sent, its reply and the new messages appended,
    then a layer may change it from some message on (``changed_from``), leaving the messages before."""
    sent: list[int] = []
    calls = []
    for i in range(draw(st.integers(1, 25))):
        pending = draw(st.lists(st.integers(0, 50_000), min_size=1, max_size=4))
        context = sent + ([draw(st.integers(0, 3_000))] if i else []) + pending
        changed = draw(st.one_of(st.none(), st.integers(0, len(context))))
        if changed is not None:
            context = context[:changed] + draw(st.lists(st.integers(0, 60_000), max_size=6))
        changed_from = len(context) if changed is None else min(changed, len(context))
        tokens = draw(st.integers(0, 400_000))
        calls.append((context, changed_from, tokens, draw(st.integers(0, 9_000))))
        sent = context
    return calls


@needs_native
@settings(max_examples=examples(300), deadline=None)
@given(call_sequences(), st.sampled_from(sorted(RULES)), st.booleans(),
       st.floats(1.0, 6.0, allow_nan=False), st.integers(0, 3_000))
def test_the_native_prompt_cache_gives_the_python_rows_on_generated_calls(calls, provider, exact, cpt, overhead):
    estimator = TokenEstimator(cpt, overhead)
    a, b = PromptCache(estimator, exact=exact), NativePromptCache(estimator, exact=exact)
    a.rules = b.rules = RULES[provider]
    for i, (chars, changed_from, tokens, reply) in enumerate(calls):
        ctx = FakeContext(chars)
        if exact and ctx.chars == 0:
            continue
        at = CallAt(i, i, changed_from, False, tokens, reply)
        assert a.at_call(at, ctx) == b.at_call(at, ctx), (i, chars, changed_from)
        assert a.sent_tokens == b.sent_tokens
    assert a.replies == b.replies and b.rules is RULES[provider]


@needs_native
@settings(max_examples=examples(40), deadline=None)
@given(transcripts(max_turns=30), policies(pair_safe=False), st.sampled_from(sorted(RULES)))
def test_generated_transcripts_replay_alike_on_both_cores(monkeypatch_session, msgs, policy, provider):
    """Generated recordings (parallel tool batches, errors, prompts, manual compactions) through
    random layer settings and each provider's cache rules: the same run on both cores."""
    assert_same_run(*on_both_cores(monkeypatch_session, built(msgs), policy, ReplayOptions(cache_model=provider)))


@needs_native
def test_a_transcript_with_no_call_replays_alike_on_both_cores(monkeypatch, cli, tmp_path):
    """One message and no reply: no call. The native pricing refused it ("a call priced at
    prices not given": an internal error, exit 3) where the Python engine replays it; and the
    window it is judged on said "not resolved yet" on both. Now both give the same run of no
    call, under every preset, its window's source said."""
    path = tmp_path / "one.jsonl"
    path.write_bytes(orjson.dumps({"role": "user", "content": "hi"}) + b"\n")
    for preset in preset_names():
        python, native = on_both_cores(monkeypatch, built([{"role": "user", "content": "hi"}]), load_policy(preset))
        assert_same_run(python, native)
        assert native.summary.calls == 0 and "not resolved" not in native.summary.window_source, preset
    for which in ("python", "native"):
        monkeypatch.setenv("COMPACTLAB_CORE", which)
        r = cli("replay", path, "--dry-run", "--format", "json")
        assert r.exit_code == 0, r.output
        summary = orjson.loads(r.stdout)["runs"][0]["summary"]
        assert summary["calls"] == 0 and summary["window_source"].startswith("200,000 tokens: default"), summary
        assert "no call to replay (it holds no reply of the model)" in r.stderr


@needs_native
def test_a_run_on_the_native_core_measures_its_prompt_cache_there(monkeypatch):
    """The core a summary names is the one that measured: every call of a native run goes through
    the native cache model, no call of a python run does (a summary that said native while Python
    measured made every comparison above vacuous once)."""
    from compactlab.engine import loop

    made: list = []
    real = loop.measures_for
    monkeypatch.setattr(loop, "measures_for", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    t = load_transcript(str(SAMPLES / "synth-small.jsonl"))
    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    run = replay(t, load_policy("s08"))
    measured = made.pop()
    assert run.summary.core == "native" and isinstance(measured.prompt_cache, NativePromptCache)
    assert measured.native is not None and measured.prompt_cache.core.calls == len(run.calls)
    monkeypatch.setenv("COMPACTLAB_CORE", "python")
    assert replay(t, load_policy("s08")).summary.core == "python"
    assert isinstance(made.pop().prompt_cache, PromptCache) and not made


@needs_native
def test_the_native_prompt_cache_refuses_a_tail_past_what_it_knows():
    cache = NATIVE.PromptCache(4.0, 0, False, RULES["anthropic"])
    with pytest.raises(ValueError, match="known messages"):
        cache.at_call(1, 10, 0, 3, [1])


@needs_native
def test_python_round_and_ceil_are_what_the_native_core_does_at_the_halves():
    """Ties to even (Python's round) and ceil of an exact quotient: the corners the port must match."""
    rng = random.Random(59)
    estimator = TokenEstimator(4.0, 0)
    for _ in range(200):
        a, b = PromptCache(estimator, exact=True), NativePromptCache(estimator, exact=True)
        first = [rng.choice([2, 6, 10, 14])]
        at = CallAt(0, 0, 1, False, rng.randint(1, 99), 2 * rng.randint(0, 9))  # (a reply of 2k chars: k/2 tokens)
        assert a.at_call(at, FakeContext(first)) == b.at_call(at, FakeContext(first))
        second = FakeContext(first + [rng.choice([2, 6, 10])])
        at = CallAt(1, 1, 2, False, rng.randint(1, 999), 0)
        assert a.at_call(at, second) == b.at_call(at, second)
    assert round(2.5) == 2 and math.ceil(8 / 4.0) == 2  # (the Python side of the corners)


def test_the_core_is_chosen_by_compactlab_core(monkeypatch):
    monkeypatch.setenv("COMPACTLAB_CORE", "python")
    assert core.chosen() == "python"
    monkeypatch.setenv("COMPACTLAB_CORE", "Rust")
    with pytest.raises(UsageError, match="not a core"):
        core.chosen()
    monkeypatch.delenv("COMPACTLAB_CORE")
    assert core.chosen() == ("native" if NATIVE is not None else "python")


def test_without_a_native_build_python_runs_and_native_is_refused_with_a_hint(monkeypatch, tmp_path):
    monkeypatch.setattr(core, "native_module", lambda: None)
    monkeypatch.delenv("COMPACTLAB_CORE", raising=False)
    assert core.chosen() == "python"
    assert "no native core built" in core.described()
    run = replay(load_transcript(str(SAMPLES / "synth-small.jsonl")), load_policy("s08"))
    assert run.summary.core == "python" and run.summary.cache_read_tokens > 0
    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    with pytest.raises(UsageError) as err:
        core.chosen()
    assert "not built" in str(err.value) and "Rust toolchain" in (err.value.hint or "")


def test_a_wrong_core_is_one_line_and_exit_2_before_any_work(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTLAB_CORE", "gpu")
    out = tmp_path / "out"
    r = cli("replay", str(SAMPLES / "synth-small.jsonl"), "--out", str(out))
    assert r.exit_code == 2 and r.stderr.strip() == "error: COMPACTLAB_CORE='gpu': not a core (python or native)"
    assert not out.exists()
    r = cli("--version")
    assert r.exit_code == 0 and "core: none usable" in r.output


def test_version_names_the_core(cli, monkeypatch):
    monkeypatch.setenv("COMPACTLAB_CORE", "python")
    r = cli("--version")
    assert r.output.splitlines()[0] == "compactlab, version 0.1.0" and r.output.splitlines()[1].startswith("core: python")
    if NATIVE is not None:
        monkeypatch.delenv("COMPACTLAB_CORE")
        # (two lines, the second the core: what runs in Rust is bench's to say, and the docs')
        assert cli("--version").output.splitlines()[1:] == [
            "core: native (Rust; COMPACTLAB_CORE=python runs the Python engine, its reference)"]
        assert core.described(parts=True).startswith("core: native (Rust: the whole loop of a policy that keeps every")


def test_a_native_module_built_from_other_sources_is_not_used_and_the_reason_is_said(monkeypatch):
    """A working copy pulled and not rebuilt keeps an older ``_native``: the package runs on its
    Python engine rather than ask that module for what it lacks, ``--version`` says why, and
    asking for the native core is a one-line error with the fix."""
    import importlib
    import types

    stale = types.ModuleType("compactlab._native")
    stale.API = core.NATIVE_API - 1  # type: ignore[attr-defined]
    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: stale if name == "compactlab._native" else real(name, *a))
    core._import.cache_clear()
    try:
        monkeypatch.delenv("COMPACTLAB_CORE", raising=False)
        assert core.native_module() is None and core.chosen() == "python"
        assert "built from other sources" in core.described() and "pip install" in core.described()
        monkeypatch.setenv("COMPACTLAB_CORE", "native")
        with pytest.raises(UsageError) as err:
            core.chosen()
        assert f"asks for {core.NATIVE_API}" in str(err.value) and "pip install -e ." in (err.value.hint or "")
    finally:
        monkeypatch.undo()
        core._import.cache_clear()
    assert (core.native_module() is None) == (NATIVE is None)


@needs_native
def test_the_built_module_is_the_interface_this_package_asks_for():
    assert NATIVE.API == core.NATIVE_API


_KIND_NAMES = ("identifier", "path", "dotted", "number", "line", "phrase")
#: a probe ledger's outcomes as a run writes them (texts with a lone surrogate too: JSON may hold one)
_outcomes = st.lists(st.builds(
    lambda call, text, kind, status, at: (call, text, kind, status, at),
    st.integers(0, 40), st.sampled_from(["a_b", "src/x.py", "é_1", "z9", "b_a", "\ud800_x"]),
    st.sampled_from(_KIND_NAMES), st.sampled_from(["kept", "recoverable", "lost"]), st.integers(-1, 8)),
    max_size=60)


@needs_native
@settings(max_examples=examples(200), deadline=None)
@given(_outcomes, st.sets(st.integers(-1, 8), max_size=6))
@example([(3, "b_a", "path", "lost", 5), (4, "a_b", "path", "lost", 5), (1, "b_a", "path", "recoverable", 5)], {5})
def test_the_native_ledger_tallies_are_recall_s(outcomes, calls):
    """``_native.ledger_kinds`` and ``ledger_losses`` (what a run on the native core tallies of its
    probe ledger) give ``recall.kinds_of`` and ``losses_of``; a text that is no UTF-8 leaves the
    losses to Python (None), which orders them as it orders them."""
    from compactlab.engine.measures.probes import KINDS, ProbeOutcome
    from compactlab.engine.measures.recall import kinds_of, losses_of
    from compactlab.engine.records import CompactionEvent

    assert KINDS == _KIND_NAMES
    ledger = [ProbeOutcome(call, text, kind, -1, "bash", status, "micro" if status != "kept" else "", at)
              for call, text, kind, status, at in outcomes]
    held = NATIVE.ProbeLedger(ProbeOutcome)  # (the ledger a native run holds: its rows read here)
    for outcome in ledger:
        held.append(outcome)
    for given in (ledger, held):
        counts = NATIVE.ledger_kinds(given, KINDS)
        assert {k: {"probes": n, "kept": kept, "recoverable": rec} for k, (n, kept, rec) in zip(KINDS, counts)
                if n} == kinds_of(ledger)
        found = NATIVE.ledger_losses(given, sorted(calls))
        surrogate = any(p.status != "kept" and p.removed_at in calls and "\ud800" in p.probe for p in ledger)
        assert (found is None) == surrogate
        if found is not None:
            assert found == losses_of(ledger, calls)
        # (appended to the run's events, each to its call's: as Recall.losses appends them)
        events = [CompactionEvent(call, ["micro"], 3, 2, 30, 20, 1, 0, 0) for call in sorted(calls)]
        assert NATIVE.append_losses(given, events) == (not surrogate)
        wanted = {call: [] for call in calls}
        for at, text, needed in ([] if surrogate else losses_of(ledger, calls)):
            wanted[at].append((text, needed))
        assert {e.call: e.lost for e in events} == wanted


@needs_native
def test_a_ledger_the_native_tallies_cannot_read_is_an_error_as_in_python():
    from compactlab.engine.measures.probes import KINDS, ProbeOutcome
    from compactlab.engine.measures.recall import kinds_of

    for odd in (ProbeOutcome(0, "a_b", "colour", -1, "", "kept"), ProbeOutcome(0, "a_b", "path", -1, "", "maybe")):
        held = NATIVE.ProbeLedger(ProbeOutcome)
        held.append(odd)
        with pytest.raises(KeyError):
            kinds_of([odd])
        for given in ([odd], held):
            with pytest.raises(KeyError):
                NATIVE.ledger_kinds(given, KINDS)


@needs_native
@settings(max_examples=examples(100), deadline=None)
@given(_outcomes, st.integers(-70, 70), st.integers(-70, 70))
def test_the_ledger_held_in_rust_is_the_list_of_its_outcomes(outcomes, i, j):
    """A run's probe ledger on the native core (``_native.ProbeLedger``) reads as the list of the
    ``ProbeOutcome``s appended to it: its length, items (negative indices and slices too), iteration,
    truth, equality with a list either way round and with another ledger, its repr, and a pickle (a
    list)."""
    import pickle

    from compactlab.engine.measures.probes import ProbeOutcome

    made = [ProbeOutcome(call, text, kind, 3, "bash", status, "" if status == "kept" else "micro",
                         -1 if status == "kept" else at) for call, text, kind, status, at in outcomes]
    held = NATIVE.ProbeLedger(ProbeOutcome)
    for outcome in made:
        held.append(outcome)
    assert len(held) == len(made) and bool(held) is bool(made)
    assert list(held) == made and held == made and made == held and not (held != made)
    assert all(type(o) is ProbeOutcome for o in held)
    assert held[i:j] == made[i:j] and held[::-2] == made[::-2]
    if -len(made) <= i < len(made):
        assert held[i] == made[i] and held[i].status == made[i].status
    else:
        with pytest.raises(IndexError):
            held[i]
    other = NATIVE.ProbeLedger(ProbeOutcome)
    for outcome in made[:-1]:
        other.append(outcome)
    assert (held == other) is (len(made) == 0) and held != made + [made[0] if made else ProbeOutcome(0, "", "path", 0, "", "kept")]
    assert repr(held) == f"ProbeLedger({made!r})"
    again = pickle.loads(pickle.dumps(held))
    assert type(again) is list and again == made
    with pytest.raises(TypeError):
        held.append((1, 2))
    # (room made for its outcomes where they are known, within a bound; the same ledger either way)
    roomy = NATIVE.ProbeLedger(ProbeOutcome, len(made) + 3)
    for outcome in made:
        roomy.append(outcome)
    assert roomy == held and roomy.room == len(made) + 3 and NATIVE.ProbeLedger(ProbeOutcome, 1 << 40).room == 1 << 20


#: the batch as the loop runs it (the tests below put stand-ins in its place)
_REAL_BATCH = Turns._batch


def _batched_runs(monkeypatch, path: str, preset: str, batch: bool, options: dict | None = None):
    """A native run of ``path`` under ``preset``, the native loop given a batch of calls at a time
    (``Turns._batch``), or a call at a time (``Turns.turn``, its reference); and whether it batched."""
    from compactlab.engine import loop

    took = []

    def batched(self, calls):
        took.append(len(calls))
        return _REAL_BATCH(self, calls) if batch else [self.turn(*call) for call in calls]

    monkeypatch.setattr(loop.Turns, "_batch", batched)
    return _run(monkeypatch, "native", path, preset, options or {}), bool(took)


@needs_native
@pytest.mark.parametrize("sample", ["generated", "manual-compact", "huge-batch", "recorded-orphan",
                                    pytest.param("synth-medium", marks=pytest.mark.slow)])  # (5 s: CI runs it)
def test_the_native_loop_runs_a_batch_of_calls_as_it_runs_them_one_at_a_time(monkeypatch, tmp_path, sample):
    """Where no step reads a call's times or the recorded tokens, the native loop takes a batch of
    calls in one crossing, the recording's departures and answered calls followed before it, snip's
    and micro's events made in Rust and a call a Python step acted at handed back: the same
    summary, records, events and probe ledger as a call at a time. (``generated``: 50 calls that
    s08 snips, micro-compacts and summarises, where the samples but synth-medium do not snip.)"""
    path, batching = str(SAMPLES / f"{sample}.jsonl"), []
    if sample == "generated":
        path = compacting_recording(tmp_path / "generated.jsonl")
    for preset in preset_names():
        one, _ = _batched_runs(monkeypatch, path, preset, batch=False)
        many, took = _batched_runs(monkeypatch, path, preset, batch=True)
        if took:
            batching.append(preset)
        said = f"{sample} {preset}"
        assert orjson.dumps(one.summary) == orjson.dumps(many.summary), said
        assert records_of(one.calls) == records_of(many.calls), said
        assert one.events == many.events and one.probe_ledger == many.probe_ledger, said
    # (s08 has every layer the batch runs: budget and the summary in Python, snip and micro in Rust)
    assert {"s08", "observation-masking"} <= set(batching)


@needs_native
@pytest.mark.parametrize("window", [None, 3_000])
def test_a_batch_follows_the_recording_s_answered_calls_and_its_departure(monkeypatch, tmp_path, window):
    """A recording with usage and a recorded compaction (not replayed, so the replay departs there):
    the batch's answered calls and departures, followed before it, give what a call at a time and
    the Python engine give, under a window its estimate overflows where the recording answered."""
    from helpers import ClaudeCodeSession

    s = ClaudeCodeSession().user("go")
    for n in range(12):
        s.assistant(f"look {n}", {"type": "tool_use", "id": f"t{n}", "name": "Bash",
                                  "input": {"command": f"cat src/m{n}.py"}}, input_tokens=100 + 300 * n)
        s.result(f"t{n}", f"def f_{n}(): return {n}\n" * 150)
        if n == 5:
            s.line({"type": "system", "subtype": "compact_boundary", "parentUuid": None,
                    "logicalParentUuid": f"u{s.n}", "uuid": "b1", "sessionId": "s1",
                    "timestamp": "2026-11-28T10:00:00Z", "compactMetadata": {"trigger": "auto", "preTokens": 1600}})
            s.user("This session is being continued... the summary", isCompactSummary=True,
                   isVisibleInTranscriptOnly=True)
    s.assistant("done", {"type": "text", "text": "f_3 and f_11 it is"}, input_tokens=900)
    path = str(s.write(tmp_path / "s.jsonl"))
    loaded = load_transcript(path)
    assert loaded.usage and loaded.compactions
    options = {} if window is None else {"window": window}
    acted = {}
    for preset in ("s08", "observation-masking", "claude-code"):
        monkeypatch.setattr("compactlab.engine.loop.Turns._batch", _REAL_BATCH)
        assert not differences(monkeypatch, path, [preset], [options])
        one, _ = _batched_runs(monkeypatch, path, preset, batch=False, options=options)
        many, took = _batched_runs(monkeypatch, path, preset, batch=True, options=options)
        assert took or preset == "claude-code", preset
        assert orjson.dumps(one.summary) == orjson.dumps(many.summary), preset
        assert records_of(one.calls) == records_of(many.calls), preset
        assert one.events == many.events, preset
        acted[preset] = [e.layers for e in many.events]
    # (replays that acted: their context no longer the recording's from there)
    assert acted["observation-masking"] and acted["s08"], acted


@needs_native
def test_a_batch_is_refused_flags_that_are_not_one_a_call(monkeypatch):
    from compactlab.engine import loop

    def short(self, calls):  # (the loop's flags one short of the batch)
        return self.layered.turns(calls, 10**9, True, [True] * (len(calls) - 1), None, 0, False, 0, None,
                                  self._stepped, self.events, loop.CompactionEvent, loop._NAMED)

    monkeypatch.setattr(loop.Turns, "_batch", short)
    with pytest.raises(ValueError, match="one flag a call"):
        _run(monkeypatch, "native", str(SAMPLES / "synth-small.jsonl"), "s08", {})


@needs_native
def test_a_run_that_shows_each_call_as_it_is_made_is_not_batched(monkeypatch):
    """A run whose calls are shown as they are made (``on_call``: the progress bar of a slow run, a live
    summary's) is run a call at a time, each shown before the next is made, and gives what the batch gives."""
    from compactlab.engine import loop

    path = str(SAMPLES / "synth-medium.jsonl")
    batched, _ = _batched_runs(monkeypatch, path, "s08", batch=True)
    shown: list[int] = []
    made = []
    real_turn = loop.Turns.turn

    def turn(self, *call):
        assert len(shown) == len(made)  # (the previous call shown before this one is made)
        made.append(call[0])
        return real_turn(self, *call)

    monkeypatch.setattr(loop.Turns, "turn", turn)
    monkeypatch.setattr(loop.Turns, "_batch", lambda self, calls: pytest.fail("batched while shown a call at a time"))
    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    run = replay(load_transcript(path), load_policy("s08"), ReplayOptions(on_call=lambda r: shown.append(r.call)))
    assert shown == made == list(range(len(run.calls)))
    assert records_of(run.calls) == records_of(batched.calls)


@needs_native
@pytest.mark.parametrize("preset", ["s08", "claude-code"])
def test_the_stub_summaries_the_loop_makes_are_counted_by_it_as_python_counts_them(monkeypatch, preset):
    """A stub summary the native loop makes at a call where no step Python runs acted is counted by
    the loop itself (the call's record, the run's summary requests and totals, its event, the
    breaker cleared) rather than by ``Turns._stepped``, as budget's persisting is (where a step Python
    runs acts at the same call, both are told to Python, in the order Python would have had them).
    Either way the run is the Python engine's, to the letter."""
    from compactlab.engine import loop

    stepped: list[int] = []
    real = loop.Turns._stepped

    def counted(self, call, *args):
        stepped.append(call)
        return real(self, call, *args)

    monkeypatch.setattr(loop.Turns, "_stepped", counted)
    path = str(SAMPLES / "synth-long.jsonl")
    native = _run(monkeypatch, "native", path, preset, {})
    told = set(stepped)
    assert_same_run(_run(monkeypatch, "python", path, preset, {}), native)
    summarised = {r.call for r in native.calls if r.summarized or r.manual or r.reactive}
    assert summarised and native.summary.summaries  # (the sample has summaries to count)
    if preset == "s08":  # (a batch of calls in one crossing; claude-code's loop reads the recorded
        # tokens, a call at a time, its steps' stats Python's at each)
        persisted = {r.call for r in native.calls if r.persisted}
        assert persisted and not told  # (budget's persisting is the loop's too: no step Python runs acts)
        assert summarised - persisted  # (counted by the loop itself)


def _results_call(n: int, contents: list) -> list[dict]:
    """A call's reply using a tool once for each of ``contents``, and the message of their results."""
    ids = [f"toolu_{n:02d}_{k}" for k in range(len(contents))]
    return [{"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": "bash", "input": {"cmd": "ls"}}
                                              for i in ids]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": c}
                                         for i, c in zip(ids, contents)]}]


@needs_native
def test_budget_persists_in_the_native_loop_as_python_does(monkeypatch, tmp_path):
    """Budget's persisting is the native loop's own where it reads a result's text (a string content,
    escapes and characters beyond ASCII among it): Python's ``persisted`` is never asked, and the
    files written, the notes, the ledger's replacements and the counts are the Python engine's to
    the letter. A list content's text is asked of Python (``budget.result_text``), and a text with a
    sized placeholder is persisted by Python (``budget.persist_result``), beside the loop's own."""
    from compactlab import ReplayOutput
    from compactlab.engine import keeping
    from compactlab.transcripts.messages import sized_placeholder

    plain = "\n".join(f"line {k}: src/app_{k}.py \"quoted\" \\ tab\there" for k in range(60))
    wide = "résumé — naïve 数据 " * 120
    listed = [{"type": "text", "text": plain[:1500]}, {"type": "image", "source": {"type": "base64", "data": "QUJD"}}]
    sized = plain[:700] + sized_placeholder("OUTPUT", 5000) + plain[:300]
    messages = [{"role": "user", "content": "go"}]
    for n, contents in enumerate([[plain, "ok", wide], [listed, plain], [sized, wide], [plain[:400]], [wide, plain]]):
        messages += _results_call(n, contents)
    messages.append({"role": "assistant", "content": "done"})
    path = tmp_path / "budget.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in messages))
    policy = load_policy("s08", ["budget.max_chars=1500", "budget.persist_threshold=600", "budget.preview_chars=90",
                                 "summary.enabled=false", "micro.enabled=false", "snip.enabled=false"])
    asked: dict[str, int] = {"persisted": 0, "persist_result": 0, "result_text": 0}

    def counting(name):
        real = getattr(keeping, name)

        def counted(*args):
            asked[name] += 1
            return real(*args)
        monkeypatch.setattr(keeping, name, counted)

    for name in asked:
        counting(name)
    runs = {}
    for core_name in ("python", "native"):
        monkeypatch.setenv("COMPACTLAB_CORE", core_name)
        out = tmp_path / core_name
        runs[core_name] = replay(load_transcript(str(path)), policy, ReplayOptions(), ReplayOutput(out_dir=out))
        assert runs[core_name].summary.core == core_name
        if core_name == "python":
            assert asked == {"persisted": 0, "persist_result": 0, "result_text": 0}  # (the Python loop's own layer)
    assert asked == {"persisted": 0, "persist_result": 1, "result_text": 1}
    python, native = runs["python"], runs["native"]
    assert_same_run(python, native)
    assert native.summary.persisted >= 5 and native.summary.persisted_files == python.summary.persisted_files
    written = {p.name: p.read_bytes() for p in (tmp_path / "python" / "tool-results").iterdir()}
    assert written and written == {p.name: p.read_bytes() for p in (tmp_path / "native" / "tool-results").iterdir()}
    assert any("数据" in t.decode() for t in written.values())
