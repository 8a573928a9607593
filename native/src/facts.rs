//! A message's facts read from its JSONL line (#59, "parsing into facts"): what
//! `transcripts/messages.py`'s `build_entry` computes from the parsed message, computed here from
//! the line's bytes, without making a Python object of it.
//!
//! Only the usual line is read here: a JSON object whose keys are exactly `role` (`"user"` or
//! `"assistant"`) and `content` (a string or a list of blocks), every block one `build_entry`
//! accepts. Anything else gives `None` and the caller's Python reads the line as before (and says
//! what is wrong with it): a line that is not strict JSON as `orjson` reads it, a float or an
//! integer `orjson` would not read back as it is written (beyond 64 bits, `-0`), a key given twice,
//! a lone surrogate, nesting deeper than `MAX_DEPTH`, a sized placeholder's mark, a block of a
//! shape `build_entry` would refuse or that Python's rules decide. So what is read here is read
//! exactly as Python reads it, or not at all; the differential tests hold this to `build_entry` on
//! every shared recording and on generated lines.
//!
//! The sizes are `orjson`'s: the compact JSON text's length in characters (`json_len`: `"`, `\`
//! and the short escapes `\b \t \n \f \r` as two characters, other control characters as six,
//! everything else as one), and a tool result's content size by SPEC §4's rule (a string's
//! characters; a list's text blocks' characters and every other block's JSON length).

use std::borrow::Cow;
use std::fmt::Write;

use crate::strings::wide_space;

/// Deeper nesting is left to Python (its own limit is 200 levels).
const MAX_DEPTH: usize = 100;
/// The files a tool input names (`messages.FILE_KEYS`), in that order.
const FILE_KEYS: [&str; 3] = ["path", "file_path", "notebook_path"];
/// The sized placeholder's mark, U+FDD0 (`messages.SIZED_MARK`): a string holding it is Python's.
pub(crate) const MARK: char = '\u{fdd0}';
/// The key of a line `compactlab convert` wrote for a compaction the recording made
/// (`writer.COMPACTION_KEY`): Python reads it.
const COMPACTION_KEY: &str = "recorded_compaction";
/// The key of what `compactlab convert` kept of what the recording said of itself, on its first
/// reply (`writer.METADATA_KEY`): Python reads that reply's members.
const METADATA_KEY: &str = "recorded_metadata";

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// A tool_result block of a user message (`messages.ResultFact`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultFact {
    pub block: usize,
    pub tool_use_id: String,
    pub size: usize,
    pub is_str: bool,
    pub is_error: bool,
    /// the content's compact-JSON length; -1: the block has no content
    pub json_size: i64,
}

/// A tool_use block of an assistant message: its id, its tool's name, the files its input names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolUse {
    pub id: String,
    pub name: String,
    pub files: Vec<String>,
}

/// What `build_entry` knows of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub chars: usize,
    pub role: Role,
    pub uses: Vec<ToolUse>,
    pub results: Vec<ResultFact>,
    /// the ids of tool results after another block
    pub misplaced: Vec<String>,
    pub empty: bool,
    pub has_text: bool,
}

/// The facts of a message line or of a reply recorded with its other keys (an API response
/// object: `usage`, `model`, `id`, `stop_reason`, a time...), and where those other members stand
/// on the line (each key to the end of its value, in the line's order): `None` where Python reads
/// the line. Without `replies`, a line with another key is Python's. Another member's value is
/// checked as JSON only (a float is fine there: Python reads those members), and a line that
/// records a compaction (`COMPACTION_KEY`) is Python's. `measure`: each tool result's
/// `json_size` too (else -1, as `build_entry` leaves it).
pub fn line_facts(
    line: &[u8],
    measure: bool,
    replies: bool,
) -> Option<(Facts, Vec<(usize, usize)>)> {
    line_facts_placed(line, measure, replies).map(|(facts, others, _)| (facts, others))
}

/// A line's facts, where its other members stand (each key to the end of its value) and where
/// each tool result's content stands (`Span`, in block order).
pub type FactsPlaced = (Facts, Vec<(usize, usize)>, Vec<Span>);

/// `line_facts` with where each tool result's content stands on the line.
pub fn line_facts_placed(line: &[u8], measure: bool, replies: bool) -> Option<FactsPlaced> {
    let (mut facts, others, spans) = scan(line, replies)?;
    if !measure {
        facts.results.iter_mut().for_each(|r| r.json_size = -1);
    }
    Some((facts, others, spans))
}

/// The line read whole: its facts, its other members' spans and its results' contents' spans.
fn scan(line: &[u8], replies: bool) -> Option<FactsPlaced> {
    let mut s = Scan::new(line)?;
    s.ws();
    let (facts, others) = s.message(replies)?;
    s.ws();
    (s.i == line.len()).then_some((facts, others, s.spans))
}

/// A reply's recorded usage in the canonical keys (`model.anthropic_usage`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Usage {
    /// `USAGE_KEYS`' counts, in that order (absent or null: 0)
    pub counts: [u64; 4],
    /// of the cache writes, those made with a 1-hour TTL, where more than none (at most the
    /// writes: `cache_creation_1h_input_tokens`)
    pub one_hour: Option<u64>,
}

/// A reply's members besides its message, as the loader reads them (`anthropic_messages`'
/// `_reply_metadata` and `_recorded_usage`): the model, the format `compactlab convert` recorded
/// and the time, each where it is a string, and the usage where it is a reply's and an object
/// with a member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplyMembers {
    pub model: Option<String>,
    pub recorded_format: Option<String>,
    pub timestamp: Option<String>,
    pub usage: Option<Usage>,
}

/// The usage's counts `model.tokens` reads (`model.USAGE_KEYS`), in that order.
pub const USAGE_KEYS: [&str; 4] = [
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
];
/// More tokens than any call ever took (`model.MAX_TOKENS`): a count past it is Python's (bad).
const MAX_TOKENS: u64 = 1_000_000_000_000_000;

/// `line_facts`' other members of a reply (`others`: their spans on `line`) read as the loader
/// reads them; `assistant`: the line is a reply (only a reply's usage is recorded). None where
/// Python reads them: a count that is not a plain whole number (a float, a string of digits, a
/// negative or too large one: `model.tokens` decides, and may say the line is bad), or a 1-hour
/// count that is not one either.
pub fn reply_members(
    line: &[u8],
    others: &[(usize, usize)],
    assistant: bool,
) -> Option<ReplyMembers> {
    let mut out = ReplyMembers::default();
    for &(a, b) in others {
        let mut s = Scan::new(line.get(a..b)?)?;
        s.any_number = true;
        let (key, _) = s.key()?;
        s.eat(b':')?;
        s.ws();
        let is_str = s.peek()? == b'"';
        match &*key {
            "model" | "recorded_format" | "timestamp" if is_str => {
                let text = Some(s.string_value()?.0.into_owned());
                match &*key {
                    "model" => out.model = text,
                    "recorded_format" => out.recorded_format = text,
                    _ => out.timestamp = text,
                }
            }
            "usage" if assistant && s.peek()? == b'{' => out.usage = s.usage()?,
            // (what `compactlab convert` kept of what the recording said of itself: Python's)
            METADATA_KEY => return None,
            _ => s.skip()?,
        }
        s.ws();
        if s.i != s.b.len() {
            return None;
        }
    }
    Some(out)
}

/// A count as `model.tokens` reads it where it is written plainly: null as 0, a whole number of
/// at least 0 below `MAX_TOKENS` as itself; None for anything else (Python's).
fn plain_count(text: &[u8]) -> Option<u64> {
    if text == b"null" {
        return Some(0);
    }
    if text.is_empty() || text.len() > 16 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(text).ok()?.parse().ok()?;
    (n < MAX_TOKENS).then_some(n)
}

/// The text of the JSON string that is all of `value` (a result's content where its line placed
/// it), as orjson reads it; None where `value` is no such string or Python reads it.
pub fn string_text(value: &[u8]) -> Option<String> {
    let mut s = Scan::new(value)?;
    if s.peek()? != b'"' {
        return None;
    }
    let mut out = String::with_capacity(value.len()); // (an escape is longer than what it stands for)
    s.string(Some(&mut out))?;
    (s.i == value.len()).then_some(out)
}

/// The texts of the objects of the list at `s.i` (at `depth`) that hold a string `text` (those
/// whose `type` is `"text"` only, where `typed`): the list's JSON length, and those texts. None
/// where Python reads it (an object of a key given twice, a string this reading leaves to Python).
fn list_texts(s: &mut Scan<'_>, depth: usize, typed: bool) -> Option<(usize, Vec<String>)> {
    let mut parts = Vec::new();
    let (json, _) = s.list(depth, |s, _| {
        if s.peek()? != b'{' {
            return Some(s.value(depth + 1)?.json); // (no block: `block_type` is None)
        }
        let (mut kind, mut text) = (None, None);
        let json = s.members(depth + 1, |s, key| match key {
            "type" | "text" if s.peek()? == b'"' => {
                let (v, len) = s.string_value()?;
                match key {
                    "type" => kind = Some(v),
                    _ => text = Some(v),
                }
                Some(len)
            }
            _ => Some(s.value(depth + 2)?.json),
        })?;
        if !typed || kind.as_deref() == Some("text") {
            parts.extend(text.map(Cow::into_owned));
        }
        Some(json)
    })?;
    Some((json, parts))
}

/// `probes._result_text` of a tool result's content that is a list (`value`, as it stands on its
/// line): the texts of its objects that hold a string `text`, joined by line breaks. None where
/// Python reads it: not a list, an object of a key given twice, a string this reading leaves to
/// Python.
pub fn result_list_text(value: &[u8]) -> Option<String> {
    let mut s = Scan::new(value)?;
    s.any_number = true;
    if s.peek()? != b'[' {
        return None;
    }
    let (_, parts) = list_texts(&mut s, 0, false)?;
    (s.i == value.len()).then(|| parts.join("\n"))
}

/// What the stub summary quotes of the message on `line` (`summarizers/stub.stripped_text`, the
/// reference: `text_of(message).strip()`): its string content, or the texts of its text blocks
/// joined by line breaks, stripped of the characters Python's `str.strip` strips. The line is an
/// Anthropic messages line: the message, or an API response object whose other members are not
/// read. None where Python reads it: not one object of members given once, no content, a content
/// neither a string nor a list, a string this reading leaves to Python (a sized placeholder's mark
/// written as an escape).
pub fn stripped_message_text(line: &[u8]) -> Option<String> {
    let mut s = Scan::new(line)?;
    s.any_number = true;
    s.ws();
    if s.peek()? != b'{' {
        return None;
    }
    let mut text = None;
    s.members(0, |s, key| {
        if key != "content" {
            return Some(s.value(1)?.json);
        }
        match s.peek()? {
            b'"' => {
                let (t, len) = s.string_value()?;
                text = Some(t.into_owned());
                Some(len)
            }
            b'[' => {
                let (json, parts) = list_texts(s, 1, true)?;
                text = Some(parts.join("\n"));
                Some(json)
            }
            _ => None,
        }
    })?;
    s.ws();
    if s.i != line.len() {
        return None;
    }
    text.map(|t| py_strip(&t).to_owned())
}

/// `text` as Python's `str.strip()` leaves it.
pub fn py_strip(text: &str) -> &str {
    text.trim_matches(py_space)
}

/// The message `anthropic_messages.message_of` takes from a reply's line (an API response
/// object: `role` and `content` among other members) as orjson writes it where the line wrote
/// both values as orjson does: `{"role":R,"content":C}`, R and C as they stand on the line. None
/// where the line is not one object holding each of them once and a member besides (a line of
/// the two alone is its own message), or not UTF-8. The caller's length check (the message's
/// `chars`) says whether the values were written as orjson writes them.
pub fn reply_message_text(line: &[u8]) -> Option<String> {
    let mut s = Scan::new(line)?;
    s.eat(b'{')?;
    let (mut role, mut content, mut members) = (None, None, 0usize);
    loop {
        s.ws();
        let (key, _) = s.key()?;
        s.eat(b':')?;
        s.ws();
        let start = s.i;
        let own = matches!(&*key, "role" | "content");
        s.any_number = !own; // (a float in the message: Python's, as for its facts)
        s.skip()?;
        let span = Some(start..s.i);
        match &*key {
            "role" if role.is_none() => role = span,
            "content" if content.is_none() => content = span,
            _ if own => return None, // (given twice: Python's)
            _ => {}
        }
        members += 1;
        if s.member_end()? {
            break;
        }
    }
    s.ws();
    let (role, content) = (role?, content?);
    if s.i != line.len() || members < 3 {
        return None;
    }
    let mut out = String::with_capacity(22 + role.len() + content.len());
    out.push_str("{\"role\":");
    out.push_str(&s.t[role]);
    out.push_str(",\"content\":");
    out.push_str(&s.t[content]);
    out.push('}');
    Some(out)
}

/// The character a JSON escape of one letter stands for (`\\n`: `n`), None for `\\u` and any other.
pub fn short_escape(e: u8) -> Option<char> {
    Some(match e {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => return None,
    })
}

/// `text` as orjson writes a string, onto `out`: `"` and `\`, the short escapes `\b \t \n \f
/// \r`, other control characters as `\u00xx`, everything else as it is (copied a run at a time:
/// every byte escaped is ASCII, so each run ends at a character's end).
pub fn push_json_string(text: &str, out: &mut String) {
    out.reserve(text.len() + 2);
    out.push('"');
    let mut start = 0;
    for (i, &b) in text.as_bytes().iter().enumerate() {
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[start..i]);
        if short.is_empty() {
            let _ = write!(out, "\\u{:04x}", b); // (a String's write never fails)
        } else {
            out.push_str(short);
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// The characters of `text` as orjson writes a string (`push_json_string`'s, counted without
/// writing them): its quotes, two for a short escape, six for a `\u00xx`. Counted a byte at a time
/// (`JSON_LEN_OF_BYTE`), not a character at a time: a tenth of the instructions.
pub fn json_string_chars(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|b| usize::from(JSON_LEN_OF_BYTE[usize::from(b)]))
        .sum::<usize>()
}

/// Each byte's part of a string's length in orjson's compact JSON: an ASCII character's
/// (`json_len_of`); one for the first byte of any other character (orjson writes it as it is),
/// none for the bytes that continue it.
const JSON_LEN_OF_BYTE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = if b < 0x80 {
            json_len_of(b as u8 as char) as u8
        } else if b >= 0xc0 {
            1
        } else {
            0
        };
        b += 1;
    }
    table
};

/// Where a tool result's content stands on its line: the block's index, the bytes of its value
/// (a user message's block with a `content` key).
pub type Span = (usize, std::ops::Range<usize>);

/// A string's sizes: its characters, its JSON text's length, whether any character is not
/// Python's whitespace.
#[derive(Debug, Clone, Copy, Default)]
struct Str {
    chars: usize,
    json: usize,
    not_space: bool,
    /// it has no character (a placeholder of no characters is one: the sizes say none)
    empty: bool,
    /// it holds an escape (its text is not the line's bytes)
    escaped: bool,
}

/// What a value is, as far as a block's facts ask.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Null,
    Falsy,
    Truthy,
    Str(Str),
    List,
    Object,
}

impl Kind {
    fn truthy(self) -> bool {
        match self {
            Kind::Null | Kind::Falsy => false,
            Kind::Str(s) => !s.empty,
            _ => true,
        }
    }
}

/// A value read: its compact JSON length and its kind (a list's or an object's truth is set by
/// its length).
#[derive(Debug, Clone, Copy)]
struct Val {
    json: usize,
    kind: Kind,
}

/// A block's keys that its facts read, as read.
#[derive(Default)]
struct Block {
    kind: Option<String>,
    kind_given: bool,
    text: Option<Str>,
    id: Option<String>,
    name: Option<String>,
    tool_use_id: Option<String>,
    files: Vec<(usize, String)>,
    /// the content: its JSON length, its kind and its SPEC §4 size (None: no content key)
    content: Option<(usize, Kind, usize)>,
    /// where the content's value stands on the line
    content_at: std::ops::Range<usize>,
    is_error: bool,
}

pub(crate) struct Scan<'a> {
    b: &'a [u8],
    t: &'a str,
    pub(crate) i: usize,
    /// the keys of the objects being read, innermost last (a key given twice is Python's)
    keys: Vec<Cow<'a, str>>,
    /// any JSON number is read (a reply's other members: their sizes are not asked)
    pub(crate) any_number: bool,
    /// where each tool result's content stands (`line_facts_placed`)
    spans: Vec<Span>,
}

impl<'a> Scan<'a> {
    /// A scan of `b` from its start (None: `b` is not UTF-8).
    pub(crate) fn new(b: &'a [u8]) -> Option<Self> {
        Some(Scan {
            b,
            t: simdutf8::basic::from_utf8(b).ok()?,
            i: 0,
            keys: Vec::new(),
            any_number: false,
            spans: Vec::new(),
        })
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    pub(crate) fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    pub(crate) fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// The top object: `role` and `content`, each once, and (with `replies`) other members,
    /// whose spans are returned.
    fn message(&mut self, replies: bool) -> Option<(Facts, Vec<(usize, usize)>)> {
        self.eat(b'{')?;
        let mut facts = Facts {
            chars: 2 + 1, // the braces and the comma
            role: Role::User,
            uses: Vec::new(),
            results: Vec::new(),
            misplaced: Vec::new(),
            empty: false,
            has_text: false,
        };
        let (mut role, mut content, mut content_later) = (false, false, None);
        let mut others = Vec::new();
        loop {
            self.ws();
            let start = self.i;
            let (key, key_len) = self.key()?;
            if self.keys.contains(&key) {
                return None;
            }
            self.eat(b':')?;
            self.ws();
            match &*key {
                "role" => {
                    let (r, len) = self.string_value()?;
                    facts.role = match &*r {
                        "user" => Role::User,
                        "assistant" => Role::Assistant,
                        _ => return None,
                    };
                    facts.chars += key_len + 1 + len;
                    role = true;
                }
                "content" if role => {
                    facts.chars += key_len + 1 + self.content(&mut facts)?;
                    content = true;
                }
                "content" => {
                    // (read once the role is known: a block's facts depend on it)
                    content_later = Some((self.i, key_len));
                    self.skip()?;
                    content = true;
                }
                COMPACTION_KEY => return None,
                _ if replies => {
                    self.any_number = true;
                    self.skip()?;
                    self.any_number = false;
                    others.push((start, self.i));
                }
                _ => return None,
            }
            self.keys.push(key);
            if self.member_end()? {
                break;
            }
        }
        if !(role && content) {
            return None;
        }
        self.keys.clear();
        if let Some((at, key_len)) = content_later {
            let end = self.i;
            self.i = at;
            facts.chars += key_len + 1 + self.content(&mut facts)?;
            self.i = end;
        }
        Some((facts, others))
    }

    /// A reply's usage object (at its `{`): Some(None) where it has no member (no usage
    /// recorded); None where Python reads it (`reply_members`).
    pub(crate) fn usage(&mut self) -> Option<Option<Usage>> {
        let mut usage = Usage::default();
        // (the 1-hour writes: `cache_creation`'s where it is an object, else the flat key's)
        let (mut nested, mut flat): (Option<Option<u64>>, Option<u64>) = (None, None);
        let json = self.members(0, |s, key| {
            let start = s.i;
            if key == "cache_creation" && s.peek()? == b'{' {
                let mut one_hour = None;
                let json = s.members(1, |s, key| {
                    let start = s.i;
                    let json = s.value(2)?.json;
                    if key == "ephemeral_1h_input_tokens" {
                        one_hour = Some(plain_count(&s.b[start..s.i])?);
                    }
                    Some(json)
                })?;
                nested = Some(one_hour);
                return Some(json);
            }
            let json = s.value(1)?.json;
            let text = &s.b[start..s.i];
            if let Some(k) = USAGE_KEYS.iter().position(|k| *k == key) {
                usage.counts[k] = plain_count(text)?;
            } else if key == "cache_creation_1h_input_tokens" {
                flat = Some(plain_count(text)?);
            }
            Some(json)
        })?;
        if json == 2 {
            return Some(None);
        }
        let one_hour = match nested {
            Some(given) => given.unwrap_or(0),
            None => flat.unwrap_or(0),
        };
        usage.one_hour = (one_hour > 0).then(|| one_hour.min(usage.counts[1]));
        Some(Some(usage))
    }

    /// After an object's member: true where the object ends there (its `}` read), false where
    /// another member follows (its `,` read); None: neither.
    pub(crate) fn member_end(&mut self) -> Option<bool> {
        self.ws();
        let end = match self.peek()? {
            b',' => false,
            b'}' => true,
            _ => return None,
        };
        self.i += 1;
        Some(end)
    }

    /// Skips a value (it is read again: the content, once the role is known).
    pub(crate) fn skip(&mut self) -> Option<()> {
        self.value(0).map(|_| ())
    }

    /// The message's content: its JSON length, its facts into `facts`.
    fn content(&mut self, facts: &mut Facts) -> Option<usize> {
        match self.peek()? {
            b'"' => {
                let s = self.string(None)?;
                facts.empty = s.empty;
                facts.has_text = s.not_space;
                Some(s.json)
            }
            b'[' => {
                let mut seen_other = false;
                let (json, n) = self.list(0, |s, n| s.block(n, facts, &mut seen_other))?;
                facts.empty = n == 0;
                Some(json)
            }
            _ => None, // (neither a string nor a list: Python says so)
        }
    }

    /// One block of the content list, at index `n`: its JSON length; its facts into `facts`.
    fn block(&mut self, n: usize, facts: &mut Facts, seen_other: &mut bool) -> Option<usize> {
        if self.peek()? != b'{' {
            return None; // (not an object: Python says so)
        }
        let mut b = Block::default();
        let json = self.object(1, Some(&mut b))?;
        let user = facts.role == Role::User;
        let kind = b.kind.as_deref();
        if b.kind_given && kind.is_none() {
            return None; // (a type that is not a string: Python decides)
        }
        if kind == Some("tool_result") && user {
            let tool_use_id = b.tool_use_id?;
            let (size, is_str, json_size) = match b.content {
                None => (0, true, -1),
                Some((len, Kind::Null, _)) => (0, true, len as i64),
                Some((len, Kind::Str(s), _)) => (s.chars, true, len as i64),
                Some((len, _, size)) => (size, false, len as i64),
            };
            if *seen_other {
                facts.misplaced.push(tool_use_id.clone());
            }
            if b.content.is_some() {
                self.spans.push((n, b.content_at));
            }
            facts.results.push(ResultFact {
                block: n,
                tool_use_id,
                size,
                is_str,
                is_error: b.is_error,
                json_size,
            });
            return Some(json);
        }
        *seen_other = true;
        match kind {
            Some("text") => facts.has_text |= b.text?.not_space,
            Some("tool_use") => {
                let (id, name) = (b.id?, b.name?);
                if facts.role == Role::Assistant {
                    let mut files = b.files;
                    files.sort_by_key(|(k, _)| *k);
                    facts.uses.push(ToolUse {
                        id,
                        name,
                        files: files.into_iter().map(|(_, f)| f).collect(),
                    });
                }
            }
            Some("tool_result") => {
                b.tool_use_id?; // (outside a user message its shape still counts)
            }
            _ => {}
        }
        Some(json)
    }

    /// An object at `depth` (at its `{`), each member's value read by `member` (given its key): its
    /// JSON length. A key given twice is Python's (orjson keeps the last).
    pub(crate) fn members(
        &mut self,
        depth: usize,
        mut member: impl FnMut(&mut Self, &str) -> Option<usize>,
    ) -> Option<usize> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        let start = self.keys.len();
        let mut json = 2;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(json);
        }
        loop {
            self.ws();
            let (key, key_len) = self.key()?;
            if self.keys[start..].contains(&key) {
                return None;
            }
            self.eat(b':')?;
            self.ws();
            json += key_len + 1 + member(self, &key)?;
            self.keys.push(key);
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    json += 1;
                }
                b'}' => {
                    self.i += 1;
                    self.keys.truncate(start);
                    return Some(json);
                }
                _ => return None,
            }
        }
    }

    /// A list at `depth` (at its `[`), each element read by `element` (given its index): its JSON
    /// length and how many elements.
    pub(crate) fn list(
        &mut self,
        depth: usize,
        mut element: impl FnMut(&mut Self, usize) -> Option<usize>,
    ) -> Option<(usize, usize)> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        let mut json = 2;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some((json, 0));
        }
        let mut n = 0;
        loop {
            self.ws();
            json += element(self, n)?;
            n += 1;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    json += 1;
                }
                b']' => {
                    self.i += 1;
                    return Some((json, n));
                }
                _ => return None,
            }
        }
    }

    /// An object (at `depth`), with a block's keys read into `block`: its JSON length.
    fn object(&mut self, depth: usize, mut block: Option<&mut Block>) -> Option<usize> {
        self.members(depth, |s, key| match block.as_deref_mut() {
            Some(b) => s.block_value(key, b, depth),
            None => Some(s.value(depth + 1)?.json),
        })
    }

    /// A block's value under `key`: what the facts read of it kept in `b`; its JSON length.
    fn block_value(&mut self, key: &str, b: &mut Block, depth: usize) -> Option<usize> {
        let is_str = self.peek()? == b'"';
        match key {
            "type" => {
                b.kind_given = true;
                if is_str {
                    let (s, len) = self.string_value()?;
                    b.kind = Some(s.into_owned());
                    return Some(len);
                }
            }
            "id" | "name" | "tool_use_id" if is_str => {
                let (s, len) = self.string_value()?;
                let s = Some(s.into_owned());
                match key {
                    "id" => b.id = s,
                    "name" => b.name = s,
                    _ => b.tool_use_id = s,
                }
                return Some(len);
            }
            "text" if is_str => {
                let s = self.string(None)?;
                b.text = Some(s);
                return Some(s.json);
            }
            "input" if self.peek()? == b'{' => return self.input(b, depth + 1),
            "content" => {
                let start = self.i;
                let (json, kind, size) = self.result_content(depth + 1)?;
                b.content = Some((json, kind, size));
                b.content_at = start..self.i;
                return Some(json);
            }
            "is_error" => {
                let v = self.value(depth + 1)?;
                b.is_error = v.kind.truthy();
                return Some(v.json);
            }
            _ => {}
        }
        Some(self.value(depth + 1)?.json)
    }

    /// A tool input object: the files it names (`messages.files_in_input`) into `b`.
    fn input(&mut self, b: &mut Block, depth: usize) -> Option<usize> {
        self.members(depth, |s, key| {
            match FILE_KEYS.iter().position(|k| *k == key) {
                Some(k) if s.peek()? == b'"' => {
                    let (value, len) = s.string_value()?;
                    if !value.is_empty() {
                        b.files.push((k, value.into_owned()));
                    }
                    Some(len)
                }
                _ => Some(s.value(depth + 1)?.json),
            }
        })
    }

    /// A tool result's content: its JSON length, its kind, its SPEC §4 size (`content_size`).
    fn result_content(&mut self, depth: usize) -> Option<(usize, Kind, usize)> {
        if self.peek()? != b'[' {
            let v = self.value(depth)?;
            let size = match v.kind {
                Kind::Null => 0,
                Kind::Str(s) => s.chars,
                _ => v.json,
            };
            return Some((v.json, v.kind, size));
        }
        let mut size = 0;
        let (json, _) = self.list(depth, |s, _| {
            if s.peek()? != b'{' {
                let len = s.value(depth + 1)?.json;
                size += len;
                return Some(len);
            }
            // a text block counts its text's characters, any other block its JSON length
            let mut inner = Block::default();
            let len = s.object(depth + 1, Some(&mut inner))?;
            size += match (inner.kind.as_deref(), inner.text) {
                (Some("text"), Some(t)) => t.chars,
                _ => len,
            };
            Some(len)
        })?;
        Some((json, Kind::List, size))
    }

    /// Any value at `depth`: its JSON length and kind.
    fn value(&mut self, depth: usize) -> Option<Val> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => {
                let s = self.string(None)?;
                Some(Val {
                    json: s.json,
                    kind: Kind::Str(s),
                })
            }
            b'{' => {
                let json = self.object(depth, None)?;
                Some(Val {
                    json,
                    kind: if json > 2 { Kind::Object } else { Kind::Falsy },
                })
            }
            b'[' => {
                let (json, n) = self.list(depth, |s, _| Some(s.value(depth + 1)?.json))?;
                Some(Val {
                    json,
                    kind: if n > 0 { Kind::List } else { Kind::Falsy },
                })
            }
            b't' => self.literal(b"true", Kind::Truthy),
            b'f' => self.literal(b"false", Kind::Falsy),
            b'n' => self.literal(b"null", Kind::Null),
            _ => self.integer(),
        }
    }

    fn literal(&mut self, word: &[u8], kind: Kind) -> Option<Val> {
        self.b[self.i..].starts_with(word).then(|| {
            self.i += word.len();
            Val {
                json: word.len(),
                kind,
            }
        })
    }

    /// An integer as orjson writes it back: the same digits. A float, `-0`, or an integer beyond
    /// 18 digits (orjson reads one beyond 64 bits as a float) is Python's.
    fn integer(&mut self) -> Option<Val> {
        if self.any_number {
            return self.number();
        }
        let start = self.i;
        let negative = self.peek()? == b'-';
        if negative {
            self.i += 1;
        }
        let digits = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        let n = self.i - digits;
        if n == 0 || n > 18 || (n > 1 && self.b[digits] == b'0') {
            return None;
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let zero = n == 1 && self.b[digits] == b'0';
        if negative && zero {
            return None;
        }
        Some(Val {
            json: self.i - start,
            kind: if zero { Kind::Falsy } else { Kind::Truthy },
        })
    }

    /// Any JSON number (RFC 8259's grammar) that orjson reads, its kind not asked.
    fn number(&mut self) -> Option<Val> {
        let start = self.i;
        if self.peek()? == b'-' {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.digits_one_or_more()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.digits_one_or_more()?;
        }
        // (orjson refuses a number that is infinite as a double: 1e400, or 400 digits)
        let value: f64 = self.t[start..self.i].parse().ok()?;
        value.is_finite().then_some(Val {
            json: self.i - start,
            kind: Kind::Truthy,
        })
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
    }

    fn digits_one_or_more(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }

    /// A key: its text and its JSON length.
    fn key(&mut self) -> Option<(Cow<'a, str>, usize)> {
        self.string_value()
    }

    /// A string value, decoded (the line's own text where it holds no escape): its text and its
    /// JSON length.
    pub(crate) fn string_value(&mut self) -> Option<(Cow<'a, str>, usize)> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i;
        let s = self.string(None)?;
        if !s.escaped {
            return Some((Cow::Borrowed(&self.t[start + 1..self.i - 1]), s.json));
        }
        self.i = start;
        let mut out = String::new();
        self.string(Some(&mut out))?;
        Some((Cow::Owned(out), s.json))
    }

    /// A string at `self.i` (its opening quote): its sizes, its text into `out` where asked.
    fn string(&mut self, mut out: Option<&mut String>) -> Option<Str> {
        let open = self.i;
        self.i += 1;
        let mut s = Str::default();
        loop {
            if s.not_space {
                // (its first character known: the usual escapes counted in the run, and read
                // there where its text is asked)
                self.i = match out.as_deref_mut() {
                    None => sized_run(self.b, self.i, &mut s),
                    Some(o) => counted_run(self.t, self.i, &mut s, o),
                };
            }
            // the run of printable ASCII but the quote and the backslash: a character each
            let start = self.i;
            let stop = plain_run(self.b, start);
            let run = stop - start;
            s.chars += run;
            s.json += run;
            if !s.not_space && run > 0 {
                s.not_space = self.b[start..stop].iter().any(|&c| c != b' ');
            }
            if let Some(o) = out.as_deref_mut() {
                o.push_str(&self.t[start..stop]);
            }
            self.i = stop;
            let c = match self.peek()? {
                b'"' => {
                    self.i += 1;
                    s.json += 2;
                    s.empty = self.i - open == 2;
                    return Some(s);
                }
                b'\\' => {
                    s.escaped = true;
                    // the usual escapes (a line break, a tab, a quote: most of a tool's output
                    // that is not plain) read here, the others by `escape`
                    if let Some(&e @ (b'n' | b't' | b'r' | b'"' | b'\\' | b'/')) =
                        self.b.get(self.i + 1)
                    {
                        let (c, json) = match e {
                            b'n' => ('\n', 2),
                            b't' => ('\t', 2),
                            b'r' => ('\r', 2),
                            b'"' => ('"', 2),
                            b'\\' => ('\\', 2),
                            _ => ('/', 1),
                        };
                        s.chars += 1;
                        s.json += json;
                        s.not_space |= matches!(e, b'"' | b'\\' | b'/');
                        if let Some(o) = out.as_deref_mut() {
                            o.push(c);
                        }
                        self.i += 2;
                        continue;
                    }
                    self.escape()?
                }
                0..=0x1f => return None, // (a raw control character: not JSON)
                _ => {
                    let c = self.t[self.i..].chars().next()?;
                    if c == MARK {
                        // a sized placeholder: N characters in every size
                        let (n, len) = sized_placeholder(&self.b[self.i + c.len_utf8()..])?;
                        let end = self.i + c.len_utf8() + len;
                        s.chars += n;
                        s.json += n;
                        s.not_space = true;
                        if let Some(o) = out.as_deref_mut() {
                            o.push_str(&self.t[self.i..end]);
                        }
                        self.i = end;
                        continue;
                    }
                    self.i += c.len_utf8();
                    c
                }
            };
            if c == MARK {
                return None; // (written as an escape: Python's)
            }
            s.chars += 1;
            s.json += json_len_of(c);
            if !s.not_space && !py_space(c) {
                s.not_space = true;
            }
            if let Some(o) = out.as_deref_mut() {
                o.push(c);
            }
        }
    }

    /// An escape at `self.i` (its backslash): the character it stands for.
    fn escape(&mut self) -> Option<char> {
        let e = *self.b.get(self.i + 1)?;
        self.i += 2;
        if let Some(c) = short_escape(e) {
            return Some(c);
        }
        Some(match e {
            b'u' => {
                let high = self.hex4()?;
                match high {
                    0xd800..=0xdbff => {
                        if self.b.get(self.i..self.i + 2)? != b"\\u" {
                            return None; // (a lone surrogate: orjson refuses it, Python says so)
                        }
                        self.i += 2;
                        let low = self.hex4()?;
                        if !(0xdc00..=0xdfff).contains(&low) {
                            return None;
                        }
                        char::from_u32(0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00))?
                    }
                    0xdc00..=0xdfff => return None,
                    c => char::from_u32(c)?,
                }
            }
            _ => return None,
        })
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.b.get(self.i..self.i + 4)?;
        let mut v = 0;
        for &d in digits {
            v = v * 16 + (d as char).to_digit(16)?;
        }
        self.i += 4;
        Some(v)
    }
}

/// Where the run of plain bytes from `i` ends: printable ASCII (DEL too) but the quote and the
/// backslash, each one JSON character as it stands. Sixteen bytes at a time (`others`), the last
/// few byte by byte.
fn plain_run(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i + 16) {
        let mask = others(chunk.try_into().expect("sixteen bytes"));
        if mask != 0 {
            return i + mask.trailing_zeros() as usize;
        }
        i += 16;
    }
    while let Some(&c) = b.get(i) {
        if other(c) {
            break;
        }
        i += 1;
    }
    i
}

/// From `i` in a string, once a character not a space was found: the run of plain bytes and of the
/// usual escapes (`\n`, `\t`, `\r`, `\"`, `\\`, `\/`: most of a tool's output that is not plain),
/// counted into `s` as `Scan::string` counts them and its text pushed onto `out` (a plain stretch
/// as it stands, an escape as what it stands for); where it ends: at any other byte (the closing
/// quote, another escape, a control character, a byte beyond ASCII), or the last bytes short of a
/// chunk, which the caller reads. Thirty-two bytes at a time where the CPU has AVX2 (most since
/// 2013), else sixteen. (Its sizes alone: `sized_run`.)
fn counted_run(t: &str, i: usize, s: &mut Str, out: &mut String) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU this runs on has AVX2: detected just above.
        return unsafe { counted_run_avx2(t, i, s, out) };
    }
    counted_in(t, i, s, out, |chunk: &[u8; 16]| u64::from(others(chunk)))
}

/// `counted_run` thirty-two bytes at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn counted_run_avx2(t: &str, i: usize, s: &mut Str, out: &mut String) -> usize {
    counted_in(t, i, s, out, |chunk: &[u8; 32]| {
        u64::from(others_avx2(chunk))
    })
}

/// `counted_run` with its sizes alone asked (no text): the same run, counted from each chunk's
/// masks with no branch for an escape. Sixty-four bytes at a time where the CPU has AVX-512BW,
/// thirty-two where it has AVX2, else sixteen (valgrind, which has no AVX-512, counts the AVX2
/// path's instructions).
fn sized_run(b: &[u8], i: usize, s: &mut Str) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512bw") {
        // SAFETY: the CPU this runs on has AVX-512BW: detected just above.
        return unsafe { sized_run_avx512(b, i, s) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU this runs on has AVX2: detected just above.
        return unsafe { sized_run_avx2(b, i, s) };
    }
    sized_in(b, i, s, |chunk: &[u8; 16]| chunk_masks(chunk))
}

/// `sized_run` thirty-two bytes at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sized_run_avx2(b: &[u8], i: usize, s: &mut Str) -> usize {
    sized_in(b, i, s, |chunk: &[u8; 32]| chunk_masks_avx2(chunk))
}

/// `sized_run` sixty-four bytes at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
fn sized_run_avx512(b: &[u8], i: usize, s: &mut Str) -> usize {
    sized_in(b, i, s, |chunk: &[u8; 64]| chunk_masks_avx512(chunk))
}

/// `Masks` of sixty-four bytes, in AVX-512BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
fn chunk_masks_avx512(chunk: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        _mm512_cmpeq_epi8_mask, _mm512_cmplt_epi8_mask, _mm512_loadu_si512, _mm512_set1_epi8,
    };
    // SAFETY: `chunk` is 64 initialised bytes that the borrow keeps alive; `_mm512_loadu_si512`
    // reads exactly 64 bytes from the pointer and needs no alignment. The other intrinsics only
    // compute on registers, and this function is compiled for AVX-512BW, which its callers detect.
    unsafe {
        let x = _mm512_loadu_si512(chunk.as_ptr().cast());
        let is = |c: u8| _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8(c as i8));
        let (quote, backslash, slash) = (is(b'"'), is(b'\\'), is(b'/'));
        let low = _mm512_cmplt_epi8_mask(x, _mm512_set1_epi8(0x20));
        Masks {
            other: low | quote | backslash,
            backslash,
            letter: is(b'n') | is(b't') | is(b'r') | slash | quote | backslash,
            slash,
        }
    }
}

/// What `sized_in` reads of a chunk, a mask each (bit k: byte k): the bytes that are `other`, the
/// backslashes, the letters of the usual escapes (`n t r " \ /`), and the slashes.
#[derive(Clone, Copy)]
struct Masks {
    other: u64,
    backslash: u64,
    letter: u64,
    slash: u64,
}

/// The bytes of a `width`-byte chunk that a backslash escapes (bit k: byte k), where none escapes
/// its first: each run of backslashes escapes its second, fourth... and the byte after an odd run
/// (within the chunk: a backslash left escaping at its end escapes the next chunk's first byte).
/// simdjson's `find_escaped`, without its carry: `sized_in` starts each chunk where no escape is
/// open.
#[inline(always)]
fn escaped_by(backslash: u64, width: usize) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let follows = backslash << 1;
    let odd_starts = backslash & !EVEN & !follows;
    // (a run that starts on an odd bit, added to the backslashes, carries to just past its end, where
    // an odd run flips the parity that the even bits give)
    let even_starts = odd_starts.wrapping_add(backslash);
    let escaped = (EVEN ^ (even_starts << 1)) & follows;
    if width < 64 {
        escaped & ((1u64 << width) - 1)
    } else {
        escaped
    }
}

/// `sized_run` in chunks of `W` bytes: each chunk's escapes found from its masks at once
/// (`escaped_by`), the run's end its first byte that is `other` and not escaped, or the backslash
/// of an escape that is not one of the usual; an escape whose letter is the next chunk's first
/// byte read with it, the next chunk starting after it.
#[inline(always)]
fn sized_in<const W: usize>(
    b: &[u8],
    mut i: usize,
    s: &mut Str,
    masks_of: impl Fn(&[u8; W]) -> Masks,
) -> usize {
    let start = i;
    let (mut escapes, mut slashes) = (0usize, 0usize);
    while let Some(chunk) = b.get(i..i + W) {
        let m = masks_of(chunk.try_into().expect("W bytes"));
        let escaped = escaped_by(m.backslash, W);
        let escaping = m.backslash & !escaped;
        let stop = (m.other & !m.backslash & !escaped) | ((escaped & !m.letter) >> 1);
        if stop != 0 {
            let k = stop.trailing_zeros();
            let before = (1u64 << k) - 1;
            escapes += (escaping & before).count_ones() as usize;
            slashes += (escaped & m.slash & before).count_ones() as usize;
            i += k as usize;
            break;
        }
        escapes += escaping.count_ones() as usize;
        slashes += (escaped & m.slash).count_ones() as usize;
        if escaping >> (W - 1) != 0 {
            // (the chunk's last byte escapes the next chunk's first)
            match b.get(i + W) {
                Some(b'/') => slashes += 1,
                Some(b'n' | b't' | b'r' | b'"' | b'\\') => {}
                _ => {
                    escapes -= 1;
                    i += W - 1;
                    break;
                }
            }
            i += W + 1;
            continue;
        }
        i += W;
    }
    let bytes = i - start;
    s.chars += bytes - escapes;
    s.json += bytes - slashes;
    s.escaped |= escapes > 0;
    i
}

/// `Masks` of a chunk by one instruction set's vector compares (`load`, `cmpeq`, `set1`, `or`): the
/// same steps in SSE2's sixteen bytes and AVX2's thirty-two. `low`: the bytes below 0x20 (beyond
/// ASCII too: a signed compare); `mask`: a vector's bytes as bits.
macro_rules! chunk_masks_in {
    ($chunk:expr, ($load:ident, $cmpeq:ident, $set1:ident, $or:ident), $low:expr, $mask:expr) => {{
        let x = $load($chunk.as_ptr().cast());
        let is = |c: u8| $cmpeq(x, $set1(c as i8));
        let (quote, backslash, slash) = (is(b'"'), is(b'\\'), is(b'/'));
        let letter = $or(
            $or($or(is(b'n'), is(b't')), $or(is(b'r'), slash)),
            $or(quote, backslash),
        );
        let (low, mask) = ($low, $mask);
        Masks {
            other: mask($or(low(x), $or(quote, backslash))),
            backslash: mask(backslash),
            letter: mask(letter),
            slash: mask(slash),
        }
    }};
}

/// `Masks` of sixteen bytes, in SSE2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn chunk_masks(chunk: &[u8; 16]) -> Masks {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: `chunk` is 16 initialised bytes that the borrow keeps alive; `_mm_loadu_si128` reads
    // exactly 16 bytes from the pointer and needs no alignment. The other intrinsics only compute
    // on registers, and SSE2 is part of every x86_64 target (no feature to detect).
    unsafe {
        chunk_masks_in!(
            chunk,
            (_mm_loadu_si128, _mm_cmpeq_epi8, _mm_set1_epi8, _mm_or_si128),
            |x| _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)),
            |v| u64::from(_mm_movemask_epi8(v) as u16)
        )
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn chunk_masks(chunk: &[u8; 16]) -> Masks {
    chunk_masks_bytewise(chunk)
}

/// `chunk_masks`, a byte at a time: the other targets', and the reference the x86_64 ones are
/// tested on.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn chunk_masks_bytewise<const W: usize>(chunk: &[u8; W]) -> Masks {
    let mask = |f: &dyn Fn(u8) -> bool| {
        chunk
            .iter()
            .enumerate()
            .fold(0u64, |mask, (k, &c)| mask | u64::from(f(c)) << k)
    };
    Masks {
        other: mask(&other),
        backslash: mask(&|c| c == b'\\'),
        letter: mask(&|c| matches!(c, b'n' | b't' | b'r' | b'"' | b'\\' | b'/')),
        slash: mask(&|c| c == b'/'),
    }
}

/// `Masks` of thirty-two bytes, in AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn chunk_masks_avx2(chunk: &[u8; 32]) -> Masks {
    use std::arch::x86_64::{
        _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8,
    };
    // SAFETY: `chunk` is 32 initialised bytes that the borrow keeps alive; `_mm256_loadu_si256`
    // reads exactly 32 bytes from the pointer and needs no alignment. The other intrinsics only
    // compute on registers, and this function is compiled for AVX2, which its callers detect.
    unsafe {
        chunk_masks_in!(
            chunk,
            (
                _mm256_loadu_si256,
                _mm256_cmpeq_epi8,
                _mm256_set1_epi8,
                _mm256_or_si256
            ),
            |x| _mm256_cmpgt_epi8(_mm256_set1_epi8(0x20), x),
            |v| u64::from(_mm256_movemask_epi8(v) as u32)
        )
    }
}

/// `counted_run` in chunks of `W` bytes, `mask_of` each (bit k: its byte k is `other`): the escapes
/// of a chunk read from its mask, the byte an escape's backslash escapes skipped with it. (Every
/// byte the run passes is ASCII, so each place it cuts `t` at is a character's.)
#[inline(always)]
fn counted_in<const W: usize>(
    t: &str,
    mut i: usize,
    s: &mut Str,
    out: &mut String,
    mask_of: impl Fn(&[u8; W]) -> u64,
) -> usize {
    let b = t.as_bytes();
    let (start, mut copied) = (i, i);
    // (each escape is two bytes: one character; `\/` is one in compact JSON, the others two)
    let (mut escapes, mut slashes) = (0, 0);
    'chunks: while let Some(chunk) = b.get(i..i + W) {
        let mut mask = mask_of(chunk.try_into().expect("W bytes"));
        while mask != 0 {
            let k = mask.trailing_zeros() as usize;
            let at = i + k;
            if b[at] != b'\\' {
                i = at;
                break 'chunks;
            }
            let c = match b.get(at + 1) {
                Some(b'n') => '\n',
                Some(b't') => '\t',
                Some(b'r') => '\r',
                Some(b'"') => '"',
                Some(b'\\') => '\\',
                Some(b'/') => {
                    slashes += 1;
                    '/'
                }
                _ => {
                    i = at;
                    break 'chunks;
                }
            };
            escapes += 1;
            out.push_str(&t[copied..at]);
            out.push(c);
            copied = at + 2;
            if k + 1 == W {
                // (the byte escaped is the next chunk's first)
                i = at + 2;
                continue 'chunks;
            }
            mask &= !((1u64 << (k + 2)) - 1);
        }
        i += W;
    }
    out.push_str(&t[copied..i]);
    let bytes = i - start;
    s.chars += bytes - escapes;
    s.json += bytes - slashes;
    s.escaped |= escapes > 0;
    i
}

/// `others` of thirty-two bytes, in AVX2's four instructions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn others_avx2(chunk: &[u8; 32]) -> u32 {
    use std::arch::x86_64::{
        _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8,
    };
    // SAFETY: `chunk` is 32 initialised bytes that the borrow keeps alive; `_mm256_loadu_si256`
    // reads exactly 32 bytes from the pointer and needs no alignment. The other intrinsics only
    // compute on registers, and this function is compiled for AVX2, which its callers detect.
    let mask = unsafe {
        let x = _mm256_loadu_si256(chunk.as_ptr().cast());
        let low = _mm256_cmpgt_epi8(_mm256_set1_epi8(0x20), x);
        let quote = _mm256_cmpeq_epi8(x, _mm256_set1_epi8(b'"' as i8));
        let backslash = _mm256_cmpeq_epi8(x, _mm256_set1_epi8(b'\\' as i8));
        _mm256_movemask_epi8(_mm256_or_si256(low, _mm256_or_si256(quote, backslash)))
    };
    mask as u32
}

/// A byte that ends a plain run: below 0x20, a quote, a backslash, beyond ASCII.
fn other(c: u8) -> bool {
    c < 0x20 || c == b'"' || c == b'\\' || c >= 0x80
}

/// The mask of the bytes of `chunk` that are `other` (bit k: byte k), in four SSE2 instructions
/// (a signed compare below 0x20 finds the bytes beyond ASCII too: they are negative).
#[cfg(target_arch = "x86_64")]
fn others(chunk: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: `chunk` is 16 initialised bytes that the borrow keeps alive; `_mm_loadu_si128` reads
    // exactly 16 bytes from the pointer and needs no alignment. The other intrinsics only compute
    // on registers, and SSE2 is part of every x86_64 target (no feature to detect).
    let mask = unsafe {
        let x = _mm_loadu_si128(chunk.as_ptr().cast());
        let low = _mm_cmplt_epi8(x, _mm_set1_epi8(0x20));
        let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
        _mm_movemask_epi8(_mm_or_si128(low, _mm_or_si128(quote, backslash)))
    };
    mask as u32
}

#[cfg(not(target_arch = "x86_64"))]
fn others(chunk: &[u8; 16]) -> u32 {
    others_bytewise(chunk)
}

/// `others`, a byte at a time: the other targets', and the reference the x86_64 one is tested on.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn others_bytewise(chunk: &[u8; 16]) -> u32 {
    chunk
        .iter()
        .enumerate()
        .fold(0, |mask, (k, &c)| mask | u32::from(other(c)) << k)
}

/// The sized placeholder after a mark (`messages._FIELDS`: `[KIND len=N]`, up to four ` key=hex`
/// fields): N and its length in bytes, or `None` where the bytes are not one as written (Python
/// decides then: an escape among them, a digit that is not ASCII, a text that merely has the mark).
fn sized_placeholder(b: &[u8]) -> Option<(usize, usize)> {
    fn run(b: &[u8], i: usize, max: usize, ok: impl Fn(u8) -> bool) -> usize {
        b[i..].iter().take(max + 1).take_while(|&&c| ok(c)).count()
    }
    let mut i = 0;
    (b.first()? == &b'[').then_some(())?;
    i += 1;
    (b.get(i)?.is_ascii_uppercase()).then_some(())?;
    i += 1;
    let kind = run(b, i, 40, |c| c.is_ascii_uppercase() || c == b'_');
    (kind <= 40).then_some(())?;
    i += kind;
    (b.get(i..i + 5)? == b" len=").then_some(())?;
    i += 5;
    let digits = run(b, i, 15, |c| c.is_ascii_digit());
    (1..=15).contains(&digits).then_some(())?;
    let n: usize = std::str::from_utf8(&b[i..i + digits]).ok()?.parse().ok()?;
    i += digits;
    for _ in 0..4 {
        if b.get(i) != Some(&b' ') {
            break;
        }
        let key = run(b, i + 1, 16, |c| c.is_ascii_lowercase());
        if !(1..=16).contains(&key) || b.get(i + 1 + key) != Some(&b'=') {
            return None;
        }
        let value = run(
            b,
            i + 2 + key,
            128,
            |c| matches!(c, b'0'..=b'9' | b'a'..=b'f'),
        );
        if !(1..=128).contains(&value) {
            return None;
        }
        i += 2 + key + value;
    }
    (b.get(i)? == &b']').then_some((n, i + 1))
}

/// A character's length in orjson's compact JSON text.
const fn json_len_of(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\t' | '\n' | '\u{c}' | '\r' => 2,
        c if (c as u32) < 0x20 => 6,
        _ => 1,
    }
}

/// Python's `str.isspace` of a character.
pub(crate) fn py_space(c: char) -> bool {
    matches!(c, '\t'..='\r' | '\u{1c}'..='\u{1f}' | ' ') || wide_space(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_stub_quotes_and_a_results_list_text_are_read_from_the_line() {
        let quote = |line: &str| stripped_message_text(line.as_bytes());
        // (Python's strip: its whitespace beyond Rust's, as \x1c and U+0085; a zero-width space kept)
        assert_eq!(
            quote(concat!(
                r#"{"role":"user","content":"\u001c hi \u0085\u3000"}"#,
                "\n"
            ))
            .as_deref(),
            Some("hi")
        );
        assert_eq!(
            quote(r#"{"role":"user","content":"\u200b hi"}"#).as_deref(),
            Some("\u{200b} hi")
        );
        let blocks = r#"{"role":"assistant","content":[{"type":"text","text":" a"},{"type":"tool_use","id":"x","name":"n","input":{"text":"no"}},{"text":"no"},{"type":"text","text":"b\n"}],"usage":{"input_tokens":1}}"#;
        assert_eq!(quote(blocks).as_deref(), Some("a\nb"));
        // (Python's: a key given twice, no content, a content neither a string nor a list)
        assert_eq!(
            quote(r#"{"role":"user","content":"a","content":"b"}"#),
            None
        );
        assert_eq!(quote(r#"{"role":"user"}"#), None);
        assert_eq!(quote(r#"{"role":"user","content":7}"#), None);
        let list = |value: &str| result_list_text(value.as_bytes());
        assert_eq!(
            list(r#"[{"type":"text","text":"a"},3,{"text":"b"},{"type":"image"}]"#).as_deref(),
            Some("a\nb")
        );
        assert_eq!(list(r#""a string""#), None);
        assert_eq!(list(r#"[{"text":"a","text":"b"}]"#), None);
    }

    #[test]
    fn sixteen_bytes_at_a_time_are_the_bytes_one_at_a_time() {
        let mut chunk = [b'a'; 16];
        assert_eq!(others(&chunk), 0);
        for k in 0..16 {
            for c in 0..=255u8 {
                chunk[k] = c;
                assert_eq!(
                    others(&chunk),
                    others_bytewise(&chunk),
                    "byte {c:#x} at {k}"
                );
                assert_eq!(others(&chunk) != 0, other(c));
            }
            chunk[k] = b'a';
        }
        let line = b"{\"text\":\"0123456789abcdef0123456789\\n\"}";
        assert_eq!(plain_run(line, 9), line.len() - 4); // (the backslash)
        assert_eq!(plain_run(line, line.len() - 3), line.len() - 2); // (the closing quote)
    }

    /// A string's characters, JSON length, `not_space`, `empty`, `escaped`, and where it ends.
    type Sized = (usize, usize, bool, bool, bool, usize);

    /// A string's sizes as `Scan::string` counts them without its text (the usual escapes counted
    /// in the run, `counted_run`) and with it (each character decoded in turn), and where each ends.
    fn sizes_both_ways(string: &str) -> [Option<Sized>; 2] {
        let line = string.as_bytes();
        [false, true].map(|decoded| {
            let mut scan = Scan::new(line)?;
            let mut text = String::new();
            let s = scan.string(decoded.then_some(&mut text))?;
            if decoded {
                // (the text read: serde_json's of the string)
                let json: String = serde_json::from_str(&string[..scan.i]).expect("JSON");
                assert_eq!(text, json, "{string:?}");
            }
            Some((s.chars, s.json, s.not_space, s.empty, s.escaped, scan.i))
        })
    }

    #[test]
    fn thirty_two_bytes_at_a_time_are_the_bytes_one_at_a_time() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return; // (no AVX2 here: the sixteen bytes' path is the one run, tested above)
        }
        let mut chunk = [b'a'; 32];
        for k in 0..32 {
            for c in 0..=255u8 {
                chunk[k] = c;
                // SAFETY: AVX2 was detected above.
                let mask = unsafe { others_avx2(&chunk) };
                assert_eq!(mask, u32::from(other(c)) << k, "byte {c:#x} at {k}");
            }
            chunk[k] = b'a';
        }
    }

    /// The tests' random numbers: xorshift64, the same each run.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// The low `width` bits.
    fn low_bits(width: usize) -> u64 {
        if width == 64 {
            !0
        } else {
            (1u64 << width) - 1
        }
    }

    #[test]
    fn the_bytes_escaped_found_at_once_are_those_read_in_turn() {
        // (a backslash escapes the next byte unless a backslash before it escaped it; the last
        // byte's escape left open for the next chunk)
        fn in_turn(backslash: u64, width: usize) -> (u64, bool) {
            let (mut escaped, mut k, mut open) = (0u64, 0, false);
            while k < width {
                if backslash >> k & 1 == 1 {
                    if k + 1 < width {
                        escaped |= 1 << (k + 1);
                    } else {
                        open = true;
                    }
                    k += 2;
                } else {
                    k += 1;
                }
            }
            (escaped, open)
        }
        let check = |backslash: u64, width: usize| {
            let escaped = escaped_by(backslash, width);
            let open = (backslash & !escaped) >> (width - 1) != 0;
            assert_eq!(
                (escaped, open),
                in_turn(backslash, width),
                "{backslash:#x} in {width}"
            );
        };
        for backslash in 0..1u64 << 16 {
            check(backslash, 16);
        }
        let mut state = 0x9e37_79b9_7f4a_7c15;
        for width in [32, 64] {
            for _ in 0..50_000 {
                let (a, b) = (xorshift(&mut state), xorshift(&mut state));
                for backslash in [a, a & b, a | b, a & b & xorshift(&mut state)] {
                    check(backslash & low_bits(width), width);
                }
            }
            for len in 1..=width {
                for at in 0..=width - len {
                    check(low_bits(len) << at, width);
                }
            }
        }
    }

    #[test]
    fn each_chunks_masks_are_its_bytes_one_at_a_time() {
        fn same<const W: usize>(masks_of: &dyn Fn(&[u8; W]) -> Masks) {
            let mut chunk = [b'a'; W];
            for k in 0..W {
                for c in 0..=255u8 {
                    chunk[k] = c;
                    let (got, want) = (masks_of(&chunk), chunk_masks_bytewise(&chunk));
                    assert_eq!(
                        (got.other, got.backslash, got.letter, got.slash),
                        (want.other, want.backslash, want.letter, want.slash),
                        "byte {c:#x} at {k} of {W}"
                    );
                }
                chunk[k] = b'a';
            }
        }
        same::<16>(&|c| chunk_masks(c));
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected just above.
            same::<32>(&|c| unsafe { chunk_masks_avx2(c) });
        }
        if std::arch::is_x86_feature_detected!("avx512bw") {
            // SAFETY: AVX-512BW was detected just above.
            same::<64>(&|c| unsafe { chunk_masks_avx512(c) });
        }
    }

    #[test]
    fn a_run_sized_from_its_masks_is_the_run_counted_an_escape_at_a_time() {
        // (strings of random pieces, each width's run against `counted_in`'s of the same width,
        // both from masks made a byte at a time: so on any CPU; the CPU's own masks are held to
        // those above)
        fn both<const W: usize>(line: &str) {
            let (mut counted, mut text) = (Str::default(), String::new());
            let stop = counted_in(line, 1, &mut counted, &mut text, |c: &[u8; W]| {
                chunk_masks_bytewise(c).other
            });
            let mut sized = Str::default();
            let end = sized_in(line.as_bytes(), 1, &mut sized, |c: &[u8; W]| {
                chunk_masks_bytewise(c)
            });
            assert_eq!(
                (end, sized.chars, sized.json, sized.escaped),
                (stop, counted.chars, counted.json, counted.escaped),
                "{line:?} by {W}"
            );
        }
        let pieces = [
            "a", "b", " ", "\\n", "\\t", "\\r", "\\\"", "\\\\", "\\/", "\\u00e9", "\\b", "\\x",
            "é", "\"", "\u{1}", "\\", "/", "n",
        ];
        let mut state = 0x2545_f491_4f6c_dd1d;
        let mut runs = 0;
        for _ in 0..30_000 {
            let n = xorshift(&mut state) % 90;
            // (mostly plain, or mostly escapes: the chunks' ends fall everywhere)
            let dense = xorshift(&mut state) & 1 == 0;
            let body: String = (0..n)
                .map(|_| {
                    let r = xorshift(&mut state) as usize;
                    if !dense && r & 3 != 0 {
                        "y"
                    } else {
                        pieces[(r >> 8) % pieces.len()]
                    }
                })
                .collect();
            let line = format!("\"{body}\"");
            both::<16>(&line);
            both::<32>(&line);
            both::<64>(&line);
            runs += 1;
        }
        assert_eq!(runs, 30_000);
    }

    #[test]
    fn the_usual_escapes_counted_in_the_run_are_counted_as_each_character_read() {
        // (every piece at every offset around a chunk's sixteen bytes: an escape cut by a chunk's
        // end, a quote escaped, a backslash escaped before a quote, the escapes left to `escape`)
        let pieces = [
            "a", " ", "\\n", "\\t", "\\r", "\\\"", "\\\\", "\\/", "\\u00e9", "\\b", "é", "\u{fdd0}",
        ];
        let mut checked = 0;
        for lead in 0..40 {
            for (p, piece) in pieces.iter().enumerate() {
                for tail in [0, 1, 15, 16, 17, 33] {
                    let next = pieces[(p + tail) % pieces.len()];
                    let body = format!(
                        "{}{}{}{}{}",
                        if lead % 3 == 0 { " " } else { "x" },
                        "y".repeat(lead),
                        piece,
                        next.repeat(1 + tail % 4),
                        "z".repeat(tail)
                    );
                    let [counted, decoded] = sizes_both_ways(&format!("\"{body}\",1"));
                    assert_eq!(counted, decoded, "{body:?}");
                    checked += usize::from(counted.is_some());
                }
            }
        }
        assert!(checked > 2000);
        // (each chunk width against a byte-by-byte count, wherever a chunk's end falls)
        for lead in 0..40 {
            for piece in pieces {
                let line = format!(
                    "\"{}{}{}\\u00e9\"",
                    "y".repeat(lead),
                    piece.repeat(lead % 7 + 1),
                    "z".repeat(lead)
                );
                let b = line.as_bytes();
                let (mut plain, mut i) = (Str::default(), 1);
                while let Some(&c) = b.get(i) {
                    let json = match (c, b.get(i + 1)) {
                        (b'\\', Some(b'n' | b't' | b'r' | b'"' | b'\\')) => 2,
                        (b'\\', Some(b'/')) => 1,
                        (c, _) if !other(c) => 0,
                        _ => break,
                    };
                    (plain.chars, plain.json) = (plain.chars + 1, plain.json + json.max(1));
                    plain.escaped |= json > 0;
                    i += if json > 0 { 2 } else { 1 };
                }
                // (the text of what a run read: serde_json's of the string cut there)
                let read = |stop: usize| -> String {
                    serde_json::from_str(&format!("\"{}\"", &line[1..stop])).expect("JSON")
                };
                let mut runs = vec![(16, {
                    let (mut s, mut text) = (Str::default(), String::new());
                    (
                        counted_in(&line, 1, &mut s, &mut text, |c: &[u8; 16]| {
                            u64::from(others(c))
                        }),
                        s,
                        text,
                    )
                })];
                if std::arch::is_x86_feature_detected!("avx2") {
                    let (mut s, mut text) = (Str::default(), String::new());
                    // SAFETY: AVX2 was detected just above.
                    let stop = unsafe { counted_run_avx2(&line, 1, &mut s, &mut text) };
                    runs.push((32, (stop, s, text)));
                }
                for (width, (stop, s, text)) in runs {
                    assert!(stop == i || stop + width > b.len(), "{line:?} by {width}");
                    assert_eq!(text, read(stop), "{line:?} by {width}");
                    if stop == i {
                        assert_eq!(
                            (s.chars, s.json, s.escaped),
                            (plain.chars, plain.json, plain.escaped),
                            "{line:?}"
                        );
                    }
                }
            }
        }
        // a string cut short, or a raw control character in it: not JSON either way
        for bad in [
            "\"abc\\",
            "\"0123456789abcdef0123\\n",
            "\"0123456789abcdef\u{1}x\"",
        ] {
            assert_eq!(sizes_both_ways(bad), [None, None], "{bad:?}");
        }
        let [counted, _] = sizes_both_ways("\" 0123456789abcdef\\n\\/\\\"x\"");
        assert_eq!(counted, Some((21, 25, true, false, true, 26)));
    }

    /// A message line's facts (a line with other keys is Python's here).
    fn facts(line: &str) -> Option<Facts> {
        line_facts(line.as_bytes(), true, false).map(|(f, _)| f)
    }

    #[test]
    fn a_replys_message_is_its_role_and_content_as_the_line_writes_them() {
        let message = r#"{"role":"assistant","content":[{"type":"text","text":"a \/ b"}]}"#;
        for line in [
            r#"{"id":"m1","role":"assistant","content":[{"type":"text","text":"a \/ b"}],"usage":{"x":1.5}}"#,
            r#"{ "content" : [{"type":"text","text":"a \/ b"}] , "t":[{}] ,"role":"assistant"}"#,
            "{\"role\":\"assistant\",\"id\":1,\"content\":[{\"type\":\"text\",\"text\":\"a \\/ b\"}]}\r\n",
        ] {
            assert_eq!(reply_message_text(line.as_bytes()).as_deref(), Some(message), "{line}");
            // (its facts' length is the message's as orjson writes it; the caller's check)
            let (f, _) = line_facts(line.as_bytes(), true, true).unwrap();
            assert_eq!(f.chars, message.len() - 1, "{line}"); // (orjson writes "/" unescaped)
        }
        for line in [
            r#"{"role":"assistant","content":"a"}"#, // (its own message)
            r#"{"role":"assistant","content":"a","content":"b","id":1}"#, // (content twice)
            r#"{"role":"assistant","role":"user","content":"b","id":1}"#, // (role twice)
            r#"{"content":"b","id":1}"#,             // (no role)
            r#"{"role":"user","content":[1.5],"id":1}"#, // (a float in it)
            r#"{"role":"user","content":"b","id":1} x"#, // (more after it)
            r#"{"role":"user","content":"b","id":1"#, // (cut short)
            r#"["role","content","id"]"#,
        ] {
            assert_eq!(reply_message_text(line.as_bytes()), None, "{line}");
        }
        assert_eq!(
            reply_message_text(b"{\"role\":\"user\",\"content\":\"\xff\",\"id\":1}"),
            None
        );
    }

    #[test]
    fn a_reply_gives_its_facts_and_where_its_other_members_stand() {
        let line = concat!(
            r#"{"id":"m1", "type":"message","content":[{"type":"text","text":"hi"}],"#,
            r#""usage":{"input_tokens":10,"x":[1.5e-3,-0.0,18446744073709551616]},"role":"assistant","#,
            r#""t":{"a":{"b":[{}]}}}"#
        );
        let (f, others) = line_facts(line.as_bytes(), true, true).unwrap();
        let message = r#"{"role":"assistant","content":[{"type":"text","text":"hi"}]}"#;
        assert_eq!(
            (f.chars, f.role, f.has_text),
            (message.len(), Role::Assistant, true)
        );
        let spans: Vec<&str> = others.iter().map(|&(a, b)| &line[a..b]).collect();
        assert_eq!(
            spans,
            [
                r#""id":"m1""#,
                r#""type":"message""#,
                r#""usage":{"input_tokens":10,"x":[1.5e-3,-0.0,18446744073709551616]}"#,
                r#""t":{"a":{"b":[{}]}}"#
            ]
        );
        // a message line: no other member; the content's own numbers are still held to orjson's
        let (_, others) = line_facts(br#"{"role":"user","content":"x"}"#, true, true).unwrap();
        assert!(others.is_empty());
        for line in [
            r#"{"role":"user","content":"x","model":1.}"#,
            r#"{"role":"user","content":"x","model":.5}"#,
            r#"{"role":"user","content":"x","model":1e}"#,
            r#"{"role":"user","content":"x","model":01}"#,
            r#"{"role":"user","content":"x","model":NaN}"#,
            r#"{"role":"user","content":"x","model":1.8e308}"#,
            r#"{"role":"user","content":"x","model":-3e503}"#,
            r#"{"role":"user","content":"x","model":"a","model":"b"}"#,
            r#"{"role":"user","content":"x","role":"user"}"#,
            r#"{"role":"user","content":"x","recorded_compaction":{}}"#,
            r#"{"role":"user","model":"m"}"#,
            r#"{"content":"x","model":"m"}"#,
            r#"{"role":"user","content":[{"type":"x","a":1.5}],"model":"m"}"#,
            r#"{"role":"user","content":"x","model":"m",}"#,
        ] {
            assert_eq!(line_facts(line.as_bytes(), true, true), None, "{line}");
        }
    }

    #[test]
    fn a_string_message_is_sized_as_orjson_writes_it() {
        let f = facts(r#"{"role": "user", "content": "a\u00e9\n\"b\u0001"}"#).unwrap();
        // {"role":"user","content":"aé\n\"b\u0001"}
        assert_eq!(
            f.chars,
            r#"{"role":"user","content":"aé\n\"b\u0001"}"#.chars().count()
        );
        assert_eq!(f.role, Role::User);
        assert!(f.has_text && !f.empty);
    }

    /// `reply_members` of a line whose other members are `members` (after its message).
    fn reply(role: &str, members: &str) -> Option<ReplyMembers> {
        let line = format!(r#"{{"role":"{role}","content":"x",{members}}}"#);
        let (f, others) = line_facts(line.as_bytes(), true, true).unwrap();
        reply_members(line.as_bytes(), &others, f.role == Role::Assistant)
    }

    fn usage(counts: [u64; 4], one_hour: Option<u64>) -> Option<Usage> {
        Some(Usage { counts, one_hour })
    }

    #[test]
    fn a_replys_members_are_read_as_the_loader_reads_them() {
        let r = reply(
            "assistant",
            concat!(
                r#""id":"m1","model":"claude-x","usage":{"input_tokens":3,"output_tokens":7,"#,
                r#""cache_read_input_tokens":null,"service_tier":"standard","server_tool_use":{"a":1.5},"#,
                r#""cache_creation_input_tokens":100,"cache_creation":{"ephemeral_1h_input_tokens":250}},"#,
                r#""timestamp":"2026-01-01T00:00:00Z","recorded_format":"codex","stop_reason":null"#
            ),
        )
        .unwrap();
        assert_eq!(r.model.as_deref(), Some("claude-x"));
        assert_eq!(r.recorded_format.as_deref(), Some("codex"));
        // (what `compactlab convert` kept of the recording: that reply is Python's)
        assert_eq!(
            reply("assistant", r#""recorded_metadata":{"version":"2.0.76"}"#),
            None
        );
        assert_eq!(r.timestamp.as_deref(), Some("2026-01-01T00:00:00Z"));
        // (the 1-hour writes at most the writes)
        assert_eq!(r.usage, usage([3, 100, 0, 7], Some(100)));
        // the flat 1-hour key where `cache_creation` is no object; none where it is one without it
        let flat =
            r#""usage":{"cache_creation_input_tokens":9,"cache_creation_1h_input_tokens":4}"#;
        assert_eq!(
            reply("assistant", flat).unwrap().usage,
            usage([0, 9, 0, 0], Some(4))
        );
        let both = concat!(
            r#""usage":{"cache_creation_input_tokens":9,"cache_creation_1h_input_tokens":4,"#,
            r#""cache_creation":{"ephemeral_5m_input_tokens":9}}"#
        );
        assert_eq!(
            reply("assistant", both).unwrap().usage,
            usage([0, 9, 0, 0], None)
        );
        // no usage: an empty one, one that is no object, a user's; a model that is no string
        assert_eq!(reply("assistant", r#""usage":{}"#).unwrap().usage, None);
        assert_eq!(reply("assistant", r#""usage":[1]"#).unwrap().usage, None);
        let user = reply("user", r#""usage":{"input_tokens":1.5},"model":7"#).unwrap();
        assert_eq!((user.usage, user.model), (None, None));
        let escaped = reply("assistant", r#""model":"a\u00e9\"b""#).unwrap();
        assert_eq!(escaped.model.as_deref(), Some("aé\"b"));
    }

    #[test]
    fn a_count_not_written_plainly_is_pythons() {
        for count in [
            "1.0",
            "\"12\"",
            "-1",
            "true",
            "1000000000000000",
            "1e3",
            "[1]",
        ] {
            let members = format!(r#""usage":{{"input_tokens":{count}}}"#);
            assert_eq!(reply("assistant", &members), None, "{count}");
            let members =
                format!(r#""usage":{{"cache_creation":{{"ephemeral_1h_input_tokens":{count}}}}}"#);
            assert_eq!(reply("assistant", &members), None, "{count}");
        }
        let big = r#""usage":{"output_tokens":999999999999999}"#;
        assert_eq!(
            reply("assistant", big).unwrap().usage,
            usage([0, 0, 0, 999_999_999_999_999], None)
        );
    }

    #[test]
    fn blocks_give_their_facts() {
        let line = concat!(
            r#"{"role":"assistant","content":[{"type":"text","text":"  "},"#,
            r#"{"type":"tool_use","id":"t1","name":"read","input":{"notebook_path":"n","path":"p","file_path":""}}]}"#
        );
        let f = facts(line).unwrap();
        assert_eq!(f.chars, line.len());
        assert!(!f.has_text);
        assert_eq!(
            f.uses,
            vec![ToolUse {
                id: "t1".into(),
                name: "read".into(),
                files: vec!["p".into(), "n".into()]
            }]
        );
        let line = concat!(
            r#"{"content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"t1","#,
            r#""content":[{"type":"text","text":"héllo"},{"type":"image","n":1}],"is_error":0},"#,
            r#"{"tool_use_id":"t2","type":"tool_result","is_error":[1]}],"role":"user"}"#
        );
        let f = facts(line).unwrap();
        assert_eq!(f.chars, line.chars().count());
        assert_eq!(f.misplaced, vec!["t1".to_string(), "t2".to_string()]);
        let image = r#"{"type":"image","n":1}"#.len();
        assert_eq!(f.results[0].size, 5 + image);
        assert!(!f.results[0].is_error && !f.results[0].is_str);
        assert_eq!(f.results[1].json_size, -1);
        assert!(f.results[1].is_error && f.results[1].is_str);
    }

    #[test]
    fn what_python_decides_is_left_to_it() {
        for line in [
            r#"{"role":"user","content":"x","model":"m"}"#,
            r#"{"role":"user","role":"user"}"#,
            r#"{"role":"system","content":"x"}"#,
            r#"{"role":"user","content":{"a":1}}"#,
            r#"{"role":"user","content":[1]}"#,
            r#"{"role":"user","content":[{"type":"text"}]}"#,
            r#"{"role":"user","content":[{"type":1}]}"#,
            r#"{"role":"user","content":[{"type":"tool_result"}]}"#,
            r#"{"role":"assistant","content":[{"type":"tool_use","id":"a"}]}"#,
            r#"{"role":"user","content":[{"type":"x","a":1,"a":2}]}"#,
            r#"{"role":"user","content":[{"type":"x","a":1.5}]}"#,
            r#"{"role":"user","content":[{"type":"x","a":-0}]}"#,
            r#"{"role":"user","content":[{"type":"x","a":1234567890123456789}]}"#,
            r#"{"role":"user","content":[{"type":"x","a":01}]}"#,
            r#"{"role":"user","content":"\ud800"}"#,
            r#"{"role":"user","content":"\udc00x"}"#,
            r#"{"role":"user","content":"\x"}"#,
            "{\"role\":\"user\",\"content\":\"\u{fdd0}[image len=5]\"}",
            "{\"role\":\"user\",\"content\":\"\u{fdd0}[IMAGE len=1234567890123456]\"}",
            "{\"role\":\"user\",\"content\":\"\u{fdd0}[IMAGE len=5 a=1 b=2 c=3 d=4 e=5]\"}",
            "{\"role\":\"user\",\"content\":\"\u{fdd0}[IMAGE len=5 sha=xyz]\"}",
            "{\"role\":\"user\",\"content\":\"\u{fdd0}[IMAGE len=\\u0035]\"}",
            r#"{"role":"user","content":"\ufdd0[IMAGE len=5]"}"#,
            "{\"role\":\"user\",\"content\":\"a\tb\"}",
            r#"{"role":"user","content":"x"} x"#,
            r#"{"role":"user","content":"x",}"#,
            r#"{"role":"user","content":[{"type":"x","a":tru}]}"#,
        ] {
            assert_eq!(facts(line), None, "{line}");
        }
        let deep = format!(
            r#"{{"role":"user","content":[{{"type":"x","a":{}1{}}}]}}"#,
            "[".repeat(120),
            "]".repeat(120)
        );
        assert_eq!(facts(&deep), None);
    }

    #[test]
    fn a_json_string_is_written_a_run_at_a_time_as_one_character_at_a_time() {
        // (the reference: each character as orjson writes it)
        let one_by_one = |text: &str| {
            let mut out = String::from("\"");
            for c in text.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\u{8}' => out.push_str("\\b"),
                    '\t' => out.push_str("\\t"),
                    '\n' => out.push_str("\\n"),
                    '\u{c}' => out.push_str("\\f"),
                    '\r' => out.push_str("\\r"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        };
        let pieces: Vec<String> = (0u32..0x80)
            .chain([0xe9, 0x2028, 0xfdd0, 0x1f600])
            .filter_map(char::from_u32)
            .map(String::from)
            .chain(["", "plain text", "é\"ü\n", "\u{1f600}\\"].map(String::from))
            .collect();
        for a in &pieces {
            for b in &pieces {
                let text = format!("{a}{b}{a}");
                let mut out = String::from("kept:");
                push_json_string(&text, &mut out);
                assert_eq!(out, format!("kept:{}", one_by_one(&text)), "{text:?}");
            }
        }
    }

    #[test]
    fn a_json_strings_characters_are_counted_as_they_are_written() {
        let mut texts: Vec<String> = (0u32..0x80)
            .chain([0xe9, 0x2028, 0xfdd0, 0x1f600])
            .filter_map(char::from_u32)
            .map(|c| format!("a{c}b"))
            .collect();
        texts.extend([
            "".to_string(),
            "[Old tool result content cleared]".to_string(),
        ]);
        for text in &texts {
            let mut out = String::new();
            push_json_string(text, &mut out);
            assert_eq!(json_string_chars(text), out.chars().count(), "{text:?}");
        }
    }

    #[test]
    fn a_sized_placeholder_counts_as_its_n_characters() {
        let line =
            "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\",\
                    \"content\":\"ab\u{fdd0}[REDACTED_TEXT len=1000 sha=0f9a]c\"}]}";
        let f = facts(line).unwrap();
        let placeholder = "\u{fdd0}[REDACTED_TEXT len=1000 sha=0f9a]".chars().count();
        assert_eq!(f.chars, line.chars().count() - placeholder + 1000);
        assert_eq!(f.results[0].size, 1003);
        assert_eq!(f.results[0].json_size, 1003 + 2);
        assert_eq!(
            sized_placeholder(b"[X len=5 a=1 b=2 c=3 d=4]z"),
            Some((5, 25))
        );
        assert_eq!(sized_placeholder(b"[X len=05]"), Some((5, 10)));
        assert_eq!(sized_placeholder(b"[X len=5 ]"), None);
        assert_eq!(sized_placeholder(b"[X len=]"), None);
        assert_eq!(sized_placeholder(b"[X_ len=1"), None);
    }

    #[test]
    fn surrogate_pairs_are_one_character() {
        let f = facts(r#"{"role":"user","content":"\ud83d\ude00"}"#).unwrap();
        assert_eq!(f.chars, r#"{"role":"user","content":"😀"}"#.chars().count());
    }

    #[test]
    fn a_results_content_is_found_where_it_stands() {
        let placed = |line: &str| line_facts_placed(line.as_bytes(), true, true).map(|(_, _, s)| s);
        let line = r#"{"content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t1","content":"x\"y"},{"type":"tool_result","tool_use_id":"t2"},{"type":"tool_result","tool_use_id":"t3","content":[{"type":"text","text":"z","content":"inner"}],"is_error":true}],"role":"user"}"#;
        let spans = placed(line).unwrap();
        let texts: Vec<(usize, &str)> = spans
            .iter()
            .map(|(b, at)| (*b, &line[at.clone()]))
            .collect();
        // (the content read after the role: a block without content has none; an inner block's is not one)
        assert_eq!(
            texts,
            [
                (1, r#""x\"y""#),
                (3, r#"[{"type":"text","text":"z","content":"inner"}]"#)
            ]
        );
        let spaced = r#" { "role" : "user" , "content" : [ { "type" : "tool_result" , "tool_use_id" : "t" , "content" : [ 1 , 2 ] } ] } "#;
        let spans = placed(spaced).unwrap();
        assert_eq!(&spaced[spans[0].1.clone()], "[ 1 , 2 ]");
        let assistant = r#"{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}"#;
        assert_eq!(placed(assistant), Some(vec![]));
        let reply = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}],"usage":{}}"#;
        let x = reply.find(r#""x""#).unwrap();
        assert_eq!(placed(reply).unwrap()[0].1, x..x + 3);
        assert_eq!(placed(r#"{"role":"user","content":[]} x"#), None);
    }

    #[test]
    fn a_string_is_written_as_orjson_writes_it_and_read_back() {
        let text: String = (0u8..0x20)
            .map(char::from)
            .chain("\x7f\"\\/é\u{2028}😀".chars())
            .collect();
        let mut out = String::new();
        push_json_string(&text, &mut out);
        // (orjson.dumps of the same string)
        let orjson = concat!(
            r#""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f"#,
            r#"\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d"#,
            "\\u001e\\u001f\x7f\\\"\\\\/é\u{2028}😀\""
        );
        assert_eq!(out, orjson);
        assert_eq!(string_text(out.as_bytes()).as_deref(), Some(text.as_str()));
        assert_eq!(
            string_text(br#""a\/b\u00e9\ud83d\ude00""#).as_deref(),
            Some("a/bé😀")
        );
        assert_eq!(string_text(br#""a" "#), None);
        assert_eq!(string_text(br#"["a"]"#), None);
        assert_eq!(string_text(br#""\ud83d""#), None); // (a lone surrogate: Python's)
    }
}
