"""Regenerate sample_transcripts/ (synthetic sessions and small hand-made ones)."""

from __future__ import annotations

from pathlib import Path

import orjson

from compactlab import synth

OUT = Path(__file__).resolve().parent.parent / "sample_transcripts"


def lines(n: int, word: str) -> str:
    return "\n".join(f"{i:5d}  {word} line {i}: value = compute_{word}({i}) # keep" for i in range(n))


def write(name: str, messages: list[dict]) -> None:
    (OUT / name).write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in messages))


def use(tid: str, name: str, **inp: object) -> dict:
    return {"type": "tool_use", "id": tid, "name": name, "input": inp}


def result(tid: str, content: object, **extra: object) -> dict:
    return {"type": "tool_result", "tool_use_id": tid, "content": content, **extra}


def parallel_batch() -> list[dict]:
    return [
        {"role": "user", "content": "Compare the three config loaders and tell me which one is unused."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "I'll read all three at once."},
            use("toolu_pb_1", "read_file", path="src/config/yaml_loader.py"),
            use("toolu_pb_2", "read_file", path="src/config/toml_loader.py"),
            use("toolu_pb_3", "read_file", path="src/config/env_loader.py"),
        ]},
        {"role": "user", "content": [
            result("toolu_pb_1", lines(40, "yaml")),
            result("toolu_pb_2", [{"type": "text", "text": lines(30, "toml")}]),
            result("toolu_pb_3", lines(25, "env")),
        ]},
        {"role": "assistant", "content": [use("toolu_pb_4", "grep", pattern="env_loader", path="src")]},
        {"role": "user", "content": [result("toolu_pb_4", "No matches found", is_error=False)]},
        {"role": "assistant", "content": [{"type": "text", "text": "env_loader.py is never imported: it is unused."}]},
    ]


def huge_batch() -> list[dict]:
    ids = [f"toolu_hb_{i}" for i in range(1, 5)]
    return [
        {"role": "user", "content": "Read the four generated schema files and summarise the tables."},
        {"role": "assistant", "content": [use(t, "read_file", path=f"gen/schema_{i}.sql") for i, t in enumerate(ids, 1)]},
        # four results of ~60,000 chars: 240,000 > the 200,000 budget, so s08 persists the largest
        {"role": "user", "content": [result(t, lines(900 + 20 * i, f"schema{i}")) for i, t in enumerate(ids, 1)]},
        {"role": "assistant", "content": [{"type": "text", "text": "The schemas define 12 tables; details follow."}]},
        {"role": "user", "content": "Now count the indexes."},
        {"role": "assistant", "content": [use("toolu_hb_5", "bash", command="grep -c 'CREATE INDEX' gen/*.sql")]},
        {"role": "user", "content": [result("toolu_hb_5", "gen/schema_1.sql:4\ngen/schema_2.sql:7")]},
        {"role": "assistant", "content": [{"type": "text", "text": "There are 11 indexes."}]},
    ]


def manual_compact() -> list[dict]:
    msgs: list[dict] = [{"role": "user", "content": "Profile the importer and speed it up."}]
    for i in range(1, 7):
        msgs.append({"role": "assistant", "content": [use(f"toolu_mc_{i}", "bash", command=f"python -m cProfile run_{i}.py")]})
        msgs.append({"role": "user", "content": [result(f"toolu_mc_{i}", lines(30, f"profile{i}"))]})
    msgs.append({"role": "assistant", "content": [
        {"type": "text", "text": "The context is long; I'll compact before changing code."},
        use("toolu_mc_compact", "compact", focus="profiling findings"),
    ]})
    msgs.append({"role": "user", "content": [result("toolu_mc_compact", "Compressing...")]})
    msgs.append({"role": "assistant", "content": [use("toolu_mc_7", "edit_file", path="importer.py", old_text="for row in rows", new_text="for row in batched(rows)")]})
    msgs.append({"role": "user", "content": [result("toolu_mc_7", "Edited importer.py")]})
    msgs.append({"role": "assistant", "content": [{"type": "text", "text": "Batched the inserts: 3x faster."}]})
    return msgs


def recorded_orphan() -> list[dict]:
    return [
        {"role": "user", "content": "Run the tests."},
        {"role": "assistant", "content": [use("toolu_ro_1", "bash", command="pytest -q")]},
        {"role": "user", "content": [result("toolu_ro_1", "3 passed, 1 failed")]},
        # the recording lost the assistant message that called toolu_ro_lost: its result is an orphan
        {"role": "assistant", "content": [{"type": "text", "text": "One test fails; looking at it."}]},
        {"role": "user", "content": [result("toolu_ro_lost", "test_parse: AssertionError"), {"type": "text", "text": "go on"}]},
        {"role": "assistant", "content": [use("toolu_ro_2", "read_file", path="tests/test_parse.py")]},
        {"role": "user", "content": [result("toolu_ro_2", lines(20, "test"))]},
        {"role": "assistant", "content": [{"type": "text", "text": "Fixed the off-by-one in parse()."}]},
    ]


def main() -> None:
    OUT.mkdir(exist_ok=True)
    synth.write(OUT / "synth-small.jsonl", calls=30, seed=7)
    synth.write(OUT / "synth-medium.jsonl", calls=120, seed=11)
    synth.write(OUT / "synth-long.jsonl", calls=260, seed=3)
    write("parallel-batch.jsonl", parallel_batch())
    write("huge-batch.jsonl", huge_batch())
    write("manual-compact.jsonl", manual_compact())
    write("recorded-orphan.jsonl", recorded_orphan())


if __name__ == "__main__":
    main()
