"""The stable output schema (SPEC §7): one TurnRecord per call and one RunSummary per run.

Field names here are the JSON keys and CSV columns; change them only with a schema change.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from operator import attrgetter
from typing import Any


@dataclass
class TurnRecord:
    """One call: the context as sent and what the policy did to it (a row of calls.csv).

    No __slots__: orjson serialises a dataclass from its __dict__ ~3x as fast (5,000 records:
    5.9 -> 2.1 ms), for 64 more bytes a record."""

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

    def to_dict(self) -> dict[str, Any]:
        return dict(zip(TURN_COLUMNS, turn_values(self)))


TURN_COLUMNS = [f.name for f in fields(TurnRecord)]
#: the values of a TurnRecord in column order (one C call instead of a getattr per field)
turn_values = attrgetter(*TURN_COLUMNS)


@dataclass
class RunSummary:
    """A run's totals (summary.json's "summary")."""

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
    runtime_s: float = 0.0
    # beyond the stable set of SPEC §7:
    refs: int = 0
    refs_retained: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    price_model: str = ""
    #: input cost computed from the recorded usage fields (sources with recorded usage), else None
    recorded_input_cost_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SUMMARY_KEYS = [f.name for f in fields(RunSummary)]
#: the RunSummary keys that are single numbers (compare's columns)
NUMERIC_SUMMARY_KEYS = [f.name for f in fields(RunSummary) if f.type in ("int", "float", "float | None")]


@dataclass
class Run:
    """The result of one replay: the summary, the per-call records, and extra report data."""

    summary: RunSummary
    calls: list[TurnRecord]
    policy: dict[str, Any] = field(default_factory=dict)  # the resolved policy config
    failed_summaries: list[dict[str, Any]] = field(default_factory=list)
    out_dir: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary.to_dict(), "calls": [c.to_dict() for c in self.calls]}
