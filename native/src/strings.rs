//! The candidate strings of a text, as `compactlab/engine/measures/probes.py` finds them (its
//! `runs` and `tokens` are the reference these are tested against): the hindsight probes' index
//! reads every tool result and every reply with them, most of the time of a first replay.
//!
//! A **run** is a longest stretch of characters none of which separates: an ASCII character
//! separates unless it is a letter, a digit or one of `_ . / : ~ -` (Python's
//! `str.translate(_SPACES)`), and a character beyond ASCII separates when Python's `str.split()`
//! splits on it (`str.isspace`: the Unicode spaces and line ends). The text handed over is the one
//! Python would translate: cut to `MAX_SCAN` and without its sized placeholders already.
//!
//! A **token** is a run as `probes.tokens` keeps it: trimmed of `. / :` at its ends, four
//! characters or more with an ASCII letter or digit, and a URL, a path or dotted name without a
//! colon, or a name that is not a plain word (an underscore, a digit, a hyphen inside, inner
//! capitals). Whether a name beyond ASCII is a plain word is Python's `str.isalpha` (Unicode
//! letters of its own version): such a name is left for Python to decide (`Tokens::undecided`).

use rustc_hash::{FxHashMap, FxHashSet};

/// Whether a character beyond ASCII is one Python's `str.split()` splits on (`str.isspace`; a
/// test holds this to Python's over every code point).
pub fn wide_space(c: char) -> bool {
    matches!(
        c,
        '\u{85}' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// The runs of `text`, in order (a run may come more than once).
pub fn runs(text: &str) -> Runs<'_> {
    Runs {
        text,
        at: 0,
        left: 0,
        part: 0,
        wide: 0,
    }
}

/// The iterator `runs` returns: where it is, and the masks (`masks`) of the `left` bytes from
/// there that it classified, the byte at `at` in bit 0.
pub struct Runs<'a> {
    text: &'a str,
    at: usize,
    left: usize,
    part: u64,
    wide: u64,
}

/// How many bytes the scan classifies at a time (`masks`).
const CHUNK: usize = 64;

/// Whether an ASCII byte is part of a run: a letter, a digit or one of `_ . / : ~ -` (any other
/// ASCII byte separates, `probes._SPACES`; a byte beyond ASCII begins a character that separates
/// when it is a space: `wide_space`).
#[inline(always)]
fn is_part(b: u8) -> bool {
    (b | 0x20).wrapping_sub(b'a') < 26 // a letter
        || b.wrapping_sub(b'-') <= b':' - b'-' // - . / the digits :
        || b == b'_'
        || b == b'~'
}

/// The bytes of `chunk` that are part of a run (bit k for byte k) and those beyond ASCII: a
/// chunk's bytes classified at once, so the scan steps over a run or the separators between two
/// by a count of bits rather than a byte at a time. SSE2 takes sixteen bytes in a few
/// instructions: a byte beyond ASCII is negative to its signed compares (never within a range of
/// ASCII, never equal to an ASCII byte) and its high bit is the mask's.
#[cfg(target_arch = "x86_64")]
#[inline]
fn masks(chunk: &[u8; CHUNK]) -> (u64, u64) {
    use std::arch::x86_64::{
        _mm_and_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_cmplt_epi8, _mm_loadu_si128,
        _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    let (mut part, mut wide) = (0u64, 0u64);
    for (k, sixteen) in chunk.chunks_exact(16).enumerate() {
        // SAFETY: `sixteen` is 16 initialised bytes of `chunk`, which the borrow keeps alive;
        // `_mm_loadu_si128` reads exactly 16 bytes from the pointer and needs no alignment. The
        // other intrinsics only compute on registers, and SSE2 is part of every x86_64 target (no
        // feature to detect).
        let (p, w) = unsafe {
            let x = _mm_loadu_si128(sixteen.as_ptr().cast());
            let within = |v, lo: u8, hi: u8| {
                _mm_and_si128(
                    _mm_cmpgt_epi8(v, _mm_set1_epi8((lo - 1) as i8)),
                    _mm_cmplt_epi8(v, _mm_set1_epi8((hi + 1) as i8)),
                )
            };
            let letter = within(_mm_or_si128(x, _mm_set1_epi8(0x20)), b'a', b'z');
            let punct = within(x, b'-', b':'); // - . / the digits :
            let marks = _mm_or_si128(
                _mm_cmpeq_epi8(x, _mm_set1_epi8(b'_' as i8)),
                _mm_cmpeq_epi8(x, _mm_set1_epi8(b'~' as i8)),
            );
            let kept = _mm_or_si128(_mm_or_si128(letter, punct), marks);
            (_mm_movemask_epi8(kept), _mm_movemask_epi8(x))
        };
        part |= u64::from(p as u16) << (16 * k);
        wide |= u64::from(w as u16) << (16 * k);
    }
    (part, wide)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn masks(chunk: &[u8; CHUNK]) -> (u64, u64) {
    masks_bytewise(chunk)
}

/// `masks`, a byte at a time: the other targets', and the reference the x86_64 one is tested on.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn masks_bytewise(chunk: &[u8; CHUNK]) -> (u64, u64) {
    let (mut part, mut wide) = (0u64, 0u64);
    for (k, &b) in chunk.iter().enumerate() {
        part |= u64::from(is_part(b)) << k;
        wide |= u64::from(b >= 0x80) << k;
    }
    (part, wide)
}

impl<'a> Runs<'a> {
    /// The character beyond ASCII at byte `i` (a character's first byte): its width, and whether
    /// it separates.
    #[inline]
    fn wide_at(&self, i: usize) -> (usize, bool) {
        let c = self.text[i..].chars().next().unwrap_or('\0');
        (c.len_utf8(), wide_space(c))
    }

    /// The masks of the chunk from `at` (bytes past the text's end are NUL: a separator); false
    /// at the text's end.
    #[inline]
    fn classify(&mut self) -> bool {
        let Some(bytes) = self
            .text
            .as_bytes()
            .get(self.at..)
            .filter(|b| !b.is_empty())
        else {
            return false;
        };
        (self.part, self.wide) = match bytes.first_chunk::<CHUNK>() {
            Some(chunk) => masks(chunk),
            None => {
                let mut chunk = [0u8; CHUNK];
                chunk[..bytes.len()].copy_from_slice(bytes);
                masks(&chunk)
            }
        };
        self.left = bytes.len().min(CHUNK);
        true
    }

    /// `k` bytes on (at most those classified).
    #[inline]
    fn step(&mut self, k: usize) {
        debug_assert!(k <= self.left);
        self.at += k;
        self.left -= k;
        // (a shift by the word's width is not one: the masks are read again from `at`)
        if self.left == 0 {
            return;
        }
        self.part >>= k;
        self.wide >>= k;
    }

    /// Over a character beyond ASCII at `at`, which may end past what was classified.
    fn step_over(&mut self, width: usize) {
        if width < self.left {
            self.step(width);
        } else {
            self.at += width;
            self.left = 0;
        }
    }
}

impl<'a> Iterator for Runs<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if !self.scan_to(false) {
            return None;
        }
        let start = self.at;
        self.scan_to(true);
        Some(&self.text[start..self.at])
    }
}

impl Runs<'_> {
    /// On over the separators to where a run starts (`in_run` false), or over a run's bytes to
    /// where it ends (true): a chunk's bytes at a time, a character beyond ASCII deciding by
    /// whether it is a space. False at the text's end.
    #[inline(always)]
    fn scan_to(&mut self, in_run: bool) -> bool {
        loop {
            if self.left == 0 && !self.classify() {
                return false;
            }
            let over = if in_run {
                self.part
            } else {
                !(self.part | self.wide)
            };
            let k = (!over).trailing_zeros() as usize;
            if k >= self.left {
                let left = self.left;
                self.step(left);
                continue;
            }
            self.step(k);
            if self.wide & 1 == 0 {
                return true; // (an ASCII byte: a run's first, or the separator after one)
            }
            let (width, space) = self.wide_at(self.at);
            if space == in_run {
                return true;
            }
            self.step_over(width);
        }
    }
}

/// `t.strip("./:")`.
pub fn trimmed(t: &str) -> &str {
    t.trim_matches(|c| matches!(c, '.' | '/' | ':'))
}

/// What `tokens` makes of a text: the tokens it decided, and the names beyond ASCII whose being a
/// token Python's `str.isalpha` decides (a token unless its core, stripped of `_ -`, is all letters).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tokens<'a> {
    pub decided: Vec<&'a str>,
    pub undecided: Vec<&'a str>,
}

/// The fewest characters a string looked up is (`probes.MIN_CHARS`): a token, a token's part.
pub const MIN_CHARS: usize = 4;

/// Whether `t` has fewer characters than `MIN_CHARS` as Python counts them (a text of fewer bytes
/// has fewer; one of four times as many bytes or more has at least as many; else the bytes that
/// begin a character, UTF-8's or a surrogate's as `surrogatepass` writes it).
pub fn too_short(t: &[u8]) -> bool {
    if t.len() < MIN_CHARS {
        return true;
    }
    // (an ASCII text, most, has as many characters as bytes: `is_ascii` reads a word at a time)
    if t.len() >= 4 * MIN_CHARS || t.is_ascii() {
        return false;
    }
    t.iter().filter(|&&b| b & 0xC0 != 0x80).count() < MIN_CHARS
}

/// Whether a trimmed run is a token (`Some(true)`), is not (`Some(false)`), or Python decides
/// (`None`: a name beyond ASCII, whose being a plain word is `str.isalpha`'s).
pub fn is_token(t: &str) -> Option<bool> {
    let bytes = t.as_bytes();
    if too_short(bytes) {
        return Some(false);
    }
    if !bytes.iter().any(u8::is_ascii_alphanumeric) {
        return Some(false);
    }
    let colon = bytes.contains(&b':');
    if bytes.contains(&b'/') || bytes.contains(&b'.') {
        return Some(!colon || t.starts_with("http://") || t.starts_with("https://"));
    }
    if colon {
        return Some(false);
    }
    let core = t.trim_matches(|c| c == '_' || c == '-');
    let camel = core
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    // (not all letters: an ASCII character other than a letter in it, or nothing left)
    if camel || core.is_empty() || core.bytes().any(|b| b < 0x80 && !b.is_ascii_alphabetic()) {
        return Some(true);
    }
    if core.is_ascii() {
        return Some(false); // (a plain word)
    }
    None
}

/// The tokens of `text` (`probes.tokens`), each once, in the order first found.
pub fn tokens(text: &str) -> Tokens<'_> {
    let mut seen = FxHashSet::default();
    let mut out = Tokens::default();
    for run in runs(text) {
        let t = trimmed(run);
        if !seen.insert(t) {
            continue;
        }
        match is_token(t) {
            Some(true) => out.decided.push(t),
            Some(false) => {}
            None => out.undecided.push(t),
        }
    }
    out
}

/// A tool result's place: (message position, block index).
pub type Ref = (i64, i64);

/// The strings some reply holds (`ProbeIndex.wanted`), each as a result may hold it: a `. / :`
/// before or after (a *variant*: `HEADS`, `TAILS`) -> the string.
///
/// The strings compactlab asks for are trimmed of those characters (tokens and their parts), so
/// a run is a variant of one exactly when trimming it leaves that string and what it took off is
/// a head and a tail: one copy of each string, one look-up a run (its 24 variants were each a
/// key). A string that is not trimmed keeps its variants as keys, as Python's reference does.
#[derive(Debug, Default)]
pub struct Wanted {
    trimmed: FxHashSet<Box<[u8]>>,
    /// whether some trimmed string is this many bytes long (most runs are not looked up: none is)
    lengths: Vec<bool>,
    /// the variants of any string with a `. / :` at an end -> it
    others: FxHashMap<Box<[u8]>, Box<[u8]>>,
}

/// Whether a byte is one a string is trimmed of (`probes._EDGES`).
#[inline]
fn edge(b: u8) -> bool {
    matches!(b, b'.' | b'/' | b':')
}

impl Wanted {
    /// Each string as a result may hold it: after nothing, `/`, `./` or `../`, before nothing,
    /// `.`, `:`, `/`, `..` or `...` (`probes._HEADS`, `probes._TAILS`).
    pub fn of_strings<'a>(strings: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut wanted = Wanted::default();
        for s in strings {
            if s.first().is_some_and(|&b| !edge(b)) && s.last().is_some_and(|&b| !edge(b)) {
                if wanted.lengths.len() <= s.len() {
                    wanted.lengths.resize(s.len() + 1, false);
                }
                wanted.lengths[s.len()] = true;
                wanted.trimmed.insert(s.into());
            } else {
                for head in HEADS {
                    for tail in TAILS {
                        wanted
                            .others
                            .insert([head, s, tail].concat().into(), s.into());
                    }
                }
            }
        }
        wanted
    }

    /// The string a variant stands for, where it is one.
    #[inline]
    pub fn of(&self, variant: &[u8]) -> Option<&[u8]> {
        if !self.others.is_empty() {
            if let Some(s) = self.others.get(variant) {
                return Some(s);
            }
        }
        let start = variant.iter().position(|&b| !edge(b))?;
        let end = variant.iter().rposition(|&b| !edge(b))? + 1;
        let core = &variant[start..end];
        if !self.lengths.get(core.len()).copied().unwrap_or(false)
            || !HEADS.contains(&&variant[..start])
            || !TAILS.contains(&&variant[end..])
        {
            return None;
        }
        self.trimmed.get(core).map(|s| &**s)
    }
}

/// What a result may put before and after a string it holds (`probes._HEADS`, `probes._TAILS`).
const HEADS: [&[u8]; 4] = [b"", b"/", b"./", b"../"];
const TAILS: [&[u8]; 6] = [b"", b".", b":", b"/", b"..", b"..."];

/// The strings the tool results held, as the hindsight probes' index keeps them
/// (`probes.ResultStrings` is the reference): the latest result that held each, the first one
/// with its source (a number the caller gives), and the strings first seen elsewhere (`mine`:
/// never a probe). With `wanted` only those strings are kept; else every run, as found.
/// Strings are bytes: UTF-8, or for a Python string that has none, its `surrogatepass` bytes
/// (never valid UTF-8, so never equal to another string's).
#[derive(Debug, Default)]
pub struct ResultStrings {
    pub wanted: Option<Wanted>,
    /// each string's results (each key once: a stream keeps every run it reads), and whether it
    /// is `mine` (the two in one map: a run is looked up once)
    strings: FxHashMap<Box<[u8]>, Seen>,
}

/// What the index knows of a string: where the results held it, and whether it is the agent's
/// own (never a probe). A string is kept only where it is one or the other.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    held: Option<Held>,
    mine: bool,
}

/// Where the results held a string: the latest, and the first with its source.
#[derive(Clone, Copy, Debug)]
struct Held {
    latest: Ref,
    first: Ref,
    source: u32,
}

impl Seen {
    fn held(at: Ref, source: u32) -> Self {
        Seen {
            held: Some(Held {
                latest: at,
                first: at,
                source,
            }),
            mine: false,
        }
    }

    fn mine() -> Self {
        Seen {
            held: None,
            mine: true,
        }
    }

    /// A result at `at` holds it: the latest, or the first (unless it is the agent's own).
    fn held_at(&mut self, at: Ref, source: u32) {
        if self.mine {
            return;
        }
        match &mut self.held {
            Some(held) => held.latest = at,
            None => *self = Seen::held(at, source),
        }
    }
}

impl ResultStrings {
    pub fn new(wanted: Option<Wanted>) -> Self {
        ResultStrings {
            wanted,
            ..Default::default()
        }
    }

    /// A result's text at `at`, from `source`: the strings it holds that are not `mine`.
    pub fn add_result(&mut self, text: &str, at: Ref, source: u32) {
        match &self.wanted {
            Some(wanted) => {
                let mut found: Vec<&[u8]> =
                    runs(text).filter_map(|r| wanted.of(r.as_bytes())).collect();
                found.sort_unstable();
                found.dedup();
                let found: Vec<Box<[u8]>> = found.into_iter().map(Box::from).collect();
                for s in found {
                    self.add(s, at, source);
                }
            }
            None => {
                for r in runs(text) {
                    let r = r.as_bytes();
                    // (a run shorter than any string looked up is never one of its variants: `held`)
                    if too_short(r) {
                        continue;
                    }
                    match self.strings.get_mut(r) {
                        Some(seen) => seen.held_at(at, source),
                        None => {
                            self.strings.insert(r.into(), Seen::held(at, source));
                        }
                    }
                }
            }
        }
    }

    /// One string a result at `at` holds (the strings of a text read elsewhere).
    pub fn add(&mut self, s: Box<[u8]>, at: Ref, source: u32) {
        if too_short(&s) {
            return;
        }
        self.strings
            .entry(s)
            .and_modify(|seen| seen.held_at(at, source))
            .or_insert(Seen::held(at, source));
    }

    /// `s` as the index keeps it: the wanted string a variant stands for (None: not wanted), or
    /// itself when every string is kept.
    pub fn kept_as<'a>(&'a self, s: &'a [u8]) -> Option<&'a [u8]> {
        match &self.wanted {
            Some(wanted) => wanted.of(s),
            None => Some(s),
        }
    }

    /// A string seen outside a result: never a probe, unless a result held it first.
    pub fn not_learnt(&mut self, s: &[u8]) {
        match self.strings.get_mut(s) {
            Some(seen) if seen.held.is_some() => {}
            Some(seen) => seen.mine = true,
            None => {
                self.strings.insert(s.into(), Seen::mine());
            }
        }
    }

    pub fn is_mine(&self, s: &[u8]) -> bool {
        self.strings.get(s).is_some_and(|seen| seen.mine)
    }

    pub fn add_mine(&mut self, s: &[u8]) {
        match self.strings.get_mut(s) {
            Some(seen) => seen.mine = true,
            None => {
                self.strings.insert(s.into(), Seen::mine());
            }
        }
    }

    /// Where the results held `s`: the first result (with its source) and the latest; None if
    /// none did. Every string kept, `s` is looked for with what a result may put around it.
    pub fn held(&self, s: &[u8]) -> Option<(Ref, Ref, u32)> {
        let mut found: Option<(Ref, Ref, u32)> = None;
        let mut look = |v: &[u8]| {
            if let Some(&Seen {
                held:
                    Some(Held {
                        latest: last,
                        first,
                        source,
                    }),
                ..
            }) = self.strings.get(v)
            {
                found = Some(match found {
                    None => (first, last, source),
                    Some((f, l, src)) => {
                        let (f, src) = if first < f { (first, source) } else { (f, src) };
                        (f, l.max(last), src)
                    }
                });
            }
        };
        if self.wanted.is_some() {
            look(s);
        } else {
            let mut v = Vec::with_capacity(s.len() + 6);
            for head in HEADS {
                for tail in TAILS {
                    v.clear();
                    v.extend_from_slice(head);
                    v.extend_from_slice(s);
                    v.extend_from_slice(tail);
                    look(&v);
                }
            }
        }
        found
    }
}

/// Names known without reading a result, as `probes.generic` and `probes.common` (their reference)
/// judge an ASCII name: Python's standard names (`GENERIC`), the other languages' (`OTHER_NAMES`,
/// `OTHER_MODULES`), the receivers a dotted name of theirs may start with (`RECEIVERS`), and the
/// vocabulary's names, each with the frameworks it is of (a bit mask).
#[derive(Debug, Default)]
pub struct Known {
    pub standard: FxHashSet<Box<str>>,
    pub other_names: FxHashSet<Box<str>>,
    pub receivers: FxHashSet<Box<str>>,
    pub other_modules: FxHashSet<Box<str>>,
    pub names: Vocabulary,
}

/// The vocabulary's names and their masks (`probes.Names`, its reference): its text kept whole and
/// its names sorted, looked up by a binary search. (A map of 45,000 names of their own was most of
/// a first replay's judge of names: each name allocated and hashed once a process.)
#[derive(Debug, Default)]
pub struct Vocabulary {
    text: Box<str>,
    /// each name's place in `text` (start, length) and its mask, sorted by name; of a name given
    /// twice, the last (as a map made of the lines in order keeps it)
    names: Vec<(u32, u32, u64)>,
}

impl Vocabulary {
    /// The vocabulary's lines (`name<TAB>mask`, `data/vocabulary.txt` after its header); None where
    /// a mask is not a number, or the text is too long to place (4 GiB).
    pub fn of(body: &str) -> Option<Vocabulary> {
        u32::try_from(body.len()).ok()?;
        let base = body.as_ptr() as usize;
        let mut names = Vec::new();
        let mut words = body.split_ascii_whitespace();
        while let Some(name) = words.next() {
            let mask = words.next()?.parse().ok()?;
            names.push((
                (name.as_ptr() as usize - base) as u32,
                name.len() as u32,
                mask,
            ));
        }
        let text: Box<str> = body.into();
        let at = |&(start, len, _): &(u32, u32, u64)| &text[start as usize..(start + len) as usize];
        // (the file's lines are sorted already: checked, and sorted here only where they are not;
        // a stable sort keeps a name's lines in their order, and the last of each is kept)
        if !names.windows(2).all(|w| at(&w[0]) < at(&w[1])) {
            names.sort_by(|a, b| at(a).cmp(at(b)));
            let mut kept: Vec<(u32, u32, u64)> = Vec::with_capacity(names.len());
            for n in names {
                match kept.last_mut() {
                    Some(last) if at(last) == at(&n) => *last = n,
                    _ => kept.push(n),
                }
            }
            names = kept;
        }
        Some(Vocabulary { text, names })
    }

    /// A name's mask (None: not a name of the vocabulary).
    pub fn get(&self, name: &str) -> Option<u64> {
        let at =
            |&(start, len, _): &(u32, u32, u64)| &self.text[start as usize..(start + len) as usize];
        self.names
            .binary_search_by(|n| at(n).cmp(name))
            .ok()
            .map(|k| self.names[k].2)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// What a dotted name's rest ends with where it names a file, not a module's name (`probes.generic`).
const FILE_ENDS: [&str; 11] = [
    "py", "json", "txt", "md", "toml", "yaml", "yml", "cfg", "js", "ex", "exs",
];

impl Known {
    /// The vocabulary's lines (`name<TAB>mask`, `data/vocabulary.txt` after its header); None where
    /// a mask is not a number.
    pub fn names_of(body: &str) -> Option<Vocabulary> {
        Vocabulary::of(body)
    }

    fn known(&self, name: &str, own: u64) -> bool {
        self.names.get(name).is_some_and(|of| of & own == 0)
    }

    /// `probes.common` of an ASCII name.
    pub fn common(&self, t: &str, own: u64) -> bool {
        if self.known(t, own) {
            return true;
        }
        if t.contains('/') {
            let words: Vec<&str> = t.split('/').collect();
            return words.len() <= 3
                && words.iter().all(|w| {
                    !w.is_empty() && w.len() <= 5 && w.bytes().all(|b| b.is_ascii_uppercase())
                });
        }
        if let Some(dot) = t.rfind('.') {
            return self.known(&t[..dot], own) || t.split('.').all(|part| self.known(part, own));
        }
        t.contains('-') && self.known(t.trim_matches('-'), own)
    }

    /// `probes.generic` of an ASCII name (None: not ASCII, Python judges it).
    pub fn generic(&self, t: &str, own: u64) -> Option<bool> {
        if !t.is_ascii() {
            return None;
        }
        let dunder = |s: &str| s.starts_with("__") && s.ends_with("__");
        if self.standard.contains(t)
            || self.other_names.contains(t)
            || t.starts_with("phx-")
            || dunder(t)
            || self.common(t, own)
        {
            return Some(true);
        }
        if let (Some((head, rest)), false) = (t.split_once('.'), t.contains('/')) {
            if ((self.standard.contains(head) && !self.receivers.contains(head))
                || self.other_modules.contains(head))
                && !FILE_ENDS.iter().any(|end| rest.ends_with(end))
            {
                return Some(true);
            }
            if (t.starts_with("self.") || t.starts_with("cls."))
                && !rest.is_empty()
                && rest.bytes().all(|b| b.is_ascii_alphabetic())
                && !rest
                    .as_bytes()
                    .windows(2)
                    .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
            {
                return Some(true);
            }
            if dunder(&t[t.rfind('.').map_or(0, |dot| dot + 1)..]) {
                return Some(true);
            }
        }
        Some(false)
    }
}

/// The names inside a longer token (`probes.parts`, its reference): the pieces of a string with a
/// `.`, `/` or `:` between them, of four characters or more.
pub fn parts(t: &str) -> impl Iterator<Item = &str> {
    let split = t.contains(['.', '/', ':']);
    t.split(['.', '/', ':'])
        .filter(move |p| split && p.chars().nth(3).is_some())
}

/// `probes.kind` of a distinctive string.
pub fn kind(t: &str) -> &'static str {
    if t.contains('/') {
        "path"
    } else if t.contains('.') {
        "dotted"
    } else if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        "number"
    } else {
        "identifier"
    }
}

/// Python's `str.isspace` of an ASCII byte (`str.split()` and `str.strip()` split and strip these).
fn py_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f | b' ')
}

/// The quoted texts of an ASCII text as `probes._QUOTED` finds them, left to right: between two
/// `"` (or two `'`), 12 to 200 characters none of which is that quote or a line end.
fn quoted(text: &[u8]) -> Vec<&[u8]> {
    let (n, mut i, mut out) = (text.len(), 0, Vec::new());
    while i < n {
        let q = text[i];
        if q == b'"' || q == b'\'' {
            let mut j = i + 1;
            while j < n && j - i - 1 <= 200 && text[j] != q && text[j] != b'\n' {
                j += 1;
            }
            if j < n && text[j] == q && (12..=200).contains(&(j - i - 1)) {
                out.push(&text[i + 1..j]);
                i = j + 1;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// `probes._prose` of an ASCII text: two or more words of letters (a word's `.,;:!?'` at its ends
/// aside), and letters and spaces at least 85% of it.
fn prose(q: &[u8]) -> bool {
    let words = q
        .split(|&b| py_space(b))
        .filter(|w| w.len() >= 2)
        .filter(|w| {
            let core = trim(w, |b| {
                matches!(b, b'.' | b',' | b';' | b':' | b'!' | b'?' | b'\'')
            });
            !core.is_empty() && core.iter().all(u8::is_ascii_alphabetic)
        })
        .count();
    let letters = q
        .iter()
        .filter(|&&b| b.is_ascii_alphabetic() || b == b' ')
        .count();
    words >= 2 && letters as f64 >= 0.85 * q.len() as f64
}

fn trim(s: &[u8], strip: impl Fn(u8) -> bool) -> &[u8] {
    let start = s.iter().position(|&b| !strip(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|&b| !strip(b)).map_or(start, |e| e + 1);
    &s[start..end]
}

/// The phrases of an ASCII text (`probes.phrases`): its quoted texts, stripped, of 12 characters or
/// more with a space, prose, and no distinctive string of their own. None for a text beyond ASCII
/// (Python's Unicode rules decide there).
pub fn phrases(text: &str) -> Option<Vec<&str>> {
    if !text.is_ascii() {
        return None;
    }
    let mut out = Vec::new();
    for q in quoted(text.as_bytes()) {
        let q = trim(q, py_space);
        if q.len() >= 12 && q.contains(&b' ') && prose(q) {
            // (ASCII: a slice of the text at ASCII boundaries is its own str)
            let q = std::str::from_utf8(q).unwrap_or_default();
            if tokens(q).decided.is_empty() {
                out.push(q);
            }
        }
    }
    Some(out)
}

/// Python `re`'s `\w` of an ASCII byte.
fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The length of the run of bytes from `at` that `keep` keeps.
fn run_of(text: &[u8], at: usize, keep: impl Fn(u8) -> bool) -> usize {
    text[at.min(text.len())..]
        .iter()
        .take_while(|&&b| keep(b))
        .count()
}

/// The folders of `folders` whose own source a text shows, as `probes.vocabulary`'s `source`
/// pattern finds them, left to right (`(?<![\w.-])(?<!packages/)(?<!node_modules/)` a folder, `/`,
/// `[\w/]*\.py\b`): each match's folder. None where a character beyond ASCII stands where a match
/// is decided (before a folder's name, where a path's run stops, after its `.py`): whether it is
/// Python's `\w` is Python's to say. (The folders' names are ASCII, so a name found among the
/// bytes is one among the characters, and the characters beyond ASCII elsewhere decide nothing.)
pub fn framework_sources<'f>(text: &str, folders: &'f [String]) -> Option<Vec<&'f str>> {
    let t = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0; // (where the next match may start: findall's matches do not overlap)
    let mut k = 0;
    // the end of the last run of `[\w/]` looked at: a run's every '/' ends it at the same place, so
    // a path of many folders' names is read once (Python's backtracking reads it once a name)
    let mut run_end = 0;
    while let Some(slash) = t[k..].iter().position(|&b| b == b'/') {
        let k_slash = k + slash;
        k = k_slash + 1;
        for f in folders {
            let f_bytes = f.as_bytes();
            let Some(start) = k_slash.checked_sub(f_bytes.len()) else {
                continue;
            };
            if start < from || &t[start..k_slash] != f_bytes {
                continue;
            }
            let before = &t[..start];
            if before.last().is_some_and(|&b| !b.is_ascii()) {
                return None;
            }
            if before
                .last()
                .is_some_and(|&b| word(b) || b == b'.' || b == b'-')
                || before.ends_with(b"packages/")
                || before.ends_with(b"node_modules/")
            {
                continue;
            }
            if run_end <= k_slash {
                run_end = k_slash + 1 + run_of(t, k_slash + 1, |b| word(b) || b == b'/');
            }
            let end = run_end;
            if t.get(end).is_some_and(|&b| !b.is_ascii()) {
                return None;
            }
            if t[end..].starts_with(b".py") {
                match t.get(end + 3) {
                    Some(&b) if !b.is_ascii() => return None,
                    Some(&b) if word(b) => {}
                    _ => {
                        out.push(f.as_str());
                        from = end + 3;
                        k = from;
                        break;
                    }
                }
            }
        }
    }
    Some(out)
}

/// The lines an ASCII text goes to, as `probes._LINE_REFS` finds them, left to right: `sed -n 'A,Bp'`
/// (A) or `name.ext:A` (A). None for a text beyond ASCII.
pub fn line_refs(text: &str) -> Option<Vec<u32>> {
    if !text.is_ascii() {
        return None;
    }
    let t = text.as_bytes();
    let (n, mut p, mut out) = (t.len(), 0, Vec::new());
    while p < n {
        if let Some((line, end)) = sed_lines(t, p).or_else(|| path_line(t, p)) {
            out.push(line);
            p = end;
        } else {
            p += 1;
        }
    }
    Some(out)
}

/// A run of 1 to 7 digits at `at` and where it ends (None: none, or more than 7).
fn digits(t: &[u8], at: usize) -> Option<(u32, usize)> {
    let r = run_of(t, at, |b| b.is_ascii_digit());
    if !(1..=7).contains(&r) {
        return None;
    }
    let value = t[at..at + r]
        .iter()
        .fold(0u32, |v, &b| v * 10 + u32::from(b - b'0'));
    Some((value, at + r))
}

/// `sed\s+-n\s+['"]?(\d{1,7})(?:,\d{1,7})?p` at `p`: the first line and where the match ends.
fn sed_lines(t: &[u8], p: usize) -> Option<(u32, usize)> {
    if !t[p..].starts_with(b"sed") {
        return None;
    }
    let mut at = p + 3;
    let gap = run_of(t, at, py_space);
    if gap == 0 || !t[at + gap..].starts_with(b"-n") {
        return None;
    }
    at += gap + 2;
    let gap = run_of(t, at, py_space);
    if gap == 0 {
        return None;
    }
    at += gap;
    if matches!(t.get(at), Some(b'\'' | b'"')) {
        at += 1;
    }
    let (line, mut end) = digits(t, at)?;
    if t.get(end) == Some(&b',') {
        if let Some((_, after)) = digits(t, end + 1) {
            if t.get(after) == Some(&b'p') {
                return Some((line, after + 1));
            }
        }
        return None; // (the optional part failed: 'p' would have to follow the first number)
    }
    if t.get(end) == Some(&b'p') {
        end += 1;
        return Some((line, end));
    }
    None
}

/// `[\w./-]\.\w{1,8}:(\d{1,7})\b` at `p`: the line and where the match ends.
fn path_line(t: &[u8], p: usize) -> Option<(u32, usize)> {
    let first = *t.get(p)?;
    if !(word(first) || matches!(first, b'.' | b'/' | b'-')) || t.get(p + 1) != Some(&b'.') {
        return None;
    }
    let ext = t[(p + 2).min(t.len())..]
        .iter()
        .take(9)
        .take_while(|&&b| word(b))
        .count();
    if !(1..=8).contains(&ext) || t.get(p + 2 + ext) != Some(&b':') {
        return None;
    }
    let (line, end) = digits(t, p + 3 + ext)?;
    if t.get(end).is_some_and(|&b| word(b)) {
        return None;
    }
    Some((line, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<&str> {
        runs(text).collect()
    }

    #[test]
    fn a_byte_is_part_of_a_run_where_python_keeps_it() {
        for b in 0..0x80u8 {
            let kept = b.is_ascii_alphanumeric() || b"_./:~-".contains(&b);
            assert_eq!(is_part(b), kept, "byte {b:#x}");
        }
    }

    #[test]
    fn the_vector_masks_are_the_bytewise_ones() {
        // (every byte value at every position of a chunk, beside every other in turn)
        for shift in 0..=255u8 {
            let mut chunk = [0u8; CHUNK];
            for (k, b) in chunk.iter_mut().enumerate() {
                *b = (k as u8).wrapping_mul(4).wrapping_add(shift);
            }
            assert_eq!(masks(&chunk), masks_bytewise(&chunk), "shift {shift}");
        }
    }

    #[test]
    fn runs_cross_the_chunks_they_are_classified_in() {
        // (runs and separators ending at, and running over, a chunk's bounds; characters beyond
        // ASCII at them)
        for pad in 0..CHUNK + 3 {
            for tail in [
                "x",
                "ab\u{a0}cd",
                "é\u{3000}é",
                "\u{2000}",
                "long_name/in.a:run~-",
            ] {
                let text = format!(
                    "{}{}{tail} {}",
                    " ".repeat(pad),
                    "a".repeat(CHUNK + pad),
                    "z".repeat(pad)
                );
                let slow: Vec<&str> = text
                    .split(|c: char| {
                        if c.is_ascii() {
                            !is_part(c as u8)
                        } else {
                            wide_space(c)
                        }
                    })
                    .filter(|r| !r.is_empty())
                    .collect();
                assert_eq!(all(&text), slow, "pad {pad}, tail {tail:?}");
            }
        }
    }

    #[test]
    fn runs_split_on_what_python_translates_to_spaces() {
        assert_eq!(
            all("see src/app.py:12, then (foo_bar)!"),
            ["see", "src/app.py:12", "then", "foo_bar"]
        );
        assert_eq!(all("~/x-y a\tb\nc"), ["~/x-y", "a", "b", "c"]);
        assert_eq!(all(""), Vec::<&str>::new());
        assert_eq!(all("  ,, "), Vec::<&str>::new());
    }

    #[test]
    fn runs_keep_letters_beyond_ascii_and_split_on_their_spaces() {
        assert_eq!(all("café\u{a0}naïve\u{3000}x"), ["café", "naïve", "x"]);
        assert_eq!(all("a\u{2009}b\u{200b}c"), ["a", "b\u{200b}c"]); // (a zero-width space is no space)
        assert_eq!(all("\u{85}über\u{2028}"), ["über"]);
    }

    #[test]
    fn tokens_are_the_distinctive_runs() {
        let t = tokens(
            "read src/app.py: then foo_bar and fooBar, 12345, plain words, a:b, http://x.io/a:1",
        );
        assert_eq!(
            t.decided,
            [
                "src/app.py",
                "foo_bar",
                "fooBar",
                "12345",
                "http://x.io/a:1"
            ]
        );
        assert!(t.undecided.is_empty());
        assert_eq!(
            tokens("__init__ ____ --x-- _abc_ abc-def").decided,
            ["abc-def"]
        );
    }

    #[test]
    fn names_beyond_ascii_are_left_to_python_unless_ascii_decides() {
        let t = tokens("naïve_x über fooÜbar aéB");
        assert_eq!(t.undecided, ["über", "fooÜbar"]);
        assert_eq!(t.decided, ["naïve_x"]); // (an underscore: not a word; aéB: 3 characters)
        assert_eq!(tokens("ébcdeFg").decided, ["ébcdeFg"]); // (inner capitals: a token whatever the letters)
    }

    #[test]
    fn a_result_s_strings_are_kept_unless_seen_elsewhere_first() {
        let mut index = ResultStrings::new(None);
        index.add_mine(b"mine_one");
        index.add_result("see mine_one and src/a.py. then x_yz and a_b", (3, 0), 7);
        index.add_result("src/a.py again", (5, 1), 8);
        assert_eq!(index.held(b"mine_one"), None);
        assert_eq!(index.held(b"x_yz"), Some(((3, 0), (3, 0), 7)));
        // (a run shorter than any string looked up is not kept)
        assert_eq!(index.held(b"a_b"), None);
        // (held as found: "src/a.py." by the first result, "src/a.py" by both)
        assert_eq!(index.held(b"src/a.py"), Some(((3, 0), (5, 1), 7)));
        index.not_learnt(b"x_yz"); // (a result held it first: not the agent's own)
        index.not_learnt(b"other");
        assert!(!index.is_mine(b"x_yz") && index.is_mine(b"other"));
    }

    #[test]
    fn a_string_is_too_short_by_its_characters_as_python_counts_them() {
        for (t, short) in [
            (&b"abc"[..], true),
            (b"abcd", false),
            ("\u{e9}\u{e9}\u{e9}".as_bytes(), true), // (six bytes, three characters)
            ("\u{e9}\u{e9}\u{e9}\u{e9}".as_bytes(), false),
            (b"\xed\xa0\x80ab", true), // (a surrogate as `surrogatepass` writes it, and two)
            (b"\xed\xa0\x80abc", false),
            ("\u{1f600}\u{1f600}\u{1f600}x".as_bytes(), false), // (thirteen bytes, four characters)
        ] {
            assert_eq!(too_short(t), short, "{t:?}");
        }
    }

    #[test]
    fn with_wanted_strings_only_those_are_kept_by_their_variants() {
        let wanted = Wanted::of_strings([&b"a_bc"[..], b"c_de"]);
        let mut index = ResultStrings::new(Some(wanted));
        index.add_result("x /a_bc: y_zz", (1, 0), 0);
        assert_eq!(index.held(b"a_bc"), Some(((1, 0), (1, 0), 0)));
        assert_eq!(index.held(b"y_zz"), None);
        assert_eq!(index.kept_as(b"/a_bc:"), Some(&b"a_bc"[..]));
        assert_eq!(index.kept_as(b"y_zz"), None);
    }

    #[test]
    fn a_wanted_string_is_found_by_each_of_its_variants_and_no_other_run() {
        let wanted = Wanted::of_strings([&b"a_b"[..], b"x.py", b".env"]);
        for head in HEADS {
            for tail in TAILS {
                for s in [&b"a_b"[..], b"x.py", b".env"] {
                    let v = [head, s, tail].concat();
                    assert_eq!(wanted.of(&v), Some(s), "{}", String::from_utf8_lossy(&v));
                }
            }
        }
        for near in [
            &b"//a_b"[..],
            b".a_b",
            b"a_b....",
            b"a_b:/",
            b"a_bc",
            b"xa_b",
            b"a",
            b"...",
            b"",
            b"x.p",
        ] {
            assert_eq!(wanted.of(near), None, "{}", String::from_utf8_lossy(near));
        }
    }

    #[test]
    fn phrases_are_quoted_prose_of_twelve_characters_without_a_token() {
        let text = r#"grep "Enter a valid duration" x; echo 'short one'; "two words.here" "see src/app.py now""#;
        assert_eq!(phrases(text), Some(vec!["Enter a valid duration"]));
        assert_eq!(phrases("say \"is not\nclosed here at all\""), Some(vec![]));
        assert_eq!(
            phrases("\"  padded with spaces around  \""),
            Some(vec!["padded with spaces around"])
        );
        assert_eq!(phrases("caf\u{e9} \"some words in a row\""), None);
        let long = format!("\"{}\"", "word ".repeat(41));
        assert_eq!(phrases(&long), Some(vec![])); // (205 characters: longer than a phrase)
    }

    #[test]
    fn a_framework_s_own_source_is_a_path_into_its_tree_not_an_installed_copy() {
        let folders = vec![
            "django".to_string(),
            "flask".to_string(),
            "_pytest".to_string(),
            "pytest".to_string(),
        ];
        let found = framework_sources(
            "see django/db/models.py and site-packages/flask/app.py, x/pytest/a.py; _pytest/main.py django/x.pyc",
            &folders,
        );
        assert_eq!(found, Some(vec!["django", "pytest", "_pytest"])); // (as Python's re finds them)
        assert_eq!(
            framework_sources("django/contrib/flask/x.py flask/y.py", &folders),
            Some(vec!["django", "flask"])
        );
        assert_eq!(
            framework_sources("caf\u{e9} django/a.py \u{2014}", &folders),
            Some(vec!["django"])
        );
        for decided in [
            "\u{e9}django/a.py",
            "django/a\u{e9}.py",
            "django/a.py\u{e9}",
        ] {
            assert_eq!(framework_sources(decided, &folders), None, "{decided}");
        }
    }

    #[test]
    fn a_path_of_many_folder_names_is_read_in_linear_time() {
        let folders = vec!["django".to_string()];
        let text = "django/".repeat(60_000); // (no .py: no match, each '/' tried)
        assert_eq!(framework_sources(&text, &folders), Some(vec![]));
        let text = format!("{}x.py", "django/".repeat(60_000));
        assert_eq!(framework_sources(&text, &folders), Some(vec!["django"]));
    }

    #[test]
    fn line_references_are_sed_ranges_and_path_colon_lines() {
        assert_eq!(
            line_refs("sed -n '10,20p' a.py; sed -n 5p b; vi src/app.py:42 x.rs:7a"),
            Some(vec![10, 5, 42])
        );
        assert_eq!(
            line_refs("sed -n '1,2x' f; sed  -n\t\"33p\" g"),
            Some(vec![33])
        );
        assert_eq!(line_refs("a.py:12345678 b.toolongext:3"), Some(vec![]));
    }

    #[test]
    fn parts_are_the_pieces_of_four_characters_between_dots_slashes_and_colons() {
        let all = |t| parts(t).collect::<Vec<_>>();
        assert_eq!(all("self.add_id_index"), ["self", "add_id_index"]);
        assert_eq!(all("src//app/ünïc.py:12"), ["ünïc"]);
        assert_eq!(all("plain_name"), Vec::<&str>::new()); // (no separator: not a longer token)
        assert_eq!(all("a.b"), Vec::<&str>::new());
    }

    #[test]
    fn known_names_are_judged_as_python_judges_them() {
        let set = |names: &[&str]| names.iter().map(|n| Box::from(*n)).collect();
        let known = Known {
            standard: set(&["os", "json", "string", "print"]),
            other_names: set(&["addEventListener"]),
            receivers: set(&["string"]),
            other_modules: set(&["Enum"]),
            names: Known::names_of("Q\t0\ndjango.urls\t1\nreal-time\t0\nmodels\t1\ndjango\t1\n")
                .unwrap(),
        };
        let generic = |t| known.generic(t, 0).unwrap();
        for t in [
            "os",
            "print",
            "addEventListener",
            "phx-click",
            "__init__",
            "os.path",
            "Enum.find",
            "self.name",
            "cls.value",
            "x.__dict__",
            "CI/CD",
            "django.urls",
            "django.models",
            "django.models.Q",
            "django.urls.path",
            "real-time",
            "-real-time-",
        ] {
            assert!(generic(t), "{t}");
        }
        for t in [
            "os.py",
            "string.split",
            "self.addItem",
            "self.a_b",
            "CI/CDEFGH",
            "A/B/C/D",
            "my_app",
            "x.y",
            "12345",
            "src/app.py",
        ] {
            assert!(!generic(t), "{t}");
        }
        assert!(!known.generic("django.urls", 1).unwrap()); // (the session works on django's own source)
        assert_eq!(known.generic("ünï_code", 0), None);
        assert_eq!(
            [kind("a/b.py"), kind("a.b"), kind("12345"), kind("a_b")],
            ["path", "dotted", "number", "identifier"]
        );
        assert!(Known::names_of("x\tnot-a-number\n").is_none());
        // (lines out of order, a name given twice: the last kept, as a map of the lines keeps it)
        let names = Known::names_of("b\t1\na\t2\nc\t3\na\t4\nab\t5\n").unwrap();
        let got: Vec<_> = ["a", "ab", "b", "c", "d", ""].map(|n| names.get(n)).into();
        assert_eq!(got, [Some(4), Some(5), Some(1), Some(3), None, None]);
        assert_eq!(names.len(), 4);
        assert!(Known::names_of("a\t99999999999999999999\n").is_none());
        let sorted = Known::names_of("a\t1\nb\t2\n").unwrap();
        assert_eq!(
            (sorted.get("a"), sorted.get("b"), sorted.get("c")),
            (Some(1), Some(2), None)
        );
    }

    #[test]
    fn short_runs_count_characters_not_bytes() {
        assert_eq!(is_token("ééé1"), Some(true));
        assert_eq!(is_token("éé1"), Some(false));
    }
}
