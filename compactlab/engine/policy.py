"""Typed policy configuration (SPEC §4): one frozen dataclass per layer, validated by pydantic.

Unknown keys, wrong types and impossible combinations are errors that name the key. A policy
file may say ``extends = "s08"`` to start from a preset. ``--set layer.key=value`` overrides any
key; the value is read as a TOML value (``true``, ``3``, ``"text"``, ``["a"]``) and as a plain
string when it is not one. The fingerprint is a short hash of the resolved behaviour (name and
description excluded), stored in every report.

Each layer's config lives beside the layer and is registered with it (``layers/registry.py``):
a Policy has a table for every registered layer, in registration order, plus ``size``; its
``order`` names the cheap ones. The configs are standard-library dataclasses with their
constraints in ``Annotated`` metadata (``config.py``), which pydantic reads when it validates
(``extra = "forbid"``, types, bounds; the cross-field rules are in ``__post_init__``). Pydantic is imported only to validate what a user wrote: a
built-in preset with no ``--set`` is trusted data (every preset is validated by the test suite)
and is built directly, which keeps pydantic's import and schema building (~55 ms) off the
start of every replay.
"""

from __future__ import annotations

import functools
from dataclasses import field, fields
from pathlib import Path
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import orjson

from ..config import Bound, NonNegative, Section, added_defaults, opt, per_class, section
from ..errors import InputError, PolicyError, did_you_mean, spelt_like
from ..plumbing import package_toml
from ..plumbing.sha256 import hex_of
from ..plumbing.files import read_regular_text
from .layers import (REGISTRY, BudgetConfig, CustomConfig, ManualConfig, MicroConfig, ReactiveConfig, SnipConfig, Summarising,
                     SummaryConfig)
from .layers.custom import COMMAND

__all__ = ["ALIASES", "CHEAP_LAYERS", "SECTIONS", "BudgetConfig", "ManualConfig", "MicroConfig", "Policy",
           "ReactiveConfig", "SizeConfig", "SnipConfig", "SummaryConfig", "build_policy", "fingerprint_of",
           "load_policy", "parse_override", "preset_names"]

#: the layers a policy orders (run on every call), in their default order
CHEAP_LAYERS = tuple(name for name, layer in REGISTRY.items() if layer.cheap)


@section
class SizeConfig(Section):
    """How tokens are estimated from compact-JSON characters."""

    chars_per_token: Annotated[float, Bound(ge=0.1, le=100)] = opt(
        4.0, "token estimate: chars / chars_per_token (0.1 to 100)")
    overhead_tokens: NonNegative = opt(0, "tokens of system prompt and tools not in the transcript")


#: the tables of a policy, by key: every registered layer's config, and the size estimate
SECTIONS: dict[str, type[Section]] = {**{name: layer.config for name, layer in REGISTRY.items()}, "size": SizeConfig}
#: other names a key is accepted under (table, alias) -> key
ALIASES = {("micro", "exclude_tools"): "preserve_tools"}


#: the names ``Policy.order`` accepts: the cheap layers (a test holds them equal to CHEAP_LAYERS)
CheapLayer = Literal["budget", "snip", "micro", "custom"]


@section
class Policy(Section):
    """A whole policy: the cheap layers' order, a table for every registered layer (defaults: the
    layer's), and the size estimate. Its tables are ``SECTIONS`` (a test holds the fields equal)."""

    name: str = "custom"
    description: str = ""
    brief: str = ""  # one short line: what it does, whose behaviour it models
    order: list[CheapLayer] = opt(list(CHEAP_LAYERS), "the cheap layers, in the order they run")
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    snip: SnipConfig = field(default_factory=SnipConfig)
    micro: MicroConfig = field(default_factory=MicroConfig)
    summary: SummaryConfig = field(default_factory=SummaryConfig)
    reactive: ReactiveConfig = field(default_factory=ReactiveConfig)
    manual: ManualConfig = field(default_factory=ManualConfig)
    custom: CustomConfig = field(default_factory=CustomConfig)
    size: SizeConfig = field(default_factory=SizeConfig)

    def __post_init__(self) -> None:
        for key, kind in SECTIONS.items():
            if not isinstance(getattr(self, key), kind):
                raise TypeError(f"Policy({key}=...) takes a {kind.__name__}; build_policy() builds one from a dict")
        if len(set(self.order)) != len(self.order):
            raise ValueError("order lists a layer twice")
        if self.custom.enabled and "custom" not in self.order:  # (your own step is never silently off: it
            # is off by default, so enabled is always yours; the built-in layers' order picks among defaults)
            raise ValueError(f"custom is enabled but not in order, so your step would never run: add it to order "
                             f"(order = {[*self.order, 'custom']!r}) or set custom.enabled = false")

    def config_for(self, layer: str) -> Any:
        """What layer ``layer`` runs by (``layer(context, config, env)``): its table; with the
        summary table beside it (``Summarising``) for a layer that summarises on its own event."""
        own = getattr(self, layer)
        return Summarising(own, self.summary) if REGISTRY[layer].summarises else own

    def resolved(self) -> dict[str, Any]:
        """The policy as plain data (what dataclasses.asdict gives, a few times faster: a folder of
        small sessions asks for it once a session)."""
        return _plain(self)

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.resolved())

    @property
    def acts(self) -> bool:
        """Whether any layer is on (a policy with none sends what the recording sent)."""
        return any(getattr(self, key).enabled for key in SECTIONS if hasattr(getattr(self, key), "enabled"))


def fingerprint_of(resolved: dict[str, Any]) -> str:
    """Short hash of a resolved policy's behaviour (its name and words about it left out)."""
    data = {k: v for k, v in resolved.items() if k not in ("name", "description", "brief")}
    custom = data.get("custom")
    if isinstance(custom, dict) and custom.get("enabled"):  # your own step: its code is its behaviour
        from .layers.custom import load_step

        data["custom"] = {**custom, "code": load_step(custom["call"]).digest}
    for section, kind in SECTIONS.items():  # keys added later, at the default that keeps old behaviour
        table = data.get(section)
        if isinstance(table, dict):
            data[section] = {k: v for k, v in table.items()
                             if not (k in (later := added_defaults(kind)) and later[k] == v)}
            if table and not data[section]:  # a layer added later, off: as if it were not there
                del data[section]
                if isinstance(data.get("order"), list):
                    data["order"] = [name for name in data["order"] if name != section]
    return hex_of(orjson.dumps(data, option=orjson.OPT_SORT_KEYS))[:12]


@per_class
def _field_names(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))


def _plain(config: Section) -> dict[str, Any]:
    out = {}
    for name in _field_names(type(config)):
        value = getattr(config, name)
        out[name] = (_plain(value) if isinstance(value, Section) else list(value) if type(value) is list
                     else dict(value) if type(value) is dict else value)
    return out


# -- loading ---------------------------------------------------------------------------------

def _presets() -> Any:
    """The presets folder: a plain directory when installed as files (the fast, usual case),
    else importlib.resources' view of it (a zipped install)."""
    here = Path(__file__).parents[1] / "presets"  # the package folder
    if here.is_dir():
        return here
    from importlib import resources

    return resources.files("compactlab").joinpath("presets")


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in _presets().iterdir() if p.name.endswith(".toml"))


def _preset_text(name: str) -> str:
    res = _presets().joinpath(f"{name}.toml")
    if "/" in name or "\\" in name or not res.is_file():
        names = preset_names()
        mean = did_you_mean(spelt_like(name, names))
        raise PolicyError(f"unknown policy {name!r}", hint=f"{mean}presets: {', '.join(names)}; or give a TOML path")
    return res.read_text(encoding="utf-8")


def _parse_toml(text: str, where: str, packaged: bool = False) -> dict[str, Any]:
    """A policy's TOML: a preset's (``packaged``: ``plumbing.package_toml``) or the user's."""
    if packaged:
        return package_toml.loads(text)
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{where}: invalid TOML: {exc}") from None


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


#: a policy that is one step of your own: ``-p py:package.module:function`` (``layers.custom``)
STEP_PREFIX = "py:"
#: a policy that is one step of your own in another process: ``-p "cmd:node compact.js"``
COMMAND_PREFIX = COMMAND


def _raw_policy(ref: str, seen: tuple[str, ...] = ()) -> tuple[dict, bool]:
    """The policy's TOML data with ``extends`` resolved, and whether it is all built-in presets
    (or your own step alone: its table is made here, the step's name a string in its place)."""
    if ref.startswith((STEP_PREFIX, COMMAND_PREFIX)) and not seen:  # your own step, alone
        call = ref[len(STEP_PREFIX):] if ref.startswith(STEP_PREFIX) else ref
        name = call.rpartition(":")[2] or call if ref.startswith(STEP_PREFIX) else Path(call.split()[-1]).stem
        return {"name": name, "description": f"your own step {call}", "order": ["custom"],
                "custom": {"enabled": True, "call": call}, **{k: {"enabled": False} for k in SECTIONS
                                                               if k not in ("custom", "size")}}, True
    if ref in seen:
        raise PolicyError(f"policy {ref!r} extends itself ({' -> '.join(seen + (ref,))})")
    is_path = _names_file(ref) or Path(ref).is_file()
    if is_path:
        path = Path(ref)
        if not path.exists():
            raise PolicyError(f"{ref}: no such policy file")
        try:
            text = read_regular_text(path, "policy")
        except InputError as exc:
            raise PolicyError(exc.message) from None
        data = _parse_toml(text, ref)
        data.setdefault("name", path.stem)
        _resolve_prompt_file(data, path.parent)
    else:
        data = _parse_toml(_preset_text(ref), f"preset {ref}", packaged=True)
    parent = data.pop("extends", None)
    if parent is not None:
        if not isinstance(parent, str):
            raise PolicyError(f"{ref}: extends must be a policy name or path")
        if is_path and _names_file(parent) and not Path(parent).is_absolute():
            parent = str(Path(ref).parent / parent)  # beside the file that names it, wherever one stands
        base, base_preset = _raw_policy(parent, seen + (ref,))
        base.pop("name", None)
        base.pop("description", None)
        base.pop("brief", None)
        own = data.get("summary")
        data = _merge(_one_trigger(base, [["summary", k] for k in own] if isinstance(own, dict) else []), data)
        return data, base_preset and not is_path
    return data, not is_path


def _names_file(ref: str) -> bool:
    return ref.endswith(".toml") or "/" in ref or "\\" in ref


def _resolve_prompt_file(data: dict, folder: Path) -> None:
    """A summary prompt a policy file names by a relative path is read beside that file."""
    summary = data.get("summary")
    prompt = summary.get("prompt") if isinstance(summary, dict) else None
    if isinstance(summary, dict) and isinstance(prompt, str) and prompt not in _prompt_names() \
            and not Path(prompt).is_absolute():
        summary["prompt"] = str(folder / prompt)


def _prompt_names() -> tuple[str, ...]:
    from ..summarizers.prompts import PROMPTS

    return tuple(PROMPTS)


def _check_prompt(policy: Policy, where: str) -> Policy:
    """summary.prompt names a built-in prompt or a readable file: a typo must not be sent to the
    API as the prompt itself. And a policy's own step is loaded, its settings checked, before any
    replay (``layers.custom``)."""
    if policy.custom.enabled:
        from .layers.custom import load_step

        try:
            load_step(policy.custom.call).settings_of(policy.custom.settings)
        except PolicyError as exc:
            raise PolicyError(f"{where}: {exc.message}", hint=exc.hint) from None
    prompt = policy.summary.prompt
    if prompt in _prompt_names() or Path(prompt).is_file():
        return policy
    raise PolicyError(f"{where}: summary.prompt: {prompt!r} is neither a built-in prompt "
                      f"({', '.join(_prompt_names())}) nor a file")


#: a --set: ``layer.key=value`` text (the value read as TOML), or (``layer.key``, the value) as data
Override = str | tuple[str, Any]


def parse_override(item: Override) -> tuple[list[str], Any]:
    """``layer.key=value`` -> (["layer", "key"], value); a (key, value) pair is taken as it is
    (tune and sweeps pass their values as data, never as TOML text to be read back)."""
    if isinstance(item, tuple):
        return item[0].strip().split("."), item[1]
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise PolicyError(f"--set {item!r}: expected KEY=VALUE such as summary.trigger=40000")
    import tomllib

    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    return key.split("."), parsed


def _one_trigger(data: dict, given: list[list[str]]) -> dict:
    """``data`` where ``given`` (the keys that overrides, or a file that extends it, set) sets
    ``summary.trigger`` and not ``summary.trigger_rule``: the rule of a harness's own trigger off, and
    its share, reserve, cap and window, for one trigger on every recording."""
    summary = data.get("summary")
    if (["summary", "trigger"] in given and ["summary", "trigger_rule"] not in given and isinstance(summary, dict)
            and summary.get("trigger_rule")):
        return {**data, "summary": {**summary, "trigger_rule": "", "trigger_share": 0.0, "trigger_reserve": 0,
                                    "trigger_cap": 0, "trigger_window": 0}}
    return data


def apply_overrides(data: dict, overrides: Sequence[Override]) -> dict:
    """``data`` with ``overrides`` applied. A trigger given (``summary.trigger``) is one trigger for every
    window: it turns off the policy's rule of a harness's own trigger (``summary.trigger_rule``)
    unless the overrides set that rule too."""
    data = _one_trigger(_merge({}, data), [parse_override(item)[0] for item in overrides])
    for item in overrides:
        path, value = parse_override(item)
        node = data
        for part in path[:-1]:
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            elif not isinstance(nxt, dict):
                raise PolicyError(f"--set {'.'.join(path)}: {part!r} is not a table")
            node = nxt
        node[path[-1]] = value
    return data


def _normalise(data: dict, where: str) -> dict:
    """Keys given under an alias take their name (both given is an error)."""
    for (table, alias), key in ALIASES.items():
        section = data.get(table)
        if isinstance(section, dict) and alias in section:
            if key in section:
                raise PolicyError(f"{where}: {table}: give {key} or {alias}, not both")
            data = {**data, table: {key if k == alias else k: v for k, v in section.items()}}
    return data


@functools.cache
def _validator() -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(Policy)


def build_policy(data: dict, where: str, trusted: bool = False, ref: str | None = None) -> Policy:
    """A Policy from TOML-shaped ``data``, validated by pydantic unless ``trusted``; an error starts
    with ``where`` and its hint names the policy ``ref`` (else ``where``).

    Only the built-in presets are trusted: they are constructed directly (the cross-field checks
    in ``__post_init__`` still run), and the test suite proves that gives what validation gives.
    """
    data = _normalise(data, where)
    if trusted:
        tables: dict[str, Any] = {k: SECTIONS[k](**v) if k in SECTIONS else v for k, v in data.items()}
        return _check_prompt(Policy(**tables), where)
    from pydantic import ValidationError

    try:
        return _check_prompt(_validator().validate_python(data), where)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "policy"
        msg = err["msg"].removeprefix("Value error, ")
        hint = None
        if err["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
            msg, hint = "unknown key", nearest_key([str(p) for p in err["loc"]], ref or where)
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise PolicyError(f"{where}: {loc}: {msg}{more}", hint=hint) from None


def nearest_key(loc: list[str], ref: str) -> str:
    """The hint of an unknown key at ``loc`` (a table, or a key of one) of the policy ``ref``: the
    keys there spelt most like it, and where every key is listed."""
    import difflib

    *table, key = loc
    keys = list(_hints(Policy)) if not table else list(_hints(SECTIONS[table[0]])) if (
        len(table) == 1 and table[0] in SECTIONS) else []
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.6)
    listed = f"compactlab policies show {ref} lists every key"
    return f"did you mean {' or '.join('.'.join([*table, k]) for k in close)}? ({listed})" if close else listed


def load_policy(ref: str, overrides: Sequence[Override] = (), given: str = "--set") -> Policy:
    """A preset name or TOML path, with ``--set`` overrides applied (``given``: what an error says
    gave them, compare's ``--sweep summary.trigger=20000`` say)."""
    data, trusted = _raw_policy(ref)
    where = ref
    if overrides:
        data = apply_overrides(data, list(overrides))
        where = f"{where} with {given}"
        trusted = trusted and all(_plainly_valid(*parse_override(item)) for item in overrides)
    if trusted:
        try:
            return build_policy(data, where, trusted=True, ref=ref)
        except (TypeError, ValueError):
            pass  # a cross-field rule (your own step naming none): validation words the error
    return build_policy(data, where, ref=ref)


def _plainly_valid(path: list[str], value: Any) -> bool:
    """Whether an override sets a layer key to a value of exactly its type, within its bounds:
    then validation could only give the value back, and a preset so changed is built as trusted
    (what ``--set summary.trigger=670000`` costs drops by pydantic's ~65 ms). Anything else,
    a coercion or an error, is left to validation."""
    if len(path) != 2 or path[0] not in SECTIONS:
        return False
    hints = _hints(SECTIONS[path[0]])
    return path[1] in hints and _fits(hints[path[1]], value)


@per_class
def _hints(kind: type) -> dict[str, Any]:
    import typing

    return {k: v for k, v in typing.get_type_hints(kind, include_extras=True).items() if not k.startswith("__")}


def _fits(kind: Any, value: Any) -> bool:
    import types
    import typing

    origin = typing.get_origin(kind)
    if origin is Annotated:
        base, *meta = typing.get_args(kind)
        if not _fits(base, value):
            return False
        for m in meta:
            bounds: dict[str, Any] = m.constraints if isinstance(m, Bound) else {"unknown": None}
            for name, limit in bounds.items():
                if not (value >= limit if name == "ge" else value > limit if name == "gt"
                        else value <= limit if name == "le"
                        else len(value) >= limit if name == "min_length" else False):
                    return False
        return True
    if origin is Literal:
        return type(value) is str and value in typing.get_args(kind)
    if origin is types.UnionType or origin is typing.Union:
        return any(_fits(k, value) for k in typing.get_args(kind))
    return kind in (bool, int, float, str) and type(value) is kind


#: what value_at returns where a policy holds no value of a key
UNKNOWN = object()


def value_at(policy: Policy, current: dict[str, Any] | None, key: str) -> Any:
    """The policy's value of ``key`` (``table.key``, or ``custom.settings.KEY`` for your own step's
    settings, a setting left out at its settings dataclass's default); ``UNKNOWN`` where none is.
    ``current``: ``policy.resolved()``, where the caller holds it."""
    *tables, name = key.split(".")
    node: Any = policy.resolved() if current is None else current
    for part in tables:
        node = node.get(part) if isinstance(node, dict) else None
    if tables and isinstance(node, dict) and name in node:
        return node[name]
    if tables == ["custom", "settings"] and policy.custom.enabled:
        from .layers.custom import load_step

        return load_step(policy.custom.call).defaults().get(name, UNKNOWN)
    return UNKNOWN


def idle_keys(name: str, keys: Sequence[str], acted: dict[str, int], runs: int,
              named: dict[str, str] | None = None) -> list[str]:
    """The --set, --sweep or --space ``keys`` whose layer never acted in any of the ``runs`` of
    policy ``name`` (its trigger is reached by no transcript, at any value tried), in words: the
    runs are as they would be without that layer. ``acted``: how often each layer acted over those
    runs (its counter in ``records.ACTIONS``, summed); ``named``: a key's name where the user knows
    it by another (a harness's own setting, ``tune --harness``), said first."""
    from .records import ACTIONS

    layers = set(ACTIONS.values())
    out = []
    for key in dict.fromkeys(k.strip() for k in keys):
        section = key.partition(".")[0]
        said = f"{named[key]} ({key})" if named and key in named else key
        if runs and section in layers and not acted.get(section, 0):
            out.append(f"{said}: {name}'s {section} layer never acted in its {runs} run(s) (no transcript reaches "
                       f"its trigger at any value given): the runs are as they would be without the layer")
    return out


def acted_by_layer(summaries: Sequence[Any]) -> dict[str, int]:
    """How often each layer acted over run summaries (dicts): its counter, summed."""
    from .records import ACTIONS

    return {layer: sum(int(s.get(counter) or 0) for s in summaries) for counter, layer in ACTIONS.items()}


def inert_keys(policy: Policy, keys: list[str]) -> list[str]:
    """What a --set, --sweep or --space on ``keys`` cannot change in ``policy``: a key of a layer
    that is off (and is not its ``enabled``), in words, one line each."""
    out = []
    for key in dict.fromkeys(k.strip() for k in keys):
        section, _, name = key.partition(".")
        table = getattr(policy, section, None)
        if name and name != "enabled" and getattr(table, "enabled", True) is False:
            out.append(f"{key} changes nothing: the {section} layer is off in {policy.name} "
                       f"(--set {section}.enabled=true turns it on)")
    return out
