"""Block helpers shared by everything, and the per-message facts computed once per message.

A message is an Anthropic Messages API dict ``{"role", "content"}`` and is never mutated once
loaded. :class:`Entry` wraps one with the facts that the layers, the invariant checker and the
size measures need (compact-JSON length, tool ids, tool-result sizes), so per-call work reads
facts instead of re-scanning content. A layer that changes a message builds a new message and a
new Entry for it (copy-on-write); everything else is shared.
"""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Any

import orjson

from ..plain import NamedTuple, pattern

Message = dict[str, Any]

#: tool_use input keys that name a file (used by the stub summarizer and retention)
FILE_KEYS = ("path", "file_path", "notebook_path")
FILE_KEY_SET = frozenset(FILE_KEYS)


def block_type(block: Any) -> str | None:
    return block.get("type") if isinstance(block, dict) else None


#: A text the recording does not hold but says the size of (a sanitised Codex log's
#: ``[REDACTED_TEXT len=N sha=…]``, an image) is kept as a short *sized placeholder*: this mark,
#: then ``[KIND len=N …]``. It counts as N characters in every size (``json_len``, ``sized_len``,
#: the content-size rule) and is cut as N characters (``cut_text``), so such a text is sized
#: without ever being built. The mark is U+FDD0, a Unicode noncharacter (reserved for a program's
#: own use, never in text people exchange): a transcript that merely quotes a placeholder is sized
#: as written.
SIZED_MARK = "\ufdd0"
_FIELDS = r"\[([A-Z][A-Z_]{0,40}) len=(\d{1,15})((?: [a-z]{1,16}=[0-9a-f]{1,128}){0,4})\]"
_SIZED = pattern(SIZED_MARK + _FIELDS)
_SIZED_BYTES = pattern(SIZED_MARK.encode() + _FIELDS.encode())
_MARK_BYTES = SIZED_MARK.encode()


def sized_placeholder(kind: str, n: int, fields: str = "") -> str:
    """The placeholder of a text of ``n`` characters that is not there (``fields``: e.g.
    ``" sha=ab12"``)."""
    return f"{SIZED_MARK}[{kind} len={n}{fields}]"


def sized_len(text: str) -> int:
    """The length of ``text`` in characters, a sized placeholder counted as its N."""
    if text.isascii() or SIZED_MARK not in text:  # (isascii is a flag: free)
        return len(text)
    return len(text) + sum([int(m[2]) - len(m[0]) for m in _SIZED.finditer(text)])


def without_sized(text: str) -> str:
    """``text`` with its sized placeholders taken out (they are not words anyone wrote)."""
    if text.isascii() or SIZED_MARK not in text:
        return text
    return _SIZED.sub(" ", text)


def cut_text(text: str, n: int, from_tail: bool = False) -> str:
    """The first (or last) ``n`` characters of ``text`` as ``sized_len`` counts them: a sized
    placeholder that does not fit whole is cut to one of the characters that fit."""
    if text.isascii() or SIZED_MARK not in text:
        return (text[-n:] if n else "") if from_tail else text[:n]
    pieces: list[str | re.Match[str]] = []  # literal texts and placeholders, in order
    at = 0
    for m in _SIZED.finditer(text):
        pieces += [text[at:m.start()], m]
        at = m.end()
    pieces.append(text[at:])
    kept: list[str] = []
    left = n
    for piece in (reversed(pieces) if from_tail else pieces):
        if left <= 0:
            break
        if isinstance(piece, str):
            part = (piece[-left:] if from_tail else piece[:left]) if len(piece) > left else piece
            left -= len(part)
        else:
            size = int(piece[2])
            part = piece[0] if size <= left else sized_placeholder(piece[1], left, piece[3])
            left -= min(size, left)
        kept.append(part)
    return "".join(reversed(kept) if from_tail else kept)


def json_len(value: Any) -> int:
    """Length in characters of the compact JSON text of ``value`` (as orjson writes it), a sized
    placeholder counted as its N."""
    raw = orjson.dumps(value)
    if raw.isascii():
        return len(raw)
    n = len(raw.decode("utf-8"))
    if _MARK_BYTES in raw:  # (the mark is 3 bytes, one character; the rest of a placeholder ASCII)
        n += sum([int(m[2]) - (len(m[0]) - 2) for m in _SIZED_BYTES.finditer(raw)])
    return n


def content_size(content: Any) -> int:
    """SPEC §4 content-size rule for a tool_result's content.

    A string's length; for a list of blocks the sum of the text lengths of its text blocks plus
    the compact-JSON length of every other block.
    """
    if content is None:
        return 0
    if isinstance(content, str):
        return sized_len(content)
    if isinstance(content, list):
        total = 0
        for block in content:
            if block_type(block) == "text" and isinstance(block.get("text"), str):
                total += sized_len(block["text"])
            else:
                total += json_len(block)
        return total
    return json_len(content)


def content_text(content: Any) -> str:
    """The text a layer persists or previews: the string, or text blocks joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if block_type(block) == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(orjson.dumps(block).decode("utf-8"))
        return "\n".join(parts)
    return orjson.dumps(content).decode("utf-8")


def text_of(message: Message) -> str:
    """Plain text of a message's string content or text blocks (tool results excluded)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"] for b in content if block_type(b) == "text" and isinstance(b.get("text"), str)
        )
    return ""


def is_prompt(entry: "Entry") -> bool:
    """A user prompt of the transcript: a user message with text (not only tool results), not one a
    policy or a recorded compaction made."""
    return entry.role == "user" and entry.has_text and entry.origin >= 0


def files_in_input(tool_input: Any) -> tuple[str, ...]:
    """The files a tool input names (FILE_KEYS), in key order."""
    if type(tool_input) is not dict or FILE_KEY_SET.isdisjoint(tool_input):
        return ()
    return tuple([v for k in FILE_KEYS if type(v := tool_input.get(k)) is str and v])


def add_tool_names(names: dict[str, str], entry: "Entry") -> None:
    """Record the tool name of every tool_use of an assistant message (tool_use id -> name)."""
    if entry.tool_use_ids:
        names.update(zip(entry.tool_use_ids, entry.tool_names))


class ResultFact(NamedTuple):
    """One tool_result block of a user message."""

    block: int  # index in the message's content list
    tool_use_id: str
    size: int  # content-size rule
    is_str: bool  # content is a plain string (or absent)
    is_error: bool
    json_size: int = -1  # compact-JSON length of the content; -1: not measured (the message has it)


#: which key each known block type must carry as a string (SPEC §2 bad input)
REQUIRED = {"tool_use": ("id", "name"), "tool_result": ("tool_use_id",), "text": ("text",)}
#: the nesting level of a block: the line's object (1), its "content" list (2), the block (3)
BLOCK_DEPTH = 3
MAX_DEPTH = 200


NO_IDS: frozenset[str] = frozenset()
_tool_use_id = itemgetter(1)  # of a ResultFact


class Entry:
    """A message plus facts computed once. Treated as immutable: a change makes a new Entry.

    A plain class with slots rather than a frozen dataclass: one is built per message loaded and
    per message a layer changes, and a frozen dataclass's __init__ costs several times more.
    (The read-ahead feed's entries leave the message where it was read until something reads
    it: ``feeds.read_ahead.LazyEntry``.)
    """

    __slots__ = ("message", "chars", "role", "origin", "tool_use_ids", "tool_names", "use_files", "results",
                 "misplaced_results", "empty", "has_text", "_use_set", "_result_set", "changed")

    def __init__(self, message: Message, chars: int, role: str, origin: int, tool_use_ids: tuple[str, ...],
                 tool_names: tuple[str, ...], use_files: tuple[tuple[str, ...], ...],
                 results: tuple[ResultFact, ...], misplaced_results: tuple[str, ...], empty: bool, has_text: bool,
                 use_set: frozenset[str] | None = None, result_set: frozenset[str] | None = None,
                 changed: frozenset[int] = frozenset()) -> None:
        self.message = message
        self.chars = chars  # compact JSON length of the message
        self.role = role
        self.origin = origin  # index in the transcript's messages; negative for messages a policy made
        self.tool_use_ids = tool_use_ids  # of an assistant message's tool_use blocks, in order
        self.tool_names = tool_names  # their tool names
        self.use_files = use_files  # the files each one's input names (FILE_KEYS)
        self.results = results
        self.misplaced_results = misplaced_results  # ids of tool_result blocks after a non-tool_result block
        self.empty = empty
        self.has_text = has_text  # text_of(message) has more than whitespace
        # (the id sets are made when first read, None until then: most messages' never are, the
        # native core checking pairings from the tuples)
        self._use_set = use_set
        self._result_set = result_set
        #: the content blocks that are no longer the transcript's own (retention, SPEC §7)
        self.changed = changed

    def __repr__(self) -> str:
        return f"Entry(origin={self.origin}, role={self.role!r}, chars={self.chars})"

    @property
    def use_set(self) -> frozenset[str]:
        """``tool_use_ids`` as a set (the sets of messages with none shared)."""
        made = self._use_set
        if made is None:
            made = self._use_set = frozenset(self.tool_use_ids) if self.tool_use_ids else NO_IDS
        return made

    @property
    def result_set(self) -> frozenset[str]:
        """The tool_use ids of ``results`` as a set (the sets of messages with none shared)."""
        made = self._result_set
        if made is None:
            made = self._result_set = frozenset(map(_tool_use_id, self.results)) if self.results else NO_IDS
        return made

    @property
    def has_tool_use(self) -> bool:
        return bool(self.tool_use_ids)

    @property
    def is_tool_result_message(self) -> bool:
        return bool(self.results)

    def with_message(self, message: Message) -> "Entry":
        """The copy-on-write step: a changed message keeps its origin, facts are recomputed, and
        the blocks it does not share with this one count as changed."""
        entry = make_entry(message, self.origin)
        old, new = self.message.get("content"), message.get("content")
        if type(old) is list:
            same = new if type(new) is list else ()
            entry.changed = self.changed.union(
                i for i in range(len(old)) if i >= len(same) or same[i] is not old[i])
        return entry

    def json_text(self) -> str:
        """The message's compact JSON, as orjson writes it (what recall's last look searches)."""
        return orjson.dumps(self.message).decode()

    def changed_contents(self) -> list[Any]:
        """What now stands in the blocks a layer changed, in block order: a tool result's content,
        or the whole block."""
        blocks = self.message["content"]
        return [block["content"] if type(block) is dict and block.get("type") == "tool_result" and "content" in block
                else block for block in (blocks[b] for b in sorted(self.changed))]

    def block_content(self, block: int) -> Any:
        """The content of the tool_result block at ``block`` (None if it has none)."""
        return self.message["content"][block].get("content")

    def with_result_content(self, k: int, new_content: Any) -> "Entry":
        """A copy whose k-th tool_result has ``new_content``, its facts updated rather than
        recomputed: the length by difference, the old content's measured when it was read (its
        ``json_size``, as the native reader reads every line) or else on whichever is shorter,
        the new message or the old content."""
        fact = self.results[k]
        content = list(self.message["content"])
        old = content[fact.block]
        content[fact.block] = {**old, "content": new_content}
        message = {**self.message, "content": content}
        if "content" not in old:
            return self.with_message(message)  # (counts block k as changed: a new dict)
        new_json = -1
        if fact.json_size >= 0:
            new_json = json_len(new_content)
            chars = self.chars - fact.json_size + new_json
        elif self.chars - fact.size < fact.size:
            chars = json_len(message)
        else:
            chars = self.chars - json_len(old["content"]) + json_len(new_content)
        return Entry(message, chars, self.role, self.origin, self.tool_use_ids, self.tool_names, self.use_files,
                     self.results_with(k, new_content, new_json), self.misplaced_results, self.empty,
                     self.has_text, self._use_set, self._result_set, self.changed | {fact.block})

    def results_with(self, k: int, new_content: Any, json_size: int) -> tuple[ResultFact, ...]:
        """The result facts with the k-th one's content replaced (``json_size``: its measured JSON
        length, -1 when the message is at hand to measure)."""
        fact = self.results[k]
        is_str = type(new_content) is str
        size = sized_len(new_content) if is_str else content_size(new_content)
        results = list(self.results)
        results[k] = ResultFact(fact.block, fact.tool_use_id, size, is_str, fact.is_error, json_size)
        return tuple(results)


def _too_deep(value: Any, depth: int) -> bool:
    """Whether ``value`` (at nesting level ``depth``) holds containers deeper than MAX_DEPTH."""
    if depth > MAX_DEPTH:
        return True
    if type(value) is dict:
        for v in value.values():  # the usual tool input: flat, decided in one pass
            if type(v) is dict or type(v) is list:
                break
        else:
            return False
        children = [v for v in value.values() if type(v) is dict or type(v) is list]
    elif type(value) is list:
        children = [v for v in value if type(v) is dict or type(v) is list]
    else:
        return False
    return any(_too_deep(v, depth + 1) for v in children)  # flat containers stop here, cheaply


def build_entry(message: Message, origin: int, check: bool = False, facts: bool = True,
                measure: bool = False) -> Entry | str | None:
    """The Entry of a message; with ``check``, the reason it is not a usable API message instead.
    ``facts=False`` only checks (None when the message is usable), for loaders that rebuild the
    message before making its Entry. ``measure`` adds each tool result's ``json_size``, for an
    Entry that will not keep its message.

    One pass over the blocks both validates (SPEC §2 bad input: known block shapes, nesting
    deeper than 200 levels) and collects the facts. This runs once per line loaded: the common
    blocks take the shortest paths.
    """
    role = message.get("role")
    content = message.get("content")
    if check and role not in ROLES:  # (a tuple: a role of any type compares, hashable or not)
        return f"role must be \"user\" or \"assistant\", not {orjson.dumps(role).decode()[:40]}"
    if type(content) is str:
        walked = _NO_BLOCKS
        empty = not content
        has_text = not empty and not content.isspace()
    elif type(content) is list:
        found = _walk_blocks(content, role, check, measure)
        if isinstance(found, str):
            return found
        walked, empty, has_text = found, not content, found.has_text
    else:
        if check:
            return "content is neither a string nor a list"
        walked, empty, has_text = _NO_BLOCKS, not content, False
    use_ids, names, use_files, results, result_ids, misplaced = (
        walked.use_ids, walked.names, walked.use_files, walked.results, walked.result_ids, walked.misplaced)
    if not facts:
        return None
    chars = _measured(message, content, results) if measure and results else json_len(message)
    return Entry(message, chars, role if type(role) is str else "", origin, tuple(use_ids),
                 tuple(names), tuple(use_files), tuple(results), tuple(misplaced), empty, has_text, frozenset(use_ids),
                 frozenset(result_ids))


#: the roles of a usable API message
ROLES = ("user", "assistant")


class _Blocks:
    """What a message's list of blocks holds: its tool calls, its results, its text."""

    __slots__ = ("use_ids", "names", "use_files", "results", "result_ids", "misplaced", "has_text")

    def __init__(self) -> None:
        self.use_ids: list[str] = []
        self.names: list[str] = []
        self.use_files: list[tuple[str, ...]] = []
        self.results: list[ResultFact] = []
        self.result_ids: list[str] = []
        self.misplaced: list[str] = []  # results after another block
        self.has_text = False


_NO_BLOCKS = _Blocks()


def _walk_blocks(content: list[Any], role: Any, check: bool, measure: bool) -> _Blocks | str:
    """One pass over a message's blocks: their facts, or with ``check`` why one is not usable."""
    out = _Blocks()
    seen_other = False
    is_user = role == "user"
    for i, b in enumerate(content):
        if type(b) is not dict:
            if check:
                return _not_a_block(b, i)
            seen_other = True
            continue
        kind = b.get("type")
        if kind == "tool_result" and is_user:
            fact = _result_fact(b, i, check, measure)
            if isinstance(fact, str):
                return fact
            out.results.append(fact)
            out.result_ids.append(fact.tool_use_id)
            if seen_other:
                out.misplaced.append(fact.tool_use_id)
            continue
        seen_other = True
        if kind == "text":
            text = b.get("text")
            if type(text) is not str:
                if check:
                    return f"text block {i} has no string \"text\""
            else:
                out.has_text = out.has_text or _is_text(text)
        elif kind == "tool_use":
            if check and (problem := _tool_use_problem(b, i)) is not None:
                return problem
            if role == "assistant":
                _add_use(b, out.use_ids, out.names, out.use_files)
        elif check and (problem := _other_block_problem(b, kind, i)) is not None:
            return problem
    return out


def _add_use(b: dict[str, Any], use_ids: list[str], names: list[str], use_files: list[tuple[str, ...]]) -> None:
    """An assistant's tool_use block: its id, its tool's name, the files its input names."""
    use_ids.append(b["id"])
    names.append(b.get("name", ""))
    use_files.append(files_in_input(b.get("input")))


def _is_text(text: str) -> bool:
    return bool(text) and not text.isspace()


def _result_fact(b: dict[str, Any], i: int, check: bool, measure: bool) -> ResultFact | str:
    """A tool_result block's facts (``measure``: with its content's JSON length), or with ``check``
    why it is not a usable one."""
    tid = b.get("tool_use_id")
    c = b.get("content")
    if type(tid) is not str:
        if check:
            return f"tool_result block {i} has no string \"tool_use_id\""
        tid = str(tid)  # (a message checked before: never here)
    if check and type(c) is list and _too_deep(c, BLOCK_DEPTH + 1):
        return f"nesting deeper than {MAX_DEPTH} levels"
    measured = json_len(c) if measure and "content" in b else -1
    if c is None or type(c) is str:
        size = (len(c) if c.isascii() else sized_len(c)) if c else 0  # (the common case inline)
        return ResultFact(i, tid, size, True, bool(b.get("is_error")), measured)
    return ResultFact(i, tid, content_size(c), False, bool(b.get("is_error")), measured)


def _tool_use_problem(b: dict, i: int) -> str | None:
    for key in ("id", "name"):
        if type(b.get(key)) is not str:
            return f"tool_use block {i} has no string \"{key}\""
    return f"nesting deeper than {MAX_DEPTH} levels" if _too_deep(b.get("input"), BLOCK_DEPTH + 1) else None


def _not_a_block(b: Any, i: int) -> str:
    if type(b) is list and _too_deep(b, BLOCK_DEPTH):
        return f"nesting deeper than {MAX_DEPTH} levels"
    return f"content block {i} is not an object"


def _other_block_problem(b: dict, kind: Any, i: int) -> str | None:
    """What makes a block of another kind than text, tool_use or a user's tool_result unusable."""
    if type(kind) is str and kind in REQUIRED:  # a tool_result outside a user message: its shape still counts
        for key in REQUIRED[kind]:
            if type(b.get(key)) is not str:
                return f"{kind} block {i} has no string \"{key}\""
    return f"nesting deeper than {MAX_DEPTH} levels" if _too_deep(b, BLOCK_DEPTH) else None


def _measured(message: Message, content: Any, results: list[ResultFact]) -> int:
    """A message's JSON length, its results' contents measured already: the rest measured with each
    of them null (JSON length adds up), rather than serialising every content twice."""
    skeleton = list(content) if type(content) is list else []  # (results come from a list)
    chars = 0
    for f in results:
        if f.json_size >= 0:
            skeleton[f.block] = {**skeleton[f.block], "content": None}
            chars += f.json_size - 4  # len("null")
    return chars + json_len({**message, "content": skeleton})


def make_entry(message: Message, origin: int) -> Entry:
    entry = build_entry(message, origin)
    assert isinstance(entry, Entry)
    return entry
