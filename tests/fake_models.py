"""Fake models for the next-action check: the Messages API and an OpenAI-compatible Chat Completions
endpoint on loopback (``FakeAPI.serve``), answering as an agent that needs what its next step names.

Given the recorded transcripts, the fake knows each call's recorded next action (by the last user
message of the request: its first tool result's id, else its text). It answers with that action
when the request still holds what the action needs (the file it names), and with another action
(``bash ls``) when not. Its usage is measured on what it was sent, as a model would bill it: the
system prompt's, the tools' and the messages' compact JSON at 4 characters a token, a prefix (the
system prompt and tools, then the messages) to a message marked with ``cache_control`` written to
its prompt cache by the first request and read by every later one that starts with it.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid

from fake_anthropic import FakeAPI

from compactlab.transcripts.messages import FILE_KEYS

OTHER = {"name": "bash", "input": {"command": "ls"}}


def _compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _tokens(value) -> int:
    return math.ceil(len(_compact(value)) / 4)


def _plain(messages: list[dict]) -> list[dict]:
    """The messages without the cache marks (what a model reads and bills)."""
    return [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b
                              for b in m["content"]]} if isinstance(m["content"], list) else m for m in messages]


def _text_key(text: str) -> str:
    return "text:" + hashlib.sha256(text.encode()).hexdigest()


class FakeModels(FakeAPI):
    def __init__(self, transcripts: list) -> None:
        super().__init__()
        self.next: dict[str, dict] = {}  # key of a request's last user message -> the recorded next message
        for t in transcripts:
            entries = t.entries
            for i in range(len(entries) - 1):
                if entries[i].role == "user" and entries[i + 1].role == "assistant":
                    self.next.setdefault(self._key_of_user(entries[i].message), entries[i + 1].message)
        self.cached_prefixes: set[str] = set()
        self.asked: list[dict] = []  # per request: the api, what was needed, whether it was held, the usage
        self.window: int | None = None  # a request over this many tokens is refused (HTTP 400), as a model's window
        #: the dated snapshot a model's alias answers as (what a reply's ``model`` says)
        self.snapshots: dict[str, str] = {"claude-haiku-4-5": "claude-haiku-4-5-20251001"}

    @staticmethod
    def _key_of_user(message: dict) -> str:
        content = message.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    return "tool:" + str(b.get("tool_use_id"))
            content = "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
        return _text_key(str(content))

    def _decide(self, key: str, sent_text: str) -> tuple[dict, str | None, bool]:
        """The action to answer with: the recorded one when what it needs is in ``sent_text``."""
        recorded = self.next.get(key)
        action = None
        texts = []
        if recorded is not None:
            content = recorded.get("content")
            for b in content if isinstance(content, list) else [{"type": "text", "text": content}]:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    action = {"name": b["name"], "input": b.get("input") or {}}
                    break
                if isinstance(b, dict) and b.get("type") == "text":
                    texts.append(b.get("text") or "")
        if action is None:  # a text reply: the recorded text (the fake needs nothing for it)
            return {"text": "\n".join(texts) or "done"}, None, True
        needed = next((v for k in FILE_KEYS if isinstance(v := action["input"].get(k), str)), None)
        held = needed is None or needed in sent_text
        return (action if held else OTHER), needed, held

    def answer(self, path: str, headers: dict, body: bytes):
        if not path.endswith(("/v1/messages", "/chat/completions")) or self.script:
            return super().answer(path, headers, body)
        self.held_here(path)
        if path.endswith("/chat/completions"):
            return self._chat(headers, body)
        with self.lock:
            doc = json.loads(body)
            self.requests.append({"path": path, "headers": headers, "body": doc})
            messages = doc["messages"]
            plain = _plain(messages)
            action, needed, held = self._decide(self._key_of_user(messages[-1]), _compact(plain[:-1]))
            if self.echo:  # a model that repeats what it was told (the key, say) in its answer
                action = {"name": "bash", "input": {"command": f"curl -H 'x-api-key: {self.echo}' .",
                                                    "path": f"/keys/{self.echo}"}}
            fixed = _compact([doc[k] for k in ("system", "tools") if k in doc])  # (billed before the messages)
            fixed_chars = sum(len(_compact(doc[k])) for k in ("system", "tools") if k in doc)
            total = math.ceil((fixed_chars + len(_compact(plain))) / 4)
            if self.window is not None and total > self.window:
                return 400, {}, {"type": "error", "error": {"type": "invalid_request_error",
                                                            "message": f"prompt is too long: {total} tokens > {self.window} maximum"}}
            read = write = 0
            for k, m in enumerate(messages):
                if isinstance(m["content"], list) and any(isinstance(b, dict) and "cache_control" in b
                                                          for b in m["content"]):
                    prefix = fixed + _compact(plain[:k + 1])
                    size = math.ceil((fixed_chars + len(_compact(plain[:k + 1]))) / 4)
                    if prefix in self.cached_prefixes:
                        read = size
                    else:
                        write = size
                        self.cached_prefixes.add(prefix)
            usage = {"input_tokens": total - read - write, "cache_read_input_tokens": read,
                     "cache_creation_input_tokens": write, "output_tokens": 20}
            self.asked.append({"api": "anthropic", "needed": needed, "held": held, "usage": usage,
                               "measured_tokens": total})
            if "text" in action:
                content = [{"type": "text", "text": action["text"]}]
            else:
                content = [{"type": "text", "text": "next"},
                           {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:12]}", **action}]
            return 200, {}, {"id": "msg_x", "type": "message", "role": "assistant",
                             "model": self.snapshots.get(doc.get("model"), doc.get("model")),
                             "content": content, "stop_reason": "tool_use", "stop_sequence": None, "usage": usage}

    def _chat(self, headers: dict, body: bytes):
        with self.lock:
            doc = json.loads(body)
            self.requests.append({"path": "/chat/completions", "headers": headers, "body": doc})
            messages = doc["messages"]
            tail = [m for m in messages if m["role"] == "tool"]
            last = messages[-1]
            if last["role"] == "tool":
                k = len(messages) - 1
                while messages[k - 1]["role"] == "tool":
                    k -= 1
                key, earlier = "tool:" + messages[k]["tool_call_id"], messages[:k]
            else:
                key, earlier = _text_key(str(last.get("content") or "")), messages[:-1]
            del tail
            action, needed, held = self._decide(key, _compact(earlier))
            tools = len(_compact(doc["tools"])) if "tools" in doc else 0
            usage = {"prompt_tokens": math.ceil((tools + len(_compact(messages))) / 4), "completion_tokens": 20,
                     "prompt_tokens_details": {"cached_tokens": 0}}
            self.asked.append({"api": "openai", "needed": needed, "held": held, "usage": usage})
            if "text" in action:
                message = {"role": "assistant", "content": action["text"]}
            else:
                message = {"role": "assistant", "content": None, "tool_calls": [{
                    "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                    "function": {"name": action["name"], "arguments": json.dumps(action["input"])}}]}
            return 200, {}, {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": doc.get("model"),
                             "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}
