"""Small builders for hand-made messages and contexts."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from compactlab.engine.context import Context
from compactlab.transcripts.messages import make_entry

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_transcripts"
SHARED = ROOT.parent / "shared"

#: a thorough run (``COMPACTLAB_THOROUGH=1``; CI's second pass, ``pytest -m "slow or property"``)
#: gives each property test every example it names; the README's ``pytest`` a fifth of them
THOROUGH = os.environ.get("COMPACTLAB_THOROUGH") == "1"


def examples(n: int) -> int:
    """A property test's examples: ``n`` in a thorough run, else a fifth of them (at least ten)."""
    return n if THOROUGH else max(10, n // 5)


def covering(names: str, *axes: Sequence[Any], whole: int = 2) -> pytest.MarkDecorator:
    """``pytest.mark.parametrize(names, ...)`` over the product of ``axes``. The README's suite runs
    every combination of the first ``whole`` axes once, each other axis's values taken in turn
    (every one of them where there are rows enough); the other rows are marked ``slow`` (CI runs
    every row)."""
    quick = {repr(head + tuple(axis[i % len(axis)] for axis in axes[whole:]))  # (repr: a value may be a list)
             for i, head in enumerate(itertools.product(*axes[:whole]))}
    return pytest.mark.parametrize(names, [
        pytest.param(*row, marks=() if repr(row) in quick else pytest.mark.slow,
                     id="-".join("+".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v) for v in row))
        for row in itertools.product(*axes)])


def compacting_recording(path: Path, usage: bool = False) -> str:
    """A generated recording (``synth``) of 50 calls, short enough for the suite, that every kind of
    policy compacts: s08 snips (23), micro-compacts and summarises (4), claude-code summarises, the
    LangChain preset clears (5); with its replies' usage recorded where ``usage``."""
    from compactlab.synth import write

    write(path, 50, seed=4, usage=usage)
    return str(path)


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def asst(*blocks: dict | str) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks]}


def tu(tid: str, name: str = "bash", **inp: object) -> dict:
    return {"type": "tool_use", "id": tid, "name": name, "input": inp}


def tr(tid: str, content: object = "ok", **extra: object) -> dict:
    return {"type": "tool_result", "tool_use_id": tid, "content": content, **extra}


def results(*blocks: dict) -> dict:
    return {"role": "user", "content": list(blocks)}


def context(messages: list[dict]) -> Context:
    return Context(make_entry(m, i) for i, m in enumerate(messages))


def write_jsonl(path: Path, messages: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in messages))
    return path


def tool_session(turns: int, size: int = 500, prefix: str = "t") -> list[dict]:
    """user prompt, then `turns` x (assistant tool_use, user tool_result of `size` chars)."""
    msgs = [user("start")]
    for i in range(turns):
        msgs.append(asst(f"step {i}", tu(f"{prefix}{i}", "bash", command=f"cmd {i}")))
        msgs.append(results(tr(f"{prefix}{i}", "x" * size)))
    return msgs


def records_of(calls: Any) -> bytes:
    """A run's call records as one JSON text (each record's ``to_dict``: the native core's records,
    a Rust struct each, are no dataclass orjson writes by itself): two runs' records compare as these."""
    return orjson.dumps([c.to_dict() for c in calls])


def assert_same_run(a, b) -> None:
    """Two runs report the same: the summary (but its run time and the core that ran), every call
    record, failures, every probe's outcome and the compaction events with what each removed."""
    sa, sb = orjson.loads(orjson.dumps(a.summary)), orjson.loads(orjson.dumps(b.summary))
    sa.pop("core", None), sb.pop("core", None)
    assert sa == sb
    assert records_of(a.calls) == records_of(b.calls)
    assert a.failed_summaries == b.failed_summaries
    assert a.probe_ledger == b.probe_ledger
    assert a.events == b.events


def built(messages: list[dict], name: str = "generated.jsonl") -> Any:
    """A transcript of Anthropic ``messages``, loaded (``TranscriptBuilder``)."""
    from compactlab.transcripts import TranscriptBuilder

    b = TranscriptBuilder(name, "anthropic")
    for m in messages:
        b.add(m)
    return b.build()


def on_both_cores(env: Any, transcript: Any, policy: Any, options: Any = None) -> tuple[Any, Any]:
    """``transcript`` replayed through ``policy`` on the python core, then on the native one
    (``env``: a monkeypatch, for ``COMPACTLAB_CORE``), each run said to be its core's."""
    from compactlab import ReplayOptions, replay

    runs = []
    for which in ("python", "native"):
        env.setenv("COMPACTLAB_CORE", which)
        run = replay(transcript, policy, options or ReplayOptions())
        assert run.summary.core == which
        runs.append(run)
    return runs[0], runs[1]


def read_csv(path: Path) -> list[dict[str, str]]:
    """A CSV file's rows as {column: text} (results.csv, calls.csv)."""
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def files_under(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative POSIX path -> bytes)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def inspects_and_round_trips(cli, path, tmp_path) -> None:
    """A format's contract with the commands: ``inspect`` reads it, and ``convert`` writes it as
    Anthropic messages that load back to the same messages and recorded calls."""
    from compactlab import load_transcript

    r = cli("inspect", path, "--format", "json")
    assert r.exit_code == 0, r.stderr
    converted = tmp_path / "converted.jsonl"
    assert cli("convert", path, "-o", converted).exit_code == 0
    before, again = load_transcript(str(path)), load_transcript(str(converted))
    assert [e.message for e in again.entries] == [e.message for e in before.entries]
    assert again.usage.keys() == before.usage.keys()


class ClaudeCodeSession:
    """Builds Claude Code envelope lines."""

    def __init__(self, sidechain: bool = False):
        self.lines: list[dict] = [{"type": "file-history-snapshot", "messageId": "m0", "snapshot": {"trackedFileBackups": {}}}]
        self.n = 0
        self.sidechain = sidechain

    def _env(self, kind: str, **extra) -> dict:
        self.n += 1
        return {"parentUuid": f"u{self.n - 1}", "isSidechain": self.sidechain, "sessionId": "s1", "type": kind,
                "uuid": f"u{self.n}", "timestamp": "2026-01-01T00:00:00Z", **extra}

    def user(self, content, **extra) -> "ClaudeCodeSession":
        self.lines.append(self._env("user", message={"role": "user", "content": content}, **extra))
        return self

    def result(self, tid: str, content: str = "out", **extra) -> "ClaudeCodeSession":
        return self.user([{"tool_use_id": tid, "type": "tool_result", "content": content}],
                         toolUseResult={"stdout": content * 50}, **extra)

    def assistant(self, mid: str, block: dict, output_tokens: int = 5, input_tokens: int = 3, **extra) -> "ClaudeCodeSession":
        usage = {"input_tokens": input_tokens, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 2000,
                 "output_tokens": output_tokens}
        msg = {"model": "claude-opus-4-6", "id": mid, "type": "message", "role": "assistant", "content": [block],
               "stop_reason": None, "usage": usage}
        self.lines.append(self._env("assistant", message=msg, requestId=f"req_{mid}", **extra))
        return self

    def line(self, obj: dict) -> "ClaudeCodeSession":
        self.lines.append(obj)
        return self

    def write(self, path: Path) -> str:
        path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in self.lines))
        return str(path)


def mounted_tmpfs(where: Path, options: str):
    """A tmpfs of the test's own at ``where`` (made here, unmounted on leaving), or a skip where
    this machine does not let a test mount one: a full or read-only disk without touching a real one."""
    import contextlib
    import subprocess

    import pytest

    @contextlib.contextmanager
    def mounted():
        where.mkdir(exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode(errors='replace').strip()[:80]})")
        try:
            yield where
        finally:
            subprocess.run(["umount", str(where)], capture_output=True)

    return mounted()


def chat_document(path: Path, turns: int, pad: str) -> str:
    """An OpenAI-style chat (a document format: read whole, its bytes hashed by its loader) whose
    tool results name symbols later calls use, each padded with ``pad``."""
    msgs: list[dict] = [{"role": "user", "content": "go"}]
    for i in range(turns):
        msgs.append({"role": "assistant", "content": f"next: handler_{i - 3:03d}_impl" if i > 3 else "look",
                     "tool_calls": [{"id": f"c{i}", "type": "function",
                                     "function": {"name": "bash", "arguments": f'{{"command": "cat src/mod_{i}.py"}}'}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"found handler_{i:03d}_impl in src/mod_{i}.py\n" + pad})
    msgs.append({"role": "assistant", "content": "done"})
    path.write_bytes(orjson.dumps(msgs))
    return str(path)


def lines_run(work: Callable[[], Any]) -> int:
    """How many lines of Python ``work()`` runs (``sys.settrace``): a deterministic measure of how
    its cost grows (a test of linear time counts, never times: a busy machine cannot fail it)."""
    import sys

    ran = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal ran
        if event == "line":
            ran += 1
        return trace

    sys.settrace(trace)
    try:
        work()
    finally:
        sys.settrace(None)
    return ran


def own_source_pattern() -> Any:
    """The pattern ``probes.own_sources`` reads in linear time, as it was (its oracle): a Python file
    of a framework's own tree -> the framework's top folder."""
    import re

    from compactlab.engine.measures.probes import vocabulary

    return re.compile(r"(?<![\w.-])(?<!packages/)(?<!node_modules/)("
                      + "|".join(map(re.escape, sorted(vocabulary().bit_of))) + r")/[\w/]*\.py\b")


def sample_corpus(folder: Path, *names: str, not_a_transcript: str = "notes.json") -> Path:
    """``folder`` made with copies of the named sample transcripts and a file that is no transcript
    (``not_a_transcript``: a folder's file that a corpus job skips, and says)."""
    import shutil

    folder.mkdir()
    for name in names:
        shutil.copy(SAMPLES / name, folder / name)
    (folder / not_a_transcript).write_text("{}")
    return folder


GOOSE_SCHEMA = """
CREATE TABLE schema_version (version INTEGER);
CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT, description TEXT, session_type TEXT, working_dir TEXT,
                       created_at TEXT, updated_at TEXT, provider_name TEXT, model_config_json TEXT,
                       parent_session_id TEXT, accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER);
CREATE TABLE messages (id INTEGER PRIMARY KEY, message_id TEXT, session_id TEXT, role TEXT, content_json TEXT,
                       created_timestamp INTEGER, timestamp TEXT, tokens INTEGER, metadata_json TEXT);
CREATE TABLE usage_ledger (id INTEGER PRIMARY KEY, session_id TEXT, created_timestamp INTEGER, model TEXT,
                           input_tokens INTEGER, output_tokens INTEGER, total_tokens INTEGER, cache_read_tokens INTEGER,
                           cache_write_tokens INTEGER, cost REAL, cost_source TEXT, is_compaction INTEGER);
"""


def goose_store(path: Path) -> Path:
    """A goose session store (its SQLite tables as third-party readers query them: agentsview's goose.go)
    of one session (``20251122_1``) and a subagent's, with its usage ledger and a summary only the agent
    saw (not a real recording)."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = wal")
    db.executescript(GOOSE_SCHEMA)
    db.execute("INSERT INTO schema_version VALUES (6)")
    db.execute("INSERT INTO sessions VALUES ('20251122_1', 'fix', '', 'user', '/home/u/api', '2025-11-22 08:00:00', "
               "'2025-11-22 08:10:00', 'anthropic', ?, NULL, 0, 0)", (json.dumps({"model_name": "claude-sonnet-4-5"}),))
    db.execute("INSERT INTO sessions VALUES ('20251122_2', 'sub', '', 'sub_agent', '/home/u/api', '2025-11-22 08:01:00', "
               "'2025-11-22 08:02:00', 'anthropic', '{}', '20251122_1', 0, 0)")
    user, agent_only = json.dumps({"userVisible": True, "agentVisible": True}), \
        json.dumps({"userVisible": False, "agentVisible": True})
    rows = [
        ("user", [{"type": "text", "text": "Why does /health return 500?"}], user),
        ("assistant", [{"type": "text", "text": "Checking."},
                       {"type": "toolRequest", "id": "call_1", "toolCall": {"status": "success", "value": {
                           "name": "developer__shell", "arguments": {"command": "curl -s localhost:8080/health"}}}}], user),
        ("user", [{"type": "toolResponse", "id": "call_1", "toolResult": {"status": "success", "value": {
            "content": [{"type": "text", "text": "KeyError: 'DATABASE_URL'"}]}}}], user),
        ("assistant", [{"type": "toolRequest", "id": "call_2", "toolCall": {"status": "success", "value": {
            "name": "developer__text_editor", "arguments": {"path": "/home/u/api/.env", "command": "view"}}}}], user),
        ("user", [{"type": "toolResponse", "id": "call_2", "toolResult": {"status": "error", "error": "no such file"}}], user),
        ("user", [{"type": "text", "text": "Summary: /health fails on a missing DATABASE_URL; .env is absent."}], agent_only),
        ("user", [{"type": "text", "text": "Add a default."}], user),
        ("assistant", [{"type": "thinking", "thinking": "set a sqlite default"},
                       {"type": "text", "text": "DATABASE_URL now defaults to sqlite:///app.db."}], user),
    ]
    for k, (role, content, meta) in enumerate(rows):
        db.execute("INSERT INTO messages VALUES (?, ?, '20251122_1', ?, ?, ?, '', 0, ?)",
                   (k + 1, f"m{k}", role, json.dumps(content), 1763798400 + k, meta))
    ledger = [(1763798401, 3000, 40, 0, 2900, 0), (1763798403, 20, 35, 2900, 150, 0), (1763798405, 3200, 300, 0, 0, 1),
              (1763798407, 900, 25, 0, 850, 0)]
    for k, (at, inp, out, read, write, compaction) in enumerate(ledger):
        db.execute("INSERT INTO usage_ledger VALUES (?, '20251122_1', ?, 'claude-sonnet-4-5', ?, ?, 0, ?, ?, NULL, "
                   "'estimated', ?)", (k + 1, at, inp, out, read, write, compaction))
    db.commit()
    db.close()
    return path


def codex_rollout(path, window: int, sizes: list[int], compact_at: int) -> str:
    """A Codex rollout that records ``window`` (``model_context_window``: the 95% of the model's window
    a prompt may fill) and a call a prompt of each of ``sizes``, Codex's compaction before the
    ``compact_at``-th."""
    lines = [{"type": "session_meta", "payload": {"id": "s1", "cli_version": "0.104.0"}},
             {"type": "turn_context", "payload": {"model": "gpt-5.1-codex-max"}},
             {"type": "event_msg", "payload": {"type": "task_started", "model_context_window": window}},
             {"type": "response_item", "payload": {"type": "message", "role": "user",
                                                   "content": [{"type": "input_text", "text": "do it"}]}}]
    for k, size in enumerate(sizes):
        if k == compact_at:
            lines.append({"type": "compacted", "payload": {"message": "summary", "replacement_history": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "do it"}]}]}})
        lines += [{"type": "response_item", "payload": {"type": "function_call", "call_id": f"c{k}", "name": "shell",
                                                        "arguments": '{"command": ["ls"]}'}},
                  {"type": "event_msg", "payload": {"type": "token_count", "info": {
                      "total_token_usage": {"total_tokens": k + 1},
                      "last_token_usage": {"input_tokens": size, "cached_input_tokens": 0, "output_tokens": 50}}}},
                  {"type": "response_item", "payload": {"type": "function_call_output", "call_id": f"c{k}",
                                                        "output": "ok"}}]
    Path(path).write_text("".join(json.dumps({**line, "timestamp": f"2026-11-28T10:00:{i:02d}Z"}) + "\n"
                                  for i, line in enumerate(lines)))
    return str(path)
