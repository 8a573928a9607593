"""The read-ahead process (feeds/read_ahead.py): a big plain file is read in a forked
process while the replay runs on lazy entries. It must give the in-process stream's run byte for
byte, fail as it fails, and never leave a process behind."""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlab.errors import BadLineError, InputError, UsageError
from compactlab.transcripts.messages import Entry, make_entry
from compactlab.engine.policy import load_policy
from compactlab.engine.loop import replay
from compactlab.summarizers import StubSummarizer
from compactlab.engine.feeds import open_feed, read_ahead
from compactlab.transcripts import load_transcript
from compactlab.transcripts.writer import COMPACTION_KEY
from helpers import SAMPLES, assert_same_run, files_under, results, tool_session, tr, write_jsonl, examples
from strategies import policies, transcripts


@pytest.fixture
def forks(monkeypatch):
    """Read ahead whatever the size, and record the reader processes started."""
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "1")
    pids: list[int] = []
    fork = os.fork

    def recording_fork() -> int:
        pid = fork()
        if pid:
            pids.append(pid)
        return pid

    monkeypatch.setattr(read_ahead.os, "fork", recording_fork)
    return pids


def gone(pid: int) -> bool:
    """The process has exited and been reaped (a zombie would still answer)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_which_files_are_read_ahead(tmp_path, monkeypatch):
    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * read_ahead.MIN_BYTES)
    small = write_jsonl(tmp_path / "small.jsonl", tool_session(2))
    (tmp_path / "empty.jsonl").write_bytes(b"")
    monkeypatch.delenv("COMPACTLAB_READ_AHEAD", raising=False)
    monkeypatch.setattr(read_ahead, "usable_cores", lambda: 2)
    assert read_ahead.usable(str(big)) and not read_ahead.usable(str(small))
    assert not read_ahead.usable(str(tmp_path / "missing.jsonl"))
    monkeypatch.setattr(read_ahead, "usable_cores", lambda: 1)
    assert not read_ahead.usable(str(big))  # one core: nothing to overlap
    # a recording loaded whole leaves its messages in the file where it would be read ahead, one core
    # or two (no second process), and never where its lines cannot be read again by offset
    assert read_ahead.usable(str(big), forking=False) and not read_ahead.usable(str(small), forking=False)
    monkeypatch.delattr(os, "pread")
    assert not read_ahead.usable(str(big), forking=False) and not read_ahead.usable(str(big))
    monkeypatch.undo()
    monkeypatch.setattr(read_ahead, "usable_cores", lambda: 1)
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "1")
    assert read_ahead.usable(str(small)) and not read_ahead.usable(str(tmp_path / "empty.jsonl"))
    assert not read_ahead.usable(str(small) + ".gz")  # a compressed stream is not mapped
    # =lazy leaves any file's messages in it, and forks for none but the big ones
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "lazy")
    monkeypatch.setattr(read_ahead, "usable_cores", lambda: 2)
    assert read_ahead.usable(str(small), forking=False) and not read_ahead.usable(str(small))
    assert read_ahead.usable(str(big))
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
    assert not read_ahead.usable(str(big)) and not read_ahead.usable(str(big), forking=False)


def test_a_file_with_no_probes_to_look_for_is_streamed_in_this_process_with_its_messages_left_in_it(
        forks, tmp_path, monkeypatch):
    """Where the reader process would only send the facts (the probe cache has the probes, or the
    policy cannot lose one), the file is streamed here, each line the native core reads kept as its
    facts: no process forked, a line parsed only where something reads its message, the same run."""
    from compactlab.core import in_use
    from compactlab.engine.measures import probe_cache

    if in_use() is None:
        pytest.skip("the messages are left in the file only where the native core reads their facts")
    monkeypatch.setattr(probe_cache, "MIN_BYTES", 1)
    monkeypatch.setattr(read_ahead, "MIN_BYTES", 1)
    monkeypatch.setattr(read_ahead, "usable_cores", lambda: 2)
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COMPACTLAB_READ_AHEAD")  # (the forks recorded, not forced)
    forked = forks
    path = str(SAMPLES / "synth-long.jsonl")
    first = replay(open_feed(path), load_policy("s08"))  # (its probes looked for by the reader, and stored)
    assert len(forked) == 1 and all(map(gone, forked)) and first.summary.probes
    feed = open_feed(path)
    assert not isinstance(feed, read_ahead.ReadAheadFeed) and feed.streamed
    assert_same_run(replay(feed, load_policy("s08")), first)
    assert len(forked) == 1  # none forked for the second
    read_again = []
    message_at = read_ahead.SourceFile.message_at

    def counted(self, offset, length, role=None):
        read_again.append(offset)
        return message_at(self, offset, length, role)

    monkeypatch.setattr(read_ahead.SourceFile, "message_at", counted)
    assert_same_run(replay(open_feed(path), load_policy("s08")), first)
    # (s08's summaries quote messages: read from their lines by the native core, none parsed)
    assert read_again == []
    n = len(read_again)
    kept = replay(open_feed(path, probes=False), load_policy("none"))
    assert len(read_again) == n and len(forked) == 1  # a policy that keeps everything reads none
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
    assert_same_run(kept, replay(open_feed(path), load_policy("none")))
    assert_same_run(first, replay(open_feed(path), load_policy("s08")))
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "1")  # the reader process, asked for
    assert_same_run(first, replay(open_feed(path), load_policy("s08")))
    assert len(forked) == 2 and all(map(gone, forked))


def test_a_message_read_ahead_says_where_its_results_stand_as_one_read_here_does(forks, tmp_path, monkeypatch):
    """The reader sends, with each message's facts, where its tool results' contents stand on its
    line (what the native core read with the facts), as a message streamed in this process has it:
    recall then reads a changed message's text, or a result's, from the file in Rust rather than
    asking Python to parse the line (``LazyEntry.json_text``). A reply recorded with other members
    (its line is not its message alone) and a line Python reads say nothing."""
    from compactlab.core import in_use

    if in_use() is None:
        pytest.skip("the messages are left in the file only where the native core reads their facts")
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    path = str(tmp_path / "t.jsonl")
    msgs = [{"role": "user", "content": "go"},
            {"type": "message", "role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Read",
                                                                  "input": {"file_path": "src/app.py"}}],
             "model": "m", "usage": {"input_tokens": 3, "output_tokens": 1}},
            results(tr("a", "x_one src/app.py " * 40), tr("b", [{"type": "text", "text": "y_two"}])),
            {"role": "assistant", "content": "ok"}]
    write_jsonl(Path(path), msgs)
    with open(path, "ab") as f:  # (a member twice: Python reads the line, which keeps the last)
        f.write(b'{"role":"user","content":[{"type":"tool_result","tool_use_id":"c","content":"z","content":"w"}]}\n')
        f.write(orjson.dumps({"role": "assistant", "content": "done"}) + b"\n")
    feed = open_feed(path)
    assert isinstance(feed, read_ahead.ReadAheadFeed)
    sent = [e for batch in feed.stream.batches(100) for e in batch]
    feed.close()
    here = read_ahead.load_lazily(path)
    assert here is not None
    # (loaded whole: the reader's last blocks let go, as its replay starts from its first line)
    assert [e._lazy[0].recent for e in here.entries if hasattr(e, "_lazy")][:1] == [None]
    spans = [e._lazy[4] for e in sent]
    assert spans == [e._lazy[4] if hasattr(e, "_lazy") else b"" for e in here.entries]
    assert [bool(s) for s in spans] == [False, False, True, False, False, False]
    assert [b for b, _, _ in read_ahead.placed(spans[2])] == [0, 1]
    asked = []
    json_text = read_ahead.LazyEntry.json_text

    def counted(self):
        asked.append(self.origin)
        return json_text(self)

    monkeypatch.setattr(read_ahead.LazyEntry, "json_text", counted)
    synth = str(SAMPLES / "synth-long.jsonl")
    ahead = replay(open_feed(synth), load_policy("s08"))
    assert ahead.summary.probes and ahead.summary.micro_compacted and not asked  # (all read in Rust)
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
    assert_same_run(ahead, replay(open_feed(synth), load_policy("s08")))
    assert len(forks) == 2 and all(map(gone, forks))


def test_a_lazy_entry_reads_its_message_with_the_changes_made_since(tmp_path):
    msgs = [results(tr("a", "A" * 300), tr("b", [{"type": "text", "text": "B" * 300}]), tr("c", "C" * 300, is_error=True)),
            {"type": "message", "role": "assistant", "content": "ok", "model": "m", "usage": {"input_tokens": 3}}]
    path = write_jsonl(tmp_path / "t.jsonl", msgs)
    raw = path.read_bytes()
    first = raw.index(b"\n") + 1
    source = read_ahead.SourceFile(str(path))
    eager = make_entry(msgs[0], 0)
    assert source.message_at(0, first) == msgs[0]
    assert source.message_at(first, len(raw) - first) == {"role": "assistant", "content": "ok"}  # as loaded
    from compactlab.transcripts.messages import build_entry

    measured = build_entry(msgs[0], 0, measure=True)
    assert measured.chars == eager.chars  # measured from its parts
    for m in ({"role": "user", "content": [tr("é", "naïve ☃ \u2028 \"q\" \\ \x01"), {"type": "text", "text": "t"},
                                            tr("x", [{"type": "text", "text": "ü"}], is_error=True),
                                            {"type": "tool_result", "tool_use_id": "n"}]},
              {"role": "user", "content": [tr("z", None)]}):
        assert build_entry(m, 1, measure=True).chars == make_entry(m, 1).chars == len(orjson.dumps(m).decode())
    assert [f.json_size for f in measured.results] == [len(orjson.dumps(b["content"])) for b in msgs[0]["content"]]
    lazy = read_ahead.LazyEntry(eager.chars, "user", 0, (), (), (), measured.results, (), False, False,
                                (source, 0, first, (), b""))
    for k, new in ((1, "[cleared]"), (0, "x"), (1, {"type": "text", "text": "again"})):
        eager, lazy = eager.with_result_content(k, new), lazy.with_result_content(k, new)
        assert lazy._message is None  # changed without reading the line
        assert (lazy.chars, lazy.results[k][:5], lazy.changed) == (eager.chars, eager.results[k][:5], eager.changed)
    assert lazy.chars == len(orjson.dumps(eager.message))
    assert lazy.message == eager.message and orjson.dumps(lazy.message) == orjson.dumps(eager.message)
    assert type(lazy.with_result_content(0, "y")) is Entry  # once read, changed as any entry is
    assert type(eager) is Entry and not hasattr(eager, "_lazy")  # a plain entry knows nothing of laziness


def test_errors_cross_processes_whole():
    for error in (BadLineError("t.jsonl", 7, "invalid JSON"), InputError("gone", hint="look"), UsageError("no")):
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error) and str(back) == str(error) and back.hint == error.hint
    assert pickle.loads(pickle.dumps(BadLineError("t.jsonl", 7, "invalid JSON"))).line == 7


@pytest.mark.parametrize("preset", ["s08", "claude-code", "anthropic-clear-tool-uses"])
def test_the_read_ahead_run_is_the_in_process_run(preset, forks, tmp_path, monkeypatch):
    path = str(SAMPLES / "synth-medium.jsonl")
    ahead = replay(open_feed(path), load_policy(preset), out_dir=tmp_path / "a", write_transcripts=True)
    assert len(forks) == 1 and gone(forks[0])
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
    here = replay(open_feed(path), load_policy(preset), out_dir=tmp_path / "b", write_transcripts=True)
    assert len(forks) == 1
    assert_same_run(ahead, here)
    assert files_under(tmp_path / "a") == files_under(tmp_path / "b")


def test_a_file_whose_probes_are_cached_is_read_ahead_and_replayed_as_in_process(forks, tmp_path, monkeypatch):
    """The second replay of a file takes its probes from the probe cache; the reader then only
    reads, and the replay checks them (as it does a file read in-process)."""
    from compactlab.engine.measures import probe_cache

    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    path = str(SAMPLES / "synth-long.jsonl")
    first = replay(open_feed(path), load_policy("s08"))
    assert probe_cache.present(probe_cache.key_of(path) or "") and first.summary.probes
    again = replay(open_feed(path), load_policy("s08"))
    assert len(forks) == 2 and all(map(gone, forks))
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
    assert_same_run(again, replay(open_feed(path), load_policy("s08")))
    assert_same_run(again, first)


def test_recorded_compactions_and_usage_arrive_with_their_batches(forks, tmp_path, monkeypatch):
    monkeypatch.setattr(read_ahead, "BATCH", 7)
    lines = []
    for i, m in enumerate(tool_session(60)):
        if i in (21, 22, 80):
            lines.append({"role": "user", "content": f"summary before {i}", COMPACTION_KEY: {"trigger": "auto"}})
        if m["role"] == "assistant":
            m = {"type": "message", **m, "model": "claude-sonnet-4-5", "usage": {"input_tokens": i, "output_tokens": 1}}
        lines.append(m)
    lines.insert(5, {"role": "system", "content": "be brief"})
    path = str(write_jsonl(tmp_path / "c.jsonl", lines))
    loaded = load_transcript(path)
    for keep in (True, False):
        stream = open_feed(path)
        run = replay(stream, load_policy("s08"), keep_recorded_compactions=keep)
        assert_same_run(run, replay(loaded, load_policy("s08"), keep_recorded_compactions=keep))
        assert (stream.model, stream.usage, stream.system) == (loaded.model, loaded.usage, loaded.system)
        assert [c.position for c in stream.compactions] == [c.position for c in loaded.compactions] == [21, 22, 80]
    assert run.summary.recorded_input_cost_usd and len(forks) == 2 and all(map(gone, forks))


@settings(max_examples=examples(20), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(transcripts(), policies(pair_safe=False), st.integers(1, 5))
def test_any_transcript_read_ahead_gives_the_loaded_run(forks, monkeypatch, msgs, policy, batch):
    monkeypatch.setattr(read_ahead, "BATCH", batch)
    with tempfile.TemporaryDirectory() as folder:
        path = str(write_jsonl(Path(folder) / "t.jsonl", msgs))
        loaded = replay(load_transcript(path), policy, out_dir=Path(folder) / "l")
        ahead = replay(open_feed(path), policy, out_dir=Path(folder) / "a")
        assert files_under(Path(folder) / "a") == files_under(Path(folder) / "l")
    assert_same_run(ahead, loaded)
    assert gone(forks[-1])


def test_a_bad_line_is_reported_as_in_process_and_the_run_undone(forks, tmp_path):
    msgs = tool_session(40, size=40_000)  # every result is persisted by s08's budget layer
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in msgs) + b'{"role": "user", "content": [\n')
    with pytest.raises(BadLineError) as loading:
        load_transcript(str(path))
    with pytest.raises(BadLineError) as streaming:
        replay(open_feed(str(path)), load_policy("s08", ["budget.max_chars=10000"]), out_dir=tmp_path / "out")
    assert str(streaming.value) == str(loading.value) and streaming.value.line == 82
    assert not (tmp_path / "out").exists() and gone(forks[0])
    run = replay(open_feed(str(path), skip_bad_lines=True), load_policy("s08"))
    assert run.summary.skipped_lines == 1 and run.summary.calls == 40


class Interrupting(StubSummarizer):
    def summarize(self, request):
        raise KeyboardInterrupt


def test_a_replay_stopped_early_stops_and_reaps_its_reader(forks, tmp_path):
    path = str(write_jsonl(tmp_path / "long.jsonl", tool_session(3000, size=300)))
    with pytest.raises(KeyboardInterrupt):
        replay(open_feed(path), load_policy("s08", ["summary.trigger=3000"]), summarizer=Interrupting(),
               out_dir=tmp_path / "out")
    assert gone(forks[0]) and not (tmp_path / "out").exists()


def test_a_reader_that_breaks_says_so(forks, tmp_path, monkeypatch):
    def broken(*args):
        raise ValueError("a bug in the reader")

    monkeypatch.setattr(read_ahead, "_read_and_send", broken)
    path = str(write_jsonl(tmp_path / "t.jsonl", tool_session(3)))
    with pytest.raises(RuntimeError, match="(?s)read-ahead process failed:.*ValueError: a bug in the reader"):
        replay(open_feed(path), load_policy("s08"))
    assert gone(forks[0])


def test_the_cli_prints_the_same_with_and_without_read_ahead(cli, tmp_path, monkeypatch):
    path = str(SAMPLES / "synth-medium.jsonl")
    outputs = []
    for setting in ("1", "0"):
        monkeypatch.setenv("COMPACTLAB_READ_AHEAD", setting)
        r = cli("replay", path, "-p", "s08", "--format", "json", "--out", str(tmp_path / setting), "-q")
        assert r.exit_code == 0, r.output
        summary = orjson.loads(r.stdout)
        summary["runs"][0].pop("timing")  # the one part of a run that differs by nature
        outputs.append(summary)
    assert outputs[0] == outputs[1]


def test_the_cli_starts_reading_before_it_builds_the_policy_and_errors_keep_their_order(cli, forks, tmp_path):
    """`replay` opens a read-ahead file first, so that it is read while the engine is imported and
    the policy built; a policy or option error still comes first, and stops that reader."""
    path = str(SAMPLES / "synth-medium.jsonl")
    r = cli("replay", path, "--set", "summary.trigger=-5", "-q", "--dry-run")
    assert r.exit_code == 2 and "summary.trigger" in r.stderr
    assert len(forks) == 1 and gone(forks[0])
    r = cli("replay", str(tmp_path / "missing.jsonl"), "--set", "snip.nope=1", "-q", "--dry-run")
    assert r.exit_code == 2 and "snip.nope: unknown key" in r.stderr  # the policy's error, not the file's
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    r = cli("replay", str(bad), "-q", "--dry-run")
    assert r.exit_code == 2 and r.stderr.startswith(f"error: {bad}: not a transcript")
    assert len(forks) == 1


def test_a_file_whose_format_is_loaded_is_not_opened_early(cli, forks):
    from helpers import SHARED

    session = SHARED / "transcripts" / "claude_code" / "spotter" / "tool_heavy.jsonl"
    if not session.is_file():
        pytest.skip("../shared/transcripts is not beside the project")
    r = cli("replay", str(session), "-q", "--dry-run", "--format", "json")
    assert r.exit_code == 0, r.output
    assert orjson.loads(r.stdout)["runs"][0]["summary"]["format"] == "claude-code" and not forks


def test_a_stream_closed_unread_stops_its_reader(forks):
    stream = open_feed(str(SAMPLES / "synth-long.jsonl"))
    assert isinstance(stream, read_ahead.ReadAheadFeed) and not gone(forks[0])
    stream.close()
    stream.close()  # twice is fine
    assert gone(forks[0])


def test_the_file_is_read_as_it_was_when_opened(forks, tmp_path):
    """A transcript still being written: lines appended after it was opened are not read (by the
    reader or the replay); a file cut short under the replay is an error, not a crash."""
    msgs = tool_session(30, size=40_000)
    path = write_jsonl(tmp_path / "live.jsonl", msgs)
    expected = replay(load_transcript(str(path)), load_policy("s08"))
    stream = open_feed(str(path))
    with open(path, "ab") as f:
        f.write(b"".join(orjson.dumps(m) + b"\n" for m in tool_session(5)[1:]) + b'{"role": "us')
    assert_same_run(replay(stream, load_policy("s08")), expected)
    source = read_ahead.SourceFile(str(path))
    first = path.read_bytes().index(b"\n") + 1
    assert source.message_at(0, first) == msgs[0]
    path.write_bytes(b"")
    with pytest.raises(InputError, match="cut short while it was replayed"):
        source.message_at(0, first)
    assert all(map(gone, forks))


def test_a_folder_of_big_sessions_reads_each_ahead_in_turn(cli, forks, tmp_path, monkeypatch):
    import shutil

    folder = tmp_path / "sessions"
    folder.mkdir()
    for name in ("synth-medium", "manual-compact", "huge-batch"):
        shutil.copy(SAMPLES / f"{name}.jsonl", folder / f"{name}.jsonl")
    outputs = {}
    for setting in ("1", "0"):
        monkeypatch.setenv("COMPACTLAB_READ_AHEAD", setting)
        r = cli("replay", str(folder), "-p", "s08", "--format", "json", "--out", str(tmp_path / setting), "-q")
        assert r.exit_code == 0, r.output
        runs = orjson.loads(r.stdout)["runs"]
        for run in runs:
            run.pop("timing")
        outputs[setting] = runs
    assert outputs["1"] == outputs["0"] and len(outputs["1"]) == 3
    assert len(forks) == 3 and all(map(gone, forks))
    ahead, here = files_under(tmp_path / "1"), files_under(tmp_path / "0")
    assert ahead.keys() == here.keys()
    for name in ahead:
        if name.endswith("summary.json"):  # its run time differs
            ahead[name], here[name] = (orjson.loads(f[name]) for f in (ahead, here))
            ahead[name].pop("timing"), here[name].pop("timing")
        assert ahead[name] == here[name], name


def test_without_a_second_process_the_file_is_read_in_process(monkeypatch, tmp_path):
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "1")

    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(read_ahead.os, "fork", no_fork)
    def open_files() -> int:
        return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0

    path = str(SAMPLES / "synth-medium.jsonl")
    before = open_files()
    stream = open_feed(path)
    assert not isinstance(stream, read_ahead.ReadAheadFeed)  # the in-process stream
    assert open_files() == before  # the file and pipe opened for the reader are closed again
    assert_same_run(replay(stream, load_policy("s08")), replay(load_transcript(path), load_policy("s08")))


def test_a_line_of_invalid_utf8_reads_the_same_again(forks, tmp_path):
    """A line decoded with replacement by the reader is decoded the same way where the replay
    parses it again (here: a result the budget layer persists)."""
    msgs = tool_session(6, size=50_000)
    lines = [orjson.dumps(m) for m in msgs]
    lines[4] = lines[4].replace(b"xxxx", b"x\xff\xfex", 1)  # the second result, persisted by s08's budget
    path = tmp_path / "bad-utf8.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    policy = load_policy("s08", ["budget.max_chars=10000"])
    ahead = replay(open_feed(str(path)), policy, out_dir=tmp_path / "a")
    loaded = replay(load_transcript(str(path)), policy, out_dir=tmp_path / "b")
    assert_same_run(ahead, loaded)
    assert len(forks) == 1
    written = files_under(tmp_path / "a")
    assert written == files_under(tmp_path / "b") and any("\ufffd".encode() in data for data in written.values())


def test_a_replay_that_fails_before_its_run_stops_the_reader(cli, forks, tmp_path, monkeypatch):
    import compactlab.summarizers as summarizers

    def broken(*args, **kwargs):
        raise summarizers.UsageError("no summarizer today")

    monkeypatch.setattr(summarizers, "build_summarizer", broken)
    r = cli("replay", str(SAMPLES / "synth-medium.jsonl"), "-q", "--dry-run")
    assert r.exit_code == 2 and "no summarizer today" in r.stderr
    assert len(forks) == 1 and gone(forks[0])


def _counting_head_reads(monkeypatch) -> list[str]:
    """Record every parse of a file's first lines (detection, the usage check, the loader)."""
    from compactlab import transcripts
    from compactlab.engine import feeds
    from compactlab.transcripts import reader

    read: list[str] = []
    real = reader.read_head

    def counting(path, *args, **kwargs):
        read.append(path)
        return real(path, *args, **kwargs)

    for module in (reader, transcripts, feeds):
        monkeypatch.setattr(module, "read_head", counting)
    return read


@pytest.mark.parametrize("read_ahead_setting", ["0", "1"])
def test_one_place_decides_how_a_file_is_read_and_its_head_is_parsed_once(cli, tmp_path, monkeypatch,
                                                                           read_ahead_setting):
    """#26 §5: the replay command opens a file through ``feeds.Opening`` alone (the CLI names no
    feed or read-ahead), and the first lines are parsed once for the usage check, detection and the
    loader, whether the file is then streamed, read ahead or loaded whole to calibrate on it."""
    from helpers import ROOT

    source = "".join(p.read_text() for p in (ROOT / "compactlab" / "cli").glob("*.py"))
    assert "def replay(" in source
    assert "read_ahead" not in source and "open_feed" not in source and "Opening" not in source
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", read_ahead_setting)
    plain = write_jsonl(tmp_path / "plain.jsonl", tool_session(6))
    with_usage = tmp_path / "usage.jsonl"
    lines = [dict(m) for m in tool_session(6)]
    for m in lines:
        if m["role"] == "assistant":
            m["usage"] = {"input_tokens": 100, "output_tokens": 5}
    write_jsonl(with_usage, lines)
    for path in (plain, with_usage):
        read = _counting_head_reads(monkeypatch)
        r = cli("replay", str(path), "-q", "--dry-run", "--format", "json")
        assert r.exit_code == 0, r.output
        assert read == [str(path)], read
    assert orjson.loads(r.stdout)["runs"][0]["summary"]["format"] == "anthropic"


def test_an_opening_started_early_and_never_used_stops_its_reader(forks, tmp_path):
    from compactlab.engine.feeds import Opening

    path = write_jsonl(tmp_path / "t.jsonl", tool_session(4))
    opening = Opening(str(path))
    assert opening.start() and len(forks) == 1 and not gone(forks[0])
    opening.close()
    assert gone(forks[0])
    loaded = Opening(str(path), stream=False)
    assert not loaded.start() and len(forks) == 1  # loaded whole: nothing is started early
    assert loaded.feed().streamed is False


@pytest.mark.parametrize("core", ["native", "python"])
def test_a_recording_loaded_whole_leaves_its_messages_in_the_file_until_read(tmp_path, monkeypatch, core):
    """A big plain Anthropic file that records usage is loaded whole (to calibrate on it): on the
    native core its lines' facts are read and their messages left in the file (``LazyEntry``, as the
    read-ahead feed's), read again where something reads them. The same messages, usage and runs as
    the file loaded eagerly; on the Python core (no facts read) it is loaded as before."""
    from compactlab import core as cores
    from compactlab.engine.feeds import Opening
    from compactlab.synth import write

    if core == "native" and cores.native_module() is None:
        pytest.skip("the native core is not built in this install (installed without a Rust toolchain)")
    monkeypatch.setenv("COMPACTLAB_CORE", core)
    path = str(tmp_path / "recorded.jsonl")
    write(path, 60, seed=8, usage=True)
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
    eager = Opening(path, whole_if_usage=True).feed()
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "1")
    lazy = Opening(path, whole_if_usage=True).feed()
    assert not eager.streamed and not lazy.streamed
    kinds = {type(e).__name__ for e in lazy.transcript.entries}
    assert kinds == ({"LazyEntry"} if core == "native" else {"Entry"})
    if core == "native":
        assert all(e._message is None for e in lazy.transcript.entries)  # (nothing read them yet)
    t, u = eager.transcript, lazy.transcript
    assert u.stamp is not None and u.usage == t.usage and u.model == t.model and u.call_positions == t.call_positions
    for policy in ("s08", "none", "observation-masking"):
        assert_same_run(replay(Opening(path, whole_if_usage=True).feed(), load_policy(policy)),
                        replay(eager.transcript, load_policy(policy)))
    assert u.messages == t.messages
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")  # (the switch: loaded as before)
    assert {type(e).__name__ for e in Opening(path, whole_if_usage=True).feed().transcript.entries} == {"Entry"}


@pytest.mark.parametrize("change", ["garbage", "another message"])
def test_a_file_rewritten_under_its_lazy_messages_is_said_to_have_changed(tmp_path, monkeypatch, change):
    """A message left in the file is read again from its line: where the line is no longer the one
    read (the file rewritten in place meanwhile), the run ends with an error that says so, not an
    internal error (it was a ValueError from the parser) and not another message."""
    from compactlab import core as cores
    from compactlab.engine.feeds import Opening
    from compactlab.synth import write

    if cores.native_module() is None:
        pytest.skip("the native core is not built in this install (installed without a Rust toolchain)")
    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "1")
    path = tmp_path / "recorded.jsonl"
    write(path, 20, seed=2, usage=True)
    feed = Opening(str(path), whole_if_usage=True, probes=False).feed()  # (nothing reads a message yet)
    entries = feed.transcript.entries
    assert all(type(e).__name__ == "LazyEntry" and e._message is None for e in entries)
    data = bytearray(path.read_bytes())
    if change == "garbage":
        data[:] = b"x" * len(data)
    else:  # each line's role flipped where it still parses: another message
        data[:] = bytes(data).replace(b'"role":"user"', b'"role":"xxxx"').replace(b'"role":"assistant"',
                                                                                  b'"role":"user"     ')
    with open(path, "r+b") as f:  # (in place: the open file sees the new bytes)
        f.write(data)
    with pytest.raises(InputError, match="the file changed while it was replayed"):
        [e.message for e in entries]


@pytest.mark.parametrize("how", ["streamed", "read ahead", "loaded whole", "named", "a document"])
def test_an_opened_files_format_is_detected_once(tmp_path, monkeypatch, how):
    """The format of a file opened for a replay is detected from its head once, and named to the
    loader (a folder of 200 sessions detected each twice); a format the user named is not
    detected at all, and a document is detected by its loader as before."""
    from compactlab import transcripts
    from compactlab.engine.feeds import Opening

    session = tool_session(4)
    if how == "loaded whole":  # (a recording's usage: loaded whole, to calibrate on it)
        session = [{**m, "usage": {"input_tokens": 10 + i, "output_tokens": 2}} if m["role"] == "assistant" else m
                   for i, m in enumerate(session)]
    path = write_jsonl(tmp_path / "t.jsonl", session)
    if how == "a document":
        path = tmp_path / "t.json"
        path.write_bytes(orjson.dumps({"messages": session}))
    detected = []
    real = transcripts._detect
    monkeypatch.setattr(transcripts, "_detect", lambda *a, **k: detected.append(a[0]) or real(*a, **k))
    if how != "read ahead":
        monkeypatch.setattr(read_ahead, "usable", lambda *a, **k: False)
    opening = Opening(str(path), "anthropic" if how == "named" else None, whole_if_usage=True)
    opening.start()  # (as a job opens its next file: early)
    feed = opening.feed()
    assert detected == [str(path)] * (how != "named")
    assert feed.streamed == (how in ("streamed", "read ahead", "named"))
    assert_same_run(replay(feed, load_policy("s08")), replay(load_transcript(str(path)), load_policy("s08")))


def _native_or_skip():
    from compactlab import core as cores

    if cores.native_module() is None:
        pytest.skip("the native core is not built in this install (installed without a Rust toolchain)")


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()


@pytest.mark.parametrize("usage", [True, False])
def test_a_small_file_is_read_with_its_bytes_held_and_no_descriptor_kept(tmp_path, monkeypatch, usage):
    """A small plain Anthropic file (under ``MIN_BYTES``) is read as a big one is, its messages left
    unread, from its bytes held in memory (a corpus job holds many transcripts: no descriptor is
    kept for any), loaded whole (usage, to calibrate on it) or streamed (its probes cached): the
    same runs as the file read by Python (``COMPACTLAB_READ_AHEAD=0``), recall's texts read again
    from the bytes held."""
    from compactlab.engine.feeds import Opening
    from compactlab.synth import write

    _native_or_skip()
    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COMPACTLAB_READ_AHEAD", raising=False)
    made: list = []
    real = read_ahead.held
    monkeypatch.setattr(read_ahead, "held", lambda path: made.append(got := real(path)) or got)
    paths = [str(tmp_path / f"s{k}.jsonl") for k in range(12)]
    for k, path in enumerate(paths):
        write(path, 40, seed=k, usage=usage)
    before = _open_fds()
    kept = [Opening(path, whole_if_usage=True, stream=False).feed().transcript for path in paths]
    assert _open_fds() <= before  # (twelve transcripts held, no descriptor among them)
    assert len(made) == 12 and all(s is not None and s.fd == -1 and s.data for s in made)
    assert all({type(e).__name__ for e in t.entries} == {"LazyEntry"} for t in kept)
    for path in paths[:3]:
        for policy in ("s08", "observation-masking"):
            replay(Opening(path, whole_if_usage=True).feed(), load_policy(policy))  # (its probes stored)
            made.clear()
            run = replay(Opening(path, whole_if_usage=True).feed(), load_policy(policy))
            assert made and made[-1] is not None  # (loaded whole or streamed: read from its bytes)
            monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")
            assert_same_run(run, replay(Opening(path, whole_if_usage=True).feed(), load_policy(policy)))
            monkeypatch.delenv("COMPACTLAB_READ_AHEAD")
            assert run.summary.probes > 0
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")  # (the switch: read by Python)
    assert real(paths[0]) is None and read_ahead.load_lazily(paths[0]) is None


def test_a_transcript_with_its_messages_left_unread_is_pickled_as_its_bytes(tmp_path, monkeypatch):
    """A transcript loaded with its messages left in its file or in its bytes held, pickled (what a
    Dask cluster is sent where its workers cannot read the file: it failed on the open file), is
    sent with its file's bytes once and unpickled with them held: the same messages and runs."""
    from compactlab.synth import write

    _native_or_skip()
    monkeypatch.setenv("COMPACTLAB_CORE", "native")
    path = str(tmp_path / "recorded.jsonl")
    write(path, 50, seed=3, usage=True)
    for setting in ("1", ""):  # (its file open; its bytes held)
        monkeypatch.setenv("COMPACTLAB_READ_AHEAD", setting)
        t = read_ahead.load_lazily(path)
        assert t is not None and (t.entries[0]._lazy[0].fd >= 0) == (setting == "1")
        data = pickle.dumps(t)
        assert len(data) < os.path.getsize(path) + 200_000  # (the bytes once, and the facts)
        u = pickle.loads(data)
        sources = {id(e._lazy[0]) for e in u.entries}
        assert len(sources) == 1 and u.entries[0]._lazy[0].fd == -1
        assert all(e._message is None for e in u.entries)  # (sent unread: read from the bytes)
        assert u.messages == t.messages
        for policy in ("s08", "none"):
            assert_same_run(replay(u, load_policy(policy)), replay(t, load_policy(policy)))


def test_a_held_source_cut_short_is_said_so(tmp_path):
    """A line read again past the end of the bytes held is the error a file cut short is."""
    source = read_ahead.SourceFile(str(tmp_path / "x.jsonl"), data=b'{"role":"user","content":"a"}\n')
    assert source.fd == -1 and source.size == 30 and source.text_at(0, 30) == '{"role":"user","content":"a"}'
    with pytest.raises(InputError, match="cut short"):
        source.text_at(20, 30)
    assert list(source.blocks()) == [(0, source.data, 0, 30)]
    tail = read_ahead.SourceFile("y", data=b'{"a":1}\n{"b":2}')
    assert list(tail.blocks()) == [(0, tail.data, 0, 8), (8, b'{"b":2}', 0, 7)]
