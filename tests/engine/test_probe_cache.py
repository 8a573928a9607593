"""The probe cache (engine/measures/probe_cache.py): a streamed file's probes stored by the hash of its
bytes, read back by the next replay of the same bytes with the same results; an entry that is not
one is ignored with a warning and rebuilt."""

from __future__ import annotations

import json
import os

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlab import load_policy
from compactlab.engine.measures import probe_cache
from compactlab.plumbing import digests
from compactlab.engine.feeds import open_feed
from compactlab.engine.loop import replay
from helpers import tool_session, write_jsonl, examples


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
@pytest.mark.parametrize("preset", ["observation-masking", "langchain-clear-tool-uses"])
def test_the_next_replay_of_the_same_bytes_reads_the_probes_and_gets_the_same_run(big, tmp_path, monkeypatch, ahead,
                                                                                   preset):
    """Read back, the probes give the run they gave: the native loop reading them where the native
    core holds them (``StoredProbes``), and a loop of Python's (a framework's preset) asking for each
    call's ``Probe``s."""
    from compactlab import core

    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", ahead)  # in-process, or by the reader process
    policy = load_policy(preset, ["micro.keep_recent=1"] if preset == "observation-masking" else [])
    first = replay(open_feed(big), policy)
    assert first.summary.probes > 0 and len(entries(tmp_path)) == 1
    from compactlab.engine.measures import baseline

    probe_index = baseline.ProbeIndex
    monkeypatch.setattr(baseline, "ProbeIndex", None)  # the second run must not index at all (nor its reader)
    loaded, load = [], probe_cache.load
    monkeypatch.setattr(probe_cache, "load", lambda key, warnings: loaded.append(load(key, warnings)) or loaded[-1])
    second = replay(open_feed(big), policy)
    assert second.summary == first.summary and second.probe_ledger == first.probe_ledger
    native = core.in_use()
    assert [type(got) for got in loaded] == [dict if native is None else native.StoredProbes]
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


def _hashes(monkeypatch) -> list[str]:
    """The files ``key_of`` hashes from now on."""
    import hashlib

    hashed: list[str] = []
    real = hashlib.file_digest

    def counting(f, digest):
        hashed.append(f.name)
        return real(f, digest)

    monkeypatch.setattr(hashlib, "file_digest", counting)  # (digests imports it as it hashes)
    return hashed


def test_a_file_unchanged_since_it_was_hashed_is_not_hashed_again(big, monkeypatch):
    hashed = _hashes(monkeypatch)
    key = probe_cache.key_of(big)
    # just written: its change time is within RACY_NS of the hashing, so the next look hashes again
    assert probe_cache.key_of(big) == key and hashed == [big, big]
    monkeypatch.setattr(digests, "RACY_NS", -10**18)  # as if it had been hashed long after its last change
    assert probe_cache.key_of(big) == key and probe_cache.key_of(big) == key
    assert len(hashed) == 2  # the remembered hash, by its stat


def test_a_file_written_since_is_hashed_again_even_with_its_size_and_mtime_put_back(big, monkeypatch):
    hashed = _hashes(monkeypatch)
    key = probe_cache.key_of(big)
    st = os.stat(big)
    data = bytearray(open(big, "rb").read())
    data[-10:-9] = b"Z" if data[-10:-9] != b"Z" else b"Y"
    with open(big, "r+b") as f:
        f.write(data)
    os.utime(big, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.path.getsize(big) == st.st_size
    assert probe_cache.key_of(big) != key and len(hashed) == 2


def test_the_remembered_hash_must_be_one_and_a_dry_run_writes_none(big, tmp_path, monkeypatch):
    hashed = _hashes(monkeypatch)
    probe_cache.key_of(big, remember=False)
    assert not (tmp_path / "cache" / digests.KIND).exists()
    key = probe_cache.key_of(big)
    monkeypatch.setattr(digests, "RACY_NS", -10**18)
    [memo] = (tmp_path / "cache" / digests.KIND).iterdir()
    doc = orjson.loads(memo.read_bytes())
    memo.write_bytes(orjson.dumps({**doc, "sha256": "../../etc/passwd"}))
    assert probe_cache.key_of(big) == key and len(hashed) == 3  # not a digest: hashed again
    assert probe_cache.key_of(big) == key and len(hashed) == 3  # (and remembered anew)


def _saved(tmp_path, monkeypatch, probes):
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    probe_cache.save("k", probes)
    return orjson.loads((tmp_path / "cache" / "probes" / "k.json").read_bytes())


def _read_back(tmp_path, monkeypatch, doc, core: str):
    """``probe_cache.load`` of the entry ``doc`` on ``core`` (as a dict: the native core's is held in
    Rust), and the warnings it gave."""
    (tmp_path / "cache" / "probes" / "k.json").write_bytes(orjson.dumps(doc))
    monkeypatch.setenv("COMPACTLAB_CORE", core)
    warnings: list[str] = []
    got = probe_cache.load("k", warnings)
    return (None if got is None else dict(got.items())), warnings


def _cores():
    from compactlab import core

    return ["python"] + (["native"] if core.native_module() is not None else [])


def test_an_entry_reads_back_as_the_probes_saved(tmp_path, monkeypatch):
    from compactlab.engine.measures.probes import Probe

    probes = {0: [Probe("a_b", ((1, 0),), 0, "bash", "identifier")],
              7: [Probe("x/y.py", ((3, 1), (9, 0), (11, -1)), 2, "read", "path"), Probe("1234", ((5, 2),), -1, "unknown", "number")]}
    doc = _saved(tmp_path, monkeypatch, probes)
    for core in _cores():
        got, warnings = _read_back(tmp_path, monkeypatch, doc, core)
        assert got == probes and not warnings
        assert all(type(p) is Probe and type(p.where[0]) is tuple for ps in got.values() for p in ps)
        assert _read_back(tmp_path, monkeypatch, {**doc, **{c: [] for c in probe_cache.COLUMNS}}, core) == ({}, [])


@pytest.mark.parametrize("damage", [
    {"where": [[1, 0], [3, 1, 9], [5, 2]]},  # a pair cut short
    {"where": [[1, 0], [], [5, 2]]},  # nowhere
    {"where": [[1, 0], [3, 1.5], [5, 2]]},  # not a position
    {"where": [[1, 0], [3, True], [5, 2]]},
    {"kind": ["identifier", "path", "number"]},  # (a kind by its name, not its place in the table)
    {"kinds": ["identifier", "path", "word"]},  # not a kind
    {"call": [0, -7, 7]},
    {"text": [0, None, 2]},
    {"text": [0, 3, 2]},  # past its table
    {"text": [0, -1, 2]},
    {"source_tool": [0, True, 2]},
    {"texts": "a_b"},  # a table not a list
    {"tools": ["bash", 3, "unknown"]},
    {"source_tool": [0, 1]},  # a column short
    {"where": "1,0"},
    {"version": probe_cache.INDEX_VERSION + 1},
])
def test_an_entry_with_a_value_save_does_not_write_is_not_read(tmp_path, monkeypatch, damage):
    from compactlab.engine.measures.probes import Probe

    probes = {0: [Probe("a_b", ((1, 0),), 0, "bash", "identifier")],
              7: [Probe("x/y.py", ((3, 1),), 2, "read", "path"), Probe("1234", ((5, 2),), -1, "unknown", "number")]}
    doc = _saved(tmp_path, monkeypatch, probes)
    for core in _cores():
        assert _read_back(tmp_path, monkeypatch, doc, core) == (probes, [])
        got, warnings = _read_back(tmp_path, monkeypatch, {**doc, **damage}, core)
        assert got is None and warnings == [f"cache entry {tmp_path / 'cache' / 'probes' / 'k'}.json ignored "
                                            "(not a probe index of this version): rebuilt"]


def test_the_native_core_holds_the_probes_it_read_back_and_makes_a_calls_when_asked(tmp_path, monkeypatch):
    """Read back by the native core, the probes are held in Rust (``StoredProbes``) and answer as
    the dict Python reads: by call, in the order stored, each call's a new list of ``Probe``s."""
    from compactlab import core
    from compactlab.engine.measures.probes import Probe

    native = core.native_module()
    if native is None:
        pytest.skip("the native core is not built in this install: nothing holds the probes in Rust")
    probes = {7: [Probe("x/y.py", ((3, 1), (9, 0)), 2, "read", "path")],
              0: [Probe("a_b", ((1, 0),), 0, "bash", "line")]}
    doc = _saved(tmp_path, monkeypatch, probes)
    doc = {k: v[::-1] if k in probe_cache.COLUMNS else v for k, v in doc.items()}  # (saved by call: 7 first now)
    (tmp_path / "cache" / "probes" / "k.json").write_bytes(orjson.dumps(doc))
    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    got = probe_cache.load("k", [])
    assert type(got) is native.StoredProbes
    assert list(got) == list(got.keys()) == [7, 0] and len(got) == 2 and 7 in got and 1 not in got and "7" not in got
    assert got[7] == got.get(7) == probes[7] and got[7] is not got[7] and got.get(1) is None and got.get(1, ()) == ()
    assert list(got.values()) == [probes[7], probes[0]] and list(got.items()) == [(7, probes[7]), (0, probes[0])]
    assert got == probes == got and got != {7: probes[7]} and got != [7, 0]
    with pytest.raises(KeyError):
        got[1]
    # (a text asked at many calls is one string, as are its rows' tools: the ledger's rows share them)
    again = {3: [Probe("x/y.py", ((3, 1),), 2, "read", "path")], 5: [Probe("x/y.py", ((3, 1),), 4, "read", "path")]}
    (tmp_path / "cache" / "probes" / "k2.json").write_bytes(orjson.dumps(_saved(tmp_path, monkeypatch, again)))
    got = probe_cache.load("k2", [])
    assert got == again and got[3][0].text is got[5][0].text and got[3][0].source_tool is got[5][0].source_tool
    # (a run's ledger is made with room for every probe held: their outcomes are not copied as it grows)
    assert got.rows == 2 and probe_cache.load("k", []).rows == 2
    from compactlab.engine.measures.recall import Recall

    assert Recall(got, None, native=native).ledger.room == 2 and Recall({}, None, native=native).ledger.room == 0


def test_a_remembered_hash_that_is_not_a_file_is_left_alone_and_the_file_hashed(big, tmp_path, monkeypatch):
    hashed = _hashes(monkeypatch)
    key = probe_cache.key_of(big)
    [memo] = (tmp_path / "cache" / digests.KIND).iterdir()
    memo.unlink()
    os.mkfifo(memo)  # (never opened for reading: a reader would block on it)
    monkeypatch.setattr(digests, "RACY_NS", -10**18)
    assert probe_cache.key_of(big) == key and len(hashed) == 2
    assert memo.is_fifo()  # not replaced: compactlab did not make it


def test_a_loaded_transcripts_content_hash_is_the_remembered_digest_of_the_bytes_it_was_read_from(
        big, tmp_path, monkeypatch):
    """``Transcript.content_hash`` (what compare, check and tune ask of every file) is the digest the
    probe cache's key remembered for the file as it was read, not a second hashing of it; the file's
    own SHA-256 either way. A file changed since it was hashed, one hashed too soon after its last
    change, one never remembered and a compressed one are hashed."""
    import gzip
    import hashlib

    from compactlab.transcripts import load_transcript, reader

    calls: list[str] = []
    real = reader.file_sha256
    monkeypatch.setattr(reader, "file_sha256", lambda path: calls.append(path) or real(path))
    own = hashlib.sha256(open(big, "rb").read()).hexdigest()

    assert load_transcript(big).content_hash == own and calls == [big]  # (never remembered)
    probe_cache.key_of(big)
    assert load_transcript(big).content_hash == own and len(calls) == 2  # (remembered too soon: racy)
    monkeypatch.setattr(digests, "RACY_NS", -10**18)
    loaded = load_transcript(big)
    assert loaded.stamp is not None and loaded.content_hash == own and len(calls) == 2  # the remembered one
    with open(big, "ab") as f:  # (written since it was hashed: another stat)
        f.write(b"\n")
    assert load_transcript(big).content_hash == hashlib.sha256(open(big, "rb").read()).hexdigest()
    assert len(calls) == 3
    packed = tmp_path / "t.jsonl.gz"
    packed.write_bytes(gzip.compress(open(big, "rb").read()))
    probe_cache.key_of(str(packed))  # (remembers the compressed bytes' digest: not the content's)
    assert load_transcript(str(packed)).content_hash == hashlib.sha256(open(big, "rb").read()).hexdigest()
    assert len(calls) == 4


def _chat(tmp_path, name: str = "chat.json") -> str:
    """A chat document (``helpers.chat_document``) of 12 turns over the lowered threshold."""
    from helpers import chat_document

    return chat_document(tmp_path / name, 12, "pad " * 200)


def test_a_corpus_compared_again_reads_its_probes_and_gives_the_same_results(big, cli, tmp_path, monkeypatch):
    """(#44 §7) compare loads its files whole; their probes go to the cache as a streamed file's
    do, keyed by the bytes the loader hashed; the next compare does not index them at all."""
    from compactlab.engine.measures import baseline

    chat = _chat(tmp_path)

    def compare(*extra: str):
        r = cli("compare", chat, "-p", "observation-masking", "--set", "micro.keep_recent=1", "--format", "json",
                "-q", "--jobs", "1", "--charts", "none", "--out", tmp_path / "out", "--force", *extra)
        assert r.exit_code == 0, r.output
        return [{k: v for k, v in run.items() if k != "elapsed_s"} for run in orjson.loads(r.stdout)["runs"]]

    dry = compare("--dry-run")
    assert entries(tmp_path) == []  # a dry run reads the cache, writes nothing
    first = compare()
    assert len(entries(tmp_path)) == 1 and any(run["probes"] for run in first) and first == dry
    monkeypatch.setattr(baseline, "ProbeIndex", None)  # the second compare must not index
    assert compare() == first
    [entry] = entries(tmp_path)
    entry.write_bytes(b"{nope")  # a damaged entry: said, and the file indexed again
    monkeypatch.undo()
    monkeypatch.setattr(probe_cache, "MIN_BYTES", 1)
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    r = cli("compare", chat, "-p", "observation-masking", "--set", "micro.keep_recent=1", "--format", "json",
            "--jobs", "1", "--charts", "none", "--dry-run")
    assert r.exit_code == 0 and "cache entry" in r.stderr and "ignored" in r.stderr, r.stderr
    assert [{k: v for k, v in run.items() if k != "elapsed_s"} for run in orjson.loads(r.stdout)["runs"]] == first


def test_a_documents_digest_is_remembered_by_a_compare_and_not_hashed_again(big, cli, tmp_path, monkeypatch):
    """A whole JSON document is hashed as it is read; a compare (not a dry run) remembers that
    digest with the stat the document was read at, and the next read of it takes it instead of
    hashing the bytes again: the file's own SHA-256 either way. A digest goes to a worker with
    what it is the digest of; a document written since is hashed again."""
    import hashlib
    import pickle

    from compactlab.transcripts import reader

    chat = _chat(tmp_path)
    hashed: list[int] = []  # (the document's own bytes hashed: other hashing, of fingerprints, aside)
    real, size = hashlib.sha256, os.path.getsize(chat)
    monkeypatch.setattr(reader, "hex_of",
                        lambda data: (len(data) >= size and hashed.append(len(data))) or real(data).hexdigest())
    own = real(open(chat, "rb").read()).hexdigest()
    monkeypatch.setattr(digests, "RACY_NS", -10**18)  # (as if read long after its last change)

    def compare(*extra: str) -> None:
        r = cli("compare", chat, "-p", "observation-masking", "-q", "--jobs", "1", "--charts", "none",
                "--format", "json", "--out", tmp_path / "out", "--force", *extra)
        assert r.exit_code == 0, r.output

    doc, digest = reader.read_document(chat)
    assert digest == own and isinstance(digest, digests.Digest) and digest.stamp is not None
    again = pickle.loads(pickle.dumps(digest))
    assert (again, again.stamp, again.at) == (digest, digest.stamp, digest.at)
    compare("--dry-run")
    assert not (tmp_path / "cache" / digests.KIND).exists()  # (a dry run remembers nothing)
    n = len(hashed)
    compare()
    assert len(hashed) == n + 1  # (hashed as it was read, then remembered)
    assert reader.read_document(chat)[1] == own and len(hashed) == n + 1  # the remembered digest
    compare()
    assert len(hashed) == n + 1
    with open(chat, "ab") as f:
        f.write(b"\n")
    assert reader.read_document(chat)[1] == real(open(chat, "rb").read()).hexdigest() and len(hashed) == n + 2
    # a document whose stat changed while it was read: hashed, and what it is a digest of not known
    ticks = iter(range(10**6))
    stamp = reader.stat_stamp
    monkeypatch.setattr(reader, "stat_stamp", lambda st: (*stamp(st)[:4], next(ticks)))
    changed = reader.read_document(chat)[1]
    assert changed == real(open(chat, "rb").read()).hexdigest() and changed.stamp is None and len(hashed) == n + 3


@pytest.mark.parametrize("first_job", ["compare", "replay"])
def test_a_document_replayed_after_another_job_cached_its_probes_keeps_its_recall(big, cli, tmp_path, first_job):
    """(#55) A format read only whole (a .traj.json, a Gemini CLI session, a chat document) opened
    by `replay` once another job had stored its probes: the cached probes are its probes (they
    were dropped, and recall said 'not measured' with 0 probes for a policy that acted)."""
    chat = _chat(tmp_path)
    policy = ["-p", "observation-masking", "--set", "micro.keep_recent=1"]

    def replay_summary(out: str) -> dict:
        r = cli("replay", chat, *policy, "-q", "--out", tmp_path / out)
        assert r.exit_code == 0, r.output
        s = orjson.loads((tmp_path / out / "summary.json").read_bytes())["summary"]
        return {k: v for k, v in s.items() if k not in ("elapsed_s", "warnings")}

    cold = replay_summary("cold")
    assert cold["probes"] > 0 and cold["probes_indexed"] is True
    for entry in entries(tmp_path):
        entry.unlink()  # the entry is written by the job under test
    if first_job == "compare":
        r = cli("compare", chat, *policy, "-q", "--jobs", "1", "--charts", "none", "--out", tmp_path / "c")
        assert r.exit_code == 0, r.output
    else:
        replay_summary("again")
    assert len(entries(tmp_path)) == 1  # stored by the compare, or by a replay of the whole document
    warm = replay_summary("warm")
    assert warm == cold


def _recorded(big: str) -> str:
    """``big`` as a recording with usage (its replies API response objects): a replay loads it whole
    (to calibrate on it), as every real Anthropic or Claude Code recording."""
    lines = [orjson.loads(line) for line in open(big, "rb")]
    for i, m in enumerate(lines):
        if m["role"] == "assistant":
            lines[i] = {"type": "message", **m, "model": "claude-sonnet-4-5",
                        "usage": {"input_tokens": 100 + 50 * i, "output_tokens": 20}}
    with open(big, "wb") as f:
        f.writelines(orjson.dumps(m) + b"\n" for m in lines)
    return big


@pytest.mark.parametrize("job", ["replay", "compare"])
def test_a_file_loaded_whole_reads_its_probes_as_a_streamed_one(big, cli, tmp_path, monkeypatch, job):
    """A line-per-message file that records usage is loaded whole (to calibrate on it), by `replay`
    as by `compare`: its probes went to the cache only for a document (whose loader hashed its
    bytes), so every replay and every compare of a real recording indexed it again. The next job
    over the same bytes now reads them, and gives the same results."""
    from compactlab.engine.measures import baseline

    path = _recorded(big)
    policy = ["-p", "observation-masking", "--set", "micro.keep_recent=1"]

    def run(out: str) -> dict:
        if job == "replay":
            r = cli("replay", path, *policy, "-q", "--out", tmp_path / out)
            assert r.exit_code == 0, r.output
            s = orjson.loads((tmp_path / out / "summary.json").read_bytes())["summary"]
            return {k: v for k, v in s.items() if k not in ("elapsed_s", "runtime_s")}
        r = cli("compare", path, *policy, "--format", "json", "-q", "--jobs", "1", "--charts", "none",
                "--out", tmp_path / out)
        assert r.exit_code == 0, r.output
        return [{k: v for k, v in run.items() if k != "elapsed_s"} for run in orjson.loads(r.stdout)["runs"]][0]

    first = run("first")
    assert first["probes"] > 0
    if job == "replay":
        assert first["calibration"]["source"] == "recorded usage"  # (loaded whole: calibrated on it)
    assert len(entries(tmp_path)) == 1
    monkeypatch.setattr(baseline, "ProbeIndex", None)  # the next job must not index
    assert run("second") == first


def test_a_file_written_while_it_was_loaded_keeps_no_probes(big, tmp_path, monkeypatch):
    """The bytes read are paired with a hash only where the file's stat is the same before and after
    loading, and is the stat the hash was taken at."""
    from compactlab import load_transcript
    from compactlab import transcripts

    path = _recorded(big)
    t = load_transcript(path)
    assert t.stamp is not None
    stamps = iter([(1, 2, 3, 4, 5), (1, 2, 3, 4, 6)])  # (a write while it was read: its change time moved)
    monkeypatch.setattr(transcripts, "path_stamp", lambda p: next(stamps))
    moved = load_transcript(path)
    assert moved.stamp is None
    probe_cache.baseline_of(moved)
    assert entries(tmp_path) == []
    monkeypatch.undo()
    monkeypatch.setattr(probe_cache, "MIN_BYTES", 1)
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    later = load_transcript(path)
    later.stamp = (*later.stamp[:-1], later.stamp[-1] - 1)  # (loaded before a write the hash then saw)
    probe_cache.baseline_of(later)
    assert entries(tmp_path) == []
    probe_cache.baseline_of(load_transcript(path))  # (as read: stored)
    assert len(entries(tmp_path)) == 1


def test_a_policy_that_never_acts_indexes_no_probes_even_to_calibrate(big, cli, tmp_path, monkeypatch):
    """A recording's calibration (and inspect) read the raw baseline's sizes only: it was computed
    with the probes, so `replay -p none` of every real recording indexed what it never reads. The
    baseline kept without them is computed again with them for a run that asks."""
    from compactlab import load_transcript
    from compactlab.engine.measures import baseline

    path = _recorded(big)
    probe_index = baseline.ProbeIndex
    monkeypatch.setattr(baseline, "ProbeIndex", None)  # (indexing would fail)
    for job in (["replay", path, "-p", "none", "--out", tmp_path / "none"], ["inspect", path]):
        r = cli(*job)
        assert r.exit_code == 0, r.output
    t = load_transcript(path)
    kept = baseline.baseline_for(t, probes=False)
    assert not kept.probes_indexed and baseline.baseline_for(t, probes=False) is kept
    monkeypatch.setattr(baseline, "ProbeIndex", probe_index)
    run = replay(t, load_policy("observation-masking", ["micro.keep_recent=1"]))
    assert run.summary.probes > 0 and baseline.baseline_for(t).probes_indexed
    assert baseline.baseline_for(t).chars == kept.chars


def test_replay_of_none_keeping_the_recorded_compactions_measures_what_they_lost(cli, tmp_path):
    """`replay -p none --keep-recorded-compactions`: the recording's compactions change the context,
    so its replay looks for the probes, as the library's and the audit's do (it said 'not measured: a
    policy that never acts keeps every probe', where a recorded compaction had dropped some)."""
    from helpers import ClaudeCodeSession

    s = ClaudeCodeSession().user("go")
    s.assistant("look", {"type": "tool_use", "id": "t0", "name": "Bash", "input": {"command": "grep -r widget"}},
                input_tokens=150_000).result("t0", "src/lib.rs: fn frobnicate_widget_v2() {}")
    s.line({"type": "system", "subtype": "compact_boundary", "parentUuid": None, "logicalParentUuid": f"u{s.n}",
            "uuid": "b1", "sessionId": "s1", "timestamp": "2026-11-28T10:00:00Z",
            "compactMetadata": {"trigger": "auto", "preTokens": 168_500}})
    s.user("This session is being continued... the summary", isCompactSummary=True, isVisibleInTranscriptOnly=True)
    s.user("go on").assistant("last", {"type": "text", "text": "I will now call frobnicate_widget_v2 again."},
                              input_tokens=40_000)
    path = s.write(tmp_path / "s.jsonl")
    r = cli("replay", path, "-p", "none", "--keep-recorded-compactions", "--out", tmp_path / "kept")
    assert r.exit_code == 0, r.output
    summary = orjson.loads((tmp_path / "kept" / "summary.json").read_bytes())["summary"]
    assert summary["probes_indexed"] and summary["probes"] == 1 and summary["recall"] == 0.0
    r = cli("replay", path, "-p", "none", "--out", tmp_path / "none")  # (not kept: nothing can be lost)
    assert orjson.loads((tmp_path / "none" / "summary.json").read_bytes())["summary"]["probes_indexed"] is False


_VALUES = st.one_of(st.integers(-3, 12), st.sampled_from(["identifier", "path", "a_b", "word", ""]), st.none(),
                    st.booleans(), st.floats(allow_nan=False, allow_infinity=False), st.just(4.0))


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_the_native_core_reads_back_what_python_reads_and_refuses_what_it_refuses(data):
    """``_native.StoredProbes`` against ``probe_cache._parsed`` (its reference) on entries as saved and
    damaged: any value of any column changed, a column dropped or not a list, the version changed.
    What the native core reads, Python reads the same; what Python refuses, it refuses; an entry as
    saved, it reads (it leaves to Python only an entry no save writes: an integer past 64 bits)."""
    from compactlab import core
    from compactlab.engine.measures.probes import KINDS, Probe

    native = core.native_module()
    if native is None:
        pytest.skip("the native core is not built in this install: nothing to compare")
    n = data.draw(st.integers(0, 6))
    texts = data.draw(st.lists(st.text(max_size=4), min_size=1, max_size=4))
    tools = data.draw(st.lists(st.text(max_size=3), min_size=1, max_size=3))
    kinds = data.draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=3))

    def at(table: list) -> list:  # (positions in a table, one a row)
        return data.draw(st.lists(st.integers(0, len(table) - 1), min_size=n, max_size=n))

    doc: dict = {"version": probe_cache.INDEX_VERSION,
                 "call": data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)),
                 "text": at(texts),
                 "where": data.draw(st.lists(st.lists(st.integers(-2, 2**70), min_size=2, max_size=6).map(
                     lambda w: w[:len(w) // 2 * 2]), min_size=n, max_size=n)),
                 "source_call": data.draw(st.lists(st.integers(-1, 9), min_size=n, max_size=n)),
                 "source_tool": at(tools), "kind": at(kinds), "texts": texts, "tools": tools, "kinds": kinds}
    damaged = data.draw(st.integers(0, 2))
    for _ in range(damaged):  # damage
        key = data.draw(st.sampled_from(sorted(doc)))
        how = data.draw(st.integers(0, 3))
        if how == 0:
            del doc[key]
        elif how == 1:
            doc[key] = data.draw(_VALUES)
        elif type(doc[key]) is list and doc[key]:
            column = list(doc[key])
            column[data.draw(st.integers(0, len(column) - 1))] = data.draw(
                st.one_of(_VALUES, st.lists(_VALUES, max_size=4)))
            doc[key] = column if how == 2 else column[:-1]
    data_ = json.dumps(doc).encode()  # (json writes any integer: the reference reads what orjson makes of it)
    want = probe_cache._parsed(orjson.loads(data_))
    got = native.StoredProbes.parse(data_, probe_cache.INDEX_VERSION, Probe, KINDS)
    if got is None:
        places = [x for ps in (want or {}).values() for p in ps for w in p.where for x in w]
        past_64_bits = any(abs(x) >= 2**63 for x in places)
        assert want is None or damaged or past_64_bits
        return
    assert want is not None and list(got.items()) == list(want.items())  # (the calls in the order saved)
    assert all(type(p) is Probe and all(type(w) is tuple for w in p.where) for ps in got.values() for p in ps)
