"""compare's reports: a Comparison (its runs, one row per transcript x policy x swept values,
and the verdict across the transcripts) and its writers: the stdout table, results.csv,
results.json, report.md and a self-contained report.html with the charts (SVG inline, SVG files
beside it). The verdict and its recommendation lead every one of them."""

from __future__ import annotations

import html
import os
from datetime import date
from pathlib import Path
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, TextIO

import orjson


from ..plain import dataclass
from ..plumbing.outputs import Content, safe_stem
from ..engine.records import NUMERIC_SUMMARY_KEYS
from ..metrics import METRICS, Metric, lower_is_better
from ..corpus.guard import dearer_than_none
from ..corpus.verdict import Verdict, _plain, _shown, judge, label_of
from ..corpus.verdict import dearer as costs_more_than_none
from .replay_report import fewer_tokens
from .runs import Runs
from .terminal import Printer, Table
from .text import csv_cell, json_bytes, md_cell, md_text, visible

if TYPE_CHECKING:
    import pandas as pd

    from ..corpus.compare import RunResult
    from ..corpus.harness_settings import Harness

Row = dict[str, Any]  # one run of ``Runs``: {column: value}

@dataclass
class Comparison:
    """What compare reports: its runs (one row each), the swept keys, the verdict and where the
    figures come from (``meta``: prices, date, interruptions, failures)."""

    runs: Runs
    sweep_keys: list[str]
    verdict: Verdict
    meta: dict[str, Any]

    def to_pandas(self) -> "pd.DataFrame":
        """The runs as a pandas DataFrame of their own (a copy: one row per transcript × policy ×
        swept values, results.csv's columns, best first by ``--sort``; needs pandas installed)."""
        return self.runs.to_pandas()


def comparison(results: list["RunResult"], sweep_keys: list[str], sort_key: str, meta: dict[str, Any],
               margin: float | None = None) -> Comparison:
    table = results_table(results, sweep_keys)
    order = sort_order(table, sort_key)
    table = table.take(order)
    units = meta.get("units") or {}
    reference, fired_by = meta.get("reference"), meta.get("triggers")
    ordered = [results[i] for i in order]  # the verdict lists equal savings in the table's order
    verdict = (judge(ordered, sweep_keys, units=units, reference=reference, triggers=fired_by) if margin is None
               else judge(ordered, sweep_keys, margin, units, reference=reference, triggers=fired_by))
    idle = {e.label for e in verdict.entries if not e.actions}
    verdict.setting = setting_for(results, verdict.recommended, reference,
                                  meta.pop("harness_settings", {}).get(verdict.recommended, []), idle)
    for note in (by_design(results), not_a_setting(results, verdict.recommended, reference, verdict.setting, idle)):
        if note is not None:
            verdict.recommendation += " " + note
    return Comparison(table, sweep_keys, verdict, meta)


def sessions_harness(results: list["RunResult"]) -> "Harness | None":
    """The harness that recorded every session compared, where its compaction settings are known
    (Claude Code, Codex, Gemini CLI, OpenCode, Pi, goose, Qwen Code: ``harness_settings.of_format``),
    as the sessions' versions ran it (``as_recorded``: Qwen Code 0.17 has no off switch); None for
    sessions of several harnesses or of another format."""
    from ..corpus.harness_settings import as_recorded, of_format

    # (a file ``compactlab convert`` wrote: the harness that recorded it)
    formats = {getattr(r.summary, "recorded_format", None) or r.summary.format for r in results}
    h = of_format(next(iter(formats))) if len(formats) == 1 else None
    return as_recorded(h, (r.transcript for r in results)) if h is not None else None


def setting_for(results: list["RunResult"], recommended: str | None, reference: str | None,
                given: list[str], idle: Collection[str] = ()) -> list[str]:
    """The verdict's setting (``Verdict.setting``): the one ``given`` for a harness's preset, or, where
    it recommends no compaction on sessions of one harness that can turn compaction off, the lines
    that do (tune's, for the same answer); else none. Not where that harness's own preset was
    compared and never acted (``idle``): it is no compaction on these sessions, and tune's answer
    there is to keep it as it is (``not_a_setting`` says so)."""
    if given or recommended is None or recommended != reference:
        return given
    h = sessions_harness(results)
    return [h.title, *h.off] if h is not None and h.off and h.preset not in idle else []


def not_a_setting(results: list["RunResult"], recommended: str | None, reference: str | None,
                  setting: list[str] | None = None, idle: Collection[str] = ()) -> str | None:
    """Where every session compared was recorded by one harness whose compaction settings are known
    (``sessions_harness``) and the verdict recommends what its user cannot set (a seed design,
    another harness's preset; no compaction, in a harness that cannot turn it off: Codex, Gemini
    CLI), that they cannot, and the search of what they can set. None otherwise (no compaction
    where the harness turns it off, the harness's own preset or a variant of it: swept, or a policy
    that changes only what the harness lets you set, such as a tune's front file, whose
    ``setting``, the verdict's, names the harness first; sessions of several harnesses).
    ``idle``: the policies compared that never acted (the verdict's entries with no action)."""
    h = sessions_harness(results)
    if h is None or recommended is None or recommended.split(" ")[0] == h.preset or (setting and setting[0] == h.title):
        return None
    search = f"compactlab tune --harness {h.name} searches what {h.title} lets you set, on these sessions."
    if recommended == reference:
        if h.preset in idle and not h.no_off:  # (its own preset compared, and as no compaction here: tune's
            return (f"{h.preset} ({h.title}'s default) never acted on these sessions either: keep it as it is "
                    "(there is nothing to set; turning it off would change nothing here).")  # answer, kept)
        if not h.no_off:
            return None
        if h.preset in idle:  # (its own preset compared, and as no compaction here: the answer to keep)
            return (f"No compaction is not a setting of {h.title} ({h.no_off}); {h.preset}, its default, gives it "
                    "here: keep it as it is.")
        return f"No compaction is not a setting of {h.title}: {h.no_off}; {search}"
    return f"{recommended} is not a setting of {h.title}, whose sessions these are: {search}"


#: above this many runs the terminal shows the verdict only (the runs are in the files)
MAX_TERMINAL_RUNS = 40

def table_metrics() -> list[Metric]:
    """The metrics the reports' tables show, in the registry's order."""
    return [m for m in METRICS.values() if m.table]


def by_design(results: list["RunResult"]) -> str | None:
    """The verdict's word on the policies whose every introduced violation is a tool result their
    manual compaction orphaned by design (``violations.manual_orphans``): the setting that avoids them
    (replay's terminal says it of one run). None where there is none."""
    introduced: dict[str, list[int]] = {}
    for r in results:
        counts = introduced.setdefault(r.policy, [0, 0])
        counts[0] += int(r.summary.violations_introduced)
        counts[1] += r.manual_orphans
    named = [(p, n) for p, (n, orphans) in introduced.items() if n and n == orphans]
    if not named:
        return None
    said = "; ".join(f"{p}'s {n}" for p, n in named)
    return (f"The violations ({said}) are each a tool result orphaned by the policy's manual compaction, which "
            "summarises before the tool results are appended, as the s08 design has it: --set "
            "manual.mode=after_results avoids them.")


def results_table(results: list["RunResult"], sweep_keys: list[str]) -> Runs:
    """One row per run, built column by column (a corpus of 30,000 runs makes no row dicts)."""
    summaries = [r.summary for r in results]
    columns: dict[str, list[Any]] = {"transcript": [r.transcript for r in results],
                                     "policy": [r.policy for r in results]}
    columns.update({k: [r.swept.get(k) for r in results] for k in sweep_keys})
    columns.update({k: [s[k] for s in summaries] for k in NUMERIC_SUMMARY_KEYS})
    # every metric a summary does not hold itself, from its parts (the registry's definition)
    columns.update({name: [m.shown(s) for s in summaries] for name, m in METRICS.items() if name not in columns})
    columns["fingerprint"] = [s["fingerprint"] for s in summaries]
    calibrations = [s.get("calibration") or {} for s in summaries]  # the token estimate each run used
    for column, key in (("calibration", "source"), ("chars_per_token", "chars_per_token"),
                        ("overhead_tokens", "overhead_tokens"), ("calibration_mape", "mape")):
        columns[column] = [cal.get(key) for cal in calibrations]
    return Runs(columns)


def sort_order(table: Runs, key: str) -> list[int]:
    """The rows' positions sorted by column ``key`` (stable; best first: lowest cost, tokens,
    overflows and violations, else highest)."""
    from ..errors import UsageError

    if key not in table:
        raise UsageError(f"--sort {key!r}: not a column (try cost_saving, reduction, retention, cost_usd)")
    return table.order_by(key, ascending=lower_is_better(key))


def _label(row: Row, sweep_keys: list[str], long: bool = False, units: dict[str, str] | None = None) -> str:
    """A run's policy and swept values (with their units): short for tables, ``long`` as the
    verdict names them."""
    values = {k: _plain(row[k]) for k in sweep_keys}
    if long:
        return label_of(row["policy"], values, units)
    swept = ", ".join(f"{k.split('.')[-1]}={_shown(v, (units or {}).get(k))}" for k, v in values.items())
    return f"{row['policy']}" + (f" ({swept})" if swept else "")


def costs_more(table: Runs) -> Runs:
    """Runs that cost more than no compaction beyond a tie (``guard.dearer_than_none``: prompt
    caching makes rewriting old messages dear)."""
    return table.take([i for i, (c, r) in enumerate(zip(table["cost_usd"], table["raw_cost_usd"]))
                       if dearer_than_none(c, r)])


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def run_heads() -> list[str]:
    """The heads of the runs' table in report.md and report.html: the run, then every table metric."""
    return ["transcript", "policy", "calls", "cost, no compaction", *(m.label for m in table_metrics()), "reactive"]


def run_rows(c: Comparison) -> Iterator[tuple[Row, list[str]]]:
    """The runs as report.md and report.html show them (``run_heads``), one at a time (30,000 runs'
    cells at once would be 25 MB): each row of the frame and its cells, shares as %, money as $,
    the policy with its swept values (and their units)."""
    units = c.meta.get("units") or {}
    shown = table_metrics()
    for r in c.runs.rows():
        yield r, [os.path.basename(r["transcript"]), _label(r, c.sweep_keys, long=True, units=units),
                  f"{r['calls']:,}", f"${r['raw_cost_usd']:,.4f}", *(m.cell(r[m.name]) for m in shown),
                  f"{r['reactive']:,}"]


#: the verdict's column beside the cost saving: how the runs' own savings spread
SPREAD = "median (25–75%)"


def verdict_rows(v: Verdict) -> tuple[list[str], list[list[str]]]:
    """The verdict as a table: the policy, every table metric (the runs' spread of the saving beside
    it) and on how many transcripts it costs more."""
    shown = table_metrics()
    head = ["policy", *(h for m in shown for h in ((m.label, SPREAD) if m.name == "cost_saving" else (m.label,))),
            "costs more on"]
    rows = []
    for e in v.entries:
        cells = [e.label]
        for m in shown:
            cells.append(m.cell(getattr(e, m.name)))
            if m.name == "cost_saving":
                cells.append(f"{_pct(e.median_saving)} ({_pct(e.saving_p25)} to {_pct(e.saving_p75)})")
        rows.append([*cells, f"{e.costs_more} of {e.transcripts}"])
    return head, rows


def write_verdict(v: Verdict, printer: Printer) -> None:
    head, rows = verdict_rows(v)
    marked = any(e.label == v.recommended or e.costs_more or e.violations_introduced for e in v.entries)
    table = Table(title=f"verdict over {max((e.transcripts for e in v.entries), default=0)} transcript(s)"
                        + (" (green: recommended; red: costs more somewhere, or breaks tool pairs)" if marked else ""))
    # (the columns the verdict's sentence cites stay on a narrow terminal; a name is never cut mid-word)
    essential = {"policy", *(m.label for m in table_metrics() if m.table in ("essential", "verdict"))}
    essential.add("costs more on")  # (what explains a red row stays before any decoration)
    short = {m.label: m.short for m in table_metrics() if m.short}
    short["costs more on"] = "costs more"
    for i, h in enumerate(head):
        table.add_column(h, essential=h in essential, justify="left" if i == 0 else "right", no_wrap=True,
                         short=short.get(h), **({"cut": "middle"} if i == 0 else {}))
    for e, row in zip(v.entries, rows):
        style = "bold green" if e.label == v.recommended else "red" if e.costs_more or e.violations_introduced else None
        table.add_row(*row, style=style)
    printer.table(table)
    printer.text(v.recommendation, style="bold")
    if v.setting:
        printer.text(setting_heading(v.setting, v.recommended))
        for line in v.setting[1:]:
            printer.text(f"  {line}")


def write_table(c: Comparison, out: TextIO) -> None:
    runs, sweep_keys = c.runs, c.sweep_keys
    printer = Printer(out)
    write_verdict(c.verdict, printer)
    if c.meta.get("windows"):
        printer.text(_windows_line(c.meta["windows"]))
    dry = c.meta.get("dry_run", False)
    if len(runs) > MAX_TERMINAL_RUNS:
        printer.text(f"{len(runs)} runs: each is in results.csv, results.json and report.html"
                     + (" of a compare without --dry-run." if dry else "."))
        return
    table = Table(title=f"{len(runs)} runs")
    table.add_column("transcript", no_wrap=True, cut="middle", short="session")
    table.add_column("policy", no_wrap=True, cut="middle")
    shown = table_metrics()
    table.add_column("cost, no compaction", essential=False, justify="right", no_wrap=True)
    for m in shown:
        table.add_column(m.label, essential=m.table == "essential", justify="right", no_wrap=True, short=m.short or None)
    for r in runs.rows():
        more = costs_more_than_none(r)
        table.add_row(os.path.basename(r["transcript"]), _label(r, sweep_keys), f"${r['raw_cost_usd']:,.4f}",
                      *(m.cell(r[m.name]) for m in shown),
                      style="red" if more or r["violations_introduced"] else None)
    printer.table(table)
    dear = costs_more(runs)
    broken = sum(1 for v in runs["violations_introduced"] if v > 0)
    if len(dear) or broken:
        printer.text("Rows in red: " + "; ".join(part for part in (
            f"{len(dear)} run(s) cost more than no compaction (they keep rewriting the cached prefix, so their "
            "prompts are billed as cache writes instead of cache reads; report.md"
            + (" of a compare without --dry-run" if dry else "") + " says how much)" if len(dear) else "",
            f"{broken} run(s) introduce tool-pairing violations the API would reject" if broken else "") if part) + ".",
            style="red")


def _explain(row: Row, sweep_keys: list[str]) -> str:
    return (f"{os.path.basename(row['transcript'])} × {_label(row, sweep_keys)}: ${row['cost_usd']:,.2f} against "
            f"${row['raw_cost_usd']:,.2f} with no compaction, {fewer_tokens(row['reduction'])}: "
            f"{row['cache_write_tokens']:,} of its {row['tokens_total']:,} tokens are cache writes (at the "
            f"input price or above) instead of cache reads (about a tenth of it), because compaction changed "
            f"messages that were already cached.")


#: up to this many runs that cost more are each explained; more are said in one sentence
EXPLAINED = 3


def dearer(dear: Runs, sweep_keys: list[str]) -> tuple[list[str], list[str]]:
    """What the reports say of the runs that cost more than no compaction: a few, each explained;
    many, one sentence with their count and the worst of them (and the whole list, each explained,
    to open on demand)."""
    every = [_explain(r, sweep_keys) for r in dear.rows()]
    if len(every) <= EXPLAINED:
        return every, []
    excess = Runs({"excess": [cost / raw - 1 if raw > 0 else None for cost, raw in zip(dear["cost_usd"], dear["raw_cost_usd"])]})
    worst = [(dear.row(i), excess["excess"][i]) for i in excess.order_by("excess", ascending=False)[:EXPLAINED]]
    named = ", ".join(f"{os.path.basename(r['transcript'])} × {_label(r, sweep_keys)} "
                      f"({'n/a' if x is None else f'{x * 100:+.0f}%'})" for r, x in worst)
    return [f"{len(every)} runs cost more than no compaction although they send fewer tokens: compaction changed "
            f"messages that were already cached, so their prompts are billed as cache writes (at the input price or "
            f"above) instead of cache reads (about a tenth of it). The worst: {named}."], every


def _windows_line(windows: list[str]) -> str:
    shown = "; ".join(windows[:3]) + (f"; and {len(windows) - 3} more (results.csv: window_source)"
                                      if len(windows) > 3 else "")
    return f"Overflows judged on each recording's context window: {shown}."


def setting_heading(setting: list[str], recommended: str | None) -> str:
    """What the lines under it are (``Verdict.setting``: the harness's title, then the lines to
    paste), or, where there are none, that the recommended preset is the harness's default."""
    if len(setting) == 1:
        return f"{recommended} is {setting[0]}'s default: there is nothing to set."
    return f"{recommended} is the {setting[0]} setting:"


def _setting_html(setting: list[str], recommended: str | None) -> str:
    if not setting:
        return ""
    e = html.escape
    body = "\n".join(e(visible(line)) for line in setting[1:])
    return f"<p>{e(visible(setting_heading(setting, str(recommended))))}</p>" + (f"<pre>{body}</pre>" if body else "")


def markdown(c: Comparison, charts: dict[str, str]) -> str:
    runs, sweep_keys, meta = c.runs, c.sweep_keys, c.meta
    head, rows = verdict_rows(c.verdict)
    setting = c.verdict.setting
    said = ([md_cell(setting_heading(setting, c.verdict.recommended)), "",
             *(["```", *(visible(line) for line in setting[1:]), "```", ""] if setting[1:] else [])]
            if setting else [])
    lines = [f"# compactlab compare — {len(runs)} runs", "", "## Verdict", "", f"**{md_cell(c.verdict.recommendation)}**",
             "", *said, "| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    lines += ["| " + " | ".join(md_cell(x) for x in row) + " |" for row in rows]
    if meta.get("windows"):
        lines += ["", md_cell(_windows_line(meta["windows"]))]
    lines += ["", f"Prices: {md_cell(meta.get('prices_read', ''))} ({md_cell(', '.join(meta.get('price_models', [])))}). "
                  f"Generated {meta.get('date', '')}.{_cores(meta)}", ""]
    if meta.get("next_action"):
        from .next_action_report import md_section

        lines += md_section(meta["next_action"])
    lines += ["## Runs", ""]
    if meta.get("interrupted"):
        lines += [f"**Interrupted: {meta['interrupted']} finished; only those are here.**", ""]
    if meta.get("failed"):
        lines += [f"**{len(meta['failed'])} run(s) failed and are not here:**", ""]
        lines += [f"- {md_cell(f)}" for f in meta["failed"]] + [""]
    heads = run_heads()
    lines += ["| " + " | ".join(heads) + " |", "|---|---" + "|---:" * (len(heads) - 2) + "|"]
    lines += ["| " + " | ".join(md_cell(x) for x in cells) + " |" for _, cells in run_rows(c)]
    if meta.get("chart_error"):
        lines += ["", f"Charts could not be drawn: {md_text(meta['chart_error'])}"]
    if charts:  # (--charts none: no heading over nothing)
        lines += ["", "## Charts", ""] + [f"![{md_cell(name).replace(']', '')}]({path})" for name, path in charts.items()]
    said, every = dearer(costs_more(runs), sweep_keys)
    if said:  # after the charts: the verdict and the pictures come first
        lines += ["", "## Costs more than no compaction", ""] + [f"- {md_text(x)}" for x in said]
        if every:
            lines += ["", "<details><summary>each of them</summary>", ""] + [f"- {md_text(x)}" for x in every]
            lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


CSS = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;color:#222;max-width:1200px}
table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3}td.l{text-align:left}tr.dear td{background:#fde8e8}.note{color:#a00}
figure{margin:1.5em 0 .5em}svg{max-width:100%;height:auto}table.losses{margin-bottom:1.5em}th.l{text-align:left}tr.best td{background:#e6f4ea;font-weight:600}
p.rec{font-size:16px;max-width:900px}td{white-space:nowrap}td.l{white-space:normal}
.wide{overflow-x:auto;margin-bottom:1em}.wide td{white-space:nowrap}
table.verdict td{white-space:normal}table.verdict td.l{white-space:nowrap}"""


def _losses_table(results: list["RunResult"], chart: str) -> str:
    """Beside a transcript's chart: per policy, the compaction events that lost most of what the
    agent later used (every event is in that run's compactions.csv, from replay)."""
    e = html.escape
    name = chart.removeprefix("tokens per call: ")
    rows = [(r, loss) for r in results if Path(r.transcript).name == name for loss in r.loss_rows()]
    if not rows or name == chart:
        return ""
    body = "".join(f"<tr><td class=l>{e(visible(label_of(r.policy, r.swept)))}</td><td>{call}</td>"
                   f"<td class=l>{e(layers)}</td><td>{n}</td><td class=l>{e(visible(', '.join(s[:40] for s in strings)))}"
                   f"{', …' if n > len(strings) else ''}</td></tr>" for r, (call, layers, n, strings) in rows)
    return ("<table class='losses'><tr><th class=l>policy</th><th>call</th><th class=l>layers</th>"
            f"<th>used strings lost</th><th class=l>e.g.</th></tr>{body}</table>")


def html_parts(c: Comparison, svgs: dict[str, str], results: list["RunResult"] | None = None) -> list[str]:
    """report.html in parts: the runs' table a row each (never joined here: 30,000 runs make 11 MB)."""
    runs, sweep_keys, meta = c.runs, c.sweep_keys, c.meta
    e = html.escape
    vhead, vrows = verdict_rows(c.verdict)
    verdict = ("<div class='wide'><table class='verdict'><tr>" + "".join(f"<th{' class=l' if i == 0 else ''}>{e(h)}</th>"
                                                       for i, h in enumerate(vhead)) + "</tr>"
               + "".join(f"<tr{' class=best' if entry.label == c.verdict.recommended else ''}>"
                         + "".join(f"<td{' class=l' if i == 0 else ''}>{e(visible(x))}</td>" for i, x in enumerate(row))
                         + "</tr>" for entry, row in zip(c.verdict.entries, vrows)) + "</table></div>")
    head = "".join(f"<th{' class=l' if i < 2 else ''}>{e(h)}</th>" for i, h in enumerate(run_heads()))  # (as its cells)
    body = []
    for r, cells in run_rows(c):
        cls = ' class="dear"' if costs_more_than_none(r) else ""
        body.append(f"<tr{cls}>" + "".join(f'<td{" class=l" if i < 2 else ""}>{e(visible(x))}</td>'
                                           for i, x in enumerate(cells)) + "</tr>")
    said, every = dearer(costs_more(runs), sweep_keys)
    notes = "".join(f"<li>{e(visible(x))}</li>" for x in said)
    if every:
        notes += ("<li><details><summary>each of them</summary><ul>"
                  + "".join(f"<li>{e(visible(x))}</li>" for x in every) + "</ul></details></li>")
    figures = "".join(f"<figure>{svg}<figcaption>{e(visible(name))}</figcaption></figure>{_losses_table(results or [], name)}"
                      for name, svg in svgs.items())
    if meta.get("chart_error"):
        figures = f"<p class='note'>Charts could not be drawn: {e(visible(meta['chart_error']))}</p>" + figures
    failed = (f"<p class='note'><b>{len(meta['failed'])} run(s) failed and are not here:</b></p><ul class='note'>"
              + "".join(f"<li>{e(f)}</li>" for f in meta["failed"]) + "</ul>") if meta.get("failed") else ""
    start, end = _collapsed_ends(len(body))
    top = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>compactlab compare</title><style>{CSS}</style></head><body>
<h1>compactlab compare — {len(runs)} runs</h1>
<h2>Verdict</h2><p class="rec">{e(visible(c.verdict.recommendation))}</p>
{_setting_html(c.verdict.setting, c.verdict.recommended)}
{verdict}
{f"<p>{e(visible(_windows_line(meta['windows'])))}</p>" if meta.get("windows") else ""}
{_next_action_html(meta)}
<h2>Runs</h2>
<p>Cost is the headline: input tokens billed with prompt caching (for Anthropic models cache reads at 0.1×,
writes at 1.25× or, for 1-hour writes, 2× input; each call at its model's and date's prices),
plus the summarizer's own calls. Prices: table read {e(visible(meta['prices_read']))}, models {e(visible(', '.join(meta['price_models'])))}.
Generated {e(meta['date'])}.{e(_cores(meta))} Rows in red cost more than no compaction.</p>
{f"<p class='note'><b>Interrupted: {e(meta['interrupted'])} finished; only those are here.</b></p>" if meta.get("interrupted") else ""}
{failed}
{start}<div class="wide"><table><tr>{head}</tr>"""
    bottom = f"""</table></div>{end}
{"<h2>Charts</h2>" + figures if figures else ""}
{f'<h2>Costs more than no compaction</h2><ul class="note">{notes}</ul>' if notes else ''}
</body></html>
"""
    return [top, *body, bottom]


def _next_action_html(meta: dict) -> str:
    if not meta.get("next_action"):
        return ""
    from .next_action_report import html_section

    return html_section(meta["next_action"])


#: above this many runs, report.html shows their table collapsed (it opens on the verdict)
OPEN_RUNS = 100


def _collapsed_ends(rows: int) -> tuple[str, str]:
    """What goes around the runs' table: nothing, or a collapsed block above ``OPEN_RUNS`` rows."""
    if rows <= OPEN_RUNS:
        return "", ""
    return f"<details><summary>{rows:,} runs, one row each (click to show)</summary>", "</details>"


def safe_csv(runs: Runs) -> str:
    """The runs as CSV, text cells neutralised for spreadsheets (see ``text.csv_cell``)."""
    return runs.csv(csv_cell)


#: the per-transcript charts drawn by default: those of the transcripts where the policies differ most
CHART_TRANSCRIPTS = 6
#: what --charts draws: the corpus charts and a bounded set of transcripts' (auto), every
#: transcript's (all), only the corpus charts (summary), nothing (none)
CHART_MODES = ("auto", "all", "summary", "none")


@dataclass
class ChartJob:
    """One chart to draw: its caption, its SVG file under --out, and what draws it."""

    name: str
    file: str
    kind: str  # tokens | pareto | savings
    args: tuple


def chart_plan(c: Comparison, results: list["RunResult"], mode: str = "auto") -> list[ChartJob]:
    """The charts of a comparison: the corpus charts (cost saving against retention, or per
    transcript when no transcript refers back to a result), then the tokens per call of the
    transcripts ``mode`` asks for (auto: the ``CHART_TRANSCRIPTS`` where the policies' savings
    differ most)."""
    if mode == "none" or not results:
        return []
    from .charts import colours

    palette = colours([e.label for e in c.verdict.entries])
    plan = _corpus_charts(c, palette)
    if mode == "summary":
        return plan
    by_transcript: dict[str, list] = {}
    for r in results:
        by_transcript.setdefault(r.transcript, []).append(r)
    chosen = list(by_transcript)
    if mode == "auto" and len(chosen) > CHART_TRANSCRIPTS:
        savings: dict[str, list[float]] = {}
        for t, saving in zip(c.runs["transcript"], c.runs["cost_saving"]):
            savings.setdefault(t, []).append(saving)
        spread = {t: float(max(v) - min(v)) for t, v in savings.items()}
        chosen = sorted(chosen, key=lambda t: -spread.get(t, 0.0))[:CHART_TRANSCRIPTS]
        chosen.sort()
    used: set[str] = set()
    units = c.meta.get("units") or {}
    for path in chosen:
        runs = by_transcript[path]
        stem = safe_stem(Path(path).name.split(".")[0])
        while stem in used:
            stem += "_"
        used.add(stem)
        plan.append(ChartJob(f"tokens per call: {Path(path).name}", f"charts/tokens-{stem}.svg", "tokens",
                             (Path(path).name, runs[0].raw_tokens, _token_series(runs, units), palette)))
    return plan


def _corpus_charts(c: Comparison, palette: Any) -> list[ChartJob]:
    """Cost saving against recall (or retention), and per transcript where there are several (or
    where no transcript refers back to a result)."""
    runs, v = c.runs, c.verdict
    units = c.meta.get("units") or {}
    run_label = [_label(r, c.sweep_keys, long=True, units=units) for r in runs.rows()]
    savings = {e.label: [float(x) for x, lab in zip(runs["cost_saving"], run_label) if lab == e.label]
               for e in v.entries}
    overall_saving = {e.label: e.cost_saving for e in v.entries}
    metric = "recall" if any(e.probes for e in v.entries) else "retention"
    if v.no_references and metric == "retention":
        return [ChartJob("cost saving per transcript", "charts/savings.svg", "savings",
                         (savings, overall_saving, palette,
                          "no transcript refers back to a tool result: retention is 1.0 everywhere"))]
    points = [(lab, float(r), float(sv)) for lab, r, sv in zip(run_label, runs[metric], runs["cost_saving"])]
    overall = [(e.label, getattr(e, metric), e.cost_saving) for e in v.entries]
    floor = v.recall_floor if metric == "recall" else v.retention_floor
    plan = [ChartJob(f"cost saving against {metric}", "charts/pareto.svg", "pareto",
                     (points, overall, palette, metric, floor))]
    if len(set(runs["transcript"])) > 1:
        plan.append(ChartJob("cost saving per transcript", "charts/savings.svg", "savings",
                             (savings, overall_saving, palette, "")))
    return plan


def _token_series(runs: list, units: dict) -> list[dict[str, Any]]:
    """One line per distinct result of a transcript: a swept key a policy ignores changes nothing."""
    series: list[dict[str, Any]] = []
    drawn: dict[tuple, int] = {}
    for r in runs:
        label = label_of(r.policy, r.swept, units)
        k = (tuple(r.tokens), tuple((kind, tuple(calls)) for kind, calls in sorted(r.events.items())))
        if k in drawn:
            series[drawn[k]]["label"] += f", {label}" if len(series[drawn[k]]["label"]) < 60 else ""
            continue
        drawn[k] = len(series)
        series.append({"label": label, "key": label, "tokens": r.tokens, "events": r.events, "levels": r.levels})
    return series


def _draw(job: ChartJob) -> str:
    from . import charts

    if job.kind == "tokens":
        return charts.tokens_chart(*job.args)
    if job.kind == "pareto":
        return charts.pareto_chart(*job.args)
    return charts.savings_chart(*job.args)


def draw_charts(plan: list[ChartJob],
                on_chart: Callable[[Any], None] | None = None) -> tuple[dict[str, str], dict[str, str], str | None]:
    """Draw the charts, one after the other (a few milliseconds each): (SVG by caption, file by
    caption, the first chart's failure or None). A chart that fails is left out: it is never
    worth the results."""
    svgs: dict[str, str] = {}
    files: dict[str, str] = {}
    error: str | None = None
    for job in plan:
        try:
            svgs[job.name] = _draw(job)
            files[job.name] = job.file
        except Exception as exc:  # noqa: BLE001
            if error is None:
                reason = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
                error = f"{job.name}: {reason}"
        if on_chart:
            on_chart(job)
    return svgs, files, error


def results_files(c: Comparison) -> dict[str, Content]:
    """results.csv and results.json (the verdict with every run): what is put in place as soon as
    the runs end, before any chart is drawn."""
    return {"results.csv": safe_csv(c.runs).encode("utf-8"), "results.json": [*results_json_parts(c, indent=True), b"\n"]}


def report_files(c: Comparison, results: list["RunResult"], charts: str = "auto",
                 on_chart: Callable[[Any], None] | None = None) -> dict[str, Content]:
    """The charts (SVG files), report.md and report.html. Charts that fail to draw are reported in
    the reports (``meta["chart_error"]``)."""
    from .charts import file_bytes

    svgs, drawn, error = draw_charts(chart_plan(c, results, charts), on_chart)
    if error:
        c.meta["chart_error"] = error
    c.meta["charts"] = charts
    files: dict[str, Content] = {drawn[name]: file_bytes(svg) for name, svg in svgs.items()}
    files["report.md"] = markdown(c, drawn).encode("utf-8")
    files["report.html"] = [part.encode("utf-8") for part in html_parts(c, svgs, results)]
    return files


def _cores(meta: dict[str, Any]) -> str:
    """Which core replayed the runs (``compactlab/core.py``), for the reports' provenance line."""
    cores = meta.get("cores") or []
    return f" Replayed on the {' and '.join(cores)} core{'s' if len(cores) > 1 else ''}." if cores else ""


def report_meta(prices_read: str, price_models: list[str]) -> dict[str, Any]:
    return {"prices_read": prices_read, "price_models": sorted(set(price_models)), "date": date.today().isoformat()}


#: results.json's runs are made this many at a time (a corpus's 30,000 would be as many dicts at once)
JSON_CHUNK = 1000


def results_json(c: Comparison, indent: bool = False) -> bytes:
    """results.json: {"verdict": ..., "runs": [one record per run]}."""
    return b"".join(results_json_parts(c, indent))


def results_json_parts(c: Comparison, indent: bool = False) -> list[bytes]:
    """results.json in parts (written one after the other, never joined: 30,000 runs make 40 MB):
    the runs serialised a chunk at a time and spliced into the document (the same bytes as the
    whole document at once: tested)."""
    option = orjson.OPT_INDENT_2 if indent else 0
    head = json_bytes({"verdict": c.verdict.to_dict(), "runs": []}, option)
    if not len(c.runs):
        return [head]
    at = head.rindex(b"[]")
    parts = [head[:at], b"[\n    " if indent else b"["]
    for start in range(0, len(c.runs), JSON_CHUNK):
        chunk = c.runs.take(range(start, min(start + JSON_CHUNK, len(c.runs))))
        text = json_bytes(list(chunk.rows()), option)[1:-1]
        if start:
            parts.append(b",\n    " if indent else b",")
        parts.append(text.strip().replace(b"\n", b"\n  ") if indent else text)
    parts += [b"\n  ]" if indent else b"]", head[at + 2:]]
    return parts


def write_json(c: Comparison, out: TextIO) -> None:
    out.write(results_json(c).decode() + "\n")


def write_csv(c: Comparison, out: TextIO) -> None:
    out.write(safe_csv(c.runs))


def write_md(c: Comparison, out: TextIO) -> None:
    out.write(markdown(c, {}))


#: the stdout writers of ``compare --format``
WRITERS: dict[str, Callable[[Comparison, TextIO], None]] = {
    "table": write_table,
    "json": write_json,
    "csv": write_csv,
    "md": write_md,
}
