"""What is measured of each context a replay sends (#44 §2), behind one protocol (``base.Measure``):
the prompt cache's reads and writes (``cost.pricing.PromptCache``), the raw baseline (``baseline.RawSize``), tool-pairing violations (``violations.Violations``),
retention (``retention.Retention``) and recall (``recall``). ``measures_for`` is the one place that
chooses each one's implementation; the simple one of each stays the reference a faster one is
tested against (recall: ``Recall`` beside ``IntactFirstRecall``).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableSequence
from typing import Any

from ...core import native_module
from ..cost.pricing import NativePromptCache, PromptCache
from ..records import CompactionEvent
from .base import CallAt, Measure
from .baseline import RawBaseline, RawSize
from .probes import ProbeOutcome
from .recall import IntactFirstRecall, Recall, shared_messages
from .retention import Retention
from .violations import Violations, shared_facts

#: the recall every replay uses; ``Recall`` is the reference it is held to
RECALL: type[Recall] = IntactFirstRecall


class Measures:
    """A run's measures, in call order, and what the loop asks of them: each call's rows stored
    in its record, the run's totals, the probes' ledger and the compaction events charged with
    what they lost. (A plain class: a NamedTuple's generated code is part of every command's
    start.)"""

    __slots__ = ("_recall", "_all", "prompt_cache", "raw", "violations", "retention", "native")

    def __init__(self, cache: PromptCache | NativePromptCache, raw: RawSize, violations: Violations, retention: Retention,
                 recall: Recall) -> None:
        self._recall = recall
        #: the prompt cache's prefix model: the loop reads what it last sent (a layer's facts) and sets
        #: its provider's rules at the first call; pricing takes its rules and replies at the end
        self.prompt_cache = cache
        #: the others, by name, for a loop that measures them itself (``engine/keeping.py``, in Rust)
        self.raw, self.violations, self.retention = raw, violations, retention
        self._all: tuple[Measure, ...] = (cache, raw, violations, retention, recall)
        #: the native core's measures of a call, all but recall in one crossing (``_native.CallMeasures``,
        #: ``native/src/turns.rs``; these are its reference), or None where Python measures
        self.native: Any = None

    def __iter__(self) -> Iterator[Measure]:
        return iter(self._all)

    def at_call(self, at: CallAt, context: Any, record: Any) -> None:
        """Measure the context sent at a call: each measure's row into the call's record (its
        fields are the record's columns)."""
        native = self.native
        if native is not None:  # (the prompt cache, raw size, violations and retention in Rust)
            native.measure(at.call, context.entries, context.origin_log, at.changed_from, at.tokens, at.reply_chars,
                           record)
            self.recall_at(at, context, record)
            return
        for m in self._all:
            row = m.at_call(at, context)
            if row is not None:
                for name, value in zip(row._fields, row):
                    setattr(record, name, value)

    def native_recall(self) -> tuple | None:
        """What a native loop asks recall's row of each call of itself (``Recall.natively``), or None."""
        return self._recall.natively()

    def recall_at(self, at: CallAt, context: Any, record: Any) -> None:
        """Recall's row of a call into its record (the native loops measure the rest themselves)."""
        recalled = self._recall.at_call(at, context)
        if recalled is not None:
            record.probes, record.probes_kept, record.probes_recoverable = recalled

    def totals(self) -> dict[str, Any]:
        """What they add to the run's summary, together (``summarize``'s keywords)."""
        out: dict[str, Any] = {}
        for m in self:
            total = m.finish()
            out.update(zip(total._fields, total))
        return out

    def ledger(self) -> MutableSequence[ProbeOutcome]:
        """Every probe's outcome, call by call (probes.csv)."""
        return self._recall.ledger

    def charged(self, events: list[CompactionEvent]) -> list[CompactionEvent]:
        """``events``, each with the used strings it removed (``Recall.losses``)."""
        return self._recall.losses(events)


def measures_for(base: RawBaseline, env: Any, *, counter: Any = None, entries: list | None = None,
                 keep_refs: bool = True, recall: type[Recall] | None = None, core: str = "python",
                 acts: bool = True, memo: dict | None = None) -> Measures:
    """The measures of a run over ``base`` (its feed's raw baseline): ``env`` is the run's
    ``RunEnv``; ``counter`` exact token counts over ``entries`` (the prompt cache's prefix is then a
    share of them); ``keep_refs`` False lets a stream's references go as they are used; ``recall``
    another implementation than ``RECALL`` (a test's); ``core`` the core that runs the measures it
    has (``compactlab/core.py``: ``native``, the prompt cache, the violations' tracker and recall's check in
    Rust). ``acts`` False (a policy that never acts, the recording's compactions not kept): recall is
    not measured, whether or not the baseline has the probes (a corpus job's has them for its other
    policies), so that such a run reports the same whatever path read its file. ``memo``: the
    feed's memo of a recording replayed more than once (a loaded one), where recall's native check
    keeps what it read of the recording's own messages for the next run (``shared_messages``), and
    the violations' tracker their facts (``shared_facts``); a stream's native baseline hands its
    tracker the facts it read (``base.handed``)."""
    native = native_module() if core == "native" else None
    shared = shared_messages(memo, native) if native is not None and memo is not None and acts else None
    known = None  # (the native tracker's table: a stream's baseline's, or what a recording's runs know)
    if native is not None:
        known = base.handed if base.handed is not None else shared_facts(memo, native) if memo is not None else None
    cache = PromptCache if native is None else NativePromptCache
    measures = Measures(cache(env.estimator, exact=counter is not None),
                        RawSize(base, env.estimator, counter, entries), Violations(base, native, known),
                        Retention(base.refs, keep_refs),
                        (recall or RECALL)(base.probes if acts else {}, env, base.probes_indexed and acts, native,
                                           shared))
    if native is not None and counter is None:  # (exact counts: measured in Python, the cache's share by them)
        c = measures.prompt_cache
        assert isinstance(c, NativePromptCache)
        measures.native = native.CallMeasures(c.core, measures.violations, base, measures.retention, env.estimator,
                                              (measures.violations.log.table, base.violation_counts))
    return measures


__all__ = ["CallAt", "Measure", "Measures", "PromptCache", "RECALL", "Recall", "IntactFirstRecall", "measures_for"]
