"""A compaction step in another process (compactlab #45): the reference of protocol
compactlab-step version 1, in Python. Any language that reads and writes JSON lines can do this.

    compactlab replay sample_transcripts/synth-medium.jsonl -p "cmd:python examples/step_process.py"

It keeps the first message and the last KEEP (its settings' "keep", 12 by default) once the
context is over 20,000 tokens, answering kept messages by their index. It keeps state: it is sent
only what changed since its previous answer.
"""

import json
import sys


def answer(doc):
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def main():
    hello = json.loads(sys.stdin.readline())
    if hello.get("protocol") != "compactlab-step" or hello.get("version") != 1:
        sys.exit(f"step_process: cannot speak {hello!r}")
    keep = int(hello.get("settings", {}).get("keep", 12))
    answer({"version": 1, "keeps_state": True})
    held = []  # the context as this process last answered it
    for line in sys.stdin:
        request = json.loads(line)
        messages = held[:request["from"]] + request["messages"]
        n = len(messages)
        if request["facts"]["tokens"] <= 20_000 or n <= keep + 1:
            kept = list(range(n))
        else:
            start = n - keep
            while start < n and messages[start]["role"] != "assistant":
                start += 1  # never open with the results of a dropped call
            kept = [0, *range(start, n)]
        held = [messages[i] for i in kept]
        answer({"messages": kept})


if __name__ == "__main__":
    main()
