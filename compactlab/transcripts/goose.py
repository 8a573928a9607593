"""Format: Goose sessions (Block's goose): the SQLite store ``sessions/sessions.db`` (under
``~/.local/share/goose``, ``$GOOSE_PATH_ROOT/data``, or macOS's ``~/Library/Application
Support/goose``), a session named ``sessions.db#<id>`` and read as ``stores`` reads every store.

Tables, as third-party readers query them (Goose's schema varies by version; the columns read
here are those every version they read has): ``sessions`` (``id``, ``working_dir``,
``model_config_json``, ``parent_session_id`` where present), ``messages`` (``id``,
``session_id``, ``role``, ``content_json``, ``metadata_json``, ``created_timestamp``) and, in
newer stores, ``usage_ledger`` (one row a model request: ``input_tokens``, ``output_tokens``,
``cache_read_tokens``, ``cache_write_tokens``, ``model``, ``is_compaction``).

What decides correctness:
- Messages in creation order. ``content_json`` is a list of blocks: ``text``, ``thinking``,
  ``toolRequest`` (``id``, ``toolCall.value``: ``name`` and ``arguments``) a tool use,
  ``toolResponse`` (``id``, ``toolResult``: ``status`` ``success`` with ``value`` (its
  ``content``) or ``error``) its result; an image as ``[Image]``.
- ``metadata_json`` says who saw a message: one the user saw is the history; one only the agent
  saw (``userVisible`` false, ``agentVisible`` true) is a summary Goose made when it compacted,
  a RecordedCompaction restarting from it (the flags' meaning inferred from their names: Goose's
  own code was not read). Messages the agent no longer saw after it stay the history replayed.
- Usage: the ledger's requests that are no compaction (``is_compaction`` 0), matched to the
  assistant messages in order where the counts agree; else no call has recorded usage, and the
  store's totals are said (``inspect``).
"""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import InputError
from .model import Transcript, TranscriptBuilder, tokens
from .stores import SEP, columns, connect, in_store

NAME = "goose"
DESCRIPTION = "Goose sessions: its store (~/.local/share/goose/sessions/sessions.db, a session as STORE#SESSION)"

#: the tables that make a SQLite file a Goose store (``stores.format_of``)
TABLES = {"sessions", "messages"}


def store_sessions(store: str) -> list[tuple[str, bool, float, str]]:
    """Each session: (its id, whether it is a sub-session, when last updated (epoch seconds), its
    working folder), in id order."""
    import sqlite3
    from datetime import datetime

    db = connect(store)
    try:
        have = columns(db, "sessions")
        parent = "parent_session_id" if "parent_session_id" in have else "NULL"
        updated = "updated_at" if "updated_at" in have else "''"
        rows = db.execute(f"SELECT id, {parent}, CAST({updated} AS TEXT), COALESCE(working_dir, '') FROM sessions "
                          "ORDER BY id").fetchall()
    except sqlite3.Error as exc:
        raise InputError(f"{store}: its sessions table cannot be read ({exc})") from None
    finally:
        db.close()

    def when(text: str) -> float:
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T")).timestamp()
        except ValueError:
            return 0.0

    return [(str(sid), bool(p), when(str(up or "")), str(folder)) for sid, p, up, folder in rows]


def _read(store: str, session: str) -> tuple[dict[str, Any], list[tuple], list[tuple], str]:
    import sqlite3

    db = connect(store)
    try:
        have = columns(db, "sessions")
        model = "model_config_json" if "model_config_json" in have else "''"
        row = db.execute(f"SELECT id, COALESCE(working_dir, ''), COALESCE({model}, '') FROM sessions WHERE id = ?",
                         (session,)).fetchone()
        if row is None:
            raise InputError(f"{store}{SEP}{session}: no such session in the store",
                             hint=f"compactlab inspect {store} lists its sessions")
        messages = db.execute("SELECT id, COALESCE(role, ''), COALESCE(content_json, '[]'), "
                              "COALESCE(metadata_json, ''), COALESCE(created_timestamp, 0) FROM messages "
                              "WHERE session_id = ? ORDER BY created_timestamp, id", (session,)).fetchall()
        ledger: list[tuple] = []
        if "usage_ledger" in {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}:
            ledger = db.execute("SELECT COALESCE(model, ''), COALESCE(input_tokens, 0), COALESCE(output_tokens, 0), "
                                "COALESCE(cache_read_tokens, 0), COALESCE(cache_write_tokens, 0), "
                                "COALESCE(is_compaction, 0), COALESCE(created_timestamp, 0) FROM usage_ledger "
                                "WHERE session_id = ? ORDER BY created_timestamp, id", (session,)).fetchall()
    except sqlite3.Error as exc:
        raise InputError(f"{store}{SEP}{session}: the store cannot be read ({exc})") from None
    finally:
        db.close()
    info = {"id": row[0], "working_dir": row[1], "model": _model(row[2])}
    import hashlib

    digest = hashlib.sha256(orjson.dumps([list(m) for m in messages]) + orjson.dumps([list(u) for u in ledger]))
    return info, messages, ledger, digest.hexdigest()


def _model(config: str) -> str | None:
    try:
        doc = orjson.loads(config) if config else {}
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    return next((doc[k] for k in ("model_name", "modelName", "model") if isinstance(doc.get(k), str) and doc[k]), None)


def _json(raw: str, default: Any, what: str) -> Any:
    try:
        return orjson.loads(raw) if raw else default
    except orjson.JSONDecodeError:
        raise InputError(f"{what}: not JSON") from None


def _blocks(content: list, role: str) -> list[dict]:
    out: list[dict] = []
    for b in content:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text" and isinstance(b.get("text"), str):
            out.append({"type": "text", "text": b["text"]})
        elif kind == "thinking":
            out.append({"type": "thinking", "thinking": str(b.get("thinking") or ""), "signature": ""})
        elif kind in ("toolRequest", "frontendToolRequest"):
            value = ((b.get("toolCall") or {}).get("value") or {}) if isinstance(b.get("toolCall"), dict) else {}
            args = value.get("arguments") if isinstance(value, dict) else None
            out.append({"type": "tool_use", "id": str(b.get("id")), "name": str(value.get("name") or "tool"),
                        "input": args if isinstance(args, dict) else {}})
        elif kind == "toolResponse":
            out.append(_response(b))
        elif kind == "image":
            out.append({"type": "text", "text": "[Image]"})
    if role == "assistant":
        out = [b for b in out if b["type"] != "tool_result"]
    return out


def _response(b: dict) -> dict:
    result: dict = b["toolResult"] if isinstance(b.get("toolResult"), dict) else {}
    if result.get("status") == "error":
        return {"type": "tool_result", "tool_use_id": str(b.get("id")), "content": str(result.get("error") or ""),
                "is_error": True}
    value = result.get("value")
    content = value.get("content") if isinstance(value, dict) else value
    texts = [c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)] \
        if isinstance(content, list) else None
    text = "\n".join(texts) if texts is not None else ("" if content is None else
                                                       content if isinstance(content, str) else
                                                       orjson.dumps(content).decode())
    return {"type": "tool_result", "tool_use_id": str(b.get("id")), "content": text}


def load(path: str, **_: object) -> Transcript:
    where = in_store(path)
    if where is None:
        raise InputError(f"{path}: not a session of a Goose store (STORE{SEP}SESSION)")
    info, messages, ledger, sha = _read(*where)
    builder = TranscriptBuilder(path, NAME)
    builder.session_id = info["id"]
    builder.model = info["model"]
    if info["working_dir"]:
        builder.metadata["cwd"] = info["working_dir"]
    requests = [u for u in ledger if not u[5]]
    assistants = sum(1 for m in messages if str(m[1]).lower() == "assistant")
    usage = iter(requests) if requests and len(requests) == assistants else None
    for mid, role, content_json, meta_json, _created in messages:
        content = _json(content_json, [], f"{path}: message {mid}'s content_json")
        meta = _json(meta_json, {}, f"{path}: message {mid}'s metadata_json")
        if not isinstance(content, list):
            raise InputError(f"{path}: message {mid}'s content_json is not a list of blocks")
        role = str(role).lower()
        if role not in ("user", "assistant"):
            continue
        seen_by_user = not isinstance(meta, dict) or meta.get("userVisible", True) is not False
        if not seen_by_user:  # (only the agent saw it: the summary of a compaction)
            text = "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
            builder.compacted(text, trigger="auto")
            continue
        blocks = _blocks(content, role)
        u = next(usage) if usage is not None and role == "assistant" else None
        builder.add({"role": role, "content": blocks or [{"type": "text", "text": ""}]}, _usage(u, info["model"]))
    builder.metadata.update(compaction_requests=sum(1 for u in ledger if u[5]), usage_matched=usage is not None)
    if not builder.entries:
        raise InputError(f"{path}: a Goose session with no message")
    return builder.build(content_hash=sha)


def _usage(u: tuple | None, model: str | None) -> dict[str, Any] | None:
    if u is None:
        return None
    m, inp, out, read, write = u[:5]
    raw = {"i": inp, "o": out, "r": read, "w": write}
    usage: dict[str, Any] = {"input_tokens": tokens(raw, "i", "usage_ledger"),
                             "cache_read_input_tokens": tokens(raw, "r", "usage_ledger"),
                             "cache_creation_input_tokens": tokens(raw, "w", "usage_ledger"),
                             "output_tokens": tokens(raw, "o", "usage_ledger")}
    if m or model:
        usage["model"] = m or model
    return usage if any(v for k, v in usage.items() if k != "model") else None


def inspect_facts(transcript: Transcript) -> dict[str, Any]:
    """What inspect adds: Goose's compaction requests (in its usage ledger), and whether the
    ledger's requests matched the calls (else no call has recorded usage)."""
    return {"compaction_requests": transcript.metadata.get("compaction_requests", 0),
            "calls_usage": ("the usage ledger's requests, one a call" if transcript.metadata.get("usage_matched")
                            else "estimated: the ledger's requests do not match the calls one to one")}
