"""The replay engine (SPEC §3): walk a transcript call by call through a policy.

For each call (recorded assistant message): append the messages before it to the working
context (running manual compaction where the previous reply called the compact tool), run the
policy's cheap layers and the summary layer, compact reactively while over the window, then
check and measure the context as it would be sent, keep a TurnRecord, and append the recorded
reply. The context only grows by appends between calls, and layers report the first position
they changed, so sizes and invariants are updated from there instead of from scratch.

The engine walks the calls of a loaded :class:`Transcript` (whose raw baseline is computed once
and shared by every run over it) or of a :class:`TranscriptStream`, read as it goes: then the raw
baseline is built alongside and no message outlives its place in the working context. Prices
apply to the token counts once the run is over, when a stream has told which model it recorded.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from os import PathLike
from types import ModuleType
from typing import Any, Protocol

from .baseline import BaselineBuilder, RawBaseline, baseline_for
from .context import Context
from .cost import ModelPrices, PriceTable, load_prices
from .invariants import InvariantTracker, classify
from .layers import CHEAP, NOTHING, LayerStats, RunEnv, manual, reactive, summary
from .messages import Entry, add_tool_names
from .outputs import OutputDir
from .policy import Policy, fingerprint_of
from .records import Run, RunSummary, TurnRecord
from .sizing import TokenEstimator, list_chars
from .summarizers import StubSummarizer, Summarizer
from .transcripts import RecordedCompaction, Transcript, TranscriptStream

#: messages a stream reads ahead of the replay
READ_BATCH = 256
#: one call: (call number, position of its assistant message, the messages since the previous
#: call's, that assistant message)
Call = tuple[int, int, list[Entry], Entry]


class TokenCounter(Protocol):
    def count(self, messages: list[dict]) -> int: ...


def _loaded_calls(transcript: Transcript, names: dict[str, str]) -> Iterator[Call]:
    entries = transcript.entries
    done = 0
    for call, pos in enumerate(transcript.call_positions):
        reply = entries[pos]
        add_tool_names(names, reply)
        yield call, pos, entries[done:pos], reply
        done = pos + 1


def _streamed_calls(stream: TranscriptStream, names: dict[str, str], base: BaselineBuilder | None,
                    restarts: dict[int, RecordedCompaction] | None) -> Iterator[Call]:
    """The calls of a stream, building its raw baseline on the way unless the stream brings it;
    read to the end (a bad line after the last call fails the run as it fails a load)."""
    pending: list[Entry] = []
    call = pos = seen = 0
    compactions = stream.compactions
    # read a batch, then replay it: alternating message by message is slower (6% of an s08 run
    # on 55 MB), and a batch holds only a few hundred messages more in memory
    for batch in stream.batches(READ_BATCH):
        for entry in batch:
            if base is not None:
                base.add(entry)
            while restarts is not None and seen < len(compactions) and compactions[seen].position == pos:
                restarts[pos] = compactions[seen]  # recorded just before this message
                seen += 1
            if entry.role == "assistant":
                add_tool_names(names, entry)
                yield call, pos, pending, entry
                call += 1
                pending = []
            else:
                pending.append(entry)
            pos += 1


def replay(
    transcript: Transcript | TranscriptStream,
    policy: Policy,
    *,
    summarizer: Summarizer | None = None,
    estimator: TokenEstimator | None = None,
    out_dir: str | PathLike | None = None,
    out: OutputDir | None = None,
    dry_run: bool = False,
    write_transcripts: bool = False,
    keep_recorded_compactions: bool = False,
    prices: ModelPrices | PriceTable | None = None,
    counter: TokenCounter | None = None,
) -> Run:
    """Replay ``transcript`` through ``policy``. With no ``out_dir`` nothing is written; with one,
    the persisted outputs are written into a fresh folder put in its place when the run ends (and
    removed if it fails). ``out``: a prepared output folder the caller owns (commits or rolls
    back) instead, to write its reports beside the persisted outputs first.

    ``prices`` are a model's, or a price table (default: the built-in one) to look up the model
    the transcript recorded (else the table's default model). A ``counter`` (exact token counts,
    e.g. ``messages.count_tokens``) measures the contexts sent and the raw ones, and decides the
    reactive window; layer triggers keep using the estimator. It needs a loaded transcript.
    """
    streamed = isinstance(transcript, TranscriptStream)
    if streamed and counter:
        raise ValueError("exact token counts need the whole raw history: load the transcript, do not stream it")
    started = time.perf_counter()
    estimator = estimator or TokenEstimator(policy.size.chars_per_token, policy.size.overhead_tokens)
    owned = out is None
    if out is None:
        out = OutputDir(out_dir, dry_run)
    env = RunEnv(
        summarizer=summarizer or StubSummarizer(),
        estimator=estimator,
        out=out,
        tool_names={},  # filled as the calls are read: a name is known from its tool_use on
        write_transcripts=write_transcripts,
    )
    cheap = [(CHEAP[name], getattr(policy, name)) for name in policy.order if getattr(policy, name).enabled]
    window = policy.reactive.window_tokens
    restarts: dict[int, RecordedCompaction] | None = None
    if keep_recorded_compactions:
        restarts = {c.position: c for c in transcript.compactions}
    base: RawBaseline
    if streamed and transcript.raw_baseline is not None:  # the stream's reader builds it
        base = transcript.raw_baseline
        calls = _streamed_calls(transcript, env.tool_names, None, restarts)
    elif streamed:
        builder = BaselineBuilder(keep=False)
        base = builder.base
        calls = _streamed_calls(transcript, env.tool_names, builder, restarts)
    else:
        base = baseline_for(transcript)
        calls = _loaded_calls(transcript, env.tool_names)
    manual_tool = policy.manual.tool if policy.manual.enabled else None

    def measure(ctx: Context) -> int:
        return counter.count(ctx.messages) if counter else estimator.tokens(ctx.chars)

    def prepare(ctx: Context, stats: LayerStats) -> Context:
        for layer, config in cheap:
            ctx, st = layer(ctx, config, env)
            if st is not NOTHING:
                stats.add(st)
        if policy.summary.enabled:
            ctx, st = summary(ctx, policy.summary, env)
            if st is not NOTHING:
                stats.add(st)
        return ctx

    def append(ctx: Context, first: int, pending: list[Entry], pos: int, stats: LayerStats) -> Context:
        """The messages since the previous call (positions ``first``..), restarting the context
        from the summary of a recorded compaction where one happened, up to the call at ``pos``."""
        if not restarts:
            ctx.extend(pending)
            return ctx
        for i, entry in enumerate([*pending, None], first):
            if i in restarts:  # a compaction the recording did: restart from its summary
                ctx = Context([restarts[i].summary])
                stats.changed_at(0)
            if entry is not None:
                ctx.append(entry)
        assert i == pos
        return ctx

    ctx = Context()
    tracker = InvariantTracker()
    records: list[TurnRecord] = []
    totals = LayerStats()
    seen: dict[tuple, dict] = {}
    sent_len = 0  # length of the context last sent: the next call can reuse its prefix
    prev_tokens = 0
    done = 0
    manual_pending = False
    try:
        if owned:
            out.prepare()
        for call, pos, pending, reply in calls:
            env.call = call
            stats = LayerStats()
            if manual_pending and policy.manual.mode != "after_results":
                ctx, st = manual(ctx, policy.manual, env, policy.summary)
                stats.add(st)
                if st.manual and policy.manual.mode == "replace_results":
                    # seed 004 appends its own message instead of the tool results
                    ctx.extend(e for e in pending if not e.results)
                    done, pending = pos, []
            ctx = append(ctx, done, pending, pos, stats)
            if manual_pending and policy.manual.mode == "after_results":
                ctx, st = manual(ctx, policy.manual, env, policy.summary)
                stats.add(st)

            ctx = prepare(ctx, stats)
            tokens = measure(ctx)  # what is sent, unless it is too long and reactive compaction acts
            retries = 0
            while policy.reactive.enabled and retries < policy.reactive.max_retries and tokens > window:
                retries += 1
                ctx, st = reactive(ctx, policy.reactive, env, policy.summary)
                stats.add(st)
                if not st.reactive:
                    break  # it changed nothing
                ctx = prepare(ctx, stats)
                tokens = measure(ctx)

            dirty = sent_len if stats.lowest_changed is None else min(sent_len, stats.lowest_changed)
            tracker.update(ctx.entries, dirty)
            raw_counts = base.counts_at(call)
            introduced = inherited = 0
            if tracker.total:
                sent_counts = tracker.counts()
                for v, is_new in classify(tracker.violations(), sent_counts, raw_counts):
                    introduced += is_new
                    inherited += not is_new
                    key = (v.kind, v.tool_use_id, v.origin, is_new)
                    if key not in seen:
                        seen[key] = {"kind": v.kind, "call": call, "message_index": v.message_index,
                                     "tool_use_id": v.tool_use_id, "introduced": is_new}
            # prompt caching: the prefix unchanged since the previous call is read, the rest written
            if call == 0:
                read = 0
            elif dirty > 0:
                n = len(ctx.entries)  # sum the shorter side: the kept prefix, or what changed after it
                kept = (sum(e.chars for e in ctx.entries[:dirty]) if dirty < n - dirty
                        else ctx.chars_sum - sum(e.chars for e in ctx.entries[dirty:]))
                prefix = list_chars(kept, dirty)
                read = round(tokens * prefix / ctx.chars) if counter else estimator.tokens(prefix)
                read = min(read, tokens, prev_tokens)
            else:
                read = min(estimator.overhead_tokens, tokens)  # system prompt and tools stay cached
            raw_tokens = (counter.count([e.message for e in transcript.entries[:pos]]) if counter
                          else estimator.tokens(base.chars[call]))
            refs = base.refs.pop(call, ()) if streamed else base.refs.get(call, ())  # a stream's: let them go
            retained = 0
            for origin, block in refs:
                j = ctx.find_origin(origin)
                if j is not None and block not in ctx.entries[j].changed:
                    retained += 1
            records.append(TurnRecord(
                call=call,
                message_index=pos,
                raw_messages=base.messages[call],
                raw_chars=base.chars[call],
                raw_tokens=raw_tokens,
                messages=len(ctx),
                chars=ctx.chars,
                tokens=tokens,
                persisted=stats.persisted,
                persisted_chars=stats.persisted_chars,
                snipped=stats.snipped,
                micro_compacted=stats.micro_compacted,
                summarized=stats.summaries,
                summary_input_chars=stats.summary_input_chars,
                summary_output_chars=stats.summary_output_chars,
                reactive=stats.reactive,
                manual=stats.manual,
                overflow=tokens > window,
                violations_introduced=introduced,
                violations_inherited=inherited,
                cache_read_tokens=read,
                cache_write_tokens=tokens - read,
                refs=len(refs),
                refs_retained=retained,
            ))
            prev_tokens = tokens
            totals.add(stats)
            sent_len = len(ctx)
            ctx.append(reply)
            done = pos + 1
            manual_pending = manual_tool in reply.tool_names
    except BaseException:
        if owned:
            out.rollback()
        if streamed:
            transcript.close()
        raise
    if owned:
        out.commit()

    if not isinstance(prices, ModelPrices):
        prices = (prices or load_prices()).lookup(transcript.model)
    raw_cost = 0.0
    prev_raw = 0
    for r in records:  # in call order, as the costs of a recording add up
        r.input_cost_usd = prices.input_cost(r.cache_read_tokens, r.cache_write_tokens)
        raw_read = min(prev_raw, r.raw_tokens)
        raw_cost += prices.input_cost(raw_read, r.raw_tokens - raw_read)
        prev_raw = r.raw_tokens


    violations = sorted(seen.values(), key=lambda v: (v["call"], v["message_index"]))
    summary_cost = prices.summary_cost(totals.summary_input_tokens, totals.summary_output_tokens)
    n_refs = sum(r.refs for r in records)
    n_retained = sum(r.refs_retained for r in records)
    usage = transcript.usage
    recorded_cost = (sum(prices.recorded_input_cost(usage[r.message_index]) for r in records
                         if r.message_index in usage) if usage else None)
    raw_total = sum(r.raw_tokens for r in records)
    total = sum(r.tokens for r in records)
    resolved = policy.resolved()
    summary_record = RunSummary(
        transcript=transcript.path,
        format=transcript.format,
        policy=policy.name,
        fingerprint=fingerprint_of(resolved),
        calls=len(records),
        raw_tokens_total=raw_total,
        tokens_total=total,
        reduction=round(1 - total / raw_total, 6) if raw_total else 0.0,
        peak_tokens=max((r.tokens for r in records), default=0),
        final_tokens=records[-1].tokens if records else 0,
        snipped=totals.snipped,
        micro_compacted=totals.micro_compacted,
        persisted=totals.persisted,
        persisted_files=env.persisted_files,
        summaries=totals.summaries,
        summary_input_tokens=totals.summary_input_tokens,
        summary_output_tokens=totals.summary_output_tokens,
        reactive=totals.reactive,
        manual=totals.manual,
        overflows=sum(r.overflow for r in records),
        violations_introduced=sum(v["introduced"] for v in violations),
        violations_inherited=sum(not v["introduced"] for v in violations),
        violations=violations,
        saved_transcripts=env.saved_transcripts,
        cost_usd=round(sum(r.input_cost_usd for r in records) + summary_cost, 6),
        raw_cost_usd=round(raw_cost, 6),
        cost_usd_nocache=round(prices.nocache_cost(total) + summary_cost, 6),
        raw_cost_usd_nocache=round(prices.nocache_cost(raw_total), 6),
        retention=round(n_retained / n_refs, 6) if n_refs else 1.0,
        skipped_lines=transcript.skipped_lines,
        runtime_s=round(time.perf_counter() - started, 4),
        refs=n_refs,
        refs_retained=n_retained,
        cache_read_tokens=sum(r.cache_read_tokens for r in records),
        cache_write_tokens=sum(r.cache_write_tokens for r in records),
        price_model=prices.model,
        recorded_input_cost_usd=None if recorded_cost is None else round(recorded_cost, 6),
    )
    return Run(
        summary=summary_record,
        calls=records,
        policy=resolved,
        failed_summaries=env.failed_summaries,
        out_dir=out.path,
    )


class _ReplayModule(ModuleType):
    """``compactlab.replay`` is both this module and the function: importing the submodule makes
    it the package's attribute ``replay``, shadowing the lazily exported function, so the module
    itself can be called as the function (``from compactlab import replay; replay(t, p)`` works
    whatever was imported before)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Run:
        return replay(*args, **kwargs)


sys.modules[__name__].__class__ = _ReplayModule
