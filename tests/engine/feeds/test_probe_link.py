"""The probes checked by the read-ahead process (feeds/probe_link.py): the replay's contexts log
what is done to them, the reader plays the log again on its own copies of the messages and checks
there what the replay would have checked. The copies must be the replay's contexts as the check
reads them, the checks the in-process checks, and nothing may hang or be left behind when either
side stops."""

from __future__ import annotations

import os
import pickle
import threading

import pytest

from compactlab.engine import probe_cache
from compactlab.engine.context import Context
from compactlab.engine.feeds import open_feed, probe_link, read_ahead
from compactlab.engine.policy import load_policy
from compactlab.engine.probes import Checked
from compactlab.engine.turns import replay
from compactlab.transcripts.messages import Entry, build_entry, make_entry
from helpers import SAMPLES, asst, assert_same_run, files_under, results, tool_session, tr, tu, write_jsonl

from test_read_ahead import forks, gone  # noqa: F401  (the fixture, and whether a process is reaped)


def _lazy(path, messages):
    """The file's messages as the replay gets them from the reader: lazy, their facts measured."""
    raw = path.read_bytes()
    source = read_ahead.SourceFile(str(path))
    out, at = [], 0
    for origin, m in enumerate(messages):
        end = raw.index(b"\n", at) + 1
        e = build_entry(m, origin, measure=True)
        out.append(read_ahead.LazyEntry(e.chars, e.role, e.origin, e.tool_use_ids, e.tool_names, e.use_files,
                                        e.results, e.misplaced_results, e.empty, e.has_text,
                                        (source, at, end - at, ())))
        at = end
    return source, out


def _seen(ctx: Context) -> list[tuple]:
    """A context as the check reads it: each message's origin, role, changed blocks and what stands
    in them, its tool results' blocks, and a made message whole."""
    return [(e.origin, e.role, sorted(e.changed), e.changed_contents() if e.changed else None,
             [f.block for f in e.results], e.message if e.origin < 0 else None) for e in ctx.entries]


def test_a_log_played_again_makes_the_contexts_the_check_reads(tmp_path, monkeypatch):
    msgs = [{"role": "user", "content": "go"}]
    for i in range(6):
        msgs.append(asst(f"step {i}", tu(f"t{i}", "read", path=f"src/m{i}.py")))
        msgs.append(results(tr(f"t{i}", f"def handler_{i}(): pass\n" * 20), tr(f"u{i}", "second result")))
    path = write_jsonl(tmp_path / "t.jsonl", msgs)
    source, entries = _lazy(path, msgs)
    r, w = os.pipe()
    link = probe_link.ProbeLink(w, read_ahead._is_read, read_ahead._as_sent)
    made_by, made_at, cleared_at = link.notes()
    ctx = link.new(Context())
    ctx.extend(entries[:9])
    # micro's step on a message left unread, twice on one message: its new contents are sent
    a = ctx.replaced({2: entries[2].with_result_content(0, "[cleared]")})
    cleared_at[(2, 0)] = 1
    b = a.replaced({2: a.entries[2].with_result_content(1, "[cleared too]"),
                    4: a.entries[4].with_result_content(1, [{"type": "text", "text": "[cleared]"}])})
    b.append(entries[9])
    link.check(3, b)
    # a message read by now (a plain Entry once changed), a made message, a splice
    assert entries[6].message and type(entries[6].with_result_content(0, "x")) is Entry
    c = b.replaced({6: entries[6].with_result_content(0, "[read, then cleared]")})
    summary = make_entry({"role": "user", "content": "summary: handler_1 in src/m1.py"}, -1)
    made_by[-1], made_at[-1] = "summary", 4
    d = c.spliced(1, [summary], 5)
    # an assistant message changed whole (its tool_use input cleared)
    at = next(i for i, e in enumerate(d.entries) if e.role == "assistant" and e.origin == 5)
    blocks = d.entries[at].message["content"]
    e = d.replaced({at: d.entries[at].with_message({"role": "assistant", "content": [blocks[0],
                                                                                     {**blocks[1], "input": {}}]})})
    e.extend(entries[10:])
    link.check(5, e)
    sent = link._encode([*link.log, (probe_link.KEEP, e), (probe_link.DONE,)])
    last = link._keys[id(e)][0]
    # the file's messages go as their positions, the tool results replaced as their new contents
    kinds = [op[0] for op in sent]
    assert kinds.count(probe_link.SET) == 3 and kinds.count(probe_link.CHECK) == 2
    assert all(type(op[2]) is int for op in sent if op[0] == probe_link.APPEND)
    replaced = [op[3] for op in sent if op[0] == probe_link.REPLACED]
    assert replaced[0] == [(2, ((entries[2].results[0].block, "[cleared]"),))]
    assert replaced[1][0] == (2, ((entries[2].results[1].block, "[cleared too]"),))
    assert replaced[2] == [(6, ((entries[6].results[0].block, "[read, then cleared]"),))]  # (a plain one too)
    assert isinstance(replaced[3][0][1], Entry)  # a tool_use's input cleared: sent whole
    # played again in the reader, from the pickle, on its own copies of the file's messages
    monkeypatch.setitem(read_ahead._SOURCES, str(path), source)
    mirror = probe_link.Mirror(r, read_ahead._as_made)
    mirror.read = dict(enumerate(_lazy(path, msgs)[1]))
    mirror.probes = {3: ["any"], 5: ["any"]}
    asked = []
    monkeypatch.setattr(probe_link, "check", lambda probes, context, call, *args: asked.append(
        (call, _seen(context))) or Checked(1, 0))
    mirror.play(pickle.loads(pickle.dumps(sent, pickle.HIGHEST_PROTOCOL)))
    assert mirror.done and asked == [(3, _seen(b)), (5, _seen(e))]
    assert mirror.counts == {3: (1, 1, 0), 5: (1, 1, 0)}
    assert mirror.env.cleared_at == {(2, 0): 1} and mirror.env.made_by == {-1: "summary"}
    assert list(mirror.contexts) == [last] and not mirror.read  # the last context kept; the file's let go
    os.close(r)
    link.close()


@pytest.fixture
def cached(tmp_path, monkeypatch):
    """A cache folder of the test's own, and a way to fill it: a replay in-process of a file stores
    its probes; the reader then reads them from there, and checks them (the link)."""
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))

    def fill(path: str) -> None:
        monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
        replay(open_feed(path), load_policy("s08"))
        monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "1")
        assert probe_cache.present(probe_cache.key_of(path) or "")

    return fill


@pytest.mark.parametrize("preset", ["s08", "claude-code", "observation-masking", "codex", "gemini-cli", "opencode",
                                    "s20", "openhands", "goose", "s06", "anthropic-clear-tool-uses"])
def test_every_preset_checked_by_the_reader_is_checked_as_in_process(preset, forks, cached, tmp_path, monkeypatch):
    path = str(SAMPLES / "synth-long.jsonl")
    cached(path)
    feed = open_feed(path)
    assert feed.link is not None  # (the cached probes: checked by the reader)
    ahead = replay(feed, load_policy(preset), out_dir=tmp_path / "a", write_transcripts=True)
    assert len(forks) == 1 and gone(forks[0])
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
    here = replay(open_feed(path), load_policy(preset), out_dir=tmp_path / "b", write_transcripts=True)
    assert_same_run(ahead, here)
    assert here.summary.probes and files_under(tmp_path / "a") == files_under(tmp_path / "b")


def test_a_file_not_indexed_yet_is_indexed_by_the_reader_and_checked_by_the_replay(forks, cached, monkeypatch):
    path = str(SAMPLES / "synth-medium.jsonl")
    feed = open_feed(path)  # (nothing cached: the reader indexes as it reads, which keeps it busy enough)
    assert feed.link is None
    run = replay(feed, load_policy("s08"))
    assert probe_cache.present(probe_cache.key_of(path) or "") and gone(forks[0])
    again = open_feed(path)
    assert again.link is not None
    assert_same_run(replay(again, load_policy("s08")), run)


def test_a_reader_that_breaks_while_it_checks_says_so(forks, cached, tmp_path, monkeypatch):
    def broken(*args):
        raise ValueError("a bug in the check")

    path = str(SAMPLES / "synth-medium.jsonl")
    cached(path)
    monkeypatch.setattr(probe_link, "check", broken)  # (the reader is forked with it)
    with pytest.raises(RuntimeError, match="(?s)read-ahead process failed.*ValueError: a bug in the check"):
        replay(open_feed(path), load_policy("s08"), out_dir=tmp_path / "out")
    assert gone(forks[-1]) and not (tmp_path / "out").exists()


def test_a_replay_stopped_while_the_reader_answers_stops_and_reaps_it(forks, cached, tmp_path, monkeypatch):
    def interrupted(pipe):
        raise KeyboardInterrupt

    path = str(SAMPLES / "synth-medium.jsonl")
    cached(path)
    monkeypatch.setattr(probe_link.pickle, "load", interrupted)  # (Ctrl-C as the answer is awaited)
    with pytest.raises(KeyboardInterrupt):
        replay(open_feed(path), load_policy("s08"), out_dir=tmp_path / "out")
    assert gone(forks[-1]) and not (tmp_path / "out").exists()


def test_an_unusable_entry_is_indexed_again_by_the_reader_and_a_dry_run_keeps_it_as_it_is(forks, cached, tmp_path,
                                                                                           monkeypatch):
    path = str(SAMPLES / "synth-medium.jsonl")
    cached(path)
    [entry] = (tmp_path / "cache" / "probes").iterdir()
    good = entry.read_bytes()
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
    here = replay(open_feed(path), load_policy("s08"))
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "1")
    for write_cache in (False, True):
        entry.write_bytes(b'{"version": 3}')
        feed = open_feed(path, write_cache=write_cache)
        assert feed.link is not None
        assert_same_run(replay(feed, load_policy("s08")), here)
        assert any("ignored" in w for w in feed.warnings)
        assert (entry.read_bytes() == good) is write_cache  # (rebuilt, unless a dry run)


def test_a_reader_whose_replay_is_gone_stops(tmp_path):
    r, w = os.pipe()
    mirror = probe_link.Mirror(r, read_ahead._as_made)
    os.write(w, b"\x10\x00\x00\x00part")  # a part begun, and the replay gone
    os.close(w)
    with pytest.raises(EOFError):
        mirror.serve()
    os.close(r)


def test_the_reader_checks_while_the_pipe_is_full_and_waits_only_for_room_or_work():
    r, w = os.pipe()
    import fcntl

    fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
    os.set_blocking(w, False)
    out = read_ahead._Out(w)
    worked = threading.Event()
    steps = []

    def step() -> bool:  # one step of work while the pipe is full; then the replay reads again
        steps.append(1)
        worked.set()
        return len(steps) < 3

    received = bytearray()

    def replay_reads() -> None:
        worked.wait()
        while len(received) < 3 * 65536:
            received.extend(os.read(r, 65536))

    out.idle = step
    reading = threading.Thread(target=replay_reads)
    reading.start()
    data = bytes(range(256)) * (3 * 256)
    out.write(data)
    out.flush()
    reading.join()
    assert bytes(received) == data and len(steps) >= 3  # worked while full, then waited for room
    out.close()
    os.close(r)
