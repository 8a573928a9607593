//! Claude Code session logs read as `transcripts/claude_code.py` reads them (its reference), and
//! the same messages written as an Anthropic messages file: one message a line, a reply that
//! recorded its usage with that usage, its model and its time as an API response object's
//! members. The replay loads that file leaving each message in it until something reads it
//! (`engine/feeds/claude_code_lazily.py`), as it loads a big Anthropic messages file, where the
//! Python loader kept every message parsed (a 5,000-call session: 118 MB and 0.7 s of CPU).
//!
//! A line's envelope is read for what the loader reads of it (`type`, `message`, `isSidechain`,
//! `isCompactSummary`, `isVisibleInTranscriptOnly`, `subtype`, `summary`, `title`, `sessionId`,
//! `timestamp`, `requestId`, `uuid`, `version`); the message is checked as the Anthropic reader
//! checks one (`facts::line_facts`), and its blocks are copied as they stand on the line. A
//! reply's lines are grouped by message id, each tool result goes to the reply that called it,
//! and adjacent user messages are merged, in the order the loader emits them.
//!
//! Anything this reading does not vouch for makes the whole file Python's (None): a line that is
//! not one JSON object this reader reads (the loader's bad line, or one it reads as Python only),
//! a key of the envelope given twice, a message whose role is not its line's type, an empty usage
//! object (the loader records zeros for it, the Anthropic reader nothing), an id, flag or type of
//! another JSON type than the loader's tests expect, a line longer than the reader's limit or
//! blank lines past it. What the loader reads of the rare lines it keeps whole (a compaction's
//! summary and boundary, an inline subagent's reply) is handed to Python as those lines.

use std::io;

use rustc_hash::FxHashMap;

use crate::facts::{self, Role, Scan};
use crate::pieces::Pieces;

/// What a session is read from: its bytes at an offset (`pread`), fewer only at its end.
pub trait Source {
    /// Reads into `buf`'s spare capacity (its bytes are not written first) from `at`: how many
    /// bytes it read (0: none are left there).
    fn read_into(&self, buf: &mut Vec<u8>, at: u64) -> io::Result<usize>;
}

impl Source for std::fs::File {
    fn read_into(&self, buf: &mut Vec<u8>, at: u64) -> io::Result<usize> {
        Ok(rustix::io::pread(
            self,
            rustix::buffer::spare_capacity(buf),
            at,
        )?)
    }
}

impl Source for [u8] {
    fn read_into(&self, buf: &mut Vec<u8>, at: u64) -> io::Result<usize> {
        let rest = usize::try_from(at)
            .ok()
            .and_then(|at| self.get(at..))
            .unwrap_or_default();
        let n = (buf.capacity() - buf.len()).min(rest.len());
        buf.extend_from_slice(&rest[..n]);
        Ok(n)
    }
}

/// Reads into `buf` as many bytes as its capacity from `at` (fewer only at the end of `src`).
fn fill_from<S: Source + ?Sized>(src: &S, buf: &mut Vec<u8>, at: u64) -> io::Result<()> {
    let start = buf.len();
    while buf.len() < buf.capacity() {
        match src.read_into(buf, at + (buf.len() - start) as u64) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How many bytes the first reading takes at a time, and each piece the writing reads again.
const PIECE: usize = 1 << 20;

/// Bytes `start..end` of the session's file.
pub type Span = std::ops::Range<usize>;

/// One reply: its lines' blocks, the results of its tool calls, its last usage object, its last
/// model (a JSON string) and the time of its first line (a JSON string).
#[derive(Default)]
struct Group {
    blocks: Vec<Block>,
    results: Vec<Span>,
    usage: Option<Span>,
    model: Option<Span>,
    timestamp: Option<Span>,
}

/// A block of a reply's content: an object as it stands, or a string content as a text block.
enum Block {
    Object(Span),
    Text(Span),
}

/// A user line's message as the loader keeps it.
enum Item {
    /// a string content
    Str(Span),
    /// a list content, unchanged: the list and its blocks
    List(Span, Vec<Span>),
    /// a list content whose other blocks went to their replies' results: the rest
    Rest(Vec<Span>),
}

/// The conversation in the order the loader emits it.
enum Seq {
    Assistant(usize),
    User(Item),
    /// a compaction: its summary's line and the boundary line before it (None: none)
    Compaction(Span, Option<Span>),
}

/// Why a line is left out, as the loader counts it (`ignored_lines`).
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum Ignored {
    /// a line of this `type` (its JSON text; None: no `type`)
    Kind(Option<Vec<u8>>),
    /// a user line shown in the transcript only
    TranscriptOnly,
}

/// A user buffer's item while the messages are written: a user line's, or a reply's results.
enum Buffered {
    Seq(usize),
    Results(usize),
}

/// A session read: its conversation, the metadata the loader gives it, and where the writing of
/// its messages stands.
pub struct Reading {
    groups: Vec<Group>,
    seq: Vec<Seq>,
    /// the first version named (as text, under 40 characters)
    pub version: Option<String>,
    /// whether the first conversation line is a sidechain's: the file is a subagent's
    pub subagent: bool,
    /// the main session's inline subagent lines, and the replies among them (their usage is read
    /// by Python, as the loader reads it)
    pub sidechain_lines: u64,
    pub sidechain_replies: Vec<Span>,
    pub ignored: Vec<(Ignored, u64)>,
    pub title: Option<String>,
    pub session_id: Option<String>,
    /// each compaction as the messages were written: (the messages before it, its summary's
    /// line, its boundary's line)
    pub compactions: Vec<(usize, Span, Option<Span>)>,
    at: usize,
    buffer: Vec<Buffered>,
    /// the messages written so far
    pub written: usize,
    done: bool,
    /// the pieces of the file its blocks are read again from
    pieces: Pieces<()>,
}

/// The members of a line's envelope the loader reads (each value's span on the line).
#[derive(Default)]
struct Envelope {
    kind: Option<Span>,
    message: Option<Span>,
    sidechain: Option<Span>,
    compact_summary: Option<Span>,
    transcript_only: Option<Span>,
    subtype: Option<Span>,
    summary: Option<Span>,
    title: Option<Span>,
    session_id: Option<Span>,
    timestamp: Option<Span>,
    request_id: Option<Span>,
    uuid: Option<Span>,
    version: Option<Span>,
}

/// A block of a message's content: where it stands, and what the loader asks of it.
struct Element {
    span: Span,
    /// a `tool_use`'s id
    use_id: Option<String>,
    /// a `tool_result`'s `tool_use_id` (Some(None): a result without a string one)
    result_of: Option<Option<String>>,
}

/// What the loader reads of a message besides its facts.
struct Message {
    /// the content: a string's span, or a list's and its blocks
    content: Span,
    elements: Option<Vec<Element>>,
    id: Id,
    model: Option<Span>,
    usage: Option<Span>,
}

/// A value in `message.get("id") or obj.get("requestId") or …`.
enum Id {
    /// absent, null or empty: the next one is asked
    Next,
    Key(String),
}

/// A value's truth as the loader tests it (`if obj.get(...)`); None where it is of another type
/// than a flag (Python's).
fn flag(line: &[u8], span: &Option<Span>) -> Option<bool> {
    match span.as_ref().map(|s| &line[s.clone()]) {
        None | Some(b"null") | Some(b"false") => Some(false),
        Some(b"true") => Some(true),
        _ => None,
    }
}

/// The text of a JSON string value (None: not a string).
fn text(line: &[u8], span: &Option<Span>) -> Option<String> {
    let span = span.as_ref()?;
    let value = &line[span.clone()];
    if value.first() != Some(&b'"') {
        return None;
    }
    let mut s = Scan::new(value)?;
    let (t, _) = s.string_value()?;
    Some(t.into_owned())
}

/// An id as the loader's `or` reads it; None where it is of a type it is not tested for here.
fn id(line: &[u8], span: &Option<Span>) -> Option<Id> {
    match span.as_ref().map(|s| &line[s.clone()]) {
        None | Some(b"null") | Some(b"\"\"") => Some(Id::Next),
        Some(v) if v.first() == Some(&b'"') => Some(Id::Key(text(line, span)?)),
        _ => None,
    }
}

/// The envelope of `line` (one JSON object, then only whitespace), or None.
fn envelope(line: &[u8]) -> Option<Envelope> {
    let mut s = Scan::new(line)?;
    s.ws();
    if s.peek()? != b'{' {
        return None;
    }
    s.any_number = true;
    let mut e = Envelope::default();
    s.members(0, |s, key| {
        let start = s.i;
        s.skip()?;
        let span = Some(start..s.i);
        match key {
            "type" => e.kind = span,
            "message" => e.message = span,
            "isSidechain" => e.sidechain = span,
            "isCompactSummary" => e.compact_summary = span,
            "isVisibleInTranscriptOnly" => e.transcript_only = span,
            "subtype" => e.subtype = span,
            "summary" => e.summary = span,
            "title" => e.title = span,
            "sessionId" => e.session_id = span,
            "timestamp" => e.timestamp = span,
            "requestId" => e.request_id = span,
            "uuid" => e.uuid = span,
            "version" => e.version = span,
            _ => {}
        }
        Some(0)
    })?;
    s.ws();
    (s.i == line.len()).then_some(e)
}

/// The parts of a message (`bytes`, a message the Anthropic reader vouched for) the loader reads,
/// their spans counted from `at`.
fn message(bytes: &[u8], at: usize) -> Option<Message> {
    let mut s = Scan::new(bytes)?;
    s.any_number = true;
    let (mut content, mut elements, mut id_span, mut model, mut usage) =
        (None, None, None, None, None);
    s.members(0, |s, key| {
        let start = s.i;
        match key {
            "content" if s.peek()? == b'[' => {
                let mut found = Vec::new();
                s.list(0, |s, _| {
                    if s.peek()? != b'{' {
                        return None; // (a block that is no object: Python's)
                    }
                    let begin = s.i;
                    let (mut kind, mut use_id, mut result_of) = (None, None, None);
                    s.members(1, |s, key| {
                        let start = s.i;
                        s.skip()?;
                        match key {
                            "type" => kind = Some(start..s.i),
                            "id" => use_id = Some(start..s.i),
                            "tool_use_id" => result_of = Some(start..s.i),
                            _ => {}
                        }
                        Some(0)
                    })?;
                    let block = &bytes[begin..s.i];
                    let shift = |r: Span| r.start - begin..r.end - begin;
                    let kind = text(block, &kind.map(shift));
                    let use_id = match kind.as_deref() {
                        Some("tool_use") => Some(text(block, &use_id.map(shift))?),
                        _ => None,
                    };
                    let result_of = match kind.as_deref() {
                        Some("tool_result") => match result_of.map(shift) {
                            None => Some(None),
                            Some(r) if block[r.start] == b'"' => Some(Some(text(block, &Some(r))?)),
                            Some(r) if &block[r.clone()] == b"null" => Some(None),
                            _ => return None, // (a number or a container: Python's)
                        },
                        _ => None,
                    };
                    found.push(Element {
                        span: at + begin..at + s.i,
                        use_id,
                        result_of,
                    });
                    Some(0)
                })?;
                elements = Some(found);
                content = Some(at + start..at + s.i);
            }
            _ => {
                s.skip()?;
                let span = Some(start..s.i);
                match key {
                    "content" => content = Some(at + start..at + s.i),
                    "id" => id_span = span,
                    "model" => model = span,
                    "usage" => usage = span,
                    _ => {}
                }
            }
        }
        Some(0)
    })?;
    let id = id(bytes, &id_span)?;
    let model = model.filter(|m| bytes[m.start] == b'"');
    let usage = usage.filter(|u| bytes[u.start] == b'{');
    Some(Message {
        content: content?,
        elements,
        id,
        model: model.map(|m| at + m.start..at + m.end),
        usage: usage.map(|u| at + u.start..at + u.end),
    })
}

impl Reading {
    fn new() -> Self {
        Reading {
            groups: Vec::new(),
            seq: Vec::new(),
            version: None,
            subagent: false,
            sidechain_lines: 0,
            sidechain_replies: Vec::new(),
            ignored: Vec::new(),
            title: None,
            session_id: None,
            compactions: Vec::new(),
            at: 0,
            buffer: Vec::new(),
            written: 0,
            done: false,
            pieces: Pieces::new(PIECE, 4),
        }
    }

    fn ignore(&mut self, why: Ignored) {
        match self.ignored.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => self.ignored.push((why, 1)),
        }
    }

    /// Writes the next messages into `out` (empty) until it holds `limit` bytes or more, their
    /// blocks read again from `src` (the session read): false once every message is written. An
    /// error where `src` no longer holds them (changed since it was read).
    pub fn fill<S: Source + ?Sized>(
        &mut self,
        src: &S,
        out: &mut Vec<u8>,
        limit: usize,
    ) -> io::Result<bool> {
        while self.at < self.seq.len() && out.len() < limit {
            let at = self.at;
            self.at += 1;
            match &self.seq[at] {
                Seq::Assistant(g) => {
                    let g = *g;
                    self.flush(src, out)?;
                    self.reply(src, g, out)?;
                    if !self.groups[g].results.is_empty() {
                        self.buffer.push(Buffered::Results(g));
                    }
                }
                Seq::User(_) => self.buffer.push(Buffered::Seq(at)),
                Seq::Compaction(summary, boundary) => {
                    let (summary, boundary) = (summary.clone(), boundary.clone());
                    self.flush(src, out)?;
                    self.compactions.push((self.written, summary, boundary));
                }
            }
        }
        if self.at == self.seq.len() && !self.done {
            self.flush(src, out)?;
            self.done = true;
        }
        Ok(!self.done || self.at < self.seq.len())
    }

    /// The bytes `span` of `src` (a line the first reading read: its compaction's, its inline
    /// subagents').
    pub fn bytes<S: Source + ?Sized>(&mut self, src: &S, span: &Span) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(span.len());
        let mut copy = Copier {
            pieces: &mut self.pieces,
            src,
        };
        copy.put(span, &mut out)?;
        Ok(out)
    }

    fn reply<S: Source + ?Sized>(
        &mut self,
        src: &S,
        g: usize,
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        let group = &self.groups[g];
        let mut copy = Copier {
            pieces: &mut self.pieces,
            src,
        };
        out.extend_from_slice(br#"{"role":"assistant","content":["#);
        for (k, block) in group.blocks.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            match block {
                Block::Object(span) => copy.put(span, out)?,
                Block::Text(span) => copy.text_block(span, out)?,
            }
        }
        out.push(b']');
        if let Some(usage) = &group.usage {
            out.extend_from_slice(br#","usage":"#);
            copy.put(usage, out)?;
            if let Some(t) = group.timestamp.as_ref().filter(|t| t.len() > 2) {
                out.extend_from_slice(br#","timestamp":"#);
                copy.put(t, out)?;
            }
        }
        if let Some(m) = group.model.as_ref().filter(|m| m.len() > 2) {
            out.extend_from_slice(br#","model":"#);
            copy.put(m, out)?;
        }
        out.extend_from_slice(b"}\n");
        self.written += 1;
        Ok(())
    }

    /// The user messages held, as one message (`_emit`'s `flush`).
    fn flush<S: Source + ?Sized>(&mut self, src: &S, out: &mut Vec<u8>) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let mut copy = Copier {
            pieces: &mut self.pieces,
            src,
        };
        out.extend_from_slice(br#"{"role":"user","content":"#);
        if let [one] = &self.buffer[..] {
            match one {
                Buffered::Seq(k) => match &self.seq[*k] {
                    Seq::User(Item::Str(span) | Item::List(span, _)) => copy.put(span, out)?,
                    Seq::User(Item::Rest(blocks)) => copy.list(blocks, out)?,
                    _ => unreachable!("only a user line's item is buffered by its place"),
                },
                Buffered::Results(g) => copy.list(&self.groups[*g].results, out)?,
            }
        } else {
            out.push(b'[');
            let mut first = true;
            for item in &self.buffer {
                let (text, spans): (Option<&Span>, &[Span]) = match item {
                    Buffered::Seq(k) => match &self.seq[*k] {
                        Seq::User(Item::Str(span)) => (Some(span), &[]),
                        Seq::User(Item::List(_, blocks) | Item::Rest(blocks)) => (None, blocks),
                        _ => unreachable!("only a user line's item is buffered by its place"),
                    },
                    Buffered::Results(g) => (None, &self.groups[*g].results),
                };
                let mut comma = |out: &mut Vec<u8>| {
                    if !std::mem::replace(&mut first, false) {
                        out.push(b',');
                    }
                };
                if let Some(span) = text {
                    comma(out);
                    copy.text_block(span, out)?;
                }
                for span in spans {
                    comma(out);
                    copy.put(span, out)?;
                }
            }
            out.push(b']');
        }
        out.extend_from_slice(b"}\n");
        self.written += 1;
        self.buffer.clear();
        Ok(())
    }
}

/// What the writing copies its blocks from: the session (`src`), read again a piece at a time.
struct Copier<'a, S: ?Sized> {
    pieces: &'a mut Pieces<()>,
    src: &'a S,
}

impl<S: Source + ?Sized> Copier<'_, S> {
    /// The bytes `span` of the session into `out`: cut from a piece read again (the messages are
    /// written in about the order of the file), or read alone where longer than a piece.
    fn put(&mut self, span: &Span, out: &mut Vec<u8>) -> io::Result<()> {
        let src = self.src;
        let at = span.start as u64;
        if let Some(bytes) = self
            .pieces
            .get((), at, span.len(), |buf, at| fill_from(src, buf, at))?
        {
            out.extend_from_slice(bytes);
            return Ok(());
        }
        let mut alone = Vec::with_capacity(span.len());
        fill_from(src, &mut alone, at)?;
        if alone.len() < span.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file was cut short",
            ));
        }
        out.extend_from_slice(&alone);
        Ok(())
    }

    /// A string content written as a text block (`_as_blocks`).
    fn text_block(&mut self, span: &Span, out: &mut Vec<u8>) -> io::Result<()> {
        out.extend_from_slice(br#"{"type":"text","text":"#);
        self.put(span, out)?;
        out.push(b'}');
        Ok(())
    }

    /// Blocks as a JSON list.
    fn list(&mut self, blocks: &[Span], out: &mut Vec<u8>) -> io::Result<()> {
        out.push(b'[');
        for (k, span) in blocks.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            self.put(span, out)?;
        }
        out.push(b']');
        Ok(())
    }
}

/// The types of the lines that hold a message of the conversation.
const CONVERSATION: [&str; 2] = ["user", "assistant"];

/// The session in `data` read as the loader reads it, or None where Python reads it (see the
/// module's documentation). `max_line`: the longest line the reader takes (with its line break);
/// `max_blank`: the blank lines in a row it takes.
/// What the first reading holds besides the session read so far.
#[derive(Default)]
struct First {
    by_id: FxHashMap<String, usize>,
    owner: FxHashMap<String, usize>,
    /// whether the first conversation line is a sidechain's (None: none yet)
    decided: Option<bool>,
    /// a compaction's boundary line, until its summary's
    pending: Option<Span>,
}

impl First {
    /// The line at `start` of the file (its number `lineno`, not blank) read into `r`; None where
    /// Python reads the session.
    fn line(&mut self, r: &mut Reading, line: &[u8], start: usize, lineno: usize) -> Option<()> {
        let First {
            by_id,
            owner,
            decided,
            pending,
        } = self;
        let end = start + line.len();
        let e = envelope(line)?;
        if r.version.is_none() {
            if let Some(v) = text(line, &e.version) {
                if v.chars().count() < 40 {
                    r.version = Some(v);
                }
            }
        }
        let kind = match e.kind.as_ref().map(|k| &line[k.clone()]) {
            Some(k) if matches!(k.first(), Some(b'[' | b'{')) => return None, // (unhashable: Python's)
            Some(k) if k.first() == Some(&b'"') => text(line, &e.kind),
            _ => None,
        };
        let is_object = |span: &Option<Span>| span.as_ref().is_some_and(|s| line[s.start] == b'{');
        let conversation = kind
            .as_deref()
            .filter(|k| CONVERSATION.contains(k) && is_object(&e.message));
        if let Some(kind) = conversation {
            let sidechain = e
                .sidechain
                .as_ref()
                .is_some_and(|s| &line[s.clone()] == b"true");
            let subagent = *decided.get_or_insert(sidechain);
            if sidechain && !subagent {
                r.sidechain_lines += 1;
                if kind == "assistant" {
                    r.sidechain_replies.push(start..end);
                }
                return Some(());
            }
            let span = e.message.clone()?;
            let bytes = &line[span.clone()];
            let (facts, _) = facts::line_facts(bytes, false, true)?;
            let role_is_kind = match facts.role {
                Role::User => kind == "user",
                Role::Assistant => kind == "assistant",
            };
            if !role_is_kind {
                return None; // ("message role is not …": the loader's bad line)
            }
            let m = message(bytes, start + span.start)?;
            if kind == "assistant" {
                if let Some(u) = &m.usage {
                    let mut s = Scan::new(&line[u.start - start..u.end - start])?;
                    s.usage()??; // (None: Python reads it; an empty object: the loader's zeros)
                }
                let key = match m.id {
                    Id::Key(k) => k,
                    Id::Next => match id(line, &e.request_id)? {
                        Id::Key(k) => k,
                        Id::Next => match id(line, &e.uuid)? {
                            Id::Key(k) => k,
                            Id::Next => format!("line{lineno}"),
                        },
                    },
                };
                let g = *by_id.entry(key).or_insert_with(|| {
                    let timestamp = e
                        .timestamp
                        .as_ref()
                        .filter(|t| line[t.start] == b'"')
                        .map(|t| start + t.start..start + t.end);
                    r.groups.push(Group {
                        timestamp,
                        ..Group::default()
                    });
                    r.seq.push(Seq::Assistant(r.groups.len() - 1));
                    r.groups.len() - 1
                });
                let group = &mut r.groups[g];
                match m.elements {
                    None => group.blocks.push(Block::Text(m.content)),
                    Some(elements) => {
                        for el in elements {
                            if let Some(tid) = el.use_id {
                                owner.insert(tid, g);
                            }
                            group.blocks.push(Block::Object(el.span));
                        }
                    }
                }
                if m.usage.is_some() {
                    group.usage = m.usage;
                }
                if m.model.is_some() {
                    group.model = m.model;
                }
                return Some(());
            }
            if flag(line, &e.compact_summary)? {
                r.seq.push(Seq::Compaction(start..end, pending.take()));
                return Some(());
            }
            if flag(line, &e.transcript_only)? {
                r.ignore(Ignored::TranscriptOnly);
                return Some(());
            }
            let item = match m.elements {
                None => Item::Str(m.content),
                Some(elements) => {
                    let n = elements.len();
                    let mut rest = Vec::new();
                    for el in elements {
                        match el
                            .result_of
                            .as_ref()
                            .and_then(|t| t.as_ref())
                            .and_then(|t| owner.get(t))
                        {
                            Some(&g) => r.groups[g].results.push(el.span),
                            None => rest.push(el.span),
                        }
                    }
                    if rest.len() == n {
                        Item::List(m.content, rest)
                    } else if rest.is_empty() {
                        return Some(()); // (all of it went to the results of its replies)
                    } else {
                        Item::Rest(rest)
                    }
                }
            };
            r.seq.push(Seq::User(item));
            return Some(());
        }
        // a line that is no message of the conversation
        let subtype = text(line, &e.subtype);
        match kind.as_deref() {
            Some("system") if subtype.as_deref() == Some("compact_boundary") => {
                *pending = Some(start..end)
            }
            Some("summary") if text(line, &e.summary).is_some() => {
                if r.title.as_deref().unwrap_or("").is_empty() {
                    r.title = text(line, &e.summary);
                }
            }
            Some("ai-title") if text(line, &e.title).is_some() => r.title = text(line, &e.title),
            _ => r.ignore(Ignored::Kind(
                e.kind.as_ref().map(|k| line[k.clone()].to_vec()),
            )),
        }
        if r.session_id.is_none() {
            r.session_id = text(line, &e.session_id);
        }
        Some(())
    }
}

/// The session in `src` read as the loader reads it, or None where Python reads it (see the
/// module's documentation). `max_line`: the longest line the reader takes (with its line break);
/// `max_blank`: the blank lines in a row it takes. Read a piece at a time: the session's bytes are
/// not held (the writing reads its blocks again).
pub fn read<S: Source + ?Sized>(
    src: &S,
    max_line: usize,
    max_blank: usize,
) -> io::Result<Option<Reading>> {
    let mut r = Reading::new();
    let mut first = First::default();
    let (mut lineno, mut blank) = (0usize, 0usize);
    let mut buf: Vec<u8> = Vec::with_capacity(PIECE);
    let mut base = 0usize; // (the file's offset of buf[0])
    loop {
        let had = buf.len();
        fill_from(src, &mut buf, (base + had) as u64)?;
        let end_of_file = buf.len() < buf.capacity();
        let mut i = 0;
        while i < buf.len() {
            let end = match memchr::memchr(b'\n', &buf[i..]) {
                Some(k) => i + k + 1,
                None if end_of_file => buf.len(),
                None => break,
            };
            let line = &buf[i..end];
            lineno += 1;
            if line.len() > max_line {
                return Ok(None);
            }
            if line
                .iter()
                .all(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
            {
                blank += 1;
                if blank >= max_blank {
                    return Ok(None);
                }
            } else {
                blank = 0;
                if first.line(&mut r, line, base + i, lineno).is_none() {
                    return Ok(None);
                }
            }
            i = end;
        }
        if end_of_file {
            break;
        }
        buf.drain(..i);
        base += i;
        if buf.len() > max_line {
            return Ok(None); // (a line longer than the reader takes)
        }
        if buf.len() == buf.capacity() {
            buf.reserve(buf.capacity()); // (a line longer than the piece: read on in a longer one)
        }
    }
    r.subagent = first.decided.unwrap_or(false);
    Ok(Some(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(session: &str) -> Option<(String, Reading)> {
        let data = session.as_bytes();
        let mut r = read(data, 1 << 26, 100).unwrap()?;
        let mut out = Vec::new();
        loop {
            let mut chunk = Vec::new();
            let more = r.fill(data, &mut chunk, 16).unwrap();
            out.extend(chunk);
            if !more {
                break;
            }
        }
        Some((String::from_utf8(out).unwrap(), r))
    }

    #[test]
    fn a_replys_lines_are_one_message_and_its_results_follow_it() {
        let session = concat!(
            r#"{"type":"user","message":{"role":"user","content":"go"},"uuid":"u1","sessionId":"s"}"#,
            "\n",
            r#"{"type":"assistant","timestamp":"T1","message":{"id":"m1","role":"assistant","model":"claude","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":3}}}"#,
            "\n",
            r#"{"type":"assistant","timestamp":"T2","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"bash","input":{}}],"usage":{"input_tokens":4}}}"#,
            "\n",
            r#"{"type":"progress","data":{}}"#,
            "\n\n",
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}"#,
            "\n",
            r#"{"type":"user","message":{"role":"user","content":"next"}}"#,
            "\n",
        );
        let (out, r) = written(session).unwrap();
        assert_eq!(
            out,
            concat!(
                r#"{"role":"user","content":"go"}"#,
                "\n",
                r#"{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t1","name":"bash","input":{}}],"usage":{"input_tokens":4},"timestamp":"T1","model":"claude"}"#,
                "\n",
                r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"text","text":"next"}]}"#,
                "\n",
            )
        );
        assert_eq!(r.written, 3);
        assert_eq!(
            r.ignored,
            vec![(Ignored::Kind(Some(br#""progress""#.to_vec())), 1)]
        );
        assert_eq!(r.session_id, None); // (a message line's sessionId is not the loader's)
    }

    #[test]
    fn a_compaction_is_placed_between_the_messages_around_it() {
        let session = concat!(
            r#"{"type":"user","message":{"role":"user","content":"a"}}"#,
            "\n",
            r#"{"type":"system","subtype":"compact_boundary","sessionId":"s1","version":"2.1.0"}"#,
            "\n",
            r#"{"type":"user","isCompactSummary":true,"message":{"role":"user","content":"summary"}}"#,
            "\n",
            r#"{"type":"user","message":{"role":"user","content":"b"}}"#,
            "\n",
        );
        let (out, r) = written(session).unwrap();
        assert_eq!(out.lines().count(), 2);
        assert_eq!(r.compactions.len(), 1);
        let (at, summary, boundary) = &r.compactions[0];
        assert_eq!(*at, 1);
        assert!(session[summary.clone()].contains("isCompactSummary"));
        assert!(session[boundary.clone().unwrap()].contains("compact_boundary"));
        assert_eq!(r.session_id.as_deref(), Some("s1"));
        assert_eq!(r.version.as_deref(), Some("2.1.0"));
    }

    #[test]
    fn what_the_loader_decides_otherwise_is_pythons() {
        let user = r#"{"type":"user","message":{"role":"user","content":"a"}}"#;
        for bad in [
            r#"{"type":"user","message":{"role":"assistant","content":"a"}}"#, // (role is not its type)
            r#"{"type":"user","type":"user","message":{"role":"user","content":"a"}}"#, // (twice)
            r#"{"type":["user"],"x":1}"#,                                      // (unhashable)
            r#"{"type":"assistant","message":{"role":"assistant","content":"a","usage":{}}}"#,
            r#"{"type":"assistant","message":{"id":5,"role":"assistant","content":"a"}}"#,
            r#"{"type":"user","isCompactSummary":1,"message":{"role":"user","content":"a"}}"#,
            r#"{"type":"user","message":{"role":"user","content":"a"}} x"#,
            r#"[1]"#,
        ] {
            assert!(
                read_str(&format!("{user}\n{bad}\n"), 1 << 20, 100).is_none(),
                "{bad}"
            );
        }
        assert!(read_str(&format!("{user}\n"), 10, 100).is_none()); // (too long)
        assert!(read_str(&format!("{user}\n\n\n\n{user}\n"), 1 << 20, 3).is_none());
        assert!(read_str(&format!("{user}\n\n{user}\n"), 1 << 20, 3).is_some());
    }

    fn read_str(session: &str, max_line: usize, max_blank: usize) -> Option<Reading> {
        read(session.as_bytes(), max_line, max_blank).unwrap()
    }

    #[test]
    fn lines_longer_than_a_piece_and_across_pieces_are_read_whole() {
        // (replies and results alternating past a few pieces, one result longer than a piece)
        let mut session = String::new();
        let mut expected = String::new();
        for i in 0..3000 {
            let big = if i == 1500 {
                "y".repeat(PIECE + 10)
            } else {
                format!("{i}").repeat(100)
            };
            session += &format!(
                r#"{{"type":"assistant","message":{{"id":"m{i}","role":"assistant","content":[{{"type":"tool_use","id":"t{i}","name":"Bash","input":{{}}}}]}}}}"#
            );
            session += "\n";
            session += &format!(
                r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{i}","content":"{big}"}}]}}}}"#
            );
            session += "\n";
            expected += &format!(
                r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"t{i}","name":"Bash","input":{{}}}}]}}"#
            );
            expected += "\n";
            expected += &format!(
                r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{i}","content":"{big}"}}]}}"#
            );
            expected += "\n";
        }
        assert!(session.len() > 2 * PIECE);
        let (out, r) = written(&session).unwrap();
        assert_eq!(r.written, 6000);
        assert!(out == expected);
        assert!(read_str(&session, PIECE, 100).is_none()); // (the long line past the reader's limit)
    }

    #[test]
    fn a_file_cut_short_since_it_was_read_is_an_error() {
        let session = concat!(
            r#"{"type":"user","message":{"role":"user","content":"a"}}"#,
            "\n",
            r#"{"type":"assistant","message":{"role":"assistant","content":"b","id":"m"}}"#,
            "\n",
        );
        let mut r = read_str(session, 1 << 20, 100).unwrap();
        let cut = &session.as_bytes()[..20];
        assert!(r.fill(cut, &mut Vec::new(), 1 << 20).is_err());
    }
}
