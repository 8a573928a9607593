"""Hindsight probes (#20 §1): what did compaction remove that the agent later used?

Read from the transcript's own future, with no model and no judge. For each call, the **probes**
are the distinctive strings of the reply the agent made at that call (its text and its tool
inputs: paths, dotted names, identifiers with an underscore, a digit or inner capitals, numbers of
4+ digits, URLs, quoted strings) whose first appearance in the transcript was in an earlier tool
result: evidence that the agent used that result. Strings first seen in a user prompt, in the
system prompt or in the agent's own messages are not probes (nothing was learnt from a result).

A probe is **kept** when the context sent at that call still holds it: an intact tool result that
contains it, or a message a layer changed or made (a persisted preview, a placeholder, a summary)
whose text mentions it. It is **lost** otherwise; the ledger says where it came from (the call and
tool whose result first held it) and which layer removed it. ``recall`` = kept / probes (1.0, with
0 probes, when there are none).

What it cannot measure: what the agent needed but never repeated (a fact that changed its mind
without a string in common), and what it would have done had the string been there; a live
next-step probe (ask the model again on the compacted context) is future work.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import orjson

from .context import Context
from .messages import Entry, is_prompt, text_of

#: the candidate strings of a text: runs of name, path and URL characters (one fast C pass; the
#: distinctive ones are picked from the distinct runs, below)
_RUN = re.compile(r"[\w./:~-]{4,}")
_QUOTED = re.compile(r""""([^"\n]{4,80})"|'([^'\n]{4,80})'""")
_CAMEL = re.compile(r"[a-z][A-Z]")
_STRIP = "./:~-"
#: at most this many occurrences of a string are remembered (the newest): enough to find a copy
#: a policy kept, bounded on huge sessions
MAX_OCCURRENCES = 6
#: the longest text read for strings: a few hundred KB of a huge output say what it holds
MAX_SCAN = 400_000


def tokens(text: str) -> set[str]:
    """The distinctive strings of a text: URLs, paths (a slash between names), dotted names
    (module.attr, file.ext), numbers of 4+ digits, and identifiers with an underscore, a digit or
    inner capitals; plain words are not distinctive."""
    if len(text) > MAX_SCAN:
        text = text[: MAX_SCAN // 2] + "\n" + text[-MAX_SCAN // 2:]
    out = set()
    for run in set(_RUN.findall(text)):
        t = run.strip(_STRIP) if run[-1] in _STRIP or run[0] in _STRIP else run
        if len(t) < 4:
            continue
        if "/" in t or "." in t:
            if ":" not in t or t.startswith(("http://", "https://")):
                out.add(t)
        elif ":" in t:
            continue
        elif t.isdigit() or "_" in t or _CAMEL.search(t) or (not t.isalpha() and not t.isdigit()):
            out.add(t)
    return out


def _quoted(text: str) -> set[str]:
    return {a or b for a, b in _QUOTED.findall(text)}


def reply_strings(entry: Entry) -> set[str]:
    """What the agent produced at a call: the strings of its text and tool inputs (quoted ones too)."""
    content = entry.message.get("content")
    found: set[str] = set()
    if isinstance(content, str):
        return tokens(content)
    for b in content if isinstance(content, list) else ():
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "text" and isinstance(b.get("text"), str):
            found |= tokens(b["text"])
        elif kind == "tool_use":
            for value in _strings(b.get("input")):
                found |= tokens(value) | _quoted(value)
    return found


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


class Probe(NamedTuple):
    text: str
    #: (message origin, block index) of the tool results that held it, newest last
    where: tuple[tuple[int, int], ...]
    source_call: int  # the call whose tool result first held it (-1: unknown)
    source_tool: str


class ProbeIndex:
    """Built as the raw baseline reads the messages in order: which strings first appeared in a
    tool result (and where), and at each call, the probes of its reply."""

    def __init__(self, system: str | None = None) -> None:
        #: a string's tool-result occurrences; None: first seen elsewhere (never a probe)
        self.seen: dict[str, list[tuple[int, int]] | None] = dict.fromkeys(tokens(system or ""))
        self.first: dict[str, tuple[int, str]] = {}  # a string -> (call, tool) of the result it came from
        self.tool_of: dict[str, tuple[int, str]] = {}  # tool_use id -> (call, tool name)
        self.calls = 0

    def add(self, pos: int, entry: Entry) -> list[Probe] | None:
        """Take the message at ``pos``; at a call, return the probes of its reply."""
        seen = self.seen
        if entry.role == "assistant":
            call = self.calls
            self.calls += 1
            probes = []
            for s in reply_strings(entry):
                where = seen.get(s, False)
                if where is False:
                    seen[s] = None  # the agent's own string
                elif where:
                    probes.append(Probe(s, tuple(where), *self.first[s]))
            for tid, name in zip(entry.tool_use_ids, entry.tool_names):
                self.tool_of[tid] = (call, name)
            return sorted(probes)
        if is_prompt(entry):
            for s in tokens(text_of(entry.message)):
                if seen.get(s, False) is False:
                    seen[s] = None
        content = entry.message.get("content")
        for fact in entry.results:
            block = content[fact.block]
            ref = (pos, fact.block)
            source = self.tool_of.get(fact.tool_use_id, (-1, "unknown"))
            for s in tokens(_result_text(block.get("content"))):
                where = seen.get(s, False)
                if where is False:
                    seen[s] = [ref]
                    self.first[s] = source
                elif where is not None:
                    where.append(ref)
                    if len(where) > MAX_OCCURRENCES:
                        del where[0]
        return None


class LostProbe(NamedTuple):
    call: int
    probe: str
    source_call: int  # the call whose tool result first held it (-1: unknown)
    source_tool: str
    removed_by: str  # budget (persisted), micro (placeholder), summary, snip

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


def check(probes: list[Probe], context: Context, call: int, lost: list[LostProbe] | None) -> int:
    """How many of ``probes`` the context sent at ``call`` holds; the lost ones go to ``lost``."""
    if not probes:
        return 0
    kept, missing = 0, []
    for p in probes:
        if any((j := context.find_origin(o)) is not None and b not in context.entries[j].changed for o, b in p.where):
            kept += 1
        else:
            missing.append(p)
    if not missing:
        return kept
    edited = [e for e in context.entries if e.origin < 0 or e.changed]
    texts = [orjson.dumps(e.message).decode() for e in edited]
    made = any(e.origin < 0 for e in edited)
    for p in missing:
        if any(p.text in t for t in texts):
            kept += 1
        elif lost is not None:
            o, b = p.where[-1]
            j = context.find_origin(o)
            if j is None:
                by = "summary" if made else "snip"
            else:
                block = context.entries[j].message["content"][b]
                by = "budget" if "persisted-output" in _result_text(block.get("content")) else "micro"
            lost.append(LostProbe(call, p.text, p.source_call, p.source_tool, by))
    return kept
