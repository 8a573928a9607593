"""The native loops of a policy that keeps every message and of one made of snip and micro
(``engine/keeping.py``, ``native/src/turns.rs``) against the Python loop, their reference: each
chosen exactly where it can run the run (the native core; no layer on and nothing that can lose a
probe, or snip and micro with the options it runs; estimated sizes, no kept contexts, no recorded
compaction replayed), and giving there the same records, summaries, violations, probe ledgers and
events, loaded, streamed and read ahead, on the samples and on generated recordings (orphans,
duplicates, references to files, prompts, a small window) under generated snip and micro settings."""

from __future__ import annotations

from datetime import datetime, timezone

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlab import ReplayOptions, ReplayOutput, load_policy, load_transcript, replay
from compactlab import core
from compactlab.engine import keeping
from compactlab.engine.feeds import Opening
from compactlab.transcripts import TranscriptBuilder
from helpers import SAMPLES, covering, examples, records_of
from strategies import transcripts

NATIVE = core.native_module()
needs_native = pytest.mark.skipif(NATIVE is None, reason="the native core is not built in this install (it was "
                                                         "installed without a Rust toolchain): nothing to compare")
SAMPLE_NAMES = sorted(p.stem for p in SAMPLES.glob("*.jsonl"))


def _spy(monkeypatch, factory: str) -> dict:
    """How many runs a native loop made, and how many calls it took (a spy on its factory)."""
    made = {"runs": 0, "calls": 0}
    real = getattr(keeping, factory)

    class Counted:
        def __init__(self, inner):
            self.inner = inner

        def turn(self, *args):
            made["calls"] += 1
            return self.inner.turn(*args)

        def turns(self, batch, *args):
            made["calls"] += len(batch)
            return self.inner.turns(batch, *args)

    def spy(*args, **kwargs):
        inner = real(*args, **kwargs)
        if inner is None:
            return None
        made["runs"] += 1
        if isinstance(inner, tuple):  # (the layers' loop and its summary step)
            return Counted(inner[0]), *inner[1:]
        return Counted(inner)

    monkeypatch.setattr(f"compactlab.engine.loop.{factory}", spy)
    return made


@pytest.fixture
def loops(monkeypatch):
    """The keeping loop's runs and calls."""
    return _spy(monkeypatch, "keeping_turns")


@pytest.fixture
def layered(monkeypatch):
    """The layers' loop's runs and calls."""
    return _spy(monkeypatch, "layer_turns")


def _same(a, b) -> None:
    sa, sb = (orjson.loads(orjson.dumps(r.summary)) for r in (a, b))
    assert sa.pop("core") == "python" and sb.pop("core") == "native"
    assert sa == sb
    assert records_of(a.calls) == records_of(b.calls)
    assert a.probe_ledger == b.probe_ledger and a.events == b.events


def _both(monkeypatch, run) -> tuple:
    out = []
    for which in ("python", "native"):
        monkeypatch.setenv("COMPACTLAB_CORE", which)
        out.append(run())
    return out[0], out[1]


@needs_native
@pytest.mark.parametrize("sample", SAMPLE_NAMES)
@pytest.mark.parametrize("how", ["loaded", "streamed", "read ahead"])
def test_a_policy_that_keeps_everything_runs_alike_on_the_native_loop(monkeypatch, loops, sample, how):
    path = str(SAMPLES / f"{sample}.jsonl")
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "1" if how == "read ahead" else "0")
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")

    def run():
        source = load_transcript(path) if how == "loaded" else Opening(path, probes=False).feed()
        return replay(source, load_policy("none"), ReplayOptions(window=30_000))

    a, b = _both(monkeypatch, run)
    _same(a, b)
    assert loops == {"runs": 1, "calls": len(b.calls)}  # (the native run's alone: python ran its own loop)


@needs_native
def test_the_native_loop_meets_violations_retention_and_overflows(monkeypatch, loops):
    """The samples the test above runs hold what the native loop must get right beyond sizes: a
    recorded orphan (violations inherited, the log's callback), references to earlier results
    (retention), calls over a small window."""
    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    runs = [replay(load_transcript(str(SAMPLES / f"{s}.jsonl")), load_policy("none"), ReplayOptions(window=30_000))
            for s in SAMPLE_NAMES]
    assert loops["runs"] == len(SAMPLE_NAMES)
    assert sum(r.summary.violations_inherited for r in runs) > 0 and any(r.summary.violations for r in runs)
    assert sum(c.refs for r in runs for c in r.calls) > 0
    assert all(c.refs_retained == c.refs for r in runs for c in r.calls)  # (nothing is changed: all held)
    assert sum(c.overflow for r in runs for c in r.calls) > 0


@needs_native
@pytest.mark.parametrize("what", ["a layer on", "compactions kept", "exact counts", "contexts kept", "python core"])
def test_the_python_loop_runs_what_the_native_loop_cannot(monkeypatch, loops, what):
    monkeypatch.setenv("COMPACTLAB_CORE", "python" if what == "python core" else "native")
    t = load_transcript(str(SAMPLES / "manual-compact.jsonl"))
    options = {"compactions kept": {"keep_recorded_compactions": True},
               "exact counts": {"counter": _Counter()},
               "contexts kept": {"keep_contexts": (0, 1)}}.get(what, {})
    replay(t, load_policy("s08" if what == "a layer on" else "none"), ReplayOptions(**options))
    assert loops == {"runs": 0, "calls": 0}


class _Counter:
    def count(self, messages: list[dict]) -> int:
        return len(orjson.dumps(messages)) // 3


@needs_native
@settings(max_examples=examples(60), deadline=None)
@given(transcripts(max_turns=30), st.sampled_from([None, 2_000, 20_000]), st.sampled_from(["5m", "1h"]))
def test_generated_recordings_run_alike_on_the_native_loop(msgs, window, ttl):
    """Generated recordings (parallel batches, errors, orphans, duplicate ids, prompts, manual
    compaction calls) through ``none``: the native loop's run is the Python loop's."""
    b = TranscriptBuilder("generated.jsonl", "anthropic")
    for m in msgs:
        b.add(m)
    t = b.build()
    with pytest.MonkeyPatch.context() as mp:
        a, n = _both(mp, lambda: replay(t, load_policy("none"), ReplayOptions(window=window, cache_ttl=ttl)))
    _same(a, n)


def _measures(raw_messages: list, raw_chars: list, chars_per_token: float = 4.0):
    """A run's native measures of its own (a call's raw baseline rows given)."""
    from types import SimpleNamespace as Given

    from compactlab.engine.cost.cache_rules import RULES
    from compactlab.engine.sizing import TokenEstimator

    return NATIVE.CallMeasures(NATIVE.PromptCache(chars_per_token, 0, False, RULES["anthropic"]),
                               Given(tracker=NATIVE.InvariantTracker(object), logged=lambda call: (0, 0)),
                               Given(messages=raw_messages, chars=raw_chars), Given(refs={}, keep=True),
                               TokenEstimator(chars_per_token, 0))


@needs_native
def test_the_native_loop_refuses_what_it_cannot_size_and_a_call_past_the_baseline():
    from compactlab.engine.records import TurnRecord

    measures = _measures
    with pytest.raises(ValueError, match="chars_per_token"):
        measures([], [], 0.0)
    turns = NATIVE.KeepingTurns(measures([], []), TurnRecord)
    t = load_transcript(str(SAMPLES / "synth-small.jsonl"))
    with pytest.raises(IndexError):  # (no baseline row for call 0: an error, not a crash)
        turns.turn(0, 1, t.entries[:1], t.entries[1], 200_000, False)
    with pytest.raises(AttributeError):  # (pending messages that are not messages)
        turns.turn(0, 1, [object()], t.entries[1], 200_000, False)
    chars = t.entries[0].chars + 2
    turns = NATIVE.KeepingTurns(measures([1], [chars]), TurnRecord)
    record = turns.turn(0, 1, iter(t.entries[:1]), t.entries[1], 200_000, False)  # (any iterable of messages)
    assert (record.messages, record.chars, record.tokens) == (1, chars, -(-chars // 4))
    assert record.raw_tokens == record.tokens and len(turns.entries) == 2


@needs_native
@pytest.mark.parametrize("compacted", [False, True])
def test_a_call_the_recording_shows_answered_is_no_overflow_until_the_replay_departs(monkeypatch, loops, tmp_path,
                                                                                     compacted):
    """A call over the window that the recording shows answered (its usage: the estimate is above
    the window, the recorded prompt under it) is no overflow while the context is the recording's;
    once the recording compacted and the replay did not, it is one. Both loops alike."""
    from helpers import ClaudeCodeSession

    s = ClaudeCodeSession().user("go")
    s.assistant("look", {"type": "tool_use", "id": "t0", "name": "Bash", "input": {"command": "ls"}},
                input_tokens=100).result("t0", "a.txt\n" * 2_000)
    s.assistant("again", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                input_tokens=120).result("t1", "b.txt\n" * 2_000)
    if compacted:
        s.line({"type": "system", "subtype": "compact_boundary", "parentUuid": None, "logicalParentUuid": f"u{s.n}",
                "uuid": "b1", "sessionId": "s1", "timestamp": "2026-11-28T10:00:00Z",
                "compactMetadata": {"trigger": "auto", "preTokens": 130}})
        s.user("This session is being continued... the summary", isCompactSummary=True, isVisibleInTranscriptOnly=True)
    s.user("go on").assistant("more", {"type": "text", "text": "done"}, input_tokens=40)
    s.user("and").assistant("last", {"type": "text", "text": "done"}, input_tokens=41)
    path = s.write(tmp_path / "s.jsonl")
    a, b = _both(monkeypatch, lambda: replay(load_transcript(str(path)), load_policy("none"),
                                             ReplayOptions(window=1_000)))
    _same(a, b)
    window = b.summary.window_tokens  # (the largest prompt the recording shows answered, above --window's)
    assert loops["runs"] == 1 and 1_000 <= window < 3_500
    assert [c.tokens > window for c in b.calls] == [False, True, True, True]
    assert [c.overflow for c in b.calls] == [False, False, False, compacted]


def _later_usage(path) -> str:
    """An Anthropic messages recording whose first calls record no usage and whose later ones do,
    a recorded compaction between them (as `compactlab convert` writes one): read a few messages
    at a time, its first batches have neither, a later one both."""
    def use(n: int) -> dict:
        return {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": f"ls {n}"}}

    lines: list[dict] = [{"role": "user", "content": "go"}]
    for n in range(4):
        lines += [{"role": "assistant", "content": [use(n)]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}",
                                                "content": f"{n}.txt\n" * 1_500}]}]
    lines.append({"role": "user", "content": "the summary", "recorded_compaction": {"trigger": "auto",
                                                                                     "pre_tokens": 130}})
    for n in range(4, 8):
        lines += [{"role": "user", "content": f"go on {n}"},
                  {"role": "assistant", "content": [{"type": "text", "text": f"done {n}"}], "model": "claude-sonnet-4-5",
                   "usage": {"input_tokens": 40 + n, "output_tokens": 3}}]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


@needs_native
@pytest.mark.parametrize("batch", [1, 2, 3, 256])
@pytest.mark.parametrize("how", ["loaded", "streamed"])
def test_the_native_loop_takes_the_calls_a_batch_at_a_time(monkeypatch, loops, tmp_path, batch, how):
    """The native loop takes a batch of calls in one crossing (``Turns.kept``): batches of every size,
    the first with no usage and no compaction read yet (nothing answered, nothing departs), a later
    one with both (followed call by call, from the positions the batches before left): the records
    are the Python loop's, call for call, the answered calls and the departure alike."""
    from compactlab.engine.feeds import StreamFeed, base

    monkeypatch.setattr(base, "READ_BATCH", batch)
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")
    path = _later_usage(tmp_path / "later.jsonl")

    seen: list = []

    def run():
        source = load_transcript(path) if how == "loaded" else Opening(path, probes=False).feed()
        assert isinstance(source, StreamFeed) == (how == "streamed")
        seen.clear()
        return replay(source, load_policy("none"), ReplayOptions(window=1_000, on_call=seen.append))

    a, b = _both(monkeypatch, run)
    _same(a, b)
    assert loops == {"runs": 1, "calls": 8} and seen == b.calls  # (each record shown once, in order)
    window = b.summary.window_tokens
    assert [c.tokens > window for c in b.calls] == [False] + [True] * 7
    # (over the window: the calls before the compaction, none answered; the first after it, answered
    # and the context still the recording's; the later ones answered, but the replay departed there)
    assert [c.overflow for c in b.calls] == [False, True, True, True, False, True, True, True]


def _session(path, calls: int, duplicate_at: int | None = None) -> None:
    """A session file of ``calls`` tool calls, an orphan result at its start, and the first call's
    tool id used again at call ``duplicate_at``."""
    lines = [{"role": "user", "content": "go"},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "gone", "content": "x"}]}]
    for k in range(calls):
        tid = "t0" if k == duplicate_at else f"t{k}"
        lines.append({"role": "assistant", "content": [
            {"type": "text", "text": f"step {k}"},
            {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": f"/src/f{k % 4}.py"}}]})
        lines.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                                   "content": f"line {k}\n" * 40}]})
    lines.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in lines))


@needs_native
@pytest.mark.parametrize("how", ["loaded", "streamed"])
def test_the_native_loop_lets_go_of_the_messages_it_has_passed(monkeypatch, tmp_path, how):
    """A policy that keeps everything holds no message to the end on the native loop: those before
    each call's last two are let go (``baseline.FREED`` in their place, in the context and the
    violations' tracker), so a stream's are freed as it is read; the run is the Python loop's still,
    violations of messages let go (an orphan at the start, a tool id used again much later) among it."""
    from compactlab.engine.measures.baseline import FREED

    path = tmp_path / "s.jsonl"
    _session(path, 12, duplicate_at=9)
    made = []
    real = keeping.keeping_turns

    def keep(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr("compactlab.engine.loop.keeping_turns", keep)
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")

    def run():
        source = load_transcript(str(path)) if how == "loaded" else Opening(str(path), probes=False).feed()
        return replay(source, load_policy("none"), ReplayOptions(window=30_000))

    a, b = _both(monkeypatch, run)
    _same(a, b)
    kinds = sorted(v["kind"] for v in b.summary.violations)
    assert kinds == ["duplicate_tool_use_id", "orphan_tool_result"]
    turns = [t for t in made if t is not None]
    assert len(turns) == 1
    held = turns[0].entries
    assert len(held) == 2 + 2 * 12 + 1
    last = len(held) - 3  # (the last call's context less its last two, then its reply)
    assert all(e is FREED for e in held[:last]) and not any(e is FREED for e in held[last:])


@needs_native
def test_the_native_loop_holds_a_changed_message_and_runs_as_it_would_holding_all():
    """What the loop lets go it replaces by the placeholder only where no layer changed the message
    (retention reads a message's changed blocks); its records are those of a loop holding every
    message."""
    from compactlab.engine.measures.baseline import FREED
    from compactlab.engine.records import TurnRecord

    t = load_transcript(str(SAMPLES / "synth-small.jsonl"))
    e = t.entries
    changed = next(x for x in e if x.results).with_result_content(0, "[cleared]")
    assert changed.changed
    calls = [k for k, x in enumerate(e) if x.role == "assistant"][:4]
    batch, start = [], 0
    for call, pos in enumerate(calls):
        pending = [changed if x.results and x.origin == changed.origin else x for x in e[start:pos]]
        batch.append((call, pos, pending, e[pos]))
        start = pos + 1
    chars = [0]
    for x in e[:calls[-1]]:
        chars.append(chars[-1] + x.chars)
    raw = ([p for p in calls], [chars[p] + 2 * max(p - 1, 0) for p in calls])
    holding = NATIVE.KeepingTurns(_measures(*raw), TurnRecord)
    letting = NATIVE.KeepingTurns(_measures(*raw), TurnRecord, FREED)
    assert records_of(holding.turns(batch, 200_000, None)) == records_of(letting.turns(batch, 200_000, None))
    n = calls[-1]  # (the last call's context; its reply appended after)
    kept = letting.entries
    assert [x is FREED for x in kept[:n - 2]] == [x is not changed for x in kept[:n - 2]]
    assert changed in kept[:n - 2] and all(x is not FREED for x in kept[n - 2:])
    assert not any(x is FREED for x in holding.entries)


@needs_native
def test_the_native_loop_refuses_a_batch_with_answers_for_other_calls():
    from compactlab.engine.records import TurnRecord

    t = load_transcript(str(SAMPLES / "synth-small.jsonl"))
    chars = t.entries[0].chars + 2
    turns = NATIVE.KeepingTurns(_measures([1, 3], [chars, chars + t.entries[1].chars + t.entries[2].chars]),
                                TurnRecord)
    batch = [(0, 1, t.entries[:1], t.entries[1])]
    with pytest.raises(ValueError, match="2 answered flags for 1 calls"):
        turns.turns(batch, 200_000, [False, True])
    assert turns.entries == []  # (nothing run)
    with pytest.raises(ValueError, match="length 4"):  # (a call that is not (call, pos, pending, reply))
        turns.turns([(0, 1, t.entries[:1])], 200_000, None)
    over = turns.turns(batch, 10, None)
    assert [r.overflow for r in over] == [True] and len(turns.entries) == 2
    answered = turns.turns([(1, 3, t.entries[2:3], t.entries[3])], 10, [True])
    assert [r.overflow for r in answered] == [False] and [r.call for r in answered] == [1]


#: micro's settings the layers' loop runs, drawn over (each a --set of observation-masking)
MICRO_SETTINGS = st.fixed_dictionaries({
    "keep_recent": st.integers(0, 6),
    "keep_by": st.sampled_from(["results", "turns", "user_turns"]),
    "min_chars": st.sampled_from([0, 30, 120, 400]),
    "placeholder": st.sampled_from(["[Old environment output omitted]", "[{tool_name} output cleared, é]", "x",
                                    "{tool_name}"]),
    "preserve_tools": st.sampled_from([[], ["Read"], ["Bash", "Grep"]]),
    "clear_short": st.booleans(),
    "only_consumed": st.booleans(),
    "string_content_only": st.booleans(),
    "protect_tokens": st.sampled_from([0, 0, 50, 400]),
    "trigger_tokens": st.sampled_from([0, 0, 300, 3_000]),
    "trigger_on": st.sampled_from(["context", "history"]),
    "clear_at_least": st.sampled_from([0, 0, 40, 500]),
})
#: snip's settings, drawn over (keep_head below max_messages)
SNIP_SETTINGS = st.integers(2, 20).flatmap(lambda most: st.fixed_dictionaries({
    "max_messages": st.just(most),
    "keep_head": st.integers(0, most - 1),
    "pair_safe": st.sampled_from([True, False, "head"]),
    "placeholder": st.sampled_from(["[snipped {n} messages]", "[{n}]", "gone"]),
}))


def _sets(layer: str, settings_: dict) -> list[str]:
    return [f"{layer}.{k}={orjson.dumps(v).decode() if not isinstance(v, str) else v}" for k, v in settings_.items()]


def _micro(settings_: dict):
    return load_policy("observation-masking", _sets("micro", settings_))


def _layered(order: list[str], micro: dict, snip: dict):
    """observation-masking with the layers of ``order`` on (snip, micro) and these settings."""
    return load_policy("observation-masking", [f"order={orjson.dumps(order).decode()}", "snip.enabled=true",
                                               *_sets("micro", micro), *_sets("snip", snip)])


@needs_native
@covering("order, how, sample", [["micro"], ["snip", "micro"], ["micro", "snip"], ["snip"]],
          ["loaded", "streamed", "read ahead"], SAMPLE_NAMES)
def test_a_policy_of_snip_and_micro_runs_alike_on_the_native_loop(monkeypatch, layered, sample, how, order):
    policy = _layered(order, {"keep_recent": 2, "min_chars": 0}, {"max_messages": 12, "keep_head": 2})
    assert keeping.native_layers(policy) == order
    _sample_runs_alike(monkeypatch, layered, sample, how, policy)


def _sample_runs_alike(monkeypatch, layered: dict, sample: str, how: str, policy) -> None:
    """``policy`` over a sample, loaded, streamed or read ahead: the same run on both loops, the
    native one's made by the layers' loop."""
    path = str(SAMPLES / f"{sample}.jsonl")
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "1" if how == "read ahead" else "0")
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")

    def run():
        source = load_transcript(path) if how == "loaded" else Opening(path, probes=True).feed()
        return replay(source, policy, ReplayOptions(window=30_000))

    a, b = _both(monkeypatch, run)
    _same(a, b)
    assert layered == {"runs": 1, "calls": len(b.calls)}


@needs_native
@pytest.mark.parametrize("how", ["loaded", "streamed", "lazily"])
def test_every_copy_micro_makes_takes_its_originals_violation_facts(monkeypatch, tmp_path, how):
    """Each copy micro makes, natively (``EntryCopies``: a message left in its file) or by its
    Python (``with_result_content``: a message loaded or streamed with its content), is told to the
    run's tracker, which takes its facts from its original rather than reading them; the run is the
    Python loop's, orphans and all."""
    from compactlab.engine.measures import violations

    msgs = []
    for i in range(10):  # (an orphan result at the head: a violation every call)
        if i == 0:
            msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t_gone", "content": "x"}]})
        msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "bash",
                                                       "input": {"cmd": f"ls {i}"}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                                  "content": f"file_{i}.py " * 40}]})
    msgs.append({"role": "assistant", "content": "done"})
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in msgs))
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "lazy" if how == "lazily" else "0")
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")
    trackers: list = []
    real = violations.tracker_for
    monkeypatch.setattr(violations, "tracker_for", lambda *a: trackers.append(real(*a)) or trackers[-1])
    policy = _micro({"keep_recent": 1, "min_chars": 0})

    def run():
        source = load_transcript(str(path)) if how == "loaded" else Opening(str(path), probes=False).feed()
        return replay(source, policy, ReplayOptions(window=30_000))

    a, b = _both(monkeypatch, run)
    _same(a, b)
    assert b.summary.violations_introduced + b.summary.violations_inherited > 0
    micro = b.summary.micro_compacted
    assert micro >= 8 and trackers[-1].aliased == micro  # (every copy told, and shown once)


@needs_native
@covering("preset, how, sample", ["openhands", "qwen-code", "gemini-cli", "s08", "s06", "s06-article", "goose",
                                  "claude-code", "codex", "opencode"],
          ["loaded", "streamed", "read ahead"], SAMPLE_NAMES)
def test_a_preset_that_summarises_runs_alike_on_the_native_loop(monkeypatch, layered, sample, how, preset):
    """The presets whose layers the loop runs with those that summarise: their triggers lowered so
    that the samples summarise (in messages, characters, tokens, and tokens as recorded where the
    recording says)."""
    policy = load_policy(preset, ["summary.trigger=30" if preset == "openhands" else "summary.trigger=6000",
                                  "summary.keep_tail=8" if preset == "openhands" else "summary.max_failures=3"])
    assert keeping.native_layers(policy) is not None
    _sample_runs_alike(monkeypatch, layered, sample, how, policy)


def _made_natively(monkeypatch, layered, step: str, policy, sample: str, how: str) -> None:
    """A run whose ``step`` compaction the loop summarises itself: Python's step never asked, the
    run the Python loop's, record for record (its stats, the made messages' origins and the
    ledger's saved transcripts among them), and the compaction made at least once."""
    asked = []
    real = getattr(keeping.PythonSteps, step)
    monkeypatch.setattr(keeping.PythonSteps, step, lambda self, *a: asked.append(a[0]) or real(self, *a))
    path = SAMPLES / sample

    def run():
        source = load_transcript(str(path)) if how == "loaded" else Opening(str(path), probes=False).feed()
        return replay(source, policy, ReplayOptions(window=30_000))

    a, n = _both(monkeypatch, run)
    _same(a, n)
    assert getattr(a.summary, step) == getattr(n.summary, step) > 0
    assert layered["runs"] == 1 and asked == []
    assert a.summary.saved_transcripts == n.summary.saved_transcripts


@needs_native
@pytest.mark.parametrize("how", ["loaded", "streamed"])
@pytest.mark.parametrize("mode", ["before_results", "after_results", "replace_results"])
def test_manual_compaction_is_summarised_by_the_native_loop_as_by_python(monkeypatch, layered, how, mode):
    """Where the loop makes the summary layer's stub summary, it makes manual compaction's too (the
    whole context summarised, the message of ``replace_results`` after it)."""
    policy = load_policy("s08", [f"manual.mode={mode}", "manual.message=Compacted: go on."])
    _made_natively(monkeypatch, layered, "manual", policy, "manual-compact.jsonl", how)


@needs_native
@pytest.mark.parametrize("how", ["loaded", "streamed"])
@pytest.mark.parametrize("tail", ["reactive.keep_tail=0", "reactive.keep_tail=5",
                                  "reactive.pair_safe=false", "reactive.template=R {summary} {transcript}"])
def test_reactive_compaction_is_summarised_by_the_native_loop_as_by_python(monkeypatch, layered, how, tail):
    """Where the loop makes the summary layer's stub summary, it makes reactive compaction's too
    (the whole context summarised, its last messages kept after it, the cut moved off a tool pair
    where ``pair_safe``, its own template filled without a transcript's name)."""
    policy = load_policy("s08", ["reactive.window_tokens=1500", "reactive.max_retries=2", "summary.trigger=400000",
                                 tail])
    _made_natively(monkeypatch, layered, "reactive", policy, "synth-medium.jsonl", how)


class _Flaky:
    """A summarizer that fails at every third request it gets (the circuit breaker's case)."""

    name = "flaky"

    def __init__(self) -> None:
        from compactlab.summarizers import StubSummarizer

        self.stub, self.asked = StubSummarizer(), 0

    def summarize(self, request):
        from compactlab.errors import SummarizerError

        self.asked += 1
        if self.asked % 3 == 0:
            raise SummarizerError(f"failure {self.asked}")
        return self.stub.summarize(request)


@needs_native
def test_a_summary_whose_breaker_opened_is_not_asked_again(monkeypatch, layered):
    """Once the summary's circuit breaker opens, the layer never acts again: the loop stops handing
    it the context (which it did at every call over the trigger: the context made anew each time,
    a replay 20 times dearer, qwen-code's on the bench's file)."""
    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    asked = []
    real = keeping.PythonSteps.summary
    monkeypatch.setattr(keeping.PythonSteps, "summary", lambda self, *a: asked.append(a[0]) or real(self, *a))

    class Failing:
        name = "failing"

        def summarize(self, request):
            from compactlab.errors import SummarizerError

            raise SummarizerError("down")

    run = replay(load_transcript(str(SAMPLES / "synth-medium.jsonl")),
                 load_policy("qwen-code", ["summary.trigger=2000", "summary.measure=estimate",
                                           "summary.keep_tail_fraction=0"]),
                 ReplayOptions(summarizer=Failing()))
    assert layered["runs"] == 1 and len(run.failed_summaries) == 1
    first = run.failed_summaries[0]["call"]
    assert asked == [first] and first + 10 < len(run.calls)


@needs_native
def test_the_layers_loop_clears_snips_loses_and_attributes_as_the_python_one(monkeypatch, layered):
    """The samples hold what the loop must get right beyond sizes: results cleared and messages
    snipped (events, totals), probes lost to micro at the call that cleared them and to snip where
    its placeholder stands, retention of changed and dropped messages."""
    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")
    policy = _layered(["snip", "micro"], {"keep_recent": 1, "min_chars": 0}, {"max_messages": 10, "keep_head": 1})
    runs = [replay(load_transcript(str(SAMPLES / f"{s}.jsonl")), policy) for s in SAMPLE_NAMES]
    assert layered["runs"] == len(SAMPLE_NAMES)
    for total, column in [("micro_compacted", "micro_compacted"), ("snipped", "snipped")]:
        assert sum(getattr(r.summary, total) for r in runs) == sum(getattr(c, column) for r in runs for c in r.calls) > 0
    events = [e for r in runs for e in r.events]
    assert {tuple(e.layers) for e in events} >= {("snip",), ("micro",), ("snip", "micro")}
    assert all(e.messages_after <= e.messages_before for e in events)
    lost = [p for r in runs for p in r.probe_ledger if p.status == "lost"]
    assert {p.removed_by for p in lost} == {"micro", "snip"} and all(p.removed_at >= 0 for p in lost)
    assert sum(c.refs_retained for r in runs for c in r.calls) < sum(c.refs for r in runs for c in r.calls)


@needs_native
@settings(max_examples=examples(80), deadline=None)
@given(transcripts(max_turns=30), st.sampled_from([["micro"], ["snip"], ["snip", "micro"], ["micro", "snip"]]),
       MICRO_SETTINGS, SNIP_SETTINGS, st.sampled_from([None, 2_000]))
def test_generated_recordings_run_alike_through_snip_and_micro_on_the_native_loop(msgs, order, micro, snip, window):
    """Generated recordings through generated snip and micro settings (every option the native loop
    runs, in either order): its run is the Python loop's."""
    b = TranscriptBuilder("generated.jsonl", "anthropic")
    for m in msgs:
        b.add(m)
    t = b.build()
    policy = _layered(order, micro, snip)
    assert keeping.native_layers(policy) == order
    with pytest.MonkeyPatch.context() as mp:
        a, n = _both(mp, lambda: replay(t, policy, ReplayOptions(window=window)))
    _same(a, n)


#: budget's settings, drawn over (small, so that generated results are persisted)
BUDGET_SETTINGS = st.integers(300, 3_000).flatmap(lambda threshold: st.fixed_dictionaries({
    "max_chars": st.sampled_from([200, 1_000, 20_000]),
    "persist_threshold": st.just(threshold),
    "preview_chars": st.integers(0, threshold - 1),
}))
#: reactive and manual compaction's settings, drawn over (a window small enough to reach)
REACTIVE_SETTINGS = st.fixed_dictionaries({
    "enabled": st.booleans(),
    "window_tokens": st.sampled_from([300, 1_500, 6_000]),
    "keep_tail": st.integers(0, 6),
    "pair_safe": st.booleans(),
    "max_retries": st.integers(0, 2),
})
MANUAL_SETTINGS = st.fixed_dictionaries({
    "enabled": st.booleans(),
    "mode": st.sampled_from(["before_results", "after_results", "replace_results"]),
    "message": st.just("Compacted: go on."),
})
#: the summary's settings the native loop runs, drawn over
SUMMARY_SETTINGS = st.fixed_dictionaries({
    "enabled": st.booleans(),
    "unit": st.sampled_from(["messages", "chars", "tokens"]),
    "measure": st.sampled_from(["estimate", "recorded"]),
    "keep_head": st.integers(0, 3),
    "keep_tail": st.integers(0, 6),
    "keep_tail_fraction": st.sampled_from([0.0, 0.0, 0.3]),
    "rollback_if_larger": st.booleans(),
    "ack": st.sampled_from(["", "Understood."]),
    "input_from": st.sampled_from(["head", "tail"]),
    "input_chars": st.sampled_from([200, 80_000]),
    "max_failures": st.integers(1, 3),
})


@needs_native
@settings(max_examples=examples(80), deadline=None)
@given(transcripts(max_turns=30), st.sampled_from([[], ["micro"], ["snip", "micro"], ["micro", "snip"],
                                                    ["budget", "snip", "micro"], ["micro", "budget"], ["budget"]]),
       MICRO_SETTINGS, SNIP_SETTINGS, SUMMARY_SETTINGS, BUDGET_SETTINGS, REACTIVE_SETTINGS, MANUAL_SETTINGS,
       st.integers(8, 4_000), st.booleans())
def test_generated_recordings_compact_alike_on_the_native_loop(tmp_path_factory, msgs, order, micro, snip, summary_,
                                                                  budget, reactive, manual, trigger, flaky):
    """Generated recordings through generated layers with the summary (its trigger in messages,
    characters or tokens; kept head, tail or share; rolled back; a summarizer that fails, its
    circuit breaker), reactive compaction over a small window and the compact tool's manual
    compaction in each mode: the native loop's run is the Python loop's."""
    b = TranscriptBuilder("generated.jsonl", "anthropic")
    for m in msgs:
        b.add(m)
    t = b.build()
    summary_ = {**summary_, "enabled": summary_["enabled"] or not order,
                "trigger": min(trigger, 40) if summary_["unit"] == "messages" else trigger}
    if summary_["unit"] == "messages" and summary_["keep_head"] + summary_["keep_tail"] >= summary_["trigger"]:
        summary_["keep_tail"] = 0
        summary_["keep_head"] = min(summary_["keep_head"], summary_["trigger"] - 1)
    policy = load_policy("observation-masking", [f"order={orjson.dumps(order).decode()}", "snip.enabled=true",
                                                 "micro.enabled=true", "budget.enabled=true", *_sets("micro", micro),
                                                 *_sets("snip", snip), *_sets("summary", summary_),
                                                 *_sets("budget", budget), *_sets("reactive", reactive),
                                                 *_sets("manual", manual)])
    assert keeping.native_layers(policy) == order + [name for name, on in [
        ("summary", summary_["enabled"]), ("reactive", reactive["enabled"]), ("manual", manual["enabled"])] if on]
    outs = iter(tmp_path_factory.mktemp("out") / which for which in ("python", "native"))
    with pytest.MonkeyPatch.context() as mp:
        a, n = _both(mp, lambda: replay(t, policy, ReplayOptions(summarizer=_Flaky() if flaky else None),
                                        ReplayOutput(out_dir=next(outs))))
    _same(a, n)
    assert a.failed_summaries == n.failed_summaries
    assert a.summary.persisted_files == n.summary.persisted_files


#: what the recording's times and prompts decide, drawn over: the summary's timing and request,
#: Codex's count of reasoning, micro's gates
TIMED_SETTINGS = st.fixed_dictionaries({
    "timing": st.sampled_from(["trigger", "idle", "before_expiry"]),
    "request": st.sampled_from(["fresh", "prefix"]),
    "count_reasoning": st.booleans(),
    "early_share": st.sampled_from([0.0, 0.0, 0.3, 1.0]),  # (of the trigger)
    "at_prompts": st.booleans(),
    "idle_minutes": st.sampled_from([0, 0, 1, 30]),
})


def _timed(msgs: list[dict], gaps: list[int], signatures: list[int]):
    """``msgs`` recorded as a harness records them: each reply with its usage (the prompt as
    recorded, about the messages before it) and time (``gaps``: seconds since the previous reply,
    over a 5-minute cache's lifetime or an hour at times), some with reasoning signed (``signatures``:
    its length, as Codex and Claude Code record it)."""
    from compactlab.transcripts.model import anthropic_usage

    b = TranscriptBuilder("timed.jsonl", "anthropic")
    chars, clock, k = 0, 1_700_000_000, 0
    for m in msgs:
        usage = None
        if m["role"] == "assistant":
            clock += gaps[k % len(gaps)]
            if signatures[k % len(signatures)] and isinstance(m["content"], list):
                m = {**m, "content": [{"type": "thinking", "thinking": "t",
                                       "signature": "s" * signatures[k % len(signatures)]}, *m["content"]]}
            usage = anthropic_usage({"input_tokens": chars // 4, "output_tokens": 20},
                                    "claude-sonnet-4-5-20250929",
                                    datetime.fromtimestamp(clock, timezone.utc).isoformat())
            k += 1
        chars += len(orjson.dumps(m))
        b.add(m, usage=usage)
    return b.build()


@needs_native
@settings(max_examples=examples(60), deadline=None)
@given(transcripts(max_turns=30), st.lists(st.sampled_from([5, 60, 200, 400, 4_000]), min_size=1, max_size=8),
       st.lists(st.sampled_from([0, 0, 1_000, 4_000, 20_000]), min_size=1, max_size=5),
       st.sampled_from([[], ["micro"], ["budget", "micro"], ["snip", "micro"]]), TIMED_SETTINGS,
       st.integers(50, 6_000), st.booleans(), st.booleans())
def test_generated_timed_recordings_compact_alike_on_the_native_loop(tmp_path_factory, msgs, gaps, signatures, order,
                                                                        timed, trigger, reactive, manual):
    """Recordings with usage and times through what they decide: a summary at its trigger as
    recorded, early where the prompt cache is cold or about to be, its request reading the cache
    (Claude Code, Codex), Codex's count of earlier reasoning, micro only as a prompt comes or after
    an idle gap (opencode, Claude Code's time-based microcompact): the native loop's run is the
    Python loop's (a count of reasoning after a snip stays on the Python loop)."""
    t = _timed(msgs, gaps, signatures)
    sets = [f"order={orjson.dumps(order).decode()}", "snip.enabled=true", "snip.max_messages=12", "snip.keep_head=2",
            "micro.keep_recent=2", "micro.min_chars=0", "budget.persist_threshold=2000", "budget.preview_chars=200",
            "budget.max_chars=1000",
            "summary.enabled=true", "summary.unit=tokens", "summary.measure=recorded", f"summary.trigger={trigger}",
            "summary.keep_tail=4", f"reactive.enabled={str(reactive).lower()}", "reactive.window_tokens=3000",
            f"manual.enabled={str(manual).lower()}",
            f"summary.early_trigger={int(trigger * timed['early_share'])}",
            *_sets("summary", {k: timed[k] for k in ("timing", "request", "count_reasoning")}),
            *_sets("micro", {k: timed[k] for k in ("at_prompts", "idle_minutes")})]
    policy = load_policy("observation-masking", sets)
    runs_natively = keeping.native_layers(policy) is not None
    assert runs_natively == (not (timed["count_reasoning"] and "snip" in order))
    outs = iter(tmp_path_factory.mktemp("out") / which for which in ("python", "native"))
    with pytest.MonkeyPatch.context() as mp:
        made = _spy(mp, "layer_turns")
        a, n = _both(mp, lambda: replay(t, policy, ReplayOptions(), ReplayOutput(out_dir=next(outs))))
    assert made["runs"] == runs_natively
    _same(a, n)
    assert a.failed_summaries == n.failed_summaries
    assert a.summary.summary_cache_read_tokens == n.summary.summary_cache_read_tokens


def test_the_timed_recordings_reach_what_they_are_drawn_for(tmp_path):
    """The timed recordings the test above draws do what it is there for: the prompt cache cold after
    a gap, a prefix summary reading the cache, micro held back by its gates, reasoning counted."""
    turn = [{"role": "assistant", "content": [{"type": "tool_use", "id": "", "name": "Read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "", "content": "r" * 3_000}]}]
    msgs = [{"role": "user", "content": "go"}]
    for i in range(30):
        a, r = orjson.loads(orjson.dumps(turn))
        a["content"][0]["id"] = r["content"][0]["tool_use_id"] = f"toolu_{i:03d}"
        msgs += [a, r] + ([{"role": "user", "content": f"prompt {i}"}] if i % 7 == 6 else [])
    msgs.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    t = _timed(msgs, [60, 60, 400], [4_000])
    base = ["summary.enabled=true", "summary.unit=tokens", "summary.measure=recorded", "summary.trigger=8000",
            'order=["micro"]', "micro.keep_recent=2", "micro.min_chars=0"]
    run = replay(t, load_policy("observation-masking", [*base, "summary.request=prefix"]))
    assert run.summary.summaries > 0 and run.summary.summary_cache_read_tokens > 0
    fresh = replay(t, load_policy("observation-masking", base))
    assert fresh.summary.summary_cache_read_tokens == 0
    idle = replay(t, load_policy("observation-masking", [*base, "summary.trigger=100000", "summary.timing=idle",
                                                         "summary.early_trigger=5000"]))
    assert idle.summary.summaries > 0  # (only where the cache went cold: under the trigger)
    gated = [replay(t, load_policy("observation-masking", [*base, *more])).summary.micro_compacted
             for more in ([], ["micro.idle_minutes=5"], ["micro.at_prompts=true"])]
    assert gated[0] > gated[1] > 0 and gated[0] > gated[2] > 0
    counted = [replay(t, load_policy("observation-masking", [*base, "order=[]", "summary.trigger=20000", *more])).calls
               for more in ([], ["summary.count_reasoning=true"])]  # (micro off: the context is the recording's)
    first = [next((c.call for c in calls if c.summarized), None) for calls in counted]
    assert first[1] is not None and (first[0] is None or first[1] < first[0])


@needs_native
@pytest.mark.parametrize("what", ["clear_inputs=true", "reasoning counted after a snip",
                                  "a framework's step", "compactions kept", "exact counts", "contexts kept",
                                  "python core"])
def test_the_python_loop_runs_what_the_layers_loop_cannot(monkeypatch, layered, what):
    monkeypatch.setenv("COMPACTLAB_CORE", "python" if what == "python core" else "native")
    t = load_transcript(str(SAMPLES / "manual-compact.jsonl"))
    sets = {"reasoning counted after a snip": ["summary.enabled=true", "summary.unit=tokens",
                                               "summary.measure=recorded", "summary.count_reasoning=true",
                                               "snip.enabled=true", 'order=["snip", "micro"]']}.get(
        what, [f"micro.{what}"] if "=" in what else [])
    policy = load_policy("strands-sliding-window" if what == "a framework's step" else "observation-masking", sets)
    options = {"compactions kept": {"keep_recorded_compactions": True},
               "exact counts": {"counter": _Counter()},
               "contexts kept": {"keep_contexts": (0, 1)}}.get(what, {})
    assert (keeping.native_layers(policy) is not None) == (
        what in ("compactions kept", "exact counts", "contexts kept", "python core"))
    replay(t, policy, ReplayOptions(**options))
    assert layered == {"runs": 0, "calls": 0}


@needs_native
def test_the_layers_loop_refuses_what_it_does_not_run():
    """Told a layer or a micro setting it does not run (``native_layers`` keeps such a policy off
    it), the native loop says so rather than run it otherwise."""
    from compactlab.engine.records import TurnRecord

    def loop(layers):
        return NATIVE.LayerTurns(_measures([], []), TurnRecord, layers, {}, {}, print, print)

    with pytest.raises(ValueError, match="clear_inputs"):
        loop([("micro", load_policy("observation-masking", ["micro.clear_inputs=true"]).config_for("micro"), None)])
    with pytest.raises(ValueError, match="budget"):  # (budget is Python's to persist: without its step, refused)
        loop([("budget", load_policy("s08").config_for("budget"), None)])
    with pytest.raises(ValueError, match="reactive"):
        loop([("reactive", load_policy("s08").config_for("reactive"), None)])
    assert loop([("snip", load_policy("s08").config_for("snip"), None)]).entries == []


@needs_native
def test_the_layers_loop_finds_a_message_by_its_origin_as_a_context_does(monkeypatch):
    """What recall reads of the loop's context (the loop itself): a transcript message by its
    origin, and the message a policy made in the gap of one snipped, as ``Context`` finds them."""
    from compactlab.engine import loop as engine_loop
    from compactlab.engine.context import Context

    made = []
    real = keeping.layer_turns
    monkeypatch.setattr(engine_loop, "layer_turns", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    run = replay(load_transcript(str(SAMPLES / "synth-medium.jsonl")),
                 _layered(["snip"], {}, {"max_messages": 8, "keep_head": 2}))
    ((turns, _),) = made
    assert run.summary.snipped > 0
    ctx = Context(turns.entries)
    assert any(e.origin < 0 for e in ctx.entries)
    for origin in range(-3, max(e.origin for e in ctx.entries) + 3):
        assert turns.find_origin(origin) == ctx.find_origin(origin)
        assert turns.made_in_gap(origin) is ctx.made_in_gap(origin)


@needs_native
@pytest.mark.parametrize("kind", ["IntactFirstRecall", "Recall"])
def test_the_layers_loop_asks_recall_of_the_native_check_itself(monkeypatch, layered, kind):
    """On the layers' loop, recall's row of each call is asked of the run's native check with no
    Python between (``Recall.natively``); a recall of another kind (a test's subclass) is asked in
    Python (``Measures.recall_at``): the same runs either way, and the same as the python core's."""
    from compactlab.engine import measures

    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")
    asked = []
    real = measures.Measures.recall_at
    monkeypatch.setattr(measures.Measures, "recall_at", lambda self, *a: asked.append(1) or real(self, *a))
    base = getattr(measures, kind)

    class Another(base):  # type: ignore[valid-type, misc]
        pass

    policy = _layered(["snip", "micro"], {"keep_recent": 1, "min_chars": 0}, {"max_messages": 10, "keep_head": 1})
    statuses = set()
    for sample in SAMPLE_NAMES:
        transcript = load_transcript(str(SAMPLES / f"{sample}.jsonl"))
        python, native = _both(monkeypatch, lambda: replay(transcript, policy, recall=base))
        _same(python, native)
        asked.clear()
        again = replay(transcript, policy, recall=base)
        assert not asked  # (no Python between the loop and the check)
        other = replay(transcript, policy, recall=Another)
        assert len(asked) == len(other.calls)  # (a recall of another kind: asked in Python at each call)
        assert records_of(other.calls) == records_of(again.calls) == records_of(native.calls)
        assert other.probe_ledger == again.probe_ledger == native.probe_ledger
        statuses |= {p.status for p in native.probe_ledger}
    assert {"kept", "lost"} <= statuses  # (the check itself ran, not only the recording's own contexts)
    assert layered["runs"] == 3 * len(SAMPLE_NAMES)  # (each run on the layers' loop but the python core's)
