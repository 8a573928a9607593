"""What the commands share: their common options, the registries their choices come from, how they
say things on stderr and end."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from ..errors import CompactlabError, UsageError, spelt_like


#: what is said in place of a path compactlab made for the command (standard input's private copy:
#: "<stdin>"), by the path as it is said, absolute or from the working folder
SHOWN_AS: dict[str, str] = {}


def tell(text: str, lines: bool = False) -> None:
    """A line for stderr, every control character it holds (from a policy file, a step, a
    transcript) shown as its escape: nothing compactlab says can drive the terminal. On a terminal
    it is broken between words at the terminal's width (a pipe or a log gets the line whole)."""
    from ..reports.text import visible, visible_lines

    for path, name in SHOWN_AS.items():
        text = text.replace(path, name)
    shown = visible_lines(text) if lines else visible(text)
    if sys.stderr is not None and sys.stderr.isatty():
        from ..reports.text import columns_of, wrapped

        shown = wrapped(shown, columns_of(sys.stderr))
    click.echo(shown, err=True)


def status_line(quiet: bool, message: str) -> None:
    if not quiet:
        tell(message, lines=True)


#: stands for a hyphen while help is wrapped (one column, as wide, and no place to break a line)
_HELD_HYPHEN = "\u2011"


class HelpFormatter(click.HelpFormatter):
    """click's, except that a line of help breaks between words only, never at a hyphen inside a
    name (``langchain-clear-tool-`` / ``uses``, ``--no-`` / ``calibrate``): a name is read, and
    copied, whole."""

    def write_dl(self, rows: Any, col_max: int = 30, col_spacing: int = 2) -> None:
        start = len(self.buffer)
        super().write_dl([(term, text.replace("-", _HELD_HYPHEN)) for term, text in rows], col_max, col_spacing)
        self.buffer[start:] = [piece.replace(_HELD_HYPHEN, "-") for piece in self.buffer[start:]]

    def write_text(self, text: str) -> None:
        start = len(self.buffer)
        super().write_text(text.replace("-", _HELD_HYPHEN))
        self.buffer[start:] = [piece.replace(_HELD_HYPHEN, "-") for piece in self.buffer[start:]]


class Context(click.Context):
    """Every command's context: its help is written by ``HelpFormatter``."""

    formatter_class = HelpFormatter


def helped(command: click.Command) -> None:
    """``command`` (and each of a group's commands) writes its help with ``HelpFormatter``."""
    command.context_class = Context
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            helped(sub)


class _RegistryHelp(click.Option):
    """An option whose help names what a registry holds, read when the help is shown (the
    registry's module is not imported at start-up): ``help`` is a template with ``{names}``, the
    names of ``registry`` (a module and its attribute), or else of the option's own choices (a
    ``LazyChoice``, shown under a short metavar rather than as ``[a|b|…]``, which no terminal of 80
    columns holds on one line)."""

    def __init__(self, *args: Any, registry: tuple[str, str] | None = None, **kwargs: Any) -> None:
        self._registry = registry
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def help(self) -> str:
        import importlib

        if self._registry is None:
            names = self.type.choices if isinstance(self.type, click.Choice) else ()
        else:
            module, name = self._registry
            names = getattr(importlib.import_module(module), name)
        return self._template.replace("{names}", ", ".join(names))

    @help.setter
    def help(self, value: str | None) -> None:
        self._template = value or ""


def policy_options(f: Callable) -> Callable:
    return click.option("--set", "overrides", multiple=True, metavar="LAYER.KEY=VALUE", cls=_RegistryHelp,
                        registry=("compactlab.engine.policy", "SECTIONS"),
                        help="Override a policy key, e.g. --set summary.trigger=40000 (repeatable). Tables: "
                             "{names}; their keys: compactlab policies show s08.")(f)


class Choice(click.Choice):
    """click's choice, with the names spelt most like a value it refuses said with the refusal
    (``suggested``: the command's error line gives them as its hint)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            exc.suggested = spelt_like(str(value), [str(c) for c in self.choices])  # type: ignore[attr-defined]
            raise


class Registry(Choice):
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
                        help="Say each file's note (its calibration, or why it was skipped) instead of one line for them all.")(f)


def force_option(f: Callable) -> Callable:
    return click.option("--force", is_flag=True,
                        help="Replace an --out folder that holds files compactlab did not write.")(f)


def complete_policy(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of a policy: the presets that start so, and policy files."""
    from click.shell_completion import CompletionItem

    from ..engine.policy import preset_names

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


def live_options(summarizer: str, tokens: str, model: str | None, cache_dir: str | None, no_cache: bool,
          summary_prompt: str | None, dry_run: bool = False) -> Any:
    """LiveOptions when a live feature is asked for: checks the key before any work."""
    from ..summarizers import LiveOptions
    from ..summarizers.prompts import resolve_prompt

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
    f = click.option("--next-action-api", type=Choice(["anthropic", "openai"]), default=None,
                     help="With --next-action: the API asked [default: by the model's provider].")(f)
    f = click.option("--next-action-model", default=None, metavar="MODEL",
                     help="With --next-action: the model asked [default: $COMPACTLAB_NEXT_ACTION_MODEL, else "
                          "claude-haiku-4-5].")(f)
    f = click.option("--next-action", "next_action_samples", type=click.IntRange(0, 10_000), default=0, metavar="N",
                     help="Also ask a model for the next action on N sampled calls per policy, on its context and on "
                          "no compaction's (costs money, priced first; see compactlab next-action) [default: 0, off].")(f)
    return f


def asking_for(o: dict[str, Any], policies: list[str], samples: int | None = None, model: str | None = None,
            api: str | None = None) -> Any:
    """The next-action request of a command's options (None: not asked for)."""
    n = o.get("next_action_samples", 0) if samples is None else samples
    if not n:
        return None  # (before its modules are imported: 17 ms of every compare and check)
    from ..jobs.next_action import Asking
    from ..next_action.models import ModelOptions

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
    from ..engine.cost.cache_rules import RULES

    f = click.option("--window", type=click.IntRange(1_000, 100_000_000), default=None, metavar="TOKENS",
                     help="The context window every run is judged on (a call over it overflows) [default: each "
                          "recording's: what its harness recorded or implies, else the model's; never below the "
                          "largest prompt the recording shows answered]. A policy's reactive.window_tokens is only "
                          "its trigger.")(f)
    f = click.option("--cache-model", type=Choice(list(RULES)), default=None,
                     help="Whose prompt cache to model: which prefix a call reads, in what steps, how long it "
                          "lives [default: the provider of the model each recording names; anthropic].")(f)
    f = click.option("--cache-ttl", type=Choice(["5m", "1h"]), default=None,
                     help="The prompt cache's lifetime: writes priced at its rate, calls after a longer gap "
                          "read nothing [default: the recording's: 1h where it recorded 1-hour writes, else 5m].")(f)
    f = click.option("--prices", "prices_file", type=click.Path(dir_okay=False, path_type=str), default=None,
                     help="A price table TOML whose models take precedence over genai-prices and its corrections.")(f)
    f = click.option("--price-model", default=None, metavar="MODEL",
                     help="Price every call as this model [default: each call at the model it recorded, else "
                          "the price table's default, claude-sonnet-4-5].")(f)
    return f


def homed(paths: tuple[str, ...], harness: str | None) -> None:
    """With no path, --harness must name a harness whose sessions have a home."""
    from ..transcripts.homes import HARNESSES

    if not paths and harness is not None and harness not in HARNESSES:
        raise UsageError(f"--harness {harness}: a framework's runs have no home compactlab searches: give their paths",
                         hint=f"e.g. compactlab tune runs/ --harness {harness}")


def setting_harnesses() -> tuple[str, ...]:
    from ..corpus.harness_settings import HARNESSES

    return HARNESSES


def tune_sessions_options(f: Callable) -> Callable:
    """tune's: --harness also names a framework whose settings are searched (``harness_settings``)."""
    return sessions_options(f, also=setting_harnesses, harness_help=(
        "Search the settings this harness or framework lets you change (its preset, within its clamps) and print "
        "the result as its own setting to paste; with no path, also only its sessions."))


class LazyChoice(Choice):
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


def format_names() -> list[str]:
    from ..transcripts import FORMATS

    return sorted(FORMATS)


def input_options(f: Callable) -> Callable:
    f = click.option("--skip-bad-lines", is_flag=True, help="Skip unusable lines (counted) instead of failing.")(f)
    f = click.option("--input-format", type=LazyChoice(format_names), default=None, metavar="FORMAT",
                     cls=_RegistryHelp, help="Force the input format instead of detecting it: {names}.")(f)
    return f


def homes_names(also: Callable[[], tuple[str, ...]] | None = None) -> Callable[[], list[str]]:
    """The harnesses with a home (``transcripts.homes``), and ``also``'s names besides."""
    def names() -> list[str]:
        from ..transcripts.homes import HARNESSES

        more = also() if also is not None else ()
        return [*HARNESSES, *(a for a in more if a not in HARNESSES)]

    return names


def sessions_options(f: Callable, also: Callable[[], tuple[str, ...]] | None = None, harness_help: str = "") -> Callable:
    """With no path: the user's own sessions, found in the harnesses' homes (``transcripts.homes``).
    ``also``: the names --harness takes besides the homes' (tune's frameworks), looked up when needed."""
    f = click.option("--harness", type=LazyChoice(homes_names(also)), default=None, metavar="NAME",
                     cls=_RegistryHelp, help=(harness_help or "With no path: only this harness's sessions.")
                     + " One of: {names}.")(f)
    f = click.option("--project", default=None, metavar="NAME",
                     help="With no path: only sessions whose project (its folder) holds NAME.")(f)
    f = click.option("--until", default=None, metavar="WHEN",
                     help="Only sessions last written before WHEN (2d: two days ago; or 2026-11-01).")(f)
    f = click.option("--since", default=None, metavar="WHEN",
                     help="Only sessions last written since WHEN (7d, 12h, 2w, or 2026-11-01).")(f)
    return f


def inputs_of(paths: tuple[str, ...] | list[str], subagents: bool, quiet: bool,
            found: dict[str, Any] | None = None) -> list[str]:
    """The files of the arguments (``jobs.base.input_files``: with none, the user's own sessions,
    by the command's --since, --until, --project and --harness), saying how many subagent sessions
    were left out."""
    from ..jobs.base import Finding, input_files

    ctx = click.get_current_context(silent=True)
    command = ctx.info_name if ctx is not None and ctx.info_name else "replay"
    return input_files(paths, subagents, Finding.of(found or {}, command),
                       notifier(quiet, bool((found or {}).get("verbose"))))


def subagents_option(f: Callable) -> Callable:
    return click.option("--subagents", is_flag=True,
                        help="With a folder, or no path: include the subagents' sessions (subagents/ beside a "
                             "session).")(f)


@contextmanager
def standard_input(transcripts: tuple[str, ...]) -> Iterator[str]:
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
    path = os.path.join(folder, "stdin")
    said = {p: "<stdin>" for p in (path, os.path.relpath(path))}  # (its errors and warnings name the
    SHOWN_AS.update(said)                                          # input as the user gave it)
    try:
        with open(path, "wb") as f:
            shutil.copyfileobj(sys.stdin.buffer, f, 1 << 20)
        yield path
    except CompactlabError as exc:  # (said after the copy is gone: named here)
        for p, name in said.items():
            exc.message = exc.message.replace(p, name)
            exc.hint = exc.hint.replace(p, name) if exc.hint else exc.hint
        raise
    finally:
        for p in said:
            SHOWN_AS.pop(p, None)
        shutil.rmtree(folder, ignore_errors=True)


def notifier(quiet: bool, verbose: bool = False) -> Callable[[str, bool], None]:
    """What the library says on the way, on stderr, at three levels: by default the warnings and
    one line for what was said of each file (``jobs.base.Detail``); with --verbose each file's
    line too; with --quiet only what must be said."""
    from ..jobs.base import Detail

    def notify(message: str, always: bool) -> None:
        from ..reports.terminal import say

        if always or (not quiet and (verbose or not isinstance(message, Detail))):
            if not say(message):  # (above a progress bar that is showing, not through it)
                tell(message, lines=True)

    return notify


def progress_bar(quiet: bool) -> Callable[[str, int], Any]:
    """A job's progress bars: on a terminal, for more than one step (--quiet too: a bar is not talk,
    and it leaves nothing behind)."""
    from ..reports.terminal import UNKNOWN, Progress

    return lambda what, total: Progress(what, total, enabled=total > 1 or total == UNKNOWN)


def job_settings(options: dict[str, Any], cls: Any = None, **given: Any) -> Any:
    """The one settings object of the jobs (``cls``: replay's, which adds its policy) from a
    command's options, whose names are its fields; ``given`` sets the others."""
    from dataclasses import fields

    from ..engine.cost.prices import load_prices
    from ..jobs.base import Settings

    cls = cls or Settings
    o = {**options, **given}
    known = {f.name for f in fields(cls)} - {"prices", "live"}
    live = live_options(o["summarizer"], o.get("tokens", "estimate"), o["model"], o["cache_dir"], o["no_cache"],
                 o["summary_prompt"], o.get("dry_run", False)) if "summarizer" in o else None
    return cls(**{k: v for k, v in o.items() if k in known}, live=live,
               prices=load_prices(o["prices_file"], cache=not o.get("dry_run", False)))


def end_command(outcome: Any, quiet: bool) -> None:
    """A job's ending: its status line (unless --quiet), its errors, its exit status."""
    if outcome.wrote:
        status_line(quiet, outcome.wrote)
    for error in outcome.errors:
        tell(f"error: {error}")
    if outcome.status:
        sys.exit(outcome.status)
