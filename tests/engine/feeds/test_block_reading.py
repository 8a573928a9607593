"""A file whose messages are left in it is read a block at a time, its lines split by the native
core (`LineFacts.entries`, `LineReader.blocks`): it must give what the line-by-line reading gives
(`iter_raw_lines` and `anthropic_messages._read`, the reference), entry for entry, span for span,
error for error, wherever the blocks happen to cut the lines."""

from __future__ import annotations

import json
import os

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from compactlab.core import in_use, line_facts
from compactlab.errors import CompactlabError
from compactlab.engine.feeds import read_ahead
from compactlab.engine.feeds.read_ahead import LazyEntry, SourceFile, _lazy_entries
from compactlab.engine.measures import probes
from compactlab.engine.measures.baseline import BaselineBuilder, RawBaseline, stream_baseline
from compactlab.transcripts import anthropic_messages, reader
from compactlab.transcripts.messages import Entry, ResultFact, json_len, sized_placeholder
from compactlab.transcripts.model import TranscriptBuilder
from compactlab.transcripts.reader import LineReader
from helpers import asst, tr, tu, user, examples

pytestmark = pytest.mark.skipif(in_use() is None, reason="the lines are split natively only where the native core runs")

def _slots(entry: object) -> list[object]:
    """Every slot of an entry but its message (read after), in order: its facts, its sets, what
    changed, whether its message was read, where its line is."""
    names = [n for c in reversed(type(entry).__mro__) for n in getattr(c, "__slots__", ()) if n != "message"]
    # (where its results' contents stand, which only the blocks' reading places: checked on its own)
    # (an id set as it reads, whether made yet or not: None until first read)
    return [(n, getattr(entry, n.lstrip("_") if n in ("_use_set", "_result_set") else n)) if n != "_lazy"
            else (n, entry._lazy[1:4]) for n in names]  # type: ignore[attr-defined]


def _line_by_line(path: str, skip: bool) -> TranscriptBuilder:
    """The reference: every line read by itself (`iter_raw_lines`), its facts by `LineFacts.read`."""
    source = SourceFile(path)
    builder = TranscriptBuilder(path, anthropic_messages.NAME, keep=True)
    lines = LineReader(path, skip_bad_lines=skip, limit=source.size)

    def unread(*found: object) -> LazyEntry:
        offset, length = lines.span  # type: ignore[misc]
        return LazyEntry(*found, (source, offset, length, (), b""))  # type: ignore[arg-type]

    for _ in anthropic_messages._read(builder, lines, measure=True, messages=False, unread=unread):
        pass
    return builder


def _by_blocks(path: str, skip: bool) -> TranscriptBuilder:
    builder = TranscriptBuilder(path, anthropic_messages.NAME, keep=True)
    for _ in _lazy_entries(builder, SourceFile(path), skip):
        pass
    return builder


def _outcome(read, path: str, skip: bool) -> object:
    """What a reading gives: every entry's kind, facts, span and message, and what the builder kept;
    or the error it ends with."""
    try:
        b = read(path, skip)
    except CompactlabError as exc:
        return type(exc).__name__, str(exc)
    return [[(type(e).__name__, _slots(e), e.message) for e in b.entries],
            b.count, b.usage, b.metadata, b.model, b.system, b.skipped_lines, len(b.compactions)]


def _same(path: str, skip: bool) -> object:
    expected = _outcome(_line_by_line, path, skip)
    assert _outcome(_by_blocks, path, skip) == expected
    return expected


def _baselines(path: str, skip: bool) -> tuple[object, object]:
    """The raw baseline built as the blocks are read (`stream_baseline`), and `BaselineBuilder`'s
    (Python's) of the entries read line by line."""
    read = RawBaseline(probes_indexed=False)
    builder = TranscriptBuilder(path, anthropic_messages.NAME, keep=False)
    for _ in _lazy_entries(builder, SourceFile(path), skip, stream_baseline(in_use(), read)):
        pass
    reference = BaselineBuilder(keep=False, probes=False)
    for entry in _line_by_line(path, skip).entries:
        reference.add(entry)
    rows = [(b.messages, b.chars, b.violation_counts, b.refs, b.first_seen) for b in (read, reference.base)]
    return rows[0], rows[1]


_messages = st.sampled_from([
    user("Find the bug.\nIt is in\tthe cache."),
    user("   "),
    user([{"type": "text", "text": "é ü — 日本"}]),  # type: ignore[arg-type]
    asst("Reading it.", tu("t1", "read_file", path="src/a.py")),
    asst(tu("t2", "bash", command="ls")),
    {"role": "user", "content": [tr("t1", "1\tdef f():\n2\t    return 1\n"), tr("t2", [{"type": "text", "text": "x"}])]},
    {"role": "user", "content": [{"type": "text", "text": "then"}, tr("t1", "late")]},  # a misplaced result
])
_count = st.one_of(st.integers(0, 10_000), st.sampled_from([None, 0, 10**15 - 1, 10**15, -1, 5.0, 2.5, "12", "x", True,
                                                               [1], {"n": 1}]))
_usage = st.one_of(
    st.fixed_dictionaries({"input_tokens": st.integers(1, 10_000), "output_tokens": st.just(3)}),
    st.dictionaries(st.sampled_from(["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                                     "output_tokens", "cache_creation_1h_input_tokens", "service_tier"]), _count),
    st.fixed_dictionaries({"cache_creation_input_tokens": st.integers(0, 500),
                           "cache_creation": st.one_of(st.dictionaries(st.sampled_from(["ephemeral_1h_input_tokens",
                                                                                        "ephemeral_5m_input_tokens"]),
                                                                       _count), st.just(7))},
                          optional={"cache_creation_1h_input_tokens": _count}),
    st.sampled_from([{}, [1], 3, None]),
)
# (a reply as an API response object records: the native core reads its members where they are
# plain, Python where not; both must give what the line-by-line reading gives)
_replies = st.builds(lambda m, members: {**m, **members}, st.sampled_from([asst("Done."), user("hi")]),
                     st.fixed_dictionaries({}, optional={
                         "model": st.sampled_from(["claude-sonnet-4-5", "", 7, "m\u00e9\"x"]),
                         "usage": _usage, "timestamp": st.sampled_from(["2026-01-01T00:00:00Z", "", 12]),
                         "recorded_format": st.sampled_from(["codex", 1]), "id": st.just("msg_1")}))
_line = st.one_of(
    _messages.map(orjson.dumps),
    _replies.map(orjson.dumps),
    st.sampled_from([b"", b"   ", b"\t\r", b"\x0b"]),  # blank once its break is added
    st.sampled_from([b'{"role": "system", "content": "be brief"}', b'{"role":"user"', b"[1, 2]", b"not json",
                     b'{"role":"user","content":"a","role":"user"}', b'{"message": {"role": "user"}}']),
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.tuples(_line, st.sampled_from([b"\n", b"\r\n"])), max_size=30),
       last_break=st.booleans(), buffer=st.integers(1, 300), skip=st.booleans())
def test_a_file_read_a_block_at_a_time_is_read_as_line_by_line(lines, last_break, buffer, skip, tmp_path,
                                                               monkeypatch):
    monkeypatch.setattr(reader, "BUFFER", buffer)
    monkeypatch.setattr(reader, "BLOCK", buffer)  # (pieces of a few bytes: lines cut anywhere)
    data = b"".join(line + end for line, end in lines)
    if lines and not last_break:
        data = data[: -len(lines[-1][1])]
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    if type(_same(str(path), skip)) is list:  # (read to the end: its baseline too)
        read, reference = _baselines(str(path), skip)
        assert read == reference


def test_a_baseline_built_as_the_blocks_are_read_has_its_violations_and_references(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "BUFFER", 50)
    monkeypatch.setattr(reader, "BLOCK", 50)
    reply = {**asst("again", tu("t3", "read_file", path="src/a.py")), "usage": {"input_tokens": 5, "output_tokens": 1}}
    lines = [user("go"), asst(tu("t1", "read_file", path="src/a.py"), tu("t2", "bash")),
             {"role": "user", "content": [tr("t1", "1\tx")]}, reply, user("then"), asst("done")]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in lines))
    read, reference = _baselines(str(path), False)
    assert read == reference
    messages, chars, counts, refs, _ = read  # type: ignore[misc]
    assert messages == [1, 3, 5] and refs == {1: [(2, 0)]} and counts and all(counts.values())


@pytest.mark.parametrize("buffer", [1, 5, 64, 1 << 20])
def test_blank_lines_past_the_limit_end_the_reading_at_the_same_line(buffer, tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "BUFFER", buffer)
    monkeypatch.setattr(reader, "BLOCK", buffer)
    for module in (reader, read_ahead):
        monkeypatch.setattr(module, "MAX_BLANK_LINES", 3)
    path = tmp_path / "t.jsonl"
    message = orjson.dumps(user("hi")) + b"\n"
    path.write_bytes(message + b"\n \n\n" + message + b"\n\n\n \n" + message)
    assert _same(str(path), False) == ("InputError", f"{path}:9: more than 3 blank lines in a row: not a transcript")
    path.write_bytes(message + b"\n \n\n" + message * 2)  # as many as the limit: read
    assert len(_same(str(path), False)[0]) == 3  # type: ignore[index]


@pytest.mark.parametrize("buffer", [1000, 1 << 20])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_line_longer_than_a_line_may_be_is_named_by_its_number(buffer, where, tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "BUFFER", buffer)
    monkeypatch.setattr(reader, "BLOCK", buffer)
    monkeypatch.setenv("COMPACTLAB_MAX_LINE_MB", "0.01")  # 10,485 bytes
    short, long = orjson.dumps(user("hi")) + b"\n", orjson.dumps(user("x" * 11_000)) + b"\n"
    lines = {"first": [long, short], "middle": [short, short, long, short], "last": [short, long[:-1]]}[where]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines))
    number = lines.index(long if where != "last" else long[:-1]) + 1
    assert _same(str(path), True) == ("InputError", f"{path}:{number}: a line longer than 0 MiB (decompressed): "
                                                    "not a transcript line")


def test_a_file_that_grew_is_read_as_it_was_when_it_was_opened(tmp_path):
    path = tmp_path / "t.jsonl"
    first, more = orjson.dumps(user("one")) + b"\n", orjson.dumps(user("two"))
    path.write_bytes(first + more)
    source = SourceFile(str(path))
    path.write_bytes(first + more + b"\n" + orjson.dumps(user("three")) + b"\n")  # (after the size was taken)
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    entries = list(_lazy_entries(builder, source, False))
    assert [e.message["content"] for e in entries] == ["one", "two"] and builder.count == 2
    assert [e._lazy[1:3] for e in entries] == [(0, len(first)), (len(first), len(more))]


def _lines_in_python(monkeypatch) -> list[bytes]:
    """The raw lines ``anthropic_messages.line_entry`` reads from now on (each line Python reads)."""
    seen: list[bytes] = []
    line_entry = anthropic_messages.line_entry
    monkeypatch.setattr(anthropic_messages, "line_entry", lambda *a, **k: seen.append(a[3]) or line_entry(*a, **k))
    return seen


_PLAIN_REPLIES = [  # (each read natively: its members written plainly)
    {"usage": {"input_tokens": 3, "cache_creation_input_tokens": 100, "cache_read_input_tokens": None,
               "output_tokens": 7, "cache_creation": {"ephemeral_1h_input_tokens": 250}, "service_tier": "standard"},
     "model": "claude-sonnet-4-5", "timestamp": "2026-01-01T00:00:00Z", "id": "msg_1", "stop_reason": None},
    {"usage": {"cache_creation_input_tokens": 9, "cache_creation_1h_input_tokens": 4}, "model": ""},
    {"usage": {"cache_creation_input_tokens": 9, "cache_creation_1h_input_tokens": 4, "cache_creation": {}},
     "timestamp": ""},
    {"usage": {"cache_creation_input_tokens": 9, "cache_creation": {"ephemeral_1h_input_tokens": None}}},
    {"usage": {}, "model": "claude-opus-4-1", "recorded_format": "codex"},
    {"usage": [1], "model": 7, "recorded_format": 1, "timestamp": 3},
]


def test_a_replys_usage_read_natively_is_what_python_reads(tmp_path, monkeypatch):
    """A reply's usage, model, time and recorded format, read by the native core with its facts,
    are what the line-by-line reading makes of them (``anthropic_usage``: the 1-hour writes at most
    the writes, a count of null as 0, a model or time only where it is a string that is not empty);
    none of those lines reaches Python."""
    lines = [orjson.dumps({**asst("ok"), **members}) for members in _PLAIN_REPLIES]
    lines += [orjson.dumps({**user("hi"), "usage": {"input_tokens": 1.5}, "model": "m"})]  # (a user's usage: none)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    in_python = _lines_in_python(monkeypatch)
    builder = _by_blocks(str(path), False)
    assert in_python == [] and len(builder.usage) == 4 and builder.usage[0]["cache_creation_1h_input_tokens"] == 100
    _same(str(path), False)  # (the reference reads each line in Python: after the count)


def test_a_line_is_split_by_the_native_core_and_a_reply_with_usage_is_read_once(tmp_path, monkeypatch):
    """The usual lines never reach Python one by one, nor does a reply with its usage written
    plainly (an API response object's: its usage, model and time read by the native core); one
    whose count Python decides does, its facts read by the native core once."""
    reply = {**asst("ok"), "usage": {"input_tokens": 5, "output_tokens": 1}, "model": "claude-sonnet-4-5"}
    odd = {**asst("ok"), "usage": {"input_tokens": 6.0}, "model": "claude-opus-4-1"}
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in [user("a"), asst("b"), user("c"), reply, user("d")]))
    in_python = _lines_in_python(monkeypatch)
    reads = []
    facts = line_facts(ResultFact, True)

    class Counted:
        def read(self, raw, origin):
            reads.append(raw)
            return facts.read(raw, origin)

        def entries(self, *args):
            return facts.entries(*args)

    monkeypatch.setattr(read_ahead, "line_facts", lambda *_: Counted())
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    entries = list(_lazy_entries(builder, SourceFile(str(path)), False))
    assert [e.origin for e in entries] == [0, 1, 2, 3, 4] and all(type(e) is LazyEntry for e in entries)
    assert reads == [] and builder.usage[3]["input_tokens"] == 5 and builder.model == "claude-sonnet-4-5"
    assert in_python == []
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in [user("a"), reply, odd, user("d")]))
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    assert [e.origin for e in _lazy_entries(builder, SourceFile(str(path)), False)] == [0, 1, 2, 3]
    assert reads == [] and in_python == [orjson.dumps(odd) + b"\n"]  # (its facts as the block's reading read them)
    assert (builder.usage[1]["input_tokens"], builder.usage[2]["input_tokens"], builder.model) == \
        (5, 6, "claude-opus-4-1")


def test_a_line_too_long_is_not_read_past_the_limit(tmp_path, monkeypatch):
    """The blocks stop at a line longer than a line may be, holding no more of it than the limit and
    a piece: a file of one huge line (a bomb) is never read whole."""
    monkeypatch.setattr(reader, "BUFFER", 4096)
    monkeypatch.setattr(reader, "BLOCK", 4096)
    monkeypatch.setenv("COMPACTLAB_MAX_LINE_MB", "0.01")  # 10,485 bytes
    path = tmp_path / "t.jsonl"
    first = orjson.dumps(user("a")) + b"\n"
    path.write_bytes(first + b"x" * 100_000 + b"\n" + orjson.dumps(user("b")) + b"\n")
    blocks = list(LineReader(str(path)).blocks())
    assert [(at, start) for at, _, start, _ in blocks] == [(0, 0), (len(first), 0)]
    at, data, start, stop = blocks[-1]
    assert 10_485 < stop - start <= 10_485 + 4096 and data[start:stop] == b"x" * (stop - start)


_JSON_WAYS = {
    "orjson": orjson.dumps,
    "spaced": lambda m: json.dumps(m).encode(),  # (", " and ": ", and every non-ASCII character escaped)
    "escaped": lambda m: orjson.dumps(m).replace(b"/", b"\\/"),
    "crlf": lambda m: orjson.dumps(m) + b"\r",
}


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(_messages, min_size=1, max_size=6), way=st.sampled_from(sorted(_JSON_WAYS)))
def test_a_lazy_entrys_json_is_its_line_only_where_the_line_is_what_orjson_writes(messages, way, tmp_path):
    """Recall's last look reads an unread message's compact JSON from its line, not parsing it,
    where the line is what orjson writes of the message; any other line gives the same text, from
    the message."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(_JSON_WAYS[way](m) + b"\n" for m in messages))
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    entries = list(_lazy_entries(builder, SourceFile(str(path)), False))
    for entry, message in zip(entries, messages, strict=True):
        assert entry.json_text() == orjson.dumps(message).decode()
        same = orjson.dumps(message) == _JSON_WAYS[way](message)
        assert (entry._message is None) == same  # (read only where the line is not that text)
    last = entries[-1]
    if last.results and last.results[0].json_size >= 2:  # (changed since it was read, its size the same)
        changed = last.with_result_content(0, "y" * (last.results[0].json_size - 2))
        assert changed.chars == last.chars and changed.json_text() == orjson.dumps(changed.message).decode()


_reply_members = st.lists(st.sampled_from([("id", "msg_1"), ("type", "message"), ("model", "claude-sonnet-4-5"),
                                            ("stop_reason", None), ("usage", {"input_tokens": 3, "x": 1.5}),
                                            ("role", "assistant"), ("content", "first"), ("content", [1.5])]),
                           min_size=1, max_size=5)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=_messages, members=_reply_members, first=st.booleans(), way=st.sampled_from(sorted(_JSON_WAYS)))
@example(message=asst("Done."), members=[("id", "m"), ("content", "first")], first=False, way="orjson")  # (twice)
@example(message=asst("Done."), members=[("id", "m")], first=True, way="orjson")  # (content before role)
def test_a_replys_message_is_read_from_its_line_without_its_other_members(message, members, first, way, tmp_path):
    """A reply recorded as an API response object (``id``, ``model``, ``usage``... beside its role
    and content): recall's native check reads the message's compact JSON (``message_of``'s role and
    content, as orjson writes them) from the line, leaving it unread, where the line wrote both as
    orjson does and each once; else it leaves it to Python (None), which gives the same text."""
    role, content = ("role", message["role"]), ("content", message["content"])
    pairs = [*members, content, role] if first else [role, content, *members]
    path = tmp_path / "t.jsonl"
    text = b"{" + b",".join(orjson.dumps(k) + b":" + orjson.dumps(v) for k, v in pairs) + b"}"
    if way != "orjson":  # (written another way: the members' values as that way writes them)
        text = _JSON_WAYS[way](orjson.loads(text)) if len({k for k, _ in pairs}) == len(pairs) else text
    path.write_bytes(text + b"\n")
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    entries = list(_lazy_entries(builder, SourceFile(str(path)), True))
    if not entries or type(entries[0]) is not LazyEntry:
        return  # (a line Python reads, or a bad one: no message left in the file)
    (lazy,) = entries
    wanted = orjson.dumps(anthropic_messages.message_of(orjson.loads(text))).decode()
    natively = probes.ProbeMemo(in_use()).native.native_text(lazy)
    keys = [k for k, _ in pairs]
    once = keys.count("role") == keys.count("content") == 1
    assert natively in (None, wanted)  # (another way may write the two values as orjson does: read too)
    as_orjson = way in ("orjson", "crlf") or all(_JSON_WAYS[way](v) == orjson.dumps(v) for v in message.values())
    assert (natively is not None) == (once and as_orjson)
    assert lazy._message is None  # (nothing of it parsed)
    assert lazy.json_text() == wanted


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\ufdd0"), max_size=12)
_content = st.one_of(st.none(), _text, st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text}),
                                                max_size=2))
_block = st.one_of(
    st.builds(lambda i, c: tr(f"t{i}", c), st.integers(0, 3), _content),
    st.builds(lambda i: {"type": "tool_result", "tool_use_id": f"n{i}"}, st.integers(0, 3)),  # (no content)
    st.builds(lambda t: {"type": "text", "text": t}, _text),
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blocks=st.lists(_block, min_size=1, max_size=5), way=st.sampled_from(sorted(_JSON_WAYS)),
       changes=st.lists(st.tuples(st.integers(0, 4), _content), max_size=4))
# (the line's way only inside a content that is changed: the changed line is what orjson writes)
@example(blocks=[tr("t0", None), tr("t0", [{"type": "text", "text": "/"}])], way="escaped", changes=[(1, None)])
def test_a_lazy_entrys_results_and_changed_json_are_read_where_its_line_placed_them(blocks, way, changes, tmp_path):
    """Recall reads an unread message's tool results from where its facts placed them on its line,
    and a changed one's compact JSON as its line with the changed contents written in their
    places: the message is not read where the line is what orjson writes of it, and what is read
    is what the message gives, whatever the line (Entry's, the reference)."""
    from compactlab.transcripts.messages import SIZED_MARK, make_entry

    message = {"role": "user", "content": blocks}
    path = tmp_path / "t.jsonl"
    path.write_bytes(_JSON_WAYS[way](message) + b"\n")
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    (lazy,) = _lazy_entries(builder, SourceFile(str(path)), False)
    eager = make_entry(message, 0)
    held = [f.block for f in eager.results if "content" in blocks[f.block]]
    assert [b for b, _, _ in read_ahead.placed(lazy._lazy[4])] == held  # (placed: each result with content, in order)
    for block in held:
        assert lazy.block_content(block) == eager.block_content(block)
    # (read alone where "content": stands before it, as orjson writes it: not where ", " and ": " do)
    assert (lazy._message is None) == (way != "spaced" or not held)
    changed = set()
    for k, new in changes:
        if k < len(eager.results):
            eager, lazy = eager.with_result_content(k, new), lazy.with_result_content(k, new)
            changed.add(eager.results[k].block)
    # recall's native check reads the same texts from the line where the message is unread there
    # (None: it leaves the message to Python), the Python functions it was given the reference
    check = probes.ProbeMemo(in_use()).native
    # (what orjson writes where the line is written from the message but for the changed contents,
    # written in their places as orjson writes them: the line's way shows only outside those)
    kept = {**message, "content": [{**b, "content": None} if i in changed else b for i, b in enumerate(blocks)]}
    written = _JSON_WAYS[way](kept) == orjson.dumps(kept)
    unread = getattr(lazy, "_message", 0) is None
    plain = type(lazy) is Entry  # (a result without content changed: the message read, a plain copy made)
    changed_str = all(type(eager.block_content(b)) is str for b in changed)
    natively = check.native_text(lazy)
    assert natively in (None, probes._whole_text(eager))
    assert (natively is not None) == (plain or (unread and written and set(held) >= changed and changed_str))
    edited = check.native_text(lazy, edited=True)
    assert edited in (None, probes._text(eager)) and (edited is not None) == (plain or (unread and changed_str))
    # (a plain Entry's: what orjson writes of its message, its changed contents', and a string result's text)
    assert check.native_text(eager) == probes._whole_text(eager)
    assert check.native_text(eager, edited=True) == probes._text(eager)
    for block in held:  # (a message in hand: every result's text, a list's and an absent one's too)
        assert check.native_text(eager, block) == probes._block_text(eager, block)
    for block in held:
        text = check.native_text(lazy, block)
        assert text in (None, probes._block_text(eager, block))
        # (in hand: a plain copy's, or a message read; unread: a changed result's text its last
        # patch, a string; an unchanged one's where "content": stands before it on the line, a
        # string or a list)
        content = eager.block_content(block)
        assert (text is not None) == (plain or not unread or (
            type(content) is str if block in changed else (way != "spaced" and type(content) in (str, list))))
    assert lazy.json_text() == orjson.dumps(eager.message).decode()
    # (unread where the line is what orjson writes and every changed result had content to replace)
    assert (getattr(lazy, "_message", 0) is None) == (written and set(held) >= changed)
    assert [lazy.block_content(b) for b in held] == [eager.block_content(b) for b in held]


def test_an_unread_messages_line_read_natively_cut_short_or_unreadable_is_left_to_python(tmp_path):
    """The native check reads an unread message's line by its file's descriptor, as
    ``SourceFile._line_at`` does with ``os.pread``: the same text, cut from a piece of the file it
    read once for the lines in it (a line of that piece is read as it was then); a file cut short
    since is left to Python (None) by a check that had not read that piece, and Python says so; a
    descriptor that reads nothing is the same ``OSError`` on both."""
    import errno
    import os

    message = {"role": "user", "content": [tr("t0", "some output " * 40), tr("t1", "more")]}
    second = {"role": "user", "content": [tr("t2", "later")]}
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(message) + b"\n" + orjson.dumps(second) + b"\n")
    source = SourceFile(str(path))
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    lazy, later = _lazy_entries(builder, source, False)
    source.recent = None  # (the reader's blocks let go: each line is read from the file, in pieces)
    check = probes.ProbeMemo(in_use()).native
    assert check.native_text(lazy) == orjson.dumps(message).decode() == lazy.json_text()
    assert check.native_text(lazy, 1) == "more"
    os.truncate(path, 100)  # (cut short)
    assert check.native_text(later) == orjson.dumps(second).decode()  # (its piece read before)
    fresh = probes.ProbeMemo(in_use()).native
    assert fresh.native_text(lazy) is None and fresh.native_text(lazy, 1) is None and fresh.native_text(later) is None
    with pytest.raises(CompactlabError, match="cut short"):
        lazy.json_text()
    with open(tmp_path / "w", "wb") as sink:  # (a descriptor open for writing only: pread fails, EBADF)
        source.fd = sink.fileno()
        with pytest.raises(OSError) as native:
            probes.ProbeMemo(in_use()).native.native_text(lazy)
        with pytest.raises(OSError) as python:
            source.text_at(0, 10)
    assert native.value.errno == python.value.errno == errno.EBADF
    assert lazy._message is None  # (nothing of it was parsed)


def test_the_lines_recall_reads_again_are_cut_from_the_blocks_the_reader_read_last(tmp_path, monkeypatch):
    """The reader keeps the blocks it read last (a ``SourceFile``'s ``recent``: the newest about
    2 MiB of them, the newest always), and the native check cuts the lines it reads again from
    them with no read of the file: the same texts as Python's, as they were when read (the file
    cut short since, or its descriptor one that reads nothing). A line of a block let go is read
    from the file."""
    import errno

    monkeypatch.setattr(reader, "BLOCK", 1 << 16)
    msgs = [user("start")] + [user(f"{i} " + "output line\n" * 2_000) for i in range(300)]
    path = tmp_path / "t.jsonl"
    data = b"".join(orjson.dumps(m) + b"\n" for m in msgs)
    path.write_bytes(data)
    source = SourceFile(str(path))
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    entries = list(_lazy_entries(builder, source, False))
    spans = source.recent.spans()
    # (the newest blocks, about 2 MiB, each read from where the last whole line of the one before
    # it ended)
    assert spans[-1][0] + spans[-1][1] == len(data) and len(spans) > 4
    assert all(a < b <= a + n and data[b - 1:b] == b"\n" for (a, n), (b, _) in zip(spans, spans[1:]))
    assert (2 << 20) - (1 << 16) < sum(n for _, n in spans) <= 2 << 20
    first_held = spans[0][0]
    held = [e for e in entries if e._lazy[1] >= first_held]
    gone = [e for e in entries if e._lazy[1] + e._lazy[2] <= first_held]
    assert held and gone
    texts = {id(e): e.json_text() for e in held + gone[-2:]}
    os.truncate(path, 10)
    with open(tmp_path / "w", "wb") as sink:  # (a descriptor that reads nothing: EBADF)
        source.fd = sink.fileno()
        check = probes.ProbeMemo(in_use()).native
        assert [check.native_text(e) for e in held] == [texts[id(e)] for e in held]
        with pytest.raises(OSError) as let_go:
            check.native_text(gone[-1])
    assert let_go.value.errno == errno.EBADF
    assert all(e._message is None for e in held)  # (nothing of them was parsed)


class _Traced(LazyEntry):
    """A LazyEntry whose ``has_text`` is a property, not the slot: its entries are made by name."""

    __slots__ = ("_seen",)

    @property  # type: ignore[override]
    def has_text(self) -> bool:
        return self._seen

    @has_text.setter
    def has_text(self, value: bool) -> None:
        self._seen = value


def test_entries_are_filled_through_their_slots_or_by_name_where_one_is_not_a_slot(tmp_path):
    """``LineFacts.entries`` fills a LazyEntry's slots through their descriptors; a class whose
    member is not a slot (a property) is filled by name, through it, as ``setattr`` fills it: the
    same facts either way, whichever class it was given first."""
    from compactlab.transcripts.messages import NO_IDS

    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in [
        user("hi"), asst("ok", tu("t0", command="ls")), {"role": "user", "content": [tr("t0", "a.py")]},
        asst("done")]))
    source = SourceFile(str(path))
    for order in ([LazyEntry, _Traced], [_Traced, LazyEntry]):
        facts = line_facts(ResultFact, True)
        made: dict[type, list[object]] = {}
        for cls in order:
            builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
            reader = LineReader(str(path), skip_bad_lines=False, limit=source.size)
            entries: list[object] = []
            for at, block, i, stop in reader.blocks():
                got = facts.entries(block, i, stop, at, builder.count + len(entries), 0, (1 << 20, 100),
                                    (cls, NO_IDS), source, None)
                entries += got[0]
            made[cls] = entries
        plain, traced = made[LazyEntry], made[_Traced]
        assert len(plain) == len(traced) == 4 and all(type(e) is _Traced for e in traced)
        assert [e._seen for e in traced] == [e.has_text for e in plain] == [True, True, False, True]
        assert [_slots(e)[:-1] for e in traced] == [_slots(e) for e in plain]  # (its own slot aside)


class _Dicted(LazyEntry):
    """A LazyEntry whose objects have a ``__dict__`` (no slots of its own): made by calling it."""


class _OwnNew(LazyEntry):
    """A LazyEntry with a ``__new__`` of its own, which counts the objects it makes."""

    __slots__ = ()
    made = 0

    def __new__(cls) -> _OwnNew:
        _OwnNew.made += 1
        return super().__new__(cls)


class _Abstract(LazyEntry):
    """A LazyEntry left abstract: ``object.__new__`` refuses to make one."""

    __slots__ = ()


_Abstract.__abstractmethods__ = frozenset({"summarise"})  # type: ignore[attr-defined]


def _entries_of(path: str, cls: type) -> list[object]:
    """The entries of ``path`` made of ``cls`` by a ``LineFacts`` given it first."""
    from compactlab.transcripts.messages import NO_IDS

    source = SourceFile(path)
    facts, entries = line_facts(ResultFact, True), []
    builder = TranscriptBuilder(path, anthropic_messages.NAME, keep=True)
    for at, block, i, stop in LineReader(path, skip_bad_lines=False, limit=source.size).blocks():
        entries += facts.entries(block, i, stop, at, builder.count + len(entries), 0, (1 << 20, 100), (cls, NO_IDS),
                                 source, None)[0]
    return entries


def test_entries_and_result_facts_are_objects_of_their_classes_made_as_their_new_makes_them(tmp_path):
    """The native reader makes a LazyEntry as ``object.__new__`` makes it and a result's fact as
    ``tuple.__new__`` makes a ``ResultFact`` (``instances.rs``: its class's own allocation, not a
    call): objects of exactly their class, the facts named tuples in every way Python's are (fields,
    repr, ``_replace``, hash, pickling, tracked by the collector), micro's copies too. A class whose
    objects have a ``__dict__`` or that has a ``__new__`` of its own is called as before, and an
    abstract one is refused as ``object.__new__`` refuses it."""
    import gc
    import pickle

    from compactlab.engine.keeping import entry_copies

    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in [
        user("hi"), asst("ok", tu("t0", command="ls"), tu("t1", command="pwd")),
        {"role": "user", "content": [tr("t0", "a.py"), tr("t1", "/home")]}, asst("done")]))
    plain = _entries_of(str(path), LazyEntry)
    assert [type(e) for e in plain] == [LazyEntry] * 4
    facts = [r for e in plain for r in e.results]  # type: ignore[attr-defined]
    copy = entry_copies(in_use()).with_result(plain[2], 1, "[cleared]")
    assert type(copy) is LazyEntry
    facts.append(copy.results[1])
    assert len(facts) == 3 and all(type(r) is ResultFact for r in facts)
    for r in facts:
        python = ResultFact(*r)
        assert r == python and repr(r) == repr(python) and hash(r) == hash(python) and r._fields == python._fields
        assert r._replace(size=0) == python._replace(size=0) and pickle.loads(pickle.dumps(r)) == python
        assert gc.is_tracked(r) == gc.is_tracked(python)
    assert copy.results[1].size == len("[cleared]") and copy.results[0] is plain[2].results[0]  # type: ignore[attr-defined]
    for cls in (_Dicted, _OwnNew):
        before = _OwnNew.made
        made = _entries_of(str(path), cls)
        # (a class without slots of its own names its parent's again: each slot compared once)
        assert [type(e) for e in made] == [cls] * 4
        assert [dict(_slots(e)) for e in made] == [dict(_slots(e)) for e in plain]
        assert _OwnNew.made - before == (4 if cls is _OwnNew else 0)
    with pytest.raises(AttributeError):  # (an _OwnNew has no __dict__, a _Dicted has)
        made[0].note = "a dict of its own"  # type: ignore[attr-defined]
    dicted = _entries_of(str(path), _Dicted)
    dicted[0].note = "a dict of its own"  # type: ignore[attr-defined]
    assert dicted[0].__dict__ == {"note": "a dict of its own"}
    with pytest.raises(TypeError, match="abstract"):
        _entries_of(str(path), _Abstract)


def test_slots_read_and_written_in_place_hold_their_objects_as_the_descriptors_do(tmp_path):
    """The native core reads and writes an entry's slots where its class holds them (``members.rs``'s
    ``placed``: found once a class, by writing through the slot's descriptor): the same objects as
    Python reads, each referenced as often after thousands of reads and of micro's copies made and
    let go as before (a reference taken or let go too many, a wrong place, would show), and an
    empty slot says what its descriptor says."""
    import gc
    import sys

    from compactlab.engine.keeping import entry_copies

    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in [
        user("hi"), asst("ok", tu("t0", command="ls"), tu("t1", command="pwd")),
        {"role": "user", "content": [tr("t0", "a.py"), tr("t1", "/home")]}, asst("done")]))
    entries = _entries_of(str(path), LazyEntry)
    # (the objects of the entries' own: an int, a bool or a short string is shared with the rest of
    # the process, whose references come and go)
    held = [v for e in entries for _, v in _slots(e) if isinstance(v, (tuple, frozenset)) and v]
    held += [r for e in entries for r in e.results]  # type: ignore[attr-defined]
    counts = [sys.getrefcount(v) for v in held]
    copies = entry_copies(in_use())
    for _ in range(2000):
        copy = copies.with_result(entries[2], 1, "[cleared]")
        assert copy.results[0] is entries[2].results[0] and copy.role is entries[2].role  # type: ignore[attr-defined]
    del copy
    gc.collect()
    assert [sys.getrefcount(v) for v in held] == counts
    empty = LazyEntry.__new__(LazyEntry)  # (every slot empty)
    said = set()
    for name, _ in _slots(entries[0]):
        try:
            getattr(empty, name)
        except AttributeError as exc:
            said.add(str(exc))
    with pytest.raises(AttributeError) as native:
        copies.with_result(empty, 0, "[cleared]")
    assert str(native.value) in said


_placeholder = st.one_of(
    _text, st.sampled_from(["[Old tool result content cleared]", 'said "no"\n\t\\', "\x00\x1f\x7f é 😀",
                            sized_placeholder("TOOL", 40)]))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blocks=st.lists(_block, min_size=1, max_size=5), way=st.sampled_from(sorted(_JSON_WAYS)),
       changes=st.lists(st.tuples(st.integers(0, 4), _placeholder), min_size=1, max_size=4), read=st.booleans())
def test_micros_copy_of_an_unread_message_is_made_natively_as_python_makes_it(blocks, way, changes, read, tmp_path):
    """Micro's copy of a message left in its file, a result's content replaced by a placeholder
    (``EntryCopies``), is what ``LazyEntry.with_result_content`` makes (the reference), slot for slot,
    JSON and message — copies of copies too; where it is not made natively (the message read, a
    result not measured when read, a sized placeholder, a plain ``Entry``) it says so (None) and
    Python makes it."""
    from compactlab.engine.keeping import entry_copies
    from compactlab.transcripts.messages import SIZED_MARK, Entry, make_entry

    path = tmp_path / "t.jsonl"
    path.write_bytes(_JSON_WAYS[way]({"role": "user", "content": blocks}) + b"\n")
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    (entry,) = _lazy_entries(builder, SourceFile(str(path)), False)
    if read:
        entry.message  # noqa: B018 (read: a copy is Python's)
    copies = entry_copies(in_use())
    python = entry  # (the reference's copies, each of its last)
    for k, text in changes:
        if k >= len(entry.results):
            continue
        python = python.with_result_content(k, text)
        native = copies.with_result(entry, k, text)
        unread = type(entry) is LazyEntry and entry._message is None
        # (a copy Python made may be a plain Entry: made natively where its block has a content)
        in_hand = type(entry) is Entry and "content" in entry.message["content"][entry.results[k].block]
        assert (native is not None) == ((unread or in_hand) and entry.results[k].json_size >= 0
                                        and SIZED_MARK not in text)
        if native is None:
            entry = entry.with_result_content(k, text)
            continue
        assert type(native) is type(python)
        assert not unread or (native._message is None and native._lazy == python._lazy)
        assert _slots(native) == _slots(python) and native.json_text() == python.json_text()
        entry = native
    assert entry.message == python.message and _slots(entry) == _slots(python)
    assert copies.with_result(make_entry({"role": "user", "content": blocks}, 0), 0, "x") is None  # (unmeasured)


@settings(max_examples=examples(150), deadline=None)
@given(blocks=st.lists(_block, min_size=1, max_size=5),
       changes=st.lists(st.tuples(st.integers(0, 4), _placeholder), min_size=1, max_size=4))
@example(blocks=[tr("t0", None), tr("t0", None)], changes=[(0, "\ufdd0[TOOL len=40]"), (1, "")])  # (a placeholder
# Python put in, then a copy made natively: its length counts the placeholder as its N)
def test_micros_copy_of_a_plain_entry_is_made_natively_as_python_makes_it(blocks, changes):
    """Micro's copy of a plain ``Entry`` (a message loaded or streamed with its content), a result's
    content replaced (``EntryCopies``), is what ``Entry.with_result_content`` makes (the reference):
    every slot, the message (a new one, its content list and the result's block new objects, the
    original's untouched), copies of copies too; where it is not made natively (a result not
    measured when read, a sized placeholder, a block without content, content that is not a plain
    list of plain dicts) it says so (None) and Python makes it."""
    import copy as copying

    from compactlab.engine.keeping import entry_copies
    from compactlab.transcripts.messages import SIZED_MARK, Entry, build_entry, json_len

    message = {"role": "user", "content": blocks}
    kept = copying.deepcopy(message)
    entry = build_entry(message, 3, measure=True)
    assert isinstance(entry, Entry)
    copies, python = entry_copies(in_use()), entry
    for k, text in changes:
        if k >= len(entry.results):
            continue
        python = python.with_result_content(k, text)
        native = copies.with_result(entry, k, text)
        block = entry.message["content"][entry.results[k].block]
        assert (native is not None) == (SIZED_MARK not in text and "content" in block
                                        and entry.results[k].json_size >= 0)
        if native is None:
            entry = entry.with_result_content(k, text)
            continue
        assert type(native) is Entry and native.message == python.message
        assert native.message is not entry.message and native.message["content"] is not entry.message["content"]
        # (its length is the compact JSON's, a sized placeholder an earlier change left counted as its N)
        assert _slots(native) == _slots(python) and native.chars == json_len(native.message)
        entry = native
    assert entry.message == python.message and _slots(entry) == _slots(python)
    assert message == kept  # (the original's message never changed)
    unmeasured = build_entry({"role": "user", "content": blocks}, 0, measure=False)
    assert isinstance(unmeasured, Entry) and copies.with_result(unmeasured, 0, "x") is None
    odd = build_entry({"role": "user", "content": blocks}, 0, measure=True)
    assert isinstance(odd, Entry)
    odd.message = {**odd.message, "content": tuple(odd.message["content"])}  # (not a plain list)
    assert copies.with_result(odd, 0, "x") is None


def test_micros_copies_of_a_recorded_message_are_made_natively(tmp_path):
    """A tool-result message as a harness records it: each of its results replaced in turn, by a
    copy made natively each time (never read), the last one's message Python's."""
    from compactlab.engine.keeping import entry_copies

    message = user([tr("t1", "line one\nline \"two\""), tr("t2", "é" * 50)])
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(message) + b"\n")
    (entry,) = _lazy_entries(TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True),
                             SourceFile(str(path)), False)
    copies, python = entry_copies(in_use()), entry
    for k in (0, 1, 0):
        entry, python = copies.with_result(entry, k, f"[cleared {k}]"), python.with_result_content(k, f"[cleared {k}]")
        assert entry is not None and entry._message is None and _slots(entry) == _slots(python)
    assert entry.changed == {0, 1} and entry.chars == len(entry.json_text()) == python.chars
    assert entry.message == python.message


def test_a_plain_entrys_edited_text_is_made_natively_as_python_makes_it():
    """Recall's native check makes a plain Entry's edited text itself: a message a policy made and
    an assistant message whole, a tool-result message's changed blocks (a result's content, or the
    whole block that is no result) as orjson writes each, joined by NUL; what it cannot read as the
    reference does (a content that is no list, a changed block that is not there) is left to
    Python (None), the Python function the reference."""
    from compactlab.transcripts.messages import make_entry

    check = probes.ProbeMemo(in_use()).native
    made = make_entry(user("a summary \u2028 \"quoted\" \x01"), -1)
    said = make_entry(asst(tu("u1", "Read", file_path="/a"), "ok"), 3)
    blocks = [tr("u1", "first\ttab"), tr("u2", [{"type": "text", "text": "x/y"}]), tr("u3", None),
              {"type": "tool_result", "tool_use_id": "u4"}, {"type": "text", "text": "tail\n"}]
    results = make_entry({"role": "user", "content": blocks}, 4)
    results.changed = frozenset({4, 0, 1, 2, 3})
    for entry in (made, said, results):
        assert check.native_text(entry, edited=True) == probes._text(entry)
    assert probes._text(results).split("\0") == ['"first\\ttab"', '[{"type":"text","text":"x/y"}]', "null",
                                                 '{"type":"tool_result","tool_use_id":"u4"}',
                                                 '{"type":"text","text":"tail\\n"}']
    unchanged = make_entry(results.message, 5)
    assert check.native_text(unchanged, edited=True) == probes._text(unchanged) == ""
    odd = make_entry(user("text"), 6)
    odd.changed = frozenset({0})  # (a string content: Python's to read)
    assert check.native_text(odd, edited=True) is None
    gone = make_entry(results.message, 7)
    gone.changed = frozenset({9})  # (no such block: Python's to say)
    assert check.native_text(gone, edited=True) is None


def test_a_line_as_long_as_its_facts_say_but_holding_a_sized_placeholder_is_written_from_its_message(tmp_path):
    """A sized placeholder is counted as its N: a line padded to that length is no message's
    compact JSON, and is not taken for one."""
    message = user(sized_placeholder("PERSISTED", 60))
    compact = orjson.dumps(message)
    pad = json_len(message) - len(compact.decode())
    assert pad > 0
    line = b"{" + b" " * pad + compact[1:]
    path = tmp_path / "t.jsonl"
    path.write_bytes(line + b"\n")
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    (entry,) = _lazy_entries(builder, SourceFile(str(path)), False)
    assert len(line.decode()) == entry.chars and entry.json_text() == compact.decode()


def test_a_line_read_again_for_its_json_that_is_no_longer_there_is_an_error_that_says_so(tmp_path):
    path = tmp_path / "t.jsonl"
    first, second = orjson.dumps(user("one")) + b"\n", orjson.dumps(user("two")) + b"\n"
    path.write_bytes(first + second)
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    one, two = _lazy_entries(builder, SourceFile(str(path)), False)
    with open(path, "r+b") as f:  # (the same length, no longer text)
        f.seek(len(first) + 2)
        f.write(b"\xff")
        f.truncate(len(first) + len(second) - 3)
    with pytest.raises(CompactlabError, match="cut short while it was replayed"):
        two.json_text()
    path.write_bytes(first[:2] + b"\xff" + first[3:] + second)
    with pytest.raises(CompactlabError, match="the file changed while it was replayed"):
        one.json_text()


def test_a_result_read_again_from_its_place_that_is_no_longer_there_is_an_error_that_says_so(tmp_path):
    """A result's content read alone from where its line placed it: a file rewritten meanwhile is
    said to have changed (a value that no longer parses, bytes that are no longer text), or, where
    no "content": stands there any more, the message is read (which says so where it is no longer
    a message, or not its role: ``message_at``)."""
    path = tmp_path / "t.jsonl"
    line = orjson.dumps({"role": "user", "content": [tr("t1", "first"), tr("t2", "second")]}) + b"\n"
    path.write_bytes(line)

    def rewritten(old: bytes, new: bytes) -> LazyEntry:
        path.write_bytes(line)
        builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
        (entry,) = _lazy_entries(builder, SourceFile(str(path)), False)
        assert len(old) == len(new)
        path.write_bytes(line.replace(old, new))  # (in place: the same length)
        return entry

    with pytest.raises(CompactlabError, match="the file changed while it was replayed"):
        rewritten(b'"first"', b'"first ').block_content(0)
    moved = rewritten(b'"content":"first"', b'"cxntent":"first"')  # (no "content": there: the message is read,
    assert moved.block_content(0) is None and moved._message is not None  # as before results were placed)
    assert rewritten(b'"second"', b'"secxnd"').block_content(0) == "first"  # (another result: not read)
    with pytest.raises(CompactlabError, match="the file changed while it was replayed"):
        rewritten(b'"first"', b'"fir\xffst"'[:7]).with_result_content(1, "x").json_text()


#: the characters Python's `str.strip` strips that Rust's `trim` keeps, and ones both keep
_SPACES = st.text(st.sampled_from(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2028\u3000\u200b"), max_size=3)
_quoted = st.builds(lambda a, t, b: a + t + b, _SPACES, _text, _SPACES)
_quote_block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _quoted),
    st.builds(lambda t: {"type": "thinking", "text": t}, _quoted),  # (a text not of a text block)
    st.builds(lambda t: {"text": t}, _quoted),  # (no type)
    st.builds(lambda t: {"type": "image", "text": t}, _quoted),
    st.builds(lambda i, c: tu(f"u{i}", "bash", command=c), st.integers(0, 3), _text),
    st.builds(lambda i, c: tr(f"t{i}", c), st.integers(0, 3), _content),
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(role=st.sampled_from(["user", "assistant"]),
       content=st.one_of(_quoted, st.lists(_quote_block, max_size=4)),
       usage=st.booleans(), way=st.sampled_from(sorted(_JSON_WAYS)), read=st.booleans())
@example(role="user", content="\x1c text \u3000", usage=False, way="orjson", read=False)
def test_what_the_stub_quotes_of_a_message_is_read_natively_as_python_reads_it(role, content, usage, way, read,
                                                                               tmp_path):
    """What the stub summary quotes of a message (`stub.stripped_text`, the reference) is read by the
    native core from its line where it is left unread there, from its message where it is in hand
    (a plain Entry's, or one read already): its text blocks' texts joined, stripped as Python
    strips them (not as Rust's `trim`). None only where Python reads it."""
    from compactlab.summarizers.stub import stripped_text
    from compactlab.transcripts.messages import make_entry

    message: dict = {"role": role, "content": content}
    line = {**message, "usage": {"input_tokens": 3, "output_tokens": 1}, "model": "m"} if usage else message
    path = tmp_path / "t.jsonl"
    path.write_bytes(_JSON_WAYS[way](line) + b"\n")
    builder = TranscriptBuilder(str(path), anthropic_messages.NAME, keep=True)
    entries = list(_lazy_entries(builder, SourceFile(str(path)), True))
    if not entries:
        return  # (a line the loader calls bad: no message to quote)
    (lazy,) = entries
    check = probes.ProbeMemo(in_use()).native
    wanted = stripped_text(make_entry(message, 0))
    assert check.native_text(make_entry(message, 0), stripped=True) == wanted
    unread = getattr(lazy, "_message", 0) is None
    if read and unread:
        lazy.message  # noqa: B018 (read: in hand now)
    natively = check.native_text(lazy, stripped=True)
    assert natively in (None, wanted)
    # (left to Python only where its line is not one this reading takes: another way of writing it
    # than "content": at the place, or a line Python read whole)
    assert natively is not None or not unread or read
    assert stripped_text(lazy) == wanted


@settings(max_examples=examples(100), deadline=None)
@given(made=st.lists(st.tuples(st.sampled_from(["user", "assistant"]),
                               st.one_of(_quoted, st.just(""), st.builds(lambda t: t + "\ufdd0[img len=9]", _text)),
                               st.sampled_from(["summary", "snip"]), st.integers(0, 50)), min_size=1, max_size=4))
def test_a_message_a_layer_makes_is_made_natively_as_python_makes_it(made):
    """A message the native loop makes (a summary, its acknowledgement, snip's placeholder) is what
    ``RunEnv.new_entry`` makes of it (the reference): every slot of its ``Entry``, its message, the
    run's next origin and its ledger's notes of what made it and when; Python makes one whose
    content holds a sized placeholder, or where ``new_entry`` is not ``RunEnv``'s own."""
    from compactlab.engine.layers.base import RunEnv
    from compactlab.summarizers.stub import StubSummarizer
    from compactlab.transcripts.messages import SIZED_MARK

    native_env, python_env = RunEnv(summarizer=StubSummarizer()), RunEnv(summarizer=StubSummarizer())
    for role, content, by, call in made:
        native = in_use().made_entry(native_env.new_entry, {"role": role, "content": content}, by, call)
        if native is None:
            assert SIZED_MARK in content
            native = native_env.new_entry({"role": role, "content": content}, by, call)
        python = python_env.new_entry({"role": role, "content": content}, by, call)
        assert type(native) is Entry and native.message == python.message and _slots(native) == _slots(python)
    assert native_env._next_origin == python_env._next_origin
    assert (native_env.ledger.made_by, native_env.ledger.made_at) == (python_env.ledger.made_by,
                                                                      python_env.ledger.made_at)
    assert in_use().made_entry(lambda message, by, call: None, {"role": "user", "content": "x"}, "snip", 0) is None


def test_a_line_read_natively_leaves_its_id_sets_to_be_made_when_read(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in [user("go"), asst(tu("a", "Read"), tu("b", "Grep")),
                                                       {"role": "user", "content": [tr("b", "x"), tr("a", "y")]}]) + "\n")
    builder = TranscriptBuilder(str(path), "test")
    entries = list(_lazy_entries(builder, SourceFile(str(path)), False))
    assert all(type(e) is LazyEntry and e._use_set is None and e._result_set is None for e in entries)
    assert [(e.use_set, e.result_set) for e in entries] == [(set(), set()), ({"a", "b"}, set()), (set(), {"a", "b"})]
    assert entries[1]._use_set == {"a", "b"}  # (kept once made)
