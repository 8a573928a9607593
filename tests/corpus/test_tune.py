"""compactlab tune (#20 §2): Optuna's search for the front of cost saving against recall."""

from __future__ import annotations

import csv
import json

import pytest
from hypothesis import given, settings, strategies as st

from compactlab import load_policy
from compactlab.errors import PolicyError, UsageError
from compactlab.corpus.trials import Point
from compactlab.corpus.tune import pareto, parse_objectives, parse_space
from compactlab.reports.tune_report import front_files
from helpers import SAMPLES, examples

CORPUS = [SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl"]
SPACE = ["--space", "micro.keep_recent=1:12", "--space", "micro.min_chars=0:3000"]


def test_the_space_is_checked_against_the_schema():
    params = parse_space(["summary.trigger=40000:200000", "micro.keep_recent=1:10", "snip.pair_safe=true|false",
                          "size.chars_per_token=2:6:log"], "s08", [])
    assert [(p.key, p.kind) for p in params] == [("summary.trigger", "int"), ("micro.keep_recent", "int"),
                                                 ("snip.pair_safe", "choice"), ("size.chars_per_token", "float")]
    assert params[3].log and params[2].choices == (True, False)
    for bad, message in [("summary.triger=1:2", "unknown key"), ("summary.trigger=0:100", "out of the schema's range"),
                         ("micro.keep_recent=1.5:3", "whole numbers"), ("summary.trigger=9:3", "LO must be below HI"),
                         ("size.chars_per_token=0:4:log", "log scale needs LO > 0"), ("summary.trigger", "expected"),
                         ("size.chars_per_token=1:500", "out of the schema's range")]:
        with pytest.raises((PolicyError, UsageError), match=message):
            parse_space([bad], "s08", [])
    with pytest.raises(PolicyError) as exc:
        parse_space(["micro.keep_recnt=1:3"], "s08", [])
    assert exc.value.hint == "did you mean micro.keep_recent? (compactlab policies show s08 lists every key)"
    assert parse_objectives("cost, recall") == ["cost", "recall"]
    with pytest.raises(UsageError):
        parse_objectives("cost,speed")


def test_the_front_is_the_feasible_undominated_points():
    """Optuna's best_trials, with the constraints honoured; one point per score, best cost first."""
    import optuna

    from compactlab.corpus.tune import points_of

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize", "maximize"])
    for cost, recall, ok in [(0.5, 0.5, True), (0.6, 0.4, True), (0.4, 0.4, True), (0.9, 0.9, False), (0.5, 0.5, True)]:
        trial = study.ask()
        trial.suggest_int("x", 0, 1)
        trial.set_constraint("violations", 0.0 if ok else 1.0)
        for k, v in {"cost": cost, "recall": recall, "cost_usd": 1 - cost, "violations": 0, "overflows": 0}.items():
            trial.set_user_attr(k, v)
        study.tell(trial, [cost, recall])
    points = points_of(study, [], ["cost", "recall"])
    assert [p.number for p in pareto(study, points, ["cost", "recall"])] == [1, 0]
    # a trial whose record lost a score (a damaged study) is left out, said
    trial = study.ask()
    trial.suggest_int("x", 0, 1)
    trial.set_constraint("violations", 0.0)
    trial.set_user_attr("cost", 0.99)
    study.tell(trial, [0.99, 0.99])
    refused: list[str] = []
    assert [p.number for p in points_of(study, [], ["cost", "recall"], refused)] == [0, 1, 2, 3, 4]
    assert refused == ["trial 5: no cost_usd, overflows, recall, violations recorded (a damaged study): left out"]


def test_a_point_the_base_or_another_point_covers_is_not_on_the_front():
    """A real tune's front showed a point that the base as it is beat on cost, recall and retention
    (Optuna's front is of the trials: the base is no trial): a point that improves on nothing a
    user reads of it. It is left out, as one another front point covers would be; a point better
    on any of them stays, however little (0.07 cents cheaper: the one rule orders by cost exactly)."""
    import optuna

    from compactlab.corpus.trials import Point
    from compactlab.corpus.tune import covers, points_of

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize", "maximize"])
    raw = 24.50
    rows = [  # (cost in dollars, recall, retention): the real front's five points
        (6.590776, 0.913636, 0.836066), (7.723383, 0.934091, 0.868852), (7.724046, 0.973864, 0.885246),
        (8.926652, 0.977273, 0.885246), (9.035137, 0.988636, 0.918033)]
    for cost, recall, retention in rows:
        trial = study.ask()
        trial.suggest_int("x", 0, 1)
        trial.set_constraint("violations", 0.0)
        scores = {"cost": 1 - cost / raw, "recall": recall, "retention": retention, "cost_usd": cost,
                  "violations": 0, "overflows": 0}
        for k, v in scores.items():
            trial.set_user_attr(k, v)
        study.tell(trial, [scores["cost"], recall])
    points = points_of(study, [], ["cost", "recall"])
    assert [p.number for p in pareto(study, points, ["cost", "recall"])] == [0, 1, 2, 3, 4]
    base = Point(-1, {}, {"cost": 1 - 8.77 / raw, "recall": 0.988636, "retention": 0.901639, "cost_usd": 8.77})
    front = pareto(study, points, ["cost", "recall"], base)
    assert [p.number for p in front] == [0, 1, 2, 4]  # (3: the base cheaper, and above it in recall and retention)
    assert not any(covers(q, p, ["cost", "recall"]) for p in front for q in [*front, base])
    assert covers(base, points[3], ["cost", "recall"]) and not covers(base, points[4], ["cost", "recall"])
    # a point the same but for more retention covers it; one worse in retention does not
    better = Point(9, {}, {**points[1].scores, "retention": 0.9})
    assert covers(better, points[1], ["cost", "recall"]) and not covers(points[1], better, ["cost", "recall"])
    # an infeasible base covers nothing
    assert len(pareto(study, points, ["cost", "recall"], Point(-1, {}, base.scores, feasible=False))) == 5


def tune(cli, out, *extra, trials: int = 6, chart: bool = False):
    return cli("tune", *CORPUS, "-p", "observation-masking", *SPACE, "--trials", str(trials), "--jobs", "1",
               "--out", out, "--chart" if chart else "--no-chart", *extra)


def test_a_tune_writes_the_front_its_policies_and_the_chart(cli, tmp_path):
    r = tune(cli, tmp_path / "t", chart=True)
    assert r.exit_code == 0, r.output
    assert "Pareto front of observation-masking" in r.stdout and "The front has" in r.stdout
    out = tmp_path / "t"
    assert {"study.journal", "front.csv", "front.json"} <= {p.name for p in out.iterdir()}
    svg = (out / "charts" / "tune.svg").read_bytes()
    assert b"<svg xmlns" in svg and b"the recall floor at " in svg  # (what the recommendation held points to)
    doc = json.loads((out / "front.json").read_text())
    assert doc["trials"] == 6 and doc["front"] and doc["objectives"] == ["cost", "recall"]
    rows = list(csv.DictReader((out / "front.csv").open()))
    assert len(rows) == len(doc["front"])
    for i, row in enumerate(rows):  # every front point is a policy to replay, with its values
        policy = load_policy(str(out / "policies" / f"front-{i + 1:02d}.toml"))
        assert policy.micro.keep_recent == int(row["micro.keep_recent"]) and 1 <= policy.micro.keep_recent <= 12
        assert policy.micro.min_chars == int(row["micro.min_chars"]) and policy.micro.keep_by == "turns"
    # (the files said as written: one point's policy by its name, several as a range, never "01..01")
    assert front_files(len(rows)) in " ".join(r.stderr.split()) and "front-01..01" not in r.stderr, r.stderr
    assert front_files(1) == "policies/front-01.toml" and front_files(3) == "policies/front-01..03.toml"


def test_the_study_journal_writes_optunas_lines_and_is_made_durable_once_a_trial(cli, tmp_path, monkeypatch):
    """The journal appends each log line as Optuna's own file backend does (the same bytes, its
    lock), but fsyncs once a trial is told, not at every line (a trial is some 17 lines)."""
    import os

    from optuna.storages.journal import JournalFileBackend

    from compactlab.corpus.study import journal_of

    logs = [[{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}],
            [{"op_code": 5, "trial_id": 0, "user_attr": {"é": "naïve ✓", "n": [1, 2.5, None]}}, {"op_code": 6}]]
    stock, ours = JournalFileBackend(str(tmp_path / "stock")), journal_of(str(tmp_path / "ours"))
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    for batch in logs:
        stock.append_logs(batch)
    assert len(synced) == len(logs)  # (Optuna's: one a line's append)
    synced.clear()
    for batch in logs:
        ours.append_logs(batch)
    assert not synced and (tmp_path / "ours").read_bytes() == (tmp_path / "stock").read_bytes()
    ours.durable()
    ours.durable()  # (nothing appended since: nothing to sync)
    assert len(synced) == 1
    assert list(ours.read_logs(0)) == [log for batch in logs for log in batch]
    synced.clear()
    r = tune(cli, tmp_path / "t", trials=5)
    assert r.exit_code == 0, r.output
    assert 5 <= len(synced) <= 6  # (one a trial told, and what the end wrote)


def test_the_same_seed_gives_the_same_front_and_a_study_resumes(cli, tmp_path):
    assert tune(cli, tmp_path / "a", "--seed", "3").exit_code == 0
    assert tune(cli, tmp_path / "b", "--seed", "3").exit_code == 0
    assert (tmp_path / "a" / "front.csv").read_text() == (tmp_path / "b" / "front.csv").read_text()
    again = tune(cli, tmp_path / "a")
    assert again.exit_code == 2 and "holds a study" in again.stderr and "--resume" in again.stderr
    more = cli("tune", *CORPUS, "-p", "observation-masking", *SPACE, "--trials", "9", "--jobs", "1", "--out", tmp_path / "a",
               "--resume", "--no-chart")
    assert more.exit_code == 0, more.output
    assert json.loads((tmp_path / "a" / "front.json").read_text())["trials"] == 9


def test_a_candidate_that_breaks_tool_pairs_never_joins_the_front(cli, tmp_path):
    r = cli("tune", SAMPLES / "synth-long.jsonl", "-p", "s08", "--set", "snip.max_messages=10",
            "--space", "snip.pair_safe=true|false", "--trials", "4", "--jobs", "1", "--out", tmp_path / "p",
            "--objective", "cost", "--max-violations", "6", "--no-chart")  # (s08's own summary leaves 6 here; the naive snip 347)
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "p" / "front.json").read_text())
    # (the one value that fits is the base's own: a point with the base's very figures improves on
    # nothing, so the front is left empty and the base kept, said so)
    assert not any(row["snip.pair_safe"] is False or row["violations"] > 6 for row in doc["front"])
    assert doc["front"] or "improves on s08 as it is" in doc["recommendation"], doc["recommendation"]
    import optuna

    study = _study(tmp_path / "p" / "study.journal")
    tried = {t.params["snip.pair_safe"]: t.constraints["violations"] > 0 for t in study.trials}
    assert tried == {True: False, False: True}  # both tried; the naive snip rejected, though it costs less


def test_a_tune_on_a_dask_cluster_finds_the_local_front(cli, tmp_path, monkeypatch):
    """The same front as on local workers, the scheduler reached once for every trial."""
    distributed = pytest.importorskip("distributed", reason="dask is an optional extra")
    assert tune(cli, tmp_path / "local", trials=3).exit_code == 0
    connected = []
    real = distributed.Client
    monkeypatch.setattr(distributed, "Client", lambda *a, **k: connected.append(a) or real(*a, **k))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        r = tune(cli, tmp_path / "dask", "--executor", f"dask://{cluster.scheduler_address}", trials=3)
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "dask" / "front.csv").read_text() == (tmp_path / "local" / "front.csv").read_text()
    assert len(connected) == 1


def test_the_same_seed_asks_the_same_trials_whatever_the_workers(cli, tmp_path):
    """A batch is ``tune.BATCH`` trials on every machine, not as many as the workers: --jobs 1 and
    --jobs 3 (and a machine's core count) give the same study and the same front."""
    fronts = []
    for jobs in ("1", "3"):
        r = cli("tune", *CORPUS, "-p", "observation-masking", *SPACE, "--trials", "16", "--jobs", jobs,
                "--out", tmp_path / jobs, "--no-chart", "--seed", "7")
        assert r.exit_code == 0, r.output
        fronts.append(((tmp_path / jobs / "front.csv").read_bytes(),
                       [(t.params, t.values) for t in _study(tmp_path / jobs / "study.journal").trials]))
    assert fronts[0] == fronts[1] and len(fronts[0][1]) == 16  # (past the sampler's 10 random ones)


def test_an_interrupted_tune_keeps_its_trials_and_resumes(cli, tmp_path, monkeypatch):
    """Ctrl-C during a batch: the finished trials stay in the study, the cut ones are failed (not
    left running), the front so far is written, exit 130; --resume reaches --trials."""
    import compactlab.jobs.tune as tune_module  # where the job calls it

    real = tune_module.share_evaluator

    def stopping(*args, **kwargs):
        evaluate = real(*args, **kwargs)
        calls = {"n": 0}

        def once_then_stop(policies):
            calls["n"] += 1
            if calls["n"] == 3:  # the base, one batch, then Ctrl-C in the next
                raise KeyboardInterrupt
            return evaluate(policies)

        return once_then_stop

    monkeypatch.setattr(tune_module, "share_evaluator", stopping)
    r = tune(cli, tmp_path / "i")
    assert r.exit_code == 130 and "continue with --resume" in r.stderr
    from compactlab.corpus.tune import BATCH

    assert json.loads((tmp_path / "i" / "front.json").read_text())["trials"] == BATCH  # the one batch told
    import optuna

    study = _study(tmp_path / "i" / "study.journal")
    assert {t.state.name for t in study.trials} == {"COMPLETE", "FAIL"}
    monkeypatch.setattr(tune_module, "share_evaluator", real)
    assert tune(cli, tmp_path / "i", "--resume").exit_code == 0
    assert json.loads((tmp_path / "i" / "front.json").read_text())["trials"] == 6


# ---- the study is safe to resume, share and damage (issue 25 §3)

def _study(path):
    import optuna

    from compactlab.corpus.study import storage_of

    return optuna.load_study(study_name="compactlab-tune", storage=storage_of(str(path)))


def test_resume_with_another_definition_is_refused_saying_what_differs(cli, tmp_path):
    out = tmp_path / "s"
    assert tune(cli, out, trials=2).exit_code == 0
    before = (out / "study.journal").read_bytes()
    cases = [
        (["--space", "micro.keep_recent=1:5"], "--space"),
        (["--set", "micro.keep_recent=4"], "--set"),
        (["--objective", "cost"], "--objective"),
        (["--max-violations", "3"], "--max-violations"),
    ]
    for extra, word in cases:
        r = cli("tune", *CORPUS, "-p", "observation-masking", *(extra if word == "--space" else [*SPACE, *extra]),
                "--trials", "3", "--jobs", "1", "--out", out, "--resume", "--no-chart")
        assert r.exit_code == 2 and "not the study in" in r.stderr and word in r.stderr, (word, r.stderr)
    r = cli("tune", CORPUS[0], "-p", "observation-masking", *SPACE, "--trials", "3", "--jobs", "1", "--out", out,
            "--resume", "--no-chart")
    assert r.exit_code == 2 and "transcripts (their content): 0 not in the study, 1 of the study's missing" in r.stderr
    r = cli("tune", *CORPUS, "-p", "s08", *SPACE, "--trials", "3", "--jobs", "1", "--out", out, "--resume", "--no-chart")
    assert r.exit_code == 2 and "base policy: 'observation-masking' in the study, 's08' now" in r.stderr
    assert (out / "study.journal").read_bytes() == before  # a refused resume changes nothing
    assert len(_study(out / "study.journal").trials) == 2


def _damage(path, kind):
    import os

    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    elif kind == "symlink":
        elsewhere = path.parent.parent / "elsewhere.journal"
        elsewhere.write_bytes(b"")
        path.symlink_to(elsewhere)


@pytest.mark.parametrize("kind", ["fifo", "dir", "symlink"])
@pytest.mark.parametrize("how", [["--resume"], ["--force"]])
def test_a_special_study_file_is_refused_and_never_modified(cli, tmp_path, kind, how):
    import os

    out = tmp_path / "o"
    out.mkdir()
    journal = out / "study.journal"
    _damage(journal, kind)
    snapshot = os.lstat(journal)
    r = tune(cli, out, *how, trials=2)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"error: {journal}: ") and "not used, not changed" in r.stderr and "Traceback" not in r.stderr
    after = os.lstat(journal)
    assert (after.st_mode, after.st_ino, after.st_mtime_ns) == (snapshot.st_mode, snapshot.st_ino, snapshot.st_mtime_ns)
    if kind == "symlink":
        assert (tmp_path / "elsewhere.journal").read_bytes() == b""
    assert not (out / "front.csv").exists()


def test_a_second_tune_on_the_same_study_is_refused_while_one_runs(cli, tmp_path):
    import fcntl

    out = tmp_path / "l"
    assert tune(cli, out, trials=2).exit_code == 0
    with open(out / "study.lock", "r+") as held:  # another tune holds it
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = tune(cli, out, "--resume", trials=4)
        assert r.exit_code == 2 and "another tune is running on this study" in r.stderr
    assert len(_study(out / "study.journal").trials) == 2
    assert tune(cli, out, "--resume", trials=4).exit_code == 0
    assert len([t for t in _study(out / "study.journal").trials if t.state.name == "COMPLETE"]) == 4  # never more


@pytest.mark.parametrize("extra, message", [
    (["--space", "snip.pair_safe=||"], "no choice between the |"),
    (["--executor", "dask://127.0.0.1:9"], "cannot reach the Dask scheduler"),
])
def test_a_tune_that_fails_before_its_first_trial_leaves_nothing(cli, tmp_path, monkeypatch, extra, message):
    if "--executor" in extra:
        pytest.importorskip("distributed", reason="dask is an optional extra")
        import compactlab.corpus.compare as compare

        monkeypatch.setattr(compare, "DASK_CONNECT_TIMEOUT", "1s")  # nothing listens there: no need to wait 10
    out = tmp_path / "new" / "f"
    r = cli("tune", *CORPUS, "-p", "observation-masking", *SPACE, *extra, "--trials", "2", "--jobs", "1",
            "--out", out, "--no-chart")
    assert r.exit_code == 2 and message in r.stderr, r.output
    assert not (tmp_path / "new").exists()
    assert tune(cli, out, trials=2).exit_code == 0  # the rerun is not blocked


def test_a_tune_whose_every_trial_fails_leaves_no_study(cli, tmp_path, monkeypatch):
    import compactlab.jobs.tune as tune_module  # where the job calls it

    real = tune_module.share_evaluator

    def failing(*args, **kwargs):
        evaluate = real(*args, **kwargs)
        # (the first evaluation is the base and no compaction; every trial after it fails)
        return lambda policies: evaluate(policies) if not failing.base_done and not failing.base_done.append(1) \
            else ["boom"] * len(policies)

    failing.base_done = []
    monkeypatch.setattr(tune_module, "share_evaluator", failing)
    out = tmp_path / "x"
    r = tune(cli, out, trials=2)
    assert r.exit_code == 2 and "no trial finished" in r.stderr
    assert not out.exists()


def test_an_out_that_cannot_be_used_is_exit_2(cli, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = tune(cli, f, trials=2)
    assert r.exit_code == 2 and "is a file" in r.stderr and "Traceback" not in r.stderr
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    r = tune(cli, dangling, trials=2)
    assert r.exit_code == 2 and "a symbolic link to nothing" in r.stderr


def test_a_read_only_out_is_exit_2(cli, tmp_path):
    from helpers import mounted_tmpfs

    with mounted_tmpfs(tmp_path / "ro", "ro,size=1m") as ro:
        r = tune(cli, ro / "t", trials=2)
        assert r.exit_code == 2 and "cannot write" in r.stderr and "Traceback" not in r.stderr, r.output
        r = tune(cli, ro, trials=2)
        assert r.exit_code == 2 and "cannot write" in r.stderr, r.output


def test_an_interrupt_while_trials_are_asked_leaves_none_running_and_resume_repairs_a_killed_one(
        cli, tmp_path, monkeypatch):
    import optuna

    out = tmp_path / "k"
    real_ask = optuna.Study.ask
    calls = {"n": 0}

    from compactlab.corpus.tune import BATCH

    def ask(self, *a, **kw):  # Ctrl-C lands in the second ask of the third batch (the first told, the second
        calls["n"] += 1       # out on the workers: cut short): one asked, not kept
        if calls["n"] == 2 * BATCH + 2:
            raise KeyboardInterrupt
        return real_ask(self, *a, **kw)

    monkeypatch.setattr(optuna.Study, "ask", ask)
    r = tune(cli, out, trials=2 * BATCH + 2)
    assert r.exit_code == 130, r.output
    study = _study(out / "study.journal")
    assert "RUNNING" not in {t.state.name for t in study.trials}
    monkeypatch.setattr(optuna.Study, "ask", real_ask)
    study.ask()  # what a SIGKILL leaves: a trial RUNNING for ever
    assert "RUNNING" in {t.state.name for t in _study(out / "study.journal").trials}
    assert tune(cli, out, "--resume", trials=2 * BATCH + 2).exit_code == 0
    states = [t.state.name for t in _study(out / "study.journal").trials]
    assert "RUNNING" not in states and states.count("COMPLETE") == 2 * BATCH + 2


def test_tunes_recommendation_applies_the_verdicts_guard():
    """(#27 §4) A front point that beats the base on every objective but keeps too little of what
    the agent used is named, not recommended; the best that keeps it is offered instead."""
    from compactlab.corpus.recommend import recommend
    from compactlab.corpus.trials import Param, TuneResult

    def pt(n, cost, recall):
        return Point(n, {"micro.keep_recent": n}, {"cost": cost, "recall": recall, "retention": 1.0, "violations": 0,
                                                   "overflows": 0, "cost_usd": 1.0, "probes": 10})

    base = pt(-1, 0.3, 0.4)
    front = [pt(1, 0.6, 0.5), pt(2, 0.2, 0.97)]
    result = TuneResult("s08", [Param("micro.keep_recent", "int", 1, 20)], ["cost", "recall"], base, front, front)
    text = recommend(result)
    # (the measure under the floor named: "keeps 98.6% of what the agent later used and 90.3% of the
    # referenced results: below the floor of 95.0%" left the reader to find which one was under it)
    assert ("Front point 1 (micro.keep_recent=1) is as good as s08 or better on every objective but is under the "
            "floor of 95.0% (no compaction's less the 5-point margin): recall 50.0%, 45.0 points under, so it is not "
            "recommended.") in text
    assert "not recommended" in text and "Use front point" not in text
    # (the pick is said against the base on its own: "No point beats s08 …" contradicted the point named above)
    assert ("front point 2 (micro.keep_recent=2) saves the most: it saves 20.0%, recall 97.0%, retention 100.0%, "
            "where s08 as it is saves 30.0%, recall 40.0%, retention 100.0%, which it trails on the saving;") in text
    assert "No point" not in text
    ok = TuneResult("s08", result.params, ["cost", "recall"], base, [pt(3, 0.6, 0.99)], [pt(3, 0.6, 0.99)])
    assert "Use front point 1" in recommend(ok)


@pytest.mark.parametrize("content, why", [
    (b"", "an empty file, not a study journal"),
    (b"not json\n", "not an Optuna study journal"),
    (b'{"op_code": 0, "study_name": "someone-else", "directions": [2]}\n', "without a compactlab-tune study"),
    (b'{"op_code": 0, "study_name": "compactlab-tune", "directions": [2]}\n{broken\n', "a damaged study journal (line 2"),
])
def test_a_foreign_or_damaged_journal_is_refused_and_never_modified(cli, tmp_path, content, why):
    out = tmp_path / "j"
    out.mkdir()
    journal = out / "study.journal"
    journal.write_bytes(content)
    r = tune(cli, out, "--resume", trials=2)
    assert r.exit_code == 2 and why in r.stderr and "not used, not changed" in r.stderr, r.stderr
    assert journal.read_bytes() == content and not (out / "front.csv").exists()


def _storage(path):
    from compactlab.corpus.study import storage_of

    return storage_of(str(path))


def _study_for_damage(cli, tmp_path):
    out = tmp_path / "t"
    r = cli("tune", SMALL_SAMPLE, "-p", "s08", "--space", "micro.keep_recent=1:5", "--trials", "3", "--jobs", "1",
            "--out", out, "-q", "--max-violations", "1000")
    assert r.exit_code == 0, r.output
    return out, out / "study.journal"


SMALL_SAMPLE = __import__("helpers").SAMPLES / "synth-small.jsonl"


def _rewrite(journal, change) -> None:
    import json

    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    change(lines)
    journal.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _first(lines, op):
    return next(line for line in lines if line["op_code"] == op)


DAMAGES = {
    "a missing key in a trial's parameters": lambda ls: _first(ls, 5).pop("param_name"),
    "an unknown operation code": lambda ls: _first(ls, 8).update(op_code=99),
    "a bad distribution": lambda ls: _first(ls, 5).update(distribution='{"name": "NoSuchDistribution"}'),
    "a parameter stored as a string": lambda ls: _first(ls, 5).update(param_value_internal="three"),
    "a bad trial state": lambda ls: _first(ls, 6).update(state=42),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_study_is_refused_on_resume_and_left_as_it_was(cli, tmp_path, damage):
    """(#49) Each was an internal error (exit 3): a clear exit 2 naming the study file and what is
    wrong, the file unchanged."""
    import hashlib

    out, journal = _study_for_damage(cli, tmp_path)
    _rewrite(journal, DAMAGES[damage])
    before = hashlib.md5(journal.read_bytes()).hexdigest()
    r = cli("tune", SMALL_SAMPLE, "-p", "s08", "--space", "micro.keep_recent=1:5", "--trials", "4", "--jobs", "1",
            "--out", out, "-q", "--max-violations", "1000", "--resume")
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"error: {journal}: ") and "damaged study journal" in r.stderr
    assert "internal error" not in r.stderr and hashlib.md5(journal.read_bytes()).hexdigest() == before


def test_force_replaces_a_damaged_study_of_its_own_without_replaying_it_and_refuses_a_foreign_one(
        cli, tmp_path, monkeypatch):
    """--force starts anew over a study of this command's, damaged or not: it is checked to be one
    (every line an operation, the first creating this study), not replayed by Optuna (only a study
    to be resumed is); a journal of another study is still refused and left as it was."""
    import compactlab.corpus.study as study_module

    out, journal = _study_for_damage(cli, tmp_path)
    _rewrite(journal, DAMAGES["a bad distribution"])
    replayed = []
    real = study_module._replay_problem
    monkeypatch.setattr(study_module, "_replay_problem", lambda path: replayed.append(path) or real(path))
    r = cli("tune", SMALL_SAMPLE, "-p", "s08", "--space", "micro.keep_recent=1:5", "--trials", "2", "--jobs", "1",
            "--out", out, "-q", "--max-violations", "1000", "--force")
    assert r.exit_code == 0, r.output
    assert replayed == [] and study_module._replay_problem(str(journal)) is None  # (a new study, whole)
    foreign = b'{"op_code": 0, "study_name": "someone-else", "directions": [2]}\n'
    journal.write_bytes(foreign)
    r = cli("tune", SMALL_SAMPLE, "-p", "s08", "--space", "micro.keep_recent=1:5", "--trials", "2", "--jobs", "1",
            "--out", out, "-q", "--max-violations", "1000", "--force")
    assert r.exit_code == 2 and "without a compactlab-tune study" in r.stderr and journal.read_bytes() == foreign


def test_a_sparse_gib_study_is_refused_without_reading_it_whole(tmp_path):
    """(#49) A sparse 1 GiB study file under a 1.5 GB address space: refused at its first line."""
    import os
    import subprocess
    import sys

    from helpers import ROOT

    out = tmp_path / "t"
    out.mkdir()
    with open(out / "study.journal", "wb") as f:
        f.truncate((1 << 30) - 1)
    code = ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))\n"
            "from compactlab.corpus.study import study_problem\n"
            f"print(study_problem({str(out / 'study.journal')!r}))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.strip() == "not an Optuna study journal", r.stderr[-300:]


@pytest.mark.parametrize("seed", range(12))
def test_a_study_damaged_at_random_is_refused_or_resumed_never_an_internal_error(cli, tmp_path, seed):
    """(#49) Truncated, bytes flipped, lines removed, values of another type: resumed where the
    damage is harmless (a last line cut short, a changed timestamp), else exit 2 with the file as
    it was; never an internal error, never a traceback."""
    import hashlib
    import json
    import random

    rng = random.Random(seed)
    out, journal = _study_for_damage(cli, tmp_path)
    data = bytearray(journal.read_bytes())
    how = ["truncate", "flip", "remove", "retype"][seed % 4]
    if how == "truncate":
        del data[rng.randrange(1, len(data)):]
    elif how == "flip":
        for _ in range(3):
            i = rng.randrange(len(data))
            data[i] = rng.randrange(256)
    elif how == "remove":
        lines = bytes(data).splitlines(keepends=True)
        del lines[rng.randrange(1, len(lines))]
        data = bytearray(b"".join(lines))
    else:
        lines = [json.loads(line) for line in bytes(data).splitlines()]
        line = lines[rng.randrange(1, len(lines))]
        key = rng.choice([k for k in line if k != "op_code"])
        line[key] = rng.choice([None, "x", 7, [], {}, 1e300])
        data = bytearray("".join(json.dumps(v) + "\n" for v in lines).encode())
    journal.write_bytes(bytes(data))
    before = hashlib.md5(journal.read_bytes()).hexdigest()
    r = cli("tune", SMALL_SAMPLE, "-p", "s08", "--space", "micro.keep_recent=1:5", "--trials", "4", "--jobs", "1",
            "--out", out, "-q", "--max-violations", "1000", "--resume")
    assert r.exit_code in (0, 2), (how, r.output)
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    if r.exit_code == 2:
        assert hashlib.md5(journal.read_bytes()).hexdigest() == before, how


def test_the_suggestion_passes_the_floors_or_says_none_does():
    """(#47 §4) With no point better on every objective, the suggestion is the point that saves most
    of those that keep recall and retention above the floor, never the lowest-recall one."""
    from compactlab.corpus.recommend import recommend
    from compactlab.corpus.trials import Point, TuneResult

    def point(n, cost, recall):
        return Point(n, {"summary.trigger": n}, {"cost": cost, "recall": recall, "retention": 1.0, "violations": 0,
                                                 "overflows": 0, "cost_usd": 1 - cost})

    base = point(-1, 0.30, 0.99)
    front = [point(1, 0.45, 0.627), point(2, 0.335, 0.952), point(3, 0.31, 0.97)]
    text = recommend(TuneResult("s08", [], ["cost", "recall"], base, front, front))
    assert "front point 2 (summary.trigger=2) saves the most" in text and "front point 1" not in text
    low = [point(1, 0.45, 0.6), point(2, 0.40, 0.7)]
    text = recommend(TuneResult("s08", [], ["cost", "recall"], base, low, low))
    assert "Keep s08 as it is (saves 30.0%, recall 99.0%, retention 100.0%)" in text  # (#55: the base keeps it)
    result = TuneResult("s08", [], ["cost", "recall"], point(-1, 0.30, 0.5), low, low)
    text = recommend(result)
    assert "None of them keeps recall and retention above the floor of 95.0%" in text
    # (the base falls below the floor too: said with its figures, so that "keep" is not read as "it passes")
    assert ("and neither does s08 as it is (saves 30.0%, recall 50.0%, retention 100.0%): no point of this space "
            "passes.") in text
    # then compare's "if you must compact", by its rule: of those that fit the window, the one that
    # loses least (it said "keep s08 as it is" where compare of the same runs named front point 2)
    assert ("If you must compact, use front point 2 (summary.trigger=2): of the points that fit the window it loses "
            "the least of what the agent used and saves 40.0%, where s08 as it is saves 30.0%; but recall 70.0%, "
            "25.0 points under the floor; its policy is policies/front-02.toml.") in text
    assert result.chosen is low[1] and not result.passes
    import io

    from compactlab.reports.tune_report import write_json
    out = io.StringIO()
    write_json(result, out)
    assert json.loads(out.getvalue())["passes"] is False  # (as compare's verdict says of its "if you must")
    # where nothing fits the window either, keeping the base is all there is to say
    broken = [Point(n, {"summary.trigger": n}, {"cost": 0.4, "recall": 0.6, "retention": 1.0, "violations": 0}, False)
              for n in (1, 2)]
    base = Point(-1, {"summary.trigger": -1}, {"cost": 0.3, "recall": 0.5, "retention": 1.0, "violations": 0}, False)
    text = recommend(TuneResult("s08", [], ["cost", "recall"], base, broken, broken))
    assert "If you must" not in text


def test_a_key_that_changes_nothing_is_left_out_of_the_search(cli, tmp_path):
    """(#47 §4) goose has no micro layer: --space micro.keep_recent is said and left out; the front
    lists only the keys searched; with nothing left to search, exit 2."""
    out = tmp_path / "t"
    r = cli("tune", SMALL_SAMPLE, "-p", "goose", "--space", "micro.keep_recent=1:5", "--space", "summary.trigger=20000:60000",
            "--trials", "2", "--out", out, "-q")
    assert r.exit_code == 0, r.stderr
    assert "micro.keep_recent changes nothing" in r.stderr and "left out of the search" in r.stderr
    doc = json.loads((out / "front.json").read_text())
    assert all("micro.keep_recent" not in p for p in doc["front"]) and len(doc["space"]) == 1
    bad = cli("tune", SMALL_SAMPLE, "-p", "goose", "--space", "micro.keep_recent=1:5", "--out", tmp_path / "b", "-q")
    assert bad.exit_code == 2 and "every key searched changes nothing" in bad.stderr


# ---- (#55 §3) tune's suggestion by the one rule of every recommender

def _pt(n, saving, recall=1.0, retention=1.0, values=None, raw=1.0, feasible=True, overflows=0):
    from compactlab.corpus.trials import Point

    return Point(n, values if values is not None else {"summary.trigger": n},
                 {"cost": saving, "recall": recall, "retention": retention, "violations": 0, "overflows": overflows,
                  "cost_usd": raw * (1 - saving), "raw_cost_usd": raw, "probes": 10}, feasible)


def _recommend(base, front, reference):
    from compactlab.corpus.recommend import recommend
    from compactlab.corpus.trials import TuneResult

    return recommend(TuneResult("s06", [], ["cost", "recall"], base, front, front, reference=reference))


def test_tune_never_suggests_a_point_dearer_than_no_compaction_where_it_fits():
    """20 DeepSeek trajectories: every point costs more than no compaction (the cache), the base too:
    'use no compaction', never 'front point 6 saves -109.4%' nor 'keep the base'."""
    none = _pt(-2, 0.0, values={})
    front = [_pt(6, -1.094, recall=0.955), _pt(7, -0.5, recall=0.96)]
    text = _recommend(_pt(-1, -0.984, recall=0.97), front, none)
    assert "Use no compaction (-p none)" in text and "costs 98.4% more than no compaction" in text, text
    assert "front point 6" not in text.lower() and "Keep s06" not in text
    # no compaction overflows somewhere: it is no candidate, and the cheaper point is offered
    text = _recommend(_pt(-1, -0.984, recall=0.97), front, _pt(-2, 0.0, values={}, feasible=False, overflows=3))
    assert "front point 2 (summary.trigger=7) saves the most" in text, text
    # a point that saves, beside them: it
    text = _recommend(_pt(-1, -0.984, recall=0.97), [*front, _pt(8, 0.2, recall=0.97)], none)
    assert "Use front point 3 (summary.trigger=8): it saves 20.0%" in text and "costs 98.4% more" in text, text


def test_tune_never_suggests_a_point_equal_to_its_base_and_an_exact_tie_keeps_the_base():
    base = _pt(-1, 0.3, values={"summary.trigger": 5})
    same = _pt(1, 0.3, values={"summary.trigger": 5})
    text = _recommend(base, [same], _pt(-2, 0.0, values={}))
    assert "Keep s06 as it is" in text and "front point 1" not in text.lower(), text
    tie = _pt(2, 0.3, values={"summary.trigger": 9})  # other values, the very same scores: the base
    assert "Keep s06 as it is" in _recommend(base, [tie], _pt(-2, 0.0, values={}))


def test_tunes_floors_are_no_compactions_recall_and_retention_less_the_margin():
    """Under --keep-recorded-compactions no compaction keeps 70% of the probes: 65% is the floor."""
    none = _pt(-2, 0.0, recall=0.70, values={})
    text = _recommend(_pt(-1, 0.1, recall=0.5), [_pt(1, 0.4, recall=0.66), _pt(2, 0.5, recall=0.6)], none)
    assert "Use front point 1 (summary.trigger=1)" in text and "floor of 65.0% (recall)" in text, text


@settings(max_examples=examples(150), deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from([-0.5, -0.005, 0.0, 0.1, 0.2, 0.3]), st.sampled_from([0.9, 0.96, 1.0])),
                min_size=1, max_size=6),
       st.sampled_from([-0.3, 0.0, 0.2]), st.booleans(), st.randoms(use_true_random=False))
def test_tunes_suggestion_is_never_dearer_than_none_nor_below_the_floor_whatever_the_order(front, base_saving, fits,
                                                                                           rnd):
    """Property (#55 §3): exact ties drawn on purpose; the suggestion never costs more than no
    compaction where it fits, never keeps less than the floor, and does not depend on the front's order."""
    import re

    points = [_pt(i + 1, s, recall=r) for i, (s, r) in enumerate(front)]
    none = _pt(-2, 0.0, values={}, feasible=fits, overflows=0 if fits else 1)
    base = _pt(-1, base_saving, recall=0.97)
    text = _recommend(base, points, none)
    named = re.search(r"front point \d+ \(summary.trigger=(\d+)\)(?: saves the most|:)", text)
    if named:
        chosen = points[int(named.group(1)) - 1]
        assert chosen.scores["recall"] >= 0.95
        if fits:
            assert chosen.scores["cost"] >= -0.01 and chosen.scores["cost"] >= max(base_saving, 0.0)
    elif fits:
        assert "Use no compaction" in text or "Keep s06 as it is" in text, text
    shuffled = list(points)
    rnd.shuffle(shuffled)
    again = _recommend(base, shuffled, none)
    named_again = re.search(r"front point \d+ \(summary.trigger=(\d+)\)", again)
    if named:
        chosen, other = points[int(named.group(1)) - 1], points[int(named_again.group(1)) - 1]
        assert chosen is other  # (an exact tie is broken by the values, never by the place in the front)


def test_tunes_table_and_front_csv_show_retention_beside_recall(cli, tmp_path):
    out = tmp_path / "t"
    r = cli("tune", SMALL_SAMPLE, "-p", "s08", "--space", "summary.trigger=20000:60000", "--trials", "2", "--out", out,
            "--set", "reactive.window_tokens=1000000")
    assert r.exit_code == 0, r.output
    head = (out / "front.csv").read_text().splitlines()[0].split(",")
    assert {"cost_saving", "recall", "retention"} <= set(head), head
    assert "retention" in r.stdout and "\n none " in r.stdout, r.stdout


# ---- (#57 §3) tune --harness: the settings a harness lets you change, printed to paste

def test_tune_harness_searches_claude_codes_percentage_and_prints_the_line_to_paste():
    import optuna

    from compactlab.corpus.harness_settings import paste, parse_setting, space
    from compactlab.corpus.tune import tune as search

    params = parse_space(space("claude-code"), "claude-code", [])
    assert params[0].choices[0] == 0.4 and params[0].choices[-1] == 0.83  # 40% to 83% of each session's window

    def evaluate(policies):
        out = []
        for p in policies:
            t = round(p.summary.trigger_share * 200_000) if p.summary.enabled else None
            saving = 0.0 if t is None else (200_000 - t) / 400_000
            recall = 1.0 if t is None else min(1.0, 0.95 + (t - 130_000) / 1_000_000)
            out.append({"cost": saving, "recall": recall, "retention": 1.0, "reduction": saving, "violations": 0,
                        "overflows": 0, "cost_usd": 10 * (1 - saving), "raw_cost_usd": 10.0, "probes": 10})
        return out

    def study():
        return optuna.create_study(directions=["maximize", "maximize"], sampler=optuna.samplers.RandomSampler(seed=0))

    result = search(params, ["cost", "recall"], "claude-code", [], study, 40, evaluate, batch=4, harness="claude-code")
    kept = [p.values["summary.trigger_share"] for p in result.points if p.scores["recall"] >= 0.95]
    chosen = result.chosen
    assert chosen is not None and chosen.values["summary.trigger_share"] == min(kept)  # (the lowest that keeps 95%)
    pct = round(min(kept) * 100)
    assert result.paste == paste("claude-code", {"summary.trigger_share": min(kept)}) == [
        f"export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE={pct}",
        f'~/.claude/settings.json: {{"env": {{"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "{pct}"}}}}']
    lines = paste("claude-code", {"summary.trigger_share": 0.65})
    assert lines[0] == "export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=65"
    assert parse_setting("claude-code", lines) == {"summary.trigger_share": 0.65}  # (the line pasted is the very point)
    assert paste("claude-code", None)[0] == "export DISABLE_AUTO_COMPACT=1"


def test_tune_harness_claude_code_searches_up_to_what_the_sessions_window_takes(cli, tmp_path):
    """CLAUDE_AUTOCOMPACT_PCT_OVERRIDE only lowers Claude Code's default: 83% is the most a 200,000
    window takes (167,000), 96% the most of the 1M-context window (967,000). A session that shows a
    prompt past 200,000 answered ran on the 1M window, so tune searches to 96% there (before, 83%
    on every session: 84% to 96% were never tried); --window sets the window for every session."""
    from compactlab.corpus.harness_settings import claude_code_shares, space
    from compactlab.engine.layers.harness_triggers import claude_code_lowered, harness_trigger
    from compactlab.jobs.tune import _own_windows
    from helpers import ClaudeCodeSession

    for window, top in ((200_000, 0.83), (1_000_000, 0.96)):
        default = harness_trigger("claude-code", None, window)[0]
        shares = claude_code_shares(window)
        assert shares[0] == 0.4 and shares[-1] == top and len(shares) == round(top * 100) - 39
        assert claude_code_lowered(window, top) < default <= claude_code_lowered(window, top + 0.01)

    def session(name: str, sizes: list[int]) -> str:
        s = ClaudeCodeSession().user("go", version="2.1.40")
        for k, size in enumerate(sizes):
            s.assistant(f"m{k}", {"type": "tool_use", "id": f"t{k}", "name": "Bash", "input": {"command": "ls"}},
                        input_tokens=size, version="2.1.40").result(f"t{k}", "x", version="2.1.40")
        return s.write(tmp_path / name)

    wide, plain = session("wide.jsonl", [150_000, 240_000]), session("plain.jsonl", [150_000, 190_000])
    other = tmp_path / "messages.jsonl"  # (another harness's recording: the preset's 200,000)
    other.write_text('{"role":"user","content":"go"}\n{"role":"assistant","content":[{"type":"text","text":"ok"}]}\n')
    assert _own_windows([wide, plain, str(other), str(tmp_path / "gone.jsonl")], None, "claude-code") == [1_000_000,
                                                                                                          200_000]
    assert _own_windows([plain], 400_000, "claude-code") == [400_000] and _own_windows([plain], None, "pi") == []
    assert space("claude-code", [200_000])[0].endswith("|0.83") and space("claude-code", [])[0].endswith("|0.83")
    assert space("claude-code", [200_000, 1_000_000])[0].endswith("|0.95|0.96")
    for files, top, env in (([plain], 0.83, {}), ([wide, plain], 0.96, {}),
                            # (your CLAUDE_CODE_AUTO_COMPACT_WINDOW kept: 91% is the most that lowers 367,000 of 400,000)
                            ([wide, plain], 0.91, {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "400000"})):
        out = tmp_path / f"t{len(files)}{len(env)}"
        r = cli("tune", *files, "--harness", "claude-code", "--trials", "2", "--out", out, "-q", env=env)
        assert r.exit_code == 0, r.stderr
        (choices,) = {d.choices for t in _study(out / "study.journal").trials for d in t.distributions.values()}
        assert choices[0] == 0.4 and choices[-1] == top


def test_tune_harness_codex_searches_up_to_90_percent_of_the_rollouts_window(tmp_path):
    """Codex takes the lesser of model_auto_compact_token_limit and 90% of the model's window: 244,800
    of the 272,000 its rollouts record as 258,400, 360,000 of a 400,000 model's (380,000). The search
    goes to the highest its sessions take; before, 244,800 on every rollout."""
    from compactlab.corpus.harness_settings import codex_limits, space
    from compactlab.jobs.tune import _own_windows
    from helpers import codex_rollout

    assert codex_limits()[0] == 100_000 and codex_limits()[-2:] == (244_000, 244_800)
    assert codex_limits(380_000)[-2:] == (356_000, 360_000)
    wide = codex_rollout(tmp_path / "wide.jsonl", 380_000, [300_000, 30_000], 1)
    plain = codex_rollout(tmp_path / "plain.jsonl", 258_400, [200_000, 30_000], 1)
    assert _own_windows([wide, plain], None, "codex") == [380_000, 258_400]
    assert space("codex", [258_400])[0] == space("codex", [])[0] and space("codex", [])[0].endswith("|244800")
    assert space("codex", [380_000, 258_400])[0].startswith("summary.trigger_cap=100000|") and \
        space("codex", [380_000, 258_400])[0].endswith("|356000|360000")


def test_tune_harness_on_real_replays_every_front_point_is_a_whole_percentage(cli, tmp_path):
    """Each front point of `tune --harness claude-code` is a percentage Claude Code takes, and the
    preset replayed with it gives the figures the front printed."""
    from compactlab.corpus.harness_settings import parse_setting

    files = [SAMPLES / "synth-medium.jsonl", SAMPLES / "synth-long.jsonl"]
    r = cli("tune", *files, "--harness", "claude-code", "--trials", "4", "--out", tmp_path / "t", "-q")
    assert r.exit_code == 0, r.stderr
    front = json.loads((tmp_path / "t" / "front.json").read_text())
    assert front["harness"] == "claude-code" and front["front"]
    row = front["front"][0]
    share = row["summary.trigger_share"]
    pct = round(share * 100)
    assert parse_setting("claude-code", ["", f'x: {{"env": {{"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "{pct}"}}}}']) == {
        "summary.trigger_share": share}
    doc = json.loads(cli("compare", *files, "-p", "claude-code", "--set", f"summary.trigger_share={share}",
                         "--format", "json", "--out", tmp_path / "c", "-q", "--charts", "none").stdout)
    ours = next(e for e in doc["verdict"]["entries"] if e["policy"] == "claude-code")
    assert ours["cost_saving"] == pytest.approx(row["cost_saving"], abs=1e-6)
    assert ours["recall"] == pytest.approx(row["recall"], abs=1e-6)
    bad = cli("tune", *files, "--harness", "claude-code", "--space", "summary.trigger_share=0.1:0.2", "--out", tmp_path / "x")
    assert bad.exit_code == 2 and "leave out -p, --set and --space" in bad.stderr
    none = cli("tune", *files, "--out", tmp_path / "y")
    assert none.exit_code == 2 and "--space KEY=LO:HI" in none.stderr


def test_the_next_batch_is_asked_before_the_last_is_told_and_the_trials_are_those_of_any_evaluator():
    """Two batches out at once (``tune.IN_FLIGHT``): the sampler asks the next batch before the last
    one is told, whether the evaluator scores a batch when it is sent or later (``submit``, as the
    share workers do): the same seed gives the same trials either way."""
    import optuna

    from compactlab.corpus import tune as tune_module
    from compactlab.corpus.tune import search

    params = parse_space(["micro.keep_recent=1:12"], "s08", [])
    events: list[str] = []

    def score(policies):
        return [{"cost": p.micro.keep_recent / 12, "recall": 1 - p.micro.keep_recent / 24, "violations": 0,
                 "overflows": 0, "cost_usd": 1.0} for p in policies]

    def at_once(policies):
        events.append(f"scored {len(policies)}")
        return score(policies)

    class Later:
        def __call__(self, policies):
            return score(policies)

        def submit(self, policies):
            events.append(f"sent {len(policies)}")
            return lambda: (events.append("collected"), score(policies))[1]

    def study():
        s = optuna.create_study(directions=["maximize", "maximize"], sampler=optuna.samplers.TPESampler(seed=3))
        real_ask, real_tell = s.ask, s.tell
        s.ask = lambda *a, **k: (events.append("ask"), real_ask(*a, **k))[1]
        s.tell = lambda *a, **k: (events.append("tell"), real_tell(*a, **k))[1]
        return s

    runs = []
    for evaluate in (at_once, Later()):
        events.clear()
        s = study()
        points, failures, stopped = search(s, params, ["cost", "recall"], "s08", [], 7, evaluate, batch=2)
        assert not failures and stopped is None and len(points) == 7
        runs.append([(p.number, p.values) for p in points])
        told = [i for i, e in enumerate(events) if e == "tell"]
        asked = [i for i, e in enumerate(events) if e == "ask"]
        assert asked[2] < told[0] and asked[4] > told[1]  # (the second batch asked before the first told)
    assert runs[0] == runs[1]
    assert tune_module.IN_FLIGHT == 2


def test_with_no_candidate_keep_the_base_is_said_only_where_the_base_fits_and_breaks_nothing():
    """tune -p s08 of two samples: every trial broke a tool pair and no compaction overflowed, and
    the advice was "Keep s08, or widen the space", though s08 as it is broke 9 pairs too. Where the
    base is no way out either, it says what the base breaks and what to widen or allow instead."""
    from compactlab.corpus.recommend import recommend
    from compactlab.corpus.trials import Point, TuneResult

    def point(n, violations=0, overflows=0, feasible=True):
        return Point(n, {"summary.trigger": n}, {"cost": 0.9, "recall": 0.4, "retention": 0.1,
                                                 "violations": violations, "overflows": overflows}, feasible)

    trials = [point(k, violations=2, feasible=False) for k in range(3)]
    none = point(-2, overflows=40, feasible=False)
    broken = TuneResult("s08", [], ["cost", "recall"], point(-1, violations=9, feasible=False), trials, [],
                        reference=none)
    text = recommend(broken)
    assert text == ("No candidate qualifies: every one of the 3 trials introduced a violation or overflowed a "
                    "window, and so does s08 as it is (it introduces 9 violation(s)), while no compaction overflows "
                    "the window: widen the space, or allow violations with --max-violations."), text
    fits = TuneResult("s08", [], ["cost", "recall"], point(-1), trials, [], reference=none)
    assert recommend(fits) == ("No candidate qualifies: every one of the 3 trials introduced a violation or "
                               "overflowed a window. Keep s08, or widen the space.")
    # trials that fit, each covered by the base as it is (the front left empty: ``tune.covers``): not
    # "every trial introduced a violation"
    covered = TuneResult("s08", [], ["cost", "recall"], point(-1), [point(k) for k in range(3)], [], reference=none)
    assert recommend(covered) == ("No point of the front of the 3 trials improves on s08 as it is: it costs no more "
                                  "than each and keeps as much of recall and retention. Keep s08, or widen the space.")


def test_tune_harness_says_there_is_nothing_to_set_where_it_recommends_the_base():
    """Where tune recommends the harness's preset as it is, it printed "The claude-code setting to
    paste:" and, as the line, "no setting: Claude Code's default" (or "no change: keep your current
    setting, …"). It now says there is nothing to set, and why, and front.json's setting is empty;
    any other point (and no compaction) gets its lines, and OpenCode, always told, its default's."""
    import io

    from compactlab.corpus.trials import TuneResult
    from compactlab.corpus.tune import to_paste
    from compactlab.reports.tune_report import write_json, write_table

    base, none = _pt(-1, 0.3, values={"summary.trigger_share": 0.0}), _pt(-2, 0.0, values={})
    front = [_pt(1, 0.2, recall=0.5, values={"summary.trigger_share": 0.5})]
    from compactlab.corpus.harness_settings import harness

    params = parse_space(harness("claude-code").space(), "claude-code", [])
    result = TuneResult("claude-code", params, ["cost", "recall"], base, front, front, reference=none)
    result.harness, result.chosen, result.recommendation = "claude-code", base, "Keep claude-code as it is."
    result.paste, result.nothing_to_set = to_paste("claude-code", base, result)
    assert (result.paste, result.nothing_to_set) == ([], "the point recommended is Claude Code's default")
    out = io.StringIO()
    write_table(result, out)
    assert "There is nothing to set: the point recommended is Claude Code's default." in out.getvalue()
    assert "to paste" not in out.getvalue() and "no setting" not in out.getvalue()
    doc = io.StringIO()
    write_json(result, doc)
    assert json.loads(doc.getvalue())["setting"] == [] and "Claude Code's default" in json.loads(doc.getvalue())[
        "nothing_to_set"]
    result.current = "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60 (the environment): 120,000 tokens"
    assert to_paste("claude-code", base, result) == ([], f"keep your current setting, {result.current}")
    assert to_paste("claude-code", front[0], result) == (
        ["export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=50", '~/.claude/settings.json: {"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}}'],
        None)
    assert to_paste("claude-code", none, result)[0][0] == "export DISABLE_AUTO_COMPACT=1"
    result.current = None
    opencode = _pt(-1, 0.3, values={"summary.trigger_reserve": 0})
    result.base_point = opencode
    assert to_paste("opencode", opencode, result) == (['opencode.json: {"compaction": {"reserved": 0}}'], None)


def test_a_pick_at_the_edge_of_the_range_searched_is_said_so():
    """A tune whose pick was the lowest value of the range searched said nothing of it: a better
    point may lie beyond the range. Said for the --space the user gave, not for a harness's settings
    (their ranges end where the harness stops taking a value)."""
    from compactlab.corpus.recommend import recommend
    from compactlab.corpus.trials import Param, TuneResult

    def result(trigger, harness=None):
        key = "summary.trigger_cap" if harness == "codex" else "summary.trigger"
        base, best = _pt(-1, 0.1, values={key: 80_000}), _pt(1, 0.4, values={key: trigger})
        return TuneResult("s06", [Param(key, "int", 20_000, 100_000)], ["cost", "recall"], base, [best],
                          [best], reference=_pt(-2, 0.0, values={}), harness=harness)

    assert ("summary.trigger=20000 is the lowest value searched: a better point may lie beyond it (--space searches "
            "a wider range).") in recommend(result(20_000))
    assert "summary.trigger=100000 is the highest value searched" in recommend(result(100_000))
    assert "value searched" not in recommend(result(50_000))
    codex = recommend(result(20_000, harness="codex"))
    assert "model_auto_compact_token_limit=20000" in codex and "value searched" not in codex


def test_a_point_with_the_base_s_very_figures_is_no_front_point(cli, tmp_path):
    """A Gemini CLI tune whose summary layer never acted listed front point 1 with the base's value
    and its very figures: it improves on nothing. The base as it is, equal on everything a user
    reads of a point, leaves it off the front, as one better on any of them does."""
    from compactlab.corpus.tune import covers

    base = _pt(-1, 0.2, recall=0.97)
    same = _pt(1, 0.2, recall=0.97)
    better = _pt(2, 0.3, recall=0.97)
    assert covers(base, same, ["cost", "recall"], ties=True) and not covers(base, same, ["cost", "recall"])
    assert not covers(base, better, ["cost", "recall"], ties=True)
    # (a trigger no transcript reaches: every trial is the base's figures)
    r = cli("tune", SAMPLES / "synth-small.jsonl", "-p", "claude-code", "--space", "summary.trigger=180000:199000",
            "--trials", "3", "--out", tmp_path / "t", "--no-chart")
    assert r.exit_code == 0, r.stderr
    doc = json.loads((tmp_path / "t" / "front.json").read_text())
    assert doc["front"] == [] and "The front has 0 point(s) from 3 trial(s). Keep claude-code as it is" in r.stdout


def test_a_harness_setting_that_never_acted_is_named_as_the_harness_names_it(cli, tmp_path):
    """A Gemini CLI user searched model.compressionThreshold, and was told "summary.trigger: …
    never acted": compactlab's name of the key, which the harness's table and its line to paste do
    not use. The note names the harness's setting first, and says it once."""
    r = cli("tune", SAMPLES / "synth-small.jsonl", "--harness", "gemini-cli", "--trials", "3",
            "--out", tmp_path / "t", "--no-chart")
    assert r.exit_code == 0, r.stderr
    said = "model.compressionThreshold (summary.trigger): gemini-cli's summary layer never acted"
    assert (r.stdout + r.stderr).count(said) == 1
    assert json.loads((tmp_path / "t" / "front.json").read_text())["notes"][0].startswith(said)


def test_a_retention_that_tells_nothing_apart_is_said_as_compare_says_it():
    """On the shared Codex rollouts compare said retention (1.0 everywhere) tells the policies
    apart no more than recall does; tune said it of recall alone. Both now say both."""
    base = _pt(-1, 0.25, values={"summary.trigger": 244_800})
    base.scores.update(probes=0, refs=0)
    text = _recommend(base, [_pt(1, 0.5, values={"summary.trigger": 100_000})], _pt(-2, 0.0, values={}))
    assert "recall is 1.0 everywhere and does not tell the candidates apart" in text
    assert ("No session refers back to an earlier tool result: retention is 1.0 everywhere and does not tell the "
            "candidates apart.") in text
    base.scores.update(probes=4, refs=2)
    text = _recommend(base, [_pt(1, 0.5, values={"summary.trigger": 100_000})], _pt(-2, 0.0, values={}))
    assert "does not tell" not in text
