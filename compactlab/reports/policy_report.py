"""Writers for ``compactlab policies``: the preset list and one resolved policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO

import orjson


from ..engine.policy import Policy
from .terminal import Printer, Table
from .text import json_bytes, write_json_line


def toml_value(v: Any) -> str:
    """A value as TOML text, escaped for terminals like every text we write."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        # a JSON string is a TOML basic string once DEL (and, for terminals, C1 controls and bidi
        # overrides) are escaped too
        return json_bytes(v).decode("utf-8")
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):  # an inline table (a step's own settings)
        return "{" + ", ".join(f"{_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


#: the longest line ``policies show`` writes of a long string (a TOML line-ending backslash joins them)
TOML_WIDTH = 88


def _pair(key: str, v: Any) -> str:
    """``key = value``; where longer than a line, a string as lines of words (``_long_string``) and
    an array an item a line (a terminal shows a preset's description as words, not folded mid-word)."""
    one = f"{_key(key)} = {toml_value(v)}"
    if len(one) <= TOML_WIDTH:
        return one
    if isinstance(v, str):
        return _long_string(key, v)
    if isinstance(v, list) and v:
        return f"{_key(key)} = [\n" + "".join(f"    {toml_value(x)},\n" for x in v) + "]"
    return one


def _long_string(key: str, v: str) -> str:
    """``key = "…"`` as a multi-line basic string whose lines end in a backslash, broken after a
    space that a word follows (TOML trims the break and the following line's indentation, and
    nothing else: the value is the same string)."""
    # (as a basic string escapes it: no raw quote or newline, and a backslash only begins an escape)
    escaped = toml_value(v)[1:-1]
    first, *rest = escaped.split(" ")
    # (the first word just after the opening quotes: a break there would trim a leading space)
    lines, line = [], f'{_key(key)} = """{first}'
    for word in rest:
        if word and not line.endswith((" ", '"""')) and len(line) + len(word) + 3 > TOML_WIDTH:
            lines.append(line + " \\")  # (the space kept before the break; the next line starts at a word)
            line = word
        else:
            line += " " + word
    lines.append(line)
    return "\n".join(lines) + '"""'


def _key(k: str) -> str:
    return k if k and all(c.isascii() and (c.isalnum() or c in "_-") for c in k) else toml_value(k)


def to_toml(policy: Policy) -> str:
    data = policy.resolved()
    lines = [f"# fingerprint {policy.fingerprint}"]
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    lines += [_pair(k, v) for k, v in data.items() if k not in tables]
    for name, table in tables.items():
        lines += ["", f"[{name}]"] + [_pair(k, v) for k, v in table.items()]
    return "\n".join(lines) + "\n"


def write_policy_toml(policy: Policy, out: TextIO) -> None:
    out.write(to_toml(policy) + _settings_comment(policy))


def write_policy_json(policy: Policy, out: TextIO) -> None:
    from ..corpus.harness_settings import SETTINGS

    doc = {"fingerprint": policy.fingerprint, **policy.resolved()}
    if policy.name in SETTINGS:
        doc["harness_settings"] = [dict(zip(("setting", "where", "range", "default", "sets"), row))
                                   for row in SETTINGS[policy.name]]
    write_json_line(out, doc, orjson.OPT_INDENT_2)


#: the presets of the harnesses whose compactions ``inspect --compactions`` holds to a threshold
#: (``audit.py``: Claude Code's, goose's and Qwen Code's rules, Codex's by replaying its preset)
AUDITED = ("claude-code", "codex", "goose", "qwen-code")


def _settings_comment(policy: Policy) -> str:
    """For a harness's preset: what the harness lets you set about its compaction, as comments
    (the TOML stays a policy file), with where, its range, its default and what it sets here."""
    from ..corpus.harness_settings import SETTINGS, of_preset, set_otherwise

    rows = SETTINGS.get(policy.name)
    if not rows:
        return ""
    h = of_preset(policy.name)
    tuned = f"; tune --harness {h.name} searches it" if h is not None else ""
    # (the harnesses whose compactions the audit holds to the threshold a setting implies)
    audited = "audits it" if policy.name in AUDITED else "lists its compactions"
    lines = ["", f"# What {policy.name} lets you set, as this preset honours it (compactlab inspect --compactions "
                 f"{audited}{tuned}):"]
    for setting, where, span, default, sets in rows:
        lines.append(f"#   {setting} ({where}; {span}): default {default}; sets {sets}")
    if (yours := set_otherwise(policy)) is not None:  # (this preset is the default, not what your harness does)
        lines.append(f"# You set {yours[1]}: -p {policy.name} {yours[2]} replays yours.")
    return "\n".join(lines) + "\n"


def write_list_json(policies: list[Policy], out: TextIO) -> None:
    doc = [{"name": p.name, "fingerprint": p.fingerprint, "brief": p.brief, "description": p.description}
           for p in policies]
    write_json_line(out, doc)


def write_list_table(policies: list[Policy], out: TextIO) -> None:
    table = Table(title="policies")
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("fingerprint", no_wrap=True, essential=False)
    table.add_column("what it does", min_width=24)
    for p in policies:
        table.add_row(p.name, p.fingerprint, p.brief or p.description)
    printer = Printer(out)
    printer.table(table)
    printer.text("compactlab policies show NAME: the whole policy, with the sources of its numbers.")


#: the writers of ``policies show --format`` and ``policies list --format``
SHOW_WRITERS: dict[str, Callable[[Policy, TextIO], None]] = {"toml": write_policy_toml, "json": write_policy_json}
LIST_WRITERS: dict[str, Callable[[list[Policy], TextIO], None]] = {"table": write_list_table, "json": write_list_json}
