"""A tool result's content replaced natively (``native/src/entries.rs``: what micro does to each
result it clears in the native loop) against ``Entry.with_result_content`` and ``LazyEntry``'s, the
references: the same kind of entry, message (to the byte of its JSON), length, result facts and
changed blocks, on generated messages and texts (escapes, text beyond ASCII, sized placeholders,
numbers, a content that is a list or absent, a float the reference measures)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlab import core
from compactlab.engine.feeds import read_ahead
from compactlab.transcripts.messages import Entry, build_entry, json_len, make_entry, sized_placeholder
from helpers import tr, write_jsonl

NATIVE = core.native_module()
pytestmark = pytest.mark.skipif(NATIVE is None, reason="the native core is not built in this install (it was "
                                                      "installed without a Rust toolchain): nothing to compare")

SLOTS = [s for s in Entry.__slots__ if s != "message"]

texts = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from('ab "\\\n\t\x01\x1f\x7fé漢🙂'), max_size=60),
    st.sampled_from(["[cleared]", "", "x" * 700, "[Old tool result content cleared]"]),
    st.builds(lambda n, t: t + sized_placeholder("TOOL_RESULT", n) + t, st.integers(0, 10**6), st.text(max_size=5)),
).filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t))  # (orjson refuses a lone surrogate)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), texts, st.floats(allow_nan=False))
contents = st.one_of(texts, st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": texts}), max_size=2))


@st.composite
def result_messages(draw) -> dict:
    blocks = []
    for i in range(draw(st.integers(1, 3))):
        extra = draw(st.dictionaries(st.sampled_from(["is_error", "cache_control", "n"]), scalars, max_size=2))
        block = tr(f"t{i}", draw(contents), **extra)
        if draw(st.integers(0, 9)) == 0:
            del block["content"]  # (the reference counts such a block as changed whole)
        blocks.append(block)
    if draw(st.booleans()):
        blocks.insert(draw(st.integers(0, len(blocks))), {"type": "text", "text": draw(texts)})
    message = {"role": "user", "content": blocks}
    if draw(st.booleans()):
        message["meta"] = draw(st.dictionaries(st.sampled_from(["a", "b"]), scalars, max_size=2))
    return message


def same_facts(native: Entry, reference: Entry) -> None:
    """The same kind of entry with the same facts (its message not read: a LazyEntry keeps it unread)."""
    assert type(native) is type(reference)
    for slot in SLOTS:
        assert getattr(native, slot) == getattr(reference, slot), slot
    assert [type(f) for f in native.results] == [type(f) for f in reference.results]


def same(native: Entry, reference: Entry) -> None:
    same_facts(native, reference)
    assert native.message == reference.message
    assert orjson.dumps(native.message) == orjson.dumps(reference.message)


@settings(max_examples=300, deadline=None)
@given(result_messages(), st.data())
def test_a_result_replaced_natively_is_the_entry_python_makes(message, data):
    entry = make_entry(message, 3)
    assert entry.chars == json_len(message)  # (what the native length by difference stands on)
    for _ in range(data.draw(st.integers(1, 3))):  # (again: an entry changed before)
        k = data.draw(st.integers(0, len(entry.results) - 1))
        text = data.draw(texts)
        native, reference = NATIVE.with_result_content(entry, k, text), entry.with_result_content(k, text)
        same(native, reference)
        assert native.chars == json_len(native.message)
        entry = native


@pytest.mark.parametrize("value", [-7, 0, 2**63 - 1, -2**63, 2**64 - 1, True, False, None, 1.5, -0.0,
                                   {"k": [1, -2, {"z": None}], "": "é\n"}, [], {}, "\u2028 \x7f", ["x", [True, [-1]]]])
def test_every_scalar_and_container_measured_as_orjson_writes_it(value):
    """The new message measured whole (the content was most of it), with ``value`` beside it."""
    for where in ("message", "block"):
        message = {"role": "user", "content": [tr("a", "A" * 200)]}
        (message if where == "message" else message["content"][0])["extra"] = value
        entry = make_entry(message, 0)
        same(NATIVE.with_result_content(entry, 0, "[cleared]"), entry.with_result_content(0, "[cleared]"))


class Kept(Entry):
    """An entry of another kind: replaced by its own method."""

    __slots__ = ()

    def with_result_content(self, k, new_content):
        return "its own"


def test_another_kind_of_entry_is_replaced_by_its_own_method():
    entry = make_entry({"role": "user", "content": [tr("a", "A" * 50)]}, 0)
    other = Kept(*(getattr(entry, s) for s in ("message", *SLOTS)))
    assert NATIVE.with_result_content(other, 0, "[cleared]") == "its own"


def test_a_lazy_entry_left_unread_notes_the_change_as_python_does(tmp_path):
    msgs = [{"role": "user", "content": [tr("a", "A\n" * 150), tr("b", [{"type": "text", "text": "B" * 300}]),
                                         tr("c", "naïve \"C\" \\" * 30, is_error=True)]},
            {"role": "assistant", "content": "ok"}]
    path = write_jsonl(tmp_path / "t.jsonl", msgs)
    first = path.read_bytes().index(b"\n") + 1
    source = read_ahead.SourceFile(str(path))
    measured = build_entry(msgs[0], 0, measure=True)
    assert isinstance(measured, Entry)
    lazy = read_ahead.LazyEntry(measured.chars, "user", 0, (), (), (), measured.results, (), False, False,
                                (source, 0, first, (), b""))
    for k, text in ((1, "[cleared]"), (0, "x\ty"), (2, "ü \x02"), (0, "[again]")):
        native, reference = NATIVE.with_result_content(lazy, k, text), lazy.with_result_content(k, text)
        assert type(native) is read_ahead.LazyEntry and native._message is None  # (the line still unread)
        assert native._lazy == reference._lazy
        same_facts(native, reference)
        lazy, last = native, reference
    same(lazy, last)  # (the line read now, the changes applied)
    assert lazy.chars == len(orjson.dumps(lazy.message).decode())
    read = NATIVE.with_result_content(lazy, 1, "[read]")  # (read: changed as any entry is)
    assert type(read) is Entry
    same(read, lazy.with_result_content(1, "[read]"))
