"""The command line: click commands only. Each parses options, builds a config, makes one
library call and hands the result to one writer. Errors are turned into one line and an exit
status here, and nowhere else (0 ok, 1 check failed, 2 usage or input error, 3 internal error).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from . import __version__
from .errors import CompactlabError, PolicyError, UsageError, cannot_write
from .metrics import tolerance_help
from .plumbing.process import collector_off, finish

EXIT_INTERNAL = 3


def _said(text: str, lines: bool = False) -> None:
    """A line for stderr, every control character it holds (from a policy file, a step, a
    transcript) shown as its escape: nothing compactlab says can drive the terminal."""
    from .reports.text import visible, visible_lines

    click.echo(visible_lines(text) if lines else visible(text), err=True)


class Group(click.Group):
    """Turns library errors into ``error: ...`` lines with the documented exit status."""

    def invoke(self, ctx: click.Context) -> Any:
        from .plumbing.files import forget_inputs
        from .plumbing.cache import forget_said

        forget_inputs()  # (the files this command opens as inputs: no output of its own may replace one)
        forget_said()
        try:
            from .engine.core import chosen
            from .plumbing.interrupts import let_signals_through

            let_signals_through()  # (held since the entry point: one that came meanwhile is raised here)
            chosen()  # (COMPACTLAB_CORE wrong, or native where none is built: said before any work)
            return super().invoke(ctx)
        except CompactlabError as exc:
            _said(f"error: {exc}")
            if exc.hint:
                _said(f"hint: {exc.hint}")
            if os.environ.get("COMPACTLAB_DEBUG") and exc.detail:
                click.echo(exc.detail.rstrip("\n"), err=True)  # (the traceback of your own code: a step's)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt as exc:
            from .plumbing.interrupts import exit_status

            click.echo("error: interrupted", err=True)
            sys.exit(exit_status(exc))
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BrokenPipeError:
            sys.exit(0)
        except Exception as exc:  # a bug: still one line, the traceback on request
            from .plumbing.interrupts import exit_status, interrupt_in

            if (stop := interrupt_in(exc)) is not None:  # (Python wraps one raised in __set_name__)
                click.echo("error: interrupted", err=True)
                sys.exit(exit_status(stop))
            if os.environ.get("COMPACTLAB_DEBUG"):
                raise
            _said(f"error: internal error: {type(exc).__name__}: {exc}".splitlines()[0])
            click.echo("hint: rerun with COMPACTLAB_DEBUG=1 for the traceback and report it", err=True)
            sys.exit(EXIT_INTERNAL)


def _status(quiet: bool, message: str) -> None:
    if not quiet:
        _said(message, lines=True)


class _RegistryHelp(click.Option):
    """An option whose help names what a registry holds, read when the help is shown (the
    registry's module is not imported at start-up): ``help`` is a template with ``{names}``."""

    def __init__(self, *args: Any, registry: tuple[str, str], **kwargs: Any) -> None:
        self._registry = registry
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def help(self) -> str:
        import importlib

        module, name = self._registry
        return self._template.replace("{names}", ", ".join(getattr(importlib.import_module(module), name)))

    @help.setter
    def help(self, value: str | None) -> None:
        self._template = value or ""


def policy_options(f: Callable) -> Callable:
    return click.option("--set", "overrides", multiple=True, metavar="LAYER.KEY=VALUE", cls=_RegistryHelp,
                        registry=("compactlab.engine.policy", "SECTIONS"),
                        help="Override a policy key, e.g. --set summary.trigger=40000 (repeatable). Tables: "
                             "{names}; their keys: compactlab policies show s08.")(f)


class Registry(click.Choice):
    """The choices of an option: the names in a registry (``module``'s ``name``: a command's
    writers, the summarizers), looked up when first needed so that the module is imported only
    by the command that uses it, never at start-up."""

    def __init__(self, module: str, name: str) -> None:
        self._where = (module, name)
        super().__init__([])

    @property  # type: ignore[override]
    def choices(self) -> list[str]:
        import importlib

        module, name = self._where
        return sorted(getattr(importlib.import_module(module), name))

    @choices.setter
    def choices(self, value: object) -> None:
        pass  # click.Choice sets it; the registry is the truth


def format_option(module: str, default: str, registry: str = "WRITERS") -> Callable[[Callable], Callable]:
    """``--format``, its choices the writers of the command's report module."""
    return click.option("--format", "fmt", type=Registry(f"compactlab.reports.{module}", registry), default=default,
                        show_default=True, help="What to print on stdout.")


def quiet_option(f: Callable) -> Callable:
    return click.option("-q", "--quiet", is_flag=True, help="No status or warnings on stderr.")(f)


def verbose_option(f: Callable) -> Callable:
    return click.option("-v", "--verbose", is_flag=True,
                        help="Say each file's note (its calibration) instead of one line for them all.")(f)


def force_option(f: Callable) -> Callable:
    return click.option("--force", is_flag=True,
                        help="Replace an --out folder that holds files compactlab did not write.")(f)


def complete_policy(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of a policy: the presets that start so, and policy files."""
    from click.shell_completion import CompletionItem

    from .engine.policy import preset_names

    return [CompletionItem(n) for n in preset_names() if n.startswith(incomplete)] + [
        CompletionItem(incomplete, type="file")]


def policies_option(default: str) -> Callable[[Callable], Callable]:
    return click.option("-p", "--policy", "policy_refs", multiple=True, metavar="POLICY", shell_complete=complete_policy,
                        help=f"A preset name, a policy TOML, or py:module:function, a step of your own (repeatable) [default: {default}].")


def summarizer_options(f: Callable) -> Callable:
    f = click.option("--no-cache", is_flag=True, help="Do not read or write the summary and token cache.")(f)
    f = click.option("--cache-dir", type=click.Path(file_okay=False, path_type=str), default=None,
                     help="Where live summaries and token counts are cached [default: $COMPACTLAB_CACHE_DIR, "
                          "else the user's cache folder, e.g. ~/.cache/compactlab].")(f)
    f = click.option("--summary-prompt", default=None, metavar="NAME|FILE", cls=_RegistryHelp,
                     registry=("compactlab.summarizers.prompts", "PROMPTS"),
                     help="Summary prompt: a built-in name ({names}) or a file [default: the policy's].")(f)
    f = click.option("--model", default=None, help="Model of the live summarizer [default: $ANTHROPIC_MODEL, "
                                                    "else claude-haiku-4-5].")(f)
    f = click.option("--summarizer", type=Registry("compactlab.summarizers", "SUMMARIZERS"), default="stub",
                     show_default=True,
                     help="Who writes summaries: the offline deterministic stub, or the Messages API "
                          "($ANTHROPIC_API_KEY, $ANTHROPIC_BASE_URL).")(f)
    return f


def _live(summarizer: str, tokens: str, model: str | None, cache_dir: str | None, no_cache: bool,
          summary_prompt: str | None, dry_run: bool = False) -> Any:
    """LiveOptions when a live feature is asked for: checks the key before any work."""
    from .summarizers import LiveOptions
    from .summarizers.prompts import resolve_prompt

    if summary_prompt and summarizer == "stub":
        resolve_prompt(summary_prompt, "s08")  # still a clear error for a wrong name or path
    if summarizer != "anthropic" and tokens != "anthropic":
        return None
    return LiveOptions.from_env(model, cache_dir, no_cache, summary_prompt, read_only=dry_run)


def next_action_options(f: Callable) -> Callable:
    """``--next-action N`` and who is asked, for compare and check (the command's --cache-dir and
    --no-cache hold the replies too)."""
    f = click.option("--max-cost", type=click.FloatRange(0), default=1.0, show_default=True, metavar="USD",
                     help="With --next-action: ask nothing if the estimate is above this many dollars.")(f)
    f = click.option("--next-action-api", type=click.Choice(["anthropic", "openai"]), default=None,
                     help="With --next-action: the API asked [default: by the model's provider].")(f)
    f = click.option("--next-action-model", default=None, metavar="MODEL",
                     help="With --next-action: the model asked [default: $COMPACTLAB_NEXT_ACTION_MODEL, else "
                          "claude-haiku-4-5].")(f)
    f = click.option("--next-action", "next_action_samples", type=click.IntRange(0, 10_000), default=0, metavar="N",
                     help="Also ask a model for the next action on N sampled calls per policy, on its context and on "
                          "no compaction's (costs money, priced first; see compactlab next-action) [default: 0, off].")(f)
    return f


def _asking(o: dict[str, Any], policies: list[str], samples: int | None = None, model: str | None = None,
            api: str | None = None) -> Any:
    """The next-action request of a command's options (None: not asked for)."""
    from .jobs.next_action import Asking
    from .next_action.models import ModelOptions

    n = o.get("next_action_samples", 0) if samples is None else samples
    if not n:
        return None
    model = model or o.get("next_action_model") or os.environ.get("COMPACTLAB_NEXT_ACTION_MODEL") or None
    options = ModelOptions.from_env(model, api or o.get("next_action_api"), o["cache_dir"], o["no_cache"],
                                    o.get("max_tokens", 256), read_only=o.get("dry_run", False))
    return Asking(policies=policies, overrides=list(o["overrides"]), samples=n, seed=o.get("seed", 0), model=options,
                  max_cost=o["max_cost"])


def calibrate_option(f: Callable) -> Callable:
    return click.option("--calibrate/--no-calibrate", default=None,
                        help="Estimate tokens by the fit to the transcript's recorded usage: required (an error "
                             "without usage), or never (the policy's chars per token) [default: wherever the "
                             "transcript records the usage of at least 5 calls].")(f)


def cost_options(f: Callable) -> Callable:
    from .engine.cost.cache_rules import RULES

    f = click.option("--window", type=click.IntRange(1_000, 100_000_000), default=None, metavar="TOKENS",
                     help="The context window every run is judged on (a call over it overflows) [default: each "
                          "recording's: what its harness recorded or implies, else the model's; never below the "
                          "largest prompt the recording shows answered]. A policy's reactive.window_tokens is only "
                          "its trigger.")(f)
    f = click.option("--cache-model", type=click.Choice(list(RULES)), default=None,
                     help="Whose prompt cache to model: which prefix a call reads, in what steps, how long it "
                          "lives [default: the provider of the model each recording names; anthropic].")(f)
    f = click.option("--cache-ttl", type=click.Choice(["5m", "1h"]), default=None,
                     help="The prompt cache's lifetime: writes priced at its rate, calls after a longer gap "
                          "read nothing [default: the recording's: 1h where it recorded 1-hour writes, else 5m].")(f)
    f = click.option("--prices", "prices_file", type=click.Path(dir_okay=False, path_type=str), default=None,
                     help="A price table TOML whose models take precedence over genai-prices and its corrections.")(f)
    f = click.option("--price-model", default=None, metavar="MODEL",
                     help="Price every call as this model [default: each call at the model it recorded, else "
                          "the price table's default, claude-sonnet-4-5].")(f)
    return f


def _homed(paths: tuple[str, ...], harness: str | None) -> None:
    """With no path, --harness must name a harness whose sessions have a home."""
    from .transcripts.homes import HARNESSES

    if not paths and harness is not None and harness not in HARNESSES:
        raise UsageError(f"--harness {harness}: a framework's runs have no home compactlab searches: give their paths",
                         hint=f"e.g. compactlab tune runs/ --harness {harness}")


def _setting_harnesses() -> tuple[str, ...]:
    from .corpus.harness_settings import HARNESSES

    return HARNESSES


def tune_sessions_options(f: Callable) -> Callable:
    """tune's: --harness also names a framework whose settings are searched (``harness_settings``)."""
    return sessions_options(f, also=_setting_harnesses, harness_help=(
        "Search the settings this harness or framework lets you change (its preset, within its clamps) and print "
        "the result as its own setting to paste; with no path, also only its sessions."))


class LazyChoice(click.Choice):
    """A choice whose names are looked up when they are first needed (a value to check, help to
    show), not when the CLI is built: the names live with the loaders and the harness table, which
    a command that does not read them (``--version``, another command's help) never imports."""

    def __init__(self, names: Callable[[], list[str]]) -> None:
        self._names = names
        self._choices: tuple[str, ...] | None = None
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]  # (click's attribute, read when needed)
        if self._choices is None:
            self._choices = tuple(self._names())
        return self._choices


def _format_names() -> list[str]:
    from .transcripts import FORMATS

    return sorted(FORMATS)


def input_options(f: Callable) -> Callable:
    f = click.option("--skip-bad-lines", is_flag=True, help="Skip unusable lines (counted) instead of failing.")(f)
    f = click.option("--input-format", type=LazyChoice(_format_names), default=None,
                     help="Force the input format instead of detecting it.")(f)
    return f


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the version, and the core a replay would run on (``engine/core.py``)."""
    if not value or ctx.resilient_parsing:
        return
    from .engine.core import described

    click.echo(f"compactlab, version {__version__}\n{described()}")
    ctx.exit()


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version and the core a replay runs on (COMPACTLAB_CORE), and exit.")
def main() -> None:
    """Replay recorded agent transcripts through context-compaction policies.

    \b
    compactlab replay session.jsonl -p s08     what would policy s08 do to this conversation?
    compactlab inspect session.jsonl           what is in it, before any policy
    compactlab policies list                   the built-in presets
    compactlab compare sessions/ -p s08        which policy, across many sessions
    compactlab next-action s.jsonl --dry-run   would the agent act the same? (asks a model: costs)
    """


def _homes_names(also: Callable[[], tuple[str, ...]] | None = None) -> Callable[[], list[str]]:
    """The harnesses with a home (``transcripts.homes``), and ``also``'s names besides."""
    def names() -> list[str]:
        from .transcripts.homes import HARNESSES

        more = also() if also is not None else ()
        return [*HARNESSES, *(a for a in more if a not in HARNESSES)]

    return names


def sessions_options(f: Callable, also: Callable[[], tuple[str, ...]] | None = None, harness_help: str = "") -> Callable:
    """With no path: the user's own sessions, found in the harnesses' homes (``transcripts.homes``).
    ``also``: the names --harness takes besides the homes' (tune's frameworks), looked up when needed."""
    f = click.option("--harness", type=LazyChoice(_homes_names(also)),
                     default=None, help=harness_help or "With no path: only this harness's sessions.")(f)
    f = click.option("--project", default=None, metavar="NAME",
                     help="With no path: only sessions whose project (its folder) holds NAME.")(f)
    f = click.option("--until", default=None, metavar="WHEN",
                     help="Only sessions last written before WHEN (2d: two days ago; or 2026-11-01).")(f)
    f = click.option("--since", default=None, metavar="WHEN",
                     help="Only sessions last written since WHEN (7d, 12h, 2w, or 2026-11-01).")(f)
    return f


def _inputs(paths: tuple[str, ...] | list[str], subagents: bool, quiet: bool,
            found: dict[str, Any] | None = None) -> list[str]:
    """The files of the arguments (``jobs.base.input_files``: with none, the user's own sessions,
    by the command's --since, --until, --project and --harness), saying how many subagent sessions
    were left out."""
    from .jobs.base import Finding, input_files

    return input_files(paths, subagents, Finding.of(found or {}), _notify(quiet))


def subagents_option(f: Callable) -> Callable:
    return click.option("--subagents", is_flag=True,
                        help="With a folder, or no path: include the subagents' sessions (subagents/ beside a "
                             "session).")(f)


@main.command()
@click.argument("transcripts", nargs=-1, required=False, type=click.Path(path_type=str), metavar="[TRANSCRIPT]...")
@sessions_options
@click.option("-p", "--policy", "policy_refs", multiple=True, metavar="POLICY", shell_complete=complete_policy,
              help="A preset name, a policy TOML file, or py:module:function [default: s08]; one (compare runs several).")
@policy_options
@summarizer_options
@click.option("--tokens", type=click.Choice(["estimate", "anthropic"]), default="estimate", show_default=True,
              help="Measure tokens by estimate (the fit to the recorded usage, else chars / 4) or exactly with "
                   "messages.count_tokens.")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=str), default=None,
              help="Output folder [default: reports/<transcript>-<policy>/; with several transcripts, "
                   "one folder each inside --out].")
@format_option("replay_report", "table")
@click.option("--dry-run", is_flag=True, help="Write no file at all; only print.")
@force_option
@click.option("--write-transcripts", is_flag=True, help="Also write the context saved before each summary.")
@click.option("--keep-recorded-compactions", is_flag=True,
              help="Replay the compactions the recording did (Claude Code compact boundaries).")
@calibrate_option
@click.option("--chart", is_flag=True, help="Also draw the tokens-per-call chart (chart.svg) in the output folder.")
@cost_options
@input_options
@subagents_option
@click.option("-q", "--quiet", is_flag=True, help="No status or warnings on stderr.")
@verbose_option
def replay(transcripts: tuple[str, ...], **options: Any) -> None:
    """Replay each TRANSCRIPT (a file, or a folder of sessions) call by call through a policy.

    \b
    Examples:
      compactlab replay session.jsonl                      the default policy, s08
      compactlab replay ~/.claude/projects/myapp/ -p claude-code --chart
      compactlab replay session.jsonl --set summary.trigger=40000 --dry-run
    """
    o, quiet, refs = options, options["quiet"], options["policy_refs"]
    if len(refs) > 1:
        raise UsageError(f"replay runs one policy; {len(refs)} given ({', '.join(refs)})",
                         hint=f"compactlab compare TRANSCRIPT {' '.join('-p ' + p for p in refs)} runs them side by side")
    if "-" in transcripts:
        with _standard_input(transcripts) as spooled:
            ctx = click.get_current_context()
            return ctx.invoke(replay, **{**ctx.params, "transcripts": (spooled,)})
    from .jobs.base import Reading
    from .jobs.replay import ReplaySettings, replay_prepared

    def prepare() -> tuple[list[str], Any]:
        from .engine.policy import inert_keys, load_policy

        settings = _settings(o, ReplaySettings, policy=load_policy(refs[0] if refs else "s08", o["overrides"]),
                             overridden=bool(o["overrides"]))
        for line in inert_keys(settings.policy, [s.partition("=")[0] for s in o["overrides"]]):
            _status(quiet, f"warning: {line}")
        files = _inputs(transcripts, o["subagents"], quiet, o)
        if o["fmt"] == "json-run" and len(files) != 1:
            raise UsageError(f"--format json-run prints one run; {len(files)} transcripts given",
                             hint="--format json prints {\"runs\": [...]} for any number")
        return files, settings

    reading = Reading(o["input_format"], o["skip_bad_lines"], o["calibrate"], o["tokens"],
                      probes=refs[:1] != ("none",) or bool(o["overrides"]), dry_run=o["dry_run"])
    done = replay_prepared((transcripts or ("",))[0], reading, prepare, _notify(quiet, o["verbose"]), _progress(quiet))
    from .reports import write_runs

    write_runs(done.runs, o["fmt"], sys.stdout)
    _end(done.outcome(), quiet)


@contextmanager
def _standard_input(transcripts: tuple[str, ...]) -> Iterator[str]:
    """``-``: the transcript on standard input, kept in a private temporary file (named "stdin",
    so its reports go to reports/stdin-<policy>/) for as long as the replay runs."""
    import shutil
    import tempfile

    if len(transcripts) > 1:
        raise UsageError("- (standard input) must be the only transcript", hint="replay one, or give files")
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError("- reads the transcript from standard input, and none is piped in",
                         hint="compactlab replay - < session.jsonl")
    folder = tempfile.mkdtemp(prefix="compactlab-stdin-")
    try:
        path = os.path.join(folder, "stdin")
        with open(path, "wb") as f:
            shutil.copyfileobj(sys.stdin.buffer, f, 1 << 20)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _notify(quiet: bool, verbose: bool = False) -> Callable[[str, bool], None]:
    """What the library says on the way, on stderr, at three levels: by default the warnings and
    one line for what was said of each file (``jobs.base.Detail``); with --verbose each file's
    line too; with --quiet only what must be said."""
    from .jobs.base import Detail

    def notify(message: str, always: bool) -> None:
        from .reports.terminal import say

        if always or (not quiet and (verbose or not isinstance(message, Detail))):
            if not say(message):  # (above a progress bar that is showing, not through it)
                _said(message, lines=True)

    return notify


def _progress(quiet: bool) -> Callable[[str, int], Any]:
    """A job's progress bars: on a terminal, for more than one step (--quiet too: a bar is not talk,
    and it leaves nothing behind)."""
    from .reports.terminal import UNKNOWN, Progress

    return lambda what, total: Progress(what, total, enabled=total > 1 or total == UNKNOWN)


def _settings(options: dict[str, Any], cls: Any = None, **given: Any) -> Any:
    """The one settings object of the jobs (``cls``: replay's, which adds its policy) from a
    command's options, whose names are its fields; ``given`` sets the others."""
    from dataclasses import fields

    from .engine.cost.prices import load_prices
    from .jobs.base import Settings

    cls = cls or Settings
    o = {**options, **given}
    known = {f.name for f in fields(cls)} - {"prices", "live"}
    live = _live(o["summarizer"], o.get("tokens", "estimate"), o["model"], o["cache_dir"], o["no_cache"],
                 o["summary_prompt"], o.get("dry_run", False)) if "summarizer" in o else None
    return cls(**{k: v for k, v in o.items() if k in known}, live=live,
               prices=load_prices(o["prices_file"], cache=not o.get("dry_run", False)))


def _end(outcome: Any, quiet: bool) -> None:
    """A job's ending: its status line (unless --quiet), its errors, its exit status."""
    if outcome.wrote:
        _status(quiet, outcome.wrote)
    for error in outcome.errors:
        _said(f"error: {error}")
    if outcome.status:
        sys.exit(outcome.status)


@main.command()
@click.argument("transcripts", nargs=-1, required=False, type=click.Path(path_type=str), metavar="[TRANSCRIPT]...")
@sessions_options
@policies_option("none, s06, s08")
@policy_options
@summarizer_options
@click.option("--sweep", "sweeps", multiple=True, metavar="LAYER.KEY=V1,V2,...",
              help="Run every policy with each of these values (repeatable: the product is swept).")
@click.option("--jobs", type=click.IntRange(1, 512), default=None, help="Parallel processes [default: the cores].")
@click.option("--executor", default=None, metavar="dask://HOST:PORT",
              help="Run the grid on an existing Dask distributed cluster (extra: compactlab[dask]).")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=str), default=os.path.join("reports", "compare"),
              show_default=True, help="Folder for results.csv, results.json, report.md, report.html, charts/.")
@click.option("--sort", "sort_key", default="cost_saving", show_default=True, help="Column to sort the table by.")
@click.option("--charts", type=click.Choice(["auto", "all", "summary", "none"]), default="auto", show_default=True,
              help="Charts to draw: the corpus charts and the 6 transcripts where the policies differ most (auto), "
                   "every transcript's (all), the corpus charts only (summary), none.")
@click.option("--retention-margin", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="How far below no compaction's recall and retention (an absolute share) a recommended policy "
                   "may keep.")
@format_option("compare_report", "table")
@click.option("--dry-run", is_flag=True, help="Write no file; only print.")
@force_option
@click.option("--keep-recorded-compactions", is_flag=True, help="Replay the compactions the recording did.")
@calibrate_option
@cost_options
@next_action_options
@input_options
@subagents_option
@click.option("-q", "--quiet", is_flag=True, help="No status or warnings on stderr (a progress bar still shows on a terminal).")
@verbose_option
def compare(transcripts: tuple[str, ...], **options: Any) -> None:
    """Which policy, which thresholds? Replay every TRANSCRIPT through every POLICY x swept value.

    \b
    Examples:
      compactlab compare sessions/ -p s08 -p claude-code -p observation-masking
      compactlab compare sessions/ -p s08 --sweep summary.trigger=30000,60000,120000
      compactlab compare sessions/ -p s08 -p codex --next-action 20     (asks a model: costs money)
    """
    from .jobs.compare import Grid, Reporting, compare_files
    from .reports.compare_report import WRITERS

    o, quiet = options, options["quiet"]
    grid = Grid(policies=list(o["policy_refs"] or ("none", "s06", "s08")), overrides=list(o["overrides"]),
                sweeps=list(o["sweeps"]))
    reporting = Reporting(sort_key=o["sort_key"], charts=o["charts"], retention_margin=o["retention_margin"],
                          next_action=_asking(o, grid.policies))
    settings = _settings(o, tokens="estimate")
    done = compare_files(_inputs(transcripts, o["subagents"], quiet, o), grid, settings, reporting,
                         lambda result: WRITERS[o["fmt"]](result, sys.stdout), _notify(quiet, o["verbose"]), _progress(quiet))
    _end(done.outcome, quiet)


@main.command()
@click.argument("transcripts", nargs=-1, required=False, type=click.Path(path_type=str), metavar="[TRANSCRIPT]...")
@tune_sessions_options
@click.option("-p", "--policy", "base", default="s08", show_default=True, metavar="POLICY", shell_complete=complete_policy,
              help="The base policy whose keys are searched (a preset name or policy TOML).")
@policy_options
@click.option("--space", "spaces", multiple=True, metavar="KEY=LO:HI[:log]|KEY=A|B",
              help="A searched key: an int or float range (log scale with :log) or choices (repeatable), e.g. "
                   "--space summary.trigger=40000:200000 --space micro.keep_recent=1:10.")
@click.option("--trials", type=click.IntRange(1, 100_000), default=200, show_default=True,
              help="Trials the study ends with (with --resume: those already run count).")
@click.option("--objective", "objective", default="cost,recall", show_default=True, metavar="NAME,NAME",
              help="What the front trades off, each maximised: cost (saving), recall, retention, reduction.")
@click.option("--max-violations", type=click.IntRange(0), default=0, show_default=True,
              help="A candidate that introduces more tool-pairing violations (or overflows a window) is rejected.")
@click.option("--sampler", type=click.Choice(["tpe", "nsga2"]), default="tpe", show_default=True,
              help="Optuna's multi-objective sampler: TPE (fewer trials) or NSGA-II.")
@click.option("--seed", type=int, default=0, show_default=True, help="The sampler's seed: the same seed, the same front.")
@click.option("--jobs", type=click.IntRange(1, 512), default=None, help="Parallel processes [default: the cores].")
@click.option("--executor", default=None, metavar="dask://HOST:PORT",
              help="Run the trials' replays on an existing Dask distributed cluster (extra: compactlab[dask]).")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=str),
              default=os.path.join("reports", "tune"), show_default=True,
              help="Folder for study.journal (Optuna's journal storage), front.csv, front.json, policies/, charts/.")
@click.option("--resume", is_flag=True, help="Continue the study in --out up to --trials.")
@click.option("--chart/--no-chart", default=True, show_default=True, help="Draw charts/tune.svg.")
@click.option("--force", is_flag=True, help="Start anew where --out holds a study (it is deleted).")
@format_option("tune_report", "table")
@calibrate_option
@cost_options
@input_options
@click.option("-q", "--quiet", is_flag=True, help="No status or warnings on stderr (a progress bar still shows on a terminal).")
@verbose_option
def tune(transcripts: tuple[str, ...], **options: Any) -> None:
    """Search a base policy's keys for the Pareto front of cost saving against probe recall; with
    --harness claude-code, the settings Claude Code lets you change, printed as the line to paste.

    \b
    Examples:
      compactlab tune sessions/ -p s08 --space summary.trigger=30000:200000 --trials 100
      compactlab tune sessions/ -p s08 --space micro.keep_recent=1:10 --resume --trials 200
      compactlab tune --harness claude-code --trials 40     your Claude Code sessions, its settings
    """
    from .jobs.tune import Search, tune_files
    from .reports.tune_report import WRITERS

    o, quiet = options, options["quiet"]
    if not o["spaces"] and not o["harness"]:
        raise UsageError("tune needs --space KEY=LO:HI (a policy's keys) or --harness NAME (its settings)",
                         hint="e.g. --space summary.trigger=40000:200000, or --harness claude-code")
    spec = Search(base=o["base"], overrides=list(o["overrides"]), spaces=list(o["spaces"]), trials=o["trials"],
                  objectives=o["objective"], max_violations=o["max_violations"], sampler=o["sampler"], seed=o["seed"],
                  resume=o["resume"], chart=o["chart"], harness=o["harness"])
    found = {**o, "harness": None} if transcripts else o  # (with paths, --harness names the settings searched)
    _homed(transcripts, o["harness"])
    done = tune_files(_inputs(transcripts, False, quiet, found), spec, _settings(o),
                      lambda result: WRITERS[o["fmt"]](result, sys.stdout), _notify(quiet, o["verbose"]), _progress(quiet))
    _end(done.outcome, quiet)


@main.command()
@click.argument("transcripts", nargs=-1, required=False, type=click.Path(path_type=str), metavar="[TRANSCRIPT]...")
@sessions_options
@policies_option("s08")
@policy_options
@click.option("--baseline", "baseline_path", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="The baseline JSON file (e.g. reports/baseline.json).")
@click.option("--tolerance", "tolerances", multiple=True, metavar="X|METRIC=X", help=tolerance_help())
@click.option("--update-baseline", is_flag=True, help="Write the current results into the baseline instead.")
@click.option("--allow-stale", is_flag=True, help="A transcript that changed since the baseline does not fail.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Also write a JUnit XML report (one testcase per transcript x policy).")
@format_option("check_report", "table")
@calibrate_option
@cost_options
@next_action_options
@click.option("--next-action-margin", type=click.FloatRange(0, 1), default=0.10, show_default=True,
              help="With --next-action: a policy fails when its agreement is surely (the whole 95% interval) more "
                   "than this share below the control's. Costs money and is not deterministic across model versions.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="With --next-action: where replies are cached [default: $COMPACTLAB_CACHE_DIR, else the user's "
                   "cache folder].")
@click.option("--no-cache", is_flag=True, help="With --next-action: do not read or write the reply cache.")
@input_options
@subagents_option
@quiet_option
@verbose_option
def check(transcripts: tuple[str, ...], **options: Any) -> None:
    """CI gate: fail (exit 1) when a policy breaks tool pairs or loses ground against the baseline.

    \b
    Examples:
      compactlab check sessions/*.jsonl -p s08 --baseline reports/baseline.json --update-baseline
      compactlab check sessions/*.jsonl -p s08 --baseline reports/baseline.json --junit check.xml
    """
    from .jobs.check import Gate, check_files
    from .reports.check_report import WRITERS

    o, quiet = options, options["quiet"]
    gate = Gate(baseline=o["baseline_path"], policies=list(o["policy_refs"] or ("s08",)),
                overrides=list(o["overrides"]), tolerances=list(o["tolerances"]), update=o["update_baseline"],
                allow_stale=o["allow_stale"], junit=o["junit_path"],
                next_action=_asking(o, list(o["policy_refs"] or ("s08",))), next_action_margin=o["next_action_margin"])
    done = check_files(_inputs(transcripts, o["subagents"], quiet, o), gate, _settings(o),
                       lambda results: WRITERS[o["fmt"]](results, sys.stdout), _notify(quiet, o["verbose"]), _progress(quiet))
    _end(done.outcome, quiet)


@main.command(name="next-action")
@click.argument("transcripts", nargs=-1, required=True, type=click.Path(path_type=str), metavar="TRANSCRIPT...")
@policies_option("s08")
@policy_options
@click.option("--model", default=None,
              help="The model asked [default: $COMPACTLAB_NEXT_ACTION_MODEL, else claude-haiku-4-5].")
@click.option("--api", type=click.Choice(["anthropic", "openai"]), default=None,
              help="The Messages API ($ANTHROPIC_API_KEY, $ANTHROPIC_BASE_URL) or an OpenAI-compatible endpoint "
                   "($OPENAI_API_KEY, $OPENAI_BASE_URL; extra compactlab[openai]) [default: by the model's provider].")
@click.option("--samples", type=click.IntRange(1, 10_000), default=20, show_default=True,
              help="Calls asked about per policy, across the transcripts (two requests each).")
@click.option("--seed", type=int, default=0, show_default=True, help="The sampling's seed.")
@click.option("--max-cost", type=click.FloatRange(0), default=1.0, show_default=True, metavar="USD",
              help="Send nothing if the estimate is above this many dollars.")
@click.option("--max-tokens", type=click.IntRange(16, 8192), default=256, show_default=True,
              help="The longest reply asked for (the first action is all that is read).")
@click.option("--system-prompt", "system_prompt_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              metavar="FILE", help="The system prompt sent where the format records none (Claude Code's does not) "
                                   "[default: a stand-in, said in the report].")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Where replies are cached [default: $COMPACTLAB_CACHE_DIR, else the user's cache folder].")
@click.option("--no-cache", is_flag=True, help="Do not read or write the reply cache.")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=str), default=os.path.join("reports", "next-action"),
              show_default=True, help="Folder for next_action.json, samples.csv and report.md.")
@format_option("next_action_report", "table")
@click.option("--dry-run", is_flag=True, help="List the samples and the estimate; send and write nothing.")
@force_option
@click.option("--keep-recorded-compactions", is_flag=True, help="Replay the compactions the recording did.")
@calibrate_option
@click.option("--prices", "prices_file", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="A price table TOML whose models take precedence over genai-prices and its corrections.")
@input_options
@subagents_option
@quiet_option
@verbose_option
def next_action(transcripts: tuple[str, ...], **options: Any) -> None:
    """Would the agent still act the same? Ask a model for the next action on each policy's context.

    \b
    Costs money: a sample of calls is sent twice (the policy's context and no compaction's),
    priced first (--max-cost, --dry-run); replies are cached, so a rerun is free.

    \b
    Examples:
      compactlab next-action sessions/ -p s08 -p observation-masking --dry-run
      compactlab next-action sessions/ -p s08 --samples 40 --max-cost 5
      compactlab next-action sessions/ -p s08 --model gpt-5-mini          (OPENAI_API_KEY)
    """
    from .jobs.next_action import next_action_files
    from .reports.next_action_report import WRITERS, write_plan

    o, quiet = options, options["quiet"]
    asking = _asking(o, list(o["policy_refs"] or ("s08",)), o["samples"], o["model"], o["api"])
    if o["system_prompt_file"]:
        from .plumbing.files import read_regular_text

        asking.system_prompt = (read_regular_text(o["system_prompt_file"], "--system-prompt"), o["system_prompt_file"])
    model = asking.model

    def show_plan(plan: Any) -> None:
        if o["dry_run"]:
            write_plan(plan, model.model, model.api, asking.max_cost, sys.stdout)
        else:
            from .reports.next_action_report import estimate_line

            _status(quiet, estimate_line(plan, model.model, model.api, asking.max_cost))

    done = next_action_files(_inputs(transcripts, o["subagents"], quiet), asking, _settings(o), _notify(quiet, o["verbose"]),
                             _progress(quiet), show_plan)
    if done.result is not None:
        WRITERS[o["fmt"]](done.result, sys.stdout)
    _end(done.outcome, quiet)


@main.command()
@click.option("--calls", default=5000, show_default=True, type=click.IntRange(10, 1_000_000),
              help="Calls of the main synthetic transcript (5,000 is about 55 MB).")
@click.option("--rounds", default=5, show_default=True, type=click.IntRange(1, 100), help="Interleaved rounds (medians).")
@click.option("--jobs", default=2, show_default=True, type=click.IntRange(1, 512), help="--jobs of the compare figures.")
@click.option("--no-reference", is_flag=True, help="Skip the straightforward re-serialise-every-call reference.")
@click.option("--dir", "workdir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Where to write the synthetic inputs [default: a temporary folder, removed after].")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Also write the figures as JSON.")
@click.option("--corpus", is_flag=True,
              help="Also compare folders of 200, 2,000 and 10,000 small sessions x 2 policies (time, and "
                   "the main process's peak memory).")
@click.option("--tune", "tune_too", is_flag=True,
              help="Also time a tune of 200 trials over 20 transcripts of about 100 calls.")
@click.option("--trajectories", type=click.Path(exists=True, file_okay=False, path_type=str), default=None,
              metavar="FOLDER", help="Also time compare x 2 policies, with reports, of 200 sessions made of the "
                                     "recorded ones in FOLDER (e.g. ../shared/transcripts/openai).")
def bench(calls: int, rounds: int, jobs: int, no_reference: bool, workdir: str | None, json_out: str | None,
          corpus: bool, tune_too: bool, trajectories: str | None) -> None:
    """Measure speed and memory against the parse floor, on synthetic transcripts."""
    from pathlib import Path

    import orjson

    from .bench import run
    from .plumbing.outputs import atomic_write_bytes, check_destination

    if json_out:
        check_destination(json_out, "--json", replaces=(b"{",))
    figures = run(calls=calls, rounds=rounds, workdir=workdir, naive=not no_reference, jobs=jobs, corpus=corpus,
                  tune=tune_too, trajectories=trajectories)
    if json_out:
        atomic_write_bytes(Path(json_out), orjson.dumps(figures, option=orjson.OPT_INDENT_2) + b"\n", what="--json")


@main.command()
@click.argument("transcripts", nargs=-1, required=False, type=click.Path(path_type=str), metavar="[TRANSCRIPT]...")
@input_options
@format_option("inspect_report", "table", "INSPECT_WRITERS")
@click.option("--top", default=10, show_default=True, type=click.IntRange(0, 1000), help="How many largest results to list.")
@click.option("--compactions", "audit", is_flag=True,
              help="List every compaction the recordings hold, a line each: the call, the time, the tokens before "
                   "and after, the share of the window, and where the harness's version and your settings say it "
                   "should fire (Claude Code).")
@click.option("--setting", "settings", multiple=True, metavar="KEY=VALUE",
              help="With --compactions: a harness setting, as you set it (CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60, "
                   "autoCompactWindow=400000, ...); else read from the environment and ~/.claude/settings.json.")
@subagents_option
@sessions_options
@quiet_option
def inspect(transcripts: tuple[str, ...], **o: Any) -> None:
    """What is in TRANSCRIPT, before any policy: calls, tools, sizes, recorded violations and usage.

    Given several, or a folder, lists the sessions (one line each); given none, your own sessions
    of every harness compactlab reads, from their homes (~/.claude/projects, ~/.codex/sessions,
    ~/.gemini/tmp, the Cline and Roo task folders, OpenCode's and Goose's stores, ~/.qwen, ~/.pi,
    ~/.openclaw, ~/.copilot, Amp's threads).

    \b
    Examples:
      compactlab inspect                              your sessions, all harnesses
      compactlab inspect --since 7d --harness codex   this week's Codex sessions
      compactlab inspect session.jsonl
      compactlab inspect ~/.claude/projects/ --format json
    """
    from .overview import overview, session_rows
    from .reports.inspect_report import INSPECT_WRITERS, SESSIONS_WRITERS
    from .transcripts import load_transcript, one_session

    quiet, fmt, input_format, skip = o["quiet"], o["fmt"], o["input_format"], o["skip_bad_lines"]
    if o["audit"]:
        _audit_compactions(transcripts, o)
        return
    if o["settings"]:
        raise UsageError("--setting is read with --compactions", hint="add --compactions")
    if len(transcripts) == 1 and one_session(transcripts[0]) and not any(o.get(k) for k in ("since", "until")):
        with collector_off():
            loaded = load_transcript(transcripts[0], input_format, skip_bad_lines=skip)
        INSPECT_WRITERS[fmt](overview(loaded, top=o["top"]), sys.stdout)
        return
    from .jobs.base import none_read, not_transcripts

    with collector_off():
        rows, skipped = session_rows(_inputs(transcripts, o["subagents"], quiet, o), input_format, skip)
    not_transcripts(skipped, _notify(quiet))
    if not rows and skipped:
        raise none_read(len(skipped))
    SESSIONS_WRITERS[fmt](rows, sys.stdout)


def _audit_compactions(transcripts: tuple[str, ...], o: dict[str, Any]) -> None:
    """``inspect --compactions``: each session's recorded compactions audited (``audit.py``)."""
    from .audit import audit, settings_for
    from .reports.inspect_report import COMPACTIONS_WRITERS
    from .transcripts import load_transcript, one_session

    settings = settings_for(o["settings"])
    files = (list(transcripts) if len(transcripts) == 1 and one_session(transcripts[0])
             else _inputs(transcripts, o["subagents"], o["quiet"], o))
    audits = []
    with collector_off():
        for path in files:
            try:
                audits.append(audit(load_transcript(path, o["input_format"], skip_bad_lines=o["skip_bad_lines"]),
                                    settings))
            except CompactlabError as exc:
                if len(files) == 1:
                    raise
                _notify(o["quiet"])(f"skipped {path}: {exc}", False)
    COMPACTIONS_WRITERS[o["fmt"]](audits, sys.stdout)


@main.command()
@click.argument("transcript", type=click.Path(path_type=str))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="Where to write the Anthropic messages JSONL.")
@input_options
@click.option("--keep-recorded-compactions/--drop-recorded-compactions", default=True, show_default=True,
              help="Write the recording's compactions where they happened (their summary lines carry a "
                   "\"recorded_compaction\" key, read only by compactlab), so that a replay of the file gives what a "
                   "replay of the source gives. Dropped: plain messages only, and no usage recorded after the first "
                   "compaction (it measured a context the file no longer holds).")
@click.option("--force", is_flag=True, help="Replace --output if it exists.")
@quiet_option
def convert(transcript: str, output: str, skip_bad_lines: bool, input_format: str | None,
            keep_recorded_compactions: bool, force: bool, quiet: bool) -> None:
    """Convert TRANSCRIPT (any supported format) to Anthropic messages JSONL: the messages a
    replay uses, roles alternating.

    \b
    Example:
      compactlab convert rollout-2026-02-23.jsonl -o session.jsonl
    """
    from pathlib import Path

    from .plumbing.outputs import atomic_write_bytes, check_destination
    from .transcripts import load_transcript
    from .transcripts.writer import to_anthropic_jsonl

    check_destination(output, "--output", [transcript], replaces=(), force=force)
    with collector_off():
        loaded = load_transcript(transcript, input_format, skip_bad_lines=skip_bad_lines)
    try:
        atomic_write_bytes(Path(output), to_anthropic_jsonl(loaded, keep_recorded_compactions), what="--output")
    except OSError as exc:
        raise cannot_write(f"--output {output}: cannot write", exc) from None
    _status(quiet, f"wrote {output}: {len(loaded.entries)} messages, {len(loaded.call_positions)} calls "
                   f"(from {loaded.format})")
    if loaded.compactions and not keep_recorded_compactions:
        first = min(c.position for c in loaded.compactions)
        dropped = sum(1 for p in loaded.usage if p >= first)
        _status(quiet, f"{len(loaded.compactions)} recorded compaction(s) left out, and the usage of the {dropped} "
                       "call(s) after the first: it measured a context this file does not hold")


@main.group()
def policies() -> None:
    """The built-in presets and resolved policies."""


@policies.command("list")
@format_option("policy_report", "table", "LIST_WRITERS")
def policies_list(fmt: str) -> None:
    """List the presets with their descriptions."""
    from .engine.policy import load_policy, preset_names
    from .reports.policy_report import LIST_WRITERS

    loaded = []
    for name in preset_names():
        try:
            loaded.append(load_policy(name))
        except PolicyError as exc:  # (a framework's preset whose extra is not installed)
            _said(f"left out {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
    LIST_WRITERS[fmt](loaded, sys.stdout)


@policies.command("show")
@click.argument("policy_ref", metavar="POLICY")
@policy_options
@format_option("policy_report", "toml", "SHOW_WRITERS")
def policies_show(policy_ref: str, overrides: tuple[str, ...], fmt: str) -> None:
    """Print the resolved POLICY (a preset name or TOML file) and its fingerprint."""
    from .engine.policy import load_policy
    from .reports.policy_report import SHOW_WRITERS

    SHOW_WRITERS[fmt](load_policy(policy_ref, overrides), sys.stdout)


@main.command()
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="Where to write the transcript (.jsonl).")
@click.option("--calls", default=200, show_default=True, type=click.IntRange(1, 10_000_000),
              help="Number of model calls (assistant messages).")
@click.option("--seed", default=0, show_default=True, type=int, help="Random seed: same seed, same file.")
@click.option("--force", is_flag=True, help="Replace --output if it exists.")
@quiet_option
def synth(output: str, calls: int, seed: int, force: bool, quiet: bool) -> None:
    """Write a realistic synthetic coding-agent transcript.

    \b
    Example:
      compactlab synth -o long.jsonl --calls 2000 --seed 7
    """
    from .plumbing.outputs import check_destination
    from .synth import write

    check_destination(output, "--output", replaces=(), force=force)
    try:
        size = write(output, calls, seed)
    except OSError as exc:
        raise cannot_write(f"{output}: cannot write", exc) from None
    _status(quiet, f"wrote {output}: {calls} calls, {size / 1e6:.2f} MB")


def _environment(group: click.Group, prefix: str = "COMPACTLAB") -> None:
    """Every option can be set from the environment: ``COMPACTLAB_<COMMAND>_<LONG OPTION>``
    (``COMPACTLAB_REPLAY_POLICY=s06``, ``COMPACTLAB_COMPARE_JOBS=2``, ``COMPACTLAB_POLICIES_SHOW_FORMAT``);
    an option given on the command line wins. Repeatable options take several values split on
    spaces."""
    for name, command in group.commands.items():
        here = f"{prefix}_{name.upper().replace('-', '_')}"
        if isinstance(command, click.Group):
            _environment(command, here)
            continue
        for param in command.params:
            longs = [o for o in param.opts if o.startswith("--")] if isinstance(param, click.Option) else []
            if longs and param.envvar is None and param.name not in ("help", "version"):
                param.envvar = f"{here}_{longs[0][2:].upper().replace('-', '_')}"


_environment(main)


def run() -> None:
    """The console entry point (after ``process.start``): the CLI, then an immediate exit once
    the output is flushed (``process.finish``); tests call ``main`` through click's runner."""
    from .plumbing.interrupts import exit_status, let_signals_through

    code: int = 0
    try:
        main(prog_name="compactlab")  # (python -m compactlab too: its usage, and _COMPACTLAB_COMPLETE)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            _said(str(exc.code))
    try:
        let_signals_through()  # (a command that never ran, --help: one held since the start ends it so)
    except KeyboardInterrupt as exc:
        click.echo("error: interrupted", err=True)
        code = exit_status(exc)
    finish(code)
