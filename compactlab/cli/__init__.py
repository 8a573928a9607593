"""The command line: click commands only, one module a command (``COMMANDS``), imported when
that command runs. Each parses options, builds a config, makes one library call and hands the
result to one writer. Errors are turned into one line and an exit status here, and nowhere else
(0 ok, 1 check failed, 2 usage or input error, 3 internal error).
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

import click

from .. import __version__
from ..errors import CompactlabError, did_you_mean, spelt_like
from ..plumbing.process import finish
from .common import Context, helped, tell

EXIT_INTERNAL = 3

#: every command: the module (of this package) that defines it, named as it is, and its short
#: help: what ``compactlab --help`` lists without importing it, and the command's own (``short_help``).
#: Each fits the list at 60 columns (41 characters), so none is cut with "..."; the command's
#: help says the rest.
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("bench", "Speed and memory against the parse floor."),
    "check": ("check", "CI gate: fail where a policy regresses."),
    "compare": ("compare", "Compare policies across transcripts."),
    "convert": ("convert", "Convert to Anthropic messages JSONL."),
    "inspect": ("inspect", "What a transcript holds, before a policy."),
    "next-action": ("next_action", "Ask a model if the agent acts the same."),
    "policies": ("policies", "List the presets, show a policy."),
    "replay": ("replay", "Replay transcripts through a policy."),
    "synth": ("synth", "Write a synthetic agent transcript."),
    "tune": ("tune", "Search a policy's or harness's settings."),
}


class Group(click.Group):
    """Turns library errors into ``error: ...`` lines with the documented exit status; imports a
    command's module only when that command runs (``COMMANDS``)."""

    context_class = Context

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context | None, name: str) -> click.Command | None:  # type: ignore[override]
        if name not in self.commands and name in COMMANDS:
            import importlib

            module, _ = COMMANDS[name]
            command = getattr(importlib.import_module(f"{__name__}.{module}"), module)
            environment(command, f"COMPACTLAB_{name.upper().replace('-', '_')}")
            helped(command)
            command.short_help = COMMANDS[name][1]
            self.add_command(command, name)
        return self.commands.get(name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """compactlab's own options, refused as a command's are (``_said_usage``): one line and a
        hint, not click's three paragraphs. No arguments at all still shows the help."""
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            if isinstance(exc, getattr(click.exceptions, "NoArgsIsHelpError", ())):  # (click >= 8.2: its help)
                raise
            _said_usage(exc)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                           list[str]]:
        """A command's name, or the refusal of one no command has, with the names spelt like it."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            exc.suggested = spelt_like(args[0], self.list_commands(ctx)) if args else []  # type: ignore[attr-defined]
            raise

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short help, from ``COMMANDS`` (no command's module imported)."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        # (shortened as click shortens a command's own help: a command made of the text alone)
        rows = [(name, click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        from ..plumbing.files import forget_inputs
        from ..plumbing.cache import forget_said

        forget_inputs()  # (the files this command opens as inputs: no output of its own may replace one)
        forget_said()
        try:
            from ..core import chosen
            from ..plumbing.interrupts import let_signals_through

            let_signals_through()  # (held since the entry point: one that came meanwhile is raised here)
            chosen()  # (COMPACTLAB_CORE wrong, or native where none is built: said before any work)
            return super().invoke(ctx)
        except CompactlabError as exc:
            _said(exc)
        except KeyboardInterrupt as exc:
            from ..plumbing.interrupts import exit_status

            click.echo("error: interrupted", err=True)
            sys.exit(exit_status(exc))
        except click.UsageError as exc:  # (a command's option or argument: said as every error is, in one line)
            _said_usage(exc)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BrokenPipeError:
            sys.exit(0)
        except Exception as exc:  # a bug: still one line, the traceback on request
            from ..plumbing.interrupts import exit_status, interrupt_in

            if (stop := interrupt_in(exc)) is not None:  # (Python wraps one raised in __set_name__)
                click.echo("error: interrupted", err=True)
                sys.exit(exit_status(stop))
            if os.environ.get("COMPACTLAB_DEBUG"):
                raise
            tell(f"error: internal error: {type(exc).__name__}: {exc}".splitlines()[0])
            click.echo("hint: rerun with COMPACTLAB_DEBUG=1 for the traceback and report it", err=True)
            sys.exit(EXIT_INTERNAL)


def _said(exc: CompactlabError) -> NoReturn:
    """A command's error: one line, its hint, the traceback of your own code on request; its status."""
    tell(f"error: {exc}")
    if exc.hint:
        tell(f"hint: {exc.hint}")
    if os.environ.get("COMPACTLAB_DEBUG") and exc.detail:
        click.echo(exc.detail.rstrip("\n"), err=True)  # (the traceback of your own code: a step's)
    sys.exit(exc.exit_code)


def _said_usage(exc: click.UsageError) -> NoReturn:
    """click's refusal of a command's option or argument, said as every error is: one line, then a
    hint with the names spelt most like a mistyped one (``common.Choice``) and where the rest are."""
    tell(f"error: {exc.format_message()}")
    where = exc.ctx.command_path if exc.ctx is not None else "compactlab"
    tell(f"hint: {did_you_mean(getattr(exc, 'suggested', None) or [])}{where} --help lists what it takes")
    sys.exit(exc.exit_code)


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the version, and the core a replay would run on (``compactlab/core.py``)."""
    if not value or ctx.resilient_parsing:
        return
    from ..core import described

    core = described()
    if sys.stdout.isatty():  # (a terminal: broken between words at its width; a pipe gets one line to read)
        from ..reports.text import columns_of, wrapped

        core = wrapped(core, columns_of(sys.stdout), indent="  ")
    click.echo(f"compactlab, version {__version__}\n{core}")
    ctx.exit()


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version and the core a replay runs on (COMPACTLAB_CORE), and exit.")
def main() -> None:
    """Replay recorded agent transcripts through context-compaction policies.

    \b
    What would policy s08 do to this conversation?
      compactlab replay session.jsonl -p s08
    What is in it, before any policy?
      compactlab inspect session.jsonl
    The built-in presets:
      compactlab policies list
    Which policy, across many sessions?
      compactlab compare sessions/ -p s08 -p claude-code
    Would the agent act the same? (asks a model: costs money)
      compactlab next-action session.jsonl --dry-run
    """


def environment(command: click.Command, here: str) -> None:
    """Every option can be set from the environment: ``COMPACTLAB_<COMMAND>_<LONG OPTION>``
    (``COMPACTLAB_REPLAY_POLICY=s06``, ``COMPACTLAB_COMPARE_JOBS=2``, ``COMPACTLAB_POLICIES_SHOW_FORMAT``);
    an option given on the command line wins. Repeatable options take several values split on
    spaces. ``here``: the command's prefix (``COMPACTLAB_REPLAY``)."""
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            environment(sub, f"{here}_{name.upper().replace('-', '_')}")
        return
    for param in command.params:
        longs = [o for o in param.opts if o.startswith("--")] if isinstance(param, click.Option) else []
        if longs and param.envvar is None and param.name not in ("help", "version"):
            param.envvar = f"{here}_{longs[0][2:].upper().replace('-', '_')}"


def run() -> None:
    """The console entry point (after ``process.start``): the CLI, then an immediate exit once
    the output is flushed (``process.finish``); tests call ``main`` through click's runner."""
    from ..plumbing.interrupts import exit_status, let_signals_through

    code: int = 0
    try:
        main(prog_name="compactlab")  # (python -m compactlab too: its usage, and _COMPACTLAB_COMPLETE)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            tell(str(exc.code))
    try:
        let_signals_through()  # (a command that never ran, --help: one held since the start ends it so)
    except KeyboardInterrupt as exc:
        click.echo("error: interrupted", err=True)
        code = exit_status(exc)
    finish(code)
