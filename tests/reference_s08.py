"""An independent, literal implementation of seed 000's s08 loop, for checking the engine.

It follows the seed's code line by line on plain dicts, mutating in place as the seed does,
with only the measures the SPEC replaces (content-size rule, compact-JSON chars) swapped in.
It shares nothing with compactlab but the stub summarizer, which it is handed.
"""

from __future__ import annotations

import copy
import math

import orjson

from compactlab.summarizers import StubSummarizer, SummaryRequest

PERSIST_THRESHOLD = 30000
CONTEXT_LIMIT = 50000
KEEP_RECENT = 3
MAX_REACTIVE_RETRIES = 1


def estimate_size(msgs):
    return len(orjson.dumps(msgs).decode("utf-8"))


def content_len(content):
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(b["text"]) if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
                   else len(orjson.dumps(b).decode("utf-8")) for b in content)
    return 0 if content is None else len(orjson.dumps(content).decode("utf-8"))


def content_str(content):
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] if isinstance(b, dict) and b.get("type") == "text" else orjson.dumps(b).decode()
                     for b in content)


def _message_has_tool_use(msg):
    if msg.get("role") != "assistant":
        return False
    content = msg.get("content")
    if not isinstance(content, list):
        return False
    return any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)


def _is_tool_result_message(msg):
    if msg.get("role") != "user":
        return False
    content = msg.get("content")
    if not isinstance(content, list):
        return False
    return any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


class Seed000:
    def __init__(self, window_tokens=200_000):
        self.window_tokens = window_tokens
        self.stub = StubSummarizer()
        self.counts = {}
        self.persisted_paths = set()

    def snip_compact(self, messages, max_messages=50):
        if len(messages) <= max_messages:
            return messages
        keep_head, keep_tail = 3, max_messages - 3
        head_end, tail_start = keep_head, len(messages) - keep_tail
        if head_end > 0 and _message_has_tool_use(messages[head_end - 1]):
            while head_end < len(messages) and _is_tool_result_message(messages[head_end]):
                head_end += 1
        if (tail_start > 0 and tail_start < len(messages)
                and _is_tool_result_message(messages[tail_start])
                and _message_has_tool_use(messages[tail_start - 1])):
            tail_start -= 1
        if head_end >= tail_start:
            return messages
        snipped = tail_start - head_end
        self.counts["snipped"] += snipped
        return messages[:head_end] + [{"role": "user", "content": f"[snipped {snipped} messages]"}] + messages[tail_start:]

    def micro_compact(self, messages):
        tool_results = []
        for msg in messages:
            if msg.get("role") != "user" or not isinstance(msg.get("content"), list):
                continue
            for block in msg["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    tool_results.append(block)
        if len(tool_results) <= KEEP_RECENT:
            return messages
        for block in tool_results[:-KEEP_RECENT]:
            if content_len(block.get("content", "")) > 120:
                block["content"] = "[Earlier tool result compacted. Re-run if needed.]"
                self.counts["micro"] += 1
        return messages

    def persist_large_output(self, tool_use_id, output):
        path = f"tool-results/{tool_use_id}.txt"
        self.persisted_paths.add(path)
        return f"<persisted-output>\nFull output: {path}\nPreview:\n{output[:2000]}\n</persisted-output>"

    def tool_result_budget(self, messages, max_bytes=200_000):
        last = messages[-1] if messages else None
        if not last or last.get("role") != "user" or not isinstance(last.get("content"), list):
            return messages
        blocks = [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
        total = sum(content_len(b.get("content", "")) for b in blocks)
        if total <= max_bytes:
            return messages
        ranked = sorted(blocks, key=lambda b: content_len(b.get("content", "")), reverse=True)
        for block in ranked:
            if total <= max_bytes:
                break
            if content_len(block.get("content", "")) <= PERSIST_THRESHOLD:
                continue
            block["content"] = self.persist_large_output(block["tool_use_id"], content_str(block["content"]))
            self.counts["persisted"] += 1
            total = sum(content_len(b.get("content", "")) for b in blocks)
        return messages

    def summarize_history(self, messages):
        text = orjson.dumps(messages).decode("utf-8")[:80000]
        return self.stub.summarize(SummaryRequest(messages, text, "", 2000, "summary", 0)).text

    def compact_history(self, messages):
        return [{"role": "user", "content": f"[Compacted]\n\n{self.summarize_history(messages)}"}]

    def reactive_compact(self, messages):
        summary = self.summarize_history(messages)
        tail_start = max(0, len(messages) - 5)
        if (tail_start > 0 and tail_start < len(messages)
                and _is_tool_result_message(messages[tail_start])
                and _message_has_tool_use(messages[tail_start - 1])):
            tail_start -= 1
        return [{"role": "user", "content": f"[Reactive compact]\n\n{summary}"}, *messages[tail_start:]]

    def run(self, recorded):
        """Per call: dict(messages, chars, snipped, micro_compacted, persisted)."""
        recorded = copy.deepcopy(recorded)
        messages = []
        out = []
        done = 0
        manual = False
        for pos, msg in enumerate(recorded):
            if msg["role"] != "assistant":
                continue
            self.counts = {"snipped": 0, "micro": 0, "persisted": 0}
            if manual:
                messages[:] = self.compact_history(messages)
            messages.extend(recorded[done:pos])
            reactive_retries = 0
            while True:
                messages[:] = self.tool_result_budget(messages)
                messages[:] = self.snip_compact(messages)
                messages[:] = self.micro_compact(messages)
                if estimate_size(messages) > CONTEXT_LIMIT:
                    messages[:] = self.compact_history(messages)
                too_long = math.ceil(estimate_size(messages) / 4) > self.window_tokens
                if too_long and reactive_retries < MAX_REACTIVE_RETRIES:
                    messages[:] = self.reactive_compact(messages)
                    reactive_retries += 1
                    continue
                break
            out.append({"messages": len(messages), "chars": estimate_size(messages), "snipped": self.counts["snipped"],
                        "micro_compacted": self.counts["micro"], "persisted": self.counts["persisted"]})
            messages.append(msg)
            done = pos + 1
            manual = any(isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == "compact"
                         for b in (msg["content"] if isinstance(msg["content"], list) else []))
        return out
