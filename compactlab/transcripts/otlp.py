"""Format: OpenTelemetry traces with the GenAI semantic conventions (one OTLP/JSON document with
``resourceSpans`` and ``resourceLogs``, a Tempo export's ``batches``, or a Jaeger export's ``data``).

What decides correctness:
- **A call is a logical model call**: a span whose ``gen_ai.operation.name`` is a model operation
  (``chat``, ``generate_content``, ``text_completion``, ``responses``), or one that carries
  ``gen_ai.usage.*`` or the indexed ``gen_ai.prompt.N.*`` without being an agent, tool or workflow
  span. A model span with a model span below it is a wrapper of the same call (ADK's ``call_llm``
  over ``generate_content``): the call is the innermost one, its content and usage taken from it,
  else from its wrappers. Calls are ordered by start time. Spans that are not GenAI semantic
  conventions are never calls (Claude Code's own ``claude_code.llm_request``).
- **What the model saw** is read, first found, from ``gen_ai.system_instructions`` /
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON parts: ``text``, ``tool_call``,
  ``tool_call_response``, ``reasoning``), ADK's ``gcp.vertex.agent.llm_request`` /
  ``llm_response`` (Gemini contents), the older indexed ``gen_ai.prompt.N.*`` /
  ``gen_ai.completion.N.*``, or the log events joined to the span by its id
  (``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
  ``gen_ai.tool.message``, ``gen_ai.choice``). ``<elided>`` is no content.
- **One conversation**: each call's input is its whole context; the messages it adds to the
  conversation so far (after their common start) are appended, then its reply. A call whose input
  does not continue the conversation (another agent after a handoff) has its new messages appended
  all the same: the replay sees one growing context.
- **Tool calls** pair with their results by id; parts without ids (Gemini's) are numbered per tool
  name in order, the n-th result of a name answering its n-th call.
- **Usage** from ``gen_ai.usage.input_tokens`` (the whole prompt, cached tokens included),
  ``output_tokens``, ``cache_read.input_tokens`` and ``cache_creation.input_tokens`` (and the older
  ``prompt_tokens`` / ``completion_tokens``); the model from ``gen_ai.response.model``, else
  ``gen_ai.request.model``.
- **A session** is what shares ``gen_ai.conversation.id`` (else a trace); a file of several
  is replayed one session after the other, and says so.
- **Content capture off**: a call with usage but no content is replayed on sizes alone. What it
  added and what it replied are sized placeholders (``messages.sized_placeholder``) of 4
  characters a token of its usage (the input it added: its input tokens less the previous call's
  input and output), and the tools executed after it (``execute_tool`` spans: names, and arguments
  and results where captured) are its tool calls. No text is invented; the transcript says so.
- **No model call at all** but agent spans with content (``invoke_agent`` with input and output
  messages, as kagent's Claude harness records): each top-level agent invocation is one call, its
  usage unknown.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import Any, Optional

import orjson

from ..errors import InputError
from ..plain import NamedTuple
from .messages import Message, sized_placeholder
from .model import BadField, Transcript, TranscriptBuilder, tokens
from .reader import read_document

NAME = "otlp"
DESCRIPTION = "OpenTelemetry GenAI traces (OTLP/JSON with resourceSpans/resourceLogs, a Tempo or Jaeger export)"

MODEL_OPERATIONS = frozenset({"chat", "generate_content", "text_completion", "completion", "responses"})
NOT_MODEL = frozenset({"invoke_agent", "execute_tool", "invoke_workflow", "create_agent", "embeddings"})
ELIDED = "<elided>"
#: characters a token, to size what content capture left out
CHARS_PER_TOKEN = 4
#: log event names of message content (the older GenAI events)
EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user", "gen_ai.assistant.message": "assistant",
               "gen_ai.tool.message": "tool", "gen_ai.choice": "choice"}


def sniff(objects: list[dict]) -> float:
    """A document written on one line reads as one object: sniffed as the document."""
    return sniff_document(objects[0]) if len(objects) == 1 else 0.0


def sniff_document(doc: Any) -> float:
    if not isinstance(doc, dict):
        return 0.0
    if isinstance(doc.get("resourceSpans"), list) or isinstance(doc.get("resourceLogs"), list):
        return 1.0
    if isinstance(doc.get("batches"), list):
        return 0.9
    data = doc.get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict) and "traceID" in data[0] and "spans" in data[0]:
        return 0.9
    return 0.0


class Span:
    """One span: ids, name, times (ns), attributes, events (name, attributes), children."""

    __slots__ = ("id", "parent", "trace", "name", "start", "end", "attrs", "events", "children")

    def __init__(self, id: str, parent: str | None, trace: str, name: str, start: int, end: int,
                 attrs: dict[str, Any], events: list[tuple[str, dict[str, Any]]] | None = None) -> None:
        self.id, self.parent, self.trace, self.name = id, parent, trace, name
        self.start, self.end, self.attrs = start, end, attrs
        self.events = events or []
        self.children: list[Span] = []

    @property
    def key(self) -> str:
        """The span as its trace knows it: span ids are unique in a trace only."""
        return f"{self.trace}/{self.id}"

    @property
    def parent_key(self) -> str:
        return f"{self.trace}/{self.parent}"

    @property
    def operation(self) -> str:
        op = self.attrs.get("gen_ai.operation.name")
        return op if isinstance(op, str) else ""


class _Shapes:
    """Where an OTLP document holds a list or an object, it must: a number there is damage, a bad
    record naming the field (exit 2), or with ``skip`` (--skip-bad-lines) a record skipped and
    counted."""

    def __init__(self, skip: bool) -> None:
        self.skip, self.skipped = skip, 0

    def items(self, v: Any, field: str) -> list:
        if v is None:
            return []
        if isinstance(v, list):
            return v
        return self.bad(field, v, "a list")

    def bad(self, field: str, v: Any, what: str) -> list:
        if self.skip:
            self.skipped += 1
            return []
        try:
            shown = orjson.dumps(v, default=str).decode()
        except TypeError:  # (an integer past 64 bits)
            shown = str(v)
        raise BadField(f"{field} is {shown[:40]}, not {what}")


def value(v: Any, shapes: _Shapes | None = None) -> Any:
    """An OTLP AnyValue as a plain value."""
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        raw = v["intValue"]
        try:
            return int(raw)
        except (TypeError, ValueError):
            return raw
    shapes = shapes or _Shapes(False)
    for key in ("arrayValue", "kvlistValue"):
        if key in v and v[key] is not None and not isinstance(v[key], dict):
            shapes.bad(key, v[key], "an object")
            return None
    if "arrayValue" in v:
        return [value(x, shapes) for x in shapes.items((v["arrayValue"] or {}).get("values"), "arrayValue.values")]
    if "kvlistValue" in v:
        return {kv.get("key"): value(kv.get("value"), shapes)
                for kv in shapes.items((v["kvlistValue"] or {}).get("values"), "kvlistValue.values")
                if isinstance(kv, dict)}
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attributes(items: Any, shapes: _Shapes | None = None) -> dict[str, Any]:
    if not isinstance(items, list):
        return {}
    return {a["key"]: value(a.get("value"), shapes) for a in items
            if isinstance(a, dict) and isinstance(a.get("key"), str)}


def _fields(items: Any) -> dict[str, Any]:
    """Jaeger's tags or log fields ``[{key, type, value}]`` as a dict."""
    if not isinstance(items, list):
        return {}
    return {str(f["key"]): f.get("value") for f in items if isinstance(f, dict) and isinstance(f.get("key"), str)}


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return 0


def spans_of(doc: dict[str, Any], path: str, shapes: _Shapes | None = None
             ) -> tuple[list[Span], list[tuple[str, str, dict[str, Any]]]]:
    """The spans of a document, and its log records as (``trace/span`` id, event name, body and
    attributes; ``*/span`` for a record that names no trace)."""
    shapes = shapes or _Shapes(False)
    if "data" in doc and "resourceSpans" not in doc and "batches" not in doc:  # a Jaeger export
        return _jaeger_spans(doc, shapes), []
    return _otlp_spans(doc, shapes), _log_records(doc, shapes)


def _jaeger_spans(doc: dict[str, Any], shapes: _Shapes) -> list[Span]:
    items = shapes.items
    spans: list[Span] = []
    for trace in items(doc.get("data"), "data"):
        if not isinstance(trace, dict):
            continue
        for s in items(trace.get("spans"), "data[].spans"):
            if not isinstance(s, dict):
                continue
            refs = [r.get("spanID") for r in items(s.get("references"), "spans[].references") if isinstance(r, dict)
                    and r.get("refType") == "CHILD_OF"]
            start = _int(s.get("startTime")) * 1000
            events = [(str(_fields(lg.get("fields")).get("event", "")), _fields(lg.get("fields")))
                      for lg in items(s.get("logs"), "spans[].logs") if isinstance(lg, dict)]
            spans.append(Span(str(s.get("spanID")), refs[0] if refs else None, str(s.get("traceID")),
                              str(s.get("operationName") or ""), start, start + _int(s.get("duration")) * 1000,
                              _fields(s.get("tags")), events))
    return spans


def _otlp_spans(doc: dict[str, Any], shapes: _Shapes) -> list[Span]:
    items = shapes.items
    spans: list[Span] = []
    top = "resourceSpans" if doc.get("resourceSpans") is not None else "batches"
    for rs in items(doc.get(top), top):
        if not isinstance(rs, dict):
            raise BadField("a resourceSpans item is not an object")
        scope_key = "scopeSpans" if rs.get("scopeSpans") is not None else "instrumentationLibrarySpans"
        for ss in items(rs.get(scope_key), f"{top}[].{scope_key}"):
            for s in items(ss.get("spans"), f"{scope_key}[].spans") if isinstance(ss, dict) else []:
                if not isinstance(s, dict):
                    continue
                events = [(str(e.get("name") or ""), _attributes(e.get("attributes"), shapes))
                          for e in items(s.get("events"), "spans[].events") if isinstance(e, dict)]
                spans.append(Span(str(s.get("spanId")), s.get("parentSpanId") or None, str(s.get("traceId")),
                                  str(s.get("name") or ""), _int(s.get("startTimeUnixNano")),
                                  _int(s.get("endTimeUnixNano")), _attributes(s.get("attributes"), shapes), events))
    return spans


def _log_records(doc: dict[str, Any], shapes: _Shapes) -> list[tuple[str, str, dict[str, Any]]]:
    items = shapes.items
    logs: list[tuple[str, str, dict[str, Any]]] = []
    for rl in items(doc.get("resourceLogs"), "resourceLogs"):
        for sl in items(rl.get("scopeLogs"), "resourceLogs[].scopeLogs") if isinstance(rl, dict) else []:
            for r in items(sl.get("logRecords"), "scopeLogs[].logRecords") if isinstance(sl, dict) else []:
                if not isinstance(r, dict) or not r.get("spanId"):
                    continue
                attrs = _attributes(r.get("attributes"), shapes)
                name = r.get("eventName") or attrs.get("event.name") or ""
                body = value(r.get("body"), shapes)
                logs.append((f"{r.get('traceId') or '*'}/{r['spanId']}", str(name),
                             {**attrs, **(body if isinstance(body, dict) else {"content": body})}))
    return logs


# -- messages ----------------------------------------------------------------------------------


class _Ids:
    """Ids for tool calls and results that carry none: the n-th call of a name is ``name#n``, and
    the n-th result of that name answers it."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.results: dict[str, int] = {}

    def call(self, name: str, given: Any) -> str:
        self.calls[name] = self.calls.get(name, 0) + 1
        return str(given) if given else f"{name}#{self.calls[name]}"

    def result(self, name: str, given: Any) -> str:
        self.results[name] = self.results.get(name, 0) + 1
        return str(given) if given else f"{name}#{self.results[name]}"


def _json(v: Any) -> Any:
    """A JSON text as its value (attributes often hold JSON as a string); else as it is."""
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return orjson.loads(v)
        except orjson.JSONDecodeError:
            return v
    return v


def _text(v: Any) -> str:
    return v if isinstance(v, str) else "" if v is None else orjson.dumps(v).decode()


def _parts_message(m: Any, ids: _Ids) -> tuple[str, list[dict]] | None:
    """A semantic-conventions message ``{role, parts}`` (or ``{role, content}``) as (role, blocks)."""
    if not isinstance(m, dict):
        return None
    role = str(m.get("role") or "user")
    blocks: list[dict] = []
    parts = m.get("parts")
    if not isinstance(parts, list):
        content = m.get("content")
        parts = [{"type": "text", "content": content}] if content not in (None, "") else []
        for c in m.get("tool_calls") or []:  # (the older event bodies)
            if isinstance(c, dict):
                f: dict[str, Any] = c["function"] if isinstance(c.get("function"), dict) else c
                parts.append({"type": "tool_call", "id": c.get("id"), "name": f.get("name"),
                              "arguments": f.get("arguments")})
        if role == "tool":
            parts = [{"type": "tool_call_response", "id": m.get("id") or m.get("tool_call_id"),
                      "response": m.get("content")}]
    for p in parts:
        if not isinstance(p, dict):
            continue
        kind = p.get("type")
        if kind == "text":
            if p.get("content") == ELIDED:
                return None
            blocks.append({"type": "text", "text": _text(p.get("content"))})
        elif kind == "tool_call":
            name = str(p.get("name") or "tool")
            args = _json(p.get("arguments"))
            blocks.append({"type": "tool_use", "id": ids.call(name, p.get("id")), "name": name,
                           "input": args if isinstance(args, dict) else {"arguments": args} if args is not None else {}})
        elif kind == "tool_call_response":
            result = p.get("response", p.get("result"))
            blocks.append({"type": "tool_result", "tool_use_id": ids.result(str(p.get("name") or ""), p.get("id")),
                           "content": _text(result)})
        elif kind == "reasoning":
            blocks.append({"type": "thinking", "thinking": _text(p.get("content")), "signature": ""})
        else:
            blocks.append({"type": "text", "text": orjson.dumps(p).decode()})
    return role, blocks


def _gemini_message(c: Any, ids: _Ids) -> tuple[str, list[dict]] | None:
    """A Gemini ``{role, parts}`` content (ADK's llm_request / llm_response) as (role, blocks)."""
    if not isinstance(c, dict):
        return None
    role = "assistant" if c.get("role") == "model" else "user"
    blocks: list[dict] = []
    for p in c.get("parts") or []:
        if not isinstance(p, dict):
            continue
        call = p.get("function_call") or p.get("functionCall")
        response = p.get("function_response") or p.get("functionResponse")
        if isinstance(call, dict):
            name = str(call.get("name") or "tool")
            args = call.get("args")
            blocks.append({"type": "tool_use", "id": ids.call(name, call.get("id")), "name": name,
                           "input": args if isinstance(args, dict) else {}})
        elif isinstance(response, dict):
            name = str(response.get("name") or "")
            blocks.append({"type": "tool_result", "tool_use_id": ids.result(name, response.get("id")),
                           "content": _text(response.get("response"))})
        elif p.get("thought") and isinstance(p.get("text"), str):
            blocks.append({"type": "thinking", "thinking": p["text"], "signature": ""})
        elif isinstance(p.get("text"), str):
            blocks.append({"type": "text", "text": p["text"]})
    return role, blocks


def _as_messages(pairs: list[tuple[str, list[dict]]]) -> list[Message]:
    """(role, blocks) pairs as API messages: tool results in user messages before their text,
    consecutive messages of one role merged."""
    out: list[Message] = []
    for role, blocks in pairs:
        if role == "system" or not blocks:
            continue
        role = "assistant" if role in ("assistant", "model", "choice") else "user"
        if role == "user":
            blocks = [b for b in blocks if b["type"] == "tool_result"] + [b for b in blocks if b["type"] != "tool_result"]
        if out and out[-1]["role"] == role:
            merged = out[-1]["content"] + blocks
            if role == "user":
                merged = [b for b in merged if b["type"] == "tool_result"] + [b for b in merged if b["type"] != "tool_result"]
            out[-1] = {"role": role, "content": merged}
        else:
            out.append({"role": role, "content": blocks})
    return out


class Content:
    """What one span says the model saw and replied (None: not captured)."""

    __slots__ = ("system", "inputs", "output")

    def __init__(self, system: str | None = None) -> None:
        self.system = system
        self.inputs: list[Message] | None = None
        self.output: list[dict] | None = None  # the reply's blocks


#: what a reader of one shape of a span's input gives: (its system prompt, the messages), or None
Inputs = Optional[tuple[Optional[str], list]]
Logs = list[tuple[str, dict[str, Any]]]


def content_of(span: Span, logs: Logs) -> Content:
    """A model span's input messages, system prompt and output, from whichever shape recorded them
    (each shape a reader of its own, tried in turn: the first that reads the span whole wins). The
    readers share ``ids``, the tool ids given so far, in this order."""
    a = span.attrs
    ids = _Ids()
    c = Content(system=_system_attribute(a))
    for read_inputs in _INPUT_READERS:
        got = read_inputs(a, logs, ids)
        if got is not None:
            c.system = c.system or got[0]
            c.inputs = got[1]
            break
    for read_output in _OUTPUT_READERS:
        c.output = read_output(a, logs, ids)
        if c.output is not None:
            break
    return c


def _system_attribute(a: dict[str, Any]) -> str | None:
    system = _json(a.get("gen_ai.system_instructions"))
    if isinstance(system, list):
        return "\n".join(_text(p.get("content")) for p in system if isinstance(p, dict)) or None
    return system if isinstance(system, str) and system != ELIDED else None


def _system_of(pairs: list[tuple[str, list[dict]]]) -> str | None:
    return "\n".join(b.get("text", "") for r, bs in pairs if r == "system" for b in bs) or None


def _inputs_messages(a: dict[str, Any], logs: Logs, ids: _Ids) -> Inputs:
    """``gen_ai.input.messages`` (the current conventions), every message readable."""
    inputs = _json(a.get("gen_ai.input.messages"))
    if not isinstance(inputs, list):
        return None
    pairs = [p for m in inputs if (p := _parts_message(m, ids)) is not None]
    return (_system_of(pairs), _as_messages(pairs)) if len(pairs) == len(inputs) else None


def _inputs_vertex(a: dict[str, Any], logs: Logs, ids: _Ids) -> Inputs:
    """Google ADK's ``gcp.vertex.agent.llm_request`` (Gemini contents; the system instruction in its config)."""
    request = _json(a.get("gcp.vertex.agent.llm_request"))
    if not isinstance(request, dict) or not isinstance(request.get("contents"), list):
        return None
    pairs = [p for m in request["contents"] if (p := _gemini_message(m, ids)) is not None]
    config: dict[str, Any] = request["config"] if isinstance(request.get("config"), dict) else {}
    system = config["system_instruction"] if isinstance(config.get("system_instruction"), str) else None
    return system, _as_messages(pairs)


def _inputs_indexed(a: dict[str, Any], logs: Logs, ids: _Ids) -> Inputs:
    """The older indexed ``gen_ai.prompt.N.*`` attributes."""
    pairs = _indexed(a, "gen_ai.prompt", ids)
    return (_system_of(pairs), _as_messages(pairs)) if pairs is not None else None


def _inputs_events(a: dict[str, Any], logs: Logs, ids: _Ids) -> Inputs:
    """The span's message events (``gen_ai.user.message`` and the like), every one readable."""
    events = [(name, body) for name, body in logs if name in EVENT_ROLES and name != "gen_ai.choice"]
    pairs = [p for name, body in events
             if (p := _parts_message({**body, "role": body.get("role") or EVENT_ROLES[name]}, ids)) is not None]
    return (_system_of(pairs), _as_messages(pairs)) if events and len(pairs) == len(events) else None


def _output_messages(a: dict[str, Any], logs: Logs, ids: _Ids) -> list | None:
    """``gen_ai.output.messages``, every message readable."""
    output = _json(a.get("gen_ai.output.messages"))
    if not isinstance(output, list):
        return None
    pairs = [p for m in output if (p := _parts_message(m, ids)) is not None]
    return [b for _, bs in pairs for b in bs] if pairs and len(pairs) == len(output) else None


def _output_vertex(a: dict[str, Any], logs: Logs, ids: _Ids) -> list | None:
    """Google ADK's ``gcp.vertex.agent.llm_response``."""
    response = _json(a.get("gcp.vertex.agent.llm_response"))
    if not isinstance(response, dict) or not isinstance(response.get("content"), dict):
        return None
    got = _gemini_message(response["content"], ids)
    return got[1] if got else None


def _output_indexed(a: dict[str, Any], logs: Logs, ids: _Ids) -> list | None:
    """The older indexed ``gen_ai.completion.N.*`` attributes."""
    out = _indexed(a, "gen_ai.completion", ids)
    return [b for _, bs in out for b in bs] if out else None


def _output_event(a: dict[str, Any], logs: Logs, ids: _Ids) -> list | None:
    """The first ``gen_ai.choice`` event."""
    choices = [body for name, body in logs if name == "gen_ai.choice"]
    if not choices:
        return None
    message: dict[str, Any] = choices[0]["message"] if isinstance(choices[0].get("message"), dict) else choices[0]
    got = _parts_message({**message, "role": "assistant"}, ids)
    return got[1] if got else None


_INPUT_READERS = (_inputs_messages, _inputs_vertex, _inputs_indexed, _inputs_events)
_OUTPUT_READERS = (_output_messages, _output_vertex, _output_indexed, _output_event)


def _indexed(a: dict[str, Any], prefix: str, ids: _Ids) -> list[tuple[str, list[dict]]] | None:
    """The older indexed attributes ``prefix.N.role`` / ``.content`` / ``.tool_calls.M.*`` /
    ``.tool_call_id`` as (role, blocks) (None when there are none, or their content is elided)."""
    pairs = []
    n = 0
    while f"{prefix}.{n}.role" in a or f"{prefix}.{n}.content" in a:
        role = str(a.get(f"{prefix}.{n}.role") or "assistant")
        content = a.get(f"{prefix}.{n}.content")
        calls = []
        m = 0
        while f"{prefix}.{n}.tool_calls.{m}.name" in a:
            calls.append({"id": a.get(f"{prefix}.{n}.tool_calls.{m}.id"), "name": a.get(f"{prefix}.{n}.tool_calls.{m}.name"),
                          "arguments": a.get(f"{prefix}.{n}.tool_calls.{m}.arguments")})
            m += 1
        got = _parts_message({"role": role, "content": content, "tool_calls": calls,
                              "tool_call_id": a.get(f"{prefix}.{n}.tool_call_id")}, ids)
        if got is None:
            return None
        pairs.append(got)
        n += 1
    return pairs or None


# -- calls ---------------------------------------------------------------------------------------


def _is_model(span: Span) -> bool:
    op = span.operation
    if op in MODEL_OPERATIONS:
        return True
    if op in NOT_MODEL:
        return False
    a = span.attrs
    return ("gen_ai.usage.input_tokens" in a or "gen_ai.usage.output_tokens" in a or "gen_ai.usage.prompt_tokens" in a
            or "gen_ai.prompt.0.role" in a or "gen_ai.prompt.0.content" in a)


def _walk(span: Span) -> Iterator[Span]:
    for child in span.children:
        yield child
        yield from _walk(child)


def _usage(chain: list[Span], model: str | None, where: str) -> dict[str, Any] | None:
    for s in chain:
        a = s.attrs
        if not any(k.startswith("gen_ai.usage.") for k in a):
            continue
        prompt = tokens(a, "gen_ai.usage.input_tokens", where) or tokens(a, "gen_ai.usage.prompt_tokens", where)
        read = tokens(a, "gen_ai.usage.cache_read.input_tokens", where)
        write = tokens(a, "gen_ai.usage.cache_creation.input_tokens", where)
        usage: dict[str, Any] = {"input_tokens": max(prompt - read - write, 0), "cache_read_input_tokens": read,
                                 "cache_creation_input_tokens": write,
                                 "output_tokens": tokens(a, "gen_ai.usage.output_tokens", where)
                                 or tokens(a, "gen_ai.usage.completion_tokens", where)}
        if model:
            usage["model"] = model
        return usage
    return None


class Call(NamedTuple):
    span: Span
    chain: list[Span]  # the span, then its model-span wrappers, innermost first
    session: str


def load(path: str, *, skip_bad_lines: bool = False, document: tuple[Any, str] | None = None, **_: object) -> Transcript:
    doc, sha = document or read_document(path)
    if not isinstance(doc, dict) or sniff_document(doc) <= 0:
        raise InputError(f"{path}: not an OTLP/JSON document (no resourceSpans, batches or Jaeger data)")
    shapes = _Shapes(skip_bad_lines)
    try:
        spans, log_records = spans_of(doc, path, shapes)
    except BadField as exc:
        raise InputError(f"{path}: {exc}", hint="--skip-bad-lines skips such records") from None
    spans, log_records, repeated = _once(spans, log_records)
    by_id, logs = _linked(spans, log_records)
    builder = TranscriptBuilder(path, NAME)
    if repeated:
        builder.warnings.append(f"{repeated} span(s) exported more than once (the same trace and span id: an "
                                "exporter's retry): each counted once")
    calls = _model_calls(spans, by_id)
    agents = False
    if not calls:  # no model call: each top-level agent invocation with content is one
        calls = [Call(s, [s], _session_of(s, by_id)) for s in spans if s.operation == "invoke_agent"
                 and "gen_ai.input.messages" in s.attrs and not _inside_agent(s, by_id)]
        agents = bool(calls)
    first_seen: dict[str, int] = {}
    for c in calls:
        first_seen[c.session] = min(first_seen.get(c.session, c.span.start), c.span.start)
    calls.sort(key=lambda c: (first_seen[c.session], c.span.start, c.span.id))
    sessions = list(dict.fromkeys(c.session for c in calls))
    if len(sessions) > 1:
        builder.warnings.append(f"{len(sessions)} sessions (conversations or traces) in one file: replayed one "
                                "after the other")
    builder.session_id = sessions[0] if sessions else None
    tools = sorted((s for s in spans if s.operation == "execute_tool"), key=lambda s: s.start)
    try:
        _build(builder, calls, logs, tools)
    except BadField as exc:
        raise InputError(f"{path}: {exc}") from None
    builder.metadata["llm_calls"] = 0 if agents else len(calls)
    builder.metadata["sessions"] = len(sessions)
    if agents:
        builder.warnings.append(f"no model call spans: each of the {len(calls)} agent invocation(s) is one call, "
                                "its usage unknown")
    if not calls:
        raise InputError(f"{path}: no GenAI model call or agent span in these traces",
                         hint="the spans need the GenAI semantic conventions (gen_ai.operation.name, gen_ai.usage.*)")
    return builder.build(content_hash=sha, skipped_lines=shapes.skipped)


def _model_calls(spans: list[Span], by_id: dict[str, Span]) -> list[Call]:
    """Each innermost model span, with the model spans that wrap it (a wrapper's call is the model
    span inside it) and its session."""
    calls: list[Call] = []
    for s in spans:
        if not _is_model(s) or any(_is_model(d) for d in _walk(s)):
            continue
        chain = [s]
        up = by_id.get(s.parent_key) if s.parent else None
        seen = {s.key}
        while up is not None and up.key not in seen:
            seen.add(up.key)
            if _is_model(up):
                chain.append(up)
            up = by_id.get(up.parent_key) if up.parent else None
        calls.append(Call(s, chain, _session_of(s, by_id)))
    return calls


def _once(spans: list[Span], logs: list[tuple[str, str, dict[str, Any]]]
          ) -> tuple[list[Span], list[tuple[str, str, dict[str, Any]]], int]:
    """The spans and log records with each exported once: an exporter that retries a batch sends the
    same span (trace and span id) again, which would count its call, tokens and cost twice. A log
    record is a repeat when a span that was repeated has it twice, word for word."""
    seen: set[tuple[str, str]] = set()
    kept: list[Span] = []
    for s in spans:
        key = (s.trace, s.id)
        if key not in seen:
            seen.add(key)
            kept.append(s)
    repeated = len(spans) - len(kept)
    if not repeated:
        return spans, logs, 0
    counts: dict[str, int] = {}
    for s in spans:
        counts[s.key] = counts.get(s.key, 0) + 1
    twice = {i for i, n in counts.items() if n > 1}
    out, seen_logs = [], set()
    for record in logs:
        if record[0] in twice:
            key2 = orjson.dumps(record, option=orjson.OPT_SORT_KEYS, default=str)
            if key2 in seen_logs:
                continue
            seen_logs.add(key2)
        out.append(record)
    return kept, out, repeated


def _linked(spans: list[Span], log_records: list[tuple[str, str, dict[str, Any]]]
            ) -> tuple[dict[str, Span], dict[str, list[tuple[str, dict[str, Any]]]]]:
    """The spans by ``trace/span`` key, each with its children, and the log records and events of
    each span by its key. A span is its trace's: two traces may use one span id, and a parent is
    looked up in its own trace; a log record that names no trace is its span's where one span has
    that id."""
    by_id = {s.key: s for s in spans}
    for s in spans:
        parent = by_id.get(s.parent_key) if s.parent else None
        if parent is not None and parent is not s:
            parent.children.append(s)
    logs: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    keys_of: dict[str, list[str]] = {}
    for s in spans:
        keys_of.setdefault(s.id, []).append(s.key)
    for span_key, name, body in log_records:
        if span_key.startswith("*/"):
            keys = keys_of.get(span_key[2:], [])
            span_key = keys[0] if len(keys) == 1 else span_key
        logs.setdefault(span_key, []).append((name, body))
    for s in spans:
        for name, attrs in s.events:
            if name in EVENT_ROLES:
                logs.setdefault(s.key, []).append((name, attrs))
    return by_id, logs


def _session_of(span: Span, by_id: dict[str, "Span"]) -> str:
    """The span's conversation id (its own or an ancestor's), else its trace."""
    s: Span | None = span
    seen = set()
    while s is not None and s.key not in seen:
        seen.add(s.key)
        cid = s.attrs.get("gen_ai.conversation.id") or s.attrs.get("session.id")
        if isinstance(cid, str) and cid:
            return cid
        s = by_id.get(s.parent_key) if s.parent else None
    return span.trace


def _inside_agent(span: Span, by_id: dict[str, Span]) -> bool:
    s = by_id.get(span.parent_key) if span.parent else None
    seen = set()
    while s is not None and s.key not in seen:
        seen.add(s.key)
        if s.operation == "invoke_agent":
            return True
        s = by_id.get(s.parent_key) if s.parent else None
    return False


def _key(m: Message) -> bytes:
    return orjson.dumps(m, option=orjson.OPT_SORT_KEYS)


class _Conversation:
    """The messages added so far, by key: a call's input adds what it does not repeat."""

    def __init__(self, builder: TranscriptBuilder) -> None:
        self.builder = builder
        self.keys: list[bytes] = []  # the keys of the messages added so far
        self.known: set[bytes] = set()  # (the same keys, to look up: a set kept, never rebuilt a call)

    def add(self, m: dict[str, Any], usage: dict[str, Any] | None = None) -> None:
        self.builder.add(m, usage)
        key = _key(m)
        self.keys.append(key)
        self.known.add(key)

    def inputs(self, messages: list[dict[str, Any]]) -> None:
        """A call's input: what follows the shared head (in another context, a handoff, what it
        repeats from anywhere in the conversation is not new either)."""
        keys = [_key(m) for m in messages]
        shared = 0
        for a, b in zip(keys, self.keys):
            if a != b:
                break
            shared += 1
        if shared < len(self.keys):
            while shared < len(keys) and keys[shared] in self.known:
                shared += 1
        for m in messages[shared:]:
            self.add(m)


def _call_content(call: Call, logs: dict[str, list[tuple[str, dict[str, Any]]]]) -> tuple[Content, str | None]:
    """A call's content (the innermost span's, else its wrappers') and its model."""
    content = Content()
    for s in call.chain:
        got = content_of(s, logs.get(s.key, []))
        content.system = content.system or got.system
        content.inputs = content.inputs if content.inputs is not None else got.inputs
        content.output = content.output if content.output is not None else got.output
    model = next((m for s in call.chain for m in (s.attrs.get("gen_ai.response.model"),
                                                    s.attrs.get("gen_ai.request.model")) if isinstance(m, str)), None)
    return content, model


def _elided_output(usage: dict[str, Any] | None, ran: list[Span]) -> list[dict[str, Any]]:
    """A reply whose content was not captured: its size, and the tools run after it as its calls."""
    out_tokens = int((usage or {}).get("output_tokens", 0))
    return [{"type": "text", "text": sized_placeholder("ELIDED_OUTPUT", out_tokens * CHARS_PER_TOKEN)},
            *({"type": "tool_use", "id": str(t.attrs.get("gen_ai.tool.call.id") or f"tool-{t.id}"),
               "name": str(t.attrs.get("gen_ai.tool.name") or "tool"), "input": _tool_args(t)} for t in ran)]


def _build(builder: TranscriptBuilder, calls: list[Call], logs: dict[str, list[tuple[str, dict[str, Any]]]],
           tools: list[Span]) -> None:
    talk = _Conversation(builder)
    starts = [t.start for t in tools]  # (tools sorted by start: a call's tools found by bisection)
    elided = 0
    previous: dict[str, Any] | None = None
    answered = False  # the previous call's tools have results sized by this call's input
    for k, call in enumerate(calls):
        content, model = _call_content(call, logs)
        builder.model = model or builder.model  # (its last call's, as every format's)
        builder.system = builder.system or content.system
        usage = _usage(call.chain, model, f"span {call.span.id} usage")
        elided += content.inputs is None or content.output is None
        if content.inputs is not None:
            talk.inputs(content.inputs)
        elif not answered:  # (after tool results sized by this call's input, nothing more to add)
            talk.add({"role": "user", "content": [{"type": "text", "text": sized_placeholder(
                "ELIDED_INPUT", _added(usage, previous) * CHARS_PER_TOKEN)}]})
        answered = False
        output, ran = content.output, []
        if output is None:  # its size, and the tools run after it as its tool calls
            end = calls[k + 1].span.start if k + 1 < len(calls) else None
            ran = tools[bisect_left(starts, call.span.start):bisect_left(starts, end) if end is not None else len(tools)]
            output = _elided_output(usage, ran)
        talk.add({"role": "assistant", "content": output or [{"type": "text", "text": ""}]}, usage)
        if ran:  # their results, sized by what the next call's input added where not captured
            following = _usage(calls[k + 1].chain, None, "usage") if k + 1 < len(calls) else None
            share = _added(following, usage) * CHARS_PER_TOKEN // len(ran) if following else 0
            talk.add({"role": "user", "content": [{"type": "tool_result", "tool_use_id": b["id"],
                                                   "content": _tool_result(t, share)}
                                                  for b, t in zip(output[1:], ran)]})
            answered = True
        previous = usage
    if elided:
        builder.metadata["elided_calls"] = elided
        builder.warnings.append(f"content capture was off for {elided} call(s): replayed on their token counts "
                                f"alone (what they added and replied sized at {CHARS_PER_TOKEN} characters a token; "
                                "no text invented)")


def _added(usage: dict[str, Any] | None, previous: dict[str, Any] | None) -> int:
    """The input tokens a call added to the previous call's input and reply (all of its input
    where that is not more: a new context)."""
    prompt = _prompt(usage)
    added = prompt - (_prompt(previous) + int(previous.get("output_tokens", 0)) if previous else 0)
    return added if added > 0 else prompt


def _prompt(usage: dict[str, Any] | None) -> int:
    if not usage:
        return 0
    return int(usage.get("input_tokens", 0)) + int(usage.get("cache_read_input_tokens", 0)) + \
        int(usage.get("cache_creation_input_tokens", 0))


def _tool_args(t: Span) -> dict[str, Any]:
    for key in ("gen_ai.tool.call.arguments", "gcp.vertex.agent.tool_call_args"):
        args = _json(t.attrs.get(key))
        if isinstance(args, dict):
            return args
    return {}


def _tool_result(t: Span, size: int) -> str:
    for key in ("gen_ai.tool.call.result", "gcp.vertex.agent.tool_response"):
        if key in t.attrs:
            return _text(t.attrs[key])
    return sized_placeholder("ELIDED_RESULT", size)


def inspect_facts(transcript: Transcript) -> dict[str, Any]:
    """What inspect adds for traces: the model calls, sessions, and calls without content."""
    return {key: transcript.metadata[key] for key in ("llm_calls", "sessions", "elided_calls")
            if transcript.metadata.get(key) is not None}
