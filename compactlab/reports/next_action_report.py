"""What ``next-action`` shows and writes: the plan and its estimate before anything is sent (all of
``--dry-run``), the per-policy agreement table, and the files: ``next_action.json`` (the figures
and every sample), ``samples.csv`` (the ledger: one row per sample) and ``report.md``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

import orjson

from ..plumbing.files import named, shown
from .terminal import Printer, Table
from .text import csv_bytes, csv_cell, json_bytes, md_cell, md_text, visible, write_json_line

if TYPE_CHECKING:
    from ..next_action import Agreement, Plan

from ..next_action.actions import RULE as AGREE
from ..next_action.plan import ENOUGH_MARGIN

RULE = (f"agreement: the reply's first action matches the one the agent recorded next ({AGREE}); above chance: "
        "(agreement − chance) / (1 − chance), chance being how often a random recorded action of the same "
        "transcript matches; every figure is over all the candidate calls, the strata's samples weighted by their "
        "shares of them; [low, high]: 95% intervals (stratified Jeffreys)")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.0f}%"


def _interval(x: float | None, interval: Any, signed: bool = False) -> str:
    if x is None:
        return "–"
    sign = "+" if signed else ""
    return f"{x * 100:{sign}.0f}% [{interval[0] * 100:{sign}.0f}, {interval[1] * 100:{sign}.0f}]"


def estimate_line(plan: Plan, model: str, api: str, max_cost: float | None = None) -> str:
    cached = f", {plan.cached} answered from the cache" if plan.cached else ""
    limit = f" (--max-cost ${max_cost:,.2f})" if max_cost is not None else ""
    if max_cost is not None and plan.estimate_usd > max_cost:  # (a dry run: a run would stop here)
        limit = (f", above --max-cost ${max_cost:,.2f}: a run would send nothing (--max-cost {plan.enough_usd:.2f} "
                 f"spends it: the estimate and {ENOUGH_MARGIN:.0%} more)")
    return (f"estimate: ${plan.estimate_usd:,.2f} at most for {plan.requests} request(s) to {model} ({api}){cached}"
            f"{limit}; priced by {plan.prices.read}, replies at their max_tokens")


#: the least width of the dry run's "recorded next action" column on a terminal
ACTION_LEAST = 24


def write_plan(plan: Plan, model: str, api: str, max_cost: float, out: TextIO) -> None:
    """The samples and the estimate (``--dry-run``)."""
    printer = Printer(out)
    # (one transcript: named in the title, not in every row)
    transcripts = {s.transcript for s in plan.samples}
    many = len(transcripts) > 1
    of = "" if many or not transcripts else f", all of {named(transcripts)(next(iter(transcripts)))}"
    table = Table(title=f"next-action samples: {len(plan.samples)}{of}")
    # (the action asked about kept in view, a few words wide: a narrow terminal leaves out the pair's
    # estimate, then its tokens, which the lines below sum up; never the transcript, without which
    # two rows of call 72 could not be told apart: its name is cut in the middle instead)
    for head, essential in (("policy", True), ("transcript", True), ("call", True), ("lost probes", True),
                            ("recorded next action", True), ("tokens", False),
                            ("est. cost", False)):
        if head == "transcript" and not many:
            continue
        if head == "recorded next action":  # (on a terminal, a long path cut in its middle to the room left)
            table.add_column(head, overflow="fold", min_width=ACTION_LEAST,
                             shorten=lambda k, width: plan.samples[k].recorded.describe(width))
        elif head in ("policy", "transcript"):  # (a name cut in its middle on a narrow terminal, never folded)
            table.add_column(head, essential=essential, no_wrap=True, cut="middle")
        else:  # (figures, whole)
            table.add_column(head, essential=essential, no_wrap=True, justify="right",
                             short="lost" if head == "lost probes" else "")
    name = named(s.transcript for s in plan.samples)  # (as compare's and check's tables name them)
    for s in plan.samples:
        cells = [s.policy, name(s.transcript)] if many else [s.policy]
        table.add_row(*cells, str(s.call), str(len(s.lost_probes)), s.recorded.describe(60),
                      f"{s.pair.policy_tokens:,} / {s.pair.control_tokens:,}",
                      "not sent" if s.skipped is not None else f"${s.estimate_usd:,.3f}")
    if plan.samples:
        shown = printer.table(table)
        said = [f"{head}: {meaning}" for head, meaning in (
            ("tokens", "the context sent under the policy / with no compaction (the control)"),
            ("est. cost", "the pair's requests at most")) if head in shown]
        if said:  # (only the columns a narrow terminal kept: the estimate below sums them up)
            printer.text("; ".join(said))
        if (unsent := unsent_line(plan, model, " (its tokens above)")) is not None:
            printer.text(unsent)
    else:  # (a table of headers only says less than this)
        printer.text("next-action samples: none")
    for policy, n in plan.candidates.items():
        if n == 0:
            printer.text(f"{policy}: no call's context differs from no compaction's: nothing to ask")
        else:
            printer.text(allocation_line(plan, policy))
    printer.text(estimate_line(plan, model, api, max_cost))


def unsent_line(plan: Plan, model: str, where: str = "") -> str | None:
    """The samples that will not be sent, their control over the model's window, and how they
    count (their estimate is no saving: they are not asked), or None where every one is sent:
    said by next-action's dry run under its table, and before any request by next-action, compare
    and check (``where``: where the tokens are shown)."""
    unsent = [s for s in plan.samples if s.skipped is not None]
    if not unsent:
        return None
    window = f" ({plan.window:,} tokens)" if plan.window else ""
    return (f"not sent: {len(unsent)} sample(s) whose control{where} is over {model}'s window{window}, "
            f"{_calls(unsent)}; each is counted apart as a control the model refuses, not as a disagreement, and "
            "costs nothing")


def plan_lines(plan: Plan, model: str, api: str, max_cost: float) -> list[str]:
    """What a job that asks the model says of its plan before any request: the samples not sent
    (where any is not) and the estimate."""
    unsent = unsent_line(plan, model)
    return [*([unsent] if unsent is not None else []), estimate_line(plan, model, api, max_cost)]


#: the most calls of a policy the dry run's "not sent" line names (the JSON plan has each)
CALLS_NAMED = 12


def _calls(samples: list[Any]) -> str:
    """The calls of ``samples`` by policy, ``CALLS_NAMED`` of each at most: "s08 call 109, 112"."""
    by: dict[str, list[str]] = {}
    for s in samples:
        by.setdefault(s.policy, []).append(str(s.call))
    return "; ".join(f"{policy} call {', '.join(calls[:CALLS_NAMED])}"
                     + (f" and {len(calls) - CALLS_NAMED} more" if len(calls) > CALLS_NAMED else "")
                     for policy, calls in by.items())


def allocation_line(plan: Plan, policy: str) -> str:
    """How a policy's samples are spread over its strata (Neyman's allocation, #46 §1)."""
    facts = plan.strata.get(policy) or {}
    parts = [f"{name} {facts[h].size:,} candidate(s) → {facts[h].sampled} sample(s)"
             for h, name in ((True, "a probe lost:"), (False, "none lost:")) if h in facts]
    return (f"{policy}: {'; '.join(parts)} (Neyman's allocation: more where a probe was lost, whose answers are "
            "expected to spread more; the figures are weighted back to the candidates' shares)")


def write_table(result: Agreement, out: TextIO) -> None:
    printer = Printer(out)
    table = Table(title=f"next-action agreement: {result.model} ({result.api}), "
                        f"{sum(p.samples for p in result.policies)} paired sample(s)")
    longest = max((len(p.policy) for p in result.policies), default=6)
    table.add_column("policy", essential=True, min_width=min(longest, 40))  # (a name is not cut mid-word)
    table.add_column("samples", justify="right", essential=True)
    table.add_column("above chance", justify="right", essential=True, no_wrap=True)
    table.add_column("agreement", justify="right", essential=True, no_wrap=True)
    table.add_column("chance", justify="right", essential=False)
    table.add_column("control", justify="right", essential=True)
    table.add_column("difference", justify="right", essential=True, no_wrap=True)
    table.add_column("probe lost", justify="right", essential=False, no_wrap=True)
    table.add_column("none lost", justify="right", essential=False, no_wrap=True)
    for row in _rows(result.to_dict()):
        table.add_row(*row)
    printer.table(table)
    for p in result.policies:
        if p.candidates == 0:
            printer.text(f"{p.policy}: no call's context differs from no compaction's: nothing to ask")
        elif p.unknown:
            printer.text(f"{p.policy}: {p.unknown}")
        elif p.tells_nothing:
            printer.text(nothing_line(p.policy, p.control_agreement, p.chance_agreement))
    printer.text(RULE)
    printer.text(asked_line(result.to_dict()))
    printer.text(result.spent_line())


def asked_line(doc: dict[str, Any]) -> str:
    """How the model was asked: one draw an arm at what temperature, with whose system prompt."""
    sources = list((doc.get("system_prompt") or {}).values())
    kinds = {k: sum(s.split(" ")[0] == k for s in sources) for k in ("recorded", "given", "stand-in")}
    said = ", ".join(f"{kind} for {n}" for kind, n in kinds.items() if n) or "none"
    return (f"each arm asked once (cached), at temperature {doc.get('temperature', '?')}; system prompt: {said} "
            "transcript(s)")


def write_json(result: Agreement, out: TextIO) -> None:
    write_json_line(out, result.to_dict(), orjson.OPT_INDENT_2)


WRITERS = {"table": write_table, "json": write_json}


def plan_dict(plan: Plan, model: str, api: str, max_cost: float) -> dict[str, Any]:
    """The dry run's plan as data: each sample (as the run's JSON gives it, without the arms no one
    asked), the calls each policy had to choose from, and the estimate with what it rests on."""
    samples = []
    for s in plan.samples:
        d = s.to_dict()
        del d["policy_arm"], d["control_arm"]
        samples.append(d)
    return {"dry_run": True, "model": model, "api": api, "samples": samples, "candidates": dict(plan.candidates),
            "requests": plan.requests, "cached": plan.cached, "estimate_usd": round(plan.estimate_usd, 6),
            "max_cost_usd": max_cost, "within_max_cost": plan.estimate_usd <= max_cost,
            "enough_usd": round(plan.enough_usd, 2), "window": plan.window, "priced_by": plan.prices.read}


def write_plan_json(plan: Plan, model: str, api: str, max_cost: float, out: TextIO) -> None:
    write_json_line(out, plan_dict(plan, model, api, max_cost), orjson.OPT_INDENT_2)


#: the dry run's writers, by ``--format``
PLAN_WRITERS = {"table": write_plan, "json": write_plan_json}

LEDGER = ["policy", "transcript", "call", "lost_probes", "recorded", "policy_reply", "policy_agrees", "control_reply",
          "control_agrees", "policy_tokens", "control_tokens", "prefix_tokens", "estimate_usd", "policy_cached",
          "control_cached", "error"]


def ledger_csv(result: Agreement) -> bytes:
    rows: list[list[Any]] = [LEDGER]
    for s in result.samples:
        d = s.to_dict()
        first, second = d["policy_arm"] or {}, d["control_arm"] or {}
        errors = [f"{arm}: {a['error']}" for arm, a in (("policy", first), ("control", second)) if a.get("error")]
        row = [s.policy, s.transcript, s.call, "; ".join(s.lost_probes[:10]), d["recorded"], first.get("action"),
               first.get("agrees"), second.get("action"), second.get("agrees"), d["policy_tokens"],
               d["control_tokens"], d["prefix_tokens"], d["estimate_usd"], first.get("cached"), second.get("cached"),
               " | ".join(errors)]
        rows.append([csv_cell(v) for v in row])
    return csv_bytes(rows)


def markdown(result: Agreement) -> str:
    lines = [f"# Next-action agreement: {md_text(result.model)} ({result.api})", "", md_text(RULE) + ".", "",
             *_md_table(result.to_dict())]
    lines += ["", md_text(result.spent_line()), "", "## Samples", "",
              "| policy | transcript | call | lost probes | recorded | on the policy's context | on the control |",
              "|---|---|---:|---:|---|---|---|"]
    for s in result.samples:
        d = s.to_dict()
        arms = []
        for arm in (d["policy_arm"], d["control_arm"]):
            if arm is None:
                arms.append("not asked")
            else:
                mark = "agrees" if arm["agrees"] else "differs" if arm["agrees"] is False else "no answer"
                arms.append(md_cell(f"{arm['error'] or arm['action']} ({mark})"))
        lines.append(f"| {md_cell(s.policy)} | {md_cell(shown(s.transcript))} | {s.call} | {len(s.lost_probes)} | "
                     f"{md_cell(d['recorded'])} | {arms[0]} | {arms[1]} |")
    return "\n".join(lines) + "\n"


def _rows(doc: dict[str, Any]) -> list[list[str]]:
    """The table's rows from an Agreement's dict (what a compare keeps in its meta)."""
    return [[p["policy"], f"{p['samples']}" + (f" ({p['failed']} failed)" if p["failed"] else "")
             + (f" ({p['control_refused']} control(s) over the model's window)" if p.get("control_refused") else ""),
             "tells nothing" if p.get("tells_nothing") else _interval(p.get("above_chance"), p.get("above_chance_interval")),
             _interval(p["agreement"], p["agreement_interval"]), _pct(p.get("chance_agreement")),
             _pct(p["control_agreement"]), _interval(p["difference"], p["difference_interval"], signed=True),
             _stratum(p, "lost"), _stratum(p, "kept")]
            for p in doc["policies"]]


def nothing_line(policy: str, control: float | None, chance: float | None) -> str:
    """What a comparison whose control agrees no more than chance says."""
    return (f"{policy}: the comparison tells nothing: on no compaction's context the model agrees with the recording "
            f"{_pct(control)} of the time, no more than chance ({_pct(chance)}), so it does not do what the agent did "
            "even with everything in view")


def _stratum(p: dict[str, Any], h: str) -> str:
    """A stratum's own agreement, of its samples, and its share of the candidates."""
    size, total = p.get(f"{h}_candidates", 0), p.get("candidates") or 0
    share = f", {size / total:.0%} of calls" if total else ""
    return f"{_pct(p[f'{h}_agreement'])} of {p[f'{h}_samples']}{share}"


HEADS = ["policy", "samples", "above chance", "agreement", "chance", "control", "difference", "probe lost",
         "none lost"]


def _said(doc: dict[str, Any]) -> str:
    cut = " Interrupted: only the replies that came back are counted." if doc.get("interrupted") else ""
    return (f"Asked {doc['model']} ({doc['api']}) for the next action on sampled calls, on each policy's context and "
            f"on no compaction's (the control); {RULE}. Spent ${doc['spent_usd']:,.4f} on {doc['sent']} request(s) sent "
            f"(the others answered from the cache; estimate ${doc['estimate_usd']:,.4f} at most); every sample is in "
            f"samples.csv.{cut}")


def md_section(doc: dict[str, Any]) -> list[str]:
    """compare's report.md section for ``compare --next-action``."""
    return ["## Next-action agreement", "", md_text(_said(doc)), "", *_md_table(doc), ""]


def _md_table(doc: dict[str, Any]) -> list[str]:
    return (["| " + " | ".join(HEADS) + " |", "|---" + "|---:" * (len(HEADS) - 1) + "|"]
            + ["| " + " | ".join(md_cell(x) for x in row) + " |" for row in _rows(doc)])


def html_section(doc: dict[str, Any]) -> str:
    """compare's report.html section for ``compare --next-action``."""
    import html

    e = html.escape
    head = "".join(f"<th{' class=l' if i == 0 else ''}>{e(h)}</th>" for i, h in enumerate(HEADS))
    body = "".join("<tr>" + "".join(f"<td{' class=l' if i == 0 else ''}>{e(visible(x))}</td>" for i, x in enumerate(row))
                   + "</tr>" for row in _rows(doc))
    return f"<h2>Next-action agreement</h2><p>{e(visible(_said(doc)))}</p><table><tr>{head}</tr>{body}</table>"


def result_files(result: Agreement) -> dict[str, bytes]:
    return {"next_action.json": json_bytes(result.to_dict(), orjson.OPT_INDENT_2) + b"\n",
            "samples.csv": ledger_csv(result), "report.md": markdown(result).encode("utf-8")}
