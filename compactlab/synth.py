"""Realistic synthetic coding-agent transcripts (Anthropic messages JSONL), seeded and deterministic.

What real sessions have and the generator reproduces: parallel tool batches, heavy-tailed output
sizes (mostly a few KB, sometimes tens of KB, now and then a batch over 200,000 chars), list-form
tool_result contents, error results, new user prompts in the middle of a session, and the
occasional call of the manual ``compact`` tool. The same (calls, seed) always gives the same file.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path

import orjson

from .transcripts.messages import Message

_WORDS = ("config parser token cache index request handler session buffer result value state "
          "client server stream record layer policy context budget window summary message error "
          "retry limit offset schema field update delete insert select commit branch merge test").split()
_DIRS = ("src", "src/core", "src/api", "tests", "lib", "docs", "scripts", "src/utils")
_EXTS = (".py", ".py", ".py", ".ts", ".md", ".toml", ".json")
_TASKS = (
    "Fix the failing tests in the {w} module and make sure the CI passes.",
    "Add a --{w} option to the CLI and document it in the README.",
    "Refactor the {w} handling so that it streams instead of loading everything in memory.",
    "Find out why the {w} cache is invalidated on every request and fix it.",
    "Write unit tests for the {w} parser, covering the edge cases.",
    "The {w} endpoint returns 500 when the payload is empty. Investigate and fix.",
)


class _Text:
    """Cheap, varied, code-like text from a fixed pool of lines."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines = [self._line() for _ in range(512)]

    def _line(self) -> str:
        r = self.rng
        w = [r.choice(_WORDS) for _ in range(r.randint(2, 7))]
        kind = r.random()
        if kind < 0.3:
            return f"    def {w[0]}_{w[1]}(self, {', '.join(w[2:])}):"
        if kind < 0.55:
            return f"        {w[0]} = self.{w[1]}.get({w[-1]!r})"
        if kind < 0.7:
            return f"        # {' '.join(w)}"
        if kind < 0.85:
            return f"        return {w[0]}({', '.join(w[1:])})"
        return f"{w[0].upper()}_{w[1].upper()} = {r.randint(0, 99999)}"

    def block(self, chars: int, numbered: bool = False) -> str:
        out: list[str] = []
        size = 0
        n = 0
        choice = self.rng.choice
        while size < chars:
            n += 1
            line = choice(self.lines)
            if numbered:
                line = f"{n:6d}\t{line}"
            out.append(line)
            size += len(line) + 1
        return "\n".join(out)[:chars]


def _size(rng: random.Random) -> int:
    """Heavy-tailed output size: median ~1,500 chars, a long tail, capped at 120,000."""
    return int(min(120_000, max(20, rng.lognormvariate(math.log(1500), 1.5))))


def generate(calls: int, seed: int = 0) -> Iterator[Message]:
    rng = random.Random(seed)
    text = _Text(rng)
    files = [f"{rng.choice(_DIRS)}/{rng.choice(_WORDS)}_{rng.choice(_WORDS)}{rng.choice(_EXTS)}" for _ in range(60)]
    n_tool = 0

    def tool_id() -> str:
        nonlocal n_tool
        n_tool += 1
        return f"toolu_{seed:04d}{n_tool:06d}{rng.getrandbits(24):06x}"

    yield {"role": "user", "content": rng.choice(_TASKS).format(w=rng.choice(_WORDS))}
    for call in range(calls):
        last = call == calls - 1
        if last or rng.random() < 0.025:  # end of a turn: text only, then maybe a new prompt
            yield {"role": "assistant", "content": [{"type": "text", "text": "Done. " + text.block(rng.randint(80, 600))}]}
            if not last:
                yield {"role": "user", "content": [{"type": "text", "text": rng.choice(_TASKS).format(w=rng.choice(_WORDS))}]}
            continue
        if rng.random() < 0.01:
            tid = tool_id()
            yield {"role": "assistant", "content": [
                {"type": "text", "text": "The context is getting long; compacting."},
                {"type": "tool_use", "id": tid, "name": "compact", "input": {"focus": "current task and files changed"}},
            ]}
            yield {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": "Compressing..."}]}
            continue
        r = rng.random()
        n = 1 if r < 0.6 else rng.randint(2, 4) if r < 0.92 else rng.randint(5, 8)
        huge = rng.random() < 0.02
        uses: list[dict] = []
        results: list[dict] = []
        for _ in range(n):
            tid = tool_id()
            path = rng.choice(files)
            kind = rng.random()
            size = rng.randint(45_000, 90_000) if huge else _size(rng)
            if kind < 0.4 or huge:
                use = {"name": "read_file", "input": {"path": path}}
                out: str | list = text.block(size, numbered=True)
            elif kind < 0.7:
                use = {"name": "bash", "input": {"command": f"pytest -q {path}" if rng.random() < 0.5 else f"grep -rn {rng.choice(_WORDS)} src"}}
                out = text.block(size)
            elif kind < 0.85:
                use = {"name": "edit_file", "input": {"path": path, "old_text": text.block(60), "new_text": text.block(80)}}
                out = f"Edited {path}"
            else:
                use = {"name": "grep", "input": {"pattern": rng.choice(_WORDS), "path": rng.choice(_DIRS)}}
                out = text.block(min(size, 8000))
            uses.append({"type": "tool_use", "id": tid, **use})
            result: dict = {"type": "tool_result", "tool_use_id": tid}
            if rng.random() < 0.05:
                result["content"] = f"Error: {rng.choice(_WORDS)} failed with exit code {rng.randint(1, 2)}"
                result["is_error"] = True
            elif rng.random() < 0.1 and isinstance(out, str):
                result["content"] = [{"type": "text", "text": out}]
            else:
                result["content"] = out
            results.append(result)
        lead = [{"type": "text", "text": text.block(rng.randint(40, 300))}] if rng.random() < 0.7 else []
        yield {"role": "assistant", "content": [*lead, *uses]}
        yield {"role": "user", "content": results}


def recorded(messages: Iterator[Message], model: str = "claude-sonnet-4-5") -> Iterator[dict]:
    """The messages as a recording with usage writes them: each reply an API response object (its
    id, model, usage and time), its usage what the API would count of the context sent (3,000
    tokens of system prompt and tools, then 3.7 characters a token; the previous prompt read from
    the cache, the rest written to it)."""
    chars, previous = 0, 0
    for n, m in enumerate(messages):
        size = len(orjson.dumps(m))
        if m["role"] != "assistant":
            chars += size
            yield m
            continue
        prompt = 3000 + round(chars / 3.7)
        read = min(previous, prompt)
        yield {"id": f"msg_{n:08d}", "type": "message", "role": "assistant", "model": model, "content": m["content"],
               "stop_reason": "tool_use", "stop_sequence": None,
               "usage": {"input_tokens": 3, "cache_creation_input_tokens": prompt - read - 3,
                         "cache_read_input_tokens": read, "output_tokens": max(1, round(size / 3.7)),
                         "cache_creation": {"ephemeral_5m_input_tokens": prompt - read - 3,
                                            "ephemeral_1h_input_tokens": 0}},
               "timestamp": f"2026-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z"}
        chars += size
        previous = prompt


def claude_code(messages: Iterator[dict], session: str = "synthetic") -> Iterator[dict]:
    """The messages (``recorded``'s: replies with their usage) as Claude Code writes a session: each
    in its envelope, a reply a line per block (its id, model and usage on each, as Claude Code
    repeats them), the conversation's lines chained by their parents."""
    parent = None
    for n, m in enumerate(messages):
        envelope = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/work",
                    "sessionId": session, "version": "2.1.0", "type": m["role"]}
        if m["role"] != "assistant":
            parent = f"{n:08d}-0000-4000-8000-000000000000"
            yield {**envelope, "uuid": parent, "message": m}
            continue
        blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        reply = {k: v for k, v in m.items() if k != "timestamp"}
        for k, block in enumerate(blocks):
            parent = f"{n:08d}-{k:04d}-4000-8000-000000000000"
            yield {**envelope, "uuid": parent, "requestId": f"req_{n:08d}", "timestamp": m.get("timestamp"),
                   "message": {**reply, "content": [block]}}


def write(path: str | Path, calls: int, seed: int = 0, usage: bool = False, form: str = "anthropic") -> int:
    """Write a synthetic transcript (``usage``: as a recording with usage writes it, ``recorded``;
    ``form`` ``"claude-code"``: as a Claude Code session, ``claude_code``, its usage recorded);
    returns its size in bytes."""
    messages = generate(calls, seed)
    lines = (claude_code(recorded(messages)) if form == "claude-code"
             else recorded(messages) if usage else messages)
    data = b"".join(orjson.dumps(m) + b"\n" for m in lines)
    from .plumbing.outputs import atomic_write_bytes

    atomic_write_bytes(Path(path), data)
    return len(data)
