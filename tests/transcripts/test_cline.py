"""Cline / Roo Code / Kilo Code task histories (issue #33 §3). No permissively licensed real task
history exists to share, so these files are built here from the schema as the sources write it:
cline/cline ``src/core/storage/disk.ts`` (``api_conversation_history.json``: the Anthropic
MessageParam list the extension sends; ``ui_messages.json``: its ClineMessage list) and
``src/shared/ExtensionMessage.ts`` (``say: "api_req_started"``, whose ``text`` is a ClineApiReqInfo
JSON: ``tokensIn``, ``tokensOut``, ``cacheWrites``, ``cacheReads``, ``cost``)."""

from __future__ import annotations

import json

import orjson

from compactlab import load_policy, load_transcript, replay
from helpers import inspects_and_round_trips


def _task(folder, ui: bool = True, requests: int = 2):
    folder.mkdir(parents=True, exist_ok=True)
    history = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nfix the failing test\n</task>"},
                                     {"type": "text", "text": "<environment_details>\n# cwd /repo\n</environment_details>"}],
         "ts": 1767225600000},
        {"role": "assistant", "content": [{"type": "text", "text": "Reading the test."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "read_file",
                                           "input": {"path": "tests/test_a.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def test(): assert 1 == 2"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "<attempt_completion>fixed</attempt_completion>"}]},
    ]
    (folder / "api_conversation_history.json").write_bytes(orjson.dumps(history))
    if ui:
        messages = [{"ts": 1767225600000, "type": "say", "say": "task", "text": "fix the failing test"}]
        for k in range(requests):
            messages.append({"ts": 1767225601000 + k * 1000, "type": "say", "say": "api_req_started",
                             "text": json.dumps({"request": "…", "tokensIn": 10 + k, "tokensOut": 50 + k,
                                                 "cacheWrites": 3000 + k, "cacheReads": 100 * k, "cost": 0.01})})
            messages.append({"ts": 1767225601500 + k * 1000, "type": "say", "say": "text", "text": "…"})
        (folder / "ui_messages.json").write_bytes(orjson.dumps(messages))
    return str(folder / "api_conversation_history.json")


def test_a_task_history_with_its_usage(tmp_path, cli):
    path = _task(tmp_path / "tasks" / "1767225600000")
    t = load_transcript(path)
    assert t.format == "cline" and [e.role for e in t.entries] == ["user", "assistant", "user", "assistant"]
    assert "ts" not in t.entries[0].message
    assert t.usage == {1: {"input_tokens": 10, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0,
                           "output_tokens": 50, "timestamp": "2026-01-01T00:00:01Z"},
                       3: {"input_tokens": 11, "cache_creation_input_tokens": 3001, "cache_read_input_tokens": 100,
                           "output_tokens": 51, "timestamp": "2026-01-01T00:00:02Z"}}
    assert replay(t, load_policy("s08")).summary.violations == []
    inspects_and_round_trips(cli, path, tmp_path)


def test_without_ui_messages_and_with_a_retried_request(tmp_path):
    bare = load_transcript(_task(tmp_path / "a", ui=False))
    assert bare.usage == {} and "api_requests" not in bare.metadata
    retried = load_transcript(_task(tmp_path / "b", requests=3))  # one request failed: three for two replies
    assert sorted(retried.usage) == [1, 3] and retried.usage[3]["input_tokens"] == 12
    assert any("matched from the last one backwards" in w for w in retried.warnings)


def test_a_bad_message_names_its_index_and_a_broken_ui_file_is_a_warning(tmp_path, cli):
    path = _task(tmp_path / "t")
    doc = json.loads(open(path).read())
    doc.insert(2, {"role": "user", "content": [{"type": "tool_result"}]})
    open(path, "w").write(json.dumps(doc))
    r = cli("inspect", path)
    assert r.exit_code == 2 and f"{path}: message 2: tool_result block 0 has no string \"tool_use_id\"" in r.stderr
    assert cli("inspect", path, "--skip-bad-lines").exit_code == 0
    good = _task(tmp_path / "u")
    (tmp_path / "u" / "ui_messages.json").write_text("{not json")
    t = load_transcript(good)
    assert t.usage == {} and any("ui_messages.json not read" in w for w in t.warnings)
