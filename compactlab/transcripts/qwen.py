"""Format: Qwen Code chat recordings (QwenLM/qwen-code; ``~/.qwen/projects/<project>/chats/<session>.jsonl``),
as its ChatRecordingService writes them: one ``ChatRecord`` a line, ``{uuid, parentUuid, sessionId,
timestamp, type, subtype?, cwd, version, model?, message?, usageMetadata?, systemPayload?}``.

What decides correctness:
- The conversation is the chain of ``parentUuid`` from the last record back to the first (a
  rewind re-roots it: records off the chain are left out, counted); records of a subagent
  (``isSidechain``) are another conversation and left out.
- ``message.parts`` are Gemini parts: ``text`` (``thought: true``: a thinking block),
  ``functionCall`` (``id``, ``name``, ``args``: a tool_use) and ``functionResponse`` (``id``,
  ``response``: its tool_result). A ``user`` record is a user turn; an ``assistant`` record is one
  model call; ``tool_result`` records after a call are gathered into one user message.
- An assistant record's ``usageMetadata`` is the call's usage: ``promptTokenCount`` is the whole
  prompt (``cachedContentTokenCount``, the cache reads, included: Qwen Code normalises every
  provider's count to that), ``candidatesTokenCount`` plus ``thoughtsTokenCount`` the output
  (thinking is billed as output); Qwen Code reports no cache writes apart.
- A ``system`` record of subtype ``chat_compression`` is a compression Qwen Code did
  (``systemPayload.info``: ``originalTokenCount``, ``newTokenCount``; ``compressedHistory``: the
  history it went on with): a RecordedCompaction whose summary is that history as one user
  message, its tokens before the original count. Other system records (telemetry, slash
  commands, snapshots) are the CLI's own.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import InputError
from .gemini_cli import gemini_usage
from .model import BadField, Transcript, TranscriptBuilder, leaf_path
from .reader import Head, LineReader

NAME = "qwen"
DESCRIPTION = "Qwen Code chat recordings (~/.qwen/projects/<project>/chats/<session>.jsonl)"

TYPES = {"user", "assistant", "tool_result", "system"}


def _record(o: dict) -> bool:
    return o.get("type") in TYPES and isinstance(o.get("uuid"), str) and "sessionId" in o


def _gemini_shaped(o: dict) -> bool:
    m = o.get("message")
    return (isinstance(m, dict) and isinstance(m.get("parts"), list)) or "usageMetadata" in o or "systemPayload" in o


def sniff(objects: list[dict]) -> float:
    if not objects or not any(_record(o) and _gemini_shaped(o) for o in objects):
        return 0.0
    return sum(1 for o in objects if _record(o)) / len(objects)


def _parts(message: Any) -> list:
    parts = message.get("parts") if isinstance(message, dict) else None
    if parts is None:
        return []
    if not isinstance(parts, list):
        raise BadField(f"message.parts is {type(parts).__name__}, not a list")
    return parts


def _response_text(response: Any) -> str:
    if isinstance(response, dict) and set(response) <= {"output", "error"}:
        said = response.get("output", response.get("error"))
        if isinstance(said, str):
            return said
    return response if isinstance(response, str) else orjson.dumps(response).decode()


def _text(content: Any) -> str:
    """A Gemini Content's (or a list of them) text: every part's text, else the part as JSON."""
    items = content if isinstance(content, list) else [content]
    out = []
    for c in items:
        for p in _parts(c) if isinstance(c, dict) and "parts" in c else [c]:
            out.append(p["text"] if isinstance(p, dict) and isinstance(p.get("text"), str) else orjson.dumps(p).decode())
    return "\n".join(out)


#: a Qwen Code record's usageMetadata names of the prompt, cached, output and thoughts counts
USAGE_KEYS = ("promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount", "thoughtsTokenCount")


def _usage(o: dict) -> dict[str, Any] | None:
    model = o["model"] if isinstance(o.get("model"), str) and o["model"] else None
    return gemini_usage(o.get("usageMetadata"), model, o.get("timestamp"), USAGE_KEYS, "usageMetadata")


class _Reader:
    def __init__(self, builder: TranscriptBuilder) -> None:
        self.builder = builder
        self.results: list[dict] = []

    def flush(self) -> None:
        if self.results:
            self.builder.add({"role": "user", "content": list(self.results)})
            self.results.clear()

    def record(self, o: dict) -> None:
        kind = o.get("type")
        if kind == "tool_result":
            for p in _parts(o.get("message")):
                r = p.get("functionResponse") if isinstance(p, dict) else None
                if isinstance(r, dict):
                    failed = isinstance(r.get("response"), dict) and "error" in r["response"]
                    self.results.append({"type": "tool_result", "tool_use_id": str(r.get("id")),
                                         "content": _response_text(r.get("response")),
                                         **({"is_error": True} if failed else {})})
            return
        if kind == "user":
            self.flush()
            self.builder.add({"role": "user", "content": [{"type": "text", "text": _text(o.get("message"))}]})
        elif kind == "assistant":
            self.flush()
            self.assistant(o)
        elif kind == "system" and o.get("subtype") == "chat_compression":
            self.flush()
            self.compression(o)

    def assistant(self, o: dict) -> None:
        blocks: list[dict] = []
        for p in _parts(o.get("message")):
            if not isinstance(p, dict):
                continue
            call = p.get("functionCall")
            if isinstance(call, dict):
                args = call.get("args")
                blocks.append({"type": "tool_use", "id": str(call.get("id")), "name": str(call.get("name") or "tool"),
                               "input": args if isinstance(args, dict) else {}})
            elif isinstance(p.get("text"), str):
                blocks.append({"type": "thinking", "thinking": p["text"], "signature": ""} if p.get("thought") else
                              {"type": "text", "text": p["text"]})
        if isinstance(o.get("model"), str) and o["model"]:
            self.builder.model = o["model"]
        self.builder.add({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]}, _usage(o))

    def compression(self, o: dict) -> None:
        payload = o.get("systemPayload")
        if not isinstance(payload, dict):
            raise BadField("a chat_compression record without its systemPayload")
        info: dict = payload["info"] if isinstance(payload.get("info"), dict) else {}
        self.builder.compacted(_text(payload.get("compressedHistory") or []), pre_tokens=info.get("originalTokenCount"),
                               time=o.get("timestamp"))


def load(path: str, *, skip_bad_lines: bool = False, head: Head | None = None, **_: object) -> Transcript:
    reader = LineReader(path, skip_bad_lines=skip_bad_lines, head=head)
    builder = TranscriptBuilder(path, NAME)
    records: list[dict] = []
    sidechain = 0
    for lineno, o in reader.objects():
        if not _record(o):
            reader.bad(lineno, f"not a Qwen Code record (type {orjson.dumps(o.get('type')).decode()[:30]})")
        elif o.get("isSidechain"):
            sidechain += 1
        else:
            records.append(o)
    if not records:
        raise InputError(f"{path}: a Qwen Code recording with no record of its own conversation")
    chain, off = leaf_path(records, "uuid", "parentUuid")
    first = chain[0]
    builder.session_id = first.get("sessionId") if isinstance(first.get("sessionId"), str) else None
    for key in ("version", "cwd"):
        if isinstance(first.get(key), str):
            builder.metadata[key] = first[key]
    builder.metadata.update(off_chain_records=off, sidechain_records=sidechain)
    windows = [o["contextWindowSize"] for o in chain if type(o.get("contextWindowSize")) is int and o["contextWindowSize"] > 0]
    if windows:  # (the window Qwen Code itself used: the user's override, or the model's token limit)
        builder.metadata["model_context_window"] = windows[-1]
    r = _Reader(builder)
    for o in chain:
        try:
            r.record(o)
        except BadField as exc:
            raise InputError(f"{path}: record {str(o.get('uuid'))[:40]}: {exc}") from None
    r.flush()
    if not builder.entries:
        raise InputError(f"{path}: a Qwen Code recording with no user or model message")
    return builder.build(skipped_lines=reader.skipped)


def inspect_facts(transcript: Transcript) -> dict[str, Any]:
    """What inspect adds: records off the conversation's chain (a rewind) and a subagent's."""
    return {"off_chain_records": transcript.metadata.get("off_chain_records", 0),
            "sidechain_records": transcript.metadata.get("sidechain_records", 0)}
