"""An agent's next action, and whether two agree (issue #30 §3).

An action is what a reply does first: its first tool call, or, with no tool call, its text. A tool
call has up to three fields, and two actions are compared field by field:

- **tool**: the tool's name (compared without case: ``Bash`` and ``bash`` are one tool);
- **target**: the file it names (an input key of ``FILE_KEYS``), else its main argument: for a
  shell command the first argument after the program that looks like a path, else its first
  argument that is not an option; for another tool the first of ``pattern``, ``query``, ``url``,
  ``file``, ``target`` it has. Two targets agree when one is the other or ends with ``/`` + it
  (``/repo/src/a.py`` and ``src/a.py``);
- **command class**: a shell command's program (``sed``, ``python``: the first program of the
  command that is not ``cd``/``export``/``source``, past ``sudo``, ``timeout N``, ``env`` and
  ``VAR=value``; ``python3.11`` is ``python``), or an editor tool's sub-command (``view``,
  ``str_replace``: the ``command`` key of a tool that also names a file).

The actions **agree** when the tool is the same and so is every other field the recorded action
has, but an editor's sub-command (#46 §2): a shell command's program *and* its target (``sed`` of
``src/a.py`` is not ``cat`` of it, nor ``sed`` of another file: for an agent whose one tool is a
shell, the tool alone agrees by chance), an editor's or another tool's target (``view`` and
``str_replace`` of one file agree: the file is the step). A recorded text reply agrees with a text
reply whose words are similar enough: ``difflib``'s ratio over their first 200 lowercased words at
least ``TEXT_SIMILARITY`` (0.5).
A tool call and a text reply never agree.
"""

from __future__ import annotations

import difflib
import shlex
from typing import Any

import orjson

from ..plain import NamedTuple, pattern
from ..transcripts.messages import FILE_KEYS, Message

#: the least word similarity at which two text replies agree
TEXT_SIMILARITY = 0.5
#: input keys that hold a tool's main argument when it names no file
MAIN_KEYS = ("pattern", "query", "url", "file", "target", "regex", "glob")
#: input keys that hold a shell command
COMMAND_KEYS = ("command", "cmd", "script")
#: what stands before the program of a shell command
_PREFIXES = {"sudo", "env", "nohup", "time", "exec", "command", "builtin"}
_SKIPPED = {"cd", "pushd", "popd", "export", "source", ".", "set", "unset"}
_SEGMENTS = pattern(r"&&|\|\||;|\||\n")
_VERSION = pattern(r"(?<=[a-z])[0-9.]+$")
_PATHLIKE = pattern(r"/|\.[A-Za-z0-9]{1,8}$")


class Action(NamedTuple):
    """What a reply does first: ``kind`` "tool" (``tool``, ``target``, ``command``), "text"
    (``text``), or "none" (neither: an empty reply)."""

    kind: str
    tool: str = ""
    target: str | None = None
    command: str | None = None
    text: str = ""

    def describe(self, width: int = 100) -> str:
        """One line for the ledger: ``Bash src/a.py [sed]``, or the text's start."""
        if self.kind == "tool":
            parts = [self.tool, self.target or "", f"[{self.command}]" if self.command else ""]
            line = " ".join(p for p in parts if p)
            over = len(line) - width
            if over > 0 and self.target and len(self.target) > over + 2:
                # (a long path cut in its middle: the tool, the file's name and the command stay;
                # the name whole, with its "/", where it fits)
                keep = len(self.target) - over - 1
                name = len(self.target.rsplit("/", 1)[-1]) + 1
                head = keep - name if "/" in self.target and name <= keep else keep // 3
                target = self.target[:head] + "…" + self.target[len(self.target) - (keep - head):]
                line = " ".join(p for p in (self.tool, target, parts[2]) if p)
        elif self.kind == "text":
            line = "text: " + " ".join(self.text.split())
        else:
            line = "(no action)"
        return line if len(line) <= width else line[: width - 1] + "…"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "tool": self.tool, "target": self.target, "command": self.command,
                "text": self.text[:2_000]}


def action_of(message: Message | None) -> Action:
    """The first action of an assistant message (Anthropic blocks)."""
    if message is None:
        return Action("none")
    content = message.get("content")
    if isinstance(content, str):
        return Action("text", text=content) if content.strip() else Action("none")
    texts = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use":
            return tool_action(str(block.get("name") or ""), block.get("input"))
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
    text = "\n".join(texts)
    return Action("text", text=text) if text.strip() else Action("none")


def tool_action(name: str, tool_input: Any) -> Action:
    """The action of a call of ``name`` with ``tool_input`` (a JSON text of an object is read as
    the object: OpenAI arguments, Codex's ``arguments``)."""
    args = _object(tool_input)
    if set(args) == {"arguments"} or set(args) == {"input"}:  # (Codex: the arguments as one JSON text)
        inner = _object(next(iter(args.values())))
        args = inner or args
    command = next((args[k] for k in COMMAND_KEYS if k in args), None)
    if isinstance(command, list):  # ["bash", "-lc", "ls -la"]: the script
        parts = [str(c) for c in command]
        command = parts[-1] if len(parts) >= 3 and parts[-2] in ("-c", "-lc") else " ".join(parts)
    target = next((v for k in FILE_KEYS if isinstance(v := args.get(k), str) and v), None)
    cls = None
    if isinstance(command, str) and command.strip():
        if target is not None and " " not in command.strip():
            cls = command.strip()  # an editor's sub-command (view, create, str_replace)
        else:
            cls, argument = _program(command)
            target = target or argument
    if target is None:
        target = next((v for k in MAIN_KEYS if isinstance(v := args.get(k), str) and v), None)
    return Action("tool", tool=name, target=_clean(target), command=cls)


#: an editor tool's sub-commands: the file it names is the step, not the sub-command
EDITOR_COMMANDS = frozenset({"view", "create", "str_replace", "insert", "undo_edit", "write", "edit", "append",
                             "replace", "delete"})


#: the rule ``agree`` applies, in words (what next_action.json and the reports say of it)
RULE = ("the same tool, and every other field the recorded action has: for a shell command the same program and "
        "target, for an editor or another tool the same target (an editor's sub-command may differ); a text reply "
        f"by word similarity >= {TEXT_SIMILARITY}")


def agree(recorded: Action, reply: Action) -> bool:
    """Whether ``reply`` does what ``recorded`` did (the rule in the module's docstring)."""
    if recorded.kind != reply.kind:
        return False
    if recorded.kind == "none":
        return True
    if recorded.kind == "text":
        return similarity(recorded.text, reply.text) >= TEXT_SIMILARITY
    if recorded.tool.lower() != reply.tool.lower():
        return False
    if recorded.target is not None and not same_target(recorded.target, reply.target):
        return False
    program = recorded.command is not None and recorded.command not in EDITOR_COMMANDS
    return not program or recorded.command == reply.command


def chance(actions: list[Action], k: int) -> float:
    """How often a recorded action of the same transcript, drawn at random (not the ``k``-th
    itself), agrees with the ``k``-th by the rule: the agreement a model gets by chance (#46 §2)."""
    others = [a for j, a in enumerate(actions) if j != k and a.kind != "none"]
    return sum(agree(actions[k], a) for a in others) / len(others) if others else 0.0


def repeats(actions: list[Action], k: int) -> bool:
    """Whether repeating the previous recorded action agrees with the ``k``-th."""
    return k > 0 and actions[k - 1].kind != "none" and agree(actions[k], actions[k - 1])


def same_target(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def similarity(a: str, b: str) -> float:
    """difflib's ratio of the two texts' first 200 lowercased words."""
    wa, wb = a.lower().split()[:200], b.lower().split()[:200]
    if not wa and not wb:
        return 1.0
    return difflib.SequenceMatcher(None, wa, wb, autojunk=False).ratio()


def _object(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


#: the characters of a shell command segment read for its program and target: shlex builds each
#: token a character at a time (quadratic: a 1 MB base64 token took 12.5 s), and what is past
#: this many characters names neither
MAX_SEGMENT = 4096


def _program(command: str) -> tuple[str | None, str | None]:
    """A shell command's program and target (see the module's docstring)."""
    for segment in _SEGMENTS.split(command):
        segment = segment[:MAX_SEGMENT]  # (a quote cut open reads as words split on spaces, below)
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:  # an unclosed quote: split on spaces
            words = segment.split()
        while words:
            if words[0] == "timeout":
                words = words[2:]
            elif words[0] in _PREFIXES or ("=" in words[0] and not words[0].startswith("=")):
                words = words[1:]
            else:
                break
        if not words or words[0] in _SKIPPED:
            continue
        program = _VERSION.sub("", words[0].rsplit("/", 1)[-1]) or words[0]
        args = [w for w in words[1:] if not w.startswith("-")]
        target = next((w for w in args if _PATHLIKE.search(w)), args[0] if args else None)
        return program, target
    return None, None


def _clean(target: str | None) -> str | None:
    if target is None:
        return None
    t = target.strip().strip("'\"")
    while t.startswith("./"):
        t = t[2:]
    t = t.rstrip("/") or t
    return t or None
