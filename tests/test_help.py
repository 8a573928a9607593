"""Every command and every option has help (as sqlite-utils checks its own)."""

from __future__ import annotations

import click
import pytest

from compactlab.cli import main


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        out.append(((*prefix, name), command))
        if isinstance(command, click.Group):
            out += commands(command, (*prefix, name))
    return out


ALL = commands(main)


def test_there_are_commands():
    names = {" ".join(path) for path, _ in ALL}
    assert {"replay", "compare", "check", "inspect", "convert", "synth", "bench", "policies list",
            "policies show"} <= names


@pytest.mark.parametrize("path, command", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_command_and_option_has_help(cli, path, command):
    assert (command.help or "").strip(), f"{' '.join(path)} has no help"
    r = cli(*path, "--help")
    assert r.exit_code == 0 and r.stdout.startswith("Usage: ")
    for param in command.params:
        if isinstance(param, click.Option) and param.name not in ("help",):
            assert (param.help or "").strip(), f"{' '.join(path)} {param.opts[0]} has no help"


def test_every_preset_says_in_one_short_line_what_it_does(cli):
    """#18 §5: policies list speaks to users (one line each); show keeps the sources."""
    from compactlab import load_policy, preset_names

    for name in preset_names():
        p = load_policy(name)
        assert p.brief and len(p.brief) <= 100 and "\n" not in p.brief, name
        assert len(p.description) > len(p.brief), name  # the long form, with its sources
    out = cli("policies", "list").stdout
    assert all(load_policy(n).brief in out for n in preset_names())
    assert "Seed 000 (the s08 code walkthrough)" in cli("policies", "show", "s08").stdout


@pytest.mark.parametrize("command", ["replay", "compare", "tune", "check", "next-action", "inspect", "convert", "synth"])
def test_each_command_shows_examples_in_its_help(cli, command):
    """(#31 §6) As sqlite-utils and llm do: a command's help ends with examples to copy."""
    out = cli(command, "--help").stdout
    assert "Example" in out and f"compactlab {command} " in out


def test_shell_completion_names_the_commands_and_the_presets(tmp_path):
    """(#31 §6) click's completion (documented in the README): subcommands and -p's presets."""
    import os
    import subprocess
    import sys

    def complete(words: str, index: int) -> str:
        env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(index), "_COMPACTLAB_COMPLETE": "bash_complete"}
        return subprocess.run([sys.executable, "-m", "compactlab"], env=env, capture_output=True, text=True,
                              timeout=60).stdout

    assert "plain,replay" in complete("compactlab rep", 1)
    assert "plain,observation-masking" in complete("compactlab compare x -p obs", 4).splitlines()
    source = subprocess.run([sys.executable, "-m", "compactlab"], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "_COMPACTLAB_COMPLETE": "bash_source"}).stdout
    assert "_compactlab_completion" in source


def test_the_cli_starts_without_importing_the_loaders_or_the_harness_table():
    """(#60) The choices of --input-format and --harness are looked up when first needed: building
    the CLI (``--version``, another command) imports no loader and not the harness table; a bad
    value is still refused with the choices named."""
    import subprocess
    import sys

    code = ("import sys; import compactlab.cli; "
            "print(sorted(m for m in sys.modules if m.startswith(('compactlab.transcripts', "
            "'compactlab.corpus.harness_settings'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out
    from click.testing import CliRunner

    from compactlab.cli import main

    bad = CliRunner().invoke(main, ["replay", "x.jsonl", "--input-format", "nope"])
    assert bad.exit_code == 2 and "'claude-code'" in bad.output and "'goose'" in bad.output, bad.output
    bad = CliRunner().invoke(main, ["tune", "x.jsonl", "--harness", "nope"])
    assert bad.exit_code == 2 and "'anthropic-api'" in bad.output, bad.output


def test_a_command_is_imported_when_it_runs_and_listed_by_its_own_help():
    """(#60 §1) ``compactlab --help`` and a command import no other command's module (each is
    built when it runs: 185 options at every start before); the list ``--help`` shows is each
    command's own short help, and every module of ``compactlab/cli`` that defines one is listed."""
    import subprocess
    import sys

    import click

    from compactlab.cli import COMMANDS, main

    code = ("import sys; from compactlab.cli import main\n"
            "try:\n    main(sys.argv[1:], prog_name='compactlab')\nexcept SystemExit:\n    pass\n"
            "print(repr(sorted(m for m in sys.modules if m.startswith('compactlab.cli.'))), file=sys.stderr)")
    for args, loaded in ((["--help"], ["compactlab.cli.common"]),
                         (["synth", "--help"], ["compactlab.cli.common", "compactlab.cli.synth"])):
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
        assert r.stderr.strip().endswith(repr(loaded)), r.stderr
    ctx = click.Context(main)
    for name, (module, short) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name, name
        assert click.Command(name, help=short).get_short_help_str(500) == command.get_short_help_str(500), name
    from helpers import ROOT

    defined = {p.stem for p in (ROOT / "compactlab" / "cli").glob("*.py")} - {"__init__", "common"}
    assert defined == {module for module, _ in COMMANDS.values()}
    assert main.get_command(ctx, "nope") is None


@pytest.mark.parametrize("width", [60, 80])
def test_every_help_fits_a_terminal_of_60_and_80_columns(cli, width):
    """Nothing in any help runs past the terminal's edge (a terminal cuts it, or breaks it
    anywhere): the examples are written to fit 60 columns, a choice of many names shows a short
    name and lists them in its help, and the list of commands cuts none with "...". A name is never
    broken at its hyphens, so each choice of --harness and --input-format stands whole."""
    from compactlab.cli.common import format_names, homes_names, setting_harnesses

    for path, _ in ALL:
        out = cli(*path, "--help", terminal_width=width).stdout
        wide = [line for line in out.splitlines() if len(line) > width]
        assert not wide, (path, wide)
        commands = out.partition("\nCommands:\n")[2]
        assert "..." not in commands, (path, commands)
    words = set()
    for path in (("replay",), ("tune",), ("inspect",)):
        words |= set(cli(*path, "--help", terminal_width=width).stdout.replace(",", " ").replace(".", " ").split())
    names = {*format_names(), *homes_names(setting_harnesses)()}
    assert names <= words, sorted(names - words)
