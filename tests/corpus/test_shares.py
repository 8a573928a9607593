"""tune's workers each keep a fixed share of the corpus (#32 §1): the command's process holds no
transcript, each transcript is read once per worker (not once per trial), and a worker that dies
fails only its own runs."""

from __future__ import annotations

import gc
import os
import signal

import pytest

from compactlab import load_policy
from compactlab.corpus import shares
from compactlab.corpus.compare import FileRef
from compactlab.corpus.pool import can_fork
from compactlab.corpus.shares import Member, SharePool, shares_of
from compactlab.transcripts import Transcript, load_transcript
from helpers import SAMPLES

pytestmark = pytest.mark.skipif(not can_fork(), reason="share workers are forked")

NAMES = ["synth-small.jsonl", "synth-medium.jsonl", "manual-compact.jsonl", "parallel-batch.jsonl"]


def test_shares_are_balanced_by_bytes_and_never_empty():
    assert shares_of([10, 1, 1, 1, 9], 2) == [[0, 2], [1, 3, 4]]  # 11 and 11
    assert shares_of([5, 5, 5], 5) == [[0], [1], [2]]  # no more shares than transcripts
    assert shares_of([3], 1) == [[0]]
    assert sorted(i for s in shares_of(list(range(50)), 3) for i in s) == list(range(50))


def _members() -> list[Member]:
    out = []
    for name in NAMES:
        t = load_transcript(str(SAMPLES / name))
        out.append(Member(FileRef(str(SAMPLES / name), t.format, False, t.content_hash), None, None,
                          os.path.getsize(SAMPLES / name)))
    return out


def test_each_worker_reads_its_share_once_and_the_runs_are_those_of_compare(tmp_path, monkeypatch):
    from compactlab.corpus.compare import Job, run_job
    from compactlab.summarizers import StubSummarizer

    log = tmp_path / "reads"
    real = shares._read

    def counted(member):  # (forked workers inherit it; each appends a line per read)
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {os.path.basename(member.ref.path)}\n")
        return real(member)

    monkeypatch.setattr(shares, "_read", counted)
    members = _members()
    policies = [load_policy("s08"), load_policy("s06"), load_policy("none")]
    with SharePool(members, 2) as pool:
        first = pool.run(policies[:2])
        second = pool.run(policies[2:])
    assert not first.failures and not second.failures
    assert [r.job for r in first.results] == list(range(8)) and [r.job for r in second.results] == list(range(4))
    reads = log.read_text().split("\n")[:-1]
    assert sorted(line.split()[1] for line in reads) == sorted(NAMES)  # once each, over both batches
    assert len({line.split()[0] for line in reads}) == 2  # by two workers
    for r in first.results:  # the same numbers as compare's run of that job
        t = load_transcript(str(SAMPLES / NAMES[r.job % 4]))
        alone = run_job(Job(r.job, 0, policies[r.job // 4], ()), t, None, None, False, StubSummarizer())
        assert r.summary == alone.summary
        assert (r.tokens, r.raw_tokens, r.events, r.levels, r.losses) == ([], [], {}, {}, [])  # (a score's alone)


def test_a_worker_reads_and_runs_a_batch_with_its_collector_paused(tmp_path, monkeypatch):
    """A worker keeps its share's transcripts for every trial: the collector's full passes would
    traverse them all, so it is paused while a batch is read and run (as compare's workers are),
    and back on between batches; so is the allocator's trimming (``allocator_kept``)."""
    from compactlab.plumbing import process

    log = tmp_path / "states"
    real_read, real_run = shares._read, shares.run_job
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")  # (as a Dask nanny sets it)
    monkeypatch.setattr(process, "_glibc", lambda: type("Libc", (), {"mallopt": print, "malloc_trim": print})())

    def note(what):  # (and whether the allocator keeps what is freed: allocator_kept)
        with open(log, "a") as f:
            f.write(f"{what} {gc.isenabled()}{' kept' * process.allocator_kept._inside}\n")

    monkeypatch.setattr(shares, "_read", lambda member: note("read") or real_read(member))
    monkeypatch.setattr(shares, "run_job", lambda *a: note("run") or real_run(*a))
    real_requests = shares.requests
    monkeypatch.setattr(shares, "requests", lambda conn: (note("between") or batch for batch in real_requests(conn)))
    gc.enable()  # (as the command leaves it once it has read its files: the workers inherit it)
    with SharePool(_members()[:2], 1) as pool:
        assert not pool.run([load_policy("s08")]).failures
        assert not pool.run([load_policy("none")]).failures
    states = log.read_text().split("\n")[:-1]
    assert states.count("between True") == 2
    assert {s for s in states if not s.startswith("between")} == {"read False kept", "run False kept"}
    assert states.count("run False kept") == 4 and states.count("read False kept") == 2


def test_a_worker_that_dies_fails_its_runs_only_and_a_fresh_one_takes_its_share(tmp_path):
    members = _members()
    policy = load_policy("s08")
    with SharePool(members, 2) as pool:
        assert not pool.run([policy]).failures
        victim = pool.shares[0]
        process, _ = pool._workers[0]
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        got = pool.run([policy])
        assert sorted(f.job for f in got.failures) == victim
        assert all("killed (SIGKILL)" in f.reason for f in got.failures)
        assert sorted(r.job for r in got.results) == pool.shares[1]
        again = pool.run([policy])
        assert not again.failures and len(again.results) == 4


def test_a_changed_file_fails_its_runs_with_its_name(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes((SAMPLES / "synth-small.jsonl").read_bytes())
    t = load_transcript(str(path))
    member = Member(FileRef(str(path), t.format, False, t.content_hash), None, None, 1)
    path.write_bytes((SAMPLES / "synth-medium.jsonl").read_bytes())
    with SharePool([member], 1) as pool:
        got = pool.run([load_policy("s08")])
    assert not got.results and len(got.failures) == 1
    assert str(path) in got.failures[0].reason and "changed" in got.failures[0].reason


def test_a_tune_holds_no_transcript_in_its_process(cli, tmp_path, monkeypatch):
    import compactlab.jobs.tune as tune_module

    real = tune_module.share_evaluator
    held: list[int] = []

    def watching(pool):
        evaluate = real(pool)

        def counted(policies):
            gc.collect()
            held.append(sum(isinstance(o, Transcript) for o in gc.get_objects()))
            return evaluate(policies)

        return counted

    monkeypatch.setattr(tune_module, "share_evaluator", watching)
    r = cli("tune", *(SAMPLES / n for n in NAMES), "-p", "s08", "--space", "micro.keep_recent=1:8", "--trials", "4",
            "--jobs", "2", "--out", tmp_path / "t", "-q")
    assert r.exit_code == 0, r.stderr
    assert held and held == [0] * len(held)


def test_without_fork_a_tune_runs_its_trials_in_process_with_the_same_front(cli, tmp_path, monkeypatch):
    import compactlab.jobs.tune as tune_module

    def run(out):
        r = cli("tune", *(SAMPLES / n for n in NAMES[:2]), "-p", "s08", "--space", "micro.keep_recent=1:8", "--trials",
                "4", "--jobs", "2", "--out", out, "-q", "--no-chart")
        assert r.exit_code == 0, r.stderr
        return (out / "front.csv").read_text()

    shared = run(tmp_path / "shares")
    monkeypatch.setattr(tune_module, "can_fork", lambda: False)
    monkeypatch.setattr("compactlab.corpus.compare.can_fork", lambda: False)
    assert run(tmp_path / "in-process") == shared


def test_two_batches_out_at_once_give_each_batch_s_runs_in_the_order_sent():
    """A batch sent while another runs (``submit``) is queued by each worker behind it: collected in
    the order sent, each gives its own runs, the same as sent one at a time."""
    members = _members()
    first, second = [load_policy("s08"), load_policy("none")], [load_policy("s06")]
    with SharePool(members, 2) as pool:
        alone = [pool.run(first), pool.run(second)]
        sent = [pool.submit(first), pool.submit(second)]
        both = [pool.collect(sent[0]), pool.collect(sent[1])]
    for a, b in zip(alone, both):
        assert not a.failures and not b.failures
        assert [(r.job, r.summary) for r in a.results] == [(r.job, r.summary) for r in b.results]
    assert [r.job for r in both[0].results] == list(range(8)) and [r.job for r in both[1].results] == list(range(4))


def test_a_worker_that_dies_with_two_batches_out_fails_the_first_s_runs_only():
    """Killed in the first of two batches: its runs left of that batch fail; a fresh worker takes
    its share and runs the second batch whole."""
    members = _members()
    policy = load_policy("s08")
    with SharePool(members, 2) as pool:
        assert not pool.run([policy]).failures  # (the workers are up)
        process, _ = pool._workers[0]
        os.kill(process.pid, signal.SIGSTOP)  # (stopped before it reads the next batch, then killed)
        sent = [pool.submit([policy]), pool.submit([policy])]
        os.kill(process.pid, signal.SIGKILL)
        got = pool.collect(sent[0])
        assert sorted(f.job for f in got.failures) == pool.shares[0]
        assert all("killed (SIGKILL)" in f.reason for f in got.failures)
        assert sorted(r.job for r in got.results) == pool.shares[1]
        second = pool.collect(sent[1])
        assert not second.failures and len(second.results) == 4
        assert pool._workers[0][0].pid != process.pid
