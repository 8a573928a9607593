"""Sized placeholders (issue 25 §2): a text the recording only gives the size of counts as its N
characters in every size and every cut, exactly as the N characters would, without being built."""

from __future__ import annotations

import re

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlab.transcripts.messages import (
    SIZED_MARK, content_size, cut_text, json_len, make_entry, sized_len, sized_placeholder)
from helpers import examples

FILL = "·"  # what a placeholder stands for, built out for the comparison


def _expanded(text: str) -> str:
    return re.sub(SIZED_MARK + r"\[[A-Z_]+ len=(\d+)[^\]]*\]", lambda m: FILL * int(m[1]), text)


texts = st.lists(st.one_of(st.text(alphabet="ab é\n\"\\", max_size=12),
                           st.builds(lambda n: sized_placeholder("REDACTED_TEXT", n, " sha=ab12"),
                                     st.integers(0, 60))), max_size=6).map("".join)


@settings(max_examples=examples(150), deadline=None)
@given(texts, st.integers(0, 120), st.booleans())
def test_sizes_and_cuts_equal_those_of_the_text_built_out(text, n, from_tail):
    full = _expanded(text)
    assert sized_len(text) == len(full)
    assert content_size(text) == len(full) and content_size([{"type": "text", "text": text}]) == len(full)
    message = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": text}]}
    full_message = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": full}]}
    assert json_len(message) == json_len(full_message) == len(orjson.dumps(full_message).decode())
    entry = make_entry(message, 0)
    assert entry.chars == json_len(full_message) and entry.results[0].size == len(full)
    wanted = (full[-n:] if n else "") if from_tail else full[:n]
    assert _expanded(cut_text(text, n, from_tail)) == wanted


contents = st.one_of(st.none(), texts, st.lists(st.builds(lambda t: {"type": "text", "text": t}, texts), max_size=3))


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(contents, min_size=1, max_size=4), st.lists(st.tuples(st.integers(0, 3), contents), max_size=5))
def test_a_result_replaced_is_measured_alike_whether_its_size_was_read_or_not(olds, changes):
    """``with_result_content`` of an entry whose results were measured as read (``json_size``: the
    native reader's, ``build_entry(measure=True)``) and of one whose were not: the same length,
    the message's compact JSON's, and the new content measured for the next change."""
    from compactlab.core import line_facts
    from compactlab.transcripts.messages import Entry, ResultFact, build_entry

    message = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": c}
                                           for i, c in enumerate(olds)]}
    entries = [make_entry(message, 0), build_entry(message, 0, measure=True)]
    native = line_facts(ResultFact, True)
    if native is not None:  # (the native reader's own facts, where it runs)
        got = native.read(orjson.dumps(message), 0)
        if got is not None and got[1] is None:
            entries.append(Entry(message, *got[0]))
    assert all(r.json_size >= 0 for r in entries[1].results)
    for k, new in changes:
        k %= len(olds)
        entries = [e.with_result_content(k, new) for e in entries]
        lengths = {e.chars for e in entries}
        assert lengths == {json_len(entries[0].message)}, (k, new)
        assert entries[1].results[k].json_size == json_len(new)


def test_a_placeholder_is_cut_to_a_placeholder_of_what_fits():
    text = "head " + sized_placeholder("REDACTED_TEXT", 1_000_000_000, " sha=ab") + " tail"
    assert sized_len(text) == 1_000_000_010
    assert cut_text(text, 12) == "head " + sized_placeholder("REDACTED_TEXT", 7, " sha=ab")
    assert cut_text(text, 8, from_tail=True) == sized_placeholder("REDACTED_TEXT", 3, " sha=ab") + " tail"


@pytest.mark.parametrize("quoted", [
    "[REDACTED_TEXT len=1000000 sha=ab]",  # a placeholder quoted without the mark (a rollout read by an agent)
    SIZED_MARK + "[REDACTED_TEXT len=1000000 sha=xyz]",  # not a placeholder's shape
    SIZED_MARK + "[REDACTED_TEXT len=1" + "0" * 16 + "]",  # a size beyond any limit
])
def test_text_that_is_not_a_sized_placeholder_is_sized_as_written(quoted):
    assert sized_len(quoted) == len(quoted)
    assert json_len({"t": quoted}) == len(orjson.dumps({"t": quoted}).decode())


def test_a_summary_of_a_redacted_request_is_cut_like_the_text_would_be():
    from compactlab.summarizers.base import SummaryRequest
    from compactlab.summarizers.stub import StubSummarizer

    big = sized_placeholder("REDACTED_TEXT", 1_000_000_000, " sha=ab")
    messages = [{"role": "user", "content": big}, {"role": "assistant", "content": big}]
    request = SummaryRequest(messages=messages, limit=5_000, chars=json_len(messages))
    assert request.input_chars == 5_000 and sized_len(request.input_text) == 5_000
    text = StubSummarizer().summarize(request).text
    assert sized_len(text) <= 2_000 and make_entry({"role": "user", "content": text}, 0).chars < 2_100


def test_codex_measures_read_a_placeholder_as_its_size():
    from compactlab.engine.layers.summary import newest_prompts, reasoning_tokens

    signature = sized_placeholder("REDACTED_TEXT", 40_000, " sha=ab")
    thinking = {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": signature}]}
    built = {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": FILL * 40_000}]}
    assert reasoning_tokens(thinking) == reasoning_tokens(built) > 7_000
    prompt = make_entry({"role": "user", "content": "start " + sized_placeholder("REDACTED_TEXT", 90_000)}, 0)
    [kept] = newest_prompts([prompt], 1_000)  # 4,000 characters: 2,000 from each end
    assert _expanded(kept) == "start " + FILL * 1_994 + "\n…21502 tokens truncated…\n" + FILL * 2_000


def test_a_placeholder_is_no_probe_candidate():
    from compactlab.engine.measures.probes import runs

    text = "see parse_config " + sized_placeholder("REDACTED_TEXT", 500, " sha=ab12") + " done"
    assert runs(text) == {"see", "parse_config", "done"}


def test_convert_keeps_a_redacted_rollout_sized(cli, tmp_path):
    from compactlab import load_transcript
    from helpers import write_jsonl

    lines = [{"timestamp": f"2026-01-01T00:00:0{i}Z", "type": "response_item", "payload": p} for i, p in enumerate([
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "[REDACTED_TEXT len=7000 sha=ab]"}]},
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "[REDACTED_TEXT len=90000 sha=cd]"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}])]
    rollout = str(write_jsonl(tmp_path / "rollout.jsonl", lines))
    out = tmp_path / "converted.jsonl"
    r = cli("convert", rollout, "-o", out)
    assert r.exit_code == 0, r.output
    assert out.stat().st_size < 2_000  # the placeholders, not 97,000 characters
    before, after = load_transcript(rollout), load_transcript(str(out))
    assert [e.chars for e in after.entries] == [e.chars for e in before.entries]
    assert after.entries[2].results[0].size == 90_000
