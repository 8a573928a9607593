"""Writers for ``compactlab inspect``: terminal, JSON and Markdown."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TextIO

import orjson

from ..engine.measures.violations import message_cell, where
from .replay_report import ledger_line
from .sparkline import sparkline
from .terminal import VALUE_WIDEST, Printer, Table, cut_apart
from .text import md_cell, visible, write_json_line


def write_json(info: dict[str, Any], out: TextIO) -> None:
    write_json_line(out, info)


#: the formats' own facts (their ``inspect_facts``) shown as a line each, where present
FORMAT_FACTS = {
    "other_branch_entries": "entries of other branches (not replayed)",
    "off_chain_records": "records off the conversation's chain (a rewind; not replayed)",
    "sidechain_records": "subagent records (not replayed)",
    "pruned_outputs": "tool outputs the harness pruned (sent cleared; read whole)",
    "compaction_requests": "compaction requests (their summaries: the recorded compactions)",
    "calls_usage": "usage per call",
    "harness_cost_usd": "cost as the harness priced it (its own price table)",
}


def _format_rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    """The rows of the format's own facts (``FORMAT_FACTS``, a session's recorded totals)."""
    rows = []
    for key, label in FORMAT_FACTS.items():
        if info.get(key):
            value = info[key]
            rows.append((label, f"${value:,.4f}" if key.endswith("_usd") else f"{value:,}" if isinstance(value, int)
                         else str(value)))
    for model, t in (info.get("session_totals") or {}).items():
        rows.append((f"session totals, {model} (recorded)",
                     f"input {t['inputTokens']:,}, cache reads {t['cacheReadTokens']:,}, cache writes "
                     f"{t['cacheWriteTokens']:,}, output {t['outputTokens']:,}"))
    return rows


def _head_rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    return (_size_rows(info) + _cost_rows(info) + _history_rows(info) + _format_rows(info)
            + _file_rows(info))


def _size_rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    """What the session is and how big: its format, messages, calls, growth, window, calibration."""
    rows = [("format", info["format"]), ("messages", f"{info['messages']:,}"), ("calls", f"{info['calls']:,}"),
            ("tool calls", f"{info['tool_calls']:,}"), ("message chars", f"{info['raw_chars']:,}")]
    for key in ("title", "session_id", "model"):
        if info.get(key):
            rows.append((key.replace("_", " "), str(info[key])))
    models = info.get("models") or {}
    if len(models) > 1:  # (a session that switched model: each, with its calls, in place of the last one)
        if rows[-1][0] == "model":
            rows.pop()
        rows.append(("models", ", ".join(f"{m} ({n:,} call{'s' * (n != 1)})" for m, n in models.items())))
    g = info["raw_growth"]
    cal = info.get("calibration")
    if g:  # (the estimate in a row of its own, as replay's "tokens estimated by": a key stays a name)
        rows.append(("raw context tokens (25/50/75/100% of calls)", " / ".join(f"{v:,}" for v in g.values())))
        by = info["raw_tokens_by"]
        if cal and by.startswith("calibrated: "):  # (its fit said with it: one row, not the same formula twice)
            by += f" (mape {cal['mape']:.3f}, {cal['calls']} calls)"
            cal = None
        rows.append(("tokens estimated by", by))
    if info.get("context_window"):
        rows.append(("context window (judged on)", info["context_window"]))
    rows.append(("recorded violations", str(len(info["violations"]))))
    if info.get("recorded_prompt_tokens_total"):
        rows.append(("recorded prompt tokens (all calls)", f"{info['recorded_prompt_tokens_total']:,}"))
    if cal:
        rows.append(("calibration", f"{cal['overhead_tokens']:,} + chars / {cal['chars_per_token']} "
                                    f"(mape {cal['mape']:.3f}, {cal['calls']} calls)"))
    return rows


def _cost_rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    """The prompt cache and the cost: modelled against recorded, warm starts, breaks."""
    rows = []
    if info.get("cache_ledger"):
        rows.append(("input cost: modelled / recorded", f"${info['modelled_input_cost_usd']:,.4f} / "
                                                         f"${info['recorded_input_cost_usd']:,.4f}"))
        rows.append(("cache model vs recording", ledger_line(info["cache_ledger"])))
    if info.get("cache_warm_start_tokens"):
        rows.append(("cache warm at the first call", f"{info['cache_warm_start_tokens']:,} tokens read"))
    if info.get("recorded_cache_breaks"):
        rows.append(("recorded cache breaks", ", ".join(map(_cache_break, info["recorded_cache_breaks"][:10]))))
    if info.get("recorded_cost_usd") is not None:
        rows.append(("recorded cost, input + output", f"${info['recorded_cost_usd']:,.4f}"))
    if rows and info.get("priced_by"):  # (what the costs above rest on, as replay says it)
        rows.append(("priced by", info["priced_by"]))
    return rows


def _history_rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    """What the recording holds besides the calls: compactions, subagents, other roles."""
    rows = []
    if info.get("recorded_compactions"):
        rows.append(("recorded compactions", ", ".join(
            _compaction(c) for c in info["recorded_compactions"])))
    done = info.get("already_compacted") or {}
    if any(done.values()):
        rows.append(("already compacted by Claude Code", ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in done.items())))
    if info.get("subagent"):
        rows.append(("subagent transcript", "yes (acompact: Claude Code's summarizer call)" if info.get("acompact") else "yes"))
    if info.get("sidechain_lines"):
        side = (f"; {info['sidechain_calls']:,} call(s) billed ${info['recorded_sidechain_cost_usd']:,.4f} with output"
                if info.get("recorded_sidechain_cost_usd") is not None else "")
        rows.append(("inline subagents (sidechain lines, not replayed)", f"{info['sidechain_lines']:,} line(s){side}"))
    if info.get("other_roles"):
        rows.append(("other roles (metadata)", ", ".join(f"{r['role']} ({r['chars']:,} chars)" for r in info["other_roles"])))
    return rows


def _cache_break(b: dict[str, Any]) -> str:
    """A recorded cache break: what the call read, against what it would have read (the previous
    prompt; under a cache that keeps replies, the previous prompt and reply, as expected)."""
    if b.get("expected_read_tokens") is not None:
        return f"call {b['call']} read {b['read_tokens']:,} of {b['expected_read_tokens']:,} expected"
    if b["previous_prompt_tokens"] is None:
        return f"call {b['call']} read {b['read_tokens']:,} (the call before recorded no usage)"
    return f"call {b['call']} read {b['read_tokens']:,} of {b['previous_prompt_tokens']:,}"


def _file_rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    """What was wrong with the file or left of it: bad arguments, exit status, subagent files."""
    rows = []
    if info.get("invalid_arguments"):
        rows.append(("tool arguments that are not JSON", str(info["invalid_arguments"])))
    if info.get("exit_status"):
        rows.append(("exit status", str(info["exit_status"])))
    if info.get("subagents_recorded_cost_usd") is not None:
        rows.append(("subagent files, recorded cost with output", f"${info['subagents_recorded_cost_usd']:,.4f} "
                     f"({len(info['subagents'])} file(s), billed apart from this session's; not replayed with it)"))
    for sub in info.get("subagents") or []:
        rows.append(("subagent file" + (" (acompact)" if sub["acompact"] else ""), sub["path"]))
    if info["unanswered_at_end"]:
        rows.append(("unanswered at end", ", ".join(info["unanswered_at_end"])))
    if info["skipped_lines"]:
        rows.append(("bad lines skipped", str(info["skipped_lines"])))
    return rows


def write_table(info: dict[str, Any], out: TextIO) -> None:
    printer = Printer(out)
    head = Table(title=info["transcript"], show_header=False)
    head.add_column(style="bold")
    head.add_column(justify="right", overflow="fold", max_width=VALUE_WIDEST)
    for k, v in _head_rows(info):
        head.add_row(k, v)
    printer.table(head)
    printer.text(f"raw context tokens per call ({info['raw_tokens_by']}):")
    printer.text(sparkline(info["raw_tokens_per_call"]))
    if info.get("recorded_calls"):
        printer.text("recorded prompt tokens per call:")
        printer.text(sparkline([c["recorded_prompt_tokens"] for c in info["recorded_calls"]]))
    tools = Table(title="tools")
    for col in ("tool", "calls", "result chars", "largest"):
        tools.add_column(col, justify="left" if col == "tool" else "right")
    for name, t in info["tools"].items():
        tools.add_row(name, f"{t['count']:,}", f"{t['total_chars']:,}", f"{t['max_chars']:,}")
    printer.table(tools)
    if info["largest_results"]:
        big = Table(title="largest tool results")
        for col in ("tool id", "tool", "chars", "message"):
            big.add_column(col, justify="right" if col in ("chars", "message") else "left")
        for r in info["largest_results"]:
            big.add_row(r["tool_use_id"], r["tool"], f"{r['chars']:,}", str(r["message_index"]))
        printer.table(big)
    for v in info["violations"][:20]:
        printer.text(f"recorded {v['kind']} at call {v['call']}, {where(v, v['context_messages'])}"
                     + (f", tool id {v['tool_use_id']}" if v["tool_use_id"] else ""))
    for w in info["warnings"]:
        printer.text(f"warning: {w}")


def write_md(info: dict[str, Any], out: TextIO) -> None:
    lines = [f"# {md_cell(info['transcript'])}", "", "| | |", "|---|---:|"]
    lines += [f"| {md_cell(k)} | {md_cell(v)} |" for k, v in _head_rows(info)]
    lines += ["", "| tool | calls | result chars | largest |", "|---|---:|---:|---:|"]
    lines += [f"| {md_cell(n)} | {t['count']} | {t['total_chars']} | {t['max_chars']} |" for n, t in info["tools"].items()]
    if info["violations"]:
        lines += ["", "| recorded violation | call | message | tool id |", "|---|---:|---:|---|"]
        lines += [f"| {v['kind']} | {v['call']} | {message_cell(v, v['context_messages'])} | "
                  f"{md_cell(v['tool_use_id'] or '')} |" for v in info["violations"]]
    out.write("\n".join(lines) + "\n")


def sessions_json(rows: list[dict[str, Any]], out: TextIO) -> None:
    write_json_line(out, {"sessions": rows})


def sessions_table(rows: list[dict[str, Any]], out: TextIO) -> None:
    folder = os.path.commonpath([os.path.dirname(r["transcript"]) for r in rows]) if rows else ""
    table = Table(title=f"{len(rows)} session(s) in {folder}")
    for col in ("session", "format", "MB", "calls", "tools", "rec. tokens", "compact."):
        if col == "session":  # (one line a session: a long name is cut in the middle, never wrapped)
            table.add_column(col, cut="middle", no_wrap=True)
        else:
            table.add_column(col, justify="left" if col == "format" else "right", no_wrap=True,
                             essential=col in ("format", "calls", "rec. tokens"))
    for r in rows:
        table.add_row(os.path.relpath(r["transcript"], folder) if folder else r["transcript"], r["format"], f"{r['bytes'] / 1e6:.2f}", f"{r['calls']:,}",
                      f"{r['tool_calls']:,}", _recorded(r), str(r["compactions"]))
    Printer(out).table(table)


def _recorded(row: dict[str, Any], thousands: str = ",") -> str:
    """A session's recorded prompt tokens; "none" where its recording keeps no usage."""
    tokens = row["recorded_tokens"]
    return "none" if tokens is None else format(tokens, thousands)


def sessions_md(rows: list[dict[str, Any]], out: TextIO) -> None:
    lines = ["| transcript | format | bytes | calls | tool calls | recorded tokens | compactions |", "|---|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {md_cell(r['transcript'])} | {r['format']} | {r['bytes']} | {r['calls']} | {r['tool_calls']} | "
              f"{_recorded(r, '')} | {r['compactions']} |" for r in rows]
    out.write("\n".join(lines) + "\n")


def _compaction(c: dict[str, Any]) -> str:
    size = f"{c['pre_tokens']:,} tokens" if c["pre_tokens"] is not None else "size not recorded"
    return f"before message {c['message_index']} ({c['trigger'] or 'trigger not recorded'}, {size})"


#: the characters of a dropped string ``inspect --compactions`` shows (a longer one is cut in its middle)
EXAMPLE_WIDTH = 40


def describe(row: dict[str, Any]) -> str:
    """One line of ``inspect --compactions``."""
    size = f"{row['tokens_before']:,}" if row["tokens_before"] is not None else "?"
    if row["tokens_before"] is not None and row["tokens_before_source"] != "recorded by the harness":
        size += " (its last recorded prompt and reply)"
    share = f" ({row['share_of_window']:.1%} of {row['window']:,})" if row["share_of_window"] is not None else ""
    after = f" -> {row['tokens_after']:,}" if row["tokens_after"] is not None else ""
    when = f" {row['time']}" if row["time"] else ""
    text = f"#{row['compaction']} call {row['call']}{when}: {row['trigger'] or 'compaction'} at {size}{share}{after}"
    if row["threshold_source"]:
        text += f"; implied {row['threshold']:,}" if row["threshold"] is not None else ""
        text += f" [{row['threshold_source']}]"
    text += f": {row['fired']}"
    if row.get("request_file"):
        cost = f"${row['request_cost_usd']:,.4f}" if row.get("request_cost_usd") is not None else "not recorded"
        text += f"; its own request {cost} with output ({row['request_file']})"
    if row.get("dropped_later_used") is not None:
        examples = list(row["dropped_examples"])  # (cut where they differ least: two paths of one folder
        # cut at their 40th character read as one string twice)
        cut = cut_apart(examples, EXAMPLE_WIDTH) or [s[:EXAMPLE_WIDTH] for s in examples]
        n, shown = row["dropped_later_used"], ", ".join(map(repr, cut))
        text += (f"; dropped {n} string(s) the agent later used ({shown}{', ...' if n > 3 else ''})" if n else
                 "; dropped nothing the agent later used")
    return text


def compactions_table(audits: list[dict[str, Any]], out: TextIO) -> None:
    """``inspect --compactions``: per session, the window and settings it was judged with, then a
    line per compaction (``audit.describe``)."""
    printer = Printer(out)
    for a in audits:
        source = f", converted from {a['recorded_format']}" if a.get("recorded_format") else ""
        head = f"{a['transcript']} ({a['format']}{source}{', ' + a['version'] if a.get('version') else ''}): "
        head += f"window {a['window']:,} ({a['window_source']})"
        printer.text(visible(head))
        if a["settings"]:
            printer.text("  settings: " + ", ".join(visible(f"{k}={s['value']} ({s['source']})")
                                                   for k, s in a["settings"].items()), indent="  ")
        if a.get("project_settings") == "not a folder here":
            printer.text(visible(f"  started in {a['started_in']}, not a folder here: its project's settings "
                                 "are not read"), indent="  ")
        if not a["compactions"]:
            printer.text("  no compaction recorded")
        for row in a["compactions"]:
            printer.text("  " + visible(describe(row)), indent="  ")


def compactions_json(audits: list[dict[str, Any]], out: TextIO) -> None:
    write_json_line(out, {"sessions": audits}, orjson.OPT_INDENT_2)


COMPACTIONS_WRITERS: dict[str, Callable[[list[dict[str, Any]], TextIO], None]] = {
    "table": compactions_table, "json": compactions_json, "md": compactions_table}

SESSIONS_WRITERS: dict[str, Callable[[list[dict[str, Any]], TextIO], None]] = {
    "table": sessions_table,
    "json": sessions_json,
    "md": sessions_md,
}

INSPECT_WRITERS: dict[str, Callable[[dict[str, Any], TextIO], None]] = {
    "table": write_table,
    "json": write_json,
    "md": write_md,
}
