"""Transcript loaders: one module per input format, plus detection.

Every format module exposes ``NAME``, ``DESCRIPTION``, ``load(path, **options) -> Transcript`` and
one or both of ``sniff(objects) -> float`` (how well the first parsed lines of a JSONL file fit,
0..1) and ``sniff_document(doc) -> float`` (how well a whole-file JSON document fits). A format
whose lines are its messages, one each, also has ``stream(path, **options) -> TranscriptStream``.
``FORMATS`` is the one registry: CLI choices and detection come from it. Detection reads the
content, never the file name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from importlib import import_module
from types import ModuleType, SimpleNamespace
from typing import Any

from ..errors import InputError
from ..plumbing.files import path_stamp
from . import anthropic_messages, stores
from .model import BadField, RecordedCompaction, Transcript, TranscriptBuilder, TranscriptStream
from .reader import Head, UnknownFormat, is_document, read_document, read_head

#: each format's name and its module, in detection's order (the first of equal scores wins)
_MODULES = {"anthropic": "anthropic_messages", "claude-code": "claude_code", "codex": "codex", "openai": "openai_chat",
            "mini-swe-agent": "mini_swe_agent", "swe-agent": "swe_agent", "openhands": "openhands", "otlp": "otlp",
            "gemini-cli": "gemini_cli", "cline": "cline", "pi": "pi", "qwen": "qwen", "opencode": "opencode",
            "copilot": "copilot", "amp": "amp", "goose": "goose"}


class _Formats(Mapping[str, ModuleType]):
    """The formats by name, each module imported when it is first asked for: a replay of an
    Anthropic messages file, which detection tells from its first lines alone (``_detect``), loads
    none of the fifteen others (15 M instructions of a replay's start-up)."""

    def __getitem__(self, name: str) -> ModuleType:
        return import_module(f"{__name__}.{_MODULES[name]}")

    def __contains__(self, name: object) -> bool:
        return name in _MODULES

    def __iter__(self) -> Iterator[str]:
        return iter(_MODULES)

    def __len__(self) -> int:
        return len(_MODULES)


FORMATS: Mapping[str, ModuleType] = _Formats()

__all__ = ["FORMATS", "FolderFile", "one_session", "written_at", "RecordedCompaction", "UnknownFormat", "Transcript", "TranscriptBuilder", "TranscriptStream", "detect_format", "recorded_format",
           "expand_inputs", "load_transcript", "open_transcript", "skipped_subagents", "subagent_sessions"]

SESSION_GLOBS = ("*.jsonl", "*.jsonl.gz", "*.jsonl.zst", "*.json", "*.traj")


class FolderFile(str):
    """A file a folder argument stood for (not one the user named): where it is no transcript in
    a known format (a task folder's ``ui_messages.json``, a fixture's truth file) it is skipped,
    and said, rather than stopping the command."""


#: the formats whose sessions live many to a SQLite store (``stores``), told apart by their tables
STORE_FORMATS = ("opencode", "goose")


def store_format(path: str) -> ModuleType | None:
    """The format whose store ``path`` is (by its tables); None for any file that is no SQLite
    store. A SQLite file of no known store is an error naming it."""
    if not stores.is_sqlite(path):
        return None
    db = stores.connect(path)
    try:
        found = stores.tables(db)
    finally:
        db.close()
    for name in STORE_FORMATS:
        if (module := FORMATS[name]).TABLES <= found:
            return module
    raise InputError(f"{path}: an SQLite file, but not a store of a harness compactlab reads "
                     "(OpenCode's session, message and part tables, or Goose's sessions and messages)")


def is_store(path: str) -> bool:
    try:
        return store_format(path) is not None
    except InputError:
        return False


def store_sessions(store: str) -> list[tuple[str, bool, float, str]]:
    """Each session of a store: (its name ``STORE#SESSION``, whether it is a sub-session (a
    subagent's), when it was last updated (epoch seconds), its project folder)."""
    module = store_format(store)
    if module is None:
        return []
    return [(f"{store}{stores.SEP}{sid}", sub, when, folder) for sid, sub, when, folder in module.store_sessions(store)]


def written_at(paths: list[str]) -> dict[str, float]:
    """When each session was last written (epoch seconds): its file's time, or for a session of a
    store the time the store gives it (each store read once)."""
    import os

    out: dict[str, float] = {}
    stores_read: dict[str, dict[str, float]] = {}
    for path in paths:
        where = stores.in_store(path)
        if where is None:
            out[path] = os.path.getmtime(path)
            continue
        if where[0] not in stores_read:
            stores_read[where[0]] = {name: when for name, _, when, _ in store_sessions(where[0])}
        out[path] = stores_read[where[0]].get(path, 0.0)
    return out


def one_session(path: str) -> bool:
    """Whether ``path`` names one session: a file (not a store of many, such as OpenCode's
    database), or a session of a store (``STORE#SESSION``)."""
    import os

    return (os.path.isfile(path) and not is_store(path)) or stores.in_store(path) is not None


def _detect(path: str, head: Head | None = None) -> tuple[str, dict[str, Any]]:
    """(format name, what detection read for the loader: the parsed document of a JSON document
    file, or the parsed head of a JSONL file: ``head`` if the caller read it already)."""
    read: dict[str, Any]
    if head is None and (where := stores.in_store(path)) is not None:
        module = store_format(where[0])
        if module is None:
            raise UnknownFormat(f"{path}: not a session of a store compactlab reads")
        return module.NAME, {}
    if head is None and is_store(path):
        raise UnknownFormat(f"{path}: an SQLite store of many sessions, not one transcript",
                            hint="give the store as a folder's file (compactlab inspect STORE lists its sessions), "
                                 "or one session as STORE#SESSION")
    if head is None and is_document(path):
        read = {"document": read_document(path)}
        scores = {n: min(1.0, m.sniff_document(read["document"][0])) for n, m in FORMATS.items()
                  if hasattr(m, "sniff_document")}
    else:
        read = {"head": head or read_head(path)}
        objects = read["head"].objects
        if anthropic_messages.sniff(objects) == 1.0:  # (the first format, at the most any scores: it wins)
            return anthropic_messages.NAME, read
        scores = {n: min(1.0, m.sniff(objects)) for n, m in FORMATS.items() if hasattr(m, "sniff")}
    best = max(scores, key=lambda n: scores[n])
    if scores[best] <= 0:
        raise UnknownFormat(
            f"{path}: not a transcript in any known format ({', '.join(FORMATS)})",
            hint="use --input-format NAME to force one",
        )
    return best, read


def detect_format(path: str, head: Head | None = None) -> str:
    """The format of a file, from its content (``head``: its first lines, parsed already)."""
    return _detect(path, head)[0]


def recorded_format(path: str, input_format: str | None = None) -> str | None:
    """The format the session at ``path`` was recorded in, from its content: the one it is read as
    (``input_format``, else detected), or for a file ``compactlab convert`` wrote, the one its first
    reply names (as its loader reads it: the transcript's ``source_format``); None where it is no
    transcript compactlab reads (its replay says why)."""
    try:
        if input_format is not None and input_format != anthropic_messages.NAME:
            return input_format
        fmt, read = (input_format, {"head": read_head(path)}) if input_format is not None else _detect(path)
    except (InputError, OSError, ValueError):
        return None
    if fmt == anthropic_messages.NAME and "head" in read:
        builder = TranscriptBuilder(path, fmt)
        for obj in read["head"].objects:
            builder.recorded_from(obj.get(anthropic_messages.RECORDED_FORMAT_KEY))
        return builder.metadata.get("recorded_format") or fmt
    return fmt


def recorded_version(path: str) -> tuple[str, str] | None:
    """(format, the version of the harness that recorded the session at ``path``), from its first
    lines: the first record that names one (Claude Code's and Qwen Code's records each do, as their
    loaders read it); None where none does, or it is no JSON-lines transcript compactlab reads. Read
    once a file as it stands (its ``path_stamp``): a compare asks it of a session at its default
    policies, its notes and its verdict."""
    stamp = path_stamp(path)
    return None if stamp is None else _recorded_version(path, stamp)


@lru_cache(maxsize=1024)
def _recorded_version(path: str, stamp: tuple[int, ...]) -> tuple[str, str] | None:
    """``recorded_version`` of the file at ``path`` whose ``path_stamp`` is ``stamp``."""
    try:
        if is_document(path) or is_store(path) or stores.in_store(path) is not None:
            return None
        fmt, read = _detect(path)
    except (InputError, OSError, ValueError):
        return None
    head = read.get("head")
    for obj in head.objects if isinstance(head, Head) else ():
        version = obj.get("version")
        if isinstance(version, str) and version and len(version) < 40:
            return fmt, version
    return None


def _format(path: str, input_format: str | None, options: dict[str, object]) -> ModuleType:
    """The format module for a file; what detection read goes into ``options`` for its loader (a
    ``head`` given in ``options`` is what the caller read of the file already)."""
    head = options.get("head")
    if input_format is None:
        name, read = _detect(path, head if isinstance(head, Head) else None)
        options.update(read)
    else:
        name = input_format
        fmt = FORMATS.get(name)
        if (not isinstance(head, Head) and hasattr(fmt, "sniff") and hasattr(fmt, "sniff_document")
                and not is_document(path)):
            # (a format that reads both, a document or JSON lines, tells them apart by the head it
            # is given, as after detection: named, a JSONL file was read as one broken document;
            # one that reads only documents says itself what else a file is)
            options["head"] = read_head(path)
    if name not in FORMATS:
        raise InputError(f"unknown input format {name!r} (known: {', '.join(FORMATS)})")
    return FORMATS[name]


def open_transcript(path: str | os.PathLike[str], input_format: str | None = None, load: bool = True,
                    **options: object) -> Transcript | TranscriptStream | None:
    """A transcript for one replay: streamed when its format reads a message a line, else loaded
    (``load=False``: else None)."""
    path = os.fspath(path)
    fmt = _format(path, input_format, options)
    if hasattr(fmt, "stream"):
        return fmt.stream(path, **options)
    return _load(fmt, path, options) if load else None


def load_transcript(path: str | os.PathLike[str], input_format: str | None = None, **options: object) -> Transcript:
    """Load a transcript file, detecting its format from its content unless ``input_format`` names one."""
    path = str.__str__(os.fspath(path))  # (a FolderFile's mark is the caller's: the transcript's path is a plain string)
    return _load(_format(path, input_format, options), path, options)


def load_with(load: Callable[..., Transcript], path: str, **options: object) -> Transcript:
    """A transcript read by ``load`` (a format's, or another reading of its lines: the read-ahead
    feed's, which leaves the messages in the file) with the checks every loaded transcript has."""
    return _load(SimpleNamespace(load=load), path, options)


def _load(fmt: Any, path: str, options: dict[str, object]) -> Transcript:
    # (the command loads with the garbage collector off: process.collector_off; a library
    # caller who loads big files may do the same)
    # (the file's stat before and after: the same, what was read is that file's bytes; a store's
    # session is read from its rows, OpenCode's legacy files from many: their hash says)
    before = path_stamp(path) if getattr(fmt, "NAME", None) not in STORE_FORMATS else None
    try:
        transcript = fmt.load(path, **options)
    except BadField as exc:  # a whole-file format's bad field (a line's is reported by its line)
        raise InputError(f"{path}: {exc}") from None
    if not transcript.entries:
        raise InputError(f"{path}: no messages in this transcript")
    if before is not None and path_stamp(path) == before:
        transcript.stamp = before
    return transcript


def expand_inputs(paths: list[str] | tuple[str, ...], subagents: bool = False) -> list[str]:
    """Files as given (a glob no shell expanded, ``dir/*.jsonl``, stands for the files it matches);
    a folder stands for the session files directly in it or, where it has
    none, in the folders directly in it (``~/.claude/projects/`` holds a folder per project), or
    else the Codex rollouts in its date folders (``~/.codex/sessions/YYYY/MM/DD/``). A
    Claude Code subagent's session (a ``subagents/`` folder beside its main session) is included
    only with ``subagents``; :func:`skipped_subagents` counts what was left out."""
    return _expand(paths, subagents)[0]


def skipped_subagents(paths: list[str] | tuple[str, ...]) -> int:
    """How many subagent sessions the folders among ``paths`` hold (left out unless asked for)."""
    return len(subagent_sessions(paths))


def subagent_sessions(paths: list[str] | tuple[str, ...]) -> list[str]:
    """The subagent sessions the folders among ``paths`` hold."""
    return _expand(paths, True)[1]


def deeper_folders(paths: list[str] | tuple[str, ...]) -> list[str]:
    """The folders a folder among ``paths`` stands for whose sessions are all deeper than it reads
    (``expand_inputs``: the folders directly in it), so that none of theirs is replayed: each
    folder directly in it with no session of its own but some in the folders directly in it
    (``transcripts/claude_code/`` above its projects' folders), by path."""
    import os
    from pathlib import Path

    def holds(folder: Path) -> bool:
        return any(f.is_file() for g in SESSION_GLOBS for f in folder.glob(g))

    out: list[str] = []
    for p in paths:
        if not os.path.isdir(p) or is_store(p) or holds(folder := Path(p)):
            continue
        for d in sorted(folder.iterdir()):
            if (d.is_dir() and d.name != "subagents" and not d.name.startswith(".") and not holds(d)
                    and any(holds(sub) for sub in d.iterdir() if sub.is_dir() and sub.name != "subagents")):
                out.append(str(d))
    return out


def _store_inputs(store: str) -> tuple[list[str], list[str]]:
    """A store's sessions, and its sub-sessions (subagents'), as a folder's files."""
    found = store_sessions(store)
    return ([FolderFile(name) for name, sub, _, _ in found if not sub], [FolderFile(name) for name, sub, _, _ in found if sub])


def _expand(paths: list[str] | tuple[str, ...], subagents: bool) -> tuple[list[str], list[str]]:
    import os

    out: list[str] = []
    found_agents: list[str] = []
    subs: list[str]
    for p in paths:
        if not os.path.exists(p) and any(c in p for c in "*?["):  # a glob no shell expanded ('dir/*.jsonl')
            mains, subs = _globbed(p), []
        elif is_store(p):  # (a store of sessions: each a transcript, a sub-session a subagent's)
            mains, subs = _store_inputs(p)
        elif os.path.isdir(p):
            mains, subs = _folder_inputs(p)
        else:
            mains, subs = [p], []
        out.extend(mains + (subs if subagents else []))
        found_agents.extend(subs)
    if not out:
        raise InputError(f"{', '.join(paths)}: only subagent sessions ({len(found_agents)})",
                         hint="--subagents replays them")
    return out, found_agents


def _globbed(pattern: str) -> list[str]:
    import glob
    import os

    matched = sorted(f for f in glob.glob(os.path.expanduser(pattern), recursive=True) if os.path.isfile(f))
    if not matched:
        raise InputError(f"{pattern}: no file matches", hint="quote a pattern only to let compactlab expand it")
    return [FolderFile(f) for f in matched]


def _folder_inputs(p: str) -> tuple[list[str], list[str]]:
    """A folder's sessions (in it, or in the folders directly in it), and its subagents' files."""
    from pathlib import Path

    def sessions(folder: Path) -> list[str]:
        return [FolderFile(f) for f in sorted({str(f) for g in SESSION_GLOBS for f in folder.glob(g) if f.is_file()})]

    def agents(folder: Path) -> list[str]:
        return sorted({str(f) for g in SESSION_GLOBS for pattern in (f"subagents/{g}", f"*/subagents/{g}")
                       for f in folder.glob(pattern) if f.is_file()})

    folder = Path(p)
    bases = [folder] if sessions(folder) else sorted(
        d for d in folder.iterdir() if d.is_dir() and d.name != "subagents" and not d.name.startswith("."))
    files = [f for base in bases for f in sessions(base)]
    more = [f for base in bases for f in agents(base)]
    if not files and not more:  # ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl
        files = [FolderFile(f) for f in sorted(str(f) for f in folder.glob("*/*/*/rollout-*.jsonl*") if f.is_file())]
    if not files and not more:
        from .homes import home_within

        within = home_within(p)  # (a harness's home, ~/.claude: its sessions are in a folder of it)
        raise InputError(f"{p}: a folder with no transcript files ({', '.join(SESSION_GLOBS)}), in it or in "
                         "the folders directly in it",
                         hint=None if within is None else f"{within[0]}'s sessions are in {within[1]}: give that "
                                                          f"folder, or no path (--harness {within[0]})")
    return files, more
