"""A lower bound for `replay -p s08`: the least a pure-Python replay of the synthetic file does.

    python scripts/lower_bound.py TRANSCRIPT.jsonl

It reads and parses every line and measures each message's compact JSON (as the engine must),
then per call does only s08's cheapest shape: snip over 50 messages, the one result that just
became old replaced by micro's placeholder, a fixed-size summary over 50,000 chars, and a
four-number record. No invariant checks, retention, cache accounting, budget or persisted
files, raw baseline, reactive check or report files. Time it against the bench's floor (`time
python scripts/lower_bound.py FILE` beside the floor command) to see how much of a replay's time
is the engine's generality rather than the reading: the speed issue's note quotes it.
"""

from __future__ import annotations

import sys

import click  # noqa: F401  (the CLI's own import, which a replay pays too)
import orjson

PLACEHOLDER = "[Earlier tool result compacted. Re-run if needed.]"


def main(path: str) -> int:
    ctx: list[list] = []  # [message, chars, size of its tool results]
    chars = calls = 0
    records = []
    with open(path, "rb", buffering=1 << 20) as f:
        for line in f:
            if line.isspace():
                continue
            m = orjson.loads(line)
            size = len(orjson.dumps(m))
            results = 0
            if m["role"] == "user" and type(m["content"]) is list:
                results = sum(len(b["content"]) for b in m["content"]
                              if b.get("type") == "tool_result" and type(b.get("content")) is str)
            if m["role"] == "assistant":
                if len(ctx) > 50:  # snip: keep 3 and the last 46 around a placeholder
                    ctx = ctx[:3] + [[{"role": "user", "content": "[snipped]"}, 30, 0]] + ctx[-46:]
                    chars = sum(e[1] for e in ctx)
                seen = 0
                for e in reversed(ctx):  # micro: the 4th most recent result becomes the placeholder
                    if e[2]:
                        seen += 1
                        if seen > 3 and e[2] > 120:
                            e[0] = {**e[0], "content": [{**b, "content": PLACEHOLDER} if b.get("type") == "tool_result"
                                                        else b for b in e[0]["content"]]}
                            n = len(orjson.dumps(e[0]))
                            chars += n - e[1]
                            e[1], e[2] = n, 0
                            break
                if chars > 50_000:  # summary: a fixed-size stub
                    ctx, chars = [[{"role": "user", "content": "[Compacted] summary"}, 200, 0]], 200
                records.append((calls, len(ctx), chars, (chars + len(ctx) + 1) // 4))
                calls += 1
            ctx.append([m, size, results])
            chars += size
    return len(records)


if __name__ == "__main__":
    print(main(sys.argv[1]), "calls")
