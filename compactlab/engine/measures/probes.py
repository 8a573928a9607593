"""Hindsight probes (#20 §1, #28): what did compaction remove that the agent later used?

Read from the transcript's own future, with no model and no judge. For each call, the **probes**
are what the reply the agent made at that call (its text and its tool inputs) took from an earlier
tool result, of six kinds:

- ``path`` (a slash between names, or a URL), ``dotted`` (module.attr, file.ext), ``identifier``
  (an underscore, a digit, a hyphen or inner capitals), ``number`` (4+ digits): distinctive
  strings whose first appearance in the transcript was in a tool result;
- ``line``: a line the reply goes to (``sed -n 'A,Bp'``, ``path:A``, a ``view_range``) within
  ``LINE_NEAR`` lines of a line number the results just before the call printed (``grep -n``,
  ``cat -n``): the agent navigates by what it read;
- ``phrase``: a quoted text of 12+ characters with a space and no distinctive string of its own
  (``'Enter a valid duration'``), copied verbatim from a recent tool result.

Not probes, because nothing was learnt from a result: a string first seen in a user prompt, in the
system prompt (also inside a longer token there: ``add_id_index`` in ``self.add_id_index``) or in
the agent's own messages (also as a part of a longer token it wrote); Python's dunder names,
builtins, keywords and standard-library modules (``sys.stdlib_module_names``: ``logging.getLogger``
is not evidence of having read a result), and the standard modules and built-ins of Elixir and
JavaScript, Phoenix's callbacks and ``phx-`` attributes; an attribute of ``self`` or ``cls`` that is
a plain word; a name of the shipped vocabulary (``common``: the public names of major frameworks,
of Python's and Elixir's standard libraries, TypeScript and the DOM, English compounds), unless the
session works on that framework's own source.

A probe is **kept** when the context sent at that call holds it anywhere: an intact tool result
that holds it, the agent's own earlier message that repeats it (masking keeps the actions), a
message a layer changed or made (a persisted preview, a placeholder, a summary) whose text
mentions it, or, last, any message's text at all, inside a longer token too (an absolute path
holds the relative one; #46 §7): a probe is lost only where what is sent does not hold it. It is **recoverable** when it is not in the context but in a persisted output whose
path the context still shows (the agent can read it again), **lost** otherwise. The ledger says
where each came from (the call and tool whose result first held it) and, when not kept, which layer
removed it and when. ``recall`` = kept / probes (1.0, with 0 probes, when there are none).

What it cannot measure: what the agent needed but never repeated (a fact that changed its mind
without a string in common), and what it would have done had the string been there (that needs a
model asked again on the compacted context).
"""

from __future__ import annotations

import builtins
import keyword
import operator
import sys
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Container, MutableSequence, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from ...plain import NamedTuple, pattern
from ..context import Context
from ...transcripts.messages import Entry, is_prompt, text_of, without_sized

#: the candidate strings of a text: runs of name, path and URL characters, every other ASCII
#: character a space (str.translate and split: two passes in C, twice as fast as a regex), then
#: without the . / : that start or end one (a sentence's full stop, a label's colon, a root /)
_SPACES = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalnum() or c in "_./:~-")})
_EDGES = "./:"
_CAMEL = pattern(r"[a-z][A-Z]")
_ALNUM = pattern(r"[A-Za-z0-9]")
#: the parts of a longer token (a name inside a dotted name or a path)
_PARTS = pattern(r"[./:]+")
#: at most this many results holding a phrase are remembered (the newest)
MAX_OCCURRENCES = 6
#: the longest text read for strings: a few hundred KB of a huge output say what it holds
MAX_SCAN = 400_000
#: the system prompt and user prompts searched for a probe inside a longer token (bounded)
MAX_PROMPT_TEXT = 4 << 20

KINDS = ("identifier", "path", "dotted", "number", "line", "phrase")

#: names any Python program shows: not evidence of having read a particular result
GENERIC = frozenset(sys.stdlib_module_names) | frozenset(dir(builtins)) | frozenset(keyword.kwlist)
#: standard-library module names that other languages use as receivers (``this.pushEvent`` in
#: JavaScript, ``socket.assigns`` in Phoenix): a dotted name they head is not generic for that
RECEIVERS = frozenset({"this", "socket", "select", "string", "array", "code", "site", "test", "types", "token",
                       "queue", "signal"})
_SELF = ("self.", "cls.")
#: the standard modules of the other languages agents write here (Elixir, JavaScript): a dotted name
#: one heads (``Map.new``, ``Enum.find``, ``JSON.stringify``) is known without a result (#46 §7)
OTHER_MODULES = frozenset({
    "Enum", "Map", "MapSet", "String", "List", "Keyword", "Kernel", "Integer", "Float", "Tuple", "IO", "File", "Path",
    "Process", "Task", "Agent", "Regex", "DateTime", "Date", "Time", "NaiveDateTime", "Stream", "System", "Application",
    "Logger", "Access", "Base", "URI", "Range", "GenServer", "Supervisor",
    "Object", "Array", "JSON", "Math", "Promise", "console", "Number", "Reflect", "Symbol", "Set", "window", "document",
})
#: their built-in functions and the frameworks' own names and callbacks (Phoenix LiveView's)
OTHER_NAMES = frozenset({"to_string", "is_nil", "is_binary", "is_list", "is_map", "is_integer", "is_atom", "LiveView",
                         "LiveViewTest", "GenServer", "handle_event", "handle_info", "handle_call", "handle_cast",
                         "handle_params", "encodeURIComponent", "addEventListener", "querySelector",
                         "querySelectorAll", "getElementById", "setTimeout", "setInterval"})

#: a quoted text of 12+ characters with a space (a ``phrase`` candidate)
_QUOTED = pattern(r"""(?:"([^"\n]{12,200})"|'([^'\n]{12,200})')""")
#: recent tool-result texts kept for phrases and line numbers: how many, and characters in all
RECENT_RESULTS, RECENT_CHARS = 64, 4 << 20

#: a reply's line references: sed -n 'A,Bp' / 'Ap', path:A, a view_range [A, B]
_LINE_REFS = pattern(r"sed\s+-n\s+['\"]?(\d{1,7})(?:,\d{1,7})?p|[\w./-]\.\w{1,8}:(\d{1,7})\b")
#: line numbers a result printed: at a line's start (cat -n, nl, numbered views) or after path: (grep -n)
_PRINTED = pattern(r"(?m)^\s{0,8}(\d{1,7})(?:[:\t|]|\s{2})|^[^\s:]{1,300}:(\d{1,7}):")
#: how far from a printed line number a reference still counts as going to it
LINE_NEAR = 30


def _scanned(text: str) -> str:
    """What of a text is read for strings: a huge one's head and tail, without sized placeholders."""
    if len(text) > MAX_SCAN:
        text = text[: MAX_SCAN // 2] + "\n" + text[-MAX_SCAN // 2:]
    return without_sized(text)


def runs(text: str) -> set[str]:
    """Every candidate string of a text as found (distinctive or not; a trailing . / : still on:
    ``trimmed`` takes it off). The native core finds them in Rust (``native/src/strings.rs``; this
    function is its reference)."""
    return _split(_scanned(text))


def _split(scanned: str) -> set[str]:
    """The runs of a text as read (``_scanned``)."""
    return set(scanned.translate(_SPACES).split())


def trimmed(found: set[str]) -> set[str]:
    return {t.strip(_EDGES) if t[-1] in _EDGES or t[0] in _EDGES else t for t in found}


class Names:
    """A name -> the frameworks it is of (a bit mask, as text), read from the sorted lines of
    ``data/vocabulary.txt`` a two-character prefix at a time, when a name of that prefix is first
    asked for (a binary search of the text finds the prefix's lines): a small replay asks of a few
    prefixes and parses a few hundred of its 45,000 lines, a long one parses them all."""

    def __init__(self, body: str) -> None:
        self._body = body
        self._parsed: dict[str, dict[str, str]] = {}

    @property
    def body(self) -> str:
        """The vocabulary's lines (``name<TAB>mask``)."""
        return self._body

    def get(self, name: str) -> str | None:
        key = name[:2]
        part = self._parsed.get(key)
        if part is None:
            start, end = self._first_from(key), self._first_from(key + "\U0010ffff")
            pairs = self._body[start:end].split()  # (name, mask, name, mask, ...)
            part = self._parsed[key] = dict(zip(pairs[::2], pairs[1::2]))
        return part.get(name)

    def __len__(self) -> int:
        return self._body.count("\n")

    def _first_from(self, s: str) -> int:
        """Where the first line whose name sorts at or after ``s`` starts."""
        body, lo, hi = self._body, 0, len(self._body)
        while lo < hi:  # lines before lo sort before s, lines from hi at or after it
            start = body.rfind("\n", 0, (lo + hi) // 2) + 1
            start = max(start, lo)
            if body[start:body.index("\t", start)] < s:
                lo = body.index("\n", start) + 1
            else:
                hi = start
        return lo


class Vocabulary(NamedTuple):
    """Names known without reading a result (``data/vocabulary.txt``, built from pinned packages by
    ``scripts/build_vocabulary.py``; #58 §1)."""

    #: a public name of a major framework, of a language's standard library, of TypeScript and the
    #: DOM, or an English compound (``real-time``) -> the frameworks it is of (a bit mask, as text)
    names: Names
    #: a top folder of a framework's source -> the framework's bit
    bit_of: dict[str, int]


@cache
def vocabulary() -> Vocabulary:
    text = (Path(__file__).parents[2] / "data" / "vocabulary.txt").read_text(encoding="utf-8")
    head, body = _split_header(text)
    bit_of = {}
    for bit, line in enumerate(ln for ln in head if ln.startswith("# framework ")):
        folders = line.split()[3]
        bit_of.update(dict.fromkeys(folders.split(",") if folders != "-" else (), 1 << bit))
    return Vocabulary(Names(body), bit_of)


def _split_header(text: str) -> tuple[list[str], str]:
    """A file's leading ``#`` lines, and the rest."""
    at = 0
    head = []
    while text.startswith("#", at):
        end = text.index("\n", at)
        head.append(text[at:end])
        at = end + 1
    return head, text[at:]


def own_frameworks(text: str, native: Any = None) -> int:
    """The frameworks whose own source ``text`` shows (a bit mask; a session working on it: their
    names are the session's, not common). ``native``: the native core, which finds a text's in Rust
    unless a character beyond ASCII stands where a match is decided (``_native.FrameworkSources``;
    ``own_sources`` is its reference)."""
    if "/" not in text:
        return 0
    v = vocabulary()
    found = _native_sources(native).found(text) if native is not None else None
    own = 0
    for folder in own_sources(text, v.bit_of) if found is None else found:
        own |= v.bit_of[folder]
    return own


#: a run of the characters a source file's path is made of here (Python's ``\w``, and ``/``)
_PATH_RUN = pattern(r"[\w/]+")
#: what ends a path that is a Python source file
_PY_END = pattern(r"\.py\b")
#: what a framework's folder may not follow (``x-django/``, ``.django/``, ``mydjango/``)
_GLUED = pattern(r"[\w.-]")


def own_sources(text: str, folders: Container[str]) -> list[str]:
    r"""The top folders (of ``folders``) of the Python files ``text`` names inside a framework's own
    tree, not an installed copy (not after ``site-packages/``, ``dist-packages/`` or
    ``node_modules/``), in order: what ``re.findall`` of
    ``(?<![\w.-])(?<!packages/)(?<!node_modules/)(FOLDER|…)/[\w/]*\.py\b`` finds, read in linear time.

    That pattern read a path of many folders' names (``django/django/…``) once per name, back to
    its end and back (70 KB took a second, 400 KB half a minute). The reading here follows from
    it: ``[\w/]*`` runs to the end of its run of path characters, so a match is in a run that ends
    in ``.py`` and a word's end, and starts at the run's first place where a folder's name and a
    ``/`` begin, after no word character, dot, dash, ``packages/`` or ``node_modules/``; it ends
    after the ``.py`` (matches do not overlap)."""
    found: list[str] = []
    at = 0
    while (run := _PATH_RUN.search(text, at)) is not None:
        start, end = run.span()
        at = end
        if not _PY_END.match(text, end):
            continue
        p = start  # (where a folder's name may begin: the run's start, or after one of its slashes)
        while (slash := text.find("/", p, end)) >= 0:
            if (text[p:slash] in folders and not (p and _GLUED.match(text, p - 1))
                    and not text.endswith("packages/", 0, p) and not text.endswith("node_modules/", 0, p)):
                found.append(text[p:slash])
                at = end + 3
                break
            p = slash + 1
    return found


#: the replies an index looks at in Python before it asks the native core, unless its judge of names
#: is made already (once a process, about 8 ms: a replay of a few calls does not pay for it)
NATIVE_REPLIES_FROM = 16


@cache
def _native_known(native: Any) -> Any:
    """The native core's judge of the names known without a result (``generic``, its reference), with
    the class of the probes it makes."""
    return native.KnownNames(GENERIC, OTHER_NAMES, RECEIVERS, OTHER_MODULES, vocabulary().names.body, Probe)


@cache
def _native_sources(native: Any) -> Any:
    """The native core's finder of the frameworks' own sources (their folders, in the pattern's order)."""
    return native.FrameworkSources(sorted(vocabulary().bit_of))


def common(t: str, own: int = 0) -> bool:
    """A name known without reading a result (#58 §1): a public name of a major framework or of
    TypeScript and the DOM (``vocabulary``: ``django.urls``, ``on_delete``, ``addEventListener``)
    unless the session works on the own source of a framework that has it (``own``), a dotted name in such a
    module or made of such names (``django.db.models.Q``, ``HTMLElement.querySelector``), an English compound
    (``real-time``, ``built-in``) or acronyms joined by a slash (``CI/CD``)."""
    v = vocabulary()

    def known(name: str) -> bool:
        of = v.names.get(name)
        return of is not None and int(of) & own == 0

    if known(t):
        return True
    if "/" in t:
        words = t.split("/")
        return len(words) <= 3 and all(w.isalpha() and w.isupper() and len(w) <= 5 for w in words)
    if "." in t:
        head = t.rpartition(".")[0]
        return known(head) or all(map(known, t.split(".")))
    return "-" in t and known(t.strip("-"))


def generic(t: str, own: int = 0) -> bool:
    """A name every Python program shows: a dunder, a builtin, a keyword, a standard-library module
    or a name in one (``os.path``, ``logging.getLogger``), ``self.name``; and the like of the other
    languages agents write here (``OTHER_MODULES``, ``OTHER_NAMES``, Phoenix's ``phx-`` attributes);
    and a name known without a result (``common``)."""
    if t in GENERIC or t in OTHER_NAMES or t.startswith("phx-") or (t.startswith("__") and t.endswith("__")):
        return True
    if common(t, own):
        return True
    if "." in t and "/" not in t:
        head, _, rest = t.partition(".")
        if (((head in GENERIC and head not in RECEIVERS) or head in OTHER_MODULES)
                and not rest.endswith(("py", "json", "txt", "md", "toml", "yaml", "yml", "cfg", "js", "ex", "exs"))):
            return True
        if t.startswith(_SELF) and (rest.isalpha() and not _CAMEL.search(rest)):
            return True
        last = t.rsplit(".", 1)[-1]
        if last.startswith("__") and last.endswith("__"):
            return True
    return False


#: the fewest characters a distinctive string has (a token, a token's part: what the index is asked
#: of; ``strings::MIN_CHARS`` on the native core)
MIN_CHARS = 4


def tokens(text: str, native: Any = None) -> set[str]:
    """The distinctive strings of a text: URLs, paths (a slash between names), dotted names
    (module.attr, file.ext), numbers of 4+ digits, and identifiers with an underscore, a digit, a
    hyphen or inner capitals (a quoted string or an error message counts by these); plain words
    and generic names (``generic``) are not distinctive. ``native``: as ``runs``'s (a name beyond
    ASCII is a plain word as ``str.isalpha`` says: the native core leaves those to this one)."""
    if native is not None and (found := native.tokens(_scanned(text))) is not None:
        out, undecided = found
        out.update(t for t in undecided if not t.strip("_-").isalpha())
        return out  # type: ignore[no-any-return]
    out = set()
    for t in trimmed(runs(text)):
        if len(t) < MIN_CHARS or not _ALNUM.search(t):  # (a redacted text's filler has no letter or digit)
            continue
        if "/" in t or "." in t:
            if ":" not in t or t.startswith(("http://", "https://")):
                out.add(t)
        elif ":" in t:
            continue
        elif not (core := t.strip("_-")).isalpha() or _CAMEL.search(core):  # (not a word in underscores)
            out.add(t)
    return out


def kind(t: str) -> str:
    """A distinctive string's kind."""
    if "/" in t:
        return "path"
    if "." in t:
        return "dotted"
    return "number" if t.isdigit() else "identifier"


def parts(strings: set[str], native: Any = None) -> set[str]:
    """The names inside longer tokens (``add_id_index`` of ``self.add_id_index``). ``native``: the
    native core, which splits them where every string has UTF-8 (this is its reference)."""
    if native is not None and (found := native.parts(strings)) is not None:
        return found  # type: ignore[no-any-return]
    out: set[str] = set()
    for t in strings:
        if "." in t or "/" in t or ":" in t:
            out.update(p for p in _PARTS.split(t) if len(p) >= MIN_CHARS)
    return out


def _texts(entry: Entry) -> list[str]:
    """A reply's text and the strings of its tool inputs."""
    content = entry.message.get("content")
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for b in content if isinstance(content, list) else ():
        if not isinstance(b, dict):
            continue
        kind_ = b.get("type")
        if kind_ == "text" and isinstance(b.get("text"), str):
            out.append(b["text"])
        elif kind_ == "tool_use":
            out += _strings(b.get("input"))
            view = b.get("input", {}).get("view_range") if isinstance(b.get("input"), dict) else None
            if isinstance(view, list) and view and type(view[0]) is int:
                out.append(f"sed -n '{view[0]}p'")  # (read as the line reference it is)
    return out


def reply_strings(entry: Entry, native: Any = None, texts: list[str] | None = None) -> set[str]:
    """What the agent produced at a call: the distinctive strings of its text and tool inputs
    (``native``: as ``tokens``'s; ``texts``: ``_texts(entry)``, where the caller has them)."""
    found: set[str] = set()
    for text in _texts(entry) if texts is None else texts:
        found |= tokens(text, native)
    return found


def phrases(texts: list[str], native: Any = None) -> set[str]:
    """The quoted texts of 12+ characters with a space and no distinctive string of their own.
    ``native``: the native core, which finds those of an ASCII text in Rust (this is its reference)."""
    out = set()
    for text in texts:
        if "'" not in text and '"' not in text:
            continue
        if native is not None and text.isascii():
            out.update(native.phrases(text))
            continue
        for m in _QUOTED.finditer(text):
            q = (m.group(1) or m.group(2)).strip()
            if len(q) >= 12 and " " in q and _prose(q) and not tokens(q, native):
                out.add(q)
    return out


def _prose(q: str) -> bool:
    """Words, not code: two or more words of letters, and letters and spaces most of the text."""
    words = [w for w in q.split() if len(w) >= 2 and w.strip(".,;:!?'").isalpha()]
    return len(words) >= 2 and sum(c.isalpha() or c == " " for c in q) >= 0.85 * len(q)


def line_refs(texts: list[str], native: Any = None) -> list[int]:
    """The lines a reply goes to (``native``: the native core, which reads an ASCII text in Rust;
    ``_LINE_REFS`` is its reference)."""
    out: list[int] = []
    for text in texts:
        if ":" in text or "sed" in text:
            found = native.line_refs(text) if native is not None else None
            out += [int(a or b) for a, b in _LINE_REFS.findall(text)] if found is None else found
    return out


def printed_lines(text: str) -> set[int]:
    return {int(a or b) for a, b in _PRINTED.findall(text[:MAX_SCAN])}


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


#: (message origin, block index) of a tool result that holds a probe; block ``REPLY``: the whole
#: of an assistant message that repeats it
Where = tuple[tuple[int, int], ...]
REPLY = -1


class Probe(NamedTuple):
    text: str
    #: where the context may hold it, newest last: tool results, and the agent's own messages
    #: (block ``REPLY``) that repeated it
    where: Where
    source_call: int  # the call whose tool result first held it (-1: unknown)
    source_tool: str
    kind: str = "identifier"


#: what a result may put before and after a string it holds (a root /, a sentence's full stop)
_HEADS = ("", "/", "./", "../")
_TAILS = ("", ".", ":", "/", "..", "...")


def _variants(s: str) -> list[str]:
    return [head + s + tail for head in _HEADS for tail in _TAILS]


class ResultStrings:
    """The strings the tool results held, as the index keeps them: a string -> the latest result
    that held it, and the first with its source (call, tool); and the strings first seen outside a
    result (``mine``: prompts, the system prompt, the agent's own), never probes. ``wanted``: the
    strings some reply holds (``wanted_strings``: trimmed, so that a string a result holds with a
    . / : before or after it stands for one of them only); only those are kept (None: every run,
    as found). The native core keeps them in Rust
    (``_native.ResultStrings``, ``native/src/strings.rs``); this class is its reference.

    A result's strings go in by set and dict operations only (no Python loop over its strings:
    that loop was most of a replay's time)."""

    def __init__(self, wanted: set[str] | None = None) -> None:
        #: a wanted string as a result may hold it (a . / : before or after it) -> the string
        self.wanted = None if wanted is None else {
            v: w for w in wanted for head in _HEADS for tail in _TAILS for v in (head + w + tail,)}
        self._keys = frozenset(self.wanted or ())
        self.mine: set[str] = set()
        self.latest: dict[str, tuple[int, int]] = {}
        self.first: dict[str, tuple[tuple[int, int], tuple[int, str]]] = {}

    def add_result(self, scanned: str, at: tuple[int, int], source: tuple[int, str]) -> bool:
        """A result's text as read (``_scanned``) at ``at`` (position, block) from ``source``: its
        strings not ``mine``. (True: the native one says False for a text without UTF-8.)"""
        self.add_strings(_split(scanned), at, source)
        return True

    def add_strings(self, found: set[str], at: tuple[int, int], source: tuple[int, str]) -> None:
        """A result's strings (its runs: ``runs``), but those shorter than any string looked up
        (``MIN_CHARS``: never one of its variants, ``held``)."""
        # (difference, not difference_update: it walks the smaller side, the result's strings)
        found = {s for s in self._of(found) if len(s) >= MIN_CHARS}.difference(self.mine)
        self.latest.update(dict.fromkeys(found, at))
        new = found.difference(self.first)
        if new:
            self.first.update(dict.fromkeys(new, (at, source)))

    def not_learnt(self, found: set[str], wanted_only: bool) -> None:
        """Strings seen outside a result: never probes, unless a result held them first.
        ``wanted_only``: the wanted ones among them (a prompt's), else all (the agent's own)."""
        self.mine |= (self._of(found) if wanted_only else found).difference(self.latest)

    def is_mine(self, s: str) -> bool:
        return s in self.mine

    def add_mine(self, s: str) -> None:
        self.mine.add(s)

    def held(self, s: str) -> tuple[Where, tuple[int, str]] | None:
        """Where the results held ``s`` (its first and latest result) and the first one's source;
        None if no result did. (A stream's results are kept as found: ``s`` is looked up with
        what a result may put around it.)"""
        latest, first = self.latest, self.first
        ref = last = None
        source = (-1, "unknown")
        for v in (s,) if self.wanted is not None else [v for v in _variants(s) if v in latest]:
            if v not in latest:
                continue
            f, src = first[v]
            if ref is None or f < ref:
                ref, source = f, src
            if last is None or latest[v] > last:
                last = latest[v]
        if ref is None or last is None:
            return None
        return ((ref, last) if ref != last else (ref,)), source

    def _of(self, strings: set[str]) -> set[str]:
        """The wanted ones among ``strings`` (all of them when nothing is wanted in particular)."""
        if self.wanted is None:
            return strings
        return {self.wanted[v] for v in strings & self._keys}  # (a set op over the smaller of the two)


#: each reply's texts (``_texts``) and distinctive strings (``reply_strings``), by its origin
Replies = dict[int, tuple[list[str], set[str]]]


class ProbeIndex:
    """Built as the raw baseline reads the messages in order: which strings first appeared in a
    tool result (the first and the latest result that held each: ``ResultStrings``), and at each
    call, the probes of its reply. ``wanted``: every string some reply holds (``wanted_strings``),
    when the transcript is loaded whole: only those are kept. ``native``: the native core
    (``compactlab/core.py``), which reads the texts and keeps the results' strings in Rust."""

    def __init__(self, system: str | None = None, wanted: set[str] | None = None, native: Any = None,
                 replies: Replies | None = None) -> None:
        self.native = native
        #: each reply's texts and strings, read already by ``wanted_strings`` (by origin): not read again
        self.replies: Replies = replies if replies is not None else {}
        self.strings: ResultStrings = ResultStrings(wanted) if native is None else native.ResultStrings(wanted)
        #: a probe's string -> the latest reply that repeated it (the context may hold it there)
        self.said: dict[str, int] = {}
        self.tool_of: dict[str, tuple[int, str]] = {}  # tool_use id -> (call, tool name)
        self.calls = 0
        self.prompts = ""  # the system prompt and user prompts (a probe inside a longer token there)
        self._in_prompts: dict[str, bool] = {}
        #: the latest tool results: (position, block, text, source (call, tool))
        self.recent: deque[tuple[int, int, str, tuple[int, str]]] = deque()
        self._recent_chars = 0
        #: the results since the previous call: (position, block, text, source (call, tool))
        self._last_results: list[tuple[int, int, str, tuple[int, str]]] = []
        #: the frameworks whose own source a result showed: their names are this session's
        self.own = 0  # (a bit mask: Vocabulary)
        self._not_learnt(system or "")

    def _not_learnt(self, text: str) -> None:
        """A prompt's (or the system prompt's) strings: seen, never a probe."""
        found = tokens(text, self.native)
        self.strings.not_learnt(found | parts(found, self.native), True)
        if len(self.prompts) < MAX_PROMPT_TEXT:
            self.prompts += "\n" + text[: MAX_PROMPT_TEXT - len(self.prompts)]
            self._in_prompts.clear()

    def add(self, pos: int, entry: Entry) -> list[Probe] | None:
        """Take the message at ``pos``; at a call, return the probes of its reply."""
        if entry.role == "assistant":
            return self._reply(pos, entry)
        if is_prompt(entry):
            self._not_learnt(text_of(entry.message))
        if not entry.results:
            return None
        content: list = entry.message["content"]  # (a message with results: a list of blocks)
        strings = self.strings
        for fact in entry.results:
            block = content[fact.block]
            source = self.tool_of.get(fact.tool_use_id, (-1, "unknown"))
            text = _result_text(block.get("content"))
            if not text:
                continue
            self._remember(pos, fact.block, text, source)
            self.own |= own_frameworks(text[:MAX_SCAN], self.native)
            scanned = _scanned(text)
            if not strings.add_result(scanned, (pos, fact.block), source):  # (no UTF-8: read here)
                strings.add_strings(_split(scanned), (pos, fact.block), source)
        return None

    def _remember(self, pos: int, block: int, text: str, source: tuple[int, str]) -> None:
        text = text[:MAX_SCAN]
        self._last_results.append((pos, block, text, source))
        self.recent.append((pos, block, text, source))
        self._recent_chars += len(text)
        while len(self.recent) > RECENT_RESULTS or self._recent_chars > RECENT_CHARS:
            self._recent_chars -= len(self.recent.popleft()[2])

    def _prompted(self, s: str) -> bool:
        answer = self._in_prompts.get(s)
        if answer is None:
            answer = self._in_prompts[s] = s in self.prompts
        return answer

    def _reply(self, pos: int, entry: Entry) -> list[Probe]:
        strings, said = self.strings, self.said
        call = self.calls
        self.calls += 1
        read = self.replies.pop(entry.origin, None)
        if read is not None:  # (``wanted_strings`` read them)
            texts, found = read
        else:
            texts = _texts(entry)  # (read once: its strings, and its phrases and lines where results are recent)
            found = reply_strings(entry, self.native, texts)
        probes = self._probes_of(found)
        if not self.recent:
            texts = []
        probes += self._phrases(texts) + self._lines(texts)
        # (a name the agent wrote inside a longer token: its own)
        strings.not_learnt(parts(found, self.native), False)
        for p in probes:  # later, the agent's own message holds it too
            if p.kind not in ("line", "phrase"):
                said[p.text] = pos
        for tid, name in zip(entry.tool_use_ids, entry.tool_names):
            self.tool_of[tid] = (call, name)
        self._last_results = []
        return sorted(probes)

    def _probes_of(self, found: set[str]) -> list[Probe]:
        """The probes among a reply's strings: each a result held, neither generic nor in a prompt;
        a string no result held is the agent's own. The native core looks where every string is
        ASCII (``ResultStrings.reply_probes``), from the reply after ``NATIVE_REPLIES_FROM`` or once
        its judge is made; this is its reference."""
        if self.native is not None and (self.calls > NATIVE_REPLIES_FROM or _native_known.cache_info().currsize):
            native_strings: Any = self.strings  # (``_native.ResultStrings``)
            made = native_strings.reply_probes(found, self.own, self.prompts, self._in_prompts, self.said,
                                               _native_known(self.native))
            if made is not None:
                return made  # type: ignore[no-any-return]
        strings, said = self.strings, self.said
        probes = []
        for s in found:
            if strings.is_mine(s):
                continue
            held = strings.held(s)
            if held is None:
                strings.add_mine(s)  # the agent's own string
            elif not generic(s, self.own) and not self._prompted(s):
                where, source = held
                if s in said:
                    where = (*where, (said[s], REPLY))
                probes.append(Probe(s, where, *source, kind(s)))
        return probes

    def _phrases(self, texts: list[str]) -> list[Probe]:
        out = []
        for q in phrases(texts, self.native):
            if self.strings.is_mine(q) or q in self.prompts:
                continue
            held = [(pos, block, source) for pos, block, text, source in self.recent if q in text]
            if not held:
                self.strings.add_mine(q)  # the agent's own words (its script may print them later)
            else:
                out.append(Probe(q, tuple((p, b) for p, b, _ in held[-MAX_OCCURRENCES:]), *held[0][2], "phrase"))
        return out

    def _lines(self, texts: list[str]) -> list[Probe]:
        refs = line_refs(texts, self.native) if self._last_results else []
        if not refs:
            return []
        printed = [(pos, block, printed_lines(text), source) for pos, block, text, source in self._last_results]
        out = []
        for a in dict.fromkeys(refs):
            for pos, block, numbers, source in printed:
                near = [n for n in numbers if abs(n - a) <= LINE_NEAR]
                if near:
                    out.append(Probe(f"line {a} (printed {min(near, key=lambda n: abs(n - a))})", ((pos, block),),
                                     *source, "line"))
                    break
        return out


def wanted_strings(entries: list[Entry], native: Any = None, replies: Replies | None = None) -> set[str]:
    """The distinctive strings of every reply of a transcript loaded whole, and their parts
    (``native``: as ``tokens``'s). ``replies``: where each reply's texts and strings are kept, for
    the index that reads the replies next (``ProbeIndex``: it reads them once, not twice)."""
    out: set[str] = set()
    for e in entries:
        if e.role == "assistant":
            texts = _texts(e)
            found = reply_strings(e, native, texts)
            if replies is not None:
                replies[e.origin] = (texts, found)
            out |= found
    return out | parts(out, native)


class ProbeOutcome(NamedTuple):
    """One probe at one call: probes.csv's row."""

    call: int
    probe: str
    kind: str
    source_call: int  # the call whose tool result first held it (-1: unknown)
    source_tool: str
    status: str  # kept, recoverable, lost
    removed_by: str = ""  # when not kept: budget (persisted), micro (placeholder), summary, snip
    removed_at: int = -1  # the call at which that layer removed it (-1: not known)

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


#: a NamedTuple made from all its values without its Python-level __new__ (17,000 outcomes a replay)
_new = tuple.__new__


class Checked(NamedTuple):
    kept: int
    recoverable: int


#: the intact tool results of a context, in order: their origins, and (origin, block, message) each
Intact = tuple[list[int], list[tuple[int, int, Entry]]]


def intact_results(entries: list[Entry]) -> Intact:
    """The tool results of ``entries`` (a context) that no layer changed, in context order."""
    found = [(e.origin, fact.block, e) for e in entries if e.results and e.origin >= 0
             for fact in e.results if fact.block not in e.changed]
    return [o for o, _, _ in found], found


def _between(p: Probe, intact: Intact, texts: dict[tuple[int, int], str]) -> bool:
    """Whether an intact tool result from the first to the latest that held ``p`` holds it (the
    index keeps those two; a copy between them can outlive both, in their own messages too).
    Called for a probe none of whose own results is intact (so none of them is among ``intact``).
    ``texts``: the run's memo of intact results' texts by (origin, block): an intact result's text
    never changes, and the next calls look at the same ones."""
    results = [o for o, b in p.where if b >= 0]
    if len(results) < 2:
        return False
    origins, found = intact
    text = p.text
    for k in range(bisect_left(origins, min(results)), bisect_right(origins, max(results))):
        origin, block, e = found[k]
        held = texts.get((origin, block))
        if held is None:
            held = texts[(origin, block)] = _result_text(e.block_content(block))
        if text in held:
            return True
    return False


def _attributed(where: Where, context: Context, made_by: dict[int, str], made_at: dict[int, int],
                cleared_at: dict[tuple[int, int], int], made: bool,
                dropped: dict[int, tuple[str, int]] | None = None) -> tuple[str, str, int]:
    """A probe not in the context: recoverable or lost, the layer that removed it and when (the
    newest of its results decides: a persisted one makes it recoverable). A message gone with a
    message made in its place is put down to the layer that made it; one a layer dropped with
    nothing in its place (``dropped``: a step's own edits) to that layer, at that call."""
    status, by, at = "lost", "", -1
    entries = context.entries
    for o, b in reversed(where):
        if b < 0:
            continue
        j = context.find_origin(o)
        if j is None:
            if not by:
                stand_in = context.made_in_gap(o)
                if stand_in is None and dropped and o in dropped:
                    by, at = dropped[o]
                    continue
                by = made_by.get(stand_in.origin, "summary") if stand_in is not None else "summary" if made else "snip"
                at = made_at.get(stand_in.origin, -1) if stand_in is not None else -1
            continue
        if "persisted-output" in _result_text(entries[j].block_content(b)):
            return "recoverable", "budget", cleared_at.get((o, b), -1)
        if not by:
            by, at = "micro", cleared_at.get((o, b), -1)
    return status, by or "snip", at


def _whole_text(e: Entry) -> str:
    """A message's compact JSON (what the last look at a probe searches)."""
    return e.json_text()


def _block_text(e: Entry, block: int) -> str:
    """The text of a message's tool result at ``block``."""
    return _result_text(e.block_content(block))


def _text(e: Entry) -> str:
    """What the check searches of a message a layer made (all of it) or changed: the agent's own
    message whole, a tool-result message's changed blocks (its intact results are looked at where
    they are: ``_between``; its prompt text never holds a probe). Read from the facts where they
    are enough: a message left unread stays so."""
    if e.origin < 0 or e.role == "assistant":
        return e.json_text()
    return "\0".join(orjson.dumps(c).decode() for c in e.changed_contents())


class ProbeMemo:
    """A run's memo of the probe check: the text of each message a layer changed or made (by the
    Entry: an Entry never changes), the last context's such texts joined (the next call's context
    mostly has the same messages)."""

    __slots__ = ("_texts", "_edited", "_joined", "results", "_whole", "_each", "native")

    def __init__(self, native: Any = None, shared: Any = None) -> None:
        #: the native core's check (``_native.RecallCheck``, its memo its own; ``shared``: the
        #: recording's messages it knows for every run, ``_native.KnownMessages``) where ``native``
        #: is the native module (``core.in_use()``); ``check`` is its reference
        self.native = None if native is None else native.RecallCheck(_whole_text, _text, _block_text, _as_sent,
                                                                      ProbeOutcome, Entry, orjson.dumps, shared)
        self._texts: dict[int, tuple[Entry, str]] = {}
        self._edited: list[Entry] = []
        self._joined = ""
        #: the text of each intact tool result looked at, by (origin, block)
        self.results: dict[tuple[int, int], str] = {}
        #: the last context whose whole text was asked for, and that text (the last look at a
        #: probe before it is lost)
        self._whole: tuple[list[Entry], str] = ([], "")
        self._each: dict[int, tuple[Entry, str]] = {}  # each message's text, by the Entry

    def whole(self, entries: list[Entry]) -> str:
        """The whole text of a context (its messages' compact JSON joined by NUL): extended where the
        context is the last one asked for with messages appended (most calls), else joined again
        from each message's text, made once a message."""
        last, text = self._whole
        n = len(last)
        if not (len(entries) >= n and all(map(operator.is_, entries[:n], last))):
            n, text = 0, ""
        if n < len(entries):
            memo = self._each
            texts = []
            for e in entries[n:]:
                held = memo.get(id(e))
                if held is None or held[0] is not e:
                    held = memo[id(e)] = (e, e.json_text())
                texts.append(held[1])
            text += "\0" + "\0".join(texts)
            if len(memo) > 2 * len(entries) + 64:  # (what is no longer in the context is let go)
                keep = {id(e) for e in entries}
                for k in [k for k in memo if k not in keep]:
                    del memo[k]
        self._whole = (list(entries), text)
        return text

    def intact(self, entries: list[Entry]) -> Intact:
        """The context's intact results (``intact_results``), letting go of the texts of those no
        longer among them once there are many."""
        intact = intact_results(entries)
        if len(self.results) > 4 * len(intact[0]) + 256:
            keep = {(o, b) for o, b, _ in intact[1]}
            self.results = {k: v for k, v in self.results.items() if k in keep}
        return intact

    def joined(self, edited: list[Entry]) -> str:
        """The texts of ``edited`` joined by NUL (which no JSON text holds raw)."""
        if len(edited) == len(self._edited) and all(map(operator.is_, edited, self._edited)):
            return self._joined
        memo, out = self._texts, []
        for e in edited:
            held = memo.get(id(e))
            if held is None or held[0] is not e:
                held = memo[id(e)] = (e, _text(e))
            out.append(held[1])
        if len(memo) > 2 * len(edited) + 64:  # (what is no longer in the context is let go)
            keep = {id(e) for e in edited}
            for k in [k for k in memo if k not in keep]:
                del memo[k]
        self._edited, self._joined = edited, "\0".join(out)
        return self._joined


def _as_sent(text: str) -> str:
    """``text`` as a message's compact JSON holds it (a phrase's quote or backslash escaped)."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return text  # (most probes: nothing JSON escapes)
    return orjson.dumps(text).decode()[1:-1]


def check_intact(probes: Sequence[Probe], context: Context, call: int,
                 ledger: MutableSequence[ProbeOutcome] | None) -> Checked:
    """``check`` of a context that is the recording's own (no layer has acted, no recorded
    compaction replayed), which it need not read: every earlier message is there unchanged, so
    every probe is kept where its first result stands, as ``check`` finds it (``check`` is the
    reference: a property test holds the two to the same runs)."""
    if ledger is not None:
        append = ledger.append
        for p in probes:
            append(_new(ProbeOutcome, (call, p.text, p.kind, p.source_call, p.source_tool, "kept", "", -1)))
    return Checked(len(probes), 0)


def check(probes: Sequence[Probe], context: Context, call: int, ledger: MutableSequence[ProbeOutcome] | None,
          env: Any = None, memo: ProbeMemo | None = None, stable: int | None = None) -> Checked:
    """How many of ``probes`` the context sent at ``call`` holds, and how many more a persisted
    output it points to holds; each probe's outcome goes to ``ledger``, a probe not kept with the
    layer that removed it and when (``env``: the run's ``RunEnv``, whose ledger's ``made_by`` and
    ``made_at`` say which layer made each message a policy made, and at which call, and
    ``cleared_at`` when a result was replaced in place; a message gone is put down to the one
    standing in its place).
    ``memo``: the run's ``ProbeMemo``, so that a message is serialised once, not at every call that
    misses a probe. ``stable``: how many of the context's first messages are at most those of the
    last one checked with ``memo`` (the lowest position a layer changed at the calls since; None:
    not known), which the native check need not read again."""
    if not probes:
        return Checked(0, 0)
    memo = memo or ProbeMemo()
    if memo.native is not None:  # (the native core's check, attribution and ledger in one crossing)
        return Checked(*memo.native.check(probes, context.entries, stable, call, ledger,
                                          env.ledger if env is not None else None))
    append = ledger.append if ledger is not None else None
    kept, missing, holds, made = _looked_for(probes, context, call, append, memo)
    if not missing:
        return Checked(kept, 0)
    done = env.ledger if env is not None else None
    made_by = done.made_by if done is not None else {}
    made_at = done.made_at if done is not None else {}
    cleared_at = done.cleared_at if done is not None else {}
    dropped = done.dropped if done is not None else {}
    recoverable = 0
    attributed: dict[Where, tuple[str, str, int]] = {}  # (probes of one call often share their results)
    for p in missing:
        if p.kind != "line" and holds(p):
            kept += 1
            if append is not None:
                append(_new(ProbeOutcome, (call, p.text, p.kind, p.source_call, p.source_tool, "kept", "", -1)))
            continue
        outcome = attributed.get(p.where)
        if outcome is None:
            outcome = attributed[p.where] = _attributed(p.where, context, made_by, made_at, cleared_at, made,
                                                        dropped)
        if outcome[0] == "recoverable":
            recoverable += 1
        if append is not None:
            append(_new(ProbeOutcome, (call, p.text, p.kind, p.source_call, p.source_tool, *outcome)))
    return Checked(kept, recoverable)


def _looked_for(probes: Sequence[Probe], context: Context, call: int, append: Any,
                memo: ProbeMemo) -> tuple[int, list[Probe], Callable[[Probe], bool], bool]:
    """The probes kept where a result that held them stands (how many, said), the others, whether
    the context holds one of those anywhere else (``_Anywhere``), and whether it has a message a
    layer made."""
    kept, missing = _where_first_held(probes, context, call, append)
    if not missing:
        return kept, missing, bool, False
    look = _Anywhere(context, memo, missing)
    return kept, missing, look.holds, look.made


def _where_first_held(probes: Sequence[Probe], context: Context, call: int, append: Any) -> tuple[int, list[Probe]]:
    """The probes an intact result that held them still holds (kept, said), and the others."""
    kept = 0
    missing = []
    entries = context.entries
    n = len(entries)
    keys = context.origin_log  # (origins by position, non-decreasing: found by bisection)
    for p in probes:
        for o, b in p.where:
            pos = bisect_left(keys, o, 0, n)
            if (pos < n and o >= 0 and (e := entries[pos]).origin == o
                    and (b not in e.changed if b >= 0 else not e.changed)):
                kept += 1
                if append is not None:
                    append(_new(ProbeOutcome, (call, p.text, p.kind, p.source_call, p.source_tool, "kept", "", -1)))
                break
        else:
            missing.append(p)
    return kept, missing


class _Anywhere:
    """Whether the context sent holds a probe anywhere else: in a message a layer changed or made,
    in a result of another occurrence, or, last, in any message's text, inside a longer token (an
    absolute path, a dotted name), a prompt or the agent's own words (#46 §7). The texts are made
    once a call, as first needed."""

    def __init__(self, context: Context, memo: ProbeMemo, missing: list[Probe]) -> None:
        self.entries, self.memo = context.entries, memo
        edited = [e for e in self.entries if e.origin < 0 or e.changed]
        self.joined = memo.joined(edited) if any(p.kind != "line" for p in missing) else ""
        self.made = any(e.origin < 0 for e in edited)
        self._intact: Intact | None = None
        self._whole: str | None = None

    def holds(self, p: Probe) -> bool:
        if "\0" not in p.text and p.text in self.joined:
            return True
        if len(p.where) > 1:
            if self._intact is None:
                self._intact = self.memo.intact(self.entries)
            if _between(p, self._intact, self.memo.results):
                return True
        if self._whole is None:
            self._whole = self.memo.whole(self.entries)
        return _as_sent(p.text) in self._whole
