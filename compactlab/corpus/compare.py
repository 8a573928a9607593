"""compare: policies x swept values x transcripts (SPEC §9, §10).

Each transcript is parsed once, its raw baseline computed once, and every run over it shares
them: the worker processes are forked after loading, so they inherit the loaded transcripts
instead of re-reading or unpickling them. Workers return only what the reports need: the run
summary and a few per-call series for the charts.
"""

from __future__ import annotations

from ..plain import dataclass
from ..plumbing.process import allocator_kept, collector_paused, usable_cores

import contextlib
import itertools
import operator
import os
import sys
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import field, replace
from typing import Any

import orjson

from ..engine.layers.harness_triggers import TITLES
from ..engine.measures.baseline import baseline_for
from ..engine.measures.violations import manual_orphans
from ..engine.records import RunSummary
from ..engine.cost.prices import ModelPrices, PriceTable, known_window, load_prices
from ..errors import PolicyError
from ..engine.policy import Override, Policy, load_policy, parse_override
from .sharing import Sharing
from .pool import Failure, Pool, can_fork, failure_of
from ..engine.loop import ReplayOptions, replay
from ..transcripts import Transcript
from .verdict import label_of


@dataclass(frozen=True)
class Job:
    index: int
    transcript: int  # index into the loaded transcripts
    policy: Policy
    swept: tuple[tuple[str, Any], ...]  # (key, value) of every swept key


@dataclass(slots=True)
class RunResult:
    """What a compare run sends back: the summary and the series the charts draw."""

    job: int
    transcript: str
    policy: str
    swept: dict[str, Any]
    summary: RunSummary  # (without what no corpus report reads: NOT_SENT)
    tokens: list[int] = field(default_factory=list)
    raw_tokens: list[int] = field(default_factory=list)
    events: dict[str, list[int]] = field(default_factory=dict)  # kind -> calls where it fired
    levels: dict[str, float] = field(default_factory=dict)  # trigger levels in tokens
    #: the compaction events that lost most of what the agent later used: (call, layers, strings
    #: lost, the first few of them), for the report's table beside the transcript's chart
    losses: list[tuple[int, str, int, list[str]]] | bytes = field(default_factory=list)  # (bytes: packed)
    #: of the violations the run introduced, the tool results orphaned by its manual compaction as
    #: the policy runs it, before the results are appended (``manual_orphans``)
    manual_orphans: int = 0

    def loss_rows(self) -> list[tuple[int, str, int, list[str]]]:
        """``losses``, packed or not."""
        if isinstance(self.losses, bytes):
            return [(call, layers, n, strings) for call, layers, n, strings in orjson.loads(self.losses or b"[]")]
        return self.losses

    def scored(self) -> "RunResult":
        """This result as a score needs it (a tune's trial): the summary alone, no series, events,
        levels or losses."""
        return RunResult(self.job, self.transcript, self.policy, self.swept, self.summary)

    def compacted(self, sharing: Sharing | None = None) -> "RunResult":
        """This result as the command's process keeps it, for a corpus of thousands of runs: what
        many runs of the grid hold equal one copy (``sharing``: a calibration, trigger levels, no
        events, a transcript's raw series, the summary's names and empty fields), the names interned, the series as arrays of machine
        integers, the losses packed (read back for a chart's table only)."""
        sharing = sharing or Sharing()
        sharing.fields(self.summary)
        self.transcript, self.policy = sys.intern(str(self.transcript)), sys.intern(str(self.policy))
        self.tokens = _numbers(self.tokens)  # type: ignore[assignment]
        self.raw_tokens = sharing.series(self.transcript, _numbers(self.raw_tokens))
        self.events = sharing.value({kind: sharing.value(calls) for kind, calls in self.events.items()})
        self.levels = sharing.value(self.levels)
        self.swept = sharing.value(self.swept)
        # (copied: the bytes orjson returns keep its 4 KB buffer, 60 times what they hold)
        self.losses = bytes(memoryview(orjson.dumps(self.losses))) if self.losses else b""
        return self


def _numbers(values: list[int]) -> array:
    """Token counts as machine integers: 4 bytes each where they fit (a call's tokens do), else 8."""
    try:
        return array("i", values)
    except OverflowError:
        return array("q", values)


def parse_sweep(item: str) -> tuple[str, list[Any]]:
    """``layer.key=v1,v2,...`` -> (key, [values]); each value read as a TOML value."""
    key, sep, values = item.partition("=")
    if not sep or not key.strip() or not values:
        raise PolicyError(f"--sweep {item!r}: expected KEY=V1,V2,... such as summary.trigger=20000,50000")
    return key.strip(), [parse_override(f"{key}={v.strip()}")[1] for v in values.split(",") if v.strip()]


def build_grid(policy_refs: list[str], overrides: list[str], sweeps: list[str],
               notes: list[str] | None = None) -> list[tuple[Policy, tuple]]:
    """Every policy x sweep-value combination, each resolved and validated (before any loading).
    A swept key a policy does not use (its layer is off) is run once for it, as None, and said in
    ``notes``; a key the policies count in different units (summary.trigger in chars for one, in
    tokens for another) is refused."""
    parsed = [parse_sweep(s) for s in sweeps]
    keys = [k for k, _ in parsed]
    if len(set(keys)) != len(keys):
        raise PolicyError("--sweep names a key twice")
    combos = list(itertools.product(*[vals for _, vals in parsed])) or [()]
    policies: list[tuple[Policy, tuple]] = []
    for ref in policy_refs:
        base = load_policy(ref, list(overrides))
        unused = [k for k in keys if not applies(base, k)]
        for k in unused:
            if notes is not None:
                notes.append(f"--sweep {k} does not apply to {base.name} (its {k.split('.')[0]} layer is off): "
                             "run once")
        seen: set[tuple] = set()
        for combo in combos:
            swept = tuple((k, None if k in unused else v) for k, v in zip(keys, combo))
            if swept in seen:
                continue
            seen.add(swept)
            sets: list[Override] = [*overrides, *((k, v) for k, v in swept if v is not None)]
            # (the --set overrides were checked with the base: an error here is a swept value's)
            given = ", ".join(f"--sweep {k}={v}" for k, v in swept if v is not None) or "--set"
            policies.append((load_policy(ref, sets, given), swept))
    sweep_units(policies, keys)  # refuses a key counted in different units
    return policies


#: the policy every compare measures the others against (no compaction), run where not listed
REFERENCE = "none"


def with_reference(grid: list[tuple[Policy, tuple]],
                   overrides: list[str]) -> tuple[list[tuple[Policy, tuple]], str, Policy | None]:
    """The grid with no compaction in it (added last where no listed policy is it), its label, and
    the policy added (None: a listed one is it);
    every run with a label of its own. It takes the --set keys of the token estimate (``size.*``)
    and no layer key: it stays none. A listed policy that never acts and estimates tokens as the
    reference does is the reference, whatever keys of layers it has off (``-p none --set
    reactive.window_tokens=...``): the same run, not a second one under the same name."""
    sizes = [o for o in overrides if o.strip().startswith("size.")]
    reference = load_policy(REFERENCE, sizes)
    grid = distinct(grid)
    keys = [k for k, _ in grid[0][1]] if grid else []
    for policy, swept in grid:
        if policy.fingerprint == reference.fingerprint or (not policy.acts and policy.size == reference.size):
            return grid, label_of(policy.name, dict(swept)), None
    taken = {label_of(p.name, dict(swept)) for p, swept in grid}
    if reference.name in taken:  # (a listed policy named none that compacts: the reference says what it is)
        reference = replace(reference, name=f"{REFERENCE} (no compaction)")
    return [*grid, (reference, tuple((k, None) for k in keys))], reference.name, reference


def distinct(grid: list[tuple[Policy, tuple]]) -> list[tuple[Policy, tuple]]:
    """The grid with each run once and under a label of its own: the same policy listed twice runs
    once; two different policies of one name (two files that say ``name = "mine"``) are told apart
    by their fingerprints (``mine@1a2b3c4d``)."""
    seen: dict[tuple[str, tuple], str] = {}
    names: dict[str, set[str]] = {}
    for policy, swept in grid:
        names.setdefault(label_of(policy.name, dict(swept)), set()).add(policy.fingerprint)
    out = []
    for policy, swept in grid:
        if (policy.fingerprint, swept) in seen:
            continue
        seen[(policy.fingerprint, swept)] = policy.name
        if len(names[label_of(policy.name, dict(swept))]) > 1:
            policy = replace(policy, name=f"{policy.name}@{policy.fingerprint[:8]}")
        out.append((policy, swept))
    return out


def trigger_of(policy: Policy, seen: Iterable[int] = ()) -> str | None:
    """What makes ``policy`` act first, in words (its summary's trigger, else its first cheap
    layer's); None for a policy that never acts. ``seen``: the triggers its runs' summaries
    compacted at, where they differ by session (its harness's own trigger on each of its own
    sessions' windows: ``summary.trigger_rule``)."""
    s = policy.summary
    at = sorted(set(seen))
    if s.enabled and len(at) > 1:
        return f"summary past {at[0]:,}–{at[-1]:,} tokens, {TITLES[s.trigger_rule]}'s own on each session's window"
    if s.enabled:
        return f"summary past {at[0] if at else s.trigger:,} {s.unit}"
    for name in policy.order:
        if getattr(policy, name).enabled:
            return f"its {name} layer"
    if policy.reactive.enabled:
        window = policy.reactive.window_tokens
        return f"reactive compaction past {window:,} tokens" if window else "reactive compaction past the model's window"
    return None


def triggers(grid: list[tuple[Policy, tuple]], units: dict[str, str], results: Iterable[Any] = ()) -> dict[str, str]:
    """Each grid entry's label and trigger (``trigger_of``, with the triggers its ``results``' runs
    compacted at), for the verdict's words."""
    seen: dict[str, set[int]] = {}
    for r in results:  # (by the grid entry's label: a swept policy's runs are its name's, each with its values)
        if (at := r.summary.get("summary_trigger")) is not None:
            seen.setdefault(label_of(r.policy, dict(r.swept), units), set()).add(at)
    out = {}
    for policy, swept in grid:
        label = label_of(policy.name, dict(swept), units)
        if (t := trigger_of(policy, seen.get(label, ()) if policy.summary.trigger_rule else ())) is not None:
            out[label] = t
    return out


def harness_settings(grid: list[tuple[Policy, tuple]], units: dict[str, str]) -> dict[str, list[str]]:
    """Each grid entry of a harness's or framework's preset, by label: the setting that makes it, in
    the harness's own form (``harness_settings.setting_of``), for the verdict to print."""
    from .harness_settings import setting_of

    out = {}
    for policy, swept in grid:
        if (found := setting_of(policy)) is not None:
            out[label_of(policy.name, dict(swept), units)] = [found[0], *found[1]]
    return out


def applies(policy: Policy, key: str) -> bool:
    """Whether ``policy`` uses ``key`` (``layer.name``): not when that layer is off."""
    section = getattr(policy, key.split(".")[0], None)
    return section is None or getattr(section, "enabled", True)


def unit_of(policy: Policy, key: str) -> str | None:
    """What a swept key counts: summary.trigger in its policy's summary.unit; a key named
    ``*_tokens`` / ``*_chars`` in tokens / chars; else nothing (a count, a switch)."""
    if key == "summary.trigger":
        return policy.summary.unit
    name = key.rsplit(".", 1)[-1]
    return "tokens" if name.endswith("_tokens") else "chars" if name.endswith("_chars") else None


def sweep_units(grid: list[tuple[Policy, tuple]], keys: list[str]) -> dict[str, str]:
    """The unit of each swept key (where it has one), the same for every policy that uses it;
    a key the policies count in different units is an error."""
    units: dict[str, str] = {}
    for key in keys:
        found: dict[str, list[str]] = {}
        for policy, swept in grid:
            if dict(swept).get(key) is not None and (unit := unit_of(policy, key)) is not None:
                found.setdefault(unit, [])
                if policy.name not in found[unit]:
                    found[unit].append(policy.name)
        if len(found) > 1:
            which = "; ".join(f"{', '.join(names)} in {unit}" for unit, names in found.items())
            raise PolicyError(f"--sweep {key}: the policies count it in different units ({which}), so one value "
                              "means different sizes", hint=f"compare them in separate runs, or give them one unit "
                              f"with --set {key.split('.')[0]}.unit=tokens" if key == "summary.trigger" else None)
        if found:
            units[key] = next(iter(found))
    return units


def jobs_for(n_transcripts: int, grid: list[tuple[Policy, tuple]]) -> list[Job]:
    """The product of transcripts x the grid, in a stable order."""
    jobs: list[Job] = []
    for t in range(n_transcripts):
        for policy, swept in grid:
            jobs.append(Job(len(jobs), t, policy, swept))
    return jobs


@dataclass
class GridContext:
    """What every run of a grid shares, per transcript and for all: a forked worker inherits it
    (the bound ``run`` is its work), a Dask cluster gets the transcripts scattered once."""

    transcripts: list[Transcript]
    prices: list[ModelPrices | PriceTable | None]
    calibrations: list[Any]
    keep_recorded_compactions: bool = False
    summarizer: tuple[str, Any] = ("stub", None)  # (kind, LiveOptions): each process builds its own
    cache_ttl: str | None = None
    cache_model: str | None = None
    window: int | None = None  # --window: every run judged on it (else each recording's: engine/window.py)

    def prepare(self) -> None:
        """Before workers are forked: the engine imported and each transcript's prices looked up
        in this process, which every worker inherits (each worker of each part of a corpus paid
        0.27 s of CPU to import them itself)."""
        from ..engine import loop  # noqa: F401  (the engine: layers, cost, prices)
        from ..summarizers import preload

        preload(self.summarizer[0])  # (a live summarizer's SDK: imported once, not by every worker)

        for t, prices in zip(self.transcripts, self.prices):
            if isinstance(prices, PriceTable) or prices is None:
                (prices or load_prices()).lookup(t.model)
                known_window(t.model)  # (a model priced by the corrections: genai-prices read here once)

    def run(self, job: "Job") -> "RunResult":
        """``job`` in this process (or a forked worker)."""
        i = job.transcript
        return run_job(job, self.transcripts[i], self.prices[i], self.calibrations[i], self.keep_recorded_compactions,
                       summarizer_of(self.summarizer), self.cache_ttl, self.cache_model, self.window)


#: each worker thread's summarizer and the spec it was built of (``summarizer_of``)
_BUILT: dict[tuple[int, int], tuple[Any, Any]] = {}


def summarizer_of(spec: tuple[str, Any]) -> Any:
    """The summarizer of the (kind, LiveOptions) ``spec``, built once a process and thread for the
    same spec object: a worker's runs share one (a live summarizer's client kept); a spec sent
    anew (a Dask task's copy) is built anew."""
    from ..summarizers import build_summarizer

    key = (os.getpid(), threading.get_ident())
    held = _BUILT.get(key)
    if held is None or held[0] is not spec:
        held = _BUILT[key] = (spec, build_summarizer(*spec))
    return held[1]


#: a run's summary keys no corpus report reads (replay's: every violation and file, the probes by kind)
NOT_SENT = frozenset({"violations", "persisted_files", "saved_transcripts", "probe_kinds"})


def run_job(job: Job, t: Transcript, prices: ModelPrices | PriceTable | None, calibration: Any, keep_recorded: bool,
            summarizer: Any, cache_ttl: str | None = None, cache_model: str | None = None,
            window: int | None = None) -> RunResult:
    """One run, and only what the reports need of it. ``summarizer`` is a Summarizer, or the
    (kind, LiveOptions) spec to build one from (a remote worker builds its own)."""
    if isinstance(summarizer, tuple):
        summarizer = summarizer_of(summarizer)
    run = replay(t, job.policy, ReplayOptions(summarizer=summarizer, keep_recorded_compactions=keep_recorded,
                                              prices=prices, cache_ttl=cache_ttl, calibration=calibration,
                                              cache_model=cache_model, window=window))
    summary = run.summary.without(NOT_SENT)
    events = {kind: [c.call for c in run.calls if getattr(c, attr)]
              for kind, attr in (("summary", "summarized"), ("reactive", "reactive"), ("manual", "manual"))}
    p = job.policy
    cpt = run.policy["size"]["chars_per_token"]  # the calibrated one where the run was calibrated
    levels = {"window": float(run.summary.window_tokens)}
    if p.summary.enabled and p.summary.unit != "messages":  # a trigger in messages is no token level
        overhead = run.policy["size"]["overhead_tokens"]  # a chars trigger is crossed at overhead + chars / cpt
        at = run.summary.summary_trigger if run.summary.summary_trigger is not None else p.summary.trigger
        levels["summary trigger"] = float(at if p.summary.unit == "tokens" else overhead + at / cpt)
    return RunResult(
        job=job.index,
        transcript=t.path,
        policy=p.name,
        swept=dict(job.swept),
        summary=summary,
        tokens=[c.tokens for c in run.calls],
        raw_tokens=[c.raw_tokens for c in run.calls],
        events=events,
        levels=levels,
        losses=[(e.call, "+".join(e.layers), len(e.lost), [s for s, _ in e.lost[:3]])
                for e in sorted((e for e in run.events if e.lost), key=lambda e: (-len(e.lost), e.call))[:LOSSES]],
        manual_orphans=manual_orphans(run.policy, run.summary.violations, events["manual"]),
    )



@dataclass
class RunFailure:
    """A run that gave no result, named by its transcript and policy (and swept values)."""

    job: int
    transcript: str
    policy: str
    swept: dict[str, Any]
    reason: str
    exit_code: int = 1  # 2: the run stopped on an input or usage error

    @property
    def name(self) -> str:
        swept = "".join(f" {k}={v}" for k, v in self.swept.items())
        return f"{self.transcript} × {self.policy}{swept}"


@dataclass
class GridRun:
    """What a grid gave: the runs that finished (in job order), those that failed, and the
    interrupt (Ctrl-C or SIGTERM) that stopped it early, if one did."""

    results: list[RunResult]
    failures: list[RunFailure]
    total: int
    interrupted: KeyboardInterrupt | None = None

    @property
    def exit_code(self) -> int:
        """0, or 1 / 2 when a run failed (2 when every failure was an input or usage error)."""
        if not self.failures:
            return 0
        return 2 if all(f.exit_code == 2 for f in self.failures) else 1


def run_jobs(
    transcripts: list[Transcript],
    jobs: list[Job],
    *,
    n_jobs: int | None = None,
    prices: list[ModelPrices | PriceTable | None] | None = None,
    calibrations: list[Any] | None = None,
    keep_recorded_compactions: bool = False,
    summarizer: tuple[str, Any] = ("stub", None),
    on_result: Callable[[RunResult], None] | None = None,
    executor: "str | Cluster | None" = None,
    cache_ttl: str | None = None,
    cache_model: str | None = None,
    window: int | None = None,
) -> GridRun:
    """Run every job. ``on_result`` sees each result as it arrives. A run that fails (its error,
    a crash, its worker killed) is a RunFailure and the others go on; an interrupt stops the
    workers and returns what had finished. Usage errors of the executor itself are raised.

    ``summarizer`` is (kind, LiveOptions): each process builds its own from it. ``executor``
    ``dask://HOST:PORT`` (or a ``Cluster`` connected to it) runs the grid on an existing Dask
    distributed cluster instead of the local worker processes (its workers read the files where they
    share them, else the loaded transcripts are scattered to them once).
    """
    context = GridContext(transcripts, prices or [None] * len(transcripts), calibrations or [None] * len(transcripts),
                          keep_recorded_compactions, summarizer, cache_ttl, cache_model, window)
    grid = GridRun([], [], len(jobs))
    sharing = Sharing()
    try:
        for t in transcripts:
            baseline_for(t)  # once, in the parent: every worker inherits it
        n_jobs = n_jobs or usable_cores()
        with contextlib.ExitStack() as stack:
            cluster = (executor if isinstance(executor, Cluster) or executor is None
                       else stack.enter_context(Cluster(executor)))
            produced = _dask_outcomes(jobs, context, cluster) if cluster else _outcomes(jobs, context, n_jobs)
            for index, outcome in produced:
                if isinstance(outcome, Failure):
                    grid.failures.append(_failure(jobs[index], outcome, context))
                    continue
                grid.results.append(outcome.compacted(sharing))
                if on_result:
                    on_result(outcome)
    except KeyboardInterrupt as stop:
        grid.interrupted = stop
    grid.results.sort(key=lambda r: r.job)
    grid.failures.sort(key=lambda f: f.job)
    return grid


def _failure(job: Job, failure: Failure, context: GridContext) -> RunFailure:
    return RunFailure(job.index, context.transcripts[job.transcript].path, job.policy.name, dict(job.swept),
                      failure.reason, failure.error.exit_code if failure.error is not None else 1)


def _dask_address(executor: str) -> str:
    """The scheduler address of ``dask://HOST:PORT`` (or ``dask://SCHEME://ADDRESS``), or a
    usage error for anything else."""
    from urllib.parse import urlsplit

    from ..errors import UsageError

    problem = UsageError(f"--executor {executor!r}: expected dask://HOST:PORT")
    if not executor.startswith("dask://"):
        raise problem
    address = executor.removeprefix("dask://")
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if not scheme.isalnum() or not rest:
        raise problem
    if scheme in ("tcp", "tls", "ws", "wss"):
        try:
            parts = urlsplit(f"//{rest}")
            port = parts.port
        except ValueError:
            raise problem from None
        if not parts.hostname or port is None or parts.path or parts.query or parts.fragment:
            raise problem
    return f"{scheme}://{rest}"


#: how long to try reaching a Dask scheduler before --executor is an error
DASK_CONNECT_TIMEOUT = "10s"

#: the Dask settings, as the environment of ``dask scheduler`` and ``dask worker``, of a cluster that
#: runs compactlab's batches: what it needs of Dask's upkeep, which costs an idle scheduler and two
#: nannied workers 0.12-0.14 CPU-seconds a second with Dask's defaults and 0.01 with these (#59 §5:
#: docs/using.md). The workers' sampling profiler (100 samples a second of each task's thread: for
#: the dashboard, which compactlab's batches do not use), the servers' event-loop check (every
#: 20 ms), the system monitor (every 500 ms) and the nannies' memory check (every 100 ms) run less.
CLUSTER_SETTINGS = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
}


#: the events with the most losses a compare run sends back for the report
LOSSES = 5


@dataclass(frozen=True)
class FileRef:
    """A transcript as a Dask worker reads it itself, from a path the cluster shares: its format
    (no detection), whether bad lines were skipped, and its content hash (the same bytes, or the
    run fails)."""

    path: str
    format: str
    skip_bad_lines: bool
    content_hash: str


#: the transcripts a Dask worker read, kept for its next runs (by path and content)
_READ: dict[tuple[str, str], Transcript] = {}
#: how many it keeps (a tune asks every transcript again at every trial)
READ_KEEP = 64
_READ_LOCK = threading.Lock()  # (a worker's threads share what it read)


def read_on_worker(ref: FileRef) -> Transcript:
    """The transcript ``ref`` names, read on this worker (once: kept for its next runs)."""
    from ..engine.measures import probe_cache
    from ..errors import InputError
    from ..transcripts import load_transcript

    key = (ref.path, ref.content_hash)
    with _READ_LOCK:
        if key in _READ:
            return _READ[key]
    t = load_transcript(ref.path, ref.format, skip_bad_lines=ref.skip_bad_lines)
    if t.content_hash != ref.content_hash:
        raise InputError(f"{ref.path}: not the file the command read (it changed, or the worker's path is another "
                         "file)")
    probe_cache.baseline_of(t, write=False)  # (the command stored the probes it found)
    with _READ_LOCK:
        while len(_READ) >= READ_KEEP:
            del _READ[next(iter(_READ))]
        return _READ.setdefault(key, t)


def run_job_from_file(job: Job, ref: FileRef, *args: Any) -> RunResult:
    """``run_job`` on a transcript the worker reads itself."""
    return run_job(job, read_on_worker(ref), *args)


#: batches a Dask compare sends per worker thread: a task carries runs, not one (a task's cost on a
#: cluster, its scheduling and its result's trip, is about a run's), and four a thread keep every
#: thread busy to the end however long the runs (#59 §5)
BATCHES_PER_THREAD = 4


def batches(jobs: list[Job], threads: int) -> list[list[Job]]:
    """``jobs`` in ``BATCHES_PER_THREAD`` batches per thread (``in_batches``), the runs of one
    transcript together, so a worker reads it once."""
    return in_batches(sorted(jobs, key=lambda j: (j.transcript, j.index)), threads)


def in_batches(items: list[Any], threads: int) -> list[list[Any]]:
    """``items`` in ``BATCHES_PER_THREAD`` batches per thread (fewer where there are fewer items),
    each a run of consecutive items."""
    if not items:
        return []
    size = -(-len(items) // min(len(items), max(1, threads) * BATCHES_PER_THREAD))
    return [items[i:i + size] for i in range(0, len(items), size)]


def run_batch(batch: list[tuple[Job, Any, Any, Any]], from_file: bool, *args: Any) -> list[tuple[int, RunResult | Failure]]:
    """A Dask task: each (job, its transcript or ``FileRef``, prices, calibration) run in turn, each
    run's error its own failure (the batch's other runs go on). The worker's collector is paused
    meanwhile (``collector_paused``: its full passes traversed every transcript the worker keeps),
    and its allocator keeps what the runs free (``allocator_kept``)."""
    out: list[tuple[int, RunResult | Failure]] = []
    with collector_paused(), allocator_kept():
        for job, transcript, prices, calibration in batch:
            try:
                work = run_job_from_file if from_file else run_job
                out.append((job.index, work(job, transcript, prices, calibration, *args)))
            except Exception as exc:
                out.append((job.index, failure_of(job.index, exc)))
    return out


def _readable(paths: list[str]) -> bool:
    """Whether this process (a Dask worker) can read every one of ``paths``."""
    return all(os.access(p, os.R_OK) for p in paths)


def client_class() -> Any:
    """distributed's ``Client``, its package imported with numpy kept out where numpy is not
    imported yet. The one use distributed's client makes of numpy at import is the buffers it
    receives a message into (``distributed.protocol.utils.host_array``: ``numpy.empty``, which
    skips zeroing them, else a ``bytearray``: its own fallback), and importing numpy is about 0.15
    CPU-seconds of the client's 0.45 (``import distributed``): a fixed cost of every compare on a
    cluster, a third of what one of 200 trajectories costs over local processes (docs/speed.md,
    "Dask without numpy in its client"). numpy imports as before once distributed is in; the workers,
    the cluster's own processes, import it as they do. (An ImportError says distributed is
    missing.)"""
    hide = "numpy" not in sys.modules and "distributed" not in sys.modules
    if hide:
        sys.modules["numpy"] = None  # type: ignore[assignment]  # (``import numpy`` raises ImportError)
    try:
        from distributed import Client
    finally:
        if hide and "numpy" in sys.modules and sys.modules["numpy"] is None:
            del sys.modules["numpy"]
    return Client


class Cluster:
    """An existing Dask distributed cluster a corpus job runs on (``--executor dask://HOST:PORT``):
    connected on creation (a usage error where it cannot be), closed on leaving the ``with``."""

    #: the transcripts last sent (``send``): themselves, whether the workers read the files, what they got
    _sent: tuple[list[Transcript], bool, list[Any]] | None = None

    def __init__(self, executor: str) -> None:
        from ..errors import UsageError

        address = _dask_address(executor)
        try:
            Client = client_class()
        except ImportError:
            raise UsageError("--executor dask:// needs Dask distributed",
                             hint="pip install 'compactlab[dask]'") from None
        try:
            self.client = Client(address, timeout=DASK_CONNECT_TIMEOUT)
        except Exception as exc:  # unreachable, refused, or an address Dask cannot use
            raise UsageError(f"--executor {address}: cannot reach the Dask scheduler: {exc}".splitlines()[0]) from None

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def shares(self, paths: list[str]) -> bool:
        """Whether every worker can read every one of ``paths`` (absolute) itself."""
        return all(self.client.run(_readable, paths).values())

    def send(self, transcripts: list[Transcript]) -> tuple[bool, list[Any]]:
        """The loaded ``transcripts`` as the workers get them: whether they read the files
        themselves (a shared path: each a ``FileRef``), else each sent to every worker — asked and
        sent once for the same transcripts (a tune's every batch of trials runs on them)."""
        held = self._sent
        if held is not None and len(held[0]) == len(transcripts) and all(map(operator.is_, held[0], transcripts)):
            return held[1], held[2]
        refs = [FileRef(os.path.abspath(t.path), t.format, t.skipped_lines > 0, t.content_hash) for t in transcripts]
        # the workers read the files themselves where they all can (a shared path): only the runs'
        # summaries cross the network; else the transcripts are sent to them once
        shared = self.shares([r.path for r in refs])
        sent: list[Any] = refs if shared else self.client.scatter(transcripts, broadcast=True)
        self._sent = (list(transcripts), shared, sent)
        return shared, sent

    @property
    def threads(self) -> int:
        return sum(self.client.nthreads().values()) or 1

    def batches(self, items: list[Any]) -> list[list[Any]]:
        """``items`` as the tasks that carry them (``in_batches``)."""
        return in_batches(items, self.threads)

    def each(self, work: Callable[..., Any], batches: list[Any], *args: Any) -> Iterator[tuple[int, Any]]:
        """``work(batch, *args)`` of each batch on the workers: (the batch's place, what it returned or
        the exception that lost it), as each finishes; an interrupt cancels those not finished."""
        from distributed import as_completed as dask_completed

        futures = {self.client.submit(work, batch, *args, pure=False): i for i, batch in enumerate(batches)}
        try:
            for future in dask_completed(futures):
                try:
                    yield futures[future], future.result()
                except Exception as exc:  # its worker lost for good
                    yield futures[future], exc
        except BaseException:
            self.client.cancel(list(futures))
            raise


def _dask_outcomes(jobs: list[Job], context: GridContext,
                   cluster: Cluster) -> Iterator[tuple[int, RunResult | Failure]]:
    c = context
    shared, sent = cluster.send(c.transcripts)
    parts = batches(jobs, cluster.threads)
    work = [[(job, sent[job.transcript], c.prices[job.transcript], c.calibrations[job.transcript]) for job in batch]
            for batch in parts]
    for i, got in cluster.each(run_batch, work, shared, c.keep_recorded_compactions, c.summarizer, c.cache_ttl,
                               c.cache_model, c.window):
        if isinstance(got, BaseException):  # every run of the batch
            for job in parts[i]:
                yield job.index, failure_of(job.index, got)
        else:
            yield from got


def _outcomes(jobs: list[Job], context: GridContext, n_jobs: int) -> Iterator[tuple[int, RunResult | Failure]]:
    if n_jobs <= 1 or len(jobs) <= 1 or not can_fork():
        for job in jobs:
            try:
                yield job.index, context.run(job)
            except Exception as exc:
                if os.environ.get("COMPACTLAB_DEBUG"):
                    raise
                yield job.index, failure_of(job.index, exc)
        return
    context.prepare()  # (once, here: every worker inherits it)
    # (a transcript's runs to one worker: what they share is worked out once, as in one process)
    with Pool(jobs, context.run, n_jobs, groups=[job.transcript for job in jobs]) as pool:
        yield from pool.outcomes()
