"""What every job shares: the one settings object, how a job speaks to the user, and the
per-transcript preparation (prices, calibration, the warnings of a loaded file)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import field
from typing import Any

from ..corpus.calibration import MIN_CALLS, Calibration, by_default, calibrate as fit_calibration, implausible, short, \
    usable_calls
from ..engine.feeds import Opening
from ..engine.cost.prices import ModelPrices, PriceTable, load_prices
from ..plain import NamedTuple, dataclass
from ..plumbing.files import shown
from ..errors import CompactlabError, UsageError
from ..transcripts import FolderFile, UnknownFormat
from ..transcripts.model import NO_MODEL, Note
from ..plumbing.process import collector_off

#: how a job tells the user something: (the message, whether it is said even with --quiet)
Notify = Callable[[str, bool], None]


class Detail(str):
    """A per-file note that a summary line stands for (the CLI says it with --verbose only)."""


def quietly(message: str, always: bool) -> None:
    """A Notify that says nothing."""


#: how a job shows its progress: (what, how many steps) -> a context giving the step callback
ShowsProgress = Callable[[str, int], Any]


@contextmanager
def no_progress(what: str, total: int) -> Iterator[Callable[..., None]]:
    """A ShowsProgress that shows nothing."""
    yield lambda *_: None


@dataclass(kw_only=True, eq=False, repr=False)
class Settings:
    """How every job reads, measures, prices and summarises, and where it writes: replay, compare,
    check and tune take this one object (replay's ``ReplaySettings`` adds its policy)."""

    out_dir: str | None = None
    dry_run: bool = False
    force: bool = False
    keep_recorded_compactions: bool = False
    calibrate: bool | None = None  # None: wherever the transcript records usage; True: required
    tokens: str = "estimate"  # or "anthropic": exact counts (messages.count_tokens)
    summarizer: str = "stub"
    live: Any = None  # summarizers.LiveOptions for the live summarizer or exact counts
    price_model: str | None = None
    prices: PriceTable = field(default_factory=load_prices)
    cache_ttl: str | None = None  # 5m or 1h; None: the recording's
    cache_model: str | None = None  # whose prompt-cache rules (engine/cache_rules.py); None: the model's provider
    window: int | None = None  # --window: the context window every run is judged on; None: each recording's
    input_format: str | None = None
    skip_bad_lines: bool = False
    jobs: int | None = None  # worker processes of a corpus job [default: the cores]
    executor: str | None = None  # dask://HOST:PORT: a corpus job's runs on a Dask cluster

    @property
    def reading(self) -> "Reading":
        return Reading(self.input_format, self.skip_bad_lines, self.calibrate, self.tokens, dry_run=self.dry_run)


class Reading(NamedTuple):  # (compared: a reading started before the policy was built is kept when equal)
    """What of the settings decides how a file is read for a replay (a command knows them before it
    has built its policy): the format, bad lines, and whether the file must be had whole (a fit
    required, exact counts) or only if its first lines record usage (calibration by default)."""

    input_format: str | None = None
    skip_bad_lines: bool = False
    calibrate: bool | None = None
    tokens: str = "estimate"
    probes: bool = True  # look for the hindsight probes (False: the policy never acts)
    dry_run: bool = False  # write nothing (the probe cache is read, not written)

    def opening(self, path: str) -> Opening:
        """How ``path`` is read, decided by the engine's feeds (loaded, streamed or read ahead)."""
        return Opening(path, self.input_format, skip_bad_lines=self.skip_bad_lines,
                       stream=self.calibrate is not True and self.tokens != "anthropic",
                       whole_if_usage=self.calibrate is None, probes=self.probes, write_cache=not self.dry_run)


class Outcome:
    """How a job ended, for the command line: the status line said without --quiet, the errors
    always said (stderr), and the exit status. (A plain class, as the jobs' other small records:
    ``dataclass`` would compile its ``__init__`` at every start.)"""

    __slots__ = ("status", "errors", "wrote")

    def __init__(self, status: int = 0, errors: list[str] | None = None, wrote: str | None = None) -> None:
        self.status = status
        self.errors: list[str] = errors if errors is not None else []
        self.wrote = wrote


class Tally:
    """What a corpus read in parts says once, at the end, of all its files: the calibrations, the
    files too short to calibrate on, the folder files that are no transcript."""

    __slots__ = ("sources", "fits", "estimated", "skipped")

    def __init__(self, sources: int = 0) -> None:
        self.sources = sources
        self.fits: list[Calibration] = []
        self.estimated = 0
        self.skipped: list[str] = []

    def say(self, notify: Notify) -> None:
        if self.sources > 1 and self.fits:
            notify(calibrated_line(self.fits), False)
        if self.estimated:
            notify(f"warning: {self.estimated} transcript(s) record too few calls with usage to calibrate on: their "
                   "tokens are estimated (each with -v)", False)
        not_transcripts(self.skipped, notify)


def load_all(files: list[str], settings: Settings, notify: Notify = quietly,
             progress: ShowsProgress = no_progress, tally: Tally | None = None) -> list:
    """Every file loaded whole (a corpus job shares them with its workers), its warnings said
    (``tally``: one part of a corpus, what is said of all of it kept for the end)."""
    from ..engine.measures import probe_cache
    from ..transcripts import load_transcript

    loaded = []
    skipped: list[str] = [] if tally is None else tally.skipped
    with collector_off(), progress("reading", len(files)) as advance:
        for path in files:
            try:
                t = load_transcript(path, settings.input_format, skip_bad_lines=settings.skip_bad_lines)
            except UnknownFormat as exc:
                if not isinstance(path, FolderFile):
                    raise
                skipped.append(exc.message)
                advance(None)
                continue
            probe_cache.baseline_of(t, write=not settings.dry_run)  # (indexed once, or read from the cache)
            warn_loaded(t, notify)
            loaded.append(t)
            advance(t)
    if tally is not None:
        return loaded
    not_transcripts(skipped, notify)
    if not loaded and skipped:
        raise none_read(len(skipped))
    return loaded


def left_out_subagents(paths: list[str] | tuple[str, ...]) -> tuple[int, float]:
    """The subagent sessions the folders among ``paths`` hold (left out unless asked for), and what
    their recordings say they cost with output (``subagents_cost``)."""
    from ..transcripts import subagent_sessions

    files = subagent_sessions(paths)
    return len(files), subagents_cost(files)


def say_left_out(n: int, cost: float, where: str, notify: Notify) -> None:
    """The line that says which subagents' sessions were left out, and what they cost."""
    if n:
        notify(f"left out {n} subagent session(s) of {where}, whose recordings cost ${cost:,.4f} with output (billed, "
               "not replayed); --subagents includes them", False)


def say_before_runs(grid: list[tuple[Any, tuple]], overrides: list[str] | tuple[str, ...], notify: Notify,
                    but: Any = None, files: list[str] | tuple[str, ...] = ()) -> None:
    """What replay, compare, check and next-action say of their policies before they run, the same
    lines from each, ``but`` left out (no compaction a compare adds): a warning, once each, for a
    --set key a policy of ``grid`` (its policies and their swept values) takes no notice of (its
    layer is off; tune says its own, of its space); and a note where a harness's preset runs as
    its default while you have set that harness otherwise, or the sessions of ``files`` ran with
    their project's own setting (``your_setting``)."""
    from ..engine.policy import inert_keys

    keys = [s.partition("=")[0] for s in overrides]
    said: set[str] = set()
    for policy, swept in grid:
        if policy is but:
            continue
        for line in [*(f"warning: {k}" for k in inert_keys(policy, keys)),
                     *([] if swept else your_setting(policy, files))]:
            if line not in said:
                said.add(line)
                notify(line, False)


#: the presets of the harnesses whose settings ``harness_settings.current`` reads: only a policy of
#: one of these names is looked at (``your_setting``), so that any other run does not import the
#: harnesses' table (held to ``current`` by a test)
SETTINGS_READ = ("claude-code", "codex", "goose", "qwen-code", "gemini-cli", "pi", "opencode")


def your_setting(policy: Any, files: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Where ``policy`` is a harness's preset as it is (Claude Code's, Codex's, goose's, Qwen Code's,
    Gemini CLI's, Pi's, OpenCode's: its default) and you have set that harness otherwise (the
    environment, ``~/.claude/settings.json``, ``~/.codex/config.toml``, ``~/.pi/agent/settings.json``, ...:
    ``harness_settings.current``, as tune reads it for its base), a note
    saying so and how to replay yours: the preset is not what your harness does; one for each
    folder the sessions of ``files`` were started in whose project sets it otherwise again (a
    project's settings file: ``harness_settings.projects_otherwise``). Nothing elsewhere."""
    if policy.name not in SETTINGS_READ:
        return []
    from ..corpus.harness_settings import projects_otherwise, set_otherwise
    from ..transcripts.homes import started_in

    lines: list[str] = []
    found = set_otherwise(policy)
    if found is not None:
        h, words, sets = found
        # (a harness always told its setting: the preset's own are not that harness's defaults, OpenCode's reserve)
        what = f"{h.title} with the preset's own settings" if h.always_set else f"{h.title}'s default"
        lines.append(f"note: {policy.name} is {what}, and you set {words}; -p {policy.name} {sets} "
                     f"replays yours (tune --harness {h.name} starts from it)")
    for folder, words, sets in projects_otherwise(policy, (f for f in map(started_in, files) if f)):
        lines.append(f"note: sessions started in {folder} ran with its project's own setting, {words}; "
                     f"-p {policy.name}{' ' + sets if sets else ''} replays theirs")
    return lines


def say_too_deep(folders: list[str], notify: Notify) -> None:
    """The line that names the folders whose sessions lie deeper than a folder given is read
    (``transcripts.deeper_folders``), each with -v."""
    for folder in folders:
        notify(Detail(f"left out {folder}: its sessions are in the folders inside it"), False)
    if folders:
        named = ", ".join(os.path.basename(f) for f in folders[:3]) + (", …" if len(folders) > 3 else "")
        notify(f"left out {len(folders)} folder(s) whose sessions are a level deeper than compactlab reads ({named}): "
               "give each as an input, or a quoted glob such as 'DIR/**/*.jsonl' (each with -v)", False)


def subagents_cost(files: list[str]) -> float:
    """What subagents' recordings say they cost with output: billed though not replayed (as ccusage
    counts them). A file that does not load counts, at no cost."""
    from ..engine.cost.pricing import recorded_total
    from ..transcripts import load_transcript

    total = 0.0
    with collector_off():
        for f in files:
            try:
                total += recorded_total(load_transcript(f)) or 0.0
            except CompactlabError:
                continue
    return total


def none_read(tried: int) -> UsageError:
    """The error of folders none of whose ``tried`` files is a transcript."""
    return UsageError(f"no file of the folder(s) is a transcript in a known format ({tried} tried)",
                      hint="--input-format NAME forces one")


def not_transcripts(skipped: list[str], notify: Notify) -> None:
    """The files of folders that are no transcript (skipped): one line, each with --verbose."""
    for line in skipped:
        notify(Detail(f"skipped {line}"), False)
    if skipped:
        notify(f"skipped {len(skipped)} file(s) that are not transcripts in a known format (each with -v)", False)


def failures_said(failures: list, notify: Notify) -> None:
    """Each run that failed, by name (even with --quiet: a result is missing)."""
    for f in failures[:20]:
        notify(f"error: run {f.name} failed: {f.reason}", True)
    if len(failures) > 20:
        notify(f"error: … and {len(failures) - 20} more failed runs", True)


def prices_for(sources: list, price_model: str | None, table: PriceTable, notify: Notify = quietly) -> list:
    """Per transcript or feed, what its calls are priced by: the table (each call at the model and
    time it recorded), or with ``--price-model`` that model's prices for every call. A model the
    table does not know is a warning (for a stream, once it has been read: ``price_warnings``)."""
    if price_model is not None:
        out: list[PriceTable | ModelPrices] = [price_warning(table, table.lookup(price_model), notify)] * len(sources)
    else:
        for t in sources:
            if not getattr(t, "streamed", False):
                price_warnings(table, t, notify)
        out = [table] * len(sources)
    cache_warnings(table, notify)  # (those of --price-model's lookup)
    return out


def recorded_models(source: Any) -> list[str]:
    """The models a transcript or feed recorded: its own and its calls'."""
    models = dict.fromkeys([source.model] + [u.get("model") for u in source.usage.values()])
    return [m for m in models if isinstance(m, str) and m and not m.startswith("<")]  # not <synthetic>


def price_warnings(table: PriceTable, source: Any, notify: Notify = quietly) -> None:
    for model in recorded_models(source):
        price_warning(table, table.lookup(model), notify)
    cache_warnings(table, notify)


def cache_warnings(table: PriceTable, notify: Notify = quietly) -> None:
    """The cached prices the lookups so far ignored (each rebuilt), once each."""
    for problem in table.problems():
        notify(f"warning: {problem}", False)


def price_warning(table: PriceTable, prices: ModelPrices, notify: Notify = quietly) -> ModelPrices:
    """An unknown model is a warning even with --quiet (it changes every cost), said once a
    command however many transcripts record it (a corpus of 100 said it 100 times)."""
    if prices.known or prices.model in table.warned:
        return prices
    table.warned.add(prices.model)
    if prices.model == NO_MODEL:  # (its loader said why)
        notify("warning: a recording names no model: its calls are unpriced (their costs are 0); --price-model NAME "
               "or --prices prices them", True)
    elif prices.priced_as:
        notify(f"warning: no prices for model {prices.model!r}: priced as {prices.priced_as}, its provider's "
               f"stand-in (an estimate; {table.read}); use --price-model or --prices", True)
    else:
        notify(f"warning: no prices for model {prices.model!r} and no provider known for it: unpriced (its costs "
               "are 0); use --price-model or --prices", True)
    return prices


def calibrations_for(sources: list, calibrate: bool | None, notify: Notify = quietly,
                     details: bool | None = None, tally: Tally | None = None) -> list[Calibration | None]:
    """Per loaded transcript or feed, the calibration its runs use: the fit to its recorded usage
    (``calibrate`` True: required, an error without usage; None: where it records the usage of
    enough calls, else a warning where it records some), or None (the policy's estimate).
    ``tally``: one part of a corpus: its lines for all the files are said at the end."""
    out: list[Calibration | None] = []
    fits: list[Calibration] = [] if tally is None else tally.fits
    estimated = 0  # files of many whose tokens are an estimate (too few calls with usage)
    many = len(sources) > 1 if tally is None else tally.sources > 1
    for t in sources:
        if calibrate is False or getattr(t, "streamed", False):
            out.append(None)
            continue
        cal, why = calibration_of(t, calibrate)
        estimated += say_calibration(t.path, cal, why, many, details, notify, fits)
        out.append(cal)
    if tally is not None:
        tally.estimated += estimated
        return out
    if len(sources) > 1 and fits:
        notify(calibrated_line(fits), False)
    if estimated:
        notify(f"warning: {estimated} transcript(s) record too few calls with usage to calibrate on: their tokens are "
               "estimated (each with -v)", False)
    return out


def calibration_of(t: Any, calibrate: bool | None) -> tuple[Calibration | None, str | None]:
    """A loaded transcript's or feed's calibration (``calibrations_for``), and why it has none where
    that is worth a warning."""
    transcript = getattr(t, "transcript", t)  # a loaded feed's
    if calibrate and 0 < usable_calls(transcript) < MIN_CALLS and not transcript.metadata.get("acompact"):
        return short(transcript)  # never a fit of 1 to 4 calls
    if calibrate:
        return fit_calibration(transcript), None
    return by_default(transcript)


def say_calibration(path: str, cal: Calibration | None, why: str | None, many: bool, details: bool | None,
                    notify: Notify, fits: list[Calibration]) -> int:
    """What is said of ``path``'s calibration (a fit joins ``fits``); 1 where it is one of many files
    whose tokens are an estimate (said together at the end), else 0."""
    estimated = 0
    if why and many:  # (many files: one line for them all, each with -v)
        notify(Detail(f"warning: {shown(path)}: {why}"), False)
        estimated = 1
    elif why:
        notify(f"warning: {shown(path)}: {why}", False)
    if cal is not None and cal.source == "recorded usage":
        fits.append(cal)
        line = (f"{shown(path)}: calibrated: {cal.overhead_tokens:,} overhead tokens + chars / "
                f"{cal.chars_per_token} (mape {cal.mape:.3f} over {cal.calls} calls)")
        notify(Detail(line) if (many if details is None else details) else line, False)
        if (odd := implausible(cal)) is not None:
            notify(f"warning: {shown(path)}: {odd}", False)
    return estimated


def calibrated_line(fits: list[Calibration]) -> str:
    """One line for the fits of many transcripts (each is said with --verbose)."""
    low, high = min(c.chars_per_token for c in fits), max(c.chars_per_token for c in fits)
    spread = f"{low:.2f}" if low == high else f"{low:.2f}–{high:.2f}"
    return (f"calibrated {len(fits):,} transcript(s): {spread} chars/token, mape ≤ {max(c.mape or 0 for c in fits):.3f}"
            " (each with -v)")


def warn_loaded(source: Any, notify: Notify = quietly) -> None:
    """The bad lines skipped and the warnings of a transcript or feed."""
    if source.skipped_lines:
        notify(f"warning: {shown(source.path)}: skipped {source.skipped_lines} bad line(s)", False)
    for w in source.warnings:
        notify(Detail(f"{shown(source.path)}: {w}") if isinstance(w, Note) else f"warning: {shown(source.path)}: {w}",
               False)


#: a corpus is read in parts of about this many bytes (or files): the command's process holds the
#: transcripts of one part at a time, and the runs' summaries of all (#32 §1)
PART_BYTES = 48 << 20
PART_FILES = 100


def parts_of(files: list[str]) -> list[list[str]]:
    """``files`` in consecutive parts of at most PART_BYTES (a bigger file alone) and PART_FILES."""
    parts: list[list[str]] = []
    part: list[str] = []
    size = 0
    for f in files:
        try:
            n = os.path.getsize(f)
        except OSError:
            n = 0  # (said when it is read)
        if part and (size + n > PART_BYTES or len(part) >= PART_FILES):
            parts.append(part)
            part, size = [], 0
        part.append(f)
        size += n
    return parts + [part] if part else parts


def read_parts(files: list[str], settings: Settings, notify: Notify, tally: Tally) -> Iterator[tuple[list, list, list]]:
    """The corpus a part at a time (``parts_of``): each part's transcripts, read, with their prices
    and calibrations; what is said of all the files is kept in ``tally`` for the end."""
    for part in parts_of(files):
        loaded = load_all(part, settings, notify, tally=tally)
        yield (loaded, prices_for(loaded, settings.price_model, settings.prices, notify),
               calibrations_for(loaded, settings.calibrate, notify, tally=tally))
        del loaded  # (before the next part is read)


def run_in_parts(files: list[str], policies: list, settings: Settings, notify: Notify, advance: Callable[..., None],
                 cluster: Any = None) -> tuple[Any, list[str], dict[str, str]]:
    """Every policy on every file, a part of the corpus at a time (each part read, calibrated,
    priced, run by the workers and let go): the runs (a ``GridRun``), the models the transcripts
    recorded, and each transcript's content hash. ``cluster``: the Dask cluster the parts' runs are
    sent to (``jobs/cluster.py``'s ``run_corpus`` decides)."""
    from ..corpus.compare import GridRun, jobs_for, run_jobs

    tally = Tally(sources=len(files))
    done = GridRun([], [], len(files) * len(policies))
    models: dict[str, None] = {}  # (in the order first recorded)
    hashes: dict[str, str] = {}
    read = 0
    parts = read_parts(files, settings, notify, tally)
    while True:
        try:
            got = next(parts, None)
        except KeyboardInterrupt as stop:  # between parts: the runs so far are kept
            if not done.results:
                raise
            done.interrupted = stop
            break
        if got is None:
            break
        loaded, prices, calibrations = got
        read += len(loaded)
        models.update(dict.fromkeys(m for t in loaded for m in recorded_models(t)))
        hashes.update({t.path: t.content_hash for t in loaded})
        offset = (read - len(loaded)) * len(policies)
        ran = run_jobs(loaded, jobs_for(len(loaded), policies), n_jobs=settings.jobs, prices=prices,
                       calibrations=calibrations, keep_recorded_compactions=settings.keep_recorded_compactions,
                       summarizer=(settings.summarizer, settings.live), on_result=advance,
                       executor=cluster, cache_ttl=settings.cache_ttl, cache_model=settings.cache_model,
                       window=settings.window)
        for r in ran.results:
            r.job += offset
        for f in ran.failures:
            f.job += offset
        done.results += ran.results
        done.failures += ran.failures
        del loaded, got
        if ran.interrupted is not None:
            done.interrupted = ran.interrupted
            break
    tally.say(notify)
    if not read and tally.skipped:
        raise none_read(len(tally.skipped))
    done.total = (len(files) - len(tally.skipped)) * len(policies)
    return done, list(models), hashes


class Finding(NamedTuple):
    """Which sessions a command reads when given none, or given many (#47 §1, §2): ``--since``,
    ``--until`` (``7d``, a date), and, with no path, ``--project`` and ``--harness``."""

    since: str | None = None
    until: str | None = None
    project: str | None = None
    harness: str | None = None
    #: the command that reads them (its hint names it)
    command: str = "replay"

    @classmethod
    def of(cls, options: dict[str, Any], command: str = "replay") -> "Finding":
        return cls(options.get("since"), options.get("until"), options.get("project"), options.get("harness"), command)


def input_files(paths: tuple[str, ...] | list[str], subagents: bool, finding: Finding = Finding(),
                notify: Notify = quietly) -> list[str]:
    """The files a command reads: its paths (folders expanded, a glob no shell expanded matched),
    kept by ``--since``/``--until``; with none, the user's own sessions from the harnesses' homes
    (said in a first line: where, and how many in each). Of several files, one that is no
    transcript is skipped and counted, as a folder's is."""
    from ..transcripts import FolderFile, deeper_folders, expand_inputs, is_store

    f = finding
    if f.since or f.until:
        from ..transcripts.homes import when  # (the harnesses' homes: only where a time or no path asks)

        since = when(f.since, "--since") if f.since else None
        until = when(f.until, "--until") if f.until else None
    else:
        since = until = None
    if not paths:
        return _home_files(f, since, until, subagents, notify)
    if f.project or f.harness:
        raise UsageError("--project and --harness choose among the sessions found without a path",
                         hint="give no path, or leave them out")
    files = expand_inputs(paths, subagents)
    if not subagents and any(os.path.isdir(p) or is_store(p) for p in paths):  # (a store's sub-sessions too)
        where = ("the folder(s)" if not any(map(is_store, paths)) else "the store(s)"
                 if not any(map(os.path.isdir, paths)) else "the folder(s) and store(s)")
        say_left_out(*left_out_subagents(paths), where, notify)
    say_too_deep(deeper_folders(paths), notify)
    if since is not None or until is not None:
        files = _written_between(files, since, until, notify)
    return [p if isinstance(p, FolderFile) else FolderFile(p) for p in files] if len(files) > 1 else files


def _home_files(f: Finding, since: float | None, until: float | None, subagents: bool,
                notify: Notify) -> list[str]:
    """The user's own sessions, from the harnesses' homes (where, and how many, said first)."""
    from ..transcripts import FolderFile
    from ..transcripts.homes import find, looked

    homes = find(since, until, f.project, f.harness)
    notify(looked(homes, harness=f.harness), False)
    local = [p for h in homes for p in h.kept]
    agents = [p for h in homes for p in h.agents]
    if subagents:
        local += agents
    elif agents:
        say_left_out(len(agents), subagents_cost(agents), "your sessions", notify)
    if not local:  # (a home missing is not a filter's doing)
        filtered = " with these filters" if any((f.since, f.until, f.project, f.harness)) else ""
        why = (f"none found in the harnesses' homes{filtered}" if homes else
               f"{f.harness}'s home is not on this machine" if f.harness else "no harness's home is on this machine")
        raise UsageError(f"no sessions to read: {why}",
                         hint=f"give a session file or folder: compactlab {f.command} session.jsonl")
    return [FolderFile(p) for p in local]


def _written_between(files: list[str], since: float | None, until: float | None, notify: Notify) -> list[str]:
    """The files last written between ``since`` and ``until`` (a store's sessions by their own time)."""
    from ..transcripts import written_at

    times = written_at(files)
    kept = [p for p in files if (since is None or times[p] >= since) and (until is None or times[p] <= until)]
    notify(f"--since/--until: {len(kept)} of {len(files)} file(s) last written then", False)
    if not kept:
        raise UsageError("no file was last written in that time", hint="widen --since/--until")
    return kept
