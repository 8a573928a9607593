"""Hypothesis strategies: valid agent transcripts and random layer settings."""

from __future__ import annotations

from hypothesis import strategies as st

from compactlab.engine.policy import Policy, build_policy

TOOLS = ["bash", "read_file", "edit_file", "grep"]


@st.composite
def transcripts(draw, max_turns: int = 40) -> list[dict]:
    """Valid transcripts: parallel tool batches, list-form results, errors, user prompts between
    tool turns, and the occasional manual compact call."""
    n = 0

    def tid() -> str:
        nonlocal n
        n += 1
        return f"toolu_{n:05d}"

    def text(lo: int = 1, hi: int = 400) -> str:
        return "x" * draw(st.integers(lo, hi)) + draw(st.sampled_from(["", " é", "\u2028", "{}"]))

    msgs: list[dict] = [{"role": "user", "content": text()}]
    for _ in range(draw(st.integers(0, max_turns))):  # (none: a transcript with no call, one message)
        kind = draw(st.sampled_from(["tools", "tools", "tools", "text", "compact"]))
        if kind == "text":
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": text()}]})
            msgs.append({"role": "user", "content": draw(st.sampled_from([text(), [{"type": "text", "text": "next"}]]))})
            continue
        uses = []
        if kind == "compact":
            uses.append({"type": "tool_use", "id": tid(), "name": "compact", "input": {}})
        for _ in range(draw(st.integers(1, 4)) if kind == "tools" else 0):
            name = draw(st.sampled_from(TOOLS))
            uses.append({"type": "tool_use", "id": tid(), "name": name, "input": {"path": f"f{draw(st.integers(0, 5))}.py"}})
        lead = [{"type": "text", "text": text(1, 80)}] if draw(st.booleans()) else []
        msgs.append({"role": "assistant", "content": lead + uses})
        results = []
        for u in draw(st.permutations(uses)):
            size = draw(st.sampled_from([10, 100, 121, 500, 3000, 40_000]))
            content = "r" * size if draw(st.booleans()) else [{"type": "text", "text": "r" * size}]
            block = {"type": "tool_result", "tool_use_id": u["id"], "content": content}
            if draw(st.integers(0, 9)) == 0:
                block["is_error"] = True
            results.append(block)
        msgs.append({"role": "user", "content": results})
        if draw(st.integers(0, 5)) == 0:  # a new prompt between tool turns
            msgs.append({"role": "user", "content": text()})
    msgs.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    return msgs


@st.composite
def policies(draw, pair_safe: bool = True) -> Policy:
    """Random layer values; with ``pair_safe`` every cut protects pairs and manual compaction
    summarises after the results (SPEC §11)."""
    max_messages = draw(st.integers(2, 30))
    keep_head = draw(st.integers(0, max_messages - 1))
    preview = draw(st.integers(0, 2000))
    return build_policy(dict(
        order=draw(st.permutations(["budget", "snip", "micro", "custom"])),
        budget={"enabled": draw(st.booleans()), "max_chars": draw(st.integers(1, 100_000)),
                "persist_threshold": draw(st.integers(preview + 1, 50_000)), "preview_chars": preview},
        snip={"enabled": draw(st.booleans()), "max_messages": max_messages, "keep_head": keep_head,
              "pair_safe": True if pair_safe else draw(st.sampled_from([True, False, "head"]))},
        micro={"enabled": draw(st.booleans()), "keep_recent": draw(st.integers(0, 6)),
               "keep_by": draw(st.sampled_from(["results", "turns"])), "min_chars": draw(st.integers(0, 500)),
               "only_consumed": draw(st.booleans()), "clear_inputs": draw(st.booleans()),
               "trigger_tokens": draw(st.sampled_from([0, 0, 2000])), "clear_at_least": draw(st.sampled_from([0, 50]))},
        summary={"enabled": draw(st.booleans()), "trigger": draw(st.integers(1_000, 100_000)),
                 "unit": draw(st.sampled_from(["chars", "tokens"])), "keep_head": draw(st.integers(0, 4)),
                 "keep_tail": draw(st.integers(0, 6)), "ack": draw(st.sampled_from(["", "Understood. Continuing."])),
                 "input_from": draw(st.sampled_from(["head", "tail"]))},
        reactive={"enabled": draw(st.booleans()), "window_tokens": draw(st.integers(500, 50_000)),
                  "keep_tail": draw(st.integers(0, 8)), "pair_safe": True if pair_safe else draw(st.booleans())},
        custom={"enabled": draw(st.booleans()), "call": "custom_steps:keep_ends",
                "settings": {"keep": draw(st.integers(1, 8))}},
        manual={"enabled": draw(st.booleans()),
                "mode": "after_results" if pair_safe else draw(st.sampled_from(["before_results", "after_results"]))},
    ), "generated policy")
