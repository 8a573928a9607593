//! A file's probes read back from the probe cache's entry, as bytes (`engine/measures/probe_cache.py`:
//! `save` writes the entry, `_parsed` reads it and is the reference): the columns `call`, `text`,
//! `where`, `source_call`, `source_tool` and `kind`, lists of one length, and the tables `texts`,
//! `tools` and `kinds` their `text`, `source_tool` and `kind` name by position, made into rows held
//! here (each call's in the order saved) rather than into a Python object a probe.
//!
//! Only an entry whose every value is of the exact JSON type `save` writes is read: a version, a call,
//! a position or a place that is an integer, a non-negative call, a position within its table, a
//! `where` of pairs, tables of strings, kinds of the given ones. Anything else gives None, and Python
//! reads the entry itself (`_parsed` refuses it, or, for the few entries it reads and this does not,
//! such as a version written `5.0` or an integer past 64 bits, reads it): what this reads, Python
//! reads the same.

use std::borrow::Cow;

use std::fmt;

use rustc_hash::FxHashMap;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

/// A probe as the cache stored it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// its text: where it stands in `Stored::texts` (rows of the same text: the same place)
    pub text: (u32, u32),
    /// where its `(origin, block)` pairs (the flat `where`) stand in `Stored::places`: from, how many
    pub place: (u32, u32),
    pub source_call: i64,
    /// its tool, an index into `Stored::tools`
    pub tool: u32,
    /// its kind, an index into the kinds `parse` was given
    pub kind: u8,
}

/// The rows of an entry, by call.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stored {
    pub rows: Vec<Row>,
    /// the rows' texts, one after another, each once
    pub texts: String,
    /// the rows' places, one after another
    pub places: Vec<(i64, i64)>,
    /// the calls, in the order their first row was stored
    pub calls: Vec<i64>,
    /// each call's rows (indices into `rows`), in the order stored
    pub by_call: FxHashMap<i64, Vec<u32>>,
    /// the tools' names, each once
    pub tools: Vec<String>,
}

impl Stored {
    pub fn text(&self, row: &Row) -> &str {
        let (at, len) = row.text;
        &self.texts[at as usize..(at + len) as usize]
    }

    pub fn place(&self, row: &Row) -> &[(i64, i64)] {
        let (at, len) = row.place;
        &self.places[at as usize..(at + len) as usize]
    }
}

/// The entry as `save` writes it: read straight into these columns and tables (a text without
/// escapes borrowed from the bytes, a `where` read as its pairs), any other type of value refused
/// by the reading itself.
#[derive(Deserialize)]
struct Columns<'a> {
    version: i64,
    call: Vec<i64>,
    /// each row's text, by its position in `texts`
    text: Vec<i64>,
    #[serde(rename = "where")]
    places: Places,
    source_call: Vec<i64>,
    /// each row's tool, by its position in `tools`
    source_tool: Vec<i64>,
    /// each row's kind, by its position in `kinds`
    kind: Vec<i64>,
    #[serde(borrow)]
    texts: Vec<Text<'a>>,
    #[serde(borrow)]
    tools: Vec<Text<'a>>,
    #[serde(borrow)]
    kinds: Vec<Text<'a>>,
}

/// A JSON string, borrowed from the bytes where it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(Visit)
    }
}

/// The `where` column: each row's flat list of integers read as `(origin, block)` pairs, all of
/// them one after another (`pairs`), and where each row's stand in them (`spans`); an empty or odd
/// list is refused.
#[derive(Default)]
struct Places {
    pairs: Vec<(i64, i64)>,
    spans: Vec<(u32, u32)>,
}

impl Places {
    fn len(&self) -> usize {
        self.spans.len()
    }

    /// The row whose pairs `pairs` has from `from` on, ended; None where it has none.
    fn end_row(&mut self, from: usize) -> Option<()> {
        let n = self.pairs.len() - from;
        if n == 0 {
            return None;
        }
        self.spans
            .push((u32::try_from(from).ok()?, u32::try_from(n).ok()?));
        Some(())
    }
}

impl<'de> Deserialize<'de> for Places {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// A row's list, its pairs appended to `Places`.
        struct Row<'p>(&'p mut Places);
        impl<'de> de::DeserializeSeed<'de> for Row<'_> {
            type Value = ();
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
                d.deserialize_seq(self)
            }
        }
        impl<'de> Visitor<'de> for Row<'_> {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-empty list of integer pairs")
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
                let from = self.0.pairs.len();
                while let Some(origin) = seq.next_element::<i64>()? {
                    let Some(block) = seq.next_element::<i64>()? else {
                        return Err(de::Error::custom("a pair cut short"));
                    };
                    self.0.pairs.push((origin, block));
                }
                self.0
                    .end_row(from)
                    .ok_or_else(|| de::Error::custom("nowhere"))
            }
        }
        struct Rows;
        impl<'de> Visitor<'de> for Rows {
            type Value = Places;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of places")
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Places, S::Error> {
                let mut places = Places::default();
                while seq.next_element_seed(Row(&mut places))?.is_some() {}
                Ok(places)
            }
        }
        d.deserialize_seq(Rows)
    }
}

/// The entry as `save` writes it (orjson's compact JSON), read by hand: every member one of the
/// columns or tables, once, with no space anywhere, each integer `-?(0|[1-9][0-9]*)` within 64 bits,
/// each text's escapes the short ones (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`). None where the
/// bytes are anything else: serde_json then reads them (`parse`), which reads every entry this reads
/// the same (tested) for a fraction of the instructions of its visitors (version 4's columns: 57 M
/// against 26 M on a 5,000-call file's 17,000 probes).
fn compact(bytes: &[u8]) -> Option<Columns<'_>> {
    let mut r = Compact {
        t: simdutf8::basic::from_utf8(bytes).ok()?,
        i: 0,
    };
    r.eat(b'{')?;
    let (mut version, mut places) = (None, None);
    let mut ints: [Option<Vec<i64>>; 5] = Default::default();
    let mut tables: [Option<Vec<Cow<'_, str>>>; 3] = Default::default();
    loop {
        let key = r.text()?;
        r.eat(b':')?;
        let column = ["call", "text", "source_call", "source_tool", "kind"]
            .iter()
            .position(|k| *k == key);
        let table = ["texts", "tools", "kinds"].iter().position(|k| *k == key);
        let fresh = match (&*key, column, table) {
            ("version", _, _) => version.replace(r.int()?).is_none(),
            ("where", _, _) => places.replace(r.places()?).is_none(),
            (_, Some(k), _) => ints[k].replace(r.list(Compact::int)?).is_none(),
            (_, _, Some(k)) => tables[k].replace(r.list(Compact::text)?).is_none(),
            _ => false,
        };
        if !fresh {
            return None;
        }
        match r.next()? {
            b',' => {}
            b'}' => break,
            _ => return None,
        }
    }
    let rest = &r.t.as_bytes()[r.i..];
    if !rest
        .iter()
        .all(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
    {
        return None;
    }
    let [call, text, source_call, source_tool, kind] = ints;
    let [texts, tools, kinds] = tables.map(|t| t.map(|t| t.into_iter().map(Text).collect()));
    Some(Columns {
        version: version?,
        call: call?,
        text: text?,
        places: places?,
        source_call: source_call?,
        source_tool: source_tool?,
        kind: kind?,
        texts: texts?,
        tools: tools?,
        kinds: kinds?,
    })
}

/// `compact`'s reading, at byte `i` of `t`.
struct Compact<'a> {
    t: &'a str,
    i: usize,
}

impl<'a> Compact<'a> {
    fn next(&mut self) -> Option<u8> {
        let b = *self.t.as_bytes().get(self.i)?;
        self.i += 1;
        Some(b)
    }

    fn eat(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    /// `[`, `item`s between commas, `]`.
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        self.eat(b'[')?;
        let mut out = Vec::new();
        if self.t.as_bytes().get(self.i) == Some(&b']') {
            self.i += 1;
            return Some(out);
        }
        loop {
            out.push(item(self)?);
            match self.next()? {
                b',' => {}
                b']' => return Some(out),
                _ => return None,
            }
        }
    }

    /// An integer as JSON writes one (no fraction, no exponent, no `-0`) within 64 bits.
    #[inline(always)]
    fn int(&mut self) -> Option<i64> {
        let b = self.t.as_bytes();
        let negative = b.get(self.i) == Some(&b'-');
        let start = self.i + usize::from(negative);
        let (mut i, mut n) = (start, 0u64);
        while let Some(&c) = b.get(i) {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            n = n.wrapping_mul(10).wrapping_add(u64::from(d));
            i += 1;
        }
        let digits = i - start;
        if digits == 0
            || (b[start] == b'0' && (digits > 1 || negative)) // (`-0`: serde_json's float)
            || matches!(b.get(i), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        self.i = i;
        if digits <= 18 {
            // (18 digits never pass 64 bits: nothing to check a digit)
            let n = n as i64;
            return Some(if negative { -n } else { n });
        }
        let mut n = 0i64;
        for &c in &b[start..i] {
            let d = i64::from(c - b'0');
            n = n
                .checked_mul(10)?
                .checked_add(if negative { -d } else { d })?;
        }
        Some(n)
    }

    /// A string, borrowed where it has no escape.
    fn text(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let (t, start) = (self.t, self.i);
        let b = t.as_bytes();
        let mut owned: Option<String> = None;
        let mut run = start;
        loop {
            // (to the next quote, backslash or control character)
            self.i += b[self.i..]
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
            match b[self.i] {
                b'"' => {
                    self.i += 1;
                    return Some(match owned {
                        None => Cow::Borrowed(&t[start..self.i - 1]),
                        Some(mut s) => {
                            s.push_str(&t[run..self.i - 1]);
                            Cow::Owned(s)
                        }
                    });
                }
                b'\\' => {
                    let s = owned.get_or_insert_with(String::new);
                    s.push_str(&t[run..self.i]);
                    // (`\u`: serde_json reads it, lone surrogates refused)
                    s.push(crate::facts::short_escape(*b.get(self.i + 1)?)?);
                    self.i += 2;
                    run = self.i;
                }
                _ => return None, // (a control character)
            }
        }
    }

    /// The `where` column: `[`, each row's flat list of integers as `(origin, block)` pairs (an
    /// empty or odd one: None) between commas, `]`.
    fn places(&mut self) -> Option<Places> {
        self.eat(b'[')?;
        let mut places = Places::default();
        if self.t.as_bytes().get(self.i) == Some(&b']') {
            self.i += 1;
            return Some(places);
        }
        loop {
            self.eat(b'[')?;
            let from = places.pairs.len();
            loop {
                let origin = self.int()?;
                self.eat(b',')?;
                places.pairs.push((origin, self.int()?));
                match self.next()? {
                    b',' => {}
                    b']' => break,
                    _ => return None,
                }
            }
            places.end_row(from)?;
            match self.next()? {
                b',' => {}
                b']' => return Some(places),
                _ => return None,
            }
        }
    }
}

/// The entry `bytes` read, or None where any value is not what `save` writes (see the module).
pub fn parse(bytes: &[u8], version: i64, kinds: &[&str]) -> Option<Stored> {
    stored(
        compact(bytes).or_else(|| serde_json::from_slice(bytes).ok())?,
        version,
        kinds,
    )
}

/// The rows of the columns read, or None where any value is not what `save` writes.
fn stored(c: Columns<'_>, version: i64, kinds: &[&str]) -> Option<Stored> {
    let n = c.call.len();
    if c.version != version
        || [
            c.text.len(),
            c.places.len(),
            c.source_call.len(),
            c.source_tool.len(),
            c.kind.len(),
        ]
        .iter()
        .any(|len| *len != n)
        || u32::try_from(n).is_err()
    {
        return None;
    }
    // (each kind of the table one of `kinds`, even with no row: Python checks the table first)
    let kind_of = c
        .kinds
        .iter()
        .map(|k| {
            kinds
                .iter()
                .position(|known| *known == k.0)
                .map(|at| at as u8)
        })
        .collect::<Option<Vec<u8>>>()?;
    let mut out = Stored {
        rows: Vec::with_capacity(n),
        ..Stored::default()
    };
    if n == 0 {
        return Some(out);
    }
    out.places = c.places.pairs;
    // (each text stored once, as the table has it: the rows of one text share it, and its Python
    // string, `StoredProbes`)
    let mut text_at = Vec::with_capacity(c.texts.len());
    for text in &c.texts {
        let span = (
            u32::try_from(out.texts.len()).ok()?,
            u32::try_from(text.0.len()).ok()?,
        );
        out.texts.push_str(&text.0);
        text_at.push(span);
    }
    out.tools = c.tools.iter().map(|t| t.0.to_string()).collect();
    let at = |table: usize, i: i64| usize::try_from(i).ok().filter(|&i| i < table);
    for i in 0..n {
        let call = c.call[i];
        if call < 0 {
            return None;
        }
        out.rows.push(Row {
            text: text_at[at(text_at.len(), c.text[i])?],
            place: c.places.spans[i],
            source_call: c.source_call[i],
            tool: at(out.tools.len(), c.source_tool[i])? as u32,
            kind: kind_of[at(kind_of.len(), c.kind[i])?],
        });
        match out.by_call.get_mut(&call) {
            Some(rows) => rows.push(i as u32),
            None => {
                out.calls.push(call);
                // (room for a call's usual few rows: 17,005 rows of 3,743 calls in the bench's file)
                let mut rows = Vec::with_capacity(8);
                rows.push(i as u32);
                out.by_call.insert(call, rows);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [&str; 3] = ["identifier", "path", "line"];

    fn entry(body: &str) -> String {
        format!("{{\"version\": 5, {body}}}")
    }

    const GOOD: &str = "\"call\": [7, 0, 7], \"text\": [0, 1, 2], \
        \"where\": [[1, 0], [3, 1, 9, -1], [5, 2]], \"source_call\": [0, -1, 2], \
        \"source_tool\": [0, 1, 0], \"kind\": [0, 1, 2], \"texts\": [\"a\", \"b/c\", \"d\"], \
        \"tools\": [\"bash\", \"read\"], \"kinds\": [\"identifier\", \"path\", \"line\"]";

    #[test]
    fn an_entry_as_saved_is_read_by_call_in_the_order_stored() {
        let got = parse(entry(GOOD).as_bytes(), 5, &KINDS).unwrap();
        assert_eq!(got.calls, [7, 0]);
        assert_eq!(got.by_call[&7], [0, 2]);
        assert_eq!(got.by_call[&0], [1]);
        assert_eq!(got.tools, ["bash", "read"]);
        assert_eq!(
            got.rows[1],
            Row {
                text: (1, 3),
                place: (1, 2),
                source_call: -1,
                tool: 1,
                kind: 1
            }
        );
        assert_eq!(got.place(&got.rows[1]), [(3, 1), (9, -1)]);
        assert_eq!(got.place(&got.rows[2]), [(5, 2)]);
        assert_eq!(got.text(&got.rows[1]), "b/c");
        // (a text with escapes is read as JSON reads it)
        let escaped = entry(GOOD).replacen("\"d\"", r#""d\"\n\u00e9""#, 1);
        let got = parse(escaped.as_bytes(), 5, &KINDS).unwrap();
        assert_eq!(got.text(&got.rows[2]), "d\"\n\u{e9}");
        assert_eq!(got.text(&got.rows[1]), "b/c");
        assert_eq!((got.rows[2].tool, got.rows[2].kind), (0, 2));
        // (a table's kinds in any order: each row's kind is its place in the kinds asked for)
        let swapped = entry(GOOD).replacen(
            "[\"identifier\", \"path\", \"line\"]",
            "[\"line\", \"path\", \"identifier\"]",
            1,
        );
        let got = parse(swapped.as_bytes(), 5, &KINDS).unwrap();
        assert_eq!([got.rows[0].kind, got.rows[2].kind], [2, 0]);
        let none = "\"call\": [], \"text\": [], \"where\": [], \"source_call\": [], \
            \"source_tool\": [], \"kind\": [], \"texts\": [\"a\"], \"tools\": [], \"kinds\": []";
        assert_eq!(
            parse(entry(none).as_bytes(), 5, &KINDS),
            Some(Stored::default())
        );
    }

    #[test]
    fn a_text_asked_at_many_calls_is_stored_once() {
        let body = "\"call\": [1, 2, 3], \"text\": [0, 1, 0], \
            \"where\": [[1, 0], [2, 0], [1, 0]], \"source_call\": [0, 1, 0], \
            \"source_tool\": [0, 0, 0], \"kind\": [0, 0, 0], \"texts\": [\"a_b\", \"c\"], \
            \"tools\": [\"bash\"], \"kinds\": [\"identifier\"]";
        for entry in [
            entry(body),
            entry(body).replace(", ", ",").replace(": ", ":"),
        ] {
            let got = parse(entry.as_bytes(), 5, &KINDS).unwrap();
            assert_eq!(got.texts, "a_bc");
            assert_eq!(got.rows[0].text, got.rows[2].text);
            let texts: Vec<&str> = got.rows.iter().map(|r| got.text(r)).collect();
            assert_eq!(texts, ["a_b", "c", "a_b"]);
        }
    }

    /// What serde_json reads of `bytes` and what `compact` does, where it reads them (None: it
    /// leaves them to serde_json).
    fn both(bytes: &[u8]) -> (Option<Stored>, Option<Option<Stored>>) {
        let by_serde = serde_json::from_slice(bytes)
            .ok()
            .and_then(|c| stored(c, 5, &KINDS));
        (by_serde, compact(bytes).map(|c| stored(c, 5, &KINDS)))
    }

    #[test]
    fn an_entry_as_orjson_writes_it_is_read_by_hand_as_serde_json_reads_it() {
        let good = entry(GOOD).replace(", ", ",").replace(": ", ":");
        let (by_serde, by_hand) = both(good.as_bytes());
        assert!(by_serde.is_some());
        assert_eq!(by_hand, Some(by_serde)); // (read by hand: not left to serde_json)
        let mut read_by_hand = 0;
        let mut variants = vec![good.clone()];
        for (from, to) in [
            ("\"d\"", r#""d\"\n\t\\\/\b\f\ré""#), // the short escapes
            ("\"d\"", r#""\u00e9""#),             // left to serde_json
            ("\"d\"", "\"\u{1}\""),               // a raw control character
            ("[7,0,7]", "[7,-0,7]"),
            ("[7,0,7]", "[7,07,7]"),
            ("[7,0,7]", "[7,0,9223372036854775807]"),
            ("[7,0,7]", "[7,0,9223372036854775808]"),
            ("[0,-1,2]", "[0,-9223372036854775808,2]"),
            ("[0,-1,2]", "[0,-9223372036854775809,2]"),
            ("[0,-1,2]", "[0,-1e0,2]"),
            ("[0,-1,2]", "[0,-,2]"),
            ("\"text\":[0,1,2]", "\"text\":[0,1,3]"),
            ("\"text\":[0,1,2]", "\"text\":[0,-1,2]"),
            ("\"source_tool\":[0,1,0]", "\"source_tool\":[0,2,0]"),
            ("\"kind\":[0,1,2]", "\"kind\":[0,1,1]"),
            (
                "\"tools\":[\"bash\",\"read\"]",
                "\"tools\":[\"bash\",\"read\",\"x\"]",
            ),
            ("\"tools\":[\"bash\",\"read\"]", "\"tools\":\"bash\""),
            ("[[1,0],", "[[1,0,2],"),
            ("[[1,0],", "[[],"),
            ("[[1,0],", "[[1,0],],"),
            ("[7,0,7]", "[7,0,7,]"),
            ("{\"version\":5,", "{\"version\":5,\"version\":5,"),
            ("{\"version\":5,", "{\"version\":5,\"made\":[1],"),
            ("{\"version\":5,", "{ \"version\":5,"),
            ("{\"version\":5,", "{\"version\":4,"),
            ("\"kind\":", "\"kinds\":"),
            ("\"]}", "\"]}\n"),
            ("\"]}", "\"]} x"),
            ("\"]}", "\"]"),
        ] {
            let variant = good.replacen(from, to, 1);
            assert_ne!(variant, good, "{from}");
            variants.push(variant);
        }
        // (and entries of every size, their values drawn from a fixed sequence: a position past its
        // table now and then)
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut draw = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let texts = [
            "\"a\"",
            "\"b/c\"",
            "\"x.y\"",
            "\"42\"",
            "\"é\"",
            "\"q\\\"\"",
            "\"\\n\"",
        ];
        for size in 0..40 {
            let mut cols: [Vec<String>; 6] = Default::default();
            for _ in 0..size {
                cols[0].push(draw(50).to_string());
                cols[1].push((draw(16) as usize % (texts.len() + 1)).to_string());
                let pairs = 1 + draw(3);
                let flat: Vec<String> = (0..2 * pairs)
                    .map(|_| (draw(20) as i64 - 1).to_string())
                    .collect();
                cols[2].push(format!("[{}]", flat.join(",")));
                cols[3].push((draw(50) as i64 - 1).to_string());
                cols[4].push(draw(3).to_string());
                cols[5].push(draw(3).to_string());
            }
            let [call, text, places, source_call, source_tool, kind] = cols.map(|c| c.join(","));
            let texts = texts.join(",");
            variants.push(format!(
                "{{\"version\":5,\"call\":[{call}],\"text\":[{text}],\"where\":[{places}],\
                 \"source_call\":[{source_call}],\"source_tool\":[{source_tool}],\"kind\":[{kind}],\
                 \"texts\":[{texts}],\"tools\":[\"bash\",\"read\",\"édit\"],\
                 \"kinds\":[\"line\",\"identifier\",\"path\"]}}"
            ));
        }
        for variant in &variants {
            let (by_serde, by_hand) = both(variant.as_bytes());
            if let Some(by_hand) = by_hand {
                assert_eq!(by_hand, by_serde, "{variant}");
                read_by_hand += 1;
            }
        }
        assert!(read_by_hand >= 50, "{read_by_hand}"); // (the tests above are not all serde_json's)
    }

    #[test]
    fn an_entry_with_a_value_save_does_not_write_is_not_read() {
        let good = entry(GOOD);
        assert!(parse(good.as_bytes(), 5, &KINDS).is_some());
        assert!(parse(good.as_bytes(), 4, &KINDS).is_none()); // another version
        for (from, to) in [
            ("[1, 0], [3, 1, 9, -1]", "[1, 0], [3, 1, 9]"), // a pair cut short
            ("[1, 0], [3, 1, 9, -1]", "[1, 0], []"),        // nowhere
            ("[1, 0], [3, 1, 9, -1]", "[1, 0], [3, 1.5]"),  // not a position
            ("[1, 0], [3, 1, 9, -1]", "[1, 0], [3, true]"),
            ("\"path\", \"line\"", "\"path\", \"word\""), // not a kind
            ("[7, 0, 7]", "[7, -7, 7]"),                  // a negative call
            ("[7, 0, 7]", "[7, 0.0, 7]"),
            ("[7, 0, 7]", "[7, 0, 9223372036854775808]"), // past 64 bits: Python reads it itself
            ("\"b/c\"", "null"),                          // a table's text that is none
            ("\"text\": [0, 1, 2]", "\"text\": [0, 1, 3]"), // past its table
            ("\"text\": [0, 1, 2]", "\"text\": [0, -1, 2]"),
            ("\"text\": [0, 1, 2]", "\"text\": [0, true, 2]"),
            ("\"source_tool\": [0, 1, 0]", "\"source_tool\": [0, 2, 0]"),
            ("\"kind\": [0, 1, 2]", "\"kind\": [0, 1, 3]"),
            ("\"source_tool\": [0, 1, 0]", "\"source_tool\": [0, 1]"), // a column short
            ("\"tools\": [\"bash\", \"read\"]", "\"tools\": \"bash\""), // a table not a list
            ("[[1, 0], [3, 1, 9, -1], [5, 2]]", "\"1,0\""),
            ("\"source_call\"", "\"source_calls\""), // a column missing
            ("\"kinds\"", "\"kind_names\""),         // a table missing
        ] {
            let damaged = good.replacen(from, to, 1);
            assert_ne!(damaged, good, "{from}");
            assert!(parse(damaged.as_bytes(), 5, &KINDS).is_none(), "{to}");
        }
        for other in [
            "[]",
            "{\"version\": 5.0}",
            "{\"version\": true}",
            "not json",
        ] {
            assert!(parse(other.as_bytes(), 5, &KINDS).is_none(), "{other}");
        }
        // (a lone surrogate is no text: Python says what it makes of it)
        let lone = good.replacen("\"b/c\"", "\"\\ud800\"", 1);
        assert!(parse(lone.as_bytes(), 5, &KINDS).is_none());
        // (a member it does not know is left alone, as Python leaves it)
        let more = good.replacen("\"version\": 5,", "\"version\": 5, \"made\": [1],", 1);
        assert!(parse(more.as_bytes(), 5, &KINDS).is_some());
    }
}
