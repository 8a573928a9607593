"""Writers for one replay: terminal table, JSON, CSV and Markdown, plus the files under --out."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

import orjson

from ..core import in_use, native_module
from ..plumbing.outputs import OutputDir

if TYPE_CHECKING:
    from ..engine.policy import Policy
from ..engine.measures.violations import MEANING, manual_orphans, message_cell, where
from ..engine.records import TURN_COLUMNS, Run, RunSummary, TurnRecord, turn_values
from ..metrics import Numbers
from .sparkline import sparkline
from .terminal import VALUE_WIDEST, Printer, Table
from .text import csv_bytes, csv_cell, json_bytes, md_cell, md_text, visible, write_json_pieces


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def ledger_line(ledger: dict) -> str:
    """The cache ledger in words: how far the modelled reads, writes and cost are from the recording's."""
    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x * 100:+.1f}%"

    return (f"reads {pct(ledger['read_error'])}, writes {pct(ledger['write_error'])}, "
            f"input cost {pct(ledger['cost_error'])} ({ledger['calls']:,} calls)")


#: the folder ``replay -`` keeps standard input in (cli._standard_input)
STDIN_FOLDER = "compactlab-stdin-"


def title_of(path: str) -> str:
    """How a run's transcript is named to a person: relative to the current folder where it is
    under it; standard input as "-" (not its temporary file)."""
    if os.path.basename(path) == "stdin" and os.path.basename(os.path.dirname(path)).startswith(STDIN_FOLDER):
        return "- (standard input)"
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def _estimate(cal: dict) -> str:
    """The token estimate a run used, in words."""
    fit = f"{cal.get('overhead_tokens', 0):,} + chars / {cal.get('chars_per_token')}"
    if cal.get("source") == "recorded usage":
        return f"the fit to recorded usage: {fit} (mape {cal.get('mape', 0):.3f}, {cal.get('calls', 0):,} calls)"
    if "overhead fitted to" in str(cal.get("source", "")):
        return f"the {cal['source']}: {fit} (an estimate: too few calls recorded usage to fit both)"
    return f"the {cal.get('source', 'policy')}'s estimate: {fit}"


def _cache_rows(s: Any) -> list[tuple[str, str]]:
    if s.cache_model == "none":
        return [("cache reads / writes (tokens)", f"none: {s.cache_write_tokens:,} tokens at the input price"),
                ("prompt cache TTL", "none: no prompt cache (the recording read and wrote none)")]
    expiry = ("no timestamps: no expiry" if s.cache_expired_calls is None
              else f"{s.cache_expired_calls:,} call(s) after it expired")
    return [("cache reads / writes (tokens)", f"{s.cache_read_tokens:,} / {s.cache_write_tokens:,}"),
            ("prompt cache TTL", f"{s.cache_ttl}, {expiry}")]


def _summary_cost(s: Any) -> str:
    how = ("the conversation's prefix plus an instruction, reading the cache" if s.summary_request == "prefix"
           else "fresh requests, uncached")
    return f"${s.summary_cost_usd:,.4f} ({how}; in the policy's cost)"


def summary_rows(run: Run) -> list[tuple[str, str]]:
    s = run.summary
    raw_peak = max((c.raw_tokens for c in run.calls), default=0)
    cal = s.calibration or {}
    rows = [
        ("calls", f"{s.calls:,}"),
        ("tokens estimated by", _estimate(cal)),
        ("tokens billed (raw → policy)", f"{s.raw_tokens_total:,} → {s.tokens_total:,}"),
        ("reduction", _pct(s.reduction)),
        ("peak context tokens (raw → policy)", f"{raw_peak:,} → {s.peak_tokens:,}"),
        ("final context tokens", f"{s.final_tokens:,}"),
        ("messages snipped", f"{s.snipped:,}"),
        ("tool results micro-compacted", f"{s.micro_compacted:,}"),
        ("tool results persisted", f"{s.persisted:,} ({len(s.persisted_files)} files)"),
        ("summaries / reactive / manual", f"{s.summaries} / {s.reactive} / {s.manual}"),
        *([("calls your own step changed", f"{s.custom:,} ({run.policy['custom']['call']})")]
          if run.policy.get("custom", {}).get("enabled") else []),
        ("summary tokens (in → out)", f"{s.summary_input_tokens:,} → {s.summary_output_tokens:,}"
         + (f" ({s.summary_cache_read_tokens:,} read from the cache)" if s.summary_cache_read_tokens else "")),
        ("compaction's own cost", _summary_cost(s)),
        ("input cost, cached (raw → policy)", f"${s.raw_cost_usd:,.4f} → ${s.cost_usd:,.4f}"),
        ("input cost, no cache (raw → policy)", f"${s.raw_cost_usd_nocache:,.4f} → ${s.cost_usd_nocache:,.4f}"),
        *([("priced by", s.priced_by)] if s.priced_by else []),
        *_cache_rows(s),
        ("retention", f"{s.retention:.3f} ({s.refs_retained:,} of {s.refs:,} references)" if s.refs else "1.000 (no references)"),
        ("recall (hindsight probes)", _recall(s)),
        *([("probes by kind (kept / probes)", ", ".join(f"{k} {v['kept']:,}/{v['probes']:,}"
                                                        for k, v in s.probe_kinds.items()))] if s.probes else []),
        ("context window (judged on)", s.window_source),
        *([("summary trigger", s.summary_trigger_source)] if s.summary_trigger_source else []),
        ("overflows", f"{s.overflows:,}"),
        ("violations introduced / inherited", f"{s.violations_introduced} / {s.violations_inherited}"),
        # (what runs in Rust: --version says; the figures are the same on both)
        ("core", s.core if s.core == "python" else f"{s.core} (parts in Rust)"),
    ]
    if any(t["path"] for t in s.saved_transcripts):  # (those a summary replaced, written with --write-transcripts)
        rows.append(("saved transcripts", f"{sum(1 for t in s.saved_transcripts if t['path'])} written"))
    rows += _recorded_rows(s)
    if run.failed_summaries:
        rows.append(("calls that lost their summary", ", ".join(str(f["call"]) for f in run.failed_summaries[:20])))
    if s.skipped_lines:
        rows.append(("bad lines skipped", f"{s.skipped_lines:,}"))
    return rows


def _recorded_rows(s: Any) -> list[tuple[str, str]]:
    """What the recording says it cost, and how the cache model compares with it."""
    rows = []
    if s.recorded_input_cost_usd is not None:
        if s.cache_ledger:  # like with like: the run sent what the recording sent
            ledger = s.cache_ledger  # over the calls that recorded usage
            part = f" ({ledger['calls']:,} of {s.calls:,} calls recorded usage)" if ledger["calls"] < s.calls else ""
            rows.append(("input cost: modelled / recorded usage",
                         f"${ledger['modelled_input_cost_usd']:,.4f} / ${s.recorded_input_cost_usd:,.4f}{part}"))
        else:  # the session as it ran, not this policy: its own line, said as such
            rows.append(("input cost of the session as recorded (its usage)", f"${s.recorded_input_cost_usd:,.4f}"))
    if s.recorded_cost_usd is not None:  # (what compares with a bill: input and output, each call at its prices)
        output = s.recorded_cost_usd - (s.recorded_input_cost_usd or 0)
        rows.append(("recorded cost, input + output (its usage)", f"${s.recorded_cost_usd:,.4f} (input "
                     f"${s.recorded_input_cost_usd or 0:,.4f} + output ${output:,.4f})"))
    if s.cache_ledger:
        rows.append(("cache model vs recording", ledger_line(s.cache_ledger)))
    if s.recorded_cache_breaks:
        rows.append(("recorded cache breaks", "call(s) " + ", ".join(map(str, s.recorded_cache_breaks[:20]))
                     + " (replayed: the harness's prompt rewrites and the provider's misses, under any policy)"))
    if s.recorded_sidechain_cost_usd is not None:
        rows.append(("inline subagents (sidechains), recorded", f"{s.sidechain_calls:,} call(s), "
                     f"${s.recorded_sidechain_cost_usd:,.4f} with output (another conversation: billed, not replayed)"))
    if s.billed_cost_usd is not None:
        rows.append(("recorded usage with output / billed", f"${s.recorded_cost_usd or 0:,.4f} / ${s.billed_cost_usd:,.4f}"))
    return rows


def _saves(saving: float) -> str:
    """A cost saving in words whose sign says what it means: "saves 36.3%", "costs 4.0% more"."""
    return f"saves {saving * 100:.1f}%" if saving >= 0 else f"costs {-saving * 100:.1f}% more"


def fewer_tokens(reduction: float | None) -> str:
    """How many fewer tokens a policy sends than no compaction (``reduction``: the share saved), as
    the cost warnings say it: a share that rounds to none is not "0% fewer", and none is not
    "-20% fewer"."""
    if reduction is None or not reduction > 0:  # (a row read back may hold none)
        return "and sends no fewer tokens"
    said = f"{reduction:.0%}" if reduction >= 0.095 else f"{reduction:.1%}" if reduction >= 0.00095 else "under 0.1%"
    return f"although it sends {said} fewer tokens"


#: what a cache write costs where the provider charges more than the input price for it (Anthropic)
_WRITES = ": 1.25× for Anthropic's 5-minute writes, 2× for 1-hour ones"


def costs_more(run: Run) -> str | None:
    """Why the policy costs more than no compaction, when it does (prompt caching: rewriting
    what was cached turns cache reads into dearer cache writes); else None."""
    s = run.summary
    if s.cost_usd <= s.raw_cost_usd:
        return None
    raw_reads = sum(min(a.raw_tokens, b.raw_tokens) for a, b in zip(run.calls, run.calls[1:]))
    return (f"This policy costs more than no compaction (${s.cost_usd:,.4f} against ${s.raw_cost_usd:,.4f}), "
            f"{fewer_tokens(s.reduction)}: it rewrites messages that were already "
            f"cached, so {s.cache_write_tokens:,} of its {s.tokens_total:,} tokens are cache writes (at the input "
            f"price or above{_WRITES if s.cache_model == 'anthropic' else ''}) where no compaction reads "
            f"about {raw_reads:,} tokens from the cache (about a tenth of the input price).")


def write_table(run: Run, out: TextIO) -> None:
    s = run.summary
    printer = Printer(out)
    brief = (run.policy or {}).get("brief") or ""
    table = Table(title=f"{title_of(s.transcript)} × {s.policy}" + (f" ({brief.rstrip('.')})" if brief else "")
                        + f" · fingerprint {s.fingerprint}", show_header=False)
    table.add_column("metric", style="bold")
    # (a wide terminal does not push the figures far from their names: a sentence wraps at this)
    table.add_column("value", justify="right", overflow="fold", max_width=VALUE_WIDEST)
    dearer = costs_more(run)
    for k, v in summary_rows(run):
        style = "red" if (k.startswith("violations introduced") and s.violations_introduced) or (
            dearer and k.startswith("input cost, cached")) else None
        table.add_row(k, v, style=style)
    printer.table(table)
    if dearer:
        printer.text(dearer, style="red")
    tokens = [c.tokens for c in run.calls]
    printer.text(f"context tokens per call, peak {max(tokens, default=0):,}:")
    printer.text(sparkline(tokens))
    for line in event_lines(run):
        printer.text(line)
    introduced = [v for v in s.violations if v["introduced"]]
    for line, style in introduced_lines(run, introduced):
        printer.text(line, style=style)
    if manual_orphans(run.policy, introduced, [c.call for c in run.calls if c.manual]):
        printer.text("(this policy's manual compaction, as the s08 design has it, summarises before the tool results "
                     "are appended, so the compact call's result is orphaned by design; --set "
                     "manual.mode=after_results avoids it)")


#: compaction events replay prints (the ones that lost most of what the agent later used)
SHOWN_EVENTS = 5


def event_lines(run: Run) -> list[str]:
    """What each compaction dropped, on one screen: how many events, then those that lost most of
    what the agent later used (all are in compactions.csv)."""
    events = run.events
    if not events:
        return []
    # (a dry run writes no file: where each would be)
    each = "compactions.csv has each" if run.out_dir else "each in compactions.csv, without --dry-run"
    if not run.summary.probes_indexed:
        return [f"{len(events):,} compaction event(s) ({each}); what they lost of what the agent later used is not "
                "measured (recall is off)"]
    lossy = sorted((e for e in events if e.lost), key=lambda e: (-len(e.lost), e.call))[:SHOWN_EVENTS]
    losing = sum(bool(e.lost) for e in events)
    lines = [f"{len(events):,} compaction event(s); {losing:,} of them lost strings the agent later used"
             + (f" ({each}); the most:" if lossy else "")]
    for e in sorted(lossy, key=lambda e: e.call):
        shown = ", ".join(f"{visible(text)[:40]} (call {needed})" for text, needed in e.lost[:4])
        more = f", … {len(e.lost) - 4} more" if len(e.lost) > 4 else ""
        lines.append(f"  call {e.call} {'+'.join(e.layers)}: {e.messages_before:,} → {e.messages_after:,} messages, "
                     f"{e.tokens_before:,} → {e.tokens_after:,} tokens; lost {len(e.lost)}: {shown}{more}")
    return lines


#: records a part of ``--format json``'s records is written of (about 1 MB)
RECORDS_PART = 2048
#: the Python engine's records a part (orjson makes each part's text in a buffer it grows, about
#: twice the part at its peak: a small part keeps that a small share of the document)
PYTHON_RECORDS_PART = 32


def _json_run(run: Run) -> Iterator[bytes]:
    """A run's {"summary", "calls", "timing"} as orjson writes it, in pieces: its records (the
    largest part: 2.5 MB of 5,000 calls) written a part at a time, never one document with the rest."""
    yield b'{"summary":' + orjson.dumps(run.summary) + b',"calls":'
    yield from _calls_json(run.calls)
    yield b',"timing":' + orjson.dumps(run.timing) + b"}"


def _calls_json(calls: list[TurnRecord]) -> Iterator[bytes]:
    """A run's records as orjson writes them, in parts: the native core's written in Rust
    (``records.rs``, orjson.dumps' text of the Python engine's dataclasses its reference), the
    Python engine's by orjson, ``PYTHON_RECORDS_PART`` at a time (the parts joined are its text of
    the whole list)."""
    native = native_module()
    if native is not None and type(calls) is list:
        record = native.TurnRecord
        if all(type(c) is record for c in calls):
            for at in range(0, max(len(calls), 1), RECORDS_PART):
                yield native.records_json(calls[at:at + RECORDS_PART], at == 0, at + RECORDS_PART >= len(calls))
            return
    if not calls:
        yield b"[]"
        return
    step = PYTHON_RECORDS_PART
    for at in range(0, len(calls), step):  # (each part's array, its brackets only at the ends)
        part = orjson.dumps(calls[at:at + step])
        first, last = at == 0, at + step >= len(calls)
        if not first:
            yield b","
        yield part if first and last else part[0 if first else 1:len(part) if last else -1]


def write_json(runs: list[Run], out: TextIO) -> None:
    """{"runs": [{"summary", "calls", "timing"}, ...]}, for one input as for many (orjson's text of
    that document, written as it is made: ``_json_run``)."""

    def pieces() -> Iterator[bytes]:
        yield b'{"runs":['
        for i, run in enumerate(runs):
            if i:
                yield b","
            yield from _json_run(run)
        yield b"]}"

    write_json_pieces(out, pieces())


def write_json_run(runs: list[Run], out: TextIO) -> None:
    """The one run's {"summary", "calls", "timing"} (``--format json-run``: one input only)."""
    (run,) = runs
    write_json_pieces(out, _json_run(run))


_OVERFLOW = TURN_COLUMNS.index("overflow")


def _csv_row(call: TurnRecord) -> list:
    row = list(turn_values(call))
    row[_OVERFLOW] = "true" if row[_OVERFLOW] else "false"
    return row


_HEADER = ",".join(TURN_COLUMNS) + "\n"
_COST = TURN_COLUMNS.index("input_cost_usd")


def calls_csv(run: Run) -> str:
    return calls_csv_bytes(run).decode("utf-8")


def calls_csv_bytes(run: Run) -> bytes:
    """calls.csv: what csv.writer writes for the rows (overflow as true/false).

    The rows are numbers and one boolean, which orjson writes as the csv module does (true/false
    as wanted), except that it spells the exponent of a float outside [1e-4, 1e16) differently:
    such a cost goes in as its repr (an orjson Fragment). The rows are then one orjson array with
    its brackets turned into lines, three times as fast as formatting each (5,000 calls: 9 -> 3 ms).
    The native core's records (a Rust struct each) are written in Rust from their columns
    (``records.rs``: ``calls_csv``, this the reference).
    """
    native = native_module()
    if native is not None and type(run.calls) is list:
        made = native.calls_csv(run.calls)
        if made is not None:
            return made
    rows = list(map(turn_values, run.calls))
    c = _COST
    for k, row in enumerate(rows):
        v = row[c]
        if not (v == 0 or 1e-4 <= v < 1e16):
            rows[k] = (*row[:c], orjson.Fragment(repr(v).encode()), *row[c + 1:])
    if not rows:
        return _HEADER.encode()
    return _HEADER.encode() + orjson.dumps(rows)[2:-2].replace(b"],[", b"\n") + b"\n"


def _written(run: Run, writer: str, rows: Any, columns: list[str], reference: Callable[[Run], bytes]) -> bytes:
    """A file of ``run`` written by the native core's ``writer`` from ``rows`` (the run's list of
    them, or its ledger held in Rust) where the core runs and takes them, else by ``reference`` (Python's, the one the native
    writer is tested against, which also says what is wrong with a row it cannot write)."""
    native = in_use()
    if native is not None and (type(rows) is list or type(rows) is native.ProbeLedger):
        made = getattr(native, writer)(rows, columns)
        if made is not None:
            return made
    return reference(run)


def write_csv(runs: list[Run], out: TextIO) -> None:
    """Every call of every run, a transcript column first (the columns of calls.csv after it)."""
    out.write(csv_bytes([["transcript", *TURN_COLUMNS]]).decode("utf-8"))
    for r in runs:  # (a run at a time: one run's text held at once)
        name = csv_cell(r.summary.transcript)
        out.write(csv_bytes([[name, *_csv_row(c)] for c in r.calls]).decode("utf-8"))


def introduced_lines(run: Run, introduced: list[dict]) -> list[tuple[str, str | None]]:
    """The terminal's lines of the violations the policy introduced (``introduced``), with their
    styles: the first ten, each where it is."""
    if not introduced:
        return []
    sent = messages_sent(run)
    lines: list[tuple[str, str | None]] = [(f"{len(introduced)} tool-pairing violation(s) the policy introduced (the "
                                            "API would reject those calls):", "red")]
    lines += [(f"  call {v['call']}: {MEANING.get(v['kind'], v['kind'])} ({v['kind']}, {where(v, sent[v['call']])}"
               + (f", tool id {v['tool_use_id']})" if v["tool_use_id"] else ")"), "red") for v in introduced[:10]]
    if len(introduced) > 10:
        lines.append((f"… and {len(introduced) - 10} more introduced violations (summary.json has each"
                      + ("" if run.out_dir else ", without --dry-run") + ")", None))
    return lines


def messages_sent(run: Run) -> dict[int, int]:
    """The messages each call of ``run`` sends (where its violations are: ``violations.where``)."""
    return {c.call: c.messages for c in run.calls}


def markdown(run: Run) -> str:
    s = run.summary
    lines = [f"# {md_cell(s.transcript)} × {md_cell(s.policy)}", "", f"Policy fingerprint `{s.fingerprint}`.", "",
             "| metric | value |", "|---|---:|"]
    lines += [f"| {k} | {md_cell(v)} |" for k, v in summary_rows(run)]
    lines += ["", f"Context tokens per call: `{sparkline([c.tokens for c in run.calls])}`", ""]
    if (dearer := costs_more(run)) is not None:
        lines += [f"**{md_text(dearer)}**", ""]
    if s.violations:
        sent = messages_sent(run)
        lines += ["## Violations", "", "| kind | call | message | tool id | introduced |", "|---|---:|---:|---|---|"]
        lines += [f"| {v['kind']} | {v['call']} | {message_cell(v, sent[v['call']])} | "
                  f"{md_cell(v['tool_use_id'] or '')} | "
                  f"{'yes' if v['introduced'] else 'no'} |" for v in s.violations]
        lines.append("")
    cols = ["call", "raw_tokens", "tokens", "messages", "snipped", "micro_compacted", "persisted", "summarized",
            "reactive", "manual", "violations_introduced"]
    lines += ["## Calls", "", "| " + " | ".join(cols) + " |", "|" + "---:|" * len(cols)]
    lines += ["| " + " | ".join(str(getattr(c, k)) for k in cols) + " |" for c in run.calls]
    return "\n".join(lines) + "\n"


def write_md(runs: list[Run], out: TextIO) -> None:
    for run in runs:
        out.write(markdown(run))


def write_tables(runs: list[Run], out: TextIO) -> None:
    for run in runs:
        write_table(run, out)
    if len(runs) > 1:
        Printer(out).text(totals_line(runs), style="bold")


def totals_line(runs: list[Run]) -> str:
    """The runs of one replay together (a folder of sessions): metrics.totals, ratios of sums."""
    n = sum((r.summary.numbers for r in runs), Numbers())
    calls = sum(r.summary.calls for r in runs)
    return (f"{len(runs)} transcripts × {runs[0].summary.policy}: {calls:,} calls; tokens "
            f"{int(n.raw_tokens_total):,} → {int(n.tokens_total):,} ({n.reduction * 100:.1f}% saved); "
            f"cost ${n.raw_cost_usd:,.4f} → ${n.cost_usd:,.4f} ({_saves(n.cost_saving)}); "
            f"retention {n.retention * 100:.1f}%, recall {n.recall * 100:.1f}%; "
            f"{int(n.violations_introduced)} violation(s) introduced, {int(n.overflows)} overflow(s)"
            + _recorded_total(runs))


def _recorded_total(runs: list[Run]) -> str:
    """The recorded cost of the runs' sessions with output, their inline subagents counted apart (as
    ccusage counts them)."""
    recorded = [r.summary.recorded_cost_usd for r in runs if r.summary.recorded_cost_usd is not None]
    if not recorded:
        return ""
    side = sum(r.summary.recorded_sidechain_cost_usd or 0 for r in runs)
    return (f"; recorded cost with output ${sum(recorded):,.4f}"
            + (f" + ${side:,.4f} of inline subagents" if side else "") + f" ({len(recorded)} recording(s))")


#: the stdout writers of ``replay --format``: one shape for any number of inputs (``json-run``,
#: the one run's object, is for one input)
WRITERS: dict[str, Callable[[list[Run], TextIO], None]] = {
    "table": write_tables,
    "json": write_json,
    "json-run": write_json_run,
    "csv": write_csv,
    "md": write_md,
}


def write_runs(runs: list[Run], fmt: str, out: TextIO) -> None:
    """stdout for the runs of one replay command."""
    WRITERS[fmt](runs, out)


def write_chart(run: Run, policy: "Policy", out: OutputDir) -> str | None:
    """chart.svg: tokens per call against the raw baseline (only when asked). A chart
    that cannot be drawn is not worth the run: why it failed is returned instead."""
    if out.dry_run:
        return None
    try:
        _draw_chart(run, policy, out)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    return None


def _draw_chart(run: Run, policy: "Policy", out: OutputDir) -> None:
    from .charts import file_bytes, tokens_chart

    events = {kind: [c.call for c in run.calls if getattr(c, attr)]
              for kind, attr in (("summary", "summarized"), ("reactive", "reactive"), ("manual", "manual"))}
    levels = {"window": float(run.summary.window_tokens)}
    s = policy.summary
    if s.enabled and s.unit != "messages":  # where the trigger is, in tokens (a chars one: with the overhead)
        size = run.policy["size"]
        at = run.summary.summary_trigger if run.summary.summary_trigger is not None else s.trigger
        levels["summary trigger"] = float(at if s.unit == "tokens" else size["overhead_tokens"] + at / size["chars_per_token"])
    events = {kind: calls for kind, calls in events.items() if calls}  # only the markers that occurred
    svg = tokens_chart(f"{os.path.basename(title_of(run.summary.transcript))} × {run.summary.policy}", [c.raw_tokens for c in run.calls],
                          [{"label": run.summary.policy, "tokens": [c.tokens for c in run.calls], "events": events,
                            "levels": levels}])
    out.write_bytes("chart.svg", file_bytes(svg))


def _recall(s: RunSummary) -> str:
    if not s.probes_indexed:
        return ("not measured (COMPACTLAB_PROBES=0)" if os.environ.get("COMPACTLAB_PROBES") == "0"
                else "not measured (a policy that never acts keeps every probe: 1.000 by construction)")
    if not s.probes:
        return "nothing to measure: no reply used a string it had read in a tool result"
    text = f"{s.recall:.3f} ({s.probes_kept:,} of {s.probes:,} kept"
    return text + (f"; {s.probes_recoverable:,} more recoverable from persisted outputs)" if s.probes_recoverable else ")")


#: probes.csv's columns: every hindsight probe at every call (probes.ProbeOutcome)
PROBE_COLUMNS = ["call", "probe", "kind", "source_call", "source_tool", "status", "removed_by", "removed_at"]


def probes_csv_bytes(run: Run) -> bytes:
    """probes.csv: the ledger of every probe, one row each: kept, recoverable or lost, and when not
    kept the layer that removed it (texts made safe for spreadsheets). Written by the native core
    where it runs (``probes_csv``), else here: the reference."""
    return _written(run, "probes_csv", run.probe_ledger, PROBE_COLUMNS, probes_csv_reference)


def probes_csv_reference(run: Run) -> bytes:
    """probes.csv as Python writes it (what the native writer is tested against)."""
    cells: dict[str, Any] = {}  # (a string is probed at many calls, a tool named at many: made safe once)

    def cell(text: str) -> Any:
        safe = cells.get(text)
        if safe is None:
            safe = cells[text] = csv_cell(text)
        return safe

    return csv_bytes([PROBE_COLUMNS, *([p.call, cell(p.probe), p.kind, p.source_call, cell(p.source_tool), p.status,
                                        p.removed_by, p.removed_at if p.status != "kept" else ""]
                                       for p in run.probe_ledger)])


#: compactions.csv's columns: one row per call at which the policy changed the context
EVENT_COLUMNS = ["call", "layers", "messages_before", "messages_after", "tokens_before", "tokens_after",
                 "results_cleared", "snipped", "summaries", "lost", "lost_strings"]


def compactions_csv_bytes(run: Run) -> bytes:
    """compactions.csv: every compaction event, what it removed, and the strings the agent later
    used that it lost (each with the call that first needed it). Written by the native core where
    it runs (``compactions_csv``), else here: the reference."""
    return _written(run, "compactions_csv", run.events, EVENT_COLUMNS, compactions_csv_reference)


def compactions_csv_reference(run: Run) -> bytes:
    """compactions.csv as Python writes it (what the native writer is tested against)."""
    return csv_bytes([EVENT_COLUMNS, *([e.call, " ".join(e.layers), e.messages_before, e.messages_after, e.tokens_before,
                                        e.tokens_after, e.results_cleared, e.snipped, e.summaries, len(e.lost),
                                        csv_cell("; ".join(f"{s} (call {c})" for s, c in e.lost))]
                                       for e in run.events)])


def write_files(run: Run, out: OutputDir) -> list[str]:
    """summary.json, calls.csv, probes.csv and compactions.csv in the output folder (atomically);
    the names written."""
    if out.dry_run:
        return []
    doc = {"summary": run.summary, "policy": run.policy, "failed_summaries": run.failed_summaries,
           "timing": run.timing}
    out.write_all({"summary.json": json_bytes(doc, orjson.OPT_INDENT_2) + b"\n",
                   "calls.csv": calls_csv_bytes(run), "probes.csv": probes_csv_bytes(run),
                   "compactions.csv": compactions_csv_bytes(run)})
    return ["summary.json", "calls.csv", "probes.csv", "compactions.csv"]
