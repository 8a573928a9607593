"""The raw baseline on the native core against the Python one, its reference (#59) — its violations
(the native ``InvariantTracker``) and, above all, the hindsight probes' index: the
native core reads the texts (``_native.runs``, ``_native.tokens``) and keeps the results' strings
(``_native.ResultStrings``) in Rust; every recording, loaded or streamed, gets the same probes from
both, generated texts the same runs and tokens, and a random use of the two strings' indexes the
same answers. Where a text has no UTF-8 (a lone surrogate) the Python side reads it."""

from __future__ import annotations

import sys
from types import MethodType

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlab import load_policy, load_transcript, replay
from compactlab import core
from compactlab.engine.measures import baseline, probes
from compactlab.engine.measures.probes import ProbeIndex, ResultStrings, _scanned, _split, tokens
from compactlab.transcripts import TranscriptBuilder, open_transcript
from helpers import SAMPLES, own_source_pattern, examples
from test_native_core import _shared_recordings

NATIVE = core.native_module()
needs_native = pytest.mark.skipif(NATIVE is None, reason="the native core is not built in this install (it was "
                                                         "installed without a Rust toolchain): nothing to compare")

#: texts a result or a reply may hold: code, paths, prose in other scripts, every kind of space,
#: pieced from characters and from pieces of names around the lengths and kinds that decide
_CHARS = st.one_of(st.characters(codec="utf-8"), st.sampled_from(list("._/:~- \t\n,;()'\"\\aZ09éüß\u00a0\u2003"
                                                                  "\u3000\u2028\u0085\u200b\u1680\x1c")))
_PIECES = st.sampled_from(["ab", "abc", "a_b", "x.py", "ab/c", "fooBar", "1234", "123", "http://", "https://x",
                           "__", "--", "ñam", "Ωmega", "ǅx", "x\u0301", "a:b", "é_", "ab1"])
TEXT = st.lists(st.one_of(_CHARS, _PIECES), max_size=120).map("".join)


def _baselines(monkeypatch, path: str, stream: bool = False):
    out = []
    for which in ("python", "native"):
        monkeypatch.setenv("COMPACTLAB_CORE", which)
        if stream:
            run = replay(open_transcript(path, load=False), load_policy("s08"))
            out.append(run.probe_ledger)
        else:
            out.append(baseline.compute_baseline(load_transcript(path)))
    return out


@needs_native
@pytest.mark.parametrize("sample", ["synth-small", "synth-medium", "manual-compact", "recorded-orphan"])
def test_both_cores_index_the_samples_alike_loaded_and_streamed(monkeypatch, sample):
    path = str(SAMPLES / f"{sample}.jsonl")
    a, b = _baselines(monkeypatch, path)
    assert a.probes == b.probes and a.probes_indexed and b.probes_indexed
    assert a.refs == b.refs and a.chars == b.chars
    # (the raw baseline's violations: the native core's tracker against the Python one)
    assert a.violation_counts == b.violation_counts and a.first_seen == b.first_seen
    if sample == "synth-medium":
        assert sum(map(len, a.probes.values())) > 50  # (a comparison of something)
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")
    a, b = _baselines(monkeypatch, path, stream=True)
    assert a == b


@needs_native
@pytest.mark.slow
def test_both_cores_index_every_shared_recording_alike(monkeypatch, shared_transcripts):
    from compactlab.errors import CompactlabError

    problems, indexed, streamed, found = [], 0, 0, 0
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")
    for path in _shared_recordings():
        try:
            a, b = _baselines(monkeypatch, str(path))
        except CompactlabError:  # (not a transcript: a harness's own log, a fixture's truth)
            continue
        indexed += 1
        found += sum(map(len, a.probes.values()))
        if a.probes != b.probes:
            problems.append(f"{path.name}: loaded")
        elif a.violation_counts != b.violation_counts or a.first_seen != b.first_seen:
            problems.append(f"{path.name}: the raw violations")
        elif open_transcript(str(path), load=False) is not None:  # (a format read a line at a time)
            streamed += 1
            if (ledgers := _baselines(monkeypatch, str(path), stream=True))[0] != ledgers[1]:
                problems.append(f"{path.name}: streamed")
    assert indexed >= 10 and found > 1000  # (streamed: the samples above; no shared format streams yet)
    assert not problems, "\n".join(problems[:20])


@needs_native
def test_every_character_separates_runs_as_python_splits_them():
    """Each code point between two letters, in Rust and in Python (``str.translate`` then
    ``str.split``): a character one splits on and the other does not would make a run differ."""
    for start in range(0, sys.maxunicode + 1, 1 << 16):
        text = " ".join(f"a{chr(c)}b" for c in range(start, min(start + (1 << 16), sys.maxunicode + 1))
                        if not 0xD800 <= c <= 0xDFFF)
        assert NATIVE.runs(text) == _split(text), hex(start)


@needs_native
@settings(max_examples=examples(400), deadline=None)
@given(TEXT)
def test_generated_texts_have_the_same_runs_and_tokens_on_both_cores(text):
    assert NATIVE.runs(_scanned(text)) == _split(_scanned(text))
    assert tokens(text, NATIVE) == tokens(text)


def _names() -> st.SearchStrategy[str]:
    """Names as a reply holds them: the vocabulary's and Python's standard ones, the other
    languages', made-up ones, joined by dots, slashes and dashes, with ``self.``, dunders and files'
    ends; some beyond ASCII."""
    from compactlab.engine.measures.probes import GENERIC, OTHER_MODULES, OTHER_NAMES, RECEIVERS, vocabulary

    body = vocabulary().names.body.split()
    known = sorted({*body[::2][::40], *sorted(GENERIC)[::5], *OTHER_MODULES, *OTHER_NAMES, *RECEIVERS})
    word = st.one_of(st.sampled_from(known), st.sampled_from(["x", "my_app", "addItem", "CI", "CD", "API", "Q",
                                                             "__init__", "__", "py", "json", "12345", "ünï",
                                                             "real", "time", "self", "cls", "phx", "", "a_b"]))
    joined = st.lists(word, min_size=1, max_size=4).flatmap(
        lambda ws: st.lists(st.sampled_from([".", "/", "-", ":", "..", "//"]), min_size=len(ws) - 1,
                            max_size=len(ws) - 1).map(lambda js: ws[0] + "".join(j + w for j, w in zip(js, ws[1:]))))
    return st.one_of(joined, st.builds(lambda a, b: f"{a}{b}", st.sampled_from(["self.", "cls.", "phx-", "-", ""]),
                                       joined))


@needs_native
@settings(max_examples=examples(600), deadline=None)
@given(st.lists(_names(), max_size=8), st.sampled_from([0, 1, 2, 3, 1 << 13, (1 << 14) - 1]))
def test_the_native_core_judges_names_and_splits_them_as_python_does(names, own):
    """``KnownNames.generic`` against ``generic``, on names made of the vocabulary's and the
    standard ones (an ASCII one judged, another left to Python), with the frameworks of the
    session's own source; ``parts`` of them against Python's."""
    from compactlab.engine.measures.probes import _native_known, generic, parts

    known = _native_known(NATIVE)
    edges = ["os.py", "json.json", "os.path", "string.split", "self.addItem", "self.a_b", "cls.value", "x.__dict__",
             "CI/CD", "CI/CDEFGH", "A/B/C/D", "Enum.find", "phx-click", "real-time", "-real-time-", "django.urls",
             "django.urls.path", "__init__", "__", "to_string", "12345"]
    for t in [*edges, *names]:
        assert known.generic(t, own) == (generic(t, own) if t.isascii() else None), t
    assert parts(set(names), NATIVE) == parts(set(names))
    assert NATIVE.parts(["a\ud800b.c_long_name"]) is None  # (no UTF-8: Python splits it)


@needs_native
def test_the_native_judge_of_names_is_made_for_a_long_replay_not_a_short_one(monkeypatch):
    """A reply's probes are found by Python for the first replies (``NATIVE_REPLIES_FROM``): a replay of
    a few calls does not make the native judge of names (once a process, about 8 ms); a longer one
    does, and the same probes are found either way (the samples and shared recordings: above)."""
    from compactlab.synth import generate

    monkeypatch.setattr(probes, "NATIVE_REPLIES_FROM", 16)
    probes._native_known.cache_clear()

    def indexed(calls: int) -> dict:
        t = TranscriptBuilder("t.jsonl", "anthropic")
        for m in generate(calls, seed=7):
            t.add(m)
        return baseline.compute_baseline(t.build()).probes

    indexed(8)
    assert probes._native_known.cache_info().currsize == 0
    assert indexed(60) and probes._native_known.cache_info().currsize == 1


@needs_native
def test_a_huge_text_is_read_by_its_head_and_tail_on_both_cores():
    head, tail = "start_one " + "x " * 150_000, " y" * 150_000 + " end_two"
    text = head + "middle_three" + tail
    assert tokens(text, NATIVE) == tokens(text) == {"start_one", "end_two"}


#: (strings of four characters and more, which the index is asked of; and shorter ones, which it
#: does not keep, whose answers must agree too)
OPS = st.lists(st.one_of(
    st.tuples(st.just("result"), TEXT, st.integers(0, 40), st.integers(0, 3)),
    st.tuples(st.just("not_learnt"), st.sets(st.sampled_from(["a_bc", "/a_bc", "a_bc.", "x.py", "c_de", "é_fg",
                                                                "zz", "a_b", "é_f"])),
              st.booleans()),
    st.tuples(st.just("mine"), st.sampled_from(["a_bc", "x.py", "q r s", "a_b"])),
    st.tuples(st.just("held"), st.sampled_from(["a_bc", "x.py", "c_de", "é_fg", "src/x.py", "zz", "nope", "a_b",
                                                "é_f", "\ud800ab"])),
), max_size=30)


@needs_native
@settings(max_examples=examples(200), deadline=None)
@given(OPS, st.booleans())
def test_the_native_result_strings_answer_as_the_python_ones(ops, with_wanted):
    wanted = None
    if with_wanted:
        wanted = {"a_bc", "x.py", "c_de", "é_fg"}
    a, b = ResultStrings(wanted), NATIVE.ResultStrings(wanted)
    for op in ops:
        if op[0] == "result":
            text = f"{op[1]} a_bc ./x.py: c_de a_b é_fg é_f" if op[3] else op[1]
            source = (op[2], "Bash")
            assert a.add_result(_scanned(text), (op[2], op[3]), source)
            assert b.add_result(_scanned(text), (op[2], op[3]), source)
        elif op[0] == "not_learnt":
            a.not_learnt(set(op[1]), op[2])
            b.not_learnt(set(op[1]), op[2])
        elif op[0] == "mine":
            a.add_mine(op[1])
            b.add_mine(op[1])
        else:
            assert a.held(op[1]) == b.held(op[1]), op
            assert a.is_mine(op[1]) == b.is_mine(op[1])


@needs_native
def test_a_text_without_utf8_is_read_by_python_and_indexed_alike():
    """A lone surrogate (no message can hold one: its size is its JSON's, which has none; a caller
    of the index might): the native core says it cannot read the text, the Python side reads it
    and gives the native strings' index its runs, keyed by their surrogatepass bytes."""
    text = "odd_\ud800name and src/app.py here"
    assert NATIVE.tokens(text) is None and NATIVE.runs(text) is None
    assert tokens(text, NATIVE) == tokens(text) == {"odd_\ud800name", "src/app.py"}
    a, b = ResultStrings(None), NATIVE.ResultStrings(None)
    assert b.add_result(text, (0, 0), (0, "x")) is False
    a.add_strings(_split(text), (0, 0), (0, "x"))
    b.add_strings(_split(text), (0, 0), (0, "x"))
    for s in ("odd_\ud800name", "odd_name", "src/app.py", "app.py"):
        assert a.held(s) == b.held(s), s
    assert b.held("odd_\ud800name") == (((0, 0),), (0, "x"))
    b.add_mine("\udfff")
    assert b.is_mine("\udfff") and not b.is_mine("\udffe")


@needs_native
def test_a_run_on_the_native_core_indexes_its_probes_there(monkeypatch):
    """The core a run names is the one that indexed: a native run's index keeps its strings in Rust,
    a python run's in the Python reference (a check that both ran the same code would be vacuous)."""
    made: list[str] = []
    real = ProbeIndex.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        made.append(type(self.strings).__module__)

    monkeypatch.setattr(ProbeIndex, "__init__", spy)
    monkeypatch.setenv("COMPACTLAB_PROBE_CACHE", "0")
    for which in ("native", "python"):
        monkeypatch.setenv("COMPACTLAB_CORE", which)
        replay(load_transcript(str(SAMPLES / "synth-small.jsonl")), load_policy("s08"))
    assert made == ["compactlab._native", probes.__name__]


def test_without_a_native_build_the_index_is_the_python_one(monkeypatch):
    monkeypatch.setattr(core, "native_module", lambda: None)
    monkeypatch.delenv("COMPACTLAB_CORE", raising=False)
    t = TranscriptBuilder("x.jsonl", "anthropic")
    for m in ({"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}):
        t.add(m)
    base = baseline.compute_baseline(t.build())
    assert base.probes == {} and core.in_use() is None


WORDS = ["src/app.py", "x_y", "fooBar", "12345", '"quoted text"', "back\\\\slash", "ünï_code", "line 7", "plain"]


@st.composite
def checked_contexts(draw):
    """A context as layers leave it — transcript messages (some results cleared or persisted, some
    dropped), messages a layer made — and probes of the kinds the index makes, held by results
    that may still stand, be changed or be gone."""
    from compactlab.engine.context import Context
    from compactlab.engine.measures.probes import Probe
    from compactlab.transcripts.messages import make_entry
    from helpers import asst, results, tr, tu, user

    entries, places = [make_entry(user("go " + draw(st.sampled_from(WORDS))), 0)], []
    origin = 1
    for i in range(draw(st.integers(1, 12))):
        if draw(st.booleans()):  # (a layer made one: a summary, a placeholder)
            entries.append(make_entry(user("summary: " + " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=3)))),
                                      -1 - i))
            continue
        entries.append(make_entry(asst(" ".join(draw(st.lists(st.sampled_from(WORDS), max_size=2))), tu(f"t{i}")),
                                  origin))
        places.append((origin, -1))
        blocks = [tr(f"t{i}", " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=4))))
                  for _ in range(draw(st.integers(1, 2)))]
        e = make_entry(results(*blocks), origin + 1)
        if draw(st.integers(0, 3)) == 0:
            e = e.with_result_content(0, draw(st.sampled_from(["[cleared]", "<persisted-output> x.txt", "x_y"])))
        places += [(origin + 1, b) for b in range(len(blocks))]
        if draw(st.integers(0, 4)):  # (else dropped: a snip)
            entries.append(e)
        origin += 2
    probes = [Probe(draw(st.sampled_from(WORDS)), tuple(sorted(draw(st.lists(st.sampled_from(places), min_size=1,
                                                                              max_size=3, unique=True)))),
                    0, "bash", draw(st.sampled_from(["identifier", "path", "line", "phrase"])))
              for _ in range(draw(st.integers(1, 6)))] if places else []
    return Context(entries), probes


def run_env(draw, context, probes):
    """A run's ledger over ``context`` (or none): which layer made some of its made messages and at
    which call, the call some of the probes' results were cleared at, the layer that dropped some of
    the transcript's messages with nothing in their place."""
    from types import SimpleNamespace

    from compactlab.engine.layers.base import LayerLedger

    if not draw(st.integers(0, 4)):
        return None
    ledger = LayerLedger()
    calls, layers = st.integers(-1, 30), st.sampled_from(["summary", "snip", "micro", "step", ""])
    for e in context.entries:
        if e.origin < 0 and draw(st.booleans()):
            ledger.made_by[e.origin] = draw(layers)
        if e.origin < 0 and draw(st.booleans()):
            ledger.made_at[e.origin] = draw(calls)
    for o, b in {place for p in probes for place in p.where}:
        if b >= 0 and draw(st.booleans()):
            ledger.cleared_at[(o, b)] = draw(calls)
        if draw(st.integers(0, 2)) == 0:
            ledger.dropped[o] = (draw(layers), draw(calls))
    return SimpleNamespace(ledger=ledger)


@needs_native
@settings(max_examples=examples(300), deadline=None)
@given(checked_contexts(), st.integers(1, 3), st.data())
def test_the_native_check_finds_the_probes_where_the_python_one_does(case, calls, data):
    """``check`` with the native core's ``RecallCheck`` against ``check`` itself: the same outcome,
    layer and call for every probe, in the same order, and the same counts, call after call over the
    same memo (each call's context the last one, or that one grown), with a run's ledger or without
    (a message made in a gap put down to its layer, a result cleared at its call, a message dropped
    by a step), and with no ledger to write to."""
    from compactlab.engine.measures.probes import ProbeMemo, check

    context, probes = case
    env = data.draw(st.composite(lambda draw: run_env(draw, context, probes))())
    python, native = ProbeMemo(), ProbeMemo(NATIVE)
    for call in range(calls):
        ledgers: list[list] = [[], []]
        counts = [check(probes, context, call, ledger, env, memo) for memo, ledger in zip((python, native), ledgers)]
        assert ledgers[0] == ledgers[1] and counts[0] == counts[1]
        assert all(type(o).__name__ == "ProbeOutcome" for o in ledgers[1])
        assert check(probes, context, call, None, env, ProbeMemo(NATIVE)) == counts[0]



@needs_native
def test_a_probe_whose_result_was_persisted_is_recoverable_from_the_call_it_was_persisted_at():
    """The newest result that held a probe, persisted in place (budget), makes it recoverable, put
    down to budget at the call the run's ledger says; an older one cleared (micro) does not: both
    checks alike."""
    from types import SimpleNamespace

    from compactlab.engine.context import Context
    from compactlab.engine.layers.base import LayerLedger
    from compactlab.engine.measures.probes import Probe, ProbeMemo, check
    from compactlab.transcripts.messages import make_entry
    from helpers import asst, results, tr, tu, user

    entries = [make_entry(user("go"), 0), make_entry(asst("look", tu("t1")), 1),
               make_entry(results(tr("t1", "found src/app.py")), 2).with_result_content(0, "[cleared]"),
               make_entry(asst("again", tu("t2")), 3),
               make_entry(results(tr("t2", "src/app.py again")), 4).with_result_content(
                   0, "<persisted-output> saved to out/r.txt"),
               make_entry(asst("ok"), 5)]
    env = SimpleNamespace(ledger=LayerLedger(cleared_at={(2, 0): 3, (4, 0): 7}))
    probe = Probe("src/app.py", ((2, 0), (4, 0)), 0, "bash", "path")
    older = probe._replace(where=((2, 0),))
    for memo in (ProbeMemo(), ProbeMemo(NATIVE)):
        ledger: list = []
        assert check([probe, older], Context(entries), 9, ledger, env, memo) == (0, 1)
        assert [(o.status, o.removed_by, o.removed_at) for o in ledger] == [("recoverable", "budget", 7),
                                                                              ("lost", "micro", 3)]


@needs_native
@settings(max_examples=examples(200), deadline=None)
@given(checked_contexts(), st.lists(st.tuples(st.integers(0, 3), st.integers(0, 99), st.integers(0, 99)), max_size=12))
def test_the_native_check_of_a_run_keeps_what_the_last_context_had(case, edits):
    """A run's contexts, each the last one with messages appended and then changed from some
    position (a result cleared in place, a message made in its place, the middle dropped), checked
    by the native core told how much of each the last one had (``stable``, the lowest position
    changed), against ``check`` itself reading every context whole: the same ledger, call after call."""
    from compactlab.engine.context import Context
    from compactlab.engine.measures.probes import ProbeMemo, check
    from compactlab.transcripts.messages import make_entry
    from helpers import user

    full, probes = case
    python, native = ProbeMemo(), ProbeMemo(NATIVE)
    entries, shown = [], 0
    for call, (kind, at, width) in enumerate([(0, 0, 0), *edits]):
        stable = len(entries)
        grow = 1 + at % 3
        entries = entries + full.entries[shown:shown + grow]
        shown += grow
        if entries and kind == 1:  # (a result cleared in place, else a message made in its place)
            i = at % len(entries)
            e = entries[i]
            entries[i] = (e.with_result_content(0, "[cleared]") if e.results
                          else make_entry(user(f"made at {call}"), -100 - call))
            stable = min(stable, i)
        elif len(entries) > 3 and kind == 2:  # (the middle dropped, or the head)
            i = at % (len(entries) - 2)
            del entries[i:i + 1 + width % 3]
            stable = min(stable, i)
        elif kind == 3:  # (a summary made at the head)
            entries.insert(0, make_entry(user(f"summary {call}: x_y"), -200 - call))
            stable = 0
        ledgers: list[list] = [[], []]
        check(probes, Context(list(entries)), call, ledgers[0], None, python)
        check(probes, Context(list(entries)), call, ledgers[1], None, native, stable)
        assert ledgers[0] == ledgers[1], (call, kind, stable)


@needs_native
def test_the_native_check_compares_a_context_whose_bound_is_not_the_last_ones():
    """A bound (``stable``) past a message that is not the last context's there is not trusted: the
    check compares the messages one by one, and finds the probe gone."""
    from compactlab.engine.context import Context
    from compactlab.engine.measures.probes import Probe, ProbeMemo, check
    from compactlab.transcripts.messages import make_entry
    from helpers import asst, results, tr, tu, user

    first = [make_entry(user("go"), 0), make_entry(asst("look", tu("t1")), 1),
             make_entry(results(tr("t1", "found src/app.py here")), 2), make_entry(asst("ok"), 3)]
    probe = Probe("src/app.py", ((2, 0),), 0, "bash", "path")
    memo = ProbeMemo(NATIVE)
    ledger: list = []
    check([probe], Context(first), 0, ledger, None, memo, 0)
    second = [*first[:2], first[2].with_result_content(0, "[cleared]"), make_entry(asst("ok"), 3)]
    check([probe], Context(second), 1, ledger, None, memo, 4)  # (the bound wrong: the last message differs)
    assert [o.status for o in ledger] == ["kept", "lost"]


#: ASCII texts with quoted passages: words, punctuation, paths, every kind of ASCII space
QUOTING = st.lists(st.one_of(
    st.sampled_from(['"', "'", " ", "\n", "\t", "\x0b", "\x1c", "\x1f", ".", ",", "!", "?", ";", ":", "-", "_", "/"]),
    st.sampled_from(["Enter", "a", "valid", "duration", "word", "it's", "x.py", "fooBar", "1234", "to", "be"]),
    st.characters(codec="ascii")), max_size=80).map("".join)


@st.composite
def quoted_prose(draw):
    """A text with a quoted passage that is prose, or nearly: words joined by any ASCII space or
    punctuation, padded, of about 1 to 300 characters (the bounds are 12 and 200)."""
    words = draw(st.lists(st.sampled_from(["Enter", "a", "valid", "duration", "it's", "x.py", "be", "12", "!?"]),
                          min_size=1, max_size=45))
    body = "".join(w + draw(st.sampled_from([" ", " ", " ", "\t", "\x1c", "\x1f", "\x0b", ", ", ". ", "-"]))
                   for w in words)
    pad = draw(st.sampled_from(["", " ", "\x1c", "\t ", "\x0c"]))
    quote = draw(st.sampled_from(['"', "'"]))
    return draw(QUOTING) + quote + pad + body[:draw(st.integers(0, 300))] + pad + quote + draw(QUOTING)


@needs_native
@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(QUOTING, quoted_prose()), min_size=1, max_size=3))
def test_the_native_phrases_are_the_python_ones(texts):
    """``_native.phrases`` (an ASCII text's quoted prose, in Rust) against ``probes.phrases``: the
    quotes' pairing, the length bounds, Python's ASCII whitespace, the prose rule, the tokens."""
    from compactlab.engine.measures.probes import phrases

    assert phrases(texts, NATIVE) == phrases(texts)


@needs_native
@pytest.mark.parametrize("body", ["a" * 5 + " " + "b" * 5, "a" * 5 + " " + "b" * 6, ("word " * 40)[:199] + "x",
                                  ("word " * 40)[:200] + "x", "is\x1cthis prose or not", "\x1c  is this prose now \x1f",
                                  "Words, words. And more!", "one two three four fivesix " + "\x0b" * 5])
def test_the_native_phrases_at_their_bounds(body):
    from compactlab.engine.measures.probes import phrases

    for q in ('"', "'"):
        texts = [f"echo {q}{body}{q} and {q}{body}"]
        assert phrases(texts, NATIVE) == phrases(texts), (q, body)


#: ASCII texts with paths into frameworks' trees and line references (sed ranges, path:line)
PATHS = st.lists(st.one_of(
    st.sampled_from(["django/", "flask/", "_pytest/", "pytest/", "numpy/", "site-packages/", "node_modules/", "x-",
                     "db/", "models", ".py", ".pyc", ".", "/", ":", "12", "1234567", "12345678", "sed", " -n ", "-n",
                     "'", '"', ",", "p", " ", "\t", "\x1c", "\n", "a.rs:", "src/app.py:", "_x", "ext12345:"]),
    st.characters(codec="ascii")), max_size=40).map("".join)


@st.composite
def referring(draw):
    """A text of sed ranges, path:line references and paths into frameworks' trees, each near a
    bound: a number of 0 to 9 digits, an extension of 0 to 10 characters, what comes before a
    folder and after a ``.py``."""
    digits, name = st.from_regex(r"[0-9]{0,9}", fullmatch=True), st.from_regex(r"[a-z0-9_]{0,10}", fullmatch=True)
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 2))
        if kind == 0:
            parts.append("sed" + draw(st.sampled_from([" ", "  ", "\t", "", "\x1c"])) + draw(st.sampled_from(["-n", "-e"]))
                         + draw(st.sampled_from([" ", "", "\n"])) + draw(st.sampled_from(["'", '"', ""])) + draw(digits)
                         + draw(st.sampled_from(["", ",", ",x"])) + draw(digits) + draw(st.sampled_from(["p", "x", "", "p'"])))
        elif kind == 1:
            parts.append(draw(st.sampled_from(["a", "src/app", "-", ".", "/", ""])) + "." + draw(name)
                         + draw(st.sampled_from([":", "", "::"])) + draw(digits) + draw(st.sampled_from(["", "x", " ", "_", "."])))
        else:
            parts.append(draw(st.sampled_from(["", " ", "x", ".", "-", "/", "site-packages/", "node_modules/", "a/"]))
                         + draw(st.sampled_from(["django", "flask", "_pytest", "pytest", "numpy", "djangox"])) + "/"
                         + draw(st.from_regex(r"[a-z_/]{0,12}", fullmatch=True)) + draw(st.sampled_from([".py", ".pyc", ".p", ""]))
                         + draw(st.sampled_from(["", " ", "x", ".", ":", "/"])))
    return draw(st.sampled_from([" ", "; ", "\n", ""])).join(parts)


@needs_native
@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(PATHS, referring()))
def test_the_native_framework_sources_and_line_references_are_python_re_s(text):
    """Rust's reading of two of the index's patterns on ASCII texts (lookbehinds, word boundaries,
    greedy runs and their limits, findall's left-to-right matches that do not overlap) against
    Python's ``re``: the frameworks a text's paths go into, the lines it refers to, in order."""
    from compactlab.engine.measures.probes import _LINE_REFS, own_frameworks, vocabulary

    v = vocabulary()
    assert NATIVE.FrameworkSources(sorted(v.bit_of)).found(text) == own_source_pattern().findall(text)
    assert own_frameworks(text, NATIVE) == own_frameworks(text)
    assert NATIVE.line_refs(text) == [int(a or b) for a, b in _LINE_REFS.findall(text)]
    assert NATIVE.line_refs(text + "é") is None and NATIVE.FrameworkSources(["django"]).found("édjango/a.py") is None


#: texts of paths into frameworks' trees with characters beyond ASCII anywhere (Python's ``\w`` is
#: Unicode's: ``é``, ``٣`` and ``ß`` glue to a name, ``—`` and ``\u00a0`` do not)
_WIDE_SOURCES = st.lists(st.one_of(
    st.sampled_from(["django/", "flask/", "_pytest/", "site-packages/", "node_modules/", "x-", "db/", "a", ".py",
                     ".pyc", "/", "-", " ", "\n", "é", "٣", "ß", "—", "\u00a0", "…", "│", "✓", ":"]),
    st.characters(codec="utf-8", exclude_categories=["Cs"])), max_size=40).map("".join)


@needs_native
@settings(max_examples=examples(500), deadline=None)
@given(_WIDE_SOURCES)
def test_the_native_framework_sources_of_a_text_beyond_ascii_are_python_re_s(text):
    """Beyond ASCII, Rust finds a text's frameworks as Python's ``re`` does, and leaves it to Python
    (None) only where a character beyond ASCII stands where a match is decided."""
    from compactlab.engine.measures.probes import vocabulary

    found = NATIVE.FrameworkSources(sorted(vocabulary().bit_of)).found(text)
    assert found is None or found == own_source_pattern().findall(text)


@needs_native
@pytest.mark.parametrize("text, decided", [
    ("café django/a.py — done", ["django"]), ("│ ├── django/db/x.py ✓", ["django"]), ("… flask/app.py …", ["flask"]), ("flask/app.py…", None),
    ("édjango/a.py", None), ("django/aé.py", None), ("django/a.pyé", None), ("django/a—x.py", None),
    ("ß site-packages/django/a.py", []), ("٣ x-django/a.py", [])])
def test_a_text_beyond_ascii_is_read_in_rust_unless_a_wide_character_decides(text, decided):
    from compactlab.engine.measures.probes import vocabulary

    assert NATIVE.FrameworkSources(sorted(vocabulary().bit_of)).found(text) == decided
    if decided is not None:
        assert own_source_pattern().findall(text) == decided


@needs_native
@pytest.mark.parametrize("text", [
    "a.rs:12x", "a.rs:12 x", "a.py:1234567", "a.py:12345678", "a.py:1234567_", "src/app.py:42.", "x.abcdefgh:3",
    "x.abcdefghi:3", ".py:7", "-.x:9", "sed -n '10,20p' f", "sed -n 5p", "sed -n '5,p'", "sed -n \"5,12345678p\"",
    "sed\t-n\x1c7p", "sed -n '12345678p'", "sed-n 3p", "django/a.py", "x-django/a.py", "site-packages/django/a.py",
    "node_modules/flask/b.py", "django/a.pyc", "django/a.py_", "django/a/b.py.", "/django/x.py django/y.py",
    "djangox/a.py", "_pytest/main.py", "a_pytest/main.py"])
def test_the_native_patterns_at_their_bounds(text):
    """The cases next to each bound of the two patterns, each held to Python's ``re``."""
    from compactlab.engine.measures.probes import _LINE_REFS, vocabulary

    v = vocabulary()
    assert NATIVE.line_refs(text) == [int(a or b) for a, b in _LINE_REFS.findall(text)]
    assert NATIVE.FrameworkSources(sorted(v.bit_of)).found(text) == own_source_pattern().findall(text)


@st.composite
def _broken(draw):
    """A generated transcript, some of its messages dropped or repeated and some tool ids reused:
    every kind of violation the raw history can have, and tool results that name files again."""
    from strategies import transcripts

    msgs = draw(transcripts(max_turns=30))
    for _ in range(draw(st.integers(0, 4))):
        if len(msgs) < 2:  # (drops may leave the first message alone: nothing after it to change)
            break
        i = draw(st.integers(1, len(msgs) - 1))
        what = draw(st.sampled_from(["drop", "repeat", "reuse id", "other ids"]))
        if what == "drop":
            del msgs[i]
        elif what == "repeat":
            msgs.insert(i, msgs[i])
        elif what == "other ids":  # (ids and paths beyond ASCII, as the strings' keys hold them)
            msgs = [orjson.loads(orjson.dumps(m).replace(b"toolu_", "toolu_é　".encode()).replace(
                b".py", "ü.py".encode())) for m in msgs]
        elif isinstance(msgs[i]["content"], list):
            for block in msgs[i]["content"]:
                if block.get("type") in ("tool_use", "tool_result"):
                    block["id" if block["type"] == "tool_use" else "tool_use_id"] = "toolu_00001"
    return msgs


@needs_native
@settings(max_examples=examples(150), deadline=None)
@given(_broken(), st.booleans())
def test_a_streams_raw_baseline_is_the_same_built_in_rust(msgs, keep):
    """``_native.StreamBaseline`` (a baseline with no probes: the replay of a policy that cannot
    lose one, or of a file whose probes are cached; a stream's, or with ``keep`` a loaded
    transcript's) against ``BaselineBuilder``, its reference: every call's messages, size,
    violations and references alike, the messages a stream lets go of included, and a loaded
    transcript's violations each at the first call that has it."""
    from compactlab.transcripts.messages import make_entry

    entries = [make_entry(m, i) for i, m in enumerate(msgs)]
    built = []
    for native in (None, NATIVE):
        builder = baseline.BaselineBuilder(keep=keep, probes=False, native=native)
        assert isinstance(builder.add, MethodType) == (native is None)  # (the native one: Rust's method)
        for e in entries:
            builder.add(e)
        built.append(builder.base)
    python, rust = built
    assert rust.messages == python.messages and rust.chars == python.chars
    assert rust.violation_counts == python.violation_counts and rust.refs == python.refs
    assert rust.probes == python.probes == {} and rust.first_seen == python.first_seen
    assert keep or not rust.first_seen


@needs_native
def test_a_streams_raw_baseline_in_rust_counts_violations_and_references():
    """The property above reaches what it is drawn for: violations and references, in rows."""
    from compactlab.transcripts.messages import make_entry

    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "read", "input": {"path": "x.py"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "b", "name": "read", "input": {"path": "x.py"}}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "b", "name": "edit", "input": {"path": "x.py"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "y"}]},
            {"role": "assistant", "content": "done"},
            # (the same orphan twice, at two messages: each its own violation, first seen at its own call)
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "z", "content": "?"}]},
            {"role": "assistant", "content": "again"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "z", "content": "?"}]},
            {"role": "assistant", "content": "end"}]
    rows = []
    for native in (None, NATIVE):
        builder = baseline.BaselineBuilder(keep=True, probes=False, native=native)
        for i, m in enumerate(msgs):
            builder.add(make_entry(m, i))
        rows.append(builder.base)
    python, rust = rows
    assert rust.messages == python.messages == [1, 3, 4, 6, 8, 10]
    assert rust.refs == python.refs and rust.refs[1] == [(2, 0)]  # (the read of x.py at call 1: the result at 2)
    assert rust.violation_counts == python.violation_counts and sum(map(len, rust.violation_counts.values())) > 0
    assert rust.first_seen == python.first_seen and [(c, v.kind) for c, v in rust.first_seen] == \
        [(2, "orphan_tool_use"), (3, "duplicate_tool_use_id"), (4, "orphan_tool_result"), (5, "orphan_tool_result")]


@st.composite
def _stream_and_contexts(draw):
    """A stream's messages, the batches its baseline reads them in (ahead of the run), and what a
    run shows its tracker at each call: the messages so far, some of them replaced by a copy (its
    content changed: another object, as a layer's) or dropped (as a snip's)."""
    msgs = draw(_broken())
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(msgs))), max_size=4)) | {len(msgs)})
    return msgs, cuts, draw(st.randoms(use_true_random=False))


def _show(context: list, shown: list, *trackers: object) -> None:
    """Each tracker shown ``context``, told where it changed from ``shown`` (the last one)."""
    dirty = next((k for k, (a, b) in enumerate(zip(shown, context)) if a is not b), min(len(shown), len(context)))
    for t in trackers:
        t.update(context, dirty)  # type: ignore[attr-defined]


@needs_native
@settings(max_examples=examples(150), deadline=None)
@given(_stream_and_contexts())
def test_a_streams_run_tracker_takes_the_facts_its_baseline_read(case):
    """A stream's native baseline hands the facts it reads of each message to the run's native
    tracker (``KnownFacts(stream=True)``): whatever the run shows it — the transcript's messages,
    copies a layer made, messages dropped, read a batch ahead — its violations are the Python
    tracker's (the reference), and every message of the transcript it is shown is one whose facts
    it took rather than read again."""
    from compactlab.engine.measures.violations import InvariantTracker, tracker_for
    from compactlab.transcripts.messages import make_entry

    msgs, cuts, rnd = case
    entries = [make_entry(m, i) for i, m in enumerate(msgs)]
    builder = baseline.BaselineBuilder(keep=False, probes=False, native=NATIVE)
    known = builder.base.handed
    assert known is not None and len(known) == 0
    run, ref = tracker_for(NATIVE, known), InvariantTracker()
    state = list(entries)  # (what the run holds in each message's place; None: dropped)
    shown: list = []
    originals = set()
    read = 0
    for cut in cuts:
        for e in entries[read:cut]:  # (the baseline reads a batch ahead of the run)
            builder.add(e)
        for i in range(read, cut):
            if entries[i].role != "assistant":
                continue
            for j in range(i):  # (a layer's edits to the messages so far)
                change = rnd.random()
                if change < 0.05 and j > 0:
                    state[j] = None
                elif change < 0.15 and state[j] is not None:
                    state[j] = make_entry(msgs[j], j)  # (a copy: another object, the same facts)
            context = [e for e in state[:i] if e is not None]
            _show(context, shown, run, ref)
            assert run.total == ref.total and run.counts() == ref.counts()
            assert run.violations() == ref.violations()
            originals |= {id(e) for e in context if e is entries[e.origin]}
            shown = context
        read = cut
    assert known.taken == len(originals)  # (none read again: each taken)
    assert len(known) <= len(entries) - sum(1 for e in entries if id(e) in originals)


@needs_native
@settings(max_examples=examples(150), deadline=None)
@given(_stream_and_contexts())
def test_a_trackers_copies_told_take_their_originals_facts(case):
    """A copy told to the native tracker (``alias``: micro's copies, whose facts are their
    original's) is not read but takes its original's facts — one the tracker was shown, or read from
    an original it never was (a message replaced before its first call), or through a copy of a copy
    — and the violations are the Python tracker's (the reference), call by call; each copy told and
    then shown counted once (``aliased``), one dropped before it is shown not at all."""
    from compactlab.engine.measures.violations import InvariantTracker, tracker_for
    from compactlab.transcripts.messages import make_entry

    msgs, cuts, rnd = case
    run, ref = tracker_for(NATIVE, None), InvariantTracker()
    state = [make_entry(m, i) for i, m in enumerate(msgs)]
    shown: list = []
    told: set[int] = set()
    expected = 0
    for cut in cuts:
        for i in range(cut):
            if state[i] is None or state[i].role != "assistant":
                continue
            for j in range(i):
                change = rnd.random()
                if change < 0.05 and j > 0:
                    state[j] = None
                elif change < 0.4 and state[j] is not None:
                    copy = make_entry(msgs[j], j)  # (another object, the same facts)
                    if change < 0.3:
                        run.alias(copy, state[j])
                        told.add(id(copy))
                    state[j] = copy
            context = [e for e in state[:i] if e is not None]
            _show(context, shown, run, ref)
            assert run.total == ref.total and run.counts() == ref.counts()
            assert run.violations() == ref.violations()
            expected += sum(1 for e in context if id(e) in told)  # (each a new object: past where it changed)
            told.clear()
            shown = context
    assert run.aliased == expected


@needs_native
@settings(max_examples=examples(150), deadline=None)
@given(_stream_and_contexts(), st.randoms(use_true_random=False))
def test_the_native_tracker_logs_each_calls_violations_as_the_python_log_does(case, rnd2):
    """The native tracker's log of a call's violations (``InvariantTracker.log``, what the native
    measures ask): against the raw context's counts, the same introduced and inherited numbers and
    the same table, entry for entry and in order, as ``ViolationLog.record`` (the reference) of the
    Python tracker shown the same contexts — a raw context that has some of them, all, none, or
    more."""
    from collections import Counter

    from compactlab.engine.measures.violations import InvariantTracker, ViolationLog, tracker_for
    from compactlab.transcripts.messages import make_entry

    msgs, cuts, rnd = case
    run, ref = tracker_for(NATIVE, None), InvariantTracker()
    log, table = ViolationLog(), {}
    state = [make_entry(m, i) for i, m in enumerate(msgs)]
    shown: list = []
    for call, cut in enumerate(cuts):
        for j in range(1, cut):
            if rnd.random() < 0.1:
                state[j] = None
        context = [e for e in state[:cut] if e is not None]
        _show(context, shown, run, ref)
        keys = [v.key for v in ref.violations()]
        raw = Counter(rnd2.choice(keys) for _ in range(rnd2.randint(0, len(keys) + 1))) if keys else Counter()
        raw[("orphan_tool_use", "never")] += 1  # (a kind and id the context does not have)
        assert run.log(call, raw, table) == log.record(call, ref, raw)
        assert list(table.items()) == list(log.table.items())
        shown = context
    assert run.log(len(cuts), None, {}) == ViolationLog().record(len(cuts), ref, Counter())  # (None: no raw counts)


@needs_native
def test_a_streams_facts_wait_only_for_a_run_that_takes_them_and_never_too_many():
    """No run's tracker takes them: none is handed over (none held). One that takes them: at most
    ``MOST_WAITING`` wait (the oldest let go), and those before a message taken are let go with it.
    A recording's ``KnownFacts`` is not a stream's."""
    from compactlab.engine.measures.violations import tracker_for
    from compactlab.transcripts.messages import make_entry

    entries = [make_entry({"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}, i)
               for i in range(NATIVE.KnownFacts.MOST_WAITING + 100)]
    alone = baseline.BaselineBuilder(keep=False, probes=False, native=NATIVE)
    for e in entries:
        alone.add(e)
    assert len(alone.base.handed) == 0 and alone.base.handed.taken == 0
    builder = baseline.BaselineBuilder(keep=False, probes=False, native=NATIVE)
    tracker = tracker_for(NATIVE, builder.base.handed)
    for e in entries:
        builder.add(e)
    assert len(builder.base.handed) == NATIVE.KnownFacts.MOST_WAITING
    tracker.update(entries[-3:], 0)  # (the last three: each taken, every one before them let go)
    assert builder.base.handed.taken == 3 and len(builder.base.handed) == 0
    tracker.update(entries[:1], 0)  # (one let go: read from its message)
    assert builder.base.handed.taken == 3 and tracker.total == 0
    with pytest.raises(ValueError, match="a stream's KnownFacts"):
        NATIVE.StreamBaseline(None, entries[0], [], [], {}, {}, dict, None, NATIVE.KnownFacts())


@needs_native
@pytest.mark.parametrize("policy", ["none", "s08"])
def test_a_streamed_replay_hands_its_baselines_facts_to_its_tracker(monkeypatch, tmp_path, policy):
    """A replay of a file streamed with its messages left in it (s08's: its probes read back from
    the cache): the run's tracker takes the facts of the messages the baseline read (none is read
    twice where no layer changed it), and the run is the Python core's."""
    from compactlab.engine.feeds import open_feed, read_ahead
    from compactlab.engine.measures import probe_cache

    made = []

    def kept(native, base, keep=False):
        made.append(base)
        return baseline.stream_baseline(native, base, keep)

    monkeypatch.setattr(read_ahead, "stream_baseline", kept)
    monkeypatch.setattr(probe_cache, "MIN_BYTES", 0)
    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "lazy")
    path = str(SAMPLES / "synth-medium.jsonl")
    replay(open_feed(path), load_policy(policy))  # (its probes found, cached: the next replays stream it)
    assert not made
    runs = []
    for which in ("native", "python"):
        monkeypatch.setenv("COMPACTLAB_CORE", which)
        runs.append(replay(open_feed(path), load_policy(policy)))
    (base,) = made  # (the python core reads no stream natively)
    n = len(load_transcript(path).entries)
    assert base.handed.taken > (n * 9 // 10 if policy == "none" else n // 2)
    native, python = runs
    assert native.to_dict()["calls"] == python.to_dict()["calls"] and native.probe_ledger == python.probe_ledger
    a, b = native.summary.to_dict(), python.summary.to_dict()
    assert a.pop("core") != b.pop("core") and a == b
    assert policy == "none" or native.summary.probes > 0
