"""``compactlab policies``: the presets, listed and shown."""

from __future__ import annotations

import sys

import click

from ..errors import PolicyError
from .common import tell, policy_options, format_option


@click.group()
def policies() -> None:
    """The built-in presets and resolved policies."""


@policies.command("list")
@format_option("policy_report", "table", "LIST_WRITERS")
def policies_list(fmt: str) -> None:
    """List the presets with their descriptions."""
    from ..engine.policy import load_policy, preset_names
    from ..reports.policy_report import LIST_WRITERS

    loaded = []
    left_out: dict[tuple[str, str | None], list[str]] = {}
    for name in preset_names():
        try:
            loaded.append(load_policy(name))
        except PolicyError as exc:  # (a framework's preset whose extra is not installed)
            reason = exc.message.removeprefix(f"{name}: ")
            left_out.setdefault((reason, exc.hint), []).append(name)
    for (reason, hint), names in left_out.items():  # (one line an extra, not one a preset)
        tell(f"left out {', '.join(names)}: {reason}" + (f" ({hint})" if hint else ""))
    LIST_WRITERS[fmt](loaded, sys.stdout)


@policies.command("show", short_help="Print a resolved policy and its sources.")
@click.argument("policy_ref", metavar="POLICY")
@policy_options
@format_option("policy_report", "toml", "SHOW_WRITERS")
def policies_show(policy_ref: str, overrides: tuple[str, ...], fmt: str) -> None:
    """Print the resolved POLICY (a preset name or TOML file) and its fingerprint."""
    from ..engine.policy import load_policy
    from ..reports.policy_report import SHOW_WRITERS

    SHOW_WRITERS[fmt](load_policy(policy_ref, overrides), sys.stdout)
