"""compare's local workers: a transcript's runs go to one worker (what they share is worked out
once, as in one process), no worker waits while a run does, and every run is handed out once."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactlab.corpus.pool import Pending, Pool, can_fork


def test_a_worker_takes_the_next_run_of_its_transcript_then_a_transcript_no_one_started():
    pending = Pending(7, groups=[0, 0, 0, 1, 1, 2, 2])
    assert [pending.take(w) for w in ("a", "b", "a", "b", "a")] == [0, 3, 1, 4, 2]
    # (b's transcript is done: it starts the next one; a's too, and none is left unstarted: it
    # shares the last run of the one with most left)
    assert pending.take("b") == 5
    assert pending.take("a") == 6
    assert not pending and pending.take("a") is None and pending.take("b") is None


def test_without_groups_the_runs_are_handed_out_in_order():
    pending = Pending(4)
    assert [pending.take(w) for w in ("a", "b", "b", "a", "a")] == [0, 1, 2, 3, None]


def test_a_run_handed_to_a_worker_that_died_is_the_next_one_handed_out():
    pending = Pending(4, groups=["x", "x", "y", "y"])
    assert pending.take("a") == 0
    pending.put_back(0)
    assert pending and pending.take("b") == 0
    assert [pending.take("b"), pending.take("b"), pending.take("b"), pending.take("b")] == [2, 3, 1, None]


@given(st.lists(st.integers(0, 5), max_size=30), st.lists(st.sampled_from("abc"), min_size=1, max_size=60))
def test_every_run_is_handed_out_once_from_either_end_of_its_transcripts_runs(groups, workers):
    """Each run handed out is the first of its transcript's runs left (its worker's turn, or the
    start of a transcript no one started), or the last (a worker with nothing else to do)."""
    pending = Pending(len(groups), groups=groups)
    left = {g: [i for i in range(len(groups)) if groups[i] == g] for g in set(groups)}
    taken: list[int] = []
    for w in workers * (len(groups) + 1):
        got = pending.take(w)
        if got is None:
            assert not pending
            continue
        runs = left[groups[got]]
        assert got in (runs[0], runs[-1])
        runs.remove(got)
        taken.append(got)
    assert sorted(taken) == list(range(len(groups))) and not pending


@pytest.mark.skipif(not can_fork(), reason="the pool's workers are forked")
def test_a_transcripts_runs_are_run_by_one_worker():
    groups = [i // 3 for i in range(12)]
    with Pool(list(range(12)), lambda i: os.getpid(), 2, groups=groups) as pool:
        ran = dict(pool.outcomes())
    assert sorted(ran) == list(range(12))
    by_group = {g: {ran[i] for i in range(12) if groups[i] == g} for g in set(groups)}
    assert sum(len(pids) for pids in by_group.values()) <= len(by_group) + 1  # (one shared at the end, at most)


def _death_signal(_: object) -> int:
    """The signal this process is sent when its parent dies (Linux: PR_GET_PDEATHSIG)."""
    import ctypes

    got = ctypes.c_int(-1)
    ctypes.CDLL(None, use_errno=True).prctl(2, ctypes.byref(got), 0, 0, 0)
    return got.value


@pytest.mark.skipif(not can_fork() or not os.path.exists("/proc/self"), reason="Linux's PR_SET_PDEATHSIG")
def test_a_worker_dies_with_its_parent_and_libc_is_looked_up_once_before_the_fork():
    import signal

    from compactlab.plumbing import interrupts

    with Pool([0, 1], _death_signal, 2) as pool:
        got = dict(pool.outcomes())
    assert got == {0: int(signal.SIGKILL), 1: int(signal.SIGKILL)}
    assert interrupts._PRCTL and interrupts._PRCTL[0] is not None  # (looked up in this process, inherited)
