"""A call's record held in Rust (``_native.TurnRecord``, ``native/src/records.rs``) against its
reference, the Python engine's dataclass (``records.PythonTurnRecord``): the same columns, order and
defaults, read, set, pickled and turned into a dict alike; and what is written of a run's records
from the struct — the replay's JSON, calls.csv, the summary's sums — the bytes and numbers the
reference writers give of the same records. An install without the native module runs on the
Python record and writes the same files (a replay in a process that cannot import it)."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from compactlab import core
from compactlab.engine import records
from compactlab.engine.records import TURN_COLUMNS, PythonTurnRecord, TurnRecord
from compactlab.reports.replay_report import calls_csv_bytes
from helpers import SAMPLES, examples

NATIVE = core.native_module()
needs_native = pytest.mark.skipif(NATIVE is None, reason="the native core is not built in this install (it was "
                                                         "installed without a Rust toolchain): nothing to compare")

_FLOAT_COLUMN, _BOOL_COLUMN = "input_cost_usd", "overflow"
#: floats where the writers' own formatting and the one asked of Python meet: ties rounded to even,
#: the bounds of the decimal range, the smallest and largest, the non-finite and negative zero
_FLOATS = [0.0, -0.0, 1e-4, 9.999999999999999e-05, 9.75e-05, 0.1 + 0.2, 2.0**46 + 0.625, 9999999999999998.0, 1e16,
           5e-324, 1.7976931348623157e308, float("inf"), float("-inf"), float("nan"), -1.5, 12.0, 0.012345,
           0.0100002288818359375]


def _values():
    ints = st.integers(-(2**63), 2**63 - 1) | st.integers(0, 10**6)
    return st.fixed_dictionaries({c: st.booleans() if c == _BOOL_COLUMN
                                  else (st.floats() | st.sampled_from(_FLOATS)) if c == _FLOAT_COLUMN else ints
                                  for c in TURN_COLUMNS})


def _both(rows: list[dict]) -> tuple[list, list]:
    return [NATIVE.TurnRecord(**r) for r in rows], [PythonTurnRecord(**r) for r in rows]


@needs_native
def test_the_record_class_is_the_native_one_where_it_is_built_whichever_core_runs(monkeypatch):
    """One class of record in an install: the native module's, which the loops of both cores make."""
    from compactlab import load_policy, load_transcript, replay

    assert TurnRecord is NATIVE.TurnRecord
    t = load_transcript(str(SAMPLES / "synth-small.jsonl"))
    for chosen in ("python", "native"):
        monkeypatch.setenv("COMPACTLAB_CORE", chosen)
        for preset in ("none", "s08"):
            run = replay(t, load_policy(preset))
            assert run.calls and all(type(c) is NATIVE.TurnRecord for c in run.calls), (chosen, preset)


@needs_native
def test_the_native_record_has_the_references_columns_defaults_and_behaviour():
    required = TURN_COLUMNS[:5]
    a, b = NATIVE.TurnRecord(*range(5)), PythonTurnRecord(*range(5))
    assert list(a.to_dict()) == TURN_COLUMNS and a.to_dict() == b.to_dict()
    assert [type(v) for v in a.to_dict().values()] == [type(v) for v in b.to_dict().values()]
    full = {c: (k % 2 == 1) if c == _BOOL_COLUMN else k + 0.5 if c == _FLOAT_COLUMN else k
            for k, c in enumerate(TURN_COLUMNS)}
    by_position = NATIVE.TurnRecord(*full.values())
    assert by_position.to_dict() == NATIVE.TurnRecord(**full).to_dict() == PythonTurnRecord(**full).to_dict() == full
    for name in TURN_COLUMNS:  # read and set as the dataclass's attributes
        assert getattr(by_position, name) == full[name]
    by_position.tokens += 5
    by_position.overflow = False
    assert (by_position.tokens, by_position.overflow) == (full["tokens"] + 5, False)
    again = pickle.loads(pickle.dumps(by_position))
    assert type(again) is NATIVE.TurnRecord and again.to_dict() == by_position.to_dict()
    assert copy.copy(again).to_dict() == again.to_dict() and copy.copy(again) is not again
    with pytest.raises(TypeError):
        NATIVE.TurnRecord(*range(4))  # (a required column left out, as the dataclass refuses)
    with pytest.raises(TypeError):
        NATIVE.TurnRecord(*range(5), nonsense=1)
    with pytest.raises(TypeError):
        by_position.tokens = "many"  # (a column holds what it holds: no text among the integers)
    with pytest.raises(AttributeError):
        by_position.extra = 1  # (no column beyond the schema's)
    assert required == ["call", "message_index", "raw_messages", "raw_chars", "raw_tokens"]


@needs_native
@settings(max_examples=examples(60), deadline=None)
@given(st.lists(_values(), max_size=12), st.data())
@example([dict(dict.fromkeys(TURN_COLUMNS, 0), overflow=True, input_cost_usd=v) for v in _FLOATS], None)
def test_the_records_json_and_calls_csv_written_in_rust_are_the_references_bytes(rows, data):
    native, python = _both(rows)
    assert NATIVE.records_json(native) == orjson.dumps(python)
    if data is not None and native:  # (written in parts, as --format json writes a long run's: the same bytes)
        cuts = sorted(data.draw(st.lists(st.integers(1, len(native) - 1), max_size=3, unique=True)) if len(native) > 1 else [])
        bounds = [0, *cuts, len(native)]
        parts = [NATIVE.records_json(native[a:b], a == 0, b == len(native)) for a, b in zip(bounds, bounds[1:])]
        assert b"".join(parts) == orjson.dumps(python)
    run = type("Run", (), {})
    a, b = run(), run()
    a.calls, b.calls = native, python
    assert NATIVE.calls_csv(native) == calls_csv_bytes(a) == calls_csv_bytes(b)


@needs_native
@settings(max_examples=examples(60), deadline=None)
@given(st.lists(_values(), max_size=12),
       st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=0, max_value=50) | st.sampled_from(_FLOATS[:12]),
                max_size=12))
@example([dict.fromkeys(TURN_COLUMNS, 0) | {_BOOL_COLUMN: False}] * 2, [-0.0, -0.0])  # (from the integer 0: 0.0)
@example([dict.fromkeys(TURN_COLUMNS, 2**62) | {_BOOL_COLUMN: True}] * 3, [0.1, 0.2, 0.3])  # (past 64 bits)
def test_the_summarys_sums_made_in_rust_are_pythons(rows, costs):
    rows = [{**r, _FLOAT_COLUMN: c} for r, c in zip(rows, costs)]
    native, python = _both(rows)
    got = NATIVE.record_sums(native, sys.version_info >= (3, 12))
    want = records._sums(python)
    assert got is not None and list(got[0]) == list(want[0])
    assert repr(got[1]) == repr(float(want[1]))  # (to the last bit; NaN and inf said alike)
    floats = [r[_FLOAT_COLUMN] for r in rows]
    # each way of adding, as CPython does it: one after another (3.11), compensated (3.12's Neumaier)
    assert repr(NATIVE.record_sums(native, False)[1]) == repr(float(_sequential(floats)))
    assert repr(NATIVE.record_sums(native, True)[1]) == repr(float(_neumaier(floats)))


def _sequential(xs: list[float]) -> float:
    total = 0.0
    for k, x in enumerate(xs):
        total = 0.0 + x if k == 0 else total + x  # (from the integer 0: -0.0 is added to it)
    return total


def _neumaier(xs: list[float]) -> float:
    """CPython 3.12's ``sum`` of floats (Python/bltinmodule.c): the first item, then Neumaier's sum."""
    if not xs:
        return 0.0
    total, c = 0.0 + xs[0], 0.0
    for x in xs[1:]:
        t = total + x
        c += (total - t) + x if abs(total) >= abs(x) else (x - t) + total
        total = t
    if c and c not in (float("inf"), float("-inf")) and c == c:
        total += c
    return total


@needs_native
def test_a_list_with_a_record_of_another_class_is_left_to_the_reference_writers():
    native, python = _both([dict.fromkeys(TURN_COLUMNS, 1) | {_BOOL_COLUMN: True, _FLOAT_COLUMN: 0.5}] * 2)
    mixed = [native[0], python[1]]
    assert NATIVE.records_json(mixed) is None and NATIVE.calls_csv(mixed) is None
    assert NATIVE.record_sums(mixed, False) is None
    assert records._sums(mixed) == records._sums(python)


@needs_native
def test_a_loop_given_another_record_class_makes_and_measures_the_same_records():
    """The native loop makes its records in Rust where it is given the native class, and calls the
    class it is given otherwise (a test's), the measures setting a call's columns directly on the one
    and by ``setattr`` on the other: the same records either way."""
    from types import SimpleNamespace as Given

    from compactlab import load_transcript
    from compactlab.engine.cost.cache_rules import RULES
    from compactlab.engine.sizing import TokenEstimator

    t = load_transcript(str(SAMPLES / "synth-small.jsonl"))
    e = t.entries
    calls = [k for k, x in enumerate(e) if x.role == "assistant"][:5]
    batch, start = [], 0
    for call, pos in enumerate(calls):
        batch.append((call, pos, e[start:pos], e[pos]))
        start = pos + 1
    chars = [0]
    for x in e[:calls[-1]]:
        chars.append(chars[-1] + x.chars)

    def made(cls: type) -> list:
        measures = NATIVE.CallMeasures(NATIVE.PromptCache(4.0, 0, False, RULES["anthropic"]),
                                       Given(tracker=NATIVE.InvariantTracker(object), logged=lambda call: (0, 0)),
                                       Given(messages=calls, chars=[chars[p] + 2 * max(p - 1, 0) for p in calls]),
                                       Given(refs={}, keep=True), TokenEstimator(4.0, 0))
        return NATIVE.KeepingTurns(measures, cls).turns(batch, 200_000, None)

    native, python = made(NATIVE.TurnRecord), made(PythonTurnRecord)
    assert {type(r) for r in native} == {NATIVE.TurnRecord} and {type(r) for r in python} == {PythonTurnRecord}
    assert [r.to_dict() for r in native] == [r.to_dict() for r in python]
    assert any(r.cache_read_tokens for r in native) and all(r.raw_tokens for r in native)


def test_an_install_without_the_native_module_writes_the_same_files(tmp_path):
    """A replay in a process that cannot import ``compactlab._native`` (an install without Rust) runs
    on the Python record and writes the JSON, calls.csv and the summary a native install writes."""
    blocked = ("import sys; sys.modules['compactlab._native'] = None\n"
               "from compactlab.engine import records\n"
               "assert records.TurnRecord is records.PythonTurnRecord\n"
               "from compactlab.cli import main\n"
               "main(prog_name='compactlab')\n")
    path = str(SAMPLES / "synth-medium.jsonl")
    outs = {}
    for name, prefix in (("without", [sys.executable, "-c", blocked]), ("with", [sys.executable, "-m", "compactlab"])):
        out = tmp_path / name
        done = subprocess.run([*prefix, "replay", path, "-p", "s08", "--format", "json", "--out", str(out), "-q"],
                              capture_output=True, cwd=tmp_path, env={**os.environ, "COMPACTLAB_CACHE_DIR": str(tmp_path / "c")},
                              timeout=120)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        outs[name] = (orjson.loads(done.stdout), out)
    (without, a), (withit, b) = outs["without"], outs["with"]
    for doc in (without, withit):
        for run in doc["runs"]:
            run["timing"] = run["summary"]["core"] = None
    assert without == withit and without["runs"][0]["calls"]
    for name in ("calls.csv", "probes.csv", "compactions.csv"):
        assert Path(a, name).read_bytes() == Path(b, name).read_bytes(), name


@needs_native
def test_the_native_event_has_the_references_fields_and_behaviour():
    """A compaction event held in Rust (``_native.CompactionEvent``) has the reference's fields in
    its order and its default, is equal to an event of either class with the same fields (not to
    another object), unhashable as the reference is, its ``layers`` and ``lost`` the lists Python
    appends to, and pickled and copied as its fields."""
    import dataclasses

    names = [f.name for f in dataclasses.fields(records.CompactionEvent)]
    args = (7, ["snip", "micro"], 40, 30, 9000, 7000, 2, 10, 0)
    native, reference = NATIVE.CompactionEvent(*args), records.CompactionEvent(*args)
    assert [getattr(native, n) for n in names] == [getattr(reference, n) for n in names] == [*args, []]
    assert native == reference and reference == native and not native != reference
    assert native == NATIVE.CompactionEvent(*args) and native != NATIVE.CompactionEvent(8, *args[1:])
    assert native != records.CompactionEvent(*args[:-1], 1) and native != args and not native == 7
    with pytest.raises(TypeError):
        hash(native)
    native.lost.append(("src/app.py", 3))
    assert native != reference and native.lost == [("src/app.py", 3)]
    reference.lost.append(("src/app.py", 3))
    assert native == reference
    native.tokens_after = 6000
    assert native != reference and native.tokens_after == 6000
    for copied in (pickle.loads(pickle.dumps(native)), copy.copy(native), copy.deepcopy(native)):
        assert type(copied) is NATIVE.CompactionEvent and copied == native and copied is not native
    given = NATIVE.CompactionEvent(*args, [("x", 1)])
    assert given.lost == [("x", 1)]


@needs_native
def test_the_events_a_native_loop_makes_are_the_native_class_and_write_the_references_bytes(tmp_path):
    """A replay the native loop runs makes its events in Rust; compactions.csv and recall's losses
    read from them are the bytes and lists of the same events as the reference's class."""
    from compactlab import load_policy, load_transcript, replay
    from compactlab.reports.replay_report import compactions_csv_bytes, compactions_csv_reference

    run = replay(load_transcript(str(SAMPLES / "synth-medium.jsonl")), load_policy("s08"))
    assert run.events and all(type(e) is NATIVE.CompactionEvent for e in run.events)
    assert any(e.lost for e in run.events)
    as_reference = [records.CompactionEvent(*(getattr(e, f) for f in (
        "call", "layers", "messages_before", "messages_after", "tokens_before", "tokens_after", "results_cleared",
        "snipped", "summaries")), lost=list(e.lost)) for e in run.events]
    assert as_reference == run.events
    written = compactions_csv_bytes(run)
    assert written == compactions_csv_reference(run)
    run.events = as_reference
    assert compactions_csv_bytes(run) == written
    # recall's losses appended to either class alike
    for events in ([NATIVE.CompactionEvent(e.call, e.layers, 0, 0, 0, 0, 0, 0, 0) for e in as_reference],
                   [records.CompactionEvent(e.call, e.layers, 0, 0, 0, 0, 0, 0, 0) for e in as_reference]):
        assert NATIVE.append_losses(run.probe_ledger, events)
        assert [e.lost for e in events] == [e.lost for e in as_reference]
