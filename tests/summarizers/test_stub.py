"""The stub summarizer's helpers keep their simple meaning when they take shortcuts."""

from __future__ import annotations

import random

from compactlab.summarizers.stub import _clip


def test_clip_from_a_prefix_is_clip_of_the_whole_text():
    def plain(text: str, n: int) -> str:
        text = " ".join(text.split())
        return text if len(text) <= n else text[: n - 1] + "…"

    rng = random.Random(7)
    for _ in range(3000):
        n = rng.choice([2, 10, 50, 300])
        text = "".join(rng.choice(["a", "bc", " ", "\n", "   ", "\t\t", "word "]) for _ in range(rng.randint(0, 1500)))
        assert _clip(text, n) == plain(text, n)


def test_the_stub_read_from_facts_says_what_the_messages_say():
    """The stub counts tools, files and errors from the entries' facts and opens only the
    messages whose text it quotes: the same summary as reading every block of every message."""
    from collections import Counter

    from compactlab.transcripts.messages import files_in_input, make_entry, text_of
    from compactlab.summarizers import StubSummarizer, SummaryRequest
    from helpers import asst, results, tr, tu, user

    def texts(messages, role):
        return [t for m in messages if m["role"] == role and (t := text_of(m).strip())]

    messages = [user("  \n "), user([{"type": "text", "text": " "}, {"type": "text", "text": "fix a.py"}]),
                asst("looking", tu("1", "read_file", path="a.py"), tu("2", "bash", command="ls")),
                results(tr("1", "x" * 40), tr("2", "no", is_error=True)),
                asst(tu("3", "edit_file", path="b.py", file_path="c.py"), tu("4", "read_file", path="a.py")),
                results(tr("3", "ok"), tr("4", "err", is_error=1)), user("now run the tests"), asst("done \n")]
    entries = [make_entry(m, i) for i, m in enumerate(messages)]
    assert [e.has_text for e in entries] == [False, True, True, False, False, False, True, True]
    text = StubSummarizer().summarize(SummaryRequest(entries=entries)).text
    tools = Counter(b["name"] for m in messages if m["role"] == "assistant" and isinstance(m["content"], list)
                    for b in m["content"] if b.get("type") == "tool_use")
    files = dict.fromkeys(f for m in messages if m["role"] == "assistant" and isinstance(m["content"], list)
                          for b in m["content"] if b.get("type") == "tool_use" for f in files_in_input(b["input"]))
    assert text.splitlines() == [
        "Summary of 8 earlier messages (stub summarizer).",
        f"First request: {texts(messages, 'user')[0]}",
        f"Latest request: {texts(messages, 'user')[-1]}",
        "Tools used: " + ", ".join(f"{n}×{c}" for n, c in sorted(tools.items(), key=lambda t: (-t[1], t[0]))),
        "Files: " + ", ".join(files),
        "Error results: 2",
        f"Last assistant text: …{texts(messages, 'assistant')[-1]}",
    ]
    assert StubSummarizer().summarize(SummaryRequest(messages)).text == text  # given messages: the same
