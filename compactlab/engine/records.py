"""The stable output schema (SPEC §7): one TurnRecord per call and one RunSummary per run.

Field names here are the JSON keys and CSV columns; change them only with a schema change.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, field, fields, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ..core import native_module
from ..metrics import METRICS, Numbers
from ..plain import dataclass


#: What the layers count, defined once: (the name in ``LayerStats``, its column in a call's
#: TurnRecord, its key in the RunSummary; None where it is not reported there). A layer adds to
#: a LayerStats; the engine copies a call's counts into its TurnRecord and the run's totals into
#: the RunSummary by these names. One counter, two names: a call's ``summarized`` is whether the
#: summary layer made a summary at that call, a run's ``summaries`` how many it made.
COUNTERS: list[tuple[str, str | None, str | None]] = [
    ("persisted", "persisted", "persisted"),
    ("persisted_chars", "persisted_chars", None),
    ("snipped", "snipped", "snipped"),
    ("micro_compacted", "micro_compacted", "micro_compacted"),
    ("summaries", "summarized", "summaries"),
    ("summary_input_chars", "summary_input_chars", None),
    ("summary_output_chars", "summary_output_chars", None),
    ("summary_input_tokens", None, "summary_input_tokens"),
    ("summary_output_tokens", None, "summary_output_tokens"),
    ("summary_cache_read_tokens", None, "summary_cache_read_tokens"),
    ("reactive", "reactive", "reactive"),
    ("manual", "manual", "manual"),
    ("custom", None, "custom"),
    ("summary_failures", None, None),
]
#: the counters of what a policy did to the context (LayerStats names, which are the RunSummary's
#: keys too) and the layer that counts each: none of them, and the context is what was sent
ACTIONS: dict[str, str] = {"persisted": "budget", "snipped": "snip", "micro_compacted": "micro",
                           "summaries": "summary", "reactive": "reactive", "manual": "manual", "custom": "custom"}
#: the counters a TurnRecord takes (LayerStats names) and its columns for them
TURN_COUNTERS = [(stat, column) for stat, column, _ in COUNTERS if column]
#: the counters a RunSummary takes (LayerStats names) and its keys for them
RUN_COUNTERS = [(stat, key) for stat, _, key in COUNTERS if key]


@dataclass(init=False, eq=False, repr=False)
class PythonTurnRecord:
    """One call: the context as sent and what the policy did to it (a row of calls.csv).

    The reference for the native core's record (``_native.TurnRecord``, ``native/src/records.rs``:
    the same columns, order and defaults, held as a Rust struct), which is ``TurnRecord`` wherever
    the native module is built, whichever core runs: a run's records are of one class in an install.
    This one is the record where it is not (the JSON, calls.csv and the summary's sums are written
    from it by orjson and Python, the native writers' reference).

    No __slots__: orjson serialises a dataclass from its __dict__ ~3x as fast (5,000 records:
    5.9 -> 2.1 ms), for 64 more bytes a record. Its ``__init__`` is written out (one a call:
    ``plain``'s generic one would cost more than compiling it does; ``tests/test_plain.py`` holds
    it to the fields)."""

    def __init__(self, call: int, message_index: int, raw_messages: int, raw_chars: int, raw_tokens: int,
                 messages: int = 0, chars: int = 0, tokens: int = 0, persisted: int = 0, persisted_chars: int = 0,
                 snipped: int = 0, micro_compacted: int = 0, summarized: int = 0, summary_input_chars: int = 0,
                 summary_output_chars: int = 0, reactive: int = 0, manual: int = 0, overflow: bool = False,
                 violations_introduced: int = 0, violations_inherited: int = 0, cache_read_tokens: int = 0,
                 cache_write_tokens: int = 0, input_cost_usd: float = 0.0, refs: int = 0, refs_retained: int = 0,
                 probes: int = 0, probes_kept: int = 0, probes_recoverable: int = 0) -> None:
        self.call = call
        self.message_index = message_index
        self.raw_messages = raw_messages
        self.raw_chars = raw_chars
        self.raw_tokens = raw_tokens
        self.messages = messages
        self.chars = chars
        self.tokens = tokens
        self.persisted = persisted
        self.persisted_chars = persisted_chars
        self.snipped = snipped
        self.micro_compacted = micro_compacted
        self.summarized = summarized
        self.summary_input_chars = summary_input_chars
        self.summary_output_chars = summary_output_chars
        self.reactive = reactive
        self.manual = manual
        self.overflow = overflow
        self.violations_introduced = violations_introduced
        self.violations_inherited = violations_inherited
        self.cache_read_tokens = cache_read_tokens
        self.cache_write_tokens = cache_write_tokens
        self.input_cost_usd = input_cost_usd
        self.refs = refs
        self.refs_retained = refs_retained
        self.probes = probes
        self.probes_kept = probes_kept
        self.probes_recoverable = probes_recoverable

    call: int
    message_index: int
    raw_messages: int
    raw_chars: int
    raw_tokens: int
    messages: int = 0
    chars: int = 0
    tokens: int = 0
    persisted: int = 0
    persisted_chars: int = 0
    snipped: int = 0
    micro_compacted: int = 0
    summarized: int = 0
    summary_input_chars: int = 0
    summary_output_chars: int = 0
    reactive: int = 0
    manual: int = 0
    overflow: bool = False
    violations_introduced: int = 0
    violations_inherited: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    input_cost_usd: float = 0.0
    refs: int = 0
    refs_retained: int = 0
    probes: int = 0  # hindsight probes of the reply (probes.py)
    probes_kept: int = 0  # of them, those the context sent holds
    probes_recoverable: int = 0  # of the others, those a persisted output the context points to holds

    def to_dict(self) -> dict[str, Any]:
        return dict(zip(TURN_COLUMNS, turn_values(self)))


def _record_class() -> type[PythonTurnRecord]:
    """The class of a call's record in this install: the native module's where it is built."""
    native = native_module()
    return PythonTurnRecord if native is None else native.TurnRecord  # type: ignore[no-any-return]


if TYPE_CHECKING:
    TurnRecord = PythonTurnRecord
else:
    #: a call's record: ``_native.TurnRecord`` where the native module is built, else ``PythonTurnRecord``
    TurnRecord = _record_class()

TURN_COLUMNS = [f.name for f in fields(PythonTurnRecord)]
#: the values of a TurnRecord in column order (one C call instead of a getattr per field)
turn_values = attrgetter(*TURN_COLUMNS)


@dataclass(slots=True, eq=False, repr=False)
class RunSummary(Mapping[str, Any]):
    """A run's totals (summary.json's "summary"): typed fields, read by their keys as the dict
    summary.json holds is (``s["recall"]``, ``s.get``, ``in``), so what reads a summary reads one
    made here and one read back from a file alike; its metric parts are ``numbers``.

    Slotted: a corpus command holds thousands (about 1 KB each, where the dict took 4 KB). Made
    by keywords, each field given or at its default (``compactlab.plain``'s ``__init__``: the one
    the standard library would compile for its 63 fields cost about 12 M instructions of every
    start-up)."""

    transcript: str
    format: str
    policy: str
    fingerprint: str
    calls: int = 0
    raw_tokens_total: int = 0
    tokens_total: int = 0
    reduction: float = 0.0
    peak_tokens: int = 0
    final_tokens: int = 0
    snipped: int = 0
    micro_compacted: int = 0
    persisted: int = 0
    persisted_files: list[dict[str, Any]] = field(default_factory=list)
    summaries: int = 0
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    reactive: int = 0
    manual: int = 0
    overflows: int = 0
    violations_introduced: int = 0
    violations_inherited: int = 0
    violations: list[dict[str, Any]] = field(default_factory=list)
    saved_transcripts: list[dict[str, Any]] = field(default_factory=list)
    cost_usd: float = 0.0
    raw_cost_usd: float = 0.0
    cost_usd_nocache: float = 0.0
    raw_cost_usd_nocache: float = 0.0
    retention: float = 1.0
    skipped_lines: int = 0
    # beyond the stable set of SPEC §7:
    refs: int = 0
    refs_retained: int = 0
    #: hindsight probes (probes.py): kept / probes, 1.0 when there are none
    recall: float = 1.0
    probes: int = 0
    probes_kept: int = 0
    #: not in the context, but in a persisted output it points to: recoverable / probes
    recoverable: float = 0.0
    probes_recoverable: int = 0
    #: per probe kind (probes.KINDS): {"probes", "kept", "recoverable"}
    probe_kinds: dict[str, dict[str, int]] = field(default_factory=dict)
    #: False: the probes were not looked for (a policy that never acts keeps them all: recall 1.0)
    probes_indexed: bool = True
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    price_model: str = ""
    #: where the prices of ``price_model`` come from (``ModelPrices.priced_by``): the table, or a stand-in's
    priced_by: str = ""
    #: input cost computed from the recorded usage fields (sources with recorded usage), else None
    recorded_input_cost_usd: float | None = None
    #: input and output cost the recorded usage implies: what compares with a bill
    recorded_cost_usd: float | None = None
    #: what the source itself recorded it was billed (mini-swe-agent's instance_cost), else None
    billed_cost_usd: float | None = None
    #: the recording's inline subagents (Claude Code 1.0.x sidechains: another conversation in the
    #: same file, not replayed): their calls and the input and output cost their usage implies
    #: (counted as ccusage counts them, shown apart); 0 / None where it has none
    sidechain_calls: int = 0
    recorded_sidechain_cost_usd: float | None = None
    #: the prompt cache's lifetime the run was priced with: the recording's (1-hour writes
    #: recorded: 1h), or --cache-ttl
    cache_ttl: str = "5m"
    #: calls made after the cache had expired; None where the source has no timestamps (no expiry)
    cache_expired_calls: int | None = None
    #: the token estimate the run used (calibration.Calibration as a dict): source ("recorded
    #: usage", "policy"), chars_per_token, overhead_tokens, mape, calls
    calibration: dict[str, Any] = field(default_factory=dict)
    #: the calls whose recorded cache read shows a prefix rewrite no compaction, expiry or change
    #: of model explains (cost.recorded_breaks); None without recorded usage
    recorded_cache_breaks: list[int] | None = None
    #: what the first call read from the cache an earlier session left (None without usage)
    cache_warm_start_tokens: int | None = None
    #: whether the run replayed recorded breaks or a warm start (under every policy: neither is a
    #: compaction, and a policy does not change what the harness or the provider did)
    cache_breaks_replayed: bool = False
    #: modelled against recorded cache reads, writes and input cost (cost.cache_ledger), for a run
    #: that sent what the recording sent (no layer acted; its compactions kept); else None
    cache_ledger: dict[str, Any] | None = None
    #: whose prompt-cache rules priced the run (cache_rules.RULES): the recorded model's
    #: provider, or --cache-model
    cache_model: str = "anthropic"
    #: the context window every call was judged on (engine/window.py), and in words where it came
    #: from ("200,000 tokens: Claude Code default; the recording compacted at 167,731")
    window_tokens: int = 0
    window_source: str = ""
    #: the trigger the policy's summary layer compacted at, in its unit (``summary.trigger``; its
    #: harness's own on the recording's window, ``summary.trigger_rule``; or its version's,
    #: ``summary.trigger_by_version``), and in words with where it came from; None: no summary layer
    summary_trigger: int | None = None
    summary_trigger_source: str = ""
    #: compaction's own cost: its summary requests (in cost_usd), priced as the policy builds them
    #: (summary.request: a fresh request, uncached; or the conversation's prefix, read from the cache)
    summary_cost_usd: float = 0.0
    summary_request: str = "fresh"
    #: of summary_input_tokens, those the summary requests read from the prompt cache
    summary_cache_read_tokens: int = 0
    #: the calls at which the policy's own step (``custom``) changed the context
    custom: int = 0
    #: the calls whose whole history (no compaction) is over the window judged on, but for those
    #: the recording shows answered: where no compaction does not fit (the one rule: corpus/guard.py)
    raw_overflows: int = 0
    #: the core that ran the replay's per-call parts it has (``compactlab/core.py``): python, or native
    #: (Rust: ``core.NATIVE_PARTS``); the figures are the same on both (differential tests)
    core: str = "python"
    #: the format a file ``compactlab convert`` wrote was recorded in (its harness: what a verdict
    #: says of that harness's settings), else None
    recorded_format: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def numbers(self) -> Numbers:
        """Its metric parts (``metrics.Numbers``): add runs' to total a corpus."""
        return Numbers.of(self)

    def without(self, leave_out: frozenset[str]) -> "RunSummary":
        """A copy with the lists and dicts of ``leave_out`` empty (what a corpus run sends back: its
        violations and files, which no corpus report reads, cost more to send than the rest)."""
        return replace(self, **{name: type(getattr(self, name))() for name in leave_out})

    def __getitem__(self, key: str) -> Any:
        if key not in _SUMMARY_FIELDS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(SUMMARY_KEYS)

    def __len__(self) -> int:
        return len(SUMMARY_KEYS)



def priced_by(pricing: Any) -> str:
    """Where a run's prices come from, in a phrase: its model's, or, where its calls recorded
    several models (a session that switched), each call at its own model's."""
    models = getattr(pricing, "models", ())
    if len(models) > 1:
        return f"each call at its model's prices in {pricing.prices.read} ({', '.join(models)})"
    return str(pricing.prices.priced_by())


def summarize(records: list[TurnRecord], totals: Any, *, transcript: Any, policy: str, fingerprint: str,
              pricing: Any, calibration: dict[str, Any] | None = None, persisted_files: list[dict[str, Any]],
              saved_transcripts: list[dict[str, Any]], violations: list[dict[str, Any]] | None = None,
              probe_kinds: dict[str, dict[str, int]] | None = None, probes_indexed: bool = True,
              window: tuple[int, str] = (0, ""), summary_request: str = "fresh", raw_overflows: int = 0,
              core: str = "python", summary_calls: SummaryCalls | None = None,
              trigger: tuple[int, str] | None = None) -> RunSummary:
    """A run's summary, built from its priced records, its layers' totals (``LayerStats``) and what
    its measures add at the end (``measures.Measures.totals``: its violations, its probes by kind);
    ``transcript`` gives the path, format and skipped lines; ``pricing`` is what ``cost.price_run``
    gave; ``summary_calls`` the run's summary requests, by call (``SummaryCalls``); ``trigger``: the
    summary layer's trigger and its words (``layers.summary.trigger_said``)."""
    violations = violations or []
    summary_calls = summary_calls or SummaryCalls()
    priced = pricing.priced
    summary_cost = _summary_cost(summary_calls, pricing, summary_request)
    counted = {key: getattr(totals, stat) for stat, key in RUN_COUNTERS}
    (n_refs, n_retained, n_probes, n_kept, n_recoverable, raw_total, total, peak, final, overflows, read,
     written), cost = _sums(records)
    # the run's shares, as metrics.METRICS defines them (a run is a corpus of one)
    parts = {"tokens_total": total, "raw_tokens_total": raw_total, "refs": n_refs, "refs_retained": n_retained,
             "probes": n_probes, "probes_kept": n_kept, "probes_recoverable": n_recoverable}
    return RunSummary(
        transcript=transcript.path,
        format=transcript.format,
        recorded_format=transcript.metadata.get("recorded_format"),
        policy=policy,
        fingerprint=fingerprint,
        calls=len(records),
        raw_tokens_total=raw_total,
        tokens_total=total,
        reduction=round(METRICS["reduction"].of(parts), 6),
        peak_tokens=peak,
        final_tokens=final,
        persisted_files=persisted_files,
        **counted,
        overflows=overflows,
        raw_overflows=raw_overflows,
        violations_introduced=sum(v["introduced"] for v in violations),
        violations_inherited=sum(not v["introduced"] for v in violations),
        violations=violations,
        saved_transcripts=saved_transcripts,
        cost_usd=round(cost + summary_cost, 6),
        raw_cost_usd=round(priced.raw, 6),
        cost_usd_nocache=round(priced.nocache + summary_cost, 6),
        raw_cost_usd_nocache=round(priced.raw_nocache, 6),
        retention=round(METRICS["retention"].of(parts), 6),
        skipped_lines=transcript.skipped_lines,
        refs=n_refs,
        refs_retained=n_retained,
        recall=round(METRICS["recall"].of(parts), 6),
        probes=n_probes,
        probes_kept=n_kept,
        recoverable=round(METRICS["recoverable"].of(parts), 6),
        probes_recoverable=n_recoverable,
        probe_kinds=probe_kinds or {},
        probes_indexed=probes_indexed,
        cache_read_tokens=read,
        cache_write_tokens=written,
        price_model=pricing.prices.model,
        priced_by=priced_by(pricing),
        **_recorded(pricing),
        calibration=calibration or {},
        cache_ttl=priced.ttl,
        cache_expired_calls=priced.expired,
        cache_breaks_replayed=bool(pricing.breaks),
        cache_ledger=pricing.ledger,
        cache_model=pricing.rules.provider,
        window_tokens=window[0],
        window_source=window[1],
        summary_trigger=trigger[0] if trigger is not None else None,
        summary_trigger_source=trigger[1] if trigger is not None else "",
        summary_cost_usd=round(summary_cost, 6),
        summary_request=summary_request,
        core=core,
    )


def _sums(records: list[TurnRecord]) -> tuple[list[int], float]:
    """What a run's summary sums of its records: the references, those retained, the probes, those
    kept and recoverable, the raw and the sent tokens, the peak and the last call's tokens, the
    overflows, the cache's reads and writes; and the input cost, as ``sum`` adds floats. The native
    core's records are summed in Rust (``records.rs``: ``record_sums``, this the reference)."""
    native = native_module()
    if native is not None and type(records) is list:
        made = native.record_sums(records, sys.version_info >= (3, 12))
        if made is not None:
            return made
    return ([sum(r.refs for r in records), sum(r.refs_retained for r in records), sum(r.probes for r in records),
             sum(r.probes_kept for r in records), sum(r.probes_recoverable for r in records),
             sum(r.raw_tokens for r in records), sum(r.tokens for r in records),
             max((r.tokens for r in records), default=0), records[-1].tokens if records else 0,
             sum(r.overflow for r in records), sum(r.cache_read_tokens for r in records),
             sum(r.cache_write_tokens for r in records)],
            sum(r.input_cost_usd for r in records))


class SummaryCalls:
    """A run's summary requests, by the call whose layers made them: ``(call, input tokens, of them
    read from the prompt cache, output tokens, requests)`` for each call that asked for a summary
    (``_summary_cost`` prices each at that call's model and time: a session that switched model
    compacted on the model it was on)."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, int, int]] = []

    def add(self, call: int, stats: Any) -> None:
        """The summary requests of ``call``'s layers (``LayerStats``), if they made any."""
        if stats.summary_input_tokens or stats.summary_output_tokens:
            requests = stats.summaries + stats.reactive + stats.manual + stats.summary_failures
            self.rows.append((call, stats.summary_input_tokens, stats.summary_cache_read_tokens,
                              stats.summary_output_tokens, max(requests, 1)))

    @property
    def calls(self) -> list[int]:
        return [row[0] for row in self.rows]


def _summary_cost(summary_calls: SummaryCalls, pricing: Any, summary_request: str) -> float:
    """What the run's summary requests cost, each call's at its prices (``RunPricing.summary_prices``:
    the summarizer's model's, else the model and time of the call that made them), each request's
    tier by its own size: fresh requests, or the conversation's prefix read from the cache and the
    rest written."""
    cost = 0.0
    for call, asked, read, output, requests in summary_calls.rows:
        # (each request at its own size's tier: the mean of the call's, tiered once)
        sp = pricing.summary_prices[call].at(asked // requests)._replace(tiers=())
        if read or summary_request == "prefix":
            cost += sp.input_cost(read, asked - read, pricing.priced.ttl) + sp.summary_cost(0, output)
        else:
            cost += sp.summary_cost(asked, output)
    return float(cost)


def _recorded(pricing: Any) -> dict[str, Any]:
    """What the recording says it cost (None where it records no usage) and its cache breaks."""
    recorded, billed, side = pricing.recorded, pricing.billed, pricing.sidechains
    return {"recorded_input_cost_usd": None if recorded is None else round(recorded.input, 6),
            "recorded_cost_usd": None if recorded is None else round(recorded.input + recorded.output, 6),
            "billed_cost_usd": None if billed is None else round(billed, 6),
            "sidechain_calls": pricing.sidechain_calls,
            "recorded_sidechain_cost_usd": None if side is None else round(side.input + side.output, 6),
            "recorded_cache_breaks": None if recorded is None else sorted(i for i in pricing.breaks if i),
            "cache_warm_start_tokens": None if recorded is None else pricing.breaks.get(0, 0)}


SUMMARY_KEYS = [f.name for f in fields(RunSummary)]
#: (name, default, default factory) of every field of RunSummary, in order: what its __init__ fills
_SUMMARY_FIELDS = frozenset(SUMMARY_KEYS)
#: the RunSummary keys that are single numbers (compare's columns)
#: the figures of a run's summary that compare's results hold, a column each (the summary's trigger too,
#: which differs by session where a harness's preset follows each one's window: ``summary.trigger_rule``)
NUMERIC_SUMMARY_KEYS = [f.name for f in fields(RunSummary)
                        if f.type in ("int", "float", "float | None") or f.name == "summary_trigger"]


@dataclass(init=False, repr=False)
class CompactionEvent:
    """A call at which the policy changed the context: which layers acted, what the context was
    before and after them, and the strings the agent later used that this event removed (each with
    the call that first needed it; probes.ProbeOutcome.removed_at ties a loss to its event). Its
    ``__init__`` is written out, as ``TurnRecord``'s (thousands a run)."""

    def __init__(self, call: int, layers: list[str], messages_before: int, messages_after: int, tokens_before: int,
                 tokens_after: int, results_cleared: int, snipped: int, summaries: int,
                 lost: list[tuple[str, int]] | None = None) -> None:
        self.call = call
        self.layers = layers
        self.messages_before = messages_before
        self.messages_after = messages_after
        self.tokens_before = tokens_before
        self.tokens_after = tokens_after
        self.results_cleared = results_cleared
        self.snipped = snipped
        self.summaries = summaries
        self.lost = [] if lost is None else lost

    call: int
    layers: list[str]
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    results_cleared: int  # tool results replaced by a placeholder (micro) or a preview (budget)
    snipped: int
    summaries: int  # summaries made: the summary layer's, reactive and manual ones
    lost: list[tuple[str, int]] = field(default_factory=list)  # (string, the call that first needed it)


@dataclass(eq=False, repr=False)
class Run:
    """The result of one replay: the summary, the per-call records, and extra report data."""

    summary: RunSummary
    calls: list[TurnRecord]
    policy: dict[str, Any] = field(default_factory=dict)  # the resolved policy config
    failed_summaries: list[dict[str, Any]] = field(default_factory=list)
    out_dir: str | None = None
    #: how long it took (kept out of the summary and the records: identical runs are identical)
    timing: dict[str, float] = field(default_factory=dict)
    #: every hindsight probe at every call, kept, recoverable or lost (probes.ProbeOutcome): probes.csv
    #: (a list; on the native core the ledger held in Rust, a sequence of them: ``_native.ProbeLedger``)
    probe_ledger: Sequence[Any] = field(default_factory=list)
    #: every call at which the policy changed the context, with what it lost: compactions.csv
    events: list[CompactionEvent] = field(default_factory=list)
    #: the messages sent at the calls the replay was asked to keep (``replay(keep_contexts=)``)
    contexts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary.to_dict(), "calls": [c.to_dict() for c in self.calls]}

    @property
    def lost_probes(self) -> list[Any]:
        """The probes the contexts sent did not hold (lost, or recoverable from a persisted output)."""
        return [p for p in self.probe_ledger if p.status != "kept"]
