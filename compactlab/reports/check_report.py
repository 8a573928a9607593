"""check's writers: terminal table, JSON, JUnit XML and the GitHub step summary (Markdown)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO
from xml.etree import ElementTree as ET

from ..corpus.check import CheckResult
from ..plumbing.files import named
from .terminal import Printer, Table
from .text import md_cell, visible, write_json_line


def details(r: CheckResult) -> str:
    parts = [f"worse: {c}" for c in r.failures] + list(r.reasons)
    parts += [f"better: {c}" for c in r.improvements]
    if r.renamed_from is not None:
        parts.append(f"matched by fingerprint to the baseline's {r.renamed_from} (the policy was renamed)")
    if r.fingerprint_changed:  # (the fingerprint covers the calibrated estimate too)
        what = "policy or calibration changed" if r.calibration_changed else "policy changed"
        same = ", results identical (the change did nothing on this transcript)" if r.identical else ""
        parts.append(f"{what}{same}: fingerprint {r.old_fingerprint} → {r.fingerprint}")
    return "; ".join(parts) or "as before"


#: the least width of check's details column on a terminal (a change, "worse: recall 0.8369 → 0.6781;", whole)
DETAILS_LEAST = 30


def write_table(results: list[CheckResult], out: TextIO) -> None:
    bad = sum(not r.ok for r in results)
    table = Table(title=f"compactlab check: {len(results) - bad} passed, {bad} failed")
    # (a transcript by its file's name where no two share one, a long one cut in the middle, never
    # folded: as compare's table names them)
    table.add_column("transcript", no_wrap=True, cut="middle", short="session")
    table.add_column("policy", no_wrap=True, cut="middle")
    table.add_column("result")
    # (a sentence: room for a few words a line, the names cut rather than the details folded into a
    # column of word pieces)
    table.add_column("details", overflow="fold", min_width=DETAILS_LEAST)
    paths = [r.shown or r.transcript for r in results]  # (as run from here; the baseline's key without it)
    name = named(paths)
    for r, path in zip(results, paths):
        label = "PASS" if r.ok and r.status == "pass" else r.status.upper()
        table.add_row(name(path), r.policy, label, details(r), style=None if r.ok else "red")
    Printer(out).table(table)


def write_json(results: list[CheckResult], out: TextIO) -> None:
    doc = {"passed": all(r.ok for r in results), "results": [r.to_dict() for r in results]}
    write_json_line(out, doc)


#: the stdout writers of ``check --format``
WRITERS: dict[str, Callable[[list[CheckResult], TextIO], None]] = {"table": write_table, "json": write_json}


def junit_xml(results: list[CheckResult]) -> bytes:
    """One testcase per transcript x policy; a failure element for each that fails."""
    failures = sum(not r.ok for r in results)
    skipped = sum(r.ok and r.status == "stale" for r in results)
    suites = ET.Element("testsuites", name="compactlab", tests=str(len(results)), failures=str(failures))
    suite = ET.SubElement(suites, "testsuite", name="compactlab check", tests=str(len(results)),
                          failures=str(failures), errors="0", skipped=str(skipped))
    for r in results:
        # XML 1.0 cannot hold most control characters even escaped: they are shown as \\xNN
        text = visible(details(r))
        case = ET.SubElement(suite, "testcase", classname=f"compactlab.{visible(r.policy)}", name=visible(r.transcript))
        if not r.ok:
            failure = ET.SubElement(case, "failure", message=text, type=r.status)
            failure.text = text
        elif r.status == "stale":
            ET.SubElement(case, "skipped", message=text)
        else:
            out = ET.SubElement(case, "system-out")
            out.text = text
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)


def append_step_summary(results: list[CheckResult]) -> None:
    """Append the Markdown summary to the file GitHub Actions names in ``GITHUB_STEP_SUMMARY``
    (nothing without it); a destination that is not a regular file or a character device is
    refused (UsageError)."""
    import os

    from ..plumbing.outputs import append_text

    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        append_text(path, step_summary(results), what="GITHUB_STEP_SUMMARY")


def step_summary(results: list[CheckResult]) -> str:
    bad = sum(not r.ok for r in results)
    lines = [f"### compactlab check: {len(results) - bad} passed, {bad} failed", "",
             "| transcript | policy | result | details |", "|---|---|---|---|"]
    for r in results:
        mark = "✅ pass" if r.ok and r.status == "pass" else ("⚠️ " if r.ok else "❌ ") + r.status
        lines.append(f"| {md_cell(r.transcript)} | {md_cell(r.policy)} | {mark} | {md_cell(details(r))} |")
    return "\n".join(lines) + "\n\n"
