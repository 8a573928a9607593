"""OpenTelemetry GenAI traces (issue #33): every shared OTLP fixture against the truth file written
for it by reading the telemetry (agentevals' ``otel_core.truth/v1``), and the shapes a bare clone
can check on small documents built here.

Documented differences from a truth file: compactlab's calls are model calls only; where a trace
has none (kagent's Claude harness records Claude Code's own spans, which are not GenAI semantic
conventions, and the truth counts ``llm_calls: 0``) each agent invocation is one call, and
``metadata["llm_calls"]`` still says 0. Tool calls are compared as a set per fixture (a truth
orders them by when they ran, compactlab by the reply that asked for them).
"""

from __future__ import annotations

import json

import orjson
import pytest

from compactlab import load_transcript
from compactlab.transcripts.messages import SIZED_MARK
from helpers import inspects_and_round_trips


def _fixtures(shared):
    folder = shared / "otlp"
    return sorted(p for p in folder.glob("*.json") if not p.name.endswith(".truth.json")
                  and (folder / (p.name[:-5] + ".truth.json")).exists())


def _texts(message) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(b["text"] for b in content if b.get("type") == "text")


def _unwrap(value):
    value = json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value
    return value["result"] if isinstance(value, dict) and set(value) == {"result"} else value


def test_every_otlp_fixture_matches_its_truth(shared_transcripts):
    fixtures = _fixtures(shared_transcripts)
    assert fixtures, "no OTLP fixture with a truth file"
    for path in fixtures:
        truth = json.loads(path.with_name(path.name[:-5] + ".truth.json").read_text())
        t = load_transcript(str(path))
        name = path.name
        assert t.format == "otlp", name
        # tokens: each logical model call once (a wrapper and its provider span are one call)
        prompt = sum(u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
                     for u in t.usage.values())
        assert (prompt, sum(u["output_tokens"] for u in t.usage.values())) == \
            (truth["tokens"]["input"], truth["tokens"]["output"]), name
        counted = [turn["llm_calls"] for turn in truth["turns"] if "llm_calls" in turn]
        if len(counted) == len(truth["turns"]):
            assert t.metadata["llm_calls"] == sum(counted), name
            if sum(counted):
                assert len(t.usage) == sum(counted), name
        # the user's and the final texts of every turn
        users = [e for e in t.entries if e.role == "user" and e.has_text]
        if truth.get("content_captured", True):
            user_texts = [_texts(e.message) for e in users]
            assert [turn["user_text"] for turn in truth["turns"]] == [u for u in user_texts
                                                                      if u in {x["user_text"] for x in truth["turns"]}], name
            starts = [i for i, e in enumerate(t.entries) if e.role == "user" and _texts(e.message) in
                      {x["user_text"] for x in truth["turns"]}] + [len(t.entries)]
            for turn, a, b in zip(truth["turns"], starts, starts[1:]):
                replies = [_texts(e.message) for e in t.entries[a:b] if e.role == "assistant" and _texts(e.message)]
                assert replies and replies[-1] == turn["final_text"], (name, turn["user_text"])
        else:  # content off: no text at all, only sizes
            assert all(SIZED_MARK in _texts(e.message) for e in users), name
        # tool calls: names and arguments (where captured), results joined by id
        uses = {}
        results = {}
        for e in t.entries:
            for b in e.message["content"] if isinstance(e.message["content"], list) else ():
                if b.get("type") == "tool_use":
                    uses[b["id"]] = b
                elif b.get("type") == "tool_result":
                    results[b["tool_use_id"]] = b.get("content")
        wanted = [c for turn in truth["turns"] for c in turn["tool_calls"]]
        assert sorted(b["name"] for b in uses.values()) == sorted(c["name"] for c in wanted), name
        for c in wanted:
            if c["args"] is None:
                continue
            match = [i for i, b in uses.items() if b["name"] == c["name"] and b["input"] == c["args"]]
            assert match, (name, c["name"], c["args"])
            if c["result"] is not None:
                assert any(_unwrap(results.get(i)) == c["result"] for i in match), (name, c["name"])
        if truth.get("session_key"):
            assert t.session_id == truth["session_key"]["value"], name


def _attr(key, v):
    if isinstance(v, bool):
        return {"key": key, "value": {"boolValue": v}}
    if isinstance(v, int):
        return {"key": key, "value": {"intValue": str(v)}}
    return {"key": key, "value": {"stringValue": v if isinstance(v, str) else json.dumps(v)}}


def _span(sid, name, parent=None, start=0, trace="t1", **attrs):
    return {"traceId": trace, "spanId": sid, "parentSpanId": parent or "", "name": name,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 1),
            "attributes": [_attr(k.replace("__", "."), v) for k, v in attrs.items()]}


def _doc(tmp_path, spans, logs=(), name="trace.json"):
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}]}]}
    if logs:
        doc["resourceLogs"] = [{"scopeLogs": [{"logRecords": list(logs)}]}]
    path = tmp_path / name
    path.write_bytes(orjson.dumps(doc))
    return str(path)


def test_the_older_indexed_attributes_and_a_wrapper_counted_once(tmp_path):
    """``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` (OpenLLMetry's shape); a model span inside
    another model span (both with usage) is one call."""
    wrapper = _span("w1", "llm_call", start=1, gen_ai__usage__input_tokens=30, gen_ai__usage__output_tokens=5)
    inner = _span("c1", "openai.chat", parent="w1", start=2, gen_ai__request__model="gpt-4.1-mini",
                  gen_ai__usage__input_tokens=30, gen_ai__usage__output_tokens=5,
                  gen_ai__usage__cache_read__input_tokens=10,
                  **{"gen_ai__prompt__0__role": "system", "gen_ai__prompt__0__content": "be brief",
                     "gen_ai__prompt__1__role": "user", "gen_ai__prompt__1__content": "hi there",
                     "gen_ai__completion__0__role": "assistant", "gen_ai__completion__0__content": "hello"})
    t = load_transcript(_doc(tmp_path, [wrapper, inner]))
    assert [e.message for e in t.entries] == [{"role": "user", "content": [{"type": "text", "text": "hi there"}]},
                                              {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}]
    assert t.system == "be brief" and t.model == "gpt-4.1-mini"
    assert t.usage == {1: {"input_tokens": 20, "cache_read_input_tokens": 10, "cache_creation_input_tokens": 0,
                           "output_tokens": 5, "model": "gpt-4.1-mini"}}


def test_log_events_joined_to_their_span(tmp_path):
    span = _span("c1", "chat m", start=1, gen_ai__operation__name="chat", gen_ai__usage__input_tokens=12,
                 gen_ai__usage__output_tokens=3)

    def log(name, body):
        return {"spanId": "c1", "traceId": "t1", "eventName": name,
                "body": {"kvlistValue": {"values": [{"key": k, "value": {"stringValue": v}} for k, v in body.items()]}}}

    path = _doc(tmp_path, [span], [log("gen_ai.user.message", {"content": "what time is it?"}),
                                   log("gen_ai.choice", {"content": "noon"})])
    t = load_transcript(path)
    assert [(e.role, _texts(e.message)) for e in t.entries] == [("user", "what time is it?"), ("assistant", "noon")]


def test_content_capture_off_is_replayed_on_sizes_alone(tmp_path):
    spans = [_span("a", "invoke_agent x", start=0, gen_ai__operation__name="invoke_agent"),
             _span("c1", "chat m", "a", 1, gen_ai__operation__name="chat", gen_ai__usage__input_tokens=100,
                   gen_ai__usage__output_tokens=10),
             _span("t1", "execute_tool lookup", "a", 2, gen_ai__operation__name="execute_tool",
                   gen_ai__tool__name="lookup", gen_ai__tool__call__id="call_9"),
             _span("c2", "chat m", "a", 3, gen_ai__operation__name="chat", gen_ai__usage__input_tokens=150,
                   gen_ai__usage__output_tokens=20)]
    t = load_transcript(_doc(tmp_path, spans))
    roles = [e.role for e in t.entries]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert t.entries[0].chars > 100 * 4  # the first input, sized by its tokens (no text)
    use = t.entries[1].message["content"][1]
    assert (use["type"], use["name"], use["id"]) == ("tool_use", "lookup", "call_9")
    assert t.entries[2].results[0].size == (150 - 110) * 4  # what the next call added: the tool's result
    assert any("content capture was off for 2 call(s)" in w for w in t.warnings)


def test_sessions_and_a_document_that_is_not_traces(tmp_path, cli):
    spans = [_span("c1", "chat m", start=5, trace="t2", gen_ai__operation__name="chat", gen_ai__usage__input_tokens=1,
                   gen_ai__input__messages=[{"role": "user", "parts": [{"type": "text", "content": "later"}]}],
                   gen_ai__output__messages=[{"role": "assistant", "parts": [{"type": "text", "content": "b"}]}]),
             _span("c0", "chat m", start=1, trace="t1", gen_ai__operation__name="chat", gen_ai__usage__input_tokens=1,
                   gen_ai__input__messages=[{"role": "user", "parts": [{"type": "text", "content": "first"}]}],
                   gen_ai__output__messages=[{"role": "assistant", "parts": [{"type": "text", "content": "a"}]}])]
    t = load_transcript(_doc(tmp_path, spans))
    assert [_texts(e.message) for e in t.entries] == ["first", "a", "later", "b"]
    assert any("2 sessions" in w for w in t.warnings)
    empty = _doc(tmp_path, [_span("x", "GET /", start=1)], name="plain.json")
    r = cli("inspect", empty)
    assert r.exit_code == 2 and "no GenAI model call or agent span" in r.stderr


def test_replay_compare_and_convert_work_on_traces(shared_transcripts, cli, tmp_path):
    path = shared_transcripts / "otlp" / "adk_go_2turn.json"
    if not path.exists():
        pytest.skip("adk_go_2turn.json is not in ../shared/transcripts/otlp")
    assert cli("replay", path, "-p", "s08", "--dry-run").exit_code == 0
    assert cli("compare", path, "-p", "s08", "--dry-run", "--format", "csv").exit_code == 0
    inspects_and_round_trips(cli, path, tmp_path)


def test_a_malformed_usage_is_an_input_error_naming_the_span(tmp_path, cli):
    span = _span("c1", "chat m", start=1, gen_ai__operation__name="chat", gen_ai__usage__input_tokens="lots",
                 gen_ai__input__messages=[{"role": "user", "parts": [{"type": "text", "content": "x"}]}])
    r = cli("inspect", _doc(tmp_path, [span]))
    assert r.exit_code == 2 and "span c1 usage.gen_ai.usage.input_tokens is \"lots\"" in r.stderr


def test_a_jaeger_and_a_tempo_export(tmp_path):
    """The same two-call trace as a Jaeger export (``data``: spans with ``tags``, microseconds,
    ``references``) and as a Tempo export (``batches`` of resource spans) loads as the OTLP one."""
    messages = [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
    reply = [{"role": "assistant", "parts": [{"type": "text", "content": "hello"}]}]

    def tags(**kv):
        return [{"key": k.replace("__", "."), "type": "string" if isinstance(v, str) else "int64",
                 "value": v if isinstance(v, (str, int)) else json.dumps(v)} for k, v in kv.items()]

    jaeger = {"data": [{"traceID": "abc", "spans": [
        {"traceID": "abc", "spanID": "s1", "operationName": "chat m", "references": [], "startTime": 1000,
         "duration": 5, "tags": tags(gen_ai__operation__name="chat", gen_ai__usage__input_tokens=7,
                                     gen_ai__usage__output_tokens=2, gen_ai__input__messages=messages,
                                     gen_ai__output__messages=reply)}]}]}
    path = tmp_path / "jaeger.json"
    path.write_bytes(orjson.dumps(jaeger))
    t = load_transcript(str(path))
    assert t.format == "otlp" and [_texts(e.message) for e in t.entries] == ["hi", "hello"]
    assert t.usage[1]["input_tokens"] == 7 and t.usage[1]["output_tokens"] == 2
    span = _span("c1", "chat m", start=1, gen_ai__operation__name="chat", gen_ai__usage__input_tokens=7,
                 gen_ai__usage__output_tokens=2, gen_ai__input__messages=messages, gen_ai__output__messages=reply)
    tempo = {"batches": [{"resource": {}, "scopeSpans": [{"scope": {"name": "x"}, "spans": [span]}]}]}
    path = tmp_path / "tempo.json"
    path.write_bytes(orjson.dumps(tempo))
    assert [e.message for e in load_transcript(str(path)).entries] == [e.message for e in t.entries]


def test_a_span_exported_twice_is_one_call(tmp_path):
    """(#43 §7) An exporter that retries a batch sends the same spans (and their log records) again:
    the same trace and span id is one call, with its tokens once."""
    span = _span("c1", "chat m", start=1, gen_ai__operation__name="chat", gen_ai__request__model="gpt-4o",
                 gen_ai__usage__input_tokens=1200, gen_ai__usage__output_tokens=30)
    second = _span("c2", "chat m", start=5, gen_ai__operation__name="chat", gen_ai__request__model="gpt-4o",
                   gen_ai__usage__input_tokens=1500, gen_ai__usage__output_tokens=40)

    def log(sid, name, text, at):
        return {"spanId": sid, "traceId": "t1", "eventName": name, "timeUnixNano": str(at),
                "body": {"kvlistValue": {"values": [{"key": "content", "value": {"stringValue": text}}]}}}

    logs = [log("c1", "gen_ai.user.message", "first question", 1), log("c1", "gen_ai.choice", "first answer", 2),
            log("c2", "gen_ai.user.message", "second question", 5), log("c2", "gen_ai.choice", "second answer", 6)]
    once = load_transcript(_doc(tmp_path, [span, second], logs, name="once.json"))
    twice = load_transcript(_doc(tmp_path, [span, second, span], logs + logs[:2], name="twice.json"))
    assert len(once.usage) == len(twice.usage) == 2
    assert sum(u["input_tokens"] for u in twice.usage.values()) == 2700
    assert [e.message for e in twice.entries] == [e.message for e in once.entries]
    assert any("exported more than once" in w for w in twice.warnings) and not once.warnings


def test_a_short_trace_is_estimated_by_the_otlp_prior(tmp_path, cli):
    """(#43 §7) Under 5 calls with usage, a trace's tokens come from the OTLP prior (as every
    format's do), not from the policy's chars / 4."""
    spans = [_span(f"c{i}", "chat m", start=i * 10, gen_ai__operation__name="chat", gen_ai__request__model="gpt-4o",
                   gen_ai__usage__input_tokens=1200 + 300 * i, gen_ai__usage__output_tokens=30) for i in range(3)]
    r = cli("replay", _doc(tmp_path, spans), "-p", "none", "--dry-run", "--format", "json-run")
    assert r.exit_code == 0, r.output
    source = json.loads(r.stdout)["summary"]["calibration"]["source"]
    assert source.startswith("prior for otlp (")


def _good_doc() -> dict:
    span = _span("c1", "chat m", start=1, gen_ai__operation__name="chat", gen_ai__request__model="gpt-4o",
                 gen_ai__usage__input_tokens=1200, gen_ai__usage__output_tokens=30)
    log = {"spanId": "c1", "traceId": "t1", "eventName": "gen_ai.user.message",
           "body": {"kvlistValue": {"values": [{"key": "content", "value": {"stringValue": "hello"}}]}}}
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [span]}]}],
            "resourceLogs": [{"scopeLogs": [{"logRecords": [log]}]}]}


def _damaged(shape: str) -> dict:
    doc = _good_doc()
    rs = doc["resourceSpans"][0]
    span = rs["scopeSpans"][0]["spans"][0]
    logs = doc["resourceLogs"][0]
    lists = {"resourceSpans": doc, "scopeSpans": rs, "spans": rs["scopeSpans"][0], "events": span,
             "resourceLogs": doc, "scopeLogs": logs, "logRecords": logs["scopeLogs"][0]}  # (what holds the list)
    if shape in lists:
        lists[shape][shape] = 7
    elif shape == "arrayValue":
        span["attributes"].append({"key": "x", "value": {"arrayValue": 7}})
    elif shape == "kvlistValue":
        doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["body"] = {"kvlistValue": 7}
    elif shape == "batches":
        doc = {"batches": 7, "resourceLogs": doc["resourceLogs"]}
    elif shape in ("tokens 1e20", "tokens 2^63"):
        big = "100000000000000000000" if shape == "tokens 1e20" else str(2 ** 63)
        for a in span["attributes"]:
            if a["key"] == "gen_ai.usage.input_tokens":
                a["value"] = {"intValue": big}
    return doc


JAEGER = {"data": [{"traceID": "t1", "spans": [{"traceID": "t1", "spanID": "s1", "operationName": "chat",
                                                 "references": [], "startTime": 1, "duration": 1, "tags": [],
                                                 "logs": []}]}]}


@pytest.mark.parametrize("shape", ["resourceSpans", "scopeSpans", "spans", "events", "resourceLogs", "scopeLogs",
                                   "logRecords", "arrayValue", "kvlistValue", "batches", "jaeger spans",
                                   "jaeger references", "jaeger logs", "tokens 1e20", "tokens 2^63"])
def test_a_hostile_otlp_document_is_a_bad_record_naming_its_field(tmp_path, cli, shape):
    """(#49) A number where OTLP has a list or an object, or a token count no call ever had: a
    one-line error naming the file and the field (exit 2), never an internal error; with
    --skip-bad-lines the record is skipped where the rest still reads."""
    if shape.startswith("jaeger"):
        doc = json.loads(json.dumps(JAEGER))
        doc["data"][0]["spans"][0][shape.split()[1]] = 7 if shape != "jaeger spans" else None
        if shape == "jaeger spans":
            doc["data"][0]["spans"] = 7
    else:
        doc = _damaged(shape)
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(doc))
    r = cli("replay", path, "--dry-run", "--input-format", "otlp")
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"error: {path}: ") and "internal error" not in r.stderr and "Traceback" not in r.stderr
    field = {"tokens 1e20": "input_tokens", "tokens 2^63": "input_tokens", "jaeger spans": "spans",
             "jaeger references": "references", "jaeger logs": "logs"}.get(shape, shape)
    assert field in r.stderr.splitlines()[0] or "not an OTLP/JSON document" in r.stderr
    skipped = cli("replay", path, "--dry-run", "--input-format", "otlp", "--skip-bad-lines")
    assert skipped.exit_code in (0, 2) and "internal error" not in skipped.stderr and "Traceback" not in skipped.stderr


def _many_calls(tmp_path, n: int) -> str:
    """n model-call spans, each followed by a tool span, content capture off."""
    spans = []
    for i in range(n):
        spans.append(_span(f"c{i}", "chat m", start=10 * i + 1, gen_ai__operation__name="chat",
                           gen_ai__request__model="gpt-4o", gen_ai__usage__input_tokens=100 + i,
                           gen_ai__usage__output_tokens=5))
        spans.append(_span(f"x{i}", "execute_tool bash", start=10 * i + 3, gen_ai__operation__name="execute_tool",
                           gen_ai__tool__name="bash", gen_ai__tool__call__id=f"call{i}"))
    return _doc(tmp_path, spans, name=f"many{n}.json")


def test_a_trace_of_many_calls_loads_in_linear_time(tmp_path):
    """(#49) Each call's tools were found by a scan of every tool span: 20,000 calls and 20,000 tool
    spans took 23 CPU s. Four times the calls run about four times the lines of Python, not sixteen:
    counted (every line the loader runs, ``sys.settrace``), not timed, so a busy machine cannot fail it."""
    from helpers import lines_run

    def lines(n: int) -> int:
        path = _many_calls(tmp_path, n)
        loaded = []
        ran = lines_run(lambda: loaded.append(load_transcript(path)))
        assert len(loaded[0].call_positions) == n and len(loaded[0].usage) == n
        return ran

    small, large = lines(150), lines(600)
    assert large < 6 * small, (small, large)  # (quadratic: 16x)


def test_the_same_span_id_in_two_traces_is_two_calls_each_with_its_own_content(tmp_path):
    """(#58 §4) Span ids are unique within a trace only: two traces that both use "c1" are two calls,
    each with its own log records and its own parent chain (a record naming no trace joins the one
    span with its id)."""
    def log(trace, name, text, at):
        return {"spanId": "c1", "traceId": trace, "eventName": name, "timeUnixNano": str(at),
                "body": {"kvlistValue": {"values": [{"key": "content", "value": {"stringValue": text}}]}}}

    first = _span("c1", "chat m", start=1, trace="ta", gen_ai__operation__name="chat", gen_ai__request__model="gpt-4o",
                  gen_ai__usage__input_tokens=1200, gen_ai__usage__output_tokens=30)
    second = _span("c1", "chat m", start=5, trace="tb", gen_ai__operation__name="chat",
                   gen_ai__request__model="gpt-4o", gen_ai__usage__input_tokens=1500, gen_ai__usage__output_tokens=40)
    logs = [log("ta", "gen_ai.user.message", "question a", 1), log("ta", "gen_ai.choice", "answer a", 2),
            log("tb", "gen_ai.user.message", "question b", 5), log("tb", "gen_ai.choice", "answer b", 6)]
    t = load_transcript(_doc(tmp_path, [first, second], logs))
    assert sorted(u["input_tokens"] for u in t.usage.values()) == [1200, 1500]
    texts = [_texts(e.message) for e in t.entries]
    assert texts == ["question a", "answer a", "question b", "answer b"], texts
    assert not any("exported more than once" in w for w in t.warnings)
