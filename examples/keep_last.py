"""A compaction step of your own (compactlab #45): keep the first message and the last ones.

    compactlab replay sample_transcripts/synth-medium.jsonl -p py:examples/keep_last.py:keep_last
    compactlab compare sample_transcripts/*.jsonl -p s08 -p examples/keep_last.toml
"""

from dataclasses import dataclass


@dataclass
class Settings:
    keep: int = 12  # the last messages kept, besides the first
    over_tokens: int = 20_000  # act only on a context larger than this


def keep_last(messages, facts, settings):
    if facts.tokens <= settings.over_tokens or len(messages) <= settings.keep + 1:
        return messages  # the same objects: nothing changed
    tail = messages[-settings.keep:]
    while tail and tail[0]["role"] == "user" and _has_results(tail[0]):
        tail = tail[1:]  # never open with the results of a call that was dropped
    note = {"role": "user", "content": f"[{len(messages) - 1 - len(tail)} earlier messages dropped]"}
    return [messages[0], note, *tail]


def _has_results(message):
    content = message["content"]
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


keep_last.settings = Settings
