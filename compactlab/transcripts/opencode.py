"""Format: OpenCode sessions (sst/opencode) and Kilo CLI's, its fork, which keeps the same store.

Two stores, read as OpenCode writes them:
- the SQLite database (``~/.local/share/opencode/opencode.db``, Kilo CLI's ``~/.local/share/kilo/kilo.db``):
  tables ``session`` (``id``, ``parent_id``, ``directory``, ``version``, ``time_updated``),
  ``message(id, session_id, time_created, data)`` and ``part(id, message_id, session_id, data)``,
  ``data`` the JSON of the message's or part's fields. A session is named ``STORE#SESSION``
  (``opencode.db#ses_…``): a store given as a path stands for its sessions, a sub-session (a
  task's, ``parent_id`` set) being a subagent's; it is read as ``stores`` reads every store.
- the legacy files (``storage/session/<project>/<session>.json``, its messages in
  ``storage/message/<session>/*.json``, their parts in ``storage/part/<message>/*.json``): a
  session's JSON file is the path.

What decides correctness:
- Messages in creation order; a message's parts in id order. A user message's ``text`` parts
  (``ignored`` ones left out; ``synthetic`` ones, which OpenCode sends, kept) and its ``file``
  parts (as ``[Attached mime: name]``).
- An assistant message is one or more model calls: its ``step-start`` … ``step-finish`` spans,
  each a call whose usage is its ``step-finish`` ``tokens`` (``input`` the uncached prompt,
  ``cache.read``, ``cache.write``, ``output`` plus ``reasoning``; else the message's own
  ``tokens``, for its last step). A step's ``text``, ``reasoning`` (a thinking block) and
  ``tool`` parts (``callID``, ``tool``, ``state.input``) are the call; each tool's
  ``state.output`` (``error``: its error, an error result) its tool_result after it. A pruned
  output (``state.time.compacted``) is read whole: OpenCode kept it, and sent it cleared
  (``inspect`` counts them).
- A user message holding a ``compaction`` part (``auto``) asks for a compaction; the assistant
  message after it marked ``summary: true`` is the summary, not a call of the conversation: a
  RecordedCompaction (``auto`` or ``manual``) restarting from it, its request counted apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ..errors import InputError
from .model import BadField, Transcript, TranscriptBuilder, tokens
from .reader import read_document
from .stores import SEP, connect, in_store

NAME = "opencode"
DESCRIPTION = ("OpenCode and Kilo CLI sessions: a store (~/.local/share/opencode/opencode.db, a session as "
               "STORE#SESSION) or the legacy storage/session/<project>/<session>.json")

#: the tables that make a SQLite file an OpenCode store (``stores.format_of``)
TABLES = {"session", "message", "part"}

Message = tuple[dict[str, Any], list[dict[str, Any]]]  # (the message's fields, its parts)


def store_sessions(store: str) -> list[tuple[str, bool, float, str]]:
    """Each session of the store: (its id, whether it is a sub-session, when it was last updated
    (epoch seconds), its project folder), oldest first."""
    import sqlite3

    db = connect(store)
    try:
        rows = db.execute("SELECT id, parent_id, time_updated, directory FROM session ORDER BY time_created, id").fetchall()
    except sqlite3.Error as exc:
        raise InputError(f"{store}: its session table cannot be read ({exc})") from None
    finally:
        db.close()
    return [(str(sid), parent is not None, (updated or 0) / 1000, str(folder or "")) for sid, parent, updated, folder in rows]


def _from_store(store: str, session: str) -> tuple[dict[str, Any], list[Message], str]:
    import sqlite3

    db = connect(store)
    try:
        row = db.execute("SELECT id, parent_id, directory, version, title FROM session WHERE id = ?", (session,)).fetchone()
        if row is None:
            raise InputError(f"{store}{SEP}{session}: no such session in the store",
                             hint=f"compactlab inspect {store} lists its sessions")
        info = {"id": row[0], "parentID": row[1], "directory": row[2], "version": row[3], "title": row[4]}
        messages = db.execute("SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id",
                              (session,)).fetchall()
        parts = db.execute("SELECT message_id, id, data FROM part WHERE session_id = ? ORDER BY message_id, id",
                           (session,)).fetchall()
    except sqlite3.Error as exc:
        raise InputError(f"{store}{SEP}{session}: the store cannot be read ({exc})") from None
    finally:
        db.close()
    import hashlib

    digest = hashlib.sha256()
    by_message: dict[str, list[dict[str, Any]]] = {}
    size = 0
    for mid, pid, data in parts:
        raw = data if isinstance(data, bytes) else str(data).encode()
        digest.update(f"{pid}\0".encode() + raw)
        size += len(raw)
        by_message.setdefault(mid, []).append({"id": pid, **_json(data, f"part {pid}")})
    out = []
    for mid, data in messages:
        raw = data if isinstance(data, bytes) else str(data).encode()
        digest.update(f"{mid}\0".encode() + raw)
        size += len(raw)
        out.append(({"id": mid, **_json(data, f"message {mid}")}, by_message.get(mid, [])))
    info["bytes"] = size
    return info, out, digest.hexdigest()


def _json(data: Any, what: str) -> dict[str, Any]:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadField(f"{what}: its data is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise BadField(f"{what}: its data is not a JSON object")
    return value


def sniff_document(doc: Any) -> float:
    """A legacy session file: ``{id: "ses_…", projectID, time}``."""
    ok = (isinstance(doc, dict) and isinstance(doc.get("id"), str) and doc["id"].startswith("ses")
          and "projectID" in doc and isinstance(doc.get("time"), dict))
    return 1.0 if ok else 0.0


def sniff(objects: list[dict]) -> float:
    """A legacy session file written on one line (as OpenCode writes it)."""
    return 1.0 if len(objects) == 1 and sniff_document(objects[0]) else 0.0


def _from_files(path: str, doc: dict[str, Any], sha: str) -> tuple[list[Message], str]:
    """A legacy session's messages and their parts, from the storage folder beside its file, and
    the hash of all it was read from: the session file's (``sha``) and each message's and part's
    file, by name (a part written since is another transcript: ``check``, the probe cache)."""
    import hashlib

    storage = Path(path).resolve().parents[2]
    digest = hashlib.sha256(sha.encode())
    out = []
    for f in sorted((storage / "message" / doc["id"]).glob("*.json")):
        message, message_sha = read_document(str(f))
        digest.update(f"\0message/{f.name}\0{message_sha}".encode())
        if not isinstance(message, dict):
            raise BadField(f"{f.name}: not a message object")
        parts = []
        for p in sorted((storage / "part" / str(message.get("id"))).glob("*.json")):
            part, part_sha = read_document(str(p))
            digest.update(f"\0part/{p.parent.name}/{p.name}\0{part_sha}".encode())
            parts.append(part)
        out.append((message, [p for p in parts if isinstance(p, dict)]))
    return sorted(out, key=lambda m: (_created(m[0]), str(m[0].get("id")))), digest.hexdigest()


def _created(message: dict[str, Any]) -> int:
    t = message.get("time")
    c = t.get("created") if isinstance(t, dict) else None
    return c if type(c) is int else 0


def _usage(t: Any, model: Any, when: Any) -> dict[str, Any] | None:
    if not isinstance(t, dict):
        return None
    cache: dict = t["cache"] if isinstance(t.get("cache"), dict) else {}
    usage: dict[str, Any] = {"input_tokens": tokens(t, "input", "tokens"),
                             "cache_read_input_tokens": tokens(cache, "read", "tokens.cache"),
                             "cache_creation_input_tokens": tokens(cache, "write", "tokens.cache"),
                             "output_tokens": tokens(t, "output", "tokens") + tokens(t, "reasoning", "tokens")}
    if not any(usage.values()):
        return None
    if isinstance(model, str) and model:
        usage["model"] = model
    if type(when) is int and when > 0:
        from datetime import datetime, timezone

        usage["timestamp"] = datetime.fromtimestamp(when / 1000, timezone.utc).isoformat().replace("+00:00", "Z")
    return usage


def _text(parts: list[dict[str, Any]]) -> str:
    out = []
    for p in parts:
        if p.get("type") == "text" and isinstance(p.get("text"), str) and not p.get("ignored"):
            out.append(p["text"])
        elif p.get("type") == "file":
            out.append(f"[Attached {p.get('mime', 'file')}: {p.get('filename') or 'file'}]")
    return "\n".join(out)


class _Builder:
    def __init__(self, builder: TranscriptBuilder) -> None:
        self.builder = builder
        self.asked: str | None = None  # a compaction asked for ("auto" / "manual"), its summary awaited
        self.pruned = 0
        self.requests = 0

    def message(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        role = info.get("role")
        if role == "user":
            asked = next((p for p in parts if p.get("type") == "compaction"), None)
            if asked is not None:
                self.asked = "auto" if asked.get("auto") else "manual"
                return
            self.builder.add({"role": "user", "content": [{"type": "text", "text": _text(parts)}]})
        elif role == "assistant" and info.get("summary") and self.asked is not None:
            self.compaction(info, parts)
        elif role == "assistant":
            for step, usage in self.steps(info, parts):
                self.call(info, step, usage)

    def steps(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> list[tuple[list[dict], dict | None]]:
        """The message's calls: its parts split at each step-start, each with its step-finish tokens."""
        steps: list[tuple[list[dict], dict | None]] = []
        current: list[dict] = []
        finished: dict | None = None
        for p in parts:
            kind = p.get("type")
            if kind == "step-start" and (current or finished is not None):
                steps.append((current, finished))
                current, finished = [], None
            elif kind == "step-finish":
                finished = p.get("tokens") if isinstance(p.get("tokens"), dict) else {}
            elif kind in ("text", "reasoning", "tool"):
                current.append(p)
        if current or finished is not None or not steps:
            steps.append((current, finished))
        if steps[-1][1] is None:  # (no step-finish: the message's own tokens, for its last step)
            steps[-1] = (steps[-1][0], info.get("tokens") if isinstance(info.get("tokens"), dict) else None)
        when = info.get("time", {}).get("created") if isinstance(info.get("time"), dict) else None
        return [(blocks, _usage(t, info.get("modelID"), when)) for blocks, t in steps]

    def call(self, info: dict[str, Any], parts: list[dict], usage: dict | None) -> None:
        blocks: list[dict] = []
        results: list[dict] = []
        for p in parts:
            kind = p.get("type")
            if kind == "text" and isinstance(p.get("text"), str):
                blocks.append({"type": "text", "text": p["text"]})
            elif kind == "reasoning" and isinstance(p.get("text"), str):
                blocks.append({"type": "thinking", "thinking": p["text"], "signature": ""})
            elif kind == "tool":
                blocks.append(self.tool(p, results))
        if isinstance(info.get("modelID"), str):
            self.builder.model = info["modelID"]
        self.builder.add({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]}, usage)
        if results:
            self.builder.add({"role": "user", "content": results})

    def tool(self, p: dict[str, Any], results: list[dict]) -> dict:
        state: dict = p["state"] if isinstance(p.get("state"), dict) else {}
        call_id = str(p.get("callID") or p.get("id"))
        args = state.get("input")
        status = state.get("status")
        if status == "completed":
            output = state.get("output")
            text = output if isinstance(output, str) else orjson.dumps(output).decode()
            if isinstance(state.get("time"), dict) and state["time"].get("compacted"):
                self.pruned += 1
            results.append({"type": "tool_result", "tool_use_id": call_id, "content": text})
        else:
            said = state.get("error") if status == "error" else f"the tool did not finish ({status})"
            results.append({"type": "tool_result", "tool_use_id": call_id, "content": str(said), "is_error": True})
        return {"type": "tool_use", "id": call_id, "name": str(p.get("tool") or "tool"),
                "input": args if isinstance(args, dict) else {}}

    def compaction(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        when = info.get("time", {}).get("created") if isinstance(info.get("time"), dict) else None
        stamp = _usage({"output": 1}, None, when)
        self.builder.compacted(_text(parts), trigger=self.asked, time=stamp.get("timestamp") if stamp else None)
        self.asked = None
        self.requests += 1


def load(path: str, *, document: tuple[Any, str] | None = None, **_: object) -> Transcript:
    builder = TranscriptBuilder(path, NAME)
    where = in_store(path)
    try:
        if where is not None:
            info, messages, sha = _from_store(*where)
        else:
            doc, sha = document or read_document(path)
            if not sniff_document(doc):
                raise InputError(f"{path}: not an OpenCode session (no id, projectID and time)")
            info, (messages, sha) = doc, _from_files(path, doc, sha)
    except BadField as exc:
        raise InputError(f"{path}: {exc}") from None
    builder.session_id = str(info.get("id"))
    for key in ("version", "directory", "title"):
        if isinstance(info.get(key), str) and info[key]:
            builder.metadata[key] = info[key]
    if type(info.get("bytes")) is int:
        builder.metadata["bytes"] = info["bytes"]
    b = _Builder(builder)
    for message, parts in messages:
        try:
            b.message(message, parts)
        except BadField as exc:
            raise InputError(f"{path}: message {message.get('id')}: {exc}") from None
    builder.metadata.update(pruned_outputs=b.pruned, compaction_requests=b.requests)
    if not builder.entries:
        raise InputError(f"{path}: an OpenCode session with no message")
    return builder.build(content_hash=sha)


def inspect_facts(transcript: Transcript) -> dict[str, Any]:
    """What inspect adds: the tool outputs OpenCode pruned (sent cleared; read whole here), and
    its compaction requests (their summaries are the recorded compactions)."""
    return {"pruned_outputs": transcript.metadata.get("pruned_outputs", 0),
            "compaction_requests": transcript.metadata.get("compaction_requests", 0)}
