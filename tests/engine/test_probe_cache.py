"""The probe cache (engine/probe_cache.py): a streamed file's probes stored by the hash of its
bytes, read back by the next replay of the same bytes with the same results; an entry that is not
one is ignored with a warning and rebuilt."""

from __future__ import annotations

import os

import orjson
import pytest

from compactlab import load_policy
from compactlab.engine import probe_cache
from compactlab.engine.feeds import open_feed
from compactlab.engine.turns import replay
from helpers import tool_session, write_jsonl


@pytest.fixture
def big(tmp_path, monkeypatch):
    """A file over the cache's threshold (lowered), its own cache folder, read in-process."""
    monkeypatch.setattr(probe_cache, "MIN_BYTES", 1)
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
    msgs = tool_session(12)
    for i, m in enumerate(msgs):  # each result names a symbol a later reply uses
        if m["role"] == "user" and isinstance(m["content"], list):
            m["content"][0]["content"] = f"found handler_{i:03d}_impl in src/mod_{i}.py\n" + "pad " * 200
    for i, m in enumerate(msgs):
        if m["role"] == "assistant" and i > 3:
            m["content"].append({"type": "text", "text": f"next: handler_{i - 3:03d}_impl and src/mod_{i - 3}.py"})
    return str(write_jsonl(tmp_path / "t.jsonl", msgs))


def entries(tmp_path):
    folder = tmp_path / "cache" / "probes"
    return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("ahead", ["0", "1"])
def test_the_next_replay_of_the_same_bytes_reads_the_probes_and_gets_the_same_run(big, tmp_path, monkeypatch, ahead):
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", ahead)  # in-process, or by the reader process
    policy = load_policy("observation-masking", ["micro.keep_recent=1"])
    first = replay(open_feed(big), policy)
    assert first.summary.probes > 0 and len(entries(tmp_path)) == 1
    from compactlab.engine import baseline

    probe_index = baseline.ProbeIndex
    monkeypatch.setattr(baseline, "ProbeIndex", None)  # the second run must not index at all
    second = replay(open_feed(big), policy)
    assert second.summary == first.summary and second.probe_ledger == first.probe_ledger
    # other bytes, another key: the index is built again
    monkeypatch.setattr(baseline, "ProbeIndex", probe_index)
    with open(big, "ab") as f:
        f.write(b"\n")
    replay(open_feed(big), policy)
    assert len(entries(tmp_path)) == 2


@pytest.mark.parametrize("ahead", ["0", "1"])
def test_a_dry_run_or_a_small_file_or_the_switch_writes_no_entry(big, tmp_path, monkeypatch, ahead):
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", ahead)
    replay(open_feed(big, write_cache=False), load_policy("s08"))
    assert entries(tmp_path) == []
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")
    replay(open_feed(big), load_policy("s08"))
    assert entries(tmp_path) == []
    monkeypatch.delenv("COMPACTLAB_PROBE_CACHE")
    monkeypatch.setattr(probe_cache, "MIN_BYTES", 10 << 20)
    replay(open_feed(big), load_policy("s08"))
    assert entries(tmp_path) == []


@pytest.mark.parametrize("ahead", ["0", "1"])
@pytest.mark.parametrize("damage", ["not json", "wrong version", "bad probe", "fifo"])
def test_an_entry_that_is_not_one_is_ignored_with_a_warning_and_rebuilt(big, tmp_path, monkeypatch, damage, ahead):
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", ahead)  # looked for in-process, or by the reader process
    policy = load_policy("observation-masking", ["micro.keep_recent=1"])
    good = replay(open_feed(big), policy)
    [entry] = entries(tmp_path)
    doc = orjson.loads(entry.read_bytes())
    entry.unlink()
    if damage == "not json":
        entry.write_bytes(b"{nope")
    elif damage == "wrong version":
        entry.write_bytes(orjson.dumps({**doc, "version": 2}))
    elif damage == "bad probe":
        doc["source_call"][0] = "not a call"
        entry.write_bytes(orjson.dumps(doc))
    else:
        os.mkfifo(entry)
    feed = open_feed(big)
    run = replay(feed, policy)
    assert run.summary == good.summary  # indexed again, the same
    assert any("cache entry" in w and "ignored" in w for w in feed.warnings), feed.warnings
