"""What ``compactlab tune`` does, as one library call (``tune_files``): score the base policy on the
corpus, search its keys in the Optuna study of the output folder, and write the front.

Nothing is made in the output folder until the base policy has run; a study this call made and in
which no trial finished is removed. An interrupt keeps the trials that finished (continue with
``resume``).
"""

from __future__ import annotations

from ..engine.policy import inert_keys, load_policy
from ..plain import dataclass

from ..plumbing.process import usable_cores

import os
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import field
from typing import Any

from ..corpus.compare import Cluster, FileRef
from ..corpus.pool import can_fork
from ..corpus.shares import Member, RunSettings, SharePool
from ..corpus.study import StudyDefinition, StudySite, dashboard_command, study_path
from ..corpus.trials import TuneResult
from ..corpus.tune import corpus_evaluator, parse_objectives, parse_space, share_evaluator
from ..corpus.tune import tune as search
from ..errors import InputError, UsageError, cannot_write
from ..plumbing.interrupts import exit_status
from .base import Notify, Outcome, ShowsProgress, Settings, Tally, calibrations_for, load_all, no_progress, \
    none_read, prices_for, quietly, read_parts


@dataclass(kw_only=True)
class Search:
    """What a tune searches: the base policy and its --set keys, the space, the objectives and the
    study's sampler."""

    base: str = "s08"
    overrides: list[str] = field(default_factory=list)
    spaces: list[str] = field(default_factory=list)  # KEY=LO:HI[:log] or KEY=A|B
    trials: int = 200
    objectives: str = "cost,recall"
    max_violations: int = 0
    sampler: str = "tpe"
    seed: int = 0
    resume: bool = False
    chart: bool = True
    #: search the settings this harness lets you change, not a policy's keys (``harness_settings``)
    harness: str | None = None
    #: with a harness: your current setting of it, in words with its source (the base is set to it)
    current: str | None = None


@dataclass
class Tuned:
    """A tune's result (None when no trial finished) and how it ended."""

    result: TuneResult | None
    outcome: Outcome


def _searched(spec: Search, notify: Notify) -> list:
    """The keys searched: ``--space`` less those that change nothing in the base policy (said, even
    with -q, and never in the front); a --set key it takes no notice of is said too."""
    params = parse_space(spec.spaces, spec.base, spec.overrides)
    base = load_policy(spec.base, spec.overrides)
    for line in inert_keys(base, [s.partition("=")[0] for s in spec.overrides]):
        notify(f"warning: {line}", True)
    inert = {p.key for p in params if inert_keys(base, [p.key])}
    for line in inert_keys(base, sorted(inert)):
        notify(f"warning: {line}; left out of the search", True)
    params = [p for p in params if p.key not in inert]
    if not params:
        raise UsageError("--space: every key searched changes nothing in " + base.name,
                         hint="turn its layer on (--set LAYER.enabled=true) or search another key")
    return params


def _evaluator(files: list[str], settings: Settings, stack: ExitStack, notify: Notify,
               progress: ShowsProgress) -> tuple[Any, list[str]]:
    """What evaluates a trial, and the files' hashes: on a cluster, or with no fork, compare's jobs
    over the corpus loaded in this process; else workers that each keep a share of the corpus (this
    process keeps none of it), ended with ``stack``."""
    if settings.executor or not can_fork():
        # (on a cluster: connected once, for every trial)
        cluster = stack.enter_context(Cluster(settings.executor)) if settings.executor else None
        loaded = load_all(files, settings, notify, progress)
        return corpus_evaluator(loaded, n_jobs=settings.jobs,
                                prices=prices_for(loaded, settings.price_model, settings.prices, notify),
                                calibrations=calibrations_for(loaded, settings.calibrate, notify),
                                summarizer=(settings.summarizer, settings.live), executor=cluster,
                                keep_recorded_compactions=settings.keep_recorded_compactions,
                                cache_ttl=settings.cache_ttl, cache_model=settings.cache_model,
                                window=settings.window), [t.content_hash for t in loaded]
    members = corpus_members(files, settings, notify, progress)
    pool = stack.enter_context(SharePool(members, settings.jobs or usable_cores(), RunSettings(
        settings.keep_recorded_compactions, (settings.summarizer, settings.live), settings.cache_ttl,
        settings.cache_model, settings.window)))
    return share_evaluator(pool), [m.ref.content_hash for m in members]


def _told(site: StudySite, advance: Callable[..., None], n: int) -> None:
    """A trial told: on the disk (``StudySite.durable``), then counted."""
    site.durable()
    advance(n)


def tune_files(files: list[str], spec: Search, settings: Settings, show: Callable[[TuneResult], None] =
               lambda _: None, notify: Notify = quietly, progress: ShowsProgress = no_progress) -> Tuned:
    """Tune ``spec.base`` on ``files`` into ``settings.out_dir`` (``show`` sees the front once it
    is written)."""
    from ..reports.tune_report import write_files

    out_dir = settings.out_dir or os.path.join("reports", "tune")
    no_off = None  # (why no compaction is no setting of these sessions, beyond the harness's table)
    if spec.harness is not None:
        spec = _harness_search(spec, _own_windows(files, settings.window, spec.harness))
        no_off = _sessions_own_settings(files, str(spec.harness), notify)
    objectives = parse_objectives(spec.objectives)
    params = _searched(spec, notify)
    site = StudySite(out_dir, spec.resume, settings.force, files)  # checked; nothing made until the base policy has run
    with ExitStack() as stack:
        evaluate, hashes = _evaluator(files, settings, stack, notify, progress)
        definition = StudyDefinition.of(spec.base, spec.overrides, params, objectives, spec.max_violations, hashes)
        try:
            with progress("tune", spec.trials) as advance:
                result = search(params, objectives, spec.base, spec.overrides,
                                lambda: site.open(definition, spec.sampler, spec.seed), spec.trials, evaluate,
                                max_violations=spec.max_violations,
                                on_trial=lambda n: _told(site, advance, n), harness=spec.harness,
                                current=spec.current, no_off=no_off)
        except KeyboardInterrupt as stop:  # before the search began: nothing to write
            site.close(keep=False)
            return Tuned(None, Outcome(exit_status(stop), ["interrupted before the first trial finished"]))
        except BaseException:
            site.close(keep=False)
            raise
    site.close(keep=bool(result.points) or spec.resume)
    for failure in result.failures[:20]:
        notify(f"error: {failure}", True)
    for note in result.notes:
        notify(f"warning: {note}", True)
    if not result.points and not spec.resume:  # the study this call made is gone: a rerun starts anew
        if result.interrupted is not None:
            return Tuned(None, Outcome(exit_status(result.interrupted),
                                       ["interrupted before the first trial finished"]))
        raise UsageError(f"no trial finished ({len(result.failures)} failed): nothing written to {out_dir}/")
    try:
        written = write_files(result, out_dir, spec.chart)
    except OSError as exc:
        raise cannot_write(f"--out {out_dir}: cannot write the front", exc,
                         hint="the study is kept: --resume writes the front once --out is writable") from None
    show(result)
    study = study_path(out_dir)
    outcome = Outcome(wrote=f"wrote {out_dir}/: {os.path.basename(study)}, {', '.join(written)} (inspect the study "
                            f"with: {dashboard_command(study)})")
    if result.interrupted is not None:
        outcome.status = exit_status(result.interrupted)
        outcome.errors.append(f"interrupted after {len(result.points)} of {spec.trials} trials; continue with --resume")
    return Tuned(result, outcome)


def check_search(spec: Search) -> None:
    """The errors of a search's options, said before any session is looked for (the command's
    first words): a harness whose settings compactlab does not know, or one given with -p, --set
    or --space."""
    from ..corpus.harness_settings import HARNESSES, preset

    if spec.harness is None:
        return
    if spec.harness not in HARNESSES:
        raise UsageError(f"--harness {spec.harness}: compactlab knows no settings of it to search; it searches "
                         f"those of {', '.join(HARNESSES)}", hint="search a policy's keys with -p NAME --space KEY=LO:HI")
    if spec.spaces or spec.overrides or spec.base not in ("s08", preset(spec.harness)):
        raise UsageError(f"--harness {spec.harness}: searches the settings the harness lets you change, on its preset: "
                         "leave out -p, --set and --space")


def _harness_search(spec: Search, windows: list[int]) -> Search:
    """A search of the settings ``spec.harness`` lets you change: its preset at your current setting
    (read from where the harness keeps it, else its default) as the base, its settings as the space
    (neither may be given besides; ``windows``: those its rule takes of the sessions, which widen
    Claude Code's)."""
    from dataclasses import replace

    from ..corpus.harness_settings import current, preset, settings_for, space

    check_search(spec)
    assert spec.harness is not None
    now = current(spec.harness, settings_for(harness=spec.harness))
    overrides, words = now if now is not None else ([], None)
    # (your CLAUDE_CODE_AUTO_COMPACT_WINDOW, kept: the window the percentage is taken of where under a session's)
    kept = [int(o.split("=", 1)[1]) for o in overrides if o.startswith("summary.trigger_window=")]
    windows = [min([w, *kept]) for w in windows]
    return replace(spec, base=preset(spec.harness), spaces=space(spec.harness, windows), overrides=overrides,
                   current=words)


#: the harnesses whose settings tune searches further on a larger window
WINDOWED = ("claude-code", "codex")


def _own_windows(files: list[str], given: int | None, harness: str) -> list[int]:
    """The window ``harness`` (``WINDOWED``) compacted by in each of its own sessions of ``files``
    (``Window.harness``: ``--window``; else Claude Code's 1M-context window where the model's
    ``[1m]`` or a prompt past 200,000 answered shows it, Codex's the one its rollout records; else
    the harness's default): none for another's harness, or a file that does not read (its preset's
    window; the reading of the corpus says what is wrong with it)."""
    from ..engine.layers.harness_triggers import RECORDED_BY
    from ..engine.window import of_recording
    from ..transcripts import load_transcript

    windows: list[int] = []
    if harness not in WINDOWED:
        return windows
    for path in files:
        try:
            t = load_transcript(path)
        except (InputError, OSError):
            continue
        if (t.metadata.get("recorded_format") or t.format) == RECORDED_BY[harness]:
            windows.append(of_recording(t, given).harness)
    return windows


def _sessions_own_settings(files: list[str], harness: str, notify: Notify) -> str | None:
    """Said where sessions tuned on ran with their project's own setting (``harness_settings.
    set_in_projects``): the user-level setting tune starts from and prints is not theirs, and
    pasting it does not change them (the audit reads them so too); and where they were recorded by
    a Qwen Code that ignores the setting tune prints (0.17 and later: ``newer_qwen_code``), for
    which no compaction is no setting either: why, as the recommendation says it (else None)."""
    from ..corpus.harness_settings import set_in_projects
    from ..transcripts.homes import started_in

    for folder, words, _ in set_in_projects(harness, (f for f in map(started_in, files) if f)):
        notify(f"warning: sessions started in {folder} ran with its project's own setting, {words}, not yours: "
               "the setting tune prints, pasted where yours is, does not change them", True)
    if harness == "qwen-code":
        from ..corpus.harness_settings import QWEN_CODE_NO_OFF, newer_qwen_code

        newer = newer_qwen_code(files)
        if newer:
            notify(f"warning: {len(newer)} of the {len(files)} session(s) were recorded by Qwen Code 0.17 or later "
                   f"({newer[0][1]}), which ignores model.chatCompression.contextPercentageThreshold "
                   "(QwenLM/qwen-code#4345): the setting tune prints does not change those versions, and compactlab "
                   "knows no setting of theirs for where they compact", True)
            return QWEN_CODE_NO_OFF
    return None


def corpus_members(files: list[str], settings: Settings, notify: Notify = quietly,
                   progress: ShowsProgress = no_progress) -> list[Member]:
    """The corpus as share workers read it: each transcript's path, format, content hash, prices
    and calibration, read a part at a time and let go (what is said of the files, said once)."""
    tally = Tally(sources=len(files))
    members: list[Member] = []
    with progress("reading", len(files)) as advance:
        for loaded, prices, calibrations in read_parts(files, settings, notify, tally):
            for t, price, calibration in zip(loaded, prices, calibrations):
                path = os.path.abspath(t.path)
                try:
                    size = os.path.getsize(path)
                except OSError:
                    size = 0
                members.append(Member(FileRef(path, t.format, settings.skip_bad_lines, t.content_hash), price,
                                      calibration, size))
                advance(t)
    tally.say(notify)
    if not members and tally.skipped:
        raise none_read(len(tally.skipped))
    return members
