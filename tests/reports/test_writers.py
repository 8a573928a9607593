"""Every writer of every command, through the CLI, gives well-formed output of its format; the
choices of every --format are its command's writers."""

from __future__ import annotations

import csv
import importlib
import io
import tomllib

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import ROOT, SAMPLES, examples

from compactlab import core

needs_native = pytest.mark.skipif(core.native_module() is None, reason="the native core is not built in this install "
                                  "(it was installed without a Rust toolchain): nothing to compare")

SMALL = SAMPLES / "synth-small.jsonl"
#: command line, the module and registry of its writers
COMMANDS = [
    (["replay", SMALL, "--dry-run", "-q"], "replay_report", "WRITERS"),
    (["compare", SMALL, "-p", "none", "-p", "s08", "--dry-run", "-q"], "compare_report", "WRITERS"),
    (["check", SMALL, "-p", "s08", "--baseline", ROOT / "reports" / "baseline.json", "-q"], "check_report", "WRITERS"),
    (["inspect", SMALL], "inspect_report", "INSPECT_WRITERS"),
    (["inspect", SAMPLES], "inspect_report", "SESSIONS_WRITERS"),
    (["policies", "list"], "policy_report", "LIST_WRITERS"),
    (["policies", "show", "s08"], "policy_report", "SHOW_WRITERS"),
]


def registry(module: str, name: str) -> dict:
    return getattr(importlib.import_module(f"compactlab.reports.{module}"), name)


CASES = [pytest.param(args, fmt, id=f"{args[0]}{'-' + args[1] if args[0] == 'policies' else ''}-{name}-{fmt}")
         for args, module, name in COMMANDS for fmt in sorted(registry(module, name))]


def well_formed(fmt: str, text: str) -> None:
    assert text.strip()
    if fmt in ("json", "json-run"):
        orjson.loads(text)
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(text)))
        assert len(rows) >= 2 and len({len(r) for r in rows}) == 1
    elif fmt == "md":
        assert any(line.startswith("|") for line in text.splitlines())
    elif fmt == "toml":
        tomllib.loads(text)
    else:
        assert fmt == "table" and len(text.splitlines()) >= 2


@pytest.mark.parametrize("args, fmt", CASES)
def test_every_writer_of_every_command(cli, args, fmt):
    r = cli(*args, "--format", fmt)
    assert r.exit_code == 0, r.stderr
    well_formed(fmt, r.stdout)


@pytest.mark.parametrize("args, module, name", COMMANDS, ids=[" ".join(map(str, c[0][:2])) for c in COMMANDS])
def test_the_format_choices_are_the_writers(cli, args, module, name):
    r = cli(*args, "--format", "no-such-format")
    assert r.exit_code == 2
    error, hint = r.stderr.splitlines()  # (one line, as every error is, and its hint)
    listed = error.split("is not one of ", 1)[1].strip().rstrip(".")
    assert sorted(x.strip(" '") for x in listed.split(",")) == sorted(registry(module, name))
    assert error.startswith("error: Invalid value for '--format': 'no-such-format'") and hint.startswith("hint: ")


def test_inspect_of_a_file_and_of_a_folder_offer_the_same_formats():
    assert registry("inspect_report", "INSPECT_WRITERS").keys() == registry("inspect_report", "SESSIONS_WRITERS").keys()


_TERMINAL = st.sampled_from(["\x7f", "\x85", "\x9b", "\u202a", "\u202e", "\u2066", "\u2069", "\x1b", "é", "\u2028",
                             "a", "{", '"'])


@settings(max_examples=examples(300), deadline=None)
@given(st.recursive(st.one_of(st.text(st.one_of(_TERMINAL, st.characters(codec="utf-8"))),
                              st.integers(-2**63, 2**63 - 1), st.none()),
                    lambda inner: st.one_of(st.lists(inner, max_size=4),
                                            st.dictionaries(st.text(_TERMINAL, max_size=3), inner, max_size=4)),
                    max_leaves=12))
def test_json_output_escapes_what_acts_on_a_terminal_and_nothing_else(value):
    """``json_bytes``: DEL, the C1 controls and the bidi overrides as ``\\u`` escapes, whichever way the
    output is checked (an ASCII output without DEL is not searched), and the same value read back."""
    from compactlab.reports.text import _JSON_UNSAFE, json_bytes

    data = orjson.dumps(value)
    written = json_bytes(value)
    assert written == _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group().decode()):04x}".encode(), data)
    assert _JSON_UNSAFE.search(written) is None and orjson.loads(written) == value


class _Sink(io.RawIOBase):
    """A file or a pipe: what is written to it is counted, not kept."""

    written, last = 0, b""

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.written += len(b)
        self.last = bytes(b[-1:]) or self.last
        return len(b)


def _stream(encoding: str) -> tuple[io.TextIOWrapper, io.BytesIO]:
    raw = io.BytesIO()
    return io.TextIOWrapper(raw, encoding=encoding, errors="backslashreplace", newline=""), raw


@pytest.mark.parametrize("encoding", ["utf-8", "ascii", "latin-1"])
@pytest.mark.parametrize("value", [{"a": "plain"}, {"a": "caf\u00e9 \u00d7 \u202e \x1b"}])
def test_a_json_document_on_a_stream_is_what_its_text_was(encoding, value):
    """``write_json_line``: what was written before stays before, and the stream holds the text it
    held when the document was decoded and written as text (on a stream that is not UTF-8, a document
    that is not ASCII is still written as text: its encoding's escapes, as before)."""
    from compactlab.reports.text import json_bytes, write_json_line

    for option in (0, orjson.OPT_INDENT_2):
        out, raw = _stream(encoding)
        out.write("before\n")
        write_json_line(out, value, option)
        out.write("after\n")
        out.flush()
        reference, reference_raw = _stream(encoding)
        reference.write("before\n" + json_bytes(value, option).decode("utf-8") + "\n" + "after\n")
        reference.flush()
        assert raw.getvalue() == reference_raw.getvalue()
    text = io.StringIO()  # (no binary buffer: written as text)
    write_json_line(text, value)
    assert text.getvalue() == json_bytes(value).decode("utf-8") + "\n"


def test_a_large_json_document_is_written_without_copies_of_it():
    """The bytes themselves go to the stream's buffer: Python's peak while writing a 4 MB document is
    what orjson takes to write it (its buffer grows to twice the document) and no copy of it: decoded, then
    joined with the line break, it was three."""
    import tracemalloc

    from compactlab.reports.text import write_json_line

    value = {"calls": ["x" * 100] * 40_000}
    size = len(orjson.dumps(value))
    sink = _Sink()
    out = io.TextIOWrapper(io.BufferedWriter(sink), encoding="utf-8")
    tracemalloc.start()
    try:
        write_json_line(out, value)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out.flush()
    assert sink.written == size + 1 and sink.last == b"\n"
    assert peak < 2.5 * size, (peak, size)  # (orjson grows its buffer to twice the document: 2×; decoded and joined, 3×)


@pytest.mark.parametrize("core", ["python", "native"])
@pytest.mark.parametrize("part", [7, 15, 30, 2048])
def test_a_replays_json_written_in_pieces_is_the_document_orjson_wrote_whole(tmp_path, monkeypatch, core, part):
    """``--format json`` and ``json-run`` write a run's summary, its records and its timing as they
    are made (the records never copied into one document with the rest): the bytes are those of the
    whole document made safe at once, on a UTF-8 stream and as text on an ASCII one (a summary that
    names a file with a bidi override and a character beyond ASCII)."""
    from compactlab import core as cores
    from compactlab import load_policy, load_transcript, replay
    from compactlab.reports import replay_report
    from compactlab.reports.replay_report import write_json, write_json_run
    from compactlab.reports.text import json_bytes

    if core == "native" and cores.native_module() is None:
        pytest.skip("the native core is not built here")
    monkeypatch.setenv("COMPACTLAB_CORE", core)
    monkeypatch.setattr(replay_report, "RECORDS_PART", part)  # (30 calls: parts of 7, two of 15, one)
    path = tmp_path / "caf\u00e9 \u202e.jsonl"
    path.write_bytes((SAMPLES / "synth-small.jsonl").read_bytes())
    runs = [replay(load_transcript(str(path)), load_policy(p)) for p in ("s08", "none")]

    def whole(run) -> dict:
        native = cores.native_module()  # (the python core's records are the native class where it is built)
        calls = (native.records_json(run.calls) if native is not None else None) or orjson.dumps(run.calls)
        return {"summary": run.summary, "calls": orjson.Fragment(calls), "timing": run.timing}

    for writer, document in ((write_json, {"runs": [whole(r) for r in runs]}), (write_json_run, whole(runs[0]))):
        chosen = runs if writer is write_json else runs[:1]
        for encoding in ("utf-8", "ascii"):
            out, raw = _stream(encoding)
            writer(chosen, out)
            out.flush()
            reference, reference_raw = _stream(encoding)
            reference.write(json_bytes(document).decode("utf-8") + "\n")
            reference.flush()
            assert raw.getvalue() == reference_raw.getvalue()
        assert b"\\u202e" in raw.getvalue() and b"caf\\xe9" in raw.getvalue()  # (ASCII: as text, escaped)


def test_a_replays_json_holds_its_records_once_while_it_is_written(tmp_path):
    """Python's peak while ``--format json`` writes a run is its records' JSON and little more: 1.05×
    the document (made whole by orjson, 2×; then decoded and joined with its line break, 5×)."""
    import tracemalloc

    from compactlab import load_policy, load_transcript, replay
    from compactlab.reports.replay_report import write_json

    (run,) = [replay(load_transcript(str(SAMPLES / "synth-medium.jsonl")), load_policy("s08"))]
    sink = _Sink()
    out = io.TextIOWrapper(io.BufferedWriter(sink), encoding="utf-8")
    tracemalloc.start()
    try:
        write_json([run], out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out.flush()
    assert sink.written > 50_000 and peak < 1.5 * sink.written, (peak, sink.written)


@pytest.fixture(scope="module")
def monkeypatch_module():
    """An environment a hypothesis test may change at every example."""
    with pytest.MonkeyPatch.context() as mp:
        yield mp


_FIELDS = st.one_of(st.text(st.sampled_from(',"\n\r\t x é\u2028\x00'), max_size=8), st.text(max_size=8), st.none(),
                    st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True), st.just(""))


def _reference(rows: list[list]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode("utf-8")


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.lists(_FIELDS.filter(lambda v: not (type(v) is str and any(0xD800 <= ord(c) <= 0xDFFF for c in v))),
                         max_size=5), max_size=6))
def test_every_csv_file_is_what_the_csv_module_writes(monkeypatch_module, rows):
    """``text.csv_bytes`` (every CSV file compactlab writes): the native writer where it runs, on
    either core the csv module's bytes (quotes, commas, newlines, a lone empty field, numbers of any
    size, floats as their repr, booleans, None)."""
    from compactlab import core
    from compactlab.reports.text import csv_bytes

    for which in (["python", "native"] if core.native_module() is not None else ["python"]):
        monkeypatch_module.setenv("COMPACTLAB_CORE", which)
        assert csv_bytes(rows) == _reference(rows)
        assert csv_bytes(iter(map(tuple, rows))) == _reference(rows)  # (any iterable of sequences)


def test_a_text_with_no_utf8_is_refused_as_the_csv_module_refuses_it():
    """A lone surrogate (no UTF-8): the native writer leaves it to the reference, which says so."""
    from compactlab.reports.text import csv_bytes

    with pytest.raises(UnicodeEncodeError):
        _reference([["a", "\ud800"]])
    with pytest.raises(UnicodeEncodeError):
        csv_bytes([["a", "\ud800"]])


_CELL_TEXT = st.text(st.one_of(st.sampled_from('=+-@\t\r,"\n x é\x00\x1b\x7f\x85\x9f\xa0\u2028\u202a\u202e\u202f'
                                                '\u2065\u2066\u2069\u206a\ufdd0'),
                                st.characters(exclude_categories=("Cs",))), max_size=10)


@needs_native
@settings(max_examples=examples(400), deadline=None)
@given(_CELL_TEXT)
def test_the_native_csv_cell_is_pythons(text):
    """A CSV cell made safe in Rust (``csv_text::csv_cell``): the Python ``csv_cell``'s text (every
    control, DEL, C1 and bidi character escaped, the sized mark left out, a formula not run)."""
    from compactlab.core import native_module
    from compactlab.reports.text import csv_cell

    assert native_module().csv_cell(text) == csv_cell(text)


def _ledger(draw_texts: list[str], rows: list[tuple]) -> list:
    from compactlab.engine.measures.probes import ProbeOutcome

    return [ProbeOutcome(call, draw_texts[p % len(draw_texts)], kind, source_call, draw_texts[t % len(draw_texts)],
                         status, by, at) for call, p, kind, source_call, t, status, by, at in rows]


@needs_native
@settings(max_examples=examples(150), deadline=None)
@given(texts=st.lists(_CELL_TEXT, min_size=1, max_size=4),
       rows=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.sampled_from(["path", "identifier", "line"]),
                               st.integers(-1, 10**6), st.integers(0, 3),
                               st.sampled_from(["kept", "recoverable", "lost"]),
                               st.sampled_from(["", "budget", "micro", "summary", "snip"]), st.integers(-1, 10**6)),
                     max_size=8),
       events=st.lists(st.tuples(st.integers(0, 10**6), st.lists(st.sampled_from(["budget", "snip", "micro", "summary"]),
                                                                 max_size=3),
                                 st.lists(st.integers(0, 10**9), min_size=7, max_size=7),
                                 st.lists(st.tuples(_CELL_TEXT, st.integers(0, 10**6)), max_size=3)), max_size=6))
def test_probes_and_compactions_csv_are_written_natively_as_python_writes_them(texts, rows, events):
    """probes.csv and compactions.csv written in Rust (``probes_csv``, ``compactions_csv``): the
    bytes the Python writers (the reference) make of the same ledger and events — texts with
    commas, quotes, newlines, controls, formulas and sized marks; a removal's call only where the
    probe was not kept; an event's lost strings joined and made safe."""
    from types import SimpleNamespace

    from compactlab.engine.records import CompactionEvent
    from compactlab.reports import replay_report as rr

    run = SimpleNamespace(probe_ledger=_ledger(texts, rows),
                          events=[CompactionEvent(call, layers, *counts, lost=lost) for call, layers, counts, lost in events])
    assert rr.probes_csv_bytes(run) == rr.probes_csv_reference(run)  # type: ignore[arg-type]
    assert rr.compactions_csv_bytes(run) == rr.compactions_csv_reference(run)  # type: ignore[arg-type]
    # (the ledger a native run holds in Rust: its rows written, not its outcomes made)
    from compactlab.core import native_module
    from compactlab.engine.measures.probes import ProbeOutcome

    held = native_module().ProbeLedger(ProbeOutcome)
    for outcome in run.probe_ledger:
        held.append(outcome)
    assert rr.probes_csv_bytes(SimpleNamespace(probe_ledger=held)) == rr.probes_csv_reference(run)  # type: ignore[arg-type]


@needs_native
@settings(max_examples=examples(3000), deadline=None)
@given(st.one_of(st.floats(), st.floats(1e-5, 1e17), st.decimals(allow_nan=False, allow_infinity=False, places=3,
                                                                   min_value=-10**15, max_value=10**15).map(float),
                 st.integers(0, 2**53).map(lambda n: n / 8), st.integers(0, 2**64 - 1).map(
                     lambda b: __import__("struct").unpack("<d", b.to_bytes(8, "little"))[0])))
def test_a_float_is_written_natively_as_its_repr(x):
    """A float in a CSV file written in Rust: ``repr(x)`` for every float — ties between two
    shortest strings (n / 8 has many: Python rounds them to even, Rust's shortest digits up) and
    every bit pattern included. (The writer asks Python's repr: a Rust twin that left ties to Python
    cost more than it saved.)"""
    rows = [[x, -x]]
    assert core.native_module().csv_rows(rows) == _reference(rows)


class _Backwards(list):
    """A list whose iterator gives its items last first (what iterating it in place would miss)."""

    def __iter__(self):
        return iter(self[::-1])


class _Doubled(tuple):
    """A tuple whose iterator gives each item twice."""

    def __iter__(self):
        return (x for item in tuple.__iter__(self) for x in (item, item))


@needs_native
def test_rows_are_read_as_their_iterators_give_them():
    """The native writers read a tuple or a list in place (``members::items``) and any other
    iterable, a subclass of either among them, through its own iterator, as the csv module does:
    the same bytes whatever holds the rows and their fields."""
    def ways():
        plain = [("a", 1, None), ["b", 2.5, "c,d"]]
        yield plain
        yield tuple(plain)
        yield _Backwards(plain)
        yield [_Doubled(row) for row in plain]
        yield [_Backwards(row) for row in plain]
        yield (iter(row) for row in plain)  # (a generator of iterators: read once)
        yield {"x": None, "y": None}  # (a dict's keys, each a row of its characters)

    native = core.native_module()
    for made, again in zip(ways(), ways()):
        assert native.csv_rows(made) == _reference(again)


@needs_native
def test_the_native_report_writers_leave_what_they_cannot_write_to_python():
    """A text without UTF-8 (a lone surrogate), a row that is not an outcome, a lost string that is
    not a (text, call) pair: the native writers say None, and the Python writer decides (the same
    bytes, or its error)."""
    from types import SimpleNamespace

    from compactlab.core import native_module
    from compactlab.engine.records import CompactionEvent
    from compactlab.reports import replay_report as rr

    native = native_module()
    bad = _ledger(["fine", "\ud800"], [(1, 1, "path", 0, 0, "lost", "snip", 1)])
    assert native.probes_csv(bad, rr.PROBE_COLUMNS) is None
    assert native.probes_csv([(1, 2, 3)], rr.PROBE_COLUMNS) is None
    from compactlab.engine.measures.probes import ProbeOutcome

    held = native.ProbeLedger(ProbeOutcome)
    for outcome in bad:
        held.append(outcome)
    assert native.probes_csv(held, rr.PROBE_COLUMNS) is None  # (the ledger held in Rust: the same)
    with pytest.raises(UnicodeEncodeError):
        rr.probes_csv_bytes(SimpleNamespace(probe_ledger=bad))  # type: ignore[arg-type]
    odd = [CompactionEvent(3, ["micro"], 1, 2, 3, 4, 5, 6, 7, lost=[["a list", 2]])]
    assert native.compactions_csv(odd, rr.EVENT_COLUMNS) is None
    run = SimpleNamespace(events=odd)
    assert rr.compactions_csv_bytes(run) == rr.compactions_csv_reference(run)  # type: ignore[arg-type]
    plain = [CompactionEvent(3, ["micro", "snip"], 1, 2, 3, 4, 5, 6, 7, lost=[("=cmd", 2), ("x,y", 5)])]
    assert native.compactions_csv(plain, rr.EVENT_COLUMNS).endswith(b'3,micro snip,1,2,3,4,5,6,7,2,"\'=cmd (call 2); x,y (call 5)"\n')


class _Text:
    def __str__(self) -> str:
        return 'made, "here"'


def test_any_other_field_is_written_as_its_str():
    from compactlab.reports.text import csv_bytes

    rows = [[_Text(), 1.0, -0.0, 1e-7, 2**64, True]]
    assert csv_bytes(rows) == _reference(rows) == b'"made, ""here""",1.0,-0.0,1e-07,18446744073709551616,True\n'


def test_the_python_engines_records_are_written_in_parts_as_orjson_writes_them_whole(monkeypatch):
    """The Python engine's records were written as one orjson document (its peak twice the
    document's, and more once decoded); they are written a part at a time now, as the native core's
    are, and the parts joined are orjson's text of the whole list, at every length around a part's."""
    from compactlab import load_policy, load_transcript, replay
    from compactlab.engine.records import PythonTurnRecord, turn_values
    from compactlab.reports.replay_report import PYTHON_RECORDS_PART as PART, _calls_json

    monkeypatch.setenv("COMPACTLAB_CORE", "python")
    run = replay(load_transcript(str(SAMPLES / "synth-medium.jsonl")), load_policy("s08"))
    # (the records as an install without the native module makes them)
    records = [PythonTurnRecord(*turn_values(c)) for c in run.calls]
    assert len(records) > 10
    for n in (0, 1, 2, PART - 1, PART, PART + 1, 2 * PART + 3):
        calls = (records * (n // len(records) + 1))[:n]
        parts = list(_calls_json(calls))
        assert b"".join(parts) == orjson.dumps(calls), n
        assert len([p for p in parts if p != b","]) == max(1, -(-n // PART)), n
