"""Format: OpenHands event logs (a JSON list of events ``{id, timestamp, source, action |
observation, args, content, tool_call_metadata}``).

What decides correctness:
- An agent action with ``tool_call_metadata`` belongs to a model response
  (``tool_call_metadata.model_response``, its ``id`` shared by the actions of one response):
  each response is one assistant message, one call, with the response's text, its tool calls
  as tool_use blocks, its usage and its model.
- The observation whose ``tool_call_metadata.tool_call_id`` names a tool call is its
  tool_result; an action whose observation never came is an unanswered call (``finish`` is one:
  the run ends on it), which ``inspect`` reports.
- A user ``message`` action is a user turn; an agent ``message`` action without a model response
  is an assistant message (no usage recorded). Environment events (agent state changes) and
  other observations are not messages.
- A ``condensation`` action (forgotten events, ``summary``, ``summary_offset``) is a compaction
  OpenHands did: kept out of the messages as a RecordedCompaction that restarts, as OpenHands'
  View does, from the messages of the events not forgotten so far, the summary at its offset.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Any

import orjson

from ..errors import InputError
from .messages import make_entry
from .model import Positions, RecordedCompaction, Transcript, TranscriptBuilder, epoch_time, object_at, tokens
from .openai_chat import openai_usage
from .reader import read_document

NAME = "openhands"
DESCRIPTION = "OpenHands event logs (a JSON list of events with source and action or observation)"


def sniff_document(doc: Any) -> float:
    if not isinstance(doc, list) or not doc:
        return 0.0
    events = [e for e in doc[:50] if isinstance(e, dict)]
    hits = sum(1 for e in events if "source" in e and ("action" in e or "observation" in e))
    return hits / len(events) if events else 0.0


class _Forgotten:
    """The events condensations forgot so far: their ids, and their id ranges kept as intervals
    (a range of 10^12 ids costs two numbers, never a set of them)."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()
        self.starts: list[int] = []  # merged, disjoint, sorted ranges: their starts and ends
        self.ends: list[int] = []

    def add_range(self, start: int, end: int) -> None:
        """Merge ``start..end`` in: the ranges it touches become one (found by bisection, not a
        sort of them all: a condensation at a time)."""
        lo = bisect_left(self.ends, start - 1)  # the first range that ends at or after start - 1
        hi = bisect_right(self.starts, end + 1)  # past the last range that starts at or before end + 1
        if lo < hi:
            start, end = min(start, self.starts[lo]), max(end, self.ends[hi - 1])
        self.starts[lo:hi], self.ends[lo:hi] = [start], [end]

    def __contains__(self, event_id: Any) -> bool:
        if event_id in self.ids:
            return True
        if type(event_id) is not int:
            return False
        k = bisect_right(self.starts, event_id) - 1
        return k >= 0 and event_id <= self.ends[k]


class _Live:
    """The events no condensation has forgotten so far, in event order, with the position of the
    message each is part of: what the next condensation keeps. Kept as events come and are
    forgotten, never rebuilt from every event at each condensation (20,000 condensations took 136
    CPU s)."""

    def __init__(self, forgotten: _Forgotten) -> None:
        self.at: dict[Any, int] = {}
        self.ints: list[int] = []  # the integer ids among them, sorted (a range is removed by bisection)
        self.forgotten = forgotten

    def put(self, event_id: Any, position: int) -> None:
        if event_id in self.forgotten:
            return
        if event_id not in self.at and type(event_id) is int:
            insort(self.ints, event_id)
        self.at[event_id] = position

    def forget(self, ids: set[Any], span: tuple[int, int] | None) -> None:
        for k in ids:
            if self.at.pop(k, None) is not None and type(k) is int:
                del self.ints[bisect_left(self.ints, k)]
        if span is not None:
            lo, hi = bisect_left(self.ints, span[0]), bisect_right(self.ints, span[1])
            for k in self.ints[lo:hi]:
                del self.at[k]
            del self.ints[lo:hi]


def _forgotten(args: dict, event_ids: list[int]) -> tuple[set[Any], tuple[int, int] | None] | str:
    """What a condensation forgets: its ids and its id range (both ends included), or why the
    record is bad (a range that names no event of the log)."""
    ids = args.get("forgotten_event_ids")
    named = {i for i in ids if isinstance(i, (int, str))} if isinstance(ids, list) else set()
    start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
    if type(start) is not int or type(end) is not int:
        return named, None
    at = bisect_left(event_ids, start)
    if at == len(event_ids) or event_ids[at] > end:
        return f"its forgotten events {start}..{end} name no event of the log"
    return named, (start, end)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else orjson.dumps(value).decode()


def _usage(response: dict) -> dict[str, Any] | None:
    """A response's usage in the canonical keys: litellm's Anthropic usage (prompt_tokens counting
    the cache writes and reads) or an OpenAI one (cached tokens among the prompt tokens)."""
    raw = response.get("usage")
    if not isinstance(raw, dict):
        return None
    created = response.get("created")
    written = tokens(raw, "cache_creation_input_tokens")
    read = tokens(raw, "cache_read_input_tokens")
    if written or read:
        prompt = tokens(raw, "prompt_tokens")
        usage: dict[str, Any] = {"input_tokens": max(prompt - written - read, 0), "cache_creation_input_tokens": written,
                                 "cache_read_input_tokens": read, "output_tokens": tokens(raw, "completion_tokens")}
        if isinstance(response.get("model"), str):
            usage["model"] = response["model"]
        if (at := epoch_time(created)) is not None:
            usage["timestamp"] = at
        return usage
    return openai_usage(raw, response.get("model"), created)


def load(path: str, *, skip_bad_lines: bool = False, document: tuple[Any, str] | None = None, **_: object) -> Transcript:
    doc, sha = document or read_document(path)
    if not isinstance(doc, list):
        raise InputError(f"{path}: not an OpenHands event log (no list of events)")
    reader = _Events(path, doc, skip_bad_lines)
    for i, e in enumerate(doc):
        reader.event(i, e)
    reader.flush_results()
    return reader.builder.build(skipped_lines=reader.skipped, content_hash=sha)


class _Events:
    """An event log read event by event into messages (``event``: one handler per kind)."""

    def __init__(self, path: str, doc: list, skip_bad_lines: bool) -> None:
        self.path, self.skip_bad_lines = path, skip_bad_lines
        self.builder = TranscriptBuilder(path, NAME)
        self.skipped = 0
        self.results: list[dict] = []  # tool results waiting for the next message
        self.responses: dict[str, int] = {}  # model response id -> position of its assistant message
        self.forgotten = _Forgotten()  # every condensation's forgotten events so far
        self.where = _Live(self.forgotten)  # event id -> position of the message it is part of, while not forgotten
        self.waiting: list[Any] = []  # ids of the observations in ``results``
        self.event_ids = sorted({e["id"] for e in doc if isinstance(e, dict) and type(e.get("id")) is int})

    def flush_results(self) -> None:
        if self.results:
            for k in self.waiting:
                self.where.put(k, self.builder.count)
            self.builder.add({"role": "user", "content": list(self.results)})
            self.results.clear()
        self.waiting.clear()

    def _bad(self, message: str) -> None:
        if not self.skip_bad_lines:
            raise InputError(f"{self.path}: {message}", hint="use --skip-bad-lines to skip and count it")
        self.skipped += 1

    def event(self, i: int, e: Any) -> None:
        if not isinstance(e, dict):
            self._bad(f"event {i} is not an object")
            return
        tcm = e.get("tool_call_metadata") if isinstance(e.get("tool_call_metadata"), dict) else None
        action, source = e.get("action"), e.get("source")
        if action == "condensation":
            self._condensation(i, e)
        elif action is not None and source == "agent" and tcm and isinstance(tcm.get("model_response"), dict):
            self._response(i, e, tcm["model_response"])
        elif "observation" in e and tcm and tcm.get("tool_call_id"):
            self.results.append({"type": "tool_result", "tool_use_id": str(tcm["tool_call_id"]),
                                 "content": _text(e.get("content"))})
            self.waiting.append(e.get("id", f"event{i}"))
        elif action == "message" and source in ("user", "agent"):
            self.flush_results()
            args = object_at(e, "args")
            content = _text(args.get("content") or e.get("message"))
            self.where.put(e.get("id", f"event{i}"), self.builder.add(
                {"role": "user" if source == "user" else "assistant", "content": content or "(empty)"}))
        # environment events, state changes and other observations are not messages

    def _condensation(self, i: int, e: dict) -> None:
        """A condensation: a recorded compaction that restarts from the events not forgotten so far,
        the summary at its ``summary_offset``."""
        builder = self.builder
        self.flush_results()
        args = object_at(e, "args")
        summary = make_entry({"role": "user", "content": _text(args.get("summary")) or "(condensed)"},
                             -1_000_000 - len(builder.compactions) - 1)
        forgets = _forgotten(args, self.event_ids)
        if isinstance(forgets, str):
            self._bad(f"event {i} (a condensation): {forgets}")
            return
        self.forgotten.ids |= forgets[0]
        if forgets[1] is not None:
            self.forgotten.add_range(*forgets[1])
        self.where.forget(*forgets)
        kept_events = list(self.where.at.values())  # (event order)
        offset = args["summary_offset"] if type(args.get("summary_offset")) is int else len(kept_events)
        before = set(kept_events[:max(offset, 0)])
        builder.compactions.append(RecordedCompaction(position=builder.count, summary=summary, trigger="condenser",
                                                      kept=Positions.of(kept_events), summary_at=len(before)))

    def _response(self, i: int, e: dict, response: dict) -> None:
        """An agent action with its model response: the assistant message (once per response: its
        other actions are part of it)."""
        rid = str(response.get("id") or f"event{i}")
        if rid in self.responses:
            self.where.put(e.get("id", f"event{i}"), self.responses[rid])
            return  # another action of a response already written
        self.flush_results()
        message = ((response.get("choices") or [{}])[0] or {}).get("message") or {}
        blocks: list[dict] = []
        if _text(message.get("content")):
            blocks.append({"type": "text", "text": _text(message.get("content"))})
        blocks += [_tool_use(call) for call in message.get("tool_calls") or []]
        if not blocks:
            blocks.append({"type": "text", "text": _text(e.get("message"))})
        self.responses[rid] = self.builder.add({"role": "assistant", "content": blocks}, usage=_usage(response))
        self.where.put(e.get("id", f"event{i}"), self.responses[rid])
        if isinstance(response.get("model"), str):
            self.builder.model = response["model"]


def _tool_use(call: dict) -> dict:
    fn = call.get("function") or {}
    try:
        args = orjson.loads(fn.get("arguments") or "{}")
    except orjson.JSONDecodeError:
        args = {"arguments": _text(fn.get("arguments"))}
    return {"type": "tool_use", "id": str(call.get("id")), "name": _text(fn.get("name")) or "tool",
            "input": args if isinstance(args, dict) else {"arguments": args}}
