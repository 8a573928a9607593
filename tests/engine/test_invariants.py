from __future__ import annotations

import random
from collections import Counter

import pytest

from compactlab import core
from compactlab.engine.measures.violations import InvariantTracker, Violation, check_context, classify
from compactlab.transcripts.messages import make_entry
from helpers import asst, results, tr, tu, user


def kinds(messages):
    return [(v.kind, v.message_index, v.tool_use_id) for v in check_context([make_entry(m, i) for i, m in enumerate(messages)])]


def test_valid_context_has_none():
    assert kinds([user("go"), asst(tu("a"), tu("b")), results(tr("a"), tr("b")), asst("done")]) == []


@pytest.mark.parametrize("messages,expected", [
    ([user("go"), asst(tu("a"))], [("orphan_tool_use", 1, "a")]),
    ([user("go"), asst(tu("a")), user("no results")], [("orphan_tool_use", 1, "a")]),
    ([user("go"), results(tr("z"))], [("orphan_tool_result", 1, "z")]),
    ([user("go"), asst(tu("a")), results(tr("a")), asst(tu("a")), results(tr("a"))], [("duplicate_tool_use_id", 3, "a")]),
    ([user("go"), asst(tu("a")), {"role": "user", "content": [{"type": "text", "text": "hi"}, tr("a")]}],
     [("tool_result_not_first", 2, "a")]),
    ([user("go"), {"role": "assistant", "content": []}], [("empty_content", 1, None)]),
    ([user(""), asst("x")], [("empty_content", 0, None)]),
    ([asst("x"), user("y")], [("first_not_user", 0, None)]),
    ([], [("first_not_user", 0, None)]),  # (no message: the API refuses an empty list too)
])
def test_each_kind(messages, expected):
    assert kinds(messages) == expected


def test_not_first_counts_each_misplaced_block():
    msg = {"role": "user", "content": [tr("a"), {"type": "text", "text": "t"}, tr("b"), tr("c")]}
    found = kinds([user("go"), asst(tu("a"), tu("b"), tu("c")), msg])
    assert [k for k in found if k[0] == "tool_result_not_first"] == [
        ("tool_result_not_first", 2, "b"), ("tool_result_not_first", 2, "c")]


def test_classify_matches_as_a_multiset():
    found = check_context([make_entry(m, i) for i, m in enumerate([user("go"), results(tr("x")), results(tr("x"))])])
    sent = Counter(v.key for v in found)
    flags = [new for _, new in classify(found, sent, Counter({("orphan_tool_result", "x"): 1}))]
    assert flags == [False, True]


def _random_messages(rng, n):
    msgs = [user("go")] if rng.random() < 0.9 else [asst("x")]
    ids = [f"t{i}" for i in range(8)]
    for _ in range(n):
        r = rng.random()
        if r < 0.4:
            msgs.append(asst(*[tu(rng.choice(ids)) for _ in range(rng.randint(1, 3))]))
        elif r < 0.8:
            msgs.append(results(*[tr(rng.choice(ids)) for _ in range(rng.randint(1, 3))]))
        elif r < 0.9:
            msgs.append(user("" if rng.random() < 0.3 else "text"))
        else:
            msgs.append({"role": "user", "content": [{"type": "text", "text": "t"}, tr(rng.choice(ids))]})
    return msgs


NATIVE = core.native_module()
#: the trackers: this module's (the reference is ``check_context``, from scratch) and the native core's
TRACKERS = {"python": InvariantTracker,
            "native": (lambda: NATIVE.InvariantTracker(Violation)) if NATIVE is not None else None}


@pytest.mark.parametrize("seed", [4, 5, 6])
@pytest.mark.parametrize("which", sorted(TRACKERS))
def test_incremental_tracker_agrees_with_a_fresh_check(which, seed):
    """Both cores' trackers, shown contexts that grow, are edited in place, keep a shifted run
    behind a placeholder (a snip) or change shape, list and count what a fresh check finds."""
    if TRACKERS[which] is None:
        pytest.skip("the native core is not built in this install (no Rust toolchain): nothing to compare")
    rng = random.Random(seed)
    tracker = TRACKERS[which]()
    checked = 0
    current = []
    origin = 0

    def fresh(n):
        nonlocal origin
        made = [make_entry(m, origin + i) for i, m in enumerate(_random_messages(rng, n)[1:])]
        origin += len(made) + 1
        return made

    def edited(e):
        if e.results and rng.random() < 0.7:  # content only (micro, budget): same shape
            return e.with_result_content(0, "[cleared]")
        if e.tool_use_ids and rng.random() < 0.3:  # same message, different shape
            return e.with_message({**e.message, "content": "no tools now"})
        return e

    for _ in range(600):
        keep = rng.randint(0, len(current))
        r = rng.random()
        if r < 0.3 or keep == len(current):
            # keep a prefix, append a tail: what appends and in-place edits do
            current = current[:keep] + fresh(rng.randint(0, 4))
        elif r < 0.6:
            # edit messages after the prefix in place, then append
            current = current[:keep] + [edited(e) for e in current[keep:]] + fresh(rng.randint(0, 2))
        else:
            # keep a prefix, insert a placeholder, keep a shifted run, append: what a snip does
            cut = rng.randint(keep, len(current))
            placeholder = [make_entry(user("[snipped]"), -1 - origin)] if rng.random() < 0.7 else []
            current = current[:keep] + placeholder + current[cut:] + fresh(rng.randint(0, 3))
        tracker.update(current, keep)
        expected = check_context(current)
        assert tracker.violations() == expected
        assert tracker.total == len(expected)
        assert Counter(tracker.counts()) == Counter(v.key for v in expected)
        checked += 1
    assert checked == 600


@pytest.mark.skipif(NATIVE is None, reason="the native core is not built in this install (no Rust toolchain)")
def test_the_native_tracker_lets_a_stream_s_freed_messages_go():
    """A stream's raw baseline frees the messages it no longer needs: the native tracker keeps no
    reference to them (its identity cache included), only to the stand-in."""
    import sys

    from compactlab.engine.measures.baseline import FREED

    tracker = NATIVE.InvariantTracker(Violation)
    entries = [make_entry(m, i) for i, m in enumerate([user("go"), asst(tu("a")), results(tr("a")), asst("done")])]
    watched = entries[1]
    alone = sys.getrefcount(watched)
    tracker.update(entries, 0)
    assert sys.getrefcount(watched) > alone  # (held while in its context)
    tracker.free(0, 2, FREED)
    assert sys.getrefcount(watched) == alone
    assert tracker.total == 0 and tracker.violations() == []


@pytest.mark.skipif(NATIVE is None, reason="the native core is not built in this install (no Rust toolchain)")
def test_the_native_kinds_are_the_python_ones_in_their_order():
    """(A listing sorts by the kinds' order: the Rust enum's must be ``KINDS``'s.)"""
    from compactlab.engine.measures.violations import KINDS

    assert tuple(NATIVE.VIOLATION_KINDS) == KINDS


@pytest.mark.skipif(NATIVE is None, reason="the native core is not built in this install (no Rust toolchain)")
def test_the_native_tracker_knows_an_id_by_its_text_not_its_object():
    """The native tracker numbers ids by their text (its table holds the strings, not copies): the
    same id made twice (two objects), ids beyond ASCII, and thousands of ids (the table grown,
    every id found again) count as in the Python tracker."""
    def made(text):
        return "".join(list(text))  # (another object of the same text)

    ids = [f"toolu_{i:05d}" for i in range(3_000)] + ["é", "工具"]
    msgs = [user("go")]
    for k, tid in enumerate(ids):
        msgs += [asst(tu(tid)), results(tr(made(tid)))]
        if k % 500 == 0:
            msgs += [asst(tu(made(tid))), results(tr(tid))]  # (a reused id: a duplicate)
    entries = [make_entry(m, i) for i, m in enumerate(msgs)]
    native, python = NATIVE.InvariantTracker(Violation), InvariantTracker()
    for tracker in (native, python):
        tracker.update(entries, 0)
    assert native.total == python.total == 7
    assert native.counts() == python.counts() and native.violations() == python.violations()


def test_an_entrys_id_sets_are_made_when_first_read_and_kept():
    from compactlab.transcripts.messages import NO_IDS, Entry

    call = make_entry(asst(tu("a", "Read"), tu("b", "Grep")), 0)
    answer = make_entry(results(tr("b", "x"), tr("a", "y")), 1)
    plain = Entry(call.message, call.chars, call.role, 0, call.tool_use_ids, call.tool_names, call.use_files, (), (),
                  False, False)
    assert plain._use_set is None and plain._result_set is None  # (not made yet)
    assert plain.use_set == {"a", "b"} and plain._use_set is plain.use_set  # (made once, then kept)
    assert plain.result_set is NO_IDS  # (a message with none: the shared empty set)
    assert answer.result_set == {"a", "b"} and call.use_set == {"a", "b"}
    # a copy with a result replaced takes the sets as they stand, made or not, without making them
    unread = Entry(answer.message, answer.chars, "user", 1, (), (), (), answer.results, (), False, False)
    copy = unread.with_result_content(0, "cleared")
    assert copy._result_set is None and copy.result_set == {"a", "b"} and unread._result_set is None
    made = answer.with_result_content(0, "cleared")
    assert made._result_set is answer.result_set
