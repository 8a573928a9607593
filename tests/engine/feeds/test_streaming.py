"""A single replay streams its transcript (SPEC §10): the same run as a loaded one, with only the
working context in memory, and a failure part-way leaves no files behind."""

from __future__ import annotations

import gc
import json
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlab.errors import BadLineError, InputError
from compactlab.transcripts.messages import Entry
from compactlab.engine.policy import load_policy
from compactlab.core import in_use
from compactlab.engine.loop import replay
from compactlab.engine.measures import probe_cache
from compactlab.engine.feeds import READ_BATCH
from compactlab.summarizers import StubSummarizer
from compactlab.engine.feeds import StreamFeed, open_feed
from compactlab.engine.feeds.read_ahead import LazyEntry, ReadAheadFeed
from compactlab.transcripts import Transcript, load_transcript, open_transcript
from compactlab.transcripts.writer import COMPACTION_KEY
from helpers import SAMPLES, assert_same_run, asst, files_under, results, tool_session, tr, tu, user, write_jsonl, examples
from strategies import policies, transcripts


@pytest.mark.parametrize("read_ahead", ["0", "1", "lazy"], ids=["in-process", "read-ahead", "left-in-file"])
@pytest.mark.parametrize("preset", ["none", "s06", "s08", "s20", "claude-code", "observation-masking"])
@pytest.mark.parametrize("sample", ["synth-medium", "manual-compact", "huge-batch", "parallel-batch"])
def test_a_streamed_replay_is_the_loaded_replay(sample, preset, read_ahead, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", read_ahead)
    path = str(SAMPLES / f"{sample}.jsonl")
    if read_ahead == "lazy":  # (left in the file where the probes are known: the probe cache's)
        if in_use() is None:
            pytest.skip("the messages are left in the file only where the native core reads their facts")
        monkeypatch.setattr(probe_cache, "MIN_BYTES", 1)
        monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path / "cache"))
        replay(open_feed(path), load_policy("s08"))
    stream = open_feed(path)
    assert isinstance(stream, StreamFeed) and isinstance(stream, ReadAheadFeed) == (read_ahead == "1")
    if read_ahead == "lazy":  # (its messages' facts read natively: left in the file)
        other = open_feed(path)
        assert any(isinstance(e, LazyEntry) for e in next(other.stream.batches(8)))
        other.close()
    streamed = replay(stream, load_policy(preset), out_dir=tmp_path / "s", write_transcripts=True)
    loaded = replay(load_transcript(path), load_policy(preset), out_dir=tmp_path / "l", write_transcripts=True)
    assert_same_run(streamed, loaded)
    assert files_under(tmp_path / "s") == files_under(tmp_path / "l")
    with pytest.raises(RuntimeError, match="only once"):
        next(stream.call_batches(None))


def test_recorded_compactions_restart_a_streamed_replay_too(tmp_path):
    """Compaction lines (as `convert` writes them) land between messages: the restart happens at
    the same message whether the stream read them in the current batch or an earlier one."""
    msgs = tool_session(READ_BATCH)  # the assistant message of call k is message 1 + 2k
    lines = []
    for i, m in enumerate(msgs):
        if i in (101, 102 + READ_BATCH, 401):  # before calls 50 and 200, and before the results of call 178
            lines.append({"role": "user", "content": f"summary before {i}", COMPACTION_KEY: {"trigger": "auto"}})
        lines.append(m)
    path = write_jsonl(tmp_path / "c.jsonl", lines)
    loaded = load_transcript(str(path))
    assert [c.position for c in loaded.compactions] == [101, 102 + READ_BATCH, 401]
    for keep in (True, False):
        a = replay(open_transcript(str(path)), load_policy("none"), keep_recorded_compactions=keep)
        assert_same_run(a, replay(loaded, load_policy("none"), keep_recorded_compactions=keep))
    assert min(c.messages for c in a.calls[60:]) > 100  # without: no restart
    kept = replay(open_transcript(str(path)), load_policy("none"), keep_recorded_compactions=True)
    assert [kept.calls[k].messages for k in (49, 50, 51, 179, 200)] == [99, 1, 3, 2, 1]


class _Census(StubSummarizer):
    """A stub that counts the messages alive at every 8th request for a summary (a census walks
    every object: at each of the hundreds of summaries it was most of the suite's time)."""

    def __init__(self) -> None:
        super().__init__()
        self.alive: list[int] = []
        self.asked = 0
        gc.collect()  # (what earlier tests left in cycles: not this run's to count)
        self.before = self.entries()

    @staticmethod
    def entries() -> int:
        return sum(1 for o in gc.get_objects() if type(o) is Entry)

    def summarize(self, request):
        self.asked += 1
        if self.asked % 8 == 1:
            self.alive.append(self.entries() - self.before)
        return super().summarize(request)


def test_a_streamed_replay_holds_only_its_context(tmp_path):
    path = str(write_jsonl(tmp_path / "long.jsonl", tool_session(1000, size=300)))
    census = _Census()
    run = replay(open_transcript(path), load_policy("s08", ["summary.trigger=3000"]), summarizer=census)
    assert run.summary.calls == 1000 and len(census.alive) > 10
    # the context (at most 50 messages), the batch read ahead, the baseline's last few
    assert max(census.alive) < 60 + READ_BATCH + 10
    census = _Census()
    loaded = load_transcript(path)
    replay(loaded, load_policy("s08", ["summary.trigger=3000"]), summarizer=census)
    assert min(census.alive) > 2000  # a loaded transcript holds every message


def test_a_bad_line_late_in_a_stream_fails_the_run_and_removes_its_files(tmp_path):
    msgs = tool_session(40, size=40_000)  # every result is persisted by s08's budget layer
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in msgs) + b'{"role": "user", "content": [\n')
    with pytest.raises(BadLineError) as loading:
        load_transcript(str(path))
    out = tmp_path / "out"
    good = write_jsonl(tmp_path / "good.jsonl", tool_session(3, size=40_000))
    replay(open_transcript(str(good)), load_policy("s08", ["budget.max_chars=10000"]), out_dir=out)
    before = files_under(out)
    assert len(before) == 3  # an earlier run: its persisted results and its marker
    with pytest.raises(BadLineError) as streaming:
        replay(open_transcript(str(path)), load_policy("s08", ["budget.max_chars=10000"]), out_dir=out)
    assert str(streaming.value) == str(loading.value)
    assert files_under(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "good.jsonl",
                                                                                         "out"]


def test_a_failed_run_into_a_new_folder_leaves_no_folder(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in tool_session(5, size=40_000)) + b"[1]\n")
    with pytest.raises(BadLineError, match="not a JSON object"):
        replay(open_transcript(str(path)), load_policy("s08", ["budget.max_chars=10000"]), out_dir=tmp_path / "a" / "b")
    assert list(tmp_path.iterdir()) == [path]


def test_a_stream_with_no_messages_is_the_same_error(tmp_path):
    path = write_jsonl(tmp_path / "sys.jsonl", [{"role": "system", "content": "only a system prompt"}])
    with pytest.raises(InputError) as loading:
        load_transcript(str(path))
    with pytest.raises(InputError) as streaming:
        replay(open_transcript(str(path)), load_policy("s08"))
    assert str(streaming.value) == str(loading.value) and "no messages" in str(loading.value)


def test_formats_that_regroup_lines_are_loaded():
    from helpers import SHARED

    sessions = sorted((SHARED / "transcripts" / "claude_code").rglob("*.jsonl")) if SHARED.is_dir() else []
    if not sessions:
        pytest.skip("../shared/transcripts is absent")
    assert isinstance(open_transcript(str(sessions[0])), Transcript)


def test_the_cli_streams_one_file_and_prices_it_once_read(cli, tmp_path):
    msgs = [user("go"), {"type": "message", "role": "assistant", "model": "my-local-llama",
                         "content": [tu("a", "bash", command="ls")], "usage": {"input_tokens": 10}},
            results(tr("a", "x" * 300)), asst("done")]
    path = write_jsonl(tmp_path / "t.jsonl", msgs)
    r = cli("replay", path, "--format", "json", "--dry-run")
    assert r.exit_code == 0
    assert r.stderr.count("no prices for model 'my-local-llama' and no provider known for it: unpriced") == 1
    doc = json.loads(r.stdout)["runs"][0]
    assert doc["summary"]["calls"] == 2 and doc["summary"]["price_model"] == "my-local-llama"
    priced = json.loads(cli("replay", path, "--format", "json", "--dry-run", "--price-model", "claude-haiku-4-5").stdout)["runs"][0]
    assert priced["summary"]["price_model"] == "claude-haiku-4-5"
    assert doc["summary"]["cost_usd"] == 0 < priced["summary"]["cost_usd"]  # (unpriced: never another model's)


def test_a_folder_is_replayed_a_file_at_a_time(cli, tmp_path):
    """Sessions are read, replayed and let go one after another: each gets the report it gets
    alone, and a bad file fails the command naming its line after the reports of those before."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    for i in range(3):
        write_jsonl(folder / f"s{i}.jsonl", tool_session(5 + i, prefix=f"f{i}-"))
    r = cli("replay", folder, "--format", "json", "--out", tmp_path / "all", "-q")
    assert r.exit_code == 0, r.stderr
    runs = json.loads(r.stdout)["runs"]
    alone = json.loads(cli("replay", folder / "s1.jsonl", "--format", "json", "--dry-run").stdout)
    alone = alone["runs"][0]
    for run in (runs[1], alone):
        run.pop("timing")
    assert runs[1] == alone and [run["summary"]["calls"] for run in runs] == [5, 6, 7]
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == [".compactlab-run", "s0-s08", "s1-s08", "s2-s08"]
    with (folder / "s1.jsonl").open("ab") as f:
        f.write(b"not json\n")
    r = cli("replay", folder, "--out", tmp_path / "again", "-q")
    assert r.exit_code == 2 and f"{folder / 's1.jsonl'}:14: invalid JSON" in r.stderr  # 13 messages, then this
    assert not (tmp_path / "again").exists()  # one --out, one run: whole or absent


@pytest.mark.parametrize("priced", [[], ["--price-model", "claude-haiku-4-5"]])
def test_a_streamed_replay_reports_its_skipped_lines(cli, tmp_path, priced):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in tool_session(3)) + b"oops\n")
    r = cli("replay", path, "--skip-bad-lines", "--dry-run", "--format", "json", *priced)
    assert r.exit_code == 0 and f"warning: {path}: skipped 1 bad line(s)" in r.stderr
    assert json.loads(r.stdout)["runs"][0]["summary"]["skipped_lines"] == 1


@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), policies(pair_safe=False), st.integers(1, 6))
def test_any_transcript_streams_to_the_run_it_loads_to(msgs, policy, batch):
    """Whatever the transcript and the policy, and however the reading is batched."""
    import compactlab.engine.feeds.base as feeds

    with tempfile.TemporaryDirectory() as folder:
        path = str(write_jsonl(Path(folder) / "t.jsonl", msgs))
        loaded = replay(load_transcript(path), policy)
        old, feeds.READ_BATCH = feeds.READ_BATCH, batch
        try:
            streamed = replay(open_transcript(path), policy)
        finally:
            feeds.READ_BATCH = old
    assert_same_run(streamed, loaded)
