"""A message line's facts read natively (``_native.LineFacts``, ``native/src/facts.rs``) held to
``messages.build_entry``, the reference: where the native reader gives facts they are the ones
Python makes of the parsed line (with and without ``measure``), and where Python refuses a line
the native reader never reads it. On every line of the samples and of the shared recordings (as
recorded and as ``convert`` writes them), on generated lines, on every character Python's
``str.isspace`` or orjson's escaping decides, and through the loaders on both cores; and a
loader's messages, read from their compact JSON as they are added (``TranscriptBuilder.add``),
held to ``make_entry`` slot for slot."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlab import core
from compactlab.errors import CompactlabError
from compactlab.transcripts import load_transcript
from compactlab.transcripts.anthropic_messages import _read, message_of
from compactlab.transcripts.messages import SIZED_MARK, Entry, ResultFact, build_entry, sized_placeholder
from compactlab.transcripts.model import TranscriptBuilder
from compactlab.transcripts.reader import LineReader
from compactlab.transcripts.writer import COMPACTION_KEY, anthropic_lines
from helpers import SAMPLES, SHARED, records_of, examples
from strategies import transcripts

NATIVE = core.native_module()
needs_native = pytest.mark.skipif(NATIVE is None, reason="the native core is not built in this install (it was "
                                                         "installed without a Rust toolchain): nothing to compare")

#: an Entry's facts as the native reader gives them (``Entry``'s arguments after its message)
FACTS = ("chars", "role", "origin", "tool_use_ids", "tool_names", "use_files", "results", "misplaced_results",
         "empty", "has_text")


def facts_of(entry: Entry) -> tuple:
    return tuple(getattr(entry, name) for name in FACTS)


def python_entry(line: bytes, origin: int, measure: bool) -> Entry | str | None:
    """What Python makes of a line: its Entry (of the message, a reply's role and content), why it
    is not a usable message, or None (not JSON)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    return build_entry(message_of(obj), origin, check=True, measure=measure)


def agrees(line: bytes, origin: int = 7) -> bool:
    """Whether the native reader read ``line`` (asserting that what it read is Python's: the facts,
    and a reply's other members, which only it has and each of which it hands on as recorded)."""
    read = False
    for measure in (True, False):
        got = NATIVE.LineFacts(ResultFact, measure).read(line, origin)
        want = python_entry(line, origin, measure)
        if got is None:
            continue
        read = True
        facts, rest = got
        assert isinstance(want, Entry), (line[:300], want)
        assert facts == facts_of(want), (line[:300], facts, facts_of(want))
        assert all(type(r) is ResultFact for r in facts[6])
        obj = orjson.loads(line)
        assert COMPACTION_KEY not in obj
        others = {k: v for k, v in obj.items() if k not in ("role", "content")}
        assert (rest is None) is (not others)
        if rest is not None:
            assert orjson.loads(rest) == others, (line[:300], rest[:300])
    return read


def _lines(path) -> list[bytes]:
    with open(path, "rb") as f:
        return [line for line in f if line.strip()]


@needs_native
def test_every_line_of_the_samples_is_read_as_python_reads_it():
    read = total = 0
    for path in sorted(SAMPLES.glob("*.jsonl")):
        for i, line in enumerate(_lines(path)):
            total += 1
            read += agrees(line, i)
    assert total > 500 and read > 0.9 * total  # (the samples are message lines: nearly all read natively)


@needs_native
@pytest.mark.slow
def test_every_line_of_the_shared_recordings_and_of_their_conversion_is_read_as_python_reads_it(shared_transcripts):
    converted = 0
    for path in sorted(p for p in shared_transcripts.rglob("*") if p.is_file()):
        if path.suffix in (".jsonl", ".json", ".traj") and path.stat().st_size < 64 << 20:
            for i, line in enumerate(_lines(path)):  # (another format's lines: none is a message line)
                agrees(line, i)
        try:
            transcript = load_transcript(str(path))
        except CompactlabError:
            continue
        for i, line in enumerate(anthropic_lines(transcript, keep_recorded_compactions=True)):
            converted += agrees(line, i)
    # (nearly every line: replies with their usage, sanitised texts' sized placeholders; Python reads
    # the system prompt and a recorded compaction)
    assert converted > 1000


# generated lines: every block shape, strings of every kind of character, written every way
_CHARS = st.one_of(st.characters(codec="utf-8"), st.sampled_from(list("\"\\/ \t\n\r\x00\x08\x0c\x1c\x1f\x7f\x85\xa0"
                                                                  "\u2028\u3000é😀\ufdd0")))
#: sized placeholders (``messages._FIELDS``), and texts that are nearly one
PLACEHOLDERS = [sized_placeholder("IMAGE", 5), sized_placeholder("REDACTED_TEXT", 13131, " sha=036b7e47"),
                sized_placeholder("X", 0, " a=1 b=2 c=3 d=4"), SIZED_MARK + "[X len=5 a=1 b=2 c=3 d=4 e=5]",
                SIZED_MARK + "[X len=1234567890123456]", SIZED_MARK + "[x len=5]", SIZED_MARK + "[X len=5 sha=g]",
                SIZED_MARK + "[X len=\u0665]", "[IMAGE len=5]"]
TEXT = (st.lists(_CHARS | st.sampled_from(PLACEHOLDERS), max_size=40).map("".join)
        | st.sampled_from(["", " ", "\n\t", "x", *PLACEHOLDERS]))
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), TEXT,
                   st.floats(allow_nan=False, allow_infinity=False))
VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                     max_leaves=8)
KIND = st.sampled_from(["text", "tool_use", "tool_result", "image", "thinking"]) | st.none() | st.integers(0, 2)
INPUT = st.dictionaries(st.sampled_from(["path", "file_path", "notebook_path", "command", "x"]),
                        TEXT | VALUE, max_size=4) | VALUE


@st.composite
def blocks(draw):
    block = {}
    kind = draw(KIND)
    if kind is not None:
        block["type"] = kind
    for key, value in (("text", TEXT | VALUE), ("id", TEXT | VALUE), ("name", TEXT | VALUE),
                       ("tool_use_id", TEXT | VALUE), ("input", INPUT),
                       ("content", TEXT | st.lists(blocks_or_values(), max_size=3) | VALUE),
                       ("is_error", VALUE), ("extra", VALUE)):
        if draw(st.integers(0, 3)):  # (most keys, most of the time)
            block[key] = draw(value)
    keys = draw(st.permutations(list(block)))
    return {k: block[k] for k in keys}


def blocks_or_values():
    return st.deferred(lambda: blocks() | VALUE)


@st.composite
def lines(draw) -> bytes:
    role = draw(st.sampled_from(["user", "assistant"]) | VALUE)
    content = draw(TEXT | st.lists(blocks() | VALUE, max_size=4) | VALUE)
    message = {"role": role, "content": content}
    if draw(st.booleans()):
        message = {"content": content, "role": role}
    if draw(st.integers(0, 2)) == 0:  # a reply recorded with its usage, model, time and what else
        message["usage"] = draw(st.dictionaries(st.sampled_from(["input_tokens", "output_tokens", "x"]), VALUE))
        message.update(draw(st.dictionaries(st.sampled_from(["model", "id", "type", "timestamp", "stop_reason",
                                                             COMPACTION_KEY, "message", "system"]) | TEXT,
                                            VALUE, max_size=3)))
        message = {k: message[k] for k in draw(st.permutations(list(message)))}
    how = draw(st.integers(0, 3))
    if how == 0:
        line = orjson.dumps(message)
    else:  # json writes \u escapes, other spacing, and may write what orjson refuses (lone surrogates, NaN)
        line = json.dumps(message, ensure_ascii=how == 1, separators=None if how == 2 else (",", ":")).encode()
    if draw(st.integers(0, 9)) == 0:  # a key given twice
        line = line.replace(b'"role"', b'"role":"user","role"', 1)
    return line + draw(st.sampled_from([b"", b"\n", b"\r\n", b" \n"]))


@needs_native
@settings(max_examples=examples(400), deadline=None)
@given(lines())
def test_generated_lines_are_read_as_python_reads_them_or_left_to_it(line):
    agrees(line)


@needs_native
@given(st.sampled_from([{"role": "assistant", "content": [
    {"type": "text", "text": "a \"quoted\" \\ path\n"},
    {"type": "tool_use", "id": "t\u00e91", "name": "read", "input": {"file_path": "é/x.py", "path": "", "n": 3}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
        {"type": "text", "text": "héllo"}, {"type": "image", "source": {"data": "AAAA"}}], "is_error": 1},
        {"type": "text", "text": " "}, {"type": "tool_result", "tool_use_id": "t2"}]}]),
    st.sampled_from([True, False]))
def test_the_usual_blocks_are_read_natively(message, ascii_only):
    line = json.dumps(message, ensure_ascii=ascii_only).encode()
    assert agrees(line)


def _text_line(text: str, ascii_only: bool) -> bytes:
    return json.dumps({"role": "user", "content": [{"type": "text", "text": text}]}, ensure_ascii=ascii_only).encode()


@needs_native
def test_whitespace_and_escapes_are_pythons_for_every_character_that_decides():
    """Python's ``str.isspace`` (has_text) and orjson's escaping (chars) of each character below
    U+3100 (every space but none lies there), every space above, and a sample of the rest, written
    as itself and as an escape."""
    import random

    rng = random.Random(59)
    points = [*range(0x3100), *(c for c in range(0x3100, 0x110000) if chr(c).isspace()),
              *rng.sample(range(0x3100, 0x110000), 3000)]
    read = 0
    for c in points:
        if 0xD800 <= c <= 0xDFFF:
            continue
        for ascii_only in (True, False):
            line = _text_line(chr(c), ascii_only)
            got = NATIVE.LineFacts(ResultFact, True).read(line, 0)
            if chr(c) == SIZED_MARK:
                assert got is None
                continue
            if got is None:
                assert python_entry(line, 0, True) is None  # (a raw control character: not JSON)
                continue
            read += 1
            assert got == (facts_of(build_entry(orjson.loads(line), 0, check=True, measure=True)), None), hex(c)
            assert got[0][-1] is (not chr(c).isspace()), hex(c)
    assert read > 2 * 0x3000


@needs_native
def test_what_python_decides_is_left_to_it():
    for line in [b'{"role":"user","content":"x","recorded_compaction":{}}', b'{"role":"user","model":"m"}',
                 b'{"role":"user","content":"x","model":"a","model":"b"}', b'{"role":"system","content":"x"}',
                 b'{"role":"assistant","content":"x","usage":{"input_tokens":3e503}}',  # (orjson: infinite)
                 # (nested deeper than the native reader reads: the loader checks the depth where Python reads)
                 b'{"role":"assistant","content":"x","m":' + b"[" * 150 + b"]" * 150 + b"}",
                 b'{"role":"user","content":[{"type":[1]}]}', b'{"role":"user","content":[{"type":"x","a":1.0}]}',
                 b'{"role":"user","content":"\\ud800"}', b'\xef\xbb\xbf{"role":"user","content":"x"}',
                 b'{"role":"user","content":"\xff"}', b'{"role":"user","content":"x"}{}',
                 b'{"role":"user","content":[{"type":"x","n":18446744073709551616}]}',
                 ('{"role":"user","content":"%s[image len=9]"}' % SIZED_MARK).encode(),  # (not a placeholder)
                 b'{"role":"user","content":"\\ufdd0[IMAGE len=9]"}']:  # (the mark written as an escape)
        for measure in (True, False):
            assert NATIVE.LineFacts(ResultFact, measure).read(line, 0) is None, line


def _read_all(path, monkeypatch, which: str, messages: bool = True) -> tuple[list[Entry], TranscriptBuilder]:
    monkeypatch.setenv("COMPACTLAB_CORE", which)
    builder = TranscriptBuilder(str(path), "anthropic", keep=False)
    entries = list(_read(builder, LineReader(str(path), skip_bad_lines=True), measure=True, messages=messages))
    return entries, builder


@needs_native
def test_a_file_of_every_kind_of_line_is_read_alike_on_both_cores(tmp_path, monkeypatch):
    """The lines read natively and those read in Python, mixed: the same entries (messages and
    facts), usage, model, system, skipped lines and warnings; a reader of facts only parses no
    message line it read natively."""
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join([
        b'{"role":"system","content":"be brief"}',
        b'{"role":"user","content":"hi \\u00e9"}',
        b'{"type":"message","role":"assistant","model":"claude-x","content":[{"type":"tool_use","id":"a",'
        b'"name":"read","input":{"path":"f.py"}}],"usage":{"input_tokens":10,"output_tokens":2}}',
        b'{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"x = 1.5"}]}',
        b'{"role":"user","content":[{"type":"tool_result"}]}',
        b'not json',
        b'{"role":"assistant","content":[{"type":"text","text":"done"}],"content":[]}',
        b'{"role":"assistant","content":[{"type":"text","text":"n=1.5"},{"type":"x","v":2.5}]}',
        # replies: floats and deep objects among their other members, a usage that is bad, one
        # nested too deep, a user's usage (not a call's), the format convert recorded, no model
        b'{"id":"m2","role":"assistant","content":"ok","model":"claude-y","usage":{"input_tokens":5,'
        b'"output_tokens":1,"cache_creation_input_tokens":4,"cache_creation":{"ephemeral_1h_input_tokens":2.0}},"cost":0.25,'
        b'"context_management":{"applied_edits":[{"type":"clear","n":[1e3]}]},"timestamp":"2026-01-01T00:00:00Z"}',
        b'{"role":"assistant","content":"bad usage","usage":{"input_tokens":"ten"}}',
        b'{"role":"assistant","content":"deep","x":' + b"[" * 210 + b"]" * 210 + b'}',
        b'{"role":"user","content":"again","usage":{"input_tokens":3},"recorded_format":"claude_code"}',
        b'{"role":"assistant","content":[],"model":7,"usage":{}}',
    ]) + b"\n")
    py_entries, py_builder = _read_all(path, monkeypatch, "python")
    for messages in (True, False):
        entries, builder = _read_all(path, monkeypatch, "native", messages)
        assert [facts_of(e) for e in entries] == [facts_of(e) for e in py_entries]
        if messages:
            assert [e.message for e in entries] == [e.message for e in py_entries]
        else:  # (the lines Python read keep their message; a reply is read natively too)
            assert [e.message is None for e in entries] == [True, True, True, False, False, True, True, True]
        for key in ("usage", "model", "system", "skipped_lines", "warnings", "count", "metadata"):
            assert getattr(builder, key) == getattr(py_builder, key), key
    # (a key given twice and a float are read by Python; a result without its id, a line that is not
    # JSON, a bad usage and a line too deep are bad)
    assert len(py_entries) == 8 and py_builder.skipped_lines == 4
    assert py_builder.usage[5]["cache_creation_1h_input_tokens"] == 2 and py_builder.model == "claude-y"
    assert py_builder.metadata["recorded_format"] == "claude_code"


@needs_native
@pytest.mark.parametrize("usage", [False, True])
def test_the_read_ahead_reader_sends_the_same_facts_without_parsing_the_lines(tmp_path, monkeypatch, usage):
    """A replay read ahead whose probes are cached (the reader reads facts only) and one that looks
    for them (the reader parses each line) give what the Python core gives; of plain message lines,
    and of a recording whose replies are API response objects with their usage."""
    from compactlab import load_policy, replay
    from compactlab.engine.feeds import open_feed
    from compactlab.synth import write

    path = SAMPLES / "synth-medium.jsonl"
    if usage:
        path = tmp_path / "recorded.jsonl"
        write(path, 80, seed=5, usage=True)
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "1")
    runs = []
    for which in ("python", "native"):
        monkeypatch.setenv("COMPACTLAB_CORE", which)
        for probes in (True, False):
            feed = open_feed(str(path), probes=probes)
            assert type(feed).__name__ == "ReadAheadFeed"
            runs.append(replay(feed, load_policy("s08")))
    for a, b in ((runs[0], runs[2]), (runs[1], runs[3])):
        sa, sb = (orjson.loads(orjson.dumps(r.summary)) for r in (a, b))
        assert (sa.pop("core"), sb.pop("core")) == ("python", "native")
        sa.pop("timing", None), sb.pop("timing", None)
        assert sa == sb
        assert records_of(a.calls) == records_of(b.calls)
        assert a.probe_ledger == b.probe_ledger and a.events == b.events
    # (and as the file loaded whole gives, uncalibrated as a stream is)
    loaded = replay(load_transcript(str(path)), load_policy("s08"), calibration=None)
    sl, sn = (orjson.loads(orjson.dumps(r.summary)) for r in (loaded, runs[2]))
    for s_ in (sl, sn):
        s_.pop("timing", None)
    assert sl == sn and records_of(loaded.calls) == records_of(runs[2].calls)
    assert bool(loaded.summary.recorded_cost_usd) is usage


def test_without_the_native_core_every_line_is_read_in_python(monkeypatch):
    monkeypatch.setenv("COMPACTLAB_CORE", "python")
    assert core.line_facts(ResultFact, True) is None
    entries, _ = _read_all(SAMPLES / "synth-small.jsonl", monkeypatch, "python", messages=False)
    assert entries and all(type(e.message) is dict for e in entries)  # (the Python path always parses)
    if NATIVE is not None:
        monkeypatch.setenv("COMPACTLAB_CORE", "native")
        assert core.line_facts(ResultFact, True) is not None


@needs_native
def test_lines_with_bytes_changed_are_read_as_python_reads_them_or_left_to_it():
    """Sample lines with a few bytes changed, dropped or added (brackets, quotes, escapes, UTF-8's
    pieces, the mark's bytes): no panic, and what is read is Python's."""
    import random

    rng = random.Random(59)
    lines = _lines(SAMPLES / "synth-small.jsonl")[:40] + [  # and replies, with sized placeholders
        ('{"type":"message","role":"assistant","content":[{"type":"text","text":"%s"}],"model":"m","usage":'
         '{"input_tokens":12,"output_tokens":3,"cache_creation":{"ephemeral_1h_input_tokens":1.5e1}},"cost":0.25}'
         % sized_placeholder("REDACTED_TEXT", 198, " sha=7a77427c")).encode()] * 10
    pieces = b'{}[]",:\\ u0123456789abcdefnrtl.eE+-=_XAZ\x00\xc3\xa9\xef\xb7\x90'
    read = 0
    for _ in range(4000):
        line = bytearray(rng.choice(lines)[:1500])
        for _ in range(rng.randint(1, 4)):
            i, op = rng.randrange(len(line)), rng.randrange(3)
            if op == 0:
                line[i] = rng.randrange(256)
            elif op == 1:
                del line[i]
            else:
                line.insert(i, rng.choice(pieces))
        read += agrees(bytes(line))
    assert read > 400


#: messages a loader may hand over beyond the generated ones: each added with the facts
#: ``make_entry`` gives it (read natively where the native reader reads it, else by make_entry)
ODD_MESSAGES: list[dict] = [
    {"role": "user", "content": "plain \u2028 text \"quoted\" \\ / \x01"},
    {"role": "user", "content": "   "},
    {"role": "user", "content": []},
    {"role": "assistant", "content": ""},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"},
                                      {"type": "tool_use", "id": "a1", "name": "Edit",
                                       "input": {"file_path": "/x/y.py", "path": "z", "paths": ["p", 3]}},
                                      {"type": "tool_use", "id": "a2", "name": "bash", "input": "raw"}]},
    {"role": "user", "content": [{"type": "text", "text": "first"},
                                 {"type": "tool_result", "tool_use_id": "a1", "content": "late", "is_error": True},
                                 {"type": "tool_result", "tool_use_id": "a2",
                                  "content": [{"type": "text", "text": "t"},
                                              {"type": "image", "source": {"data": "x"}}]},
                                 {"type": "tool_result", "tool_use_id": "a3"}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "s1",
                                  "content": "[output cleared: \ufdd0SIZED:1200\ufdd0]"}]},
    {"role": "assistant", "content": "text", "model": "m", "usage": {"input_tokens": 3}},  # (other members)
    {"content": "role last", "role": "user"},
    {"role": 3, "content": "a role that is no string"},
    {"role": "user", "content": {"type": "text", "text": "a content that is an object"}},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "n", "content": "x" * 70_000 + "é"}]},
]


#: the id sets' slots: None until the set is first read (``Entry.use_set``, ``Entry.result_set``)
_ID_SETS = ("_use_set", "_result_set")


def _facts(entry: object) -> list:
    """Every slot of an Entry but its message (its facts, its sets, what changed), each result's
    ``json_size`` measured where it is not (the native reader measures each as it reads, the
    reference leaves it -1: ``json_len`` of the content is what both must mean)."""
    from compactlab.transcripts.messages import json_len

    names = [n for n in type(entry).__slots__ if n != "message"]  # type: ignore[attr-defined]
    # (an id set compared as it reads, whether it was made yet or not)
    got = [(n, getattr(entry, n.lstrip("_") if n in _ID_SETS else n)) for n in names]
    blocks = entry.message["content"]  # type: ignore[attr-defined]
    results = tuple(r._replace(json_size=json_len(blocks[r.block]["content"]))
                    if r.json_size < 0 and "content" in blocks[r.block] else r
                    for r in entry.results)  # type: ignore[attr-defined]
    return [(n, results if n == "results" else v) for n, v in got]


def _added_both_ways(messages: list[dict]) -> tuple[list, list]:
    """Each message added to a builder on the native core, and made by ``make_entry``, its reference."""
    from compactlab.transcripts.messages import make_entry

    builder = TranscriptBuilder("t.jsonl", "test")
    assert builder._facts is not None
    native, reference = [], []
    for m in messages:
        try:
            reference.append(_facts(make_entry(m, builder.count)))
        except Exception as exc:  # (what make_entry refuses, adding refuses alike)
            with pytest.raises(type(exc)):
                builder.add(m)
            continue
        builder.add(m)
        native.append(_facts(builder.entries[-1]))
    return native, reference


@needs_native
def test_a_loaders_odd_messages_are_added_with_the_facts_make_entry_gives(monkeypatch):
    from compactlab.transcripts import model

    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    made = []
    real = model.make_entry
    monkeypatch.setattr(model, "make_entry", lambda m, origin: made.append(m) or real(m, origin))
    native, reference = _added_both_ways(ODD_MESSAGES + [{"role": "user", "content": {1, 2}}])
    assert native == reference and len(native) == len(ODD_MESSAGES)
    # (most read natively; a sized placeholder, other members, an odd role or content: make_entry's)
    assert 0 < len(made) - 1 < len(ODD_MESSAGES) // 2


@needs_native
@settings(max_examples=examples(60), deadline=None)
@given(transcripts(max_turns=20))
def test_a_loaders_messages_are_added_with_the_facts_make_entry_gives(msgs):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPACTLAB_CORE", "native")
        native, reference = _added_both_ways(msgs)
    assert native == reference and len(native) == len(msgs)


@needs_native
def test_the_python_core_adds_a_loaders_messages_by_make_entry(monkeypatch):
    monkeypatch.setenv("COMPACTLAB_CORE", "python")
    assert TranscriptBuilder("t.jsonl", "test")._facts is None


@needs_native
def test_every_shared_recording_is_loaded_with_the_same_facts_on_both_cores(shared_transcripts, monkeypatch):
    """Every loader, through the builder: the same entries (messages and every slot), usage and
    compactions on both cores, on one recording of each folder of the shared recordings."""
    done = 0
    for folder in sorted(p for p in shared_transcripts.iterdir() if p.is_dir()):
        path = next((p for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix in (".jsonl", ".json")
                     and not p.name.startswith(".")), None)
        if path is None:
            continue
        loaded = []
        for which in ("python", "native"):
            monkeypatch.setenv("COMPACTLAB_CORE", which)
            try:
                loaded.append(load_transcript(str(path)))
            except CompactlabError as exc:  # (what is no transcript is refused alike)
                loaded.append(str(exc))
        if isinstance(loaded[0], str):
            assert loaded[1] == loaded[0]
            continue
        a, b = loaded
        assert [(e.message, _facts(e)) for e in a.entries] == [(e.message, _facts(e)) for e in b.entries], path
        assert a.usage == b.usage and [c.position for c in a.compactions] == [c.position for c in b.compactions]
        done += 1
    assert done >= 5


@needs_native
@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(st.binary(max_size=600),
                 st.lists(st.sampled_from([b"{", b"[", b"]", b"}", b'"', b"\\", b"a", b"\xc3\xa9", b"\n", b" "]),
                          max_size=400).map(b"".join)))
def test_a_lines_brackets_are_counted_natively_as_python_counts_them(raw):
    """``parse_object``'s test before it measures a value's nesting counts a line's ``{`` and ``[``:
    the native count (memchr's) is CPython's ``bytes.count``, on any bytes and lengths."""
    from compactlab.transcripts.reader import _brackets

    assert NATIVE.brackets(raw) == _brackets(raw) == raw.count(b"{") + raw.count(b"[")


@pytest.mark.parametrize("core", ["python", "native"])
def test_a_line_too_deep_is_refused_and_one_of_many_brackets_read_on_both_cores(monkeypatch, core):
    """Counted either way, a line nested past 200 levels is refused with the reason, and a line of
    more than 200 brackets in a string (counted, then measured) is read; the head of a file and a
    format that checks every line (Claude Code's) count them as the core in use does."""
    from compactlab.transcripts.reader import _brackets, bracket_counter, parse_object

    if core == "native" and NATIVE is None:
        pytest.skip("the native core is not built in this install (installed without a Rust toolchain)")
    monkeypatch.setenv("COMPACTLAB_CORE", core)
    assert (bracket_counter() is _brackets) == (core == "python")
    deep = b'{"a": ' + b"[" * 200 + b"]" * 200 + b"}"
    with pytest.raises(ValueError, match="nesting deeper than 200 levels"):
        parse_object(deep)
    flat = b'{"a": "' + b"{[" * 150 + b'"}'
    assert parse_object(flat) == {"a": "{[" * 150}
    assert parse_object(b'{"a": ' + b"[" * 199 + b"]" * 199 + b"}")["a"]
