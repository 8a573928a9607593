"""OpenHands event logs (#19 §2): one call per model response, observations as tool results by
tool_call_id, an action never observed reported as unanswered, a condensation as a recorded
compaction."""

from __future__ import annotations

import json

import orjson
import pytest

from compactlab import load_policy, load_transcript, replay


def _logs(shared_transcripts):
    files = sorted((shared_transcripts / "openhands").glob("*.json"))
    if not files:
        pytest.skip("no OpenHands event log in ../shared/transcripts/openhands")
    return files


def _what_the_file_holds(path) -> tuple[int, int]:
    """(assistant turns: model responses and agent messages, tool calls), from the raw events."""
    responses, messages, tools = set(), 0, 0
    for e in json.loads(path.read_text()):
        response = (e.get("tool_call_metadata") or {}).get("model_response")
        if e.get("source") == "agent" and "action" in e and response:
            if response["id"] not in responses:
                responses.add(response["id"])
                tools += len(response["choices"][0]["message"].get("tool_calls") or [])
        elif e.get("source") == "agent" and e.get("action") == "message":
            messages += 1
    return len(responses) + messages, tools


def test_every_shared_log_loads_whole(shared_transcripts, cli, tmp_path):
    for path in _logs(shared_transcripts):
        t = load_transcript(str(path))
        calls, tools = _what_the_file_holds(path)
        assert t.format == "openhands" and len(t.call_positions) == calls, path.name
        assert sum(len(e.tool_use_ids) for e in t.entries) == tools, path.name
        assert replay(t, load_policy("none")).summary.violations == [], path.name
        assert t.usage and all(u.get("model") for u in t.usage.values())
        info = orjson.loads(cli("inspect", path, "--format", "json").stdout)
        assert len(info["unanswered_at_end"]) == 1  # the finish action: the run ends on it
        out = tmp_path / f"{path.stem}.jsonl"
        assert cli("convert", path, "-o", out, "-q").exit_code == 0
        a = replay(t, load_policy("s08")).to_dict()["calls"]
        assert a == replay(load_transcript(str(out)), load_policy("s08")).to_dict()["calls"], path.name


def test_a_condensation_is_a_recorded_compaction(tmp_path):
    def response(rid: str, call_id: str) -> dict:
        return {"id": rid, "model": "claude-3-5-sonnet", "created": 1738000000,
                "choices": [{"message": {"role": "assistant", "content": "doing",
                                         "tool_calls": [{"id": call_id, "function": {"name": "run",
                                                                                     "arguments": "{\"command\": \"ls\"}"}}]}}],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 5, "cache_creation_input_tokens": 900,
                          "cache_read_input_tokens": 50}}

    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}},
        {"id": 1, "source": "environment", "observation": "agent_state_changed", "content": ""},
        {"id": 2, "source": "agent", "action": "run", "args": {},
         "tool_call_metadata": {"tool_call_id": "c1", "function_name": "run", "model_response": response("r1", "c1")}},
        {"id": 3, "source": "agent", "observation": "run", "cause": 2, "content": "a b",
         "tool_call_metadata": {"tool_call_id": "c1"}},
        {"id": 4, "source": "agent", "action": "condensation", "args": {"forgotten_events_start_id": 1,
                                                                       "forgotten_events_end_id": 3, "summary": "did ls"}},
        {"id": 5, "source": "agent", "action": "run", "args": {},
         "tool_call_metadata": {"tool_call_id": "c2", "function_name": "run", "model_response": response("r2", "c2")}},
        {"id": 6, "source": "agent", "observation": "run", "cause": 5, "content": "c",
         "tool_call_metadata": {"tool_call_id": "c2"}},
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events))
    t = load_transcript(str(path))
    assert t.format == "openhands" and [e.role for e in t.entries] == ["user", "assistant", "user", "assistant", "user"]
    assert t.usage[1] == {"input_tokens": 50, "cache_creation_input_tokens": 900, "cache_read_input_tokens": 50,
                          "output_tokens": 5, "model": "claude-3-5-sonnet",
                          "timestamp": "2025-01-27T17:46:40+00:00"}
    assert len(t.compactions) == 1 and t.compactions[0].position == 3
    assert t.compactions[0].kept == (0,) and t.compactions[0].summary_at == 1
    kept = replay(t, load_policy("none"), keep_recorded_compactions=True)
    # restarted as OpenHands' view: the event not forgotten (the user's "go"), then the summary
    assert kept.calls[1].messages == 2 and kept.calls[1].chars < kept.calls[1].raw_chars
    assert kept.summary.violations_introduced == 0


def test_a_condensation_restarts_from_the_events_it_kept_with_the_summary_at_its_offset(tmp_path):
    """keep_first = 1 and the newest kept: forgotten ids 2-3 of 0-5, the summary at offset 1."""
    def act(i: int, rid: str, call: str) -> list[dict]:
        response = {"id": rid, "model": "m", "choices": [{"message": {"content": "", "tool_calls": [
            {"id": call, "function": {"name": "run", "arguments": "{}"}}]}}]}
        return [{"id": i, "source": "agent", "action": "run", "args": {},
                 "tool_call_metadata": {"tool_call_id": call, "model_response": response}},
                {"id": i + 1, "source": "agent", "observation": "run", "content": f"out {i}",
                 "tool_call_metadata": {"tool_call_id": call}}]

    events = [{"id": 0, "source": "user", "action": "message", "args": {"content": "task"}},
              *act(2, "r1", "c1"), *act(4, "r2", "c2"),
              {"id": 6, "source": "agent", "action": "condensation",
               "args": {"forgotten_event_ids": [2, 3], "summary": "ran c1", "summary_offset": 1}},
              *act(7, "r3", "c3")]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events))
    t = load_transcript(str(path))
    c = t.compactions[0]
    assert (c.position, c.kept, c.summary_at) == (5, (0, 3, 4), 1)
    run = replay(t, load_policy("none"), keep_recorded_compactions=True)
    # the call after it: task, summary, the c2 pair kept, then nothing new before the reply
    assert run.calls[2].messages == 4 and run.summary.violations_introduced == 0


def _condensing_log(path, n: int):
    """A log of ``n`` actions, each observed, each followed by a condensation that forgets the
    pair before (by id, every other one by range)."""
    events = [{"id": 0, "source": "user", "action": "message", "args": {"content": "task"}}]
    for k in range(n):
        i = 1 + 3 * k
        response = {"id": f"r{k}", "model": "m", "choices": [{"message": {"content": "", "tool_calls": [
            {"id": f"c{k}", "function": {"name": "run", "arguments": "{}"}}]}}]}
        events += [{"id": i, "source": "agent", "action": "run", "args": {},
                    "tool_call_metadata": {"tool_call_id": f"c{k}", "model_response": response}},
                   {"id": i + 1, "source": "agent", "observation": "run", "content": f"out {k}",
                    "tool_call_metadata": {"tool_call_id": f"c{k}"}},
                   {"id": i + 2, "source": "agent", "action": "condensation",
                    "args": ({"forgotten_event_ids": [i, i + 1]} if k % 2 else
                             {"forgotten_events_start_id": i, "forgotten_events_end_id": i + 1}) | {"summary": f"s{k}"}}]
    path.write_text(json.dumps(events))
    return str(path)


def test_many_condensations_load_in_linear_time(tmp_path):
    """(#49) Each condensation rebuilt what is kept from every event so far: 20,000 condensations
    took 136 CPU s. Four times as many run about four times the lines of Python, not sixteen (counted,
    not timed); and what each keeps is what OpenHands' view keeps (the task alone, the pair before it
    forgotten)."""
    from helpers import lines_run

    def lines(n: int) -> int:
        path = _condensing_log(tmp_path / f"log{n}.json", n)
        loaded = []
        ran = lines_run(lambda: loaded.append(load_transcript(path)))
        t = loaded[0]
        assert len(t.compactions) == n and {c.kept for c in t.compactions} == {(0,)}
        return ran

    small, large = lines(150), lines(600)
    assert large < 6 * small, (small, large)  # (quadratic: 16x)


@pytest.mark.slow  # (3,000 condensations under tracemalloc, 9 s: CI runs it with pytest -m slow)
def test_many_condensations_that_keep_most_events_cost_memory_as_the_log_does(tmp_path):
    """(#56 §5) Condensations that each keep most of the log (one forgets the oldest pair every
    other time): what each keeps was a tuple of every position (20,000 took 1.84 GB for 10.7 MB);
    as runs it stays within 20 times the file."""
    import tracemalloc

    events = [{"id": 0, "source": "user", "action": "message", "args": {"content": "task"}}]
    n = 3000
    for k in range(n):
        i = 1 + 3 * k
        response = {"id": f"r{k}", "model": "m", "choices": [{"message": {"content": "", "tool_calls": [
            {"id": f"c{k}", "function": {"name": "run", "arguments": "{}"}}]}}]}
        old = 1 + 3 * (k // 2)  # (the oldest pair not yet forgotten, every other condensation)
        forgets = {"forgotten_event_ids": [old, old + 1]} if k % 2 else {"forgotten_event_ids": []}
        events += [{"id": i, "source": "agent", "action": "run", "args": {},
                    "tool_call_metadata": {"tool_call_id": f"c{k}", "model_response": response}},
                   {"id": i + 1, "source": "agent", "observation": "run", "content": f"out {k}",
                    "tool_call_metadata": {"tool_call_id": f"c{k}"}},
                   {"id": i + 2, "source": "agent", "action": "condensation", "args": forgets | {"summary": f"s{k}"}}]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(events))
    tracemalloc.start()
    try:
        t = load_transcript(str(path))
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(t.compactions) == n and len(t.compactions[-1].kept) > n // 2  # (it keeps most of the log)
    assert held < 20 * path.stat().st_size, (held, path.stat().st_size)
