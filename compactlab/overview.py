"""What is in a transcript before any policy runs (``compactlab inspect``)."""

from __future__ import annotations

from typing import Any, TypedDict

from .engine.measures.baseline import baseline_for
from .corpus.calibration import MIN_CALLS, by_default, calibrate, prompt_tokens, recorded_tokens, sent_chars, short
from .transcripts.messages import block_type
from .engine.sizing import TokenEstimator
from .transcripts import FORMATS, Transcript


class Overview(TypedDict, total=False):
    """What ``inspect`` reports of a transcript (its JSON keys); the recorded-usage keys are there
    when the transcript recorded usage, the format's own (``inspect_facts``) when it has any."""

    transcript: str
    format: str
    title: str | None
    session_id: str | None
    model: str | None  # the transcript's (its last reply's that names one)
    #: the calls of each model the recording names, most used first (a session that switched model)
    models: dict[str, int]
    messages: int
    calls: int
    tool_calls: int
    raw_chars: int
    tools: dict[str, dict[str, int]]
    largest_results: list[dict[str, Any]]
    violations: list[dict[str, Any]]
    raw_tokens_per_call: list[int]
    raw_tokens_by: str  # the estimate the token figures use: calibrated, or chars / 4
    raw_growth: dict[str, int]
    skipped_lines: int
    unanswered_at_end: list[str]
    recorded_compactions: list[dict[str, Any]]
    warnings: list[str]
    context_window: str  # the window a replay judges every call on, and where it comes from
    recorded_prompt_tokens_total: int
    recorded_calls: list[dict[str, Any]]
    calibration: dict[str, Any]
    recorded_cache_breaks: list[dict[str, Any]]
    cache_ledger: dict[str, Any] | None


def _models(transcript: Transcript) -> dict[str, int]:
    """How many of its calls recorded each model, most used first (first used first on a tie)."""
    counts: dict[str, int] = {}
    for usage in transcript.usage.values():
        if isinstance(model := usage.get("model"), str) and model:
            counts[model] = counts.get(model, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def unanswered_at_end(transcript: Transcript) -> list[str]:
    """Tool calls of the last assistant message that the recording never answered."""
    calls = transcript.call_positions
    if not calls:
        return []
    last = transcript.entries[calls[-1]]
    answered = {f.tool_use_id for e in transcript.entries[calls[-1] + 1:] for f in e.results}
    return [t for t in last.tool_use_ids if t not in answered]


def overview(transcript: Transcript, top: int = 10) -> dict[str, Any]:
    """What ``inspect`` reports. Token figures are a replay's estimate: the fit to the recorded
    usage where a replay would calibrate (``raw_tokens_by``), else chars / 4, and say which."""
    sent = sent_chars(transcript) if transcript.usage else None  # (one replay of none, shared below)
    cal = by_default(transcript, sent)[0] if sent is not None else None
    est = TokenEstimator(cal.chars_per_token, cal.overhead_tokens) if cal else TokenEstimator()
    base = baseline_for(transcript, probes=False)
    names = transcript.tool_names
    tools: dict[str, dict[str, int]] = {}
    for e in transcript.entries:
        if e.role == "assistant" and e.tool_use_ids:
            for b in e.message["content"]:
                if block_type(b) == "tool_use":
                    t = tools.setdefault(b.get("name", ""), {"count": 0, "total_chars": 0, "max_chars": 0})
                    t["count"] += 1
    results = []
    for e in transcript.entries:
        for f in e.results:
            name = names.get(f.tool_use_id, "unknown")
            t = tools.setdefault(name, {"count": 0, "total_chars": 0, "max_chars": 0})
            t["total_chars"] += f.size
            t["max_chars"] = max(t["max_chars"], f.size)
            results.append((f.size, f.tool_use_id, name, e.origin))
    results.sort(key=lambda r: (-r[0], r[3]))
    raw_tokens = [est.tokens(c) for c in base.chars]
    n = len(raw_tokens)
    growth = {f"p{int(q * 100)}": raw_tokens[min(n - 1, int(q * (n - 1)))] for q in (0.25, 0.5, 0.75, 1.0)} if n else {}
    info = Overview(
        transcript=transcript.path,
        format=transcript.format,
        title=transcript.title,
        session_id=transcript.session_id,
        model=transcript.model,
        models=_models(transcript),
        messages=len(transcript.entries),
        calls=len(transcript.call_positions),
        tool_calls=sum(len(e.tool_use_ids) for e in transcript.entries),
        raw_chars=sum(e.chars for e in transcript.entries),
        tools=dict(sorted(tools.items(), key=lambda kv: -kv[1]["total_chars"])),
        largest_results=[
            {"tool_use_id": tid, "tool": name, "chars": size, "message_index": pos}
            for size, tid, name, pos in results[:top]
        ],
        violations=[
            {"kind": v.kind, "call": call, "message_index": v.message_index, "tool_use_id": v.tool_use_id,
             "introduced": False, "context_messages": base.messages[call]}
            for call, v in base.first_seen
        ],
        raw_tokens_per_call=raw_tokens,
        raw_tokens_by=(f"calibrated: {cal.overhead_tokens:,} + chars / {cal.chars_per_token:g}"
                       if cal and cal.source == "recorded usage" else
                       f"the {cal.source}: {cal.overhead_tokens:,} + chars / {cal.chars_per_token:g}" if cal
                       else "chars / 4 (not calibrated)"),
        raw_growth=growth,
        skipped_lines=transcript.skipped_lines,
        unanswered_at_end=unanswered_at_end(transcript),
        recorded_compactions=[
            {"message_index": c.position, "trigger": c.trigger, "pre_tokens": c.pre_tokens, "summary_chars": c.summary.chars}
            for c in transcript.compactions
        ],
        warnings=transcript.warnings,
        context_window=window_of(transcript).describe(),
    )
    facts = _format_specific(transcript)
    if facts.get("subagents"):  # (billed, not in this file: what their recordings cost, as ccusage counts them)
        facts["subagents_recorded_cost_usd"] = round(sum(_recorded_cost_of(s["path"]) for s in facts["subagents"]), 6)
    return {**info, **_recorded(transcript, sent, est), **facts}  # the format's own keys on top


def _recorded_cost_of(path: str) -> float:
    """What a subagent's recording says it cost with output (0 where it cannot be read)."""
    from .engine.cost.pricing import recorded_total
    from .errors import CompactlabError
    from .transcripts import load_transcript

    try:
        return recorded_total(load_transcript(path)) or 0.0
    except CompactlabError:
        return 0.0


def _recorded(transcript: Transcript, sent: list[int] | None, est: TokenEstimator) -> dict[str, Any]:
    """Recorded usage per call beside the estimates (``est``: the overview's), and the
    calibration fit (SPEC §5); ``sent``: the chars of the contexts the recording sent."""
    if not transcript.usage or sent is None:
        return {}
    tokens = recorded_tokens(transcript)
    base = baseline_for(transcript, probes=False)
    out: dict[str, Any] = {
        "recorded_prompt_tokens_total": sum(tokens),
        "recorded_calls": [
            {"call": i, "recorded_prompt_tokens": t, "raw_tokens_estimate": est.tokens(base.chars[i]),
             "sent_chars": sent[i]}
            for i, t in enumerate(tokens)
        ],
    }
    if not transcript.metadata.get("acompact"):
        # a fit of 1 to 4 calls says nothing: the format's prior stands for it, labelled so
        cal = calibrate(transcript, sent) if len([t for t in tokens if t > 0]) >= MIN_CALLS else short(transcript, sent)[0]
        if cal is not None:
            out["calibration"] = cal.to_dict()
        out.update(_cache_facts(transcript, cal))
    return out


def _cache_facts(transcript: Transcript, cal: Any) -> dict[str, Any]:
    """The recording's cache breaks and how far the cache model is from what it recorded: a
    replay of ``none`` (calibrated where the fit has calls enough) as the recording ran it."""
    from .engine.cost.cache_rules import RULES
    from .engine.cost.pricing import expected_reads
    from .engine.feeds import as_feed
    from .engine.loop import replay
    from .engine.policy import load_policy

    # (its cache figures only: no probe is looked for)
    run = replay(as_feed(transcript, probes=False), load_policy("none"), keep_recorded_compactions=True,
                 calibration=cal)
    s = run.summary
    usage = transcript.usage

    def previous(i: int) -> int | None:  # (a break after a call that recorded no usage: none to show)
        u = usage.get(run.calls[i - 1].message_index) if i else None
        return prompt_tokens(u) if u else None

    # (under a cache that keeps the previous reply too, a break is a read short of the previous
    # prompt and reply, which a read may pass the previous prompt alone and still fall short of)
    rules = RULES.get(s.cache_model)
    expected = (expected_reads([usage.get(c.message_index) or {} for c in run.calls], rules)
                if usage and rules is not None and rules.reply_cached else {})
    breaks = [{"call": i, "read_tokens": usage[run.calls[i].message_index].get("cache_read_input_tokens", 0),
               "previous_prompt_tokens": previous(i), "expected_read_tokens": expected.get(i)}
              for i in s.recorded_cache_breaks or []]
    return {"recorded_cache_breaks": breaks, "cache_warm_start_tokens": s.cache_warm_start_tokens,
            "cache_ledger": s.cache_ledger, "recorded_input_cost_usd": s.recorded_input_cost_usd,
            "recorded_cost_usd": s.recorded_cost_usd, "sidechain_calls": s.sidechain_calls,
            "recorded_sidechain_cost_usd": s.recorded_sidechain_cost_usd,
            "modelled_input_cost_usd": round(sum(c.input_cost_usd for c in run.calls), 6), "priced_by": s.priced_by}


def _format_specific(transcript: Transcript) -> dict[str, Any]:
    """What the transcript's format module adds (its ``inspect_facts``, where it has one)."""
    facts = getattr(FORMATS.get(transcript.format), "inspect_facts", None)
    out = facts(transcript) if facts else {}
    if transcript.metadata.get("sidechain_lines") and "sidechain_lines" not in out:  # (a converted session's)
        out["sidechain_lines"] = transcript.metadata["sidechain_lines"]
    return out


def window_of(transcript: Transcript) -> Any:
    """The context window a replay judges the transcript's calls on (engine/window.py)."""
    from .engine.window import resolve

    model = next((u.get("model") for u in transcript.usage.values() if u.get("model")), None) or transcript.model
    return resolve(fmt=transcript.format, model=model, metadata=transcript.metadata, usage=transcript.usage.values(),
                   compactions=transcript.compactions)


def session_row(transcript: Transcript) -> dict[str, Any]:
    """One line of ``inspect DIR``."""
    import os

    return {
        "transcript": transcript.path,
        "format": transcript.format,
        # (a session of a store, OpenCode's: the bytes of its rows, as its loader counted them)
        "bytes": os.path.getsize(transcript.path) if os.path.isfile(transcript.path) else
        int(transcript.metadata.get("bytes", 0)),
        "calls": len(transcript.call_positions),
        "tool_calls": sum(len(e.tool_use_ids) for e in transcript.entries),
        # (None: the recording keeps no usage, which is not a prompt of no tokens)
        "recorded_tokens": sum(prompt_tokens(u) for u in transcript.usage.values()) if transcript.usage else None,
        "compactions": len(transcript.compactions),
        "title": transcript.title,
    }


def session_rows(files: list[str], input_format: str | None = None,
                 skip_bad_lines: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """``session_row`` of each file, and why each file that is no transcript was skipped (a file
    a folder or several paths stood for: a stray package.json, a harness's own log)."""
    from .transcripts import FolderFile, UnknownFormat, load_transcript

    rows, skipped = [], []
    for p in files:
        try:
            rows.append(session_row(load_transcript(p, input_format, skip_bad_lines=skip_bad_lines)))
        except UnknownFormat as exc:
            if not isinstance(p, FolderFile):
                raise
            skipped.append(exc.message)
    return rows, skipped
