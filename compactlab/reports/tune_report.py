"""What ``tune`` writes: the front as a table (terminal, front.csv, front.json), one policy file per
front point (ready for ``replay -p`` / ``check -p``), and the chart of every trial."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

import orjson

from ..plumbing.outputs import remove_in_folder, write_in_folder
from ..corpus.trials import TuneResult, column
from .policy_report import toml_value
from .terminal import Printer, Table
from .text import csv_bytes, csv_cell, json_bytes

#: the front points the terminal shows at most (all of them are in front.csv)
MAX_TERMINAL_POINTS = 20

AXES = {"cost": "cost saving vs no compaction", "recall": "probe recall (what the agent later used, kept)",
        "retention": "retention (referenced results intact)", "reduction": "tokens saved"}


def front_policy(result: TuneResult, i: int) -> str:
    """Front point ``i`` (0-based) as a policy file: the base with the point's values."""
    p = result.front[i]
    scores = ", ".join(f"{column(o)} {p.scores[o]:.4f}" for o in result.objectives)
    # (a base that is a file: by its absolute path, which extends finds wherever the front file is)
    base = os.path.abspath(result.base) if os.path.isfile(result.base) else result.base
    stem = Path(result.base).stem if base != result.base else result.base
    lines = [f"extends = {toml_value(base)}", f"name = {toml_value(f'{stem}-front-{i + 1:02d}')}",
             f'description = "tune front point {i + 1} (trial {p.number}) over the tuned corpus: {scores}"', ""]
    tables: dict[str, list[str]] = {}
    for key, value in p.values.items():
        table, _, name = key.partition(".")
        tables.setdefault(table, []).append(f"{name} = {toml_value(value)}")
    for table, keys in tables.items():
        lines += [f"[{table}]", *keys, ""]
    return "\n".join(lines)


def front_files(n: int) -> str:
    """The front's policy files as the list of files written names them: one by its name, more as a
    range ("policies/front-01..03.toml")."""
    return "policies/front-01.toml" if n == 1 else f"policies/front-01..{n:02d}.toml"


def write_files(result: TuneResult, out_dir: str, chart: bool = True) -> list[str]:
    """front.csv, front.json, policies/front-NN.toml and charts/tune.svg in ``out_dir``, never
    through a symbolic link planted in it."""
    rows = result.front_rows()
    heads = list(rows[0]) if rows else ["point", "trial", *[p.key for p in result.params],
                                        *[column(o) for o in result.shown()], "cost_usd", "violations", "overflows"]
    write_in_folder(out_dir, "front.csv", csv_bytes([heads, *([csv_cell(r[h]) if isinstance(r[h], str) else r[h]
                                                              for h in heads] for r in rows)]))
    doc = {"base": result.base, "objectives": result.objectives, "space": [str(p) for p in result.params],
           "trials": len(result.points), "interrupted": result.interrupted is not None, "recommendation": result.recommendation,
           "passes": result.passes, "harness": result.harness, "setting": result.paste, "nothing_to_set": result.nothing_to_set,
           "current": result.current,
           "notes": result.notes,
           "base_scores": {column(o): result.base_point.scores[o] for o in result.objectives},
           "front": rows}
    write_in_folder(out_dir, "front.json", json_bytes(doc, orjson.OPT_INDENT_2) + b"\n")
    remove_in_folder(out_dir, "policies", "front-*.toml")  # a front of an earlier run of this study
    written = ["front.csv", "front.json"]
    for i in range(len(result.front)):
        write_in_folder(out_dir, f"policies/front-{i + 1:02d}.toml", front_policy(result, i).encode())
    if result.front:
        written.append(front_files(len(result.front)))
    if chart:
        from .charts import file_bytes, tune_chart

        y = result.objectives[0]
        x = result.objectives[1] if len(result.objectives) > 1 else ("recall" if y != "recall" else "cost")
        chosen = result.chosen if result.chosen is not None and x in result.chosen.scores else None
        svg = tune_chart([(p.scores[x], p.scores[y], p.feasible) for p in result.points],
                            [(p.scores[x], p.scores[y]) for p in result.front],
                            (result.base_point.scores[x], result.base_point.scores[y]), AXES[x], AXES[y],
                            f"tune of {result.base}: {len(result.points)} trials, the front and the base policy",
                            floors=(_floor(result, x, y), _floor(result, y, x)),
                            chosen=None if chosen is None else (chosen.scores[x], chosen.scores[y],
                                                                "recommended" if result.passes else
                                                                "to use if you must compact"))
        write_in_folder(out_dir, "charts/tune.svg", file_bytes(svg))
        written.append("charts/tune.svg")
    return written


def _floor(result: TuneResult, objective: str, other: str) -> tuple[str, float] | None:
    """The recommendation's floor of ``objective`` (recall, retention), to draw, named with the
    other measure's where that one is on no axis (``other``: the other axis's objective); None
    for an objective with no floor."""
    if objective not in result.floors:
        return None
    value = result.floors[objective]
    undrawn = [f"{m}'s, {v * 100:.1f}%, is not drawn" for m, v in result.floors.items() if m not in (objective, other)]
    return f"the {objective} floor at {value * 100:.1f}%" + (f" ({'; '.join(undrawn)})" if undrawn else ""), value


def write_table(result: TuneResult, out: TextIO) -> None:
    printer = Printer(out)
    table = Table(title=f"Pareto front of {result.base}: {len(result.front)} point(s) of {len(result.points)} trial(s)")
    table.add_column("point", justify="right", essential=True)
    for head, short in _heads(result):
        table.add_column(head, justify="right", essential=True, overflow="fold", short=short)
    shown = [o for o in result.shown() if o in result.base_point.scores]
    for o in shown:
        table.add_column(column(o).replace("_", " "), justify="right", essential=True, no_wrap=True,
                         short=SHORT.get(column(o)))
    table.add_column("cost", justify="right", no_wrap=True)
    base = result.base_point
    table.add_row("base", *_point_values(result, result.base_point.values), *[_pct(base.scores[o]) for o in shown],
                  f"${base.scores['cost_usd']:,.4f}", style="dim")
    if result.reference is not None:
        ref = result.reference
        table.add_row("none", *["" for _ in result.params], *[_pct(ref.scores.get(o, 0.0)) for o in shown],
                      f"${ref.scores['cost_usd']:,.4f}", style="dim")
    rows: list[int] | range = range(len(result.front))
    if len(result.front) > MAX_TERMINAL_POINTS:  # evenly along the front, both ends kept
        step = (len(result.front) - 1) / (MAX_TERMINAL_POINTS - 1)
        rows = sorted({round(k * step) for k in range(MAX_TERMINAL_POINTS)})
    for i in rows:
        point = result.front[i]
        table.add_row(str(i + 1), *_point_values(result, point.values),
                      *[_pct(point.scores.get(o, 0.0)) for o in shown], f"${point.scores['cost_usd']:,.4f}")
    printer.table(table)
    if len(rows) < len(result.front):
        printer.text(f"{len(rows)} of the {len(result.front)} front points shown: every one is in front.csv.")
    printer.text(result.recommendation, style="bold")
    if result.nothing_to_set:
        printer.text(f"There is nothing to set: {result.nothing_to_set}.")
    if result.paste:
        printer.text(f"The {result.harness} setting to paste{'' if result.passes else ', if you must compact'}:")
        for line in result.paste:
            printer.text(f"  {line}")
    # (its notes are the job's warnings, said once on stderr as replay's and compare's are)


def write_json(result: TuneResult, out: TextIO) -> None:
    out.write(json_bytes({"recommendation": result.recommendation, "passes": result.passes, "setting": result.paste,
                          "nothing_to_set": result.nothing_to_set, "notes": result.notes,
                          "front": result.front_rows()},
                         orjson.OPT_INDENT_2).decode() + "\n")


#: the objectives' short headers, for a narrow terminal
SHORT = {"cost_saving": "saving", "retention": "retain", "reduction": "tokens"}


def _heads(result: TuneResult) -> list[tuple[str, str]]:
    """The searched keys' columns and their short headers: the harness's own settings where its
    were searched."""
    if result.harness is not None:
        from ..corpus.harness_settings import harness

        return [(k.setting, k.short or k.setting) for k in harness(result.harness).knobs]
    return [(p.key, p.key.rsplit(".", 1)[-1]) for p in result.params]


def _point_values(result: TuneResult, values: dict[str, object]) -> list[str]:
    if result.harness is not None:
        from ..corpus.harness_settings import harness

        return [_shown(v) for v in harness(result.harness).setting_values(values).values()]
    return [_shown(values.get(p.key)) for p in result.params]


def _shown(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


WRITERS = {"table": write_table, "json": write_json}
