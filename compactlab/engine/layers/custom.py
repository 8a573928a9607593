"""Your own compaction step, written in Python (#45 §1): a callable that a policy names, run in
the policy's ``order`` with the built-in layers and measured as they are.

The callable's contract is the layer contract, in plain data::

    def step(messages: list[dict], facts: StepFacts, settings) -> list[dict]

``messages`` are the context as the harness holds it (Anthropic messages, copies: the step may
keep, drop, reorder nothing, and make new ones); ``facts`` the call's (``StepFacts``, read-only);
``settings`` the policy's ``[custom.settings]`` table, as the step's ``settings`` dataclass where
it declares one (``step.settings = MySettings``), else a read-only mapping. It returns the messages
to send: a message it kept is the same object it was given (so it keeps its place in the cache,
its references and what the agent later used of it); anything else is a message it made. It is
refused, with its name, when it raises, returns something that is not a list of messages, changes
a message it was given, or returns the messages it kept out of their order.

The callable is named by ``custom.call``: ``package.module:function``, ``path/to/file.py:function``
(a file of yours, loaded as a module), or the name of an entry point in group
``compactlab.layers`` that an installed package declares.
"""

from __future__ import annotations

import contextlib
import functools
import io
import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields, is_dataclass
from types import MappingProxyType
from typing import Any

import orjson

from ...plain import NamedTuple, pattern
from ..context import Context
from ...config import LayerConfig, opt, section
from ...errors import PolicyError
from ...plumbing.sha256 import hex_of
from ...transcripts.messages import Entry, make_entry
from ..sizing import list_chars
from .base import NOTHING, LayerStats, RunEnv
from .registry import register
from .summary import Summarising

#: the entry point group an installed package names its steps in
ENTRY_POINTS = "compactlab.layers"


@section
class CustomConfig(LayerConfig):
    """Your own step: a Python callable run in order with the built-in layers."""

    enabled: bool = opt(False, "run this layer at all", added=True)
    call: str = opt("", "the step: module:function, path/to/file.py:function, or an entry point's name in "
                        "group compactlab.layers", added=True)
    settings: dict[str, Any] = opt({}, "the step's own settings (its settings dataclass's keys)", added=True)
    timeout: float = opt(30.0, "seconds a step in another process (cmd:) has to answer a call", added=True)

    def __post_init__(self) -> None:
        if self.enabled and not self.call.strip():
            raise ValueError("custom is on but names no step: set custom.call (module:function)")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be above 0; got {self.timeout}")


class _Facts(NamedTuple):
    call: int  # the call's index in the recording
    tokens: int  # the context's size now, by the run's estimate (what a trigger compares)
    idle_seconds: float | None  # since the previous call, by the recording's times (None: not recorded)
    after_prompt: bool  # a user prompt came since the previous call
    recorded_tokens: int | None  # the context's size as the harness measured it, while it is the recording's
    cache_cold: bool  # the prompt cache has expired since the previous call
    window: int  # the model's window in tokens (the policy's reactive window, else the recording's)
    #: the leading messages that are the very ones given at the previous call (0 at the first)
    unchanged: int = 0


class StepFacts(_Facts):
    """What a step knows of the call being made (read-only; a step in another process is sent these
    as ``facts``), and what a step of Python may use besides:

    - ``state``: a dict that is the step's own for the run (empty at its first call);
    - ``count(messages)``: the tokens of messages by the run's estimate (what ``tokens`` is);
    - ``summarize(messages, prompt="")``: a summary of messages by compactlab's summarizer (the
      stub offline, a live model when asked), asked by the policy's ``[summary]`` table and
      ``prompt`` (the table's when empty); counted and billed as the run's summaries. When the
      summarizer fails it raises ``SummaryFailed``, which, not caught, makes the call one at which
      the step did nothing (the failure is reported as a summary layer's is).
    """

    _run: "_Run | None" = None

    @property
    def state(self) -> dict[str, Any]:
        return self._kit().env.state_of(_State).data

    def count(self, messages: list[dict]) -> int:
        run = self._kit()
        sizes = run.sizes  # (a message's size, made once a call: a step may count the same ones often)
        total = 0
        for i, m in enumerate(messages):
            held = sizes.get(id(m))
            if held is None or held[0] is not m:
                held = sizes[id(m)] = (m, make_entry(m, i).chars)
            total += held[1]
        return run.env.estimator.tokens(list_chars(total, len(messages)))

    def summarize(self, messages: list[dict], prompt: str = "") -> str:
        run = self._kit()
        from .base import summarize

        entries = [make_entry(m, i) for i, m in enumerate(messages)]
        text = summarize(entries, kind="summary", summary_cfg=run.summary, env=run.env, stats=run.stats,
                         prompt=prompt or None)
        if text is None:
            raise SummaryFailed(run.env.ledger.failed_summaries[-1]["error"])
        run.stats.summaries += 1
        return text

    def _kit(self) -> "_Run":
        if self._run is None:
            raise RuntimeError("these facts are not a call's of a replay")
        return self._run


class _Run:
    """What a step's facts reach in the run: its environment, the summary table and the call's
    stats. (This module's small records are plain classes: ``dataclass`` would compile their
    ``__init__`` at every start, custom step or not.)"""

    __slots__ = ("env", "summary", "stats", "sizes")

    def __init__(self, env: RunEnv, summary: Any, stats: LayerStats) -> None:
        self.env, self.summary, self.stats = env, summary, stats
        self.sizes: dict[int, tuple[dict, int]] = {}  # each message's size, counted once


class _State:
    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}


class SummaryFailed(Exception):
    """The summarizer failed a step's request (``StepFacts.summarize``); recorded as a failed summary."""


class StepError(PolicyError):
    """A step broke its contract (it raised, returned no messages, or changed what it was given);
    its ``detail`` is the step's traceback where it raised."""


class StepCrashed(StepError):
    """A step exited or raised what is no ``Exception`` (``SystemExit``, its own ``KeyboardInterrupt``):
    the run failed, as a crashed run does (exit 1)."""

    exit_code = 1


class Step(NamedTuple):
    """A loaded step: its callable, the name it was given by, and its settings' type (None: any)."""

    run: Callable[..., Any]
    name: str
    settings_type: type | None
    #: what its code is: a digest of the file that defines it (else of its compiled code), part of
    #: the policy's fingerprint, so that a changed implementation is a changed policy
    digest: str = ""

    def defaults(self) -> dict[str, Any]:
        """Its settings' defaults (those of its settings dataclass that have one)."""
        from dataclasses import MISSING

        if self.settings_type is None:
            return {}
        return {f.name: f.default for f in fields(self.settings_type) if f.default is not MISSING}

    def settings_of(self, table: Mapping[str, Any]) -> Any:
        """The policy's settings table as the step takes it: validated into its dataclass."""
        if self.settings_type is None:
            return MappingProxyType(dict(table))
        import pydantic

        known = [f.name for f in fields(self.settings_type)]
        unknown = [k for k in table if k not in known]
        if unknown:
            raise PolicyError(f"custom.settings.{unknown[0]}: unknown key (step {self.name} takes "
                              f"{', '.join(known) or 'none'})")
        try:
            return pydantic.TypeAdapter(self.settings_type).validate_python(dict(table))
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "settings"
            raise PolicyError(f"custom.settings.{where}: {first.get('msg')} (step {self.name})") from None
        except TypeError as exc:
            raise PolicyError(f"custom.settings: {exc} (step {self.name})") from None


@functools.cache
def load_step(call: str) -> Step:
    """The step ``call`` names (see the module docstring), imported once a process; ``cmd:COMMAND``
    a step in another process (``step_process``)."""
    if call.strip().startswith(COMMAND):
        return _command(call.strip())
    target, sep, attr = call.strip().rpartition(":")
    try:
        if not sep:  # an entry point an installed package declares
            from importlib.metadata import entry_points

            found = entry_points(group=ENTRY_POINTS, name=call.strip())
            if not found:
                raise PolicyError(f"custom.call {call!r}: no such step (no module:function, and no entry point of "
                                  f"that name in group {ENTRY_POINTS})",
                                  hint="name it as package.module:function or path/to/file.py:function")
            fn = next(iter(found)).load()
        else:
            fn = getattr(_module(target, call), attr, None)
    except PolicyError:
        raise
    except Exception as exc:  # (the user's module raised while it was imported)
        raise PolicyError(f"custom.call {call!r}: cannot load it: {type(exc).__name__}: {exc}") from None
    if not callable(fn):
        raise PolicyError(f"custom.call {call!r}: {attr or call!r} is not a function of it")
    kind = getattr(fn, "settings", None)
    if kind is not None and not (isinstance(kind, type) and is_dataclass(kind)):
        raise PolicyError(f"custom.call {call!r}: its settings attribute must be a dataclass")
    return Step(fn, call.strip(), kind, _digest(fn))


def _digest(fn: Any) -> str:
    import hashlib
    import inspect

    digest = hashlib.sha256()
    try:
        source = inspect.getfile(fn)
        if not os.path.isfile(source):
            raise OSError(source)
        _hash_file(digest, source)
    except (TypeError, OSError):  # (a builtin, or code with no file)
        code = getattr(fn, "__code__", None)
        digest.update(code.co_code + repr(code.co_consts).encode() if code is not None else repr(fn).encode())
    # (and what it says it runs besides: a framework's step names the framework's version)
    digest.update(str(getattr(fn, "identity", "")).encode())
    return digest.hexdigest()[:12]


#: a step that is a command: ``cmd:node compact.js``
COMMAND = "cmd:"


def _command(call: str) -> Step:
    import shlex

    from .step_process import ProcessStep

    try:
        argv = shlex.split(call[len(COMMAND):])
    except ValueError as exc:
        raise PolicyError(f"custom.call {call!r}: {exc}") from None
    if not argv:
        raise PolicyError(f"custom.call {call!r}: names no command")
    # its identity: the command, and the bytes of every file it names (a script of yours)
    import hashlib

    digest = hashlib.sha256(call.encode())
    for arg in argv:
        if os.path.isfile(arg):
            _hash_file(digest, arg)
    return Step(ProcessStep(argv, call), call, None, digest.hexdigest()[:12])


def _hash_file(digest: Any, path: str) -> None:
    """Add a file's bytes to ``digest`` a MiB at a time (a file of gigabytes, a model's weights,
    costs time, never its size in memory); one that cannot be read adds its name only."""
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError:
        digest.update(b"\0unreadable")


def _module(target: str, call: str) -> Any:
    if target.endswith(".py"):
        if not os.path.isfile(target):
            raise PolicyError(f"custom.call {call!r}: no such file {target!r}")
        name = "compactlab_step_" + hex_of(os.path.abspath(target).encode())[:12]
        spec = importlib.util.spec_from_file_location(name, target)
        if spec is None or spec.loader is None:
            raise PolicyError(f"custom.call {call!r}: {target!r} is not a Python file")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        raise PolicyError(f"custom.call {call!r}: no module {exc.name or target!r}",
                          hint="install its package, or name a file: path/to/file.py:function") from None


@register("custom", CustomConfig, cheap=True, summarises=True)
def custom(context: Context, config: Summarising[CustomConfig], env: RunEnv) -> tuple[Context, LayerStats]:
    """Run the step on the context, at a cost that grows with what changed, not with the context
    (#56 §3): the messages are given read-only (``ReadOnlyDict``/``ReadOnlyList``: a step cannot
    change one, so nothing is compared), each made once, when it first enters the context; a step
    that keeps everything as it is returns the very list it was given, which is taken at once."""
    own, summary = config.own, config.summary  # (the summary table: what StepFacts.summarize asks by)
    step = load_step(own.call)
    if hasattr(step.run, "timeout"):  # (a step in another process, step_process.ProcessStep: not imported here)
        step.run.timeout = own.timeout
    entries = context.entries
    held = env.state_of(_Given)
    unchanged = held.unchanged(entries)
    new = [held.made(e.message) for e in entries[unchanged:]]
    if unchanged == held.n and held.frozen is not None:  # (only appended to: the list given last, extended)
        given = held.frozen
        list.extend(given, new)
    else:
        given = ReadOnlyList([*(held.frozen or ())[:unchanged], *new])
    held.hold(entries, given)
    now = env.now
    facts = StepFacts(now.call, env.estimator.tokens(context.chars), now.idle_seconds, now.after_prompt,
                      now.recorded_tokens, now.cache_cold, now.window, unchanged)
    stats = LayerStats()
    facts._run = _Run(env, summary, stats)
    try:
        out = _call(step, given, facts, _settings(step, own), now.call)
    except SummaryFailed:
        return context, stats  # (recorded by summarize(): the step did nothing at this call)
    if out is given:  # (kept as it is: nothing to look at)
        return context, (stats if stats.summaries or stats.summary_failures else NOTHING)
    if not isinstance(out, list) or not all(_is_message(m) for m in out):
        raise StepError(f"custom step {step.name} returned {_what(out)} at call {now.call}, not a list of messages "
                        "(dicts with a role, user or assistant, and a content)")
    where = {id(m): i for i, m in enumerate(given)}
    sent, kept, first_changed = _taken(out, where, entries, env, step.name, now.call)
    if first_changed is None:
        if len(out) == len(entries):
            return context, (stats if stats.summaries or stats.summary_failures else NOTHING)
        first_changed = len(out)
    _check_ids(sent, entries, step.name, now.call)
    for i in where.values():  # (what the step dropped: a loss found in it later is charged to this call)
        env.ledger.dropped[entries[i].origin] = ("custom", now.call)
    stats.custom = 1
    stats.changed_at(first_changed)
    changed = Context(sent)
    held.hold(changed.entries, ReadOnlyList(kept))  # (what the engine appends to next: given from there on)
    return changed, stats


def _taken(out: list[Any], where: dict[int, int], entries: list[Entry], env: RunEnv, name: str, call: int
           ) -> tuple[list[Entry], list[Any], int | None]:
    """What the step returned, as the context's entries (a message it kept is its entry, one it
    made is new), their read-only messages, and the first position that changed (None: none)."""
    from .step_process import answer_limit

    room = answer_limit()  # (what a step may add: a process's answer line has the same bound)
    sent: list[Entry] = []
    kept: list[Any] = []  # the read-only message of each one sent
    first_changed: int | None = None
    last = -1
    for j, m in enumerate(out):
        i = where.pop(id(m), None)  # (a message returned twice is kept once; the other is new)
        if i is not None and i < last:
            raise StepError(f"custom step {name} returned the messages it kept out of their order at call {call}")
        if i is None:
            _check_blocks(m, j, name, call)
            made = env.new_entry(_plain(m), by="custom")
            room -= made.chars
            if room < 0:
                raise StepError(f"custom step {name} returned, at call {call}, more than {answer_limit() >> 20} MiB "
                                "of messages it made (COMPACTLAB_MAX_ANSWER_MB raises the limit)")
            sent.append(made)
            kept.append(_read_only(made.message))
        else:
            sent.append(entries[i])
            kept.append(m)
            last = i
        if first_changed is None and i != j:
            first_changed = j
    return sent, kept, first_changed


class _Given:
    """What the step was given last (the run's): the context's list of entries (the engine appends
    to it in place while nothing changes it), how many, and each one's read-only message."""

    __slots__ = ("entries", "n", "frozen", "made")

    def __init__(self) -> None:
        self.entries: list | None = None
        self.n = 0
        #: what makes a message read-only (the run's core's: chosen once, as the run's core is)
        self.made = _made_read_only()
        #: the list of read-only messages given (the same list, extended, while the context is only
        #: appended to: a step may read it during its call, not keep it)
        self.frozen: ReadOnlyList | None = None

    def unchanged(self, entries: list) -> int:
        """How many leading entries are the very ones given last: all of them while the engine only
        appended (at once); after a change, as many as are the same objects."""
        if entries is self.entries and len(entries) >= self.n:
            return self.n
        before = self.entries or []
        k, most = 0, min(len(before), len(entries), self.n)
        while k < most and entries[k] is before[k]:
            k += 1
        return k

    def hold(self, entries: list, frozen: "ReadOnlyList") -> None:
        self.entries, self.n, self.frozen = entries, len(entries), frozen


class MessageChanged(TypeError):
    """A step tried to change a message it was given (they are read-only)."""


def _refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
    raise MessageChanged("a message given to a step is read-only: return a new message in its place "
                         "(dict(m) or {**m, ...} is one)")


class ReadOnlyDict(dict):
    """A message (or a block of one) as a step is given it: a dict that cannot be changed; a copy
    of it (``dict(m)``, ``copy.copy``, ``copy.deepcopy``) is a plain one to change."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __copy__(self) -> dict:
        return dict(self)

    def __deepcopy__(self, memo: dict) -> Any:
        return _plain(self)

    def __reduce__(self) -> Any:
        return dict, (dict(self),)


class ReadOnlyList(list):
    """A list as a step is given it (the messages, a message's blocks): it cannot be changed; a
    copy (``list(x)``, ``x[:]``, ``copy.deepcopy``) is a plain one."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __iadd__ = __imul__ = _refuse

    def __copy__(self) -> list:
        return list(self)

    def __deepcopy__(self, memo: dict) -> Any:
        return _plain(self)

    def __reduce__(self) -> Any:
        return list, (list(self),)


_CONTAINERS = (dict, list, ReadOnlyDict, ReadOnlyList)


def _read_only(value: Any) -> Any:
    """``value`` (a message: dicts, lists and plain values) as read-only containers, made anew
    (a plain value is not called for: most of a message is strings)."""
    if isinstance(value, dict):
        return ReadOnlyDict({k: v if type(v) not in _CONTAINERS else _read_only(v) for k, v in value.items()})
    if isinstance(value, list):
        return ReadOnlyList([v if type(v) not in _CONTAINERS else _read_only(v) for v in value])
    return value


def _made_read_only() -> Callable[[Any], Any]:
    """What makes a message read-only for a step: the native core's one walk
    (``_native.read_only``) where it runs, else ``_read_only`` (its reference)."""
    from ...core import in_use

    native = in_use()
    if native is None:
        return _read_only
    return functools.partial(native.read_only, dict_class=ReadOnlyDict, list_class=ReadOnlyList)


def _plain(value: Any) -> Any:
    """``value`` as plain dicts and lists, made anew (what a message the step made holds)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _call(step: Step, given: list[dict], facts: StepFacts, settings: Any, call: int) -> Any:
    """The step's answer at ``call``. Whatever it raises ends the run with an error that names it
    (an exception: exit 2; ``SystemExit``, a ``KeyboardInterrupt`` it raised itself, any other
    ``BaseException``: a crash, exit 1), never a pass; a real Ctrl-C or SIGTERM stays an interrupt.
    What it prints goes to stderr, each line marked as the step's, never into compactlab's output."""
    from ...plumbing import interrupts
    from .step_process import ProcessFailed

    printed = io.StringIO()
    before = interrupts.delivered()
    try:
        with _captured(printed):
            return step.run(given, facts, settings)
    except SummaryFailed:
        raise
    except ProcessFailed as exc:
        raise StepError(f"custom step {step.name} {exc} (call {call})") from None
    except MessageChanged as exc:
        raise _failed(StepError, f"custom step {step.name} changed a message it was given at call {call}: return a "
                      "new message in its place instead", exc) from None
    except Exception as exc:
        raise _failed(StepError, f"custom step {step.name} raised {type(exc).__name__} at call {call}: {exc}",
                      exc) from None
    except KeyboardInterrupt as exc:
        if interrupts.from_signal(exc, before):
            raise
        raise _failed(StepCrashed, f"custom step {step.name} raised KeyboardInterrupt at call {call}", exc) from None
    except BaseException as exc:  # (SystemExit, GeneratorExit, a BaseException of its own)
        what = f"exited (SystemExit: {exc.code!r})" if isinstance(exc, SystemExit) else f"raised {type(exc).__name__}"
        raise _failed(StepCrashed, f"custom step {step.name} {what} at call {call}", exc) from None
    finally:
        _show_printed(printed.getvalue(), step.name, call)


class _ThreadStdout:
    """``sys.stdout`` that sends a thread's writes to a buffer of its own while it runs a step, and
    every other write where it went before. (``contextlib.redirect_stdout`` swaps the one stream of
    the process: two steps on two threads of a Dask worker would leave it pointing at one's buffer,
    and compactlab's own output would be lost.)"""

    def __init__(self, real: Any) -> None:
        self.real, self.local = real, threading.local()

    def write(self, text: str) -> int:
        buffer = getattr(self.local, "buffer", None)
        return int((self.real if buffer is None else buffer).write(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


_STDOUT_LOCK = threading.Lock()


@contextlib.contextmanager
def _captured(buffer: io.StringIO) -> Iterator[None]:
    """What this thread prints goes to ``buffer`` meanwhile."""
    with _STDOUT_LOCK:
        out = sys.stdout
        if not isinstance(out, _ThreadStdout):
            out = sys.stdout = _ThreadStdout(out)
    out.local.buffer = buffer
    try:
        yield
    finally:
        out.local.buffer = None


def _failed(kind: type[StepError], message: str, exc: BaseException) -> StepError:
    """The error, with the step's traceback as its ``detail`` (shown with ``COMPACTLAB_DEBUG=1``)."""
    import traceback

    error = kind(message, hint="COMPACTLAB_DEBUG=1 shows the step's traceback")
    error.detail = "".join(traceback.format_exception(exc))
    return error


_CONTROL = pattern("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _show_printed(text: str, name: str, call: int) -> None:
    """What a step printed, on stderr, each line marked as the step's and its control characters
    shown as escapes (a step's output is never the terminal's to interpret)."""
    if not text:
        return
    esc = (lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}")
    for line in text.rstrip("\n").split("\n"):
        sys.stderr.write(f"custom step {_CONTROL.sub(esc, name)} printed (call {call}): {_CONTROL.sub(esc, line)}\n")


#: what a block a step makes must hold, by its type (the API refuses a block without them)
_BLOCK_FIELDS: dict[str, tuple[tuple[str, type | tuple[type, ...]], ...]] = {
    "text": (("text", str),),
    "tool_use": (("id", str), ("name", str), ("input", dict)),
    "tool_result": (("tool_use_id", str),),
    "thinking": (("thinking", str),),
}
#: the role a block may stand in
_BLOCK_ROLE = {"tool_use": "assistant", "tool_result": "user", "thinking": "assistant"}


def _check_blocks(m: dict, at: int, name: str, call: int) -> None:
    """A message the step made: every block a dict with a type, the fields its type needs (an id,
    the tool_use it answers), in a message of the role it belongs to."""
    content = m["content"]
    if isinstance(content, str):
        return
    for k, block in enumerate(content):
        where = f"custom step {name} returned, at call {call}, message {at} block {k}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise StepError(f"{where}: {str(block)[:40]!r} is not a block (a dict with a type)")
        kind = block["type"]
        for key, types in _BLOCK_FIELDS.get(kind, ()):
            value = block.get(key)
            if not isinstance(value, types) or (types is str and key != "text" and not value):
                raise StepError(f"{where}: a {kind} block without {'an' if key[0] in 'aeiou' else 'a'} {key}")
        if _BLOCK_ROLE.get(kind, m["role"]) != m["role"]:
            raise StepError(f"{where}: a {kind} block in {'an' if m['role'] == 'assistant' else 'a'} {m['role']} "
                            f"message (it belongs in {'an' if _BLOCK_ROLE[kind] == 'assistant' else 'a'} "
                            f"{_BLOCK_ROLE[kind]} message)")


def _check_ids(sent: list, given: list, name: str, call: int) -> None:
    """No two tool_use blocks of the context a step returns share an id, unless they did in the
    context it was given (a recording may hold such a pair: inherited, not the step's): the API
    refuses it, and a result could not say which it answers. An orphaned result or call is the
    violations measure's, as a built-in layer's would be."""
    introduced = _twice(sent) - _twice(given)
    if introduced:
        first = min(introduced)
        at = max(i for i, e in enumerate(sent) if first in _ids(e))
        raise StepError(f"custom step {name} returned, at call {call}, two tool_use blocks with id {first[:40]!r} "
                        f"(the second in message {at})")


def _ids(entry: Any) -> list[str]:
    content = entry.message.get("content")
    return [str(b.get("id")) for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] \
        if isinstance(content, list) else []


def _twice(entries: list) -> set[str]:
    """The tool_use ids that more than one block of ``entries`` has."""
    seen: set[str] = set()
    twice: set[str] = set()
    for e in entries:
        for key in _ids(e):
            (twice if key in seen else seen).add(key)
    return twice


def _settings(step: Step, config: CustomConfig) -> Any:
    return _settings_of(step, orjson.dumps(config.settings, option=orjson.OPT_SORT_KEYS))


@functools.lru_cache(maxsize=64)
def _settings_of(step: Step, table: bytes) -> Any:
    return step.settings_of(orjson.loads(table))


def _is_message(m: Any) -> bool:
    return isinstance(m, dict) and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), (str, list))


def _what(value: Any) -> str:
    if isinstance(value, list):
        bad = next(m for m in value if not _is_message(m))
        return f"a list with {type(bad).__name__} {str(bad)[:40]!r} in it"
    return f"a {type(value).__name__}"
