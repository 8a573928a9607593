"""Format: GitHub Copilot CLI sessions (``~/.copilot/session-state/<id>/events.jsonl``): one event a
line, ``{type, timestamp, data}``.

What decides correctness:
- ``user.message`` (``content``) is a user turn; ``assistant.message`` is one model call: its
  ``reasoningText`` a thinking block, its ``content``, and its ``toolRequests`` (``toolCallId``,
  ``toolName`` or ``name``, ``arguments``) tool uses; ``tool.execution_complete`` (``toolCallId``,
  ``success``, ``result.content`` or ``error``) is a tool's result, gathered after its call.
  Streaming deltas (``assistant.message.delta``) and turn, hook and telemetry events are not
  messages.
- The model is ``session.start``'s ``context.model``, then each ``session.model_change``'s
  ``newModel`` (a ``tool.execution_complete`` may name it too); its ``provider/`` prefix is dropped.
- **Usage**: the events record each call's ``outputTokens`` only; the prompt's tokens are in
  ``session.shutdown`` as totals per model (``modelMetrics.<model>.usage``: ``inputTokens``,
  ``cacheReadTokens``, ``cacheWriteTokens``, ``outputTokens``). So no call carries recorded
  usage (its prompt is estimated, and said so); the session's totals are kept for ``inspect``.
  Per-call tokens are in Copilot CLI's opt-in OpenTelemetry file export, which is not read here.
- ``session.compaction_complete`` (``summaryContent``, ``postCompactionTokens``) is a compaction
  Copilot CLI did: a RecordedCompaction restarting from its summary.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..errors import InputError
from .model import Transcript, TranscriptBuilder, tokens
from .reader import Head, LineReader

NAME = "copilot"
DESCRIPTION = "GitHub Copilot CLI sessions (~/.copilot/session-state/<id>/events.jsonl)"

KNOWN = ("session.", "user.", "assistant.", "tool.", "hook.", "subagent.", "skill.")


def _event(o: dict) -> bool:
    t = o.get("type")
    return isinstance(t, str) and t.startswith(KNOWN) and isinstance(o.get("data"), dict) and "timestamp" in o


def sniff(objects: list[dict]) -> float:
    if not objects or not any(o.get("type") in ("session.start", "user.message", "assistant.message") and _event(o)
                              for o in objects):
        return 0.0
    return sum(1 for o in objects if _event(o)) / len(objects)


def _model(name: Any) -> str | None:
    return name.rsplit("/", 1)[-1] if isinstance(name, str) and name else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else orjson.dumps(value).decode()


class _Reader:
    def __init__(self, builder: TranscriptBuilder) -> None:
        self.builder = builder
        self.results: list[dict] = []
        self.model: str | None = None
        self.outputs: list[int] = []  # each call's recorded output tokens
        self.totals: dict[str, dict[str, int]] = {}

    def flush(self) -> None:
        if self.results:
            self.builder.add({"role": "user", "content": list(self.results)})
            self.results.clear()

    def event(self, kind: str, d: dict, stamp: Any) -> None:
        if kind == "session.start":
            context: dict = d["context"] if isinstance(d.get("context"), dict) else {}
            self.builder.session_id = d.get("sessionId") if isinstance(d.get("sessionId"), str) else None
            self.model = _model(context.get("model")) or self.model
            if isinstance(context.get("cwd"), str):
                self.builder.metadata["cwd"] = context["cwd"]
        elif kind == "session.model_change":
            self.model = _model(d.get("newModel")) or self.model
        elif kind == "user.message":
            self.flush()
            self.builder.add({"role": "user", "content": [{"type": "text", "text": _text(d.get("content"))}]})
        elif kind == "assistant.message":
            self.flush()
            self.assistant(d)
        elif kind == "tool.execution_complete":
            self.model = _model(d.get("model")) or self.model
            result: dict = d["result"] if isinstance(d.get("result"), dict) else {}
            failed = d.get("success") is False
            said = result.get("content") if "content" in result else d.get("error", result)
            self.results.append({"type": "tool_result", "tool_use_id": str(d.get("toolCallId")), "content": _text(said),
                                 **({"is_error": True} if failed else {})})
        elif kind == "session.compaction_complete":
            self.flush()
            self.builder.compacted(_text(d.get("summaryContent")), time=stamp)
        elif kind == "session.shutdown" and isinstance(d.get("modelMetrics"), dict):
            for model, m in d["modelMetrics"].items():
                u: dict = m["usage"] if isinstance(m, dict) and isinstance(m.get("usage"), dict) else {}
                self.totals[str(model)] = {k: tokens(u, k, "modelMetrics usage") for k in
                                           ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens")}

    def assistant(self, d: dict) -> None:
        blocks: list[dict] = []
        if isinstance(d.get("reasoningText"), str) and d["reasoningText"]:
            blocks.append({"type": "thinking", "thinking": d["reasoningText"], "signature": ""})
        if isinstance(d.get("content"), str) and d["content"]:
            blocks.append({"type": "text", "text": d["content"]})
        for r in d.get("toolRequests") or []:
            if isinstance(r, dict):
                args = r.get("arguments")
                blocks.append({"type": "tool_use", "id": str(r.get("toolCallId")),
                               "name": str(r.get("toolName") or r.get("name") or "tool"),
                               "input": args if isinstance(args, dict) else {"arguments": args}})
        if self.model:
            self.builder.model = self.model
        self.builder.add({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]})
        self.outputs.append(tokens(d, "outputTokens", "assistant.message"))


def load(path: str, *, skip_bad_lines: bool = False, head: Head | None = None, **_: object) -> Transcript:
    reader = LineReader(path, skip_bad_lines=skip_bad_lines, head=head)
    builder = TranscriptBuilder(path, NAME)
    r = _Reader(builder)
    for lineno, o in reader.objects():
        if not _event(o):
            reader.bad(lineno, f"not a Copilot CLI event (type {orjson.dumps(o.get('type')).decode()[:30]})")
            continue
        r.event(o["type"], o["data"], o.get("timestamp"))
    r.flush()
    builder.metadata.update(recorded_output_tokens=r.outputs, session_totals=r.totals)
    if not builder.entries:
        raise InputError(f"{path}: a Copilot CLI session with no user or assistant message")
    return builder.build(skipped_lines=reader.skipped)


def inspect_facts(transcript: Transcript) -> dict[str, Any]:
    """What inspect adds: the session's recorded totals by model (Copilot CLI records no call's
    prompt tokens), and the output tokens its calls recorded."""
    outputs = transcript.metadata.get("recorded_output_tokens") or []
    return {"session_totals": transcript.metadata.get("session_totals") or {},
            "recorded_output_tokens": sum(outputs), "calls_usage": "estimated: the session records totals only"}
