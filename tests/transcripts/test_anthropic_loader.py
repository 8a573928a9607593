from __future__ import annotations

import os

import orjson
import pytest

from compactlab import load_transcript
from compactlab.errors import BadLineError, InputError
from helpers import asst, results, tr, tu, user, write_jsonl

GOOD = [user("go"), asst(tu("a", "bash", command="ls")), results(tr("a", "x")), asst("done")]


def write_raw(tmp_path, data: bytes, name="t.jsonl"):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def lines(*objs) -> bytes:
    return b"".join((o if isinstance(o, bytes) else orjson.dumps(o)) + b"\n" for o in objs)


def test_loads_messages_and_facts(tmp_path):
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", GOOD)))
    assert t.format == "anthropic" and t.messages == GOOD
    assert t.call_positions == [1, 3] and t.tool_names == {"a": "bash"}
    assert t.entries[2].results[0].tool_use_id == "a"


@pytest.mark.parametrize("bad,reason", [
    (b'{"role": "user", "content": "x"', "invalid JSON"),
    (b'{"role": "user", "content": NaN}', "invalid JSON"),
    (b'{"role": "user", "content": Infinity}', "invalid JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'"just a string"', "not a JSON object"),
    (b'{"role": "user", "content": 5}', "content is neither a string nor a list"),
    (b'{"role": "user", "content": null}', "content is neither a string nor a list"),
    (b'{"role": "robot", "content": "x"}', "role must be"),
    (b'{"role": "assistant", "content": [{"type": "tool_use", "name": "x"}]}', 'no string "id"'),
    (b'{"role": "assistant", "content": [{"type": "tool_use", "id": 3, "name": "x"}]}', 'no string "id"'),
    (b'{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}', 'no string "tool_use_id"'),
    (b'{"role": "user", "content": [{"type": "text", "text": 1}]}', 'no string "text"'),
    (b'{"role": "user", "content": ["bare string block"]}', "is not an object"),
    (b'{"role": "user", "content": ' + b"[" * 250 + b"]" * 250 + b"}", "nesting deeper than 200"),
    (b"\x00\x00\x00\x00", "NUL bytes"),
])
def test_bad_line_names_file_and_line(tmp_path, bad, reason):
    path = write_raw(tmp_path, lines(GOOD[0], GOOD[1], bad, GOOD[2], GOOD[3]))
    with pytest.raises(BadLineError) as exc:
        load_transcript(path)
    assert exc.value.line == 3 and reason in str(exc.value)
    assert str(exc.value).startswith(f"{path}:3: ")
    t = load_transcript(path, skip_bad_lines=True)
    assert t.skipped_lines == 1 and len(t.entries) == 4


@pytest.mark.parametrize("bad_at", [3, 64, 65, 90])  # in what detection read, at its edge, after it
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_lines_detection_read_are_reused_exactly(tmp_path, bad_at, suffix):
    import gzip

    talk = [user("go"), asst("ok")] * 50
    bad = b'{"role": "user", "content": 5}'
    data = lines(*talk[: bad_at - 1], b"", bad, *talk[bad_at - 1:])  # a blank line before it too
    path = write_raw(tmp_path, gzip.compress(data) if suffix else data, "t.jsonl" + suffix)
    with pytest.raises(BadLineError) as exc:
        load_transcript(path)
    assert exc.value.line == bad_at + 1
    t = load_transcript(path, skip_bad_lines=True)
    assert t.skipped_lines == 1 and t.messages == talk


def test_each_line_is_parsed_once(tmp_path, monkeypatch):
    from compactlab.transcripts import reader

    real = reader.orjson
    parsed: list[bytes] = []

    class Counting:
        JSONDecodeError = real.JSONDecodeError
        dumps = staticmethod(real.dumps)

        @staticmethod
        def loads(raw):
            parsed.append(raw)
            return real.loads(raw)

    monkeypatch.setattr(reader, "orjson", Counting)
    talk = [user("go"), asst("ok")] * 60  # longer than the 64 lines detection reads
    load_transcript(str(write_jsonl(tmp_path / "t.jsonl", talk)))
    lines_parsed = [raw for raw in parsed if isinstance(raw, bytes)]  # (is_document peeks at line 1 as text)
    assert len(lines_parsed) == len(talk) == len(set(lines_parsed)) * 60  # each line once (2 distinct ones)


def test_u2028_inside_a_string_is_not_a_line_break(tmp_path):
    msg = user("before\u2028after\u2029end\x85")
    path = write_raw(tmp_path, lines(msg, GOOD[1], GOOD[2]))
    t = load_transcript(path)
    assert t.messages[0] == msg and len(t.entries) == 3


def test_invalid_utf8_is_replaced_not_an_error(tmp_path):
    raw = b'{"role": "user", "content": "caf\xe9 \xff"}'
    t = load_transcript(write_raw(tmp_path, lines(raw, GOOD[1], GOOD[2])))
    assert t.messages[0]["content"] == "caf\ufffd \ufffd"


def test_crlf_and_blank_lines_and_missing_final_newline(tmp_path):
    data = orjson.dumps(GOOD[0]) + b"\r\n\r\n" + orjson.dumps(GOOD[1]) + b"\r\n" + orjson.dumps(GOOD[2])
    t = load_transcript(write_raw(tmp_path, data))
    assert t.messages == GOOD[:3]


def test_unknown_blocks_are_kept_and_counted(tmp_path):
    odd = {"role": "assistant", "content": [{"type": "server_tool_use", "id": "s1", "payload": [1, 2]}, {"type": "thinking", "thinking": "hm", "signature": "x"}]}
    t = load_transcript(write_raw(tmp_path, lines(GOOD[0], odd)))
    assert t.messages[1] == odd and t.entries[1].chars == len(orjson.dumps(odd))


def test_api_response_objects_and_system_line(tmp_path):
    response = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 3, "cache_read_input_tokens": 100}}
    t = load_transcript(write_raw(tmp_path, lines({"role": "system", "content": "be brief"}, GOOD[0], response)))
    assert t.system == "be brief" and t.model == "claude-sonnet-4-5"
    assert t.messages[1] == {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    assert t.usage == {1: {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 100,
                           "output_tokens": 3, "model": "claude-sonnet-4-5"}}  # the call's own model


@pytest.mark.parametrize("setup,message", [
    (lambda p: p.write_bytes(b""), "empty file"),
    (lambda p: p.write_bytes(b"\n\n  \n"), "empty file"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: None, "no such file"),
    (lambda p: p.write_bytes(b"hello world\nthis is prose\n"), "none of its first lines is a JSON object"),
    (lambda p: p.write_bytes(b'{"kind": "metric", "value": 3}\n'), "not a transcript in any known format"),
])
def test_not_a_transcript(tmp_path, setup, message):
    p = tmp_path / "x.jsonl"
    setup(p)
    with pytest.raises(InputError) as exc:
        load_transcript(str(p))
    assert message in str(exc.value) and str(p) in str(exc.value)


def test_inputs_are_opened_read_only_and_left_unchanged(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", GOOD)
    os.chmod(path, 0o444)
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    load_transcript(str(path))
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before


def test_content_hash_is_of_the_file(tmp_path):
    import hashlib

    path = write_jsonl(tmp_path / "t.jsonl", GOOD)
    assert load_transcript(str(path)).content_hash == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("core", ["python", "native"])
def test_a_block_whose_type_is_a_list_or_an_object_is_another_block_not_a_crash(tmp_path, monkeypatch, core):
    """(Python's check looked the type up in a dict: a list there raised TypeError, an internal error.)"""
    from compactlab import core as cores

    if core == "native" and cores.native_module() is None:
        pytest.skip("the native core is not built in this install (installed without a Rust toolchain)")
    monkeypatch.setenv("COMPACTLAB_CORE", core)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"role":"user","content":[{"type":[1]},{"type":{"a":1},"text":"x"}]}\n'
                     b'{"role":"assistant","content":"ok"}\n')
    t = load_transcript(str(path))
    assert [e.role for e in t.entries] == ["user", "assistant"] and t.skipped_lines == 0
    assert t.entries[0].chars == len(b'{"role":"user","content":[{"type":[1]},{"type":{"a":1},"text":"x"}]}')


@pytest.mark.parametrize("core", ["python", "native"])
def test_a_reply_with_nested_metadata_loads_and_only_200_levels_are_too_deep(tmp_path, monkeypatch, core):
    """A reply's other keys were held to two levels (``_depth_exceeds(v, 2)``): the API's context
    editing (``context_management.applied_edits``, objects in a list in an object) or a usage with
    an object of objects made the line "nesting deeper than 200 levels". The line's limit is 200."""
    from compactlab import core as cores

    if core == "native" and cores.native_module() is None:
        pytest.skip("the native core is not built in this install (installed without a Rust toolchain)")
    monkeypatch.setenv("COMPACTLAB_CORE", core)
    reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
             "content": [{"type": "text", "text": "done"}],
             "context_management": {"applied_edits": [{"type": "clear_tool_uses_20250919",
                                                       "cleared_tool_uses": 3, "cleared_input_tokens": 4096}]},
             "usage": {"input_tokens": 10, "output_tokens": 3, "server_tool_use": {"web": {"n": 1}}}}
    t = load_transcript(write_raw(tmp_path, lines(GOOD[0], reply)))
    assert t.skipped_lines == 0 and t.usage[1]["input_tokens"] == 10
    deep = (b'{"role": "assistant", "content": "x", "usage": {"input_tokens": 1, "output_tokens": 1}, "extra": '
            + b"[" * 199 + b"]" * 199 + b"}")  # 200 levels with the line's own object: still read
    assert load_transcript(write_raw(tmp_path, lines(GOOD[0]) + deep + b"\n", "ok.jsonl")).skipped_lines == 0
    too_deep = deep.replace(b"[" * 199, b"[" * 200).replace(b"]" * 199, b"]" * 200)
    with pytest.raises(BadLineError, match="nesting deeper than 200 levels"):
        load_transcript(write_raw(tmp_path, lines(GOOD[0]) + too_deep + b"\n", "deep.jsonl"))


@pytest.mark.parametrize("metadata", [True, False])
def test_what_a_converted_file_says_of_its_recording_is_taken_only_as_compactlab_writes_it(tmp_path, metadata):
    """A converted file's first reply says the format it was recorded in and the harness's version;
    a value compactlab never writes (markup, a terminal's control sequence) was taken as it stood and
    shown ("converted from <b>x</b>…"): it is left out, on the native reader's path (a reply with no
    recorded_metadata) and on Python's alike."""
    def reply(fmt, version):
        return {"type": "message", "role": "assistant", "content": "ok", "model": "claude-sonnet-4-5",
                "usage": {"input_tokens": 10, "output_tokens": 2}, "recorded_format": fmt,
                **({"recorded_metadata": {"version": version}} if metadata else {})}

    bad = load_transcript(str(write_jsonl(tmp_path / "bad.jsonl", [{"role": "user", "content": "go"},
                                                                  reply("<b>x</b>\x1b[31m", "\x1b]0;x\x07")])))
    assert "recorded_format" not in bad.metadata and "version" not in bad.metadata
    good = load_transcript(str(write_jsonl(tmp_path / "good.jsonl", [{"role": "user", "content": "go"},
                                                                    reply("claude-code", "2.0.76")])))
    assert good.metadata["recorded_format"] == "claude-code"
    assert good.metadata.get("version") == ("2.0.76" if metadata else None)
