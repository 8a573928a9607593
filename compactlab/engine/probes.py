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
from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

from .context import Context
from ..transcripts.messages import Entry, is_prompt, text_of

#: the candidate strings of a text: runs of name, path and URL characters, every other ASCII
#: character a space (str.translate and split: two passes in C, twice as fast as a regex), then
#: without the . / : that start or end one (a sentence's full stop, a label's colon, a root /)
_SPACES = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalnum() or c in "_./:~-")})
_EDGES = "./:"
_CAMEL = re.compile(r"[a-z][A-Z]")
#: at most this many occurrences of a string are remembered (the newest): enough to find a copy
#: a policy kept, bounded on huge sessions
MAX_OCCURRENCES = 6
#: the longest text read for strings: a few hundred KB of a huge output say what it holds
MAX_SCAN = 400_000


def runs(text: str) -> set[str]:
    """Every candidate string of a text as found (distinctive or not; a trailing . / : still on:
    ``trimmed`` takes it off)."""
    if len(text) > MAX_SCAN:
        text = text[: MAX_SCAN // 2] + "\n" + text[-MAX_SCAN // 2:]
    return set(text.translate(_SPACES).split())


def trimmed(found: set[str]) -> set[str]:
    return {t.strip(_EDGES) if t[-1] in _EDGES or t[0] in _EDGES else t for t in found}


def tokens(text: str) -> set[str]:
    """The distinctive strings of a text: URLs, paths (a slash between names), dotted names
    (module.attr, file.ext), numbers of 4+ digits, and identifiers with an underscore, a digit, a
    hyphen or inner capitals (a quoted string or an error message counts by these); plain words
    are not distinctive."""
    out = set()
    for t in trimmed(runs(text)):
        if len(t) < 4:
            continue
        if "/" in t or "." in t:
            if ":" not in t or t.startswith(("http://", "https://")):
                out.add(t)
        elif ":" in t:
            continue
        elif not t.isalpha() or _CAMEL.search(t):
            out.add(t)
    return out


def reply_strings(entry: Entry) -> set[str]:
    """What the agent produced at a call: the distinctive strings of its text and tool inputs."""
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
                found |= tokens(value)
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


#: what ``ProbeIndex.seen`` answers for a string it has not seen (compared by identity)
_UNSEEN: list[tuple[int, int]] = []


class ProbeIndex:
    """Built as the raw baseline reads the messages in order: which strings first appeared in a
    tool result (and where), and at each call, the probes of its reply.

    ``wanted``: every string some reply holds (``wanted_strings``), when the transcript is loaded
    whole: only those are indexed, which is most of the cost saved (a stream indexes every one)."""

    def __init__(self, system: str | None = None, wanted: set[str] | None = None) -> None:
        #: a wanted string as a result may hold it (a . / : before or after it) -> the string
        self.wanted = None if wanted is None else {
            v: w for w in wanted for head in ("", "/", "./", "../") for tail in ("", ".", ":", "/", "..", "...")
            for v in (head + w + tail,)}
        self._keys = frozenset(self.wanted or ())
        #: a string's tool-result occurrences; None: first seen elsewhere (never a probe)
        self.seen: dict[str, list[tuple[int, int]] | None] = dict.fromkeys(self._of(tokens(system or "")))
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
                where = seen.get(s, _UNSEEN)
                if where is _UNSEEN:
                    seen[s] = None  # the agent's own string
                elif where:
                    probes.append(Probe(s, tuple(where), *self.first[s]))
            for tid, name in zip(entry.tool_use_ids, entry.tool_names):
                self.tool_of[tid] = (call, name)
            return sorted(probes)
        if is_prompt(entry):
            for s in self._of(tokens(text_of(entry.message))):
                if seen.get(s, _UNSEEN) is _UNSEEN:
                    seen[s] = None
        content: list = entry.message["content"]  # (a message with results: a list of blocks)
        for fact in entry.results:
            block = content[fact.block]
            ref = (pos, fact.block)
            source = self.tool_of.get(fact.tool_use_id, (-1, "unknown"))
            found = runs(_result_text(block.get("content")))
            for s in (trimmed(found) if self.wanted is None else self._of(found)):
                where = seen.get(s, _UNSEEN)
                if where is _UNSEEN:
                    seen[s] = [ref]
                    self.first[s] = source
                elif where is not None:
                    where.append(ref)
                    if len(where) > MAX_OCCURRENCES:
                        del where[0]
        return None

    def _of(self, strings: set[str]) -> set[str]:
        """The wanted ones among ``strings`` (all of them when nothing is wanted in particular)."""
        if self.wanted is None:
            return strings
        return {self.wanted[v] for v in strings & self._keys}  # (a set op over the smaller of the two)


def wanted_strings(entries: list[Entry]) -> set[str]:
    """The distinctive strings of every reply of a transcript loaded whole."""
    out: set[str] = set()
    for e in entries:
        if e.role == "assistant":
            out |= reply_strings(e)
    return out


class LostProbe(NamedTuple):
    call: int
    probe: str
    source_call: int  # the call whose tool result first held it (-1: unknown)
    source_tool: str
    removed_by: str  # budget (persisted), micro (placeholder), summary, snip
    removed_at: int = -1  # the call at which that layer removed it (-1: not known)

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


def check(probes: Sequence[Probe], context: Context, call: int, lost: list[LostProbe] | None,
          env: Any = None) -> int:
    """How many of ``probes`` the context sent at ``call`` holds; the lost ones go to ``lost``,
    each with the layer that removed it and when (``env``: the run's ``RunEnv``, whose
    ``made_by``/``made_at`` say which layer made each message a policy made, and at which call,
    and ``cleared_at`` when a result was replaced in place; a message gone is put down to the one
    standing in its place)."""
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
    made_by = env.made_by if env is not None else {}
    made_at = env.made_at if env is not None else {}
    cleared_at = env.cleared_at if env is not None else {}
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
                stand_in = context.made_in_gap(o)
                by = made_by.get(stand_in.origin, "summary") if stand_in is not None else "summary" if made else "snip"
                at = made_at.get(stand_in.origin, -1) if stand_in is not None else -1
            else:
                block = context.entries[j].message["content"][b]
                by = "budget" if "persisted-output" in _result_text(block.get("content")) else "micro"
                at = cleared_at.get((o, b), -1)
            lost.append(LostProbe(call, p.text, p.source_call, p.source_tool, by, at))
    return kept
