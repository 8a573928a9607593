"""One answer, whatever the path (#55 §2): every figure of a run's summary is the same whether it
came from `replay`, `compare` (--jobs 1 and 2), `check`, tune's evaluation of the same point (its
corpus and its share workers), the library calls (`jobs.replay.replay_files`, `compactlab.replay`), the engine's call on
a streamed or a loaded feed, or `inspect` where it shows it; with the probe and price caches cold,
warm, or written by another job first; and on a Dask cluster for a sample.

Table-driven: each path is a function that gives the figures of every policy's run on one
recording; a difference is named by its path, its policy and its field. The default suite takes
a sample of recordings (the samples shipped, and a few shared ones); ``-m slow`` (CI runs it)
takes every shared recording."""

from __future__ import annotations

import itertools
import math
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from helpers import ROOT, SAMPLES, SHARED, compacting_recording

PY = shlex.quote(sys.executable)
POLICIES = {  # what a user names: a seed design, a harness's preset, a framework's code, a step of each kind
    "seed": "s08",
    "harness": "claude-code",
    "framework": "langchain-clear-tool-uses",
    "python step": "py:custom_steps:keep_ends",
    "process step": f"cmd:{PY} {shlex.quote(str(ROOT / 'examples' / 'step_process.py'))}",
}
#: the figures of a run's summary held equal on every path (those a path gives)
FIELDS = ("calls", "cost_usd", "raw_cost_usd", "recorded_cost_usd", "tokens_total", "raw_tokens_total", "recall",
          "probes", "probes_kept", "retention", "refs", "refs_retained", "overflows", "raw_overflows", "violations_introduced",
          "violations_inherited", "snipped", "micro_compacted", "persisted", "summaries", "reactive", "manual",
          "custom", "peak_tokens", "final_tokens", "reduction", "cache_read_tokens", "cache_write_tokens",
          "cost_usd_nocache", "raw_cost_usd_nocache", "recorded_input_cost_usd", "billed_cost_usd", "window_tokens",
          "window_source", "calibration", "price_model", "priced_by", "probe_kinds", "probes_recoverable",
          "recoverable", "cache_expired_calls", "summary_cost_usd", "summary_cache_read_tokens", "fingerprint")
#: what tune's evaluation calls them (corpus.tune.totals)
TUNE_NAMES = {"violations": "violations_introduced", "cost_usd": "cost_usd", "raw_cost_usd": "raw_cost_usd",
              "recall": "recall", "retention": "retention", "probes": "probes", "overflows": "overflows"}

Figures = dict[str, dict[str, object]]  # policy name -> field -> value


def _figures(summary: dict) -> dict[str, object]:
    got = {k: summary[k] for k in FIELDS if k in summary}
    if isinstance(got.get("calibration"), dict):  # (results.csv says where it came from: its source)
        got["calibration"] = got["calibration"].get("source")
    return got


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=0,
                                                                                              abs_tol=5e-7)
    return a == b


class Paths:
    """The paths, each ``name -> (function(recording) -> Figures)``, over one cache folder a test
    sets as it goes (cold: a new one; warm: the one before)."""

    def __init__(self, cli: Callable, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.cli, self.tmp, self.monkeypatch, self.n = cli, tmp, monkeypatch, itertools.count()

    def cache(self, fresh: bool) -> None:
        """A new cache folder (cold), or the one in use (warm; written by the paths before)."""
        if fresh:
            self.monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(self.tmp / f"cache{next(self.n)}"))

    def out(self) -> Path:
        return self.tmp / f"out{next(self.n)}"

    def replay(self, path: str) -> Figures:
        got = {}
        for policy in POLICIES.values():
            out = self.out()
            r = self.cli("replay", path, "-p", policy, "-o", out, "-q")
            assert r.exit_code == 0, (policy, r.stderr)
            summary = orjson.loads((out / "summary.json").read_bytes())["summary"]
            got[summary["policy"]] = _figures(summary)
        return got

    def compare(self, path: str, jobs: str = "1", *more: str) -> Figures:
        out = self.out()
        r = self.cli("compare", path, *itertools.chain.from_iterable(("-p", p) for p in POLICIES.values()),
                     "--jobs", jobs, "--charts", "none", "-o", out, "-q", *more)
        assert r.exit_code == 0, r.stderr
        runs = orjson.loads((out / "results.json").read_bytes())["runs"]
        return {row["policy"]: _figures(row) for row in runs if row["policy"] != "none"}

    def compare_corpus(self, path: str) -> Figures:
        """compare --jobs 2 of a folder of copies of the recording, enough of them that the workers
        read the files themselves (``jobs/cluster.py``'s ``LocalWorkers``): every copy's figures
        alike (else a copy's own policy name says which)."""
        from compactlab.jobs import cluster

        folder = self.tmp / f"corpus{next(self.n)}"
        folder.mkdir()
        for i in range(cluster.FILES_PER_WORKER * 2):
            shutil.copyfile(path, folder / f"{i:02d}-{Path(path).name}")
        out = self.out()
        with self.monkeypatch.context() as m:
            m.setattr(cluster, "run_in_parts", lambda *a, **k: pytest.fail("the command read the files"))
            r = self.cli("compare", folder, *itertools.chain.from_iterable(("-p", p) for p in POLICIES.values()),
                         "--jobs", "2", "--charts", "none", "-o", out, "-q")
        assert r.exit_code == 0, r.stderr
        got: Figures = {}
        for row in orjson.loads((out / "results.json").read_bytes())["runs"]:
            if row["policy"] != "none":
                figures = _figures(row)
                name = row["policy"] if got.get(row["policy"], figures) == figures else f"{row['transcript']}'s"
                got.setdefault(name, figures)
        assert len(got) == len(POLICIES), sorted(got)
        return got

    def check(self, path: str) -> Figures:
        baseline = self.out().with_suffix(".json")
        r = self.cli("check", path, *itertools.chain.from_iterable(("-p", p) for p in POLICIES.values()),
                     "--baseline", baseline, "--update-baseline", "-q")
        assert r.exit_code == 0, r.stderr
        records = orjson.loads(baseline.read_bytes())["records"]
        return {rec["policy"]: _figures(rec["metrics"]) for rec in records if rec["policy"] != "none"}

    def library(self, path: str) -> Figures:
        from compactlab import load_policy
        from compactlab.jobs.replay import ReplaySettings, replay_files

        got = {}
        for policy in POLICIES.values():
            done = replay_files([path], ReplaySettings(policy=load_policy(policy), out_dir=str(self.out())))
            [run] = done.runs
            got[run.summary.policy] = _figures(run.summary.to_dict())
        return got

    def public(self, path: str) -> Figures:
        """``compactlab.replay`` of the loaded transcript, as the library's first example calls it
        (no calibration, no prices given: it fitted none, where the command line fits the usage)."""
        from compactlab import load_policy, load_transcript, replay

        transcript = load_transcript(path)
        got = {}
        for policy in POLICIES.values():
            run = replay(transcript, load_policy(policy))
            got[run.summary.policy] = _figures(run.summary.to_dict())
        return got

    def engine(self, path: str, stream: bool) -> Figures:
        """The engine's own call on a streamed (where the format streams) or a loaded feed, with the
        calibration and prices the jobs give it."""
        from compactlab import load_policy, load_transcript
        from compactlab.engine.feeds import open_feed
        from compactlab.engine.loop import replay
        from compactlab.jobs.base import calibrations_for

        [calibration] = calibrations_for([load_transcript(path)], None)
        got = {}
        for policy in POLICIES.values():
            p = load_policy(policy)
            run = replay(open_feed(path, stream=stream, probes=p.acts), p, calibration=calibration)
            got[run.summary.policy] = _figures(run.summary.to_dict())
        return got

    def tune(self, path: str, shares: bool) -> Figures:
        """tune's evaluation of each policy as a point: by compare's workers (a cluster, or no fork),
        or by the share workers it uses by default."""
        from compactlab import load_policy
        from compactlab.corpus.shares import RunSettings, SharePool
        from compactlab.corpus.tune import corpus_evaluator, share_evaluator
        from compactlab.jobs.base import Settings, calibrations_for, load_all, prices_for
        from compactlab.jobs.tune import corpus_members

        settings = Settings(jobs=2)
        policies = [load_policy(p) for p in POLICIES.values()]
        if shares:
            with SharePool(corpus_members([path], settings), 2, RunSettings(False, ("stub", None), None, None,
                                                                                None)) as pool:
                scores = share_evaluator(pool)(policies)
        else:
            loaded = load_all([path], settings)
            scores = corpus_evaluator(loaded, n_jobs=2, prices=prices_for(loaded, None, settings.prices),
                                      calibrations=calibrations_for(loaded, None))(policies)
        got = {}
        for policy, score in zip(policies, scores):
            assert isinstance(score, dict), score
            got[policy.name] = {TUNE_NAMES[k]: v for k, v in score.items() if k in TUNE_NAMES}
        return got

    def inspect(self, path: str) -> Figures:
        """What inspect shows of every run: its calls, and the recorded cost where there is one."""
        r = self.cli("inspect", path, "--format", "json")
        assert r.exit_code == 0, r.stderr
        doc = orjson.loads(r.stdout)
        shown = {k: doc[k] for k in ("calls", "recorded_cost_usd") if doc.get(k) is not None}
        return {name: shown for name in self.names}

    def read_ahead(self, path: str, setting: str = "1") -> Figures:
        self.monkeypatch.setenv("COMPACTLAB_READ_AHEAD", setting)
        try:
            return self.replay(path)
        finally:
            self.monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")

    names: list[str] = []


def _differences(reference: Figures, got: Figures, path: str) -> list[str]:
    out = []
    for policy, figures in reference.items():
        if policy not in got:
            out.append(f"{path}: no run of {policy}")
            continue
        for field, value in got[policy].items():
            if field in figures and not _same(figures[field], value):
                out.append(f"{path}: {policy} {field} {value!r}, where replay (cold) says {figures[field]!r}")
    return out


def _all_paths(paths: Paths, recording: str, dask: bool = False) -> list[str]:
    """Every path against `replay` with a cold cache: the differences, by path, policy and field."""
    paths.cache(fresh=True)
    reference = paths.replay(recording)
    paths.names = list(reference)
    assert set(reference) >= {"s08", "claude-code", "langchain-clear-tool-uses", "keep_ends", "step_process"}
    table: list[tuple[str, bool, Callable[[], Figures]]] = [  # (path, a new cache first?, what it gives)
        ("compare --jobs 2, cache written by replay", False, lambda: paths.compare(recording, "2")),
        ("replay, cache written by compare", False, lambda: paths.replay(recording)),
        ("compare --jobs 1, cold", True, lambda: paths.compare(recording, "1")),
        ("compare --jobs 2 of a corpus its workers read, cold", True, lambda: paths.compare_corpus(recording)),
        ("replay after compare, warm", False, lambda: paths.replay(recording)),
        ("check, cold", True, lambda: paths.check(recording)),
        ("tune's evaluation (share workers), cache written by check", False, lambda: paths.tune(recording, True)),
        ("tune's evaluation (compare's workers), cold", True, lambda: paths.tune(recording, False)),
        ("library replay_files, cold", True, lambda: paths.library(recording)),
        ("library compactlab.replay of the loaded transcript, cold", True, lambda: paths.public(recording)),
        ("engine, streamed feed", True, lambda: paths.engine(recording, True)),
        ("engine, loaded feed", False, lambda: paths.engine(recording, False)),
        ("inspect", False, lambda: paths.inspect(recording)),
        # read ahead where it streams, or loaded with its messages left in the file (a recording with usage)
        ("replay, its lines read again where read (COMPACTLAB_READ_AHEAD=1)", True, lambda: paths.read_ahead(recording)),
        # (the probes now in the cache: streamed in-process with the messages left in the file)
        ("replay, its messages left in the file, warm (COMPACTLAB_READ_AHEAD=lazy)", False,
         lambda: paths.read_ahead(recording, "lazy")),
    ]
    if dask:
        table.append(("compare on a Dask LocalCluster", True, lambda: _on_dask(paths, recording)))
    problems = []
    for name, fresh, run in table:
        paths.cache(fresh)
        problems += _differences(reference, run(), name)
    return problems


def _on_dask(paths: Paths, recording: str) -> Figures:
    distributed = pytest.importorskip("distributed", reason="dask is an optional extra")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as c:
        return paths.compare(recording, "2", "--executor", f"dask://{c.scheduler_address}")


@pytest.fixture
def paths(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTLAB_READ_AHEAD", "0")  # (the in-process stream; the reader process has its own test)
    return Paths(cli, tmp_path, monkeypatch)


def _document(tmp_path: Path) -> str:
    """A chat document over the probe cache's threshold (a document format: read whole), whose
    tool results name what later calls use: the format whose cached probes a replay dropped."""
    from helpers import chat_document

    path = chat_document(tmp_path / "chat.json", 60, "pad line\n" * 200)
    assert Path(path).stat().st_size > 64 << 10
    return path


@pytest.mark.parametrize("recording", [
    "generated", "manual-compact.jsonl", "document", "recorded",
    pytest.param("synth-medium.jsonl", marks=pytest.mark.slow)])  # (27 s: CI runs it with pytest -m slow)
def test_every_path_gives_the_same_figures_on_the_samples(paths, tmp_path, recording):
    """(``generated``: 50 calls that stream and that every policy compacts, Dask's sample;
    ``recorded``: the same with replies recorded with their usage, a file loaded whole to calibrate
    on it)"""
    path = _document(tmp_path) if recording == "document" else str(SAMPLES / recording)
    if recording in ("generated", "recorded"):
        path = compacting_recording(tmp_path / f"{recording}.jsonl", usage=recording == "recorded")
    problems = _all_paths(paths, path, dask=recording == "generated")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("recording", ["synth-long.jsonl", "synth-medium.jsonl", "manual-compact.jsonl"])
def test_where_no_compaction_fits_is_the_same_for_every_policy_and_is_nones_own(recording):
    """Every run says where no compaction overflows (``raw_overflows``, what the one rule of the
    recommenders and check's warning read): no compaction's own overflows, whatever the policy."""
    from compactlab import load_policy, load_transcript, replay

    t = load_transcript(str(SAMPLES / recording))
    none = replay(t, load_policy("none")).summary
    assert none["raw_overflows"] == none["overflows"]
    for name in ("s08", "claude-code", "observation-masking"):
        assert replay(t, load_policy(name)).summary["raw_overflows"] == none["overflows"], name


def _shared(pattern: str = "*") -> list[Path]:
    root = SHARED / "transcripts"
    if not root.is_dir():
        return []
    found = [p for p in sorted(root.rglob(pattern)) if p.is_file() and p.suffix in (".json", ".jsonl", ".traj")
             and not p.name.endswith(".truth.json") and "subagents" not in p.parts and p.name not in (
                 "MANIFEST.md", "README.md", "LICENSE.md")]
    return found


#: a sample of the shared recordings for the default suite: a whole-document format whose probes
#: are cached, a Claude Code session with cache breaks, a Gemini CLI session
SAMPLE = ("mini-swe-agent__deepseek-chat__django__django-11910.traj.json", "tool_heavy.jsonl",
          "test_conversation_gemini.2026-03-27.json")


# (mini-swe-agent's document, 10 s, under -m slow: the chat document above is this suite's document format)
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name.endswith(".traj.json") else name
                                  for name in SAMPLE])
def test_every_path_gives_the_same_figures_on_a_sample_of_the_shared_recordings(paths, shared_transcripts, name):
    [path] = [p for p in _shared() if p.name == name] or [None]
    if path is None:
        pytest.skip(f"{name} is not among the shared recordings")
    problems = _all_paths(paths, str(path))
    assert not problems, "\n".join(problems)


def _loads(path: Path) -> bool:
    from compactlab import load_transcript
    from compactlab.errors import CompactlabError

    try:
        return bool(load_transcript(str(path)).call_positions)
    except CompactlabError:
        return False


@pytest.mark.slow
def test_every_path_gives_the_same_figures_on_every_shared_recording(paths, shared_transcripts):
    problems = []
    recordings = [p for p in _shared() if _loads(p)]
    assert len(recordings) >= 10
    for path in recordings:
        problems += [f"{path.name}: {p}" for p in _all_paths(paths, str(path))]
    assert not problems, "\n".join(problems)


def test_a_difference_is_named_by_its_path_its_policy_and_its_field():
    """The test itself can fail: a figure off by a cent, a count off by one, a run missing."""
    reference = {"s08": {"cost_usd": 1.25, "probes": 10}}
    assert _differences(reference, {"s08": {"cost_usd": 1.26, "probes": 10}}, "check") == [
        "check: s08 cost_usd 1.26, where replay (cold) says 1.25"]
    assert _differences(reference, {"s08": {"cost_usd": 1.25, "probes": 9}}, "tune") == [
        "tune: s08 probes 9, where replay (cold) says 10"]
    assert _differences(reference, {}, "compare") == ["compare: no run of s08"]
    assert _differences(reference, {"s08": {"cost_usd": 1.2500001}}, "x") == []



def _none_costs(cli, tmp_path: Path, recordings: list[Path]) -> list[str]:
    out = []
    for i, path in enumerate(recordings):
        r = cli("replay", path, "-p", "none", "-o", tmp_path / f"n{i}", "-q")
        assert r.exit_code == 0, r.stderr
        s = orjson.loads((tmp_path / f"n{i}" / "summary.json").read_bytes())["summary"]
        if s["cost_usd"] != s["raw_cost_usd"] or s["overflows"] != s["raw_overflows"]:
            out.append(f"{path.name}: none costs ${s['cost_usd']} against no compaction's ${s['raw_cost_usd']} "
                       f"(overflows {s['overflows']}, raw {s['raw_overflows']})")
    return out


def test_none_costs_what_no_compaction_costs_on_the_samples(cli, tmp_path):
    """(#55) `none` is no compaction: the same cost and the same overflows, whatever the recorded
    cache events (a Codex rollout's none cost $8.1708 against $8.0199)."""
    problems = _none_costs(cli, tmp_path, sorted(SAMPLES.glob("*.jsonl")))
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_none_costs_what_no_compaction_costs_on_every_shared_recording(cli, tmp_path, shared_transcripts):
    problems = _none_costs(cli, tmp_path, [p for p in _shared() if _loads(p)])
    assert not problems, "\n".join(problems)
