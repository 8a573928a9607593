"""Your sessions, found (#47 §1): where each harness compactlab reads keeps its sessions, as its own
documentation (or code) says, and the sessions there, filtered by time, project and harness.

- **Claude Code**: ``projects/<project>/*.jsonl`` under each folder of ``$CLAUDE_CONFIG_DIR``
  (a comma-separated list), else under ``~/.config/claude`` and ``~/.claude`` (as ccusage looks);
  a session's project is its folder's name (the working folder, its ``/`` made ``-``).
- **Codex CLI**: ``sessions/YYYY/MM/DD/rollout-*.jsonl`` under ``$CODEX_HOME``, else ``~/.codex``;
  a session's project is the working folder its first line records.
- **Gemini CLI**: ``~/.gemini/tmp/<project hash>/chats/session-*.json`` (or ``.jsonl``); a
  session's project is its project folder's name.
- **Cline, Roo Code, Kilo Code**: ``tasks/<task id>/api_conversation_history.json`` in the VS Code
  extension's global storage (VS Code, its Insiders build, VSCodium and Cursor; on Linux under
  ``~/.config``, on macOS under ``~/Library/Application Support``).

- **Pi**: ``--<cwd>--/*.jsonl`` under ``$PI_CODING_AGENT_DIR/sessions`` (else
  ``~/.pi/agent/sessions``); a session's project is its folder's name (the working folder).
- **OpenClaw**: ``~/.openclaw/agents/<agent>/sessions/*.jsonl`` (Pi's format); a session's
  project is its agent.
- **Qwen Code**: ``projects/<project>/chats/*.jsonl`` under ``$QWEN_HOME`` (else ``~/.qwen``).

- **Copilot CLI**: ``~/.copilot/session-state/<id>/events.jsonl``; a session's project is the
  working folder its first event records.
- **Goose**: the sessions of ``sessions/sessions.db`` under ``$GOOSE_PATH_ROOT/data``, else
  ``~/.local/share/goose`` (``~/.local/share/Block/goose``, macOS's ``~/Library/Application
  Support/goose``); a sub-session is a subagent's.
- **Amp**: ``threads/T-*.json`` under ``$AMP_DATA_DIR``, else ``~/.local/share/amp``.
- **OpenCode**: the sessions of ``opencode*.db`` (and the legacy ``storage/session/*/*.json``) in
  ``$OPENCODE_DATA_DIR``, else ``~/.local/share/opencode``; **Kilo CLI**, its fork, the same in
  ``~/.local/share/kilo`` (``kilo*.db``). A session's project is its folder; a sub-session (a
  task's) is a subagent's; a session's time is when the store says it was last updated.

``--since`` and ``--until`` (``7d``, ``12h``, ``2w``, or a date ``2026-11-01``) keep the sessions
last written in that time, ``--project NAME`` those whose project holds NAME, ``--harness NAME``
those of one harness.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path

from ..errors import UsageError
from ..plain import dataclass, pattern

HARNESSES = ("claude-code", "codex", "gemini-cli", "cline", "roo", "kilo", "pi", "openclaw", "qwen", "opencode",
             "kilo-cli", "copilot", "amp", "goose")
#: the VS Code extensions that keep Cline-format task histories, by harness
_EXTENSIONS = {"cline": "saoudrizwan.claude-dev", "roo": "rooveterinaryinc.roo-cline", "kilo": "kilocode.kilo-code"}
#: the VS Code builds whose global storage is searched
_EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor")


@dataclass(eq=False, repr=False)
class Home:
    """Where one harness keeps its sessions, and the sessions found there (before and after the
    filters)."""

    harness: str
    path: str
    found: int = 0
    kept: list[str] = field(default_factory=list)
    #: the subagents' sessions that pass the same filters (Claude Code's ``<session>/subagents/``):
    #: read with ``--subagents``, else left out and said
    agents: list[str] = field(default_factory=list)


def homes(env: Mapping[str, str] | None = None) -> list[tuple[str, Path]]:
    """Each harness's session folders on this machine (those that exist), in ``HARNESSES`` order."""
    return [(h, p) for h, p in places(env) if p.is_dir()]


def places(env: Mapping[str, str] | None = None) -> list[tuple[str, Path]]:
    """Every folder a harness's sessions may be in (``homes``: those that exist), in ``HARNESSES``
    order, as the environment (``CODEX_HOME`` and the others) places them."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home())
    out: list[tuple[str, Path]] = []
    claude = [_expanded(p.strip(), "CLAUDE_CONFIG_DIR") for p in env.get("CLAUDE_CONFIG_DIR", "").split(",") if p.strip()]
    for root in claude or [home / ".config" / "claude", home / ".claude"]:
        out.append(("claude-code", root / "projects"))
    out.append(("codex", _expanded(env.get("CODEX_HOME") or str(home / ".codex"), "CODEX_HOME") / "sessions"))
    out.append(("gemini-cli", home / ".gemini" / "tmp"))
    pi = env.get("PI_CODING_AGENT_DIR")
    out.append(("pi", (_expanded(pi, "PI_CODING_AGENT_DIR") if pi else home / ".pi" / "agent") / "sessions"))
    out.append(("openclaw", home / ".openclaw" / "agents"))
    qwen = env.get("QWEN_HOME")
    out.append(("qwen", (_expanded(qwen, "QWEN_HOME") if qwen else home / ".qwen") / "projects"))
    opencode = env.get("OPENCODE_DATA_DIR")
    out.append(("opencode", _expanded(opencode, "OPENCODE_DATA_DIR") if opencode else home / ".local" / "share" / "opencode"))
    out.append(("kilo-cli", home / ".local" / "share" / "kilo"))
    out.append(("copilot", home / ".copilot" / "session-state"))
    goose = env.get("GOOSE_PATH_ROOT")
    for root in ([_expanded(goose, "GOOSE_PATH_ROOT") / "data"] if goose else
                 [home / ".local" / "share" / "goose", home / ".local" / "share" / "Block" / "goose",
                  home / "Library" / "Application Support" / "goose"]):
        out.append(("goose", root / "sessions"))
    amp = env.get("AMP_DATA_DIR")
    out.append(("amp", (_expanded(amp, "AMP_DATA_DIR") if amp else home / ".local" / "share" / "amp") / "threads"))
    storage = [home / ".config", home / "Library" / "Application Support"]
    for harness, extension in _EXTENSIONS.items():
        for base in storage:
            for editor in _EDITORS:
                out.append((harness, base / editor / "User" / "globalStorage" / extension / "tasks"))
    return out


def home_within(folder: str, env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """Where ``folder`` holds a harness's sessions folder deeper than a folder is read (``~/.claude``
    holds ``projects/``, ``~/.codex`` holds ``sessions/``): the harness, and that folder as a path
    from ``folder`` as given; None elsewhere."""
    try:
        root = Path(folder).resolve()
    except (OSError, RuntimeError):
        return None
    for harness, place in places(env):
        try:
            inside = place.resolve().relative_to(root)
        except (OSError, RuntimeError, ValueError):
            continue
        if inside.parts and place.is_dir():
            return harness, os.path.join(folder, *inside.parts)
    return None


def _expanded(path: str, variable: str) -> Path:
    """A folder an environment variable names, ``~`` and ``~user`` expanded (one that names no
    user is a one-line error naming the variable, exit 2)."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        raise UsageError(f"{variable}={path[:80]}: {path.split('/', 1)[0][:40]} names no user of this machine",
                         hint=f"set {variable} to a folder, or unset it") from None


#: a session found: its path (a file, or a store's ``STORE#SESSION``), its project, and when it was
#: last written where that is not its file's (a store's session: as the store says)
Found = tuple[Path, str] | tuple[Path, str, float]


def _stores(harness: str, root: Path, sub: bool) -> list[Found]:
    """The sessions (``sub``: the sub-sessions) of an OpenCode-schema store in ``root``."""
    from . import is_store, store_sessions

    out: list[Found] = []
    pattern = {"kilo-cli": "kilo*.db", "goose": "sessions.db"}.get(harness, "opencode*.db")
    for db in sorted(root.glob(pattern)):
        if is_store(str(db)):
            out += [(Path(name), Path(folder).name, when) for name, child, when, folder in store_sessions(str(db))
                    if child == sub]
    return out


#: where a home's session files are (globs under it) and what names a session's project, by harness
_FILES: dict[str, tuple[tuple[str, ...], Callable[[Path], str]]] = {
    "claude-code": (("*/*.jsonl",), lambda f: f.parent.name),
    "codex": (("*/*/*/rollout-*.jsonl*",), lambda f: _codex_project(f)),
    "gemini-cli": (("*/chats/session-*.json", "*/chats/session-*.jsonl"), lambda f: f.parent.parent.name),
    "pi": (("*/*.jsonl",), lambda f: f.parent.name.strip("-")),
    "openclaw": (("*/sessions/*.jsonl",), lambda f: f.parent.parent.name),
    "qwen": (("*/chats/*.jsonl",), lambda f: f.parent.parent.name),
    "copilot": (("*/events.jsonl",), lambda f: Path(_codex_project(f)).name),
    "amp": (("T-*.json",), lambda f: "amp"),
    "opencode": (("storage/session/*/*.json",), lambda f: f.parent.name),  # (the legacy files; the store besides)
    "kilo-cli": (("storage/session/*/*.json",), lambda f: f.parent.name),
    "goose": ((), lambda f: ""),  # (its store only)
}
#: the harnesses whose sessions are (also) in a SQLite store
_STORED = ("opencode", "kilo-cli", "goose")
#: the Cline-format extensions' (cline, roo, kilo) task histories
_TASK_FILES: tuple[tuple[str, ...], Callable[[Path], str]] = (("*/api_conversation_history.json",), lambda f: f.parent.name)


def _sessions(harness: str, root: Path) -> list[Found]:
    """The sessions of one home, each with its project (and a store's, their time)."""
    globs, project = _FILES.get(harness, _TASK_FILES)
    files: list[Found] = [(f, project(f)) for pattern in globs for f in sorted(root.glob(pattern)) if f.is_file()]
    return (_stores(harness, root, False) if harness in _STORED else []) + files


def _agents(harness: str, root: Path) -> list[Found]:
    """The subagents' sessions of one home, each with its project (the folder form's rule:
    ``subagents/`` beside a session, or inside its folder; a store's sub-sessions)."""
    if harness in _STORED:
        return _stores(harness, root, True)
    if harness != "claude-code":
        return []
    found = {f for pattern in ("*/subagents/*.jsonl", "*/*/subagents/*.jsonl") for f in root.glob(pattern) if f.is_file()}
    return [(f, f.relative_to(root).parts[0]) for f in sorted(found)]


def _codex_project(path: Path) -> str:
    """The working folder a session's first line records ("" if none): a Codex rollout's
    session_meta, a Copilot CLI session's session.start."""
    try:
        with open(path, "rb") as f:
            head = f.readline(65536)
    except OSError:
        return ""
    m = re.search(rb'"cwd"\s*:\s*"([^"]*)"', head)
    return m.group(1).decode("utf-8", "replace") if m else ""


def started_in(path: str | Path, head: int = 1 << 18) -> str | None:
    """The folder a JSON-lines session says it was started in: the first ``cwd`` a record holds at
    its top level, read line by line from the start and no further than ``head`` bytes (a Claude
    Code or Qwen Code session's records each say theirs; the first is where the harness ran, whose
    project settings apply). None where none says, where it is not an absolute path here (a
    relative one would be read against compactlab's own folder), or the file cannot be read."""
    import json

    try:
        with open(path, "rb") as f:
            while head > 0:
                line = f.readline(head)
                head -= len(line)
                if not line.endswith(b"\n") and head <= 0 or not line:
                    return None  # (the end, or a line longer than what is left to read)
                if b'"cwd"' not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("cwd"), str) and record["cwd"]:
                    return str(record["cwd"]) if os.path.isabs(record["cwd"]) else None
    except OSError:
        return None
    return None


_SPAN = pattern(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def when(text: str, option: str, now: float | None = None) -> float:
    """A time given as ``7d``/``12h``/``30m``/``2w`` ago or as a date ``YYYY-MM-DD`` (local midnight)."""
    now = time.time() if now is None else now
    t = text.strip().lower()
    m = _SPAN.match(t)
    if m:
        return now - int(m.group(1)) * _UNITS[m.group(2)]
    try:
        return time.mktime(time.strptime(t, "%Y-%m-%d"))
    except ValueError:
        raise UsageError(f"{option} {text!r}: not a time", hint=f"e.g. {option} 7d, 12h, 2w or 2026-11-01") from None


def find(since: float | None = None, until: float | None = None, project: str | None = None,
         harness: str | None = None, env: Mapping[str, str] | None = None) -> list[Home]:
    """Every harness home of this machine with the sessions in it that pass the filters."""
    if harness is not None and harness not in HARNESSES:
        raise UsageError(f"--harness {harness!r}: not one compactlab reads", hint=f"one of {', '.join(HARNESSES)}")
    out: list[Home] = []
    for name, root in homes(env):
        if harness is not None and name != harness:
            continue
        found = _sessions(name, root)
        home = Home(name, str(root), len(found))
        home.kept = _kept(found, since, until, project)
        home.agents = _kept(_agents(name, root), since, until, project)
        out.append(home)
    return out


def _kept(found: list[Found], since: float | None, until: float | None, project: str | None) -> list[str]:
    """The sessions that pass the filters."""
    kept = []
    for path, proj, *written in found:
        if project is not None and project.lower() not in proj.lower():
            continue
        if since is not None or until is not None:
            try:
                mtime = written[0] if written else path.stat().st_mtime
            except OSError:
                continue
            if (since is not None and mtime < since) or (until is not None and mtime > until):
                continue
        kept.append(str(path))
    return kept


def _homes_said(where: list[tuple[str, Path]], short: Callable[[str], str]) -> list[str]:
    """Each harness's home as ``places`` puts it, once a harness, in its order: the shortest of its
    folders (Claude Code's ``~/.claude/projects`` rather than ``~/.config/claude/projects``), and
    the editor extensions' task folders said as one (there are a dozen of them)."""
    shortest: dict[str, str] = {}
    for harness, path in where:
        folder = short(str(path))
        if harness not in shortest or len(folder) < len(shortest[harness]):
            shortest[harness] = folder
    said = [folder for harness, folder in shortest.items() if harness not in _EXTENSIONS]
    extensions = [h.capitalize() for h in _EXTENSIONS if h in shortest]
    if extensions:
        said.insert(min(3, len(said)), f"the {'/'.join(extensions)} task folders")
    return said


def looked(found: list[Home], env: Mapping[str, str] | None = None, harness: str | None = None) -> str:
    """The line that says where compactlab looked and what it found in each place (``harness``:
    the one --harness chose, whose own folders are named where none of them is on this machine)."""
    env = os.environ if env is None else env
    home = str(env.get("HOME") or Path.home())

    def short(p: str) -> str:
        return "~" + p[len(home):] if home and p.startswith(home + os.sep) else p

    if not found and harness is not None:
        where = list(dict.fromkeys(short(str(p)) for h, p in places(env) if h == harness))
        shown = ", ".join(where[:3]) + (f" or {len(where) - 3} more" if len(where) > 3 else "")
        return f"no sessions: {harness}'s home is not on this machine ({shown})"
    if not found:
        return f"no sessions: none of the harnesses' homes is on this machine ({', '.join(_homes_said(places(env), short))})"
    parts = [f"{short(h.path)} ({h.harness}): {len(h.kept)}" + (f" of {h.found}" if len(h.kept) != h.found else "")
             for h in found]
    return f"sessions found: {sum(len(h.kept) for h in found)}, in " + "; ".join(parts)
