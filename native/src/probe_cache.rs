//! A file's probes read back from the probe cache's entry, as bytes (`engine/measures/probe_cache.py`:
//! `save` writes the entry, `_parsed` reads it and is the reference): the columns `call`, `text`,
//! `where`, `source_call`, `source_tool` and `kind`, lists of one length, made into rows held here
//! (each call's in the order saved) rather than into a Python object a probe.
//!
//! Only an entry whose every value is of the exact JSON type `save` writes is read: a version, a call
//! or a place that is an integer, a non-negative call, a `where` of pairs, a kind of the given
//! ones. Anything else gives None, and Python reads the entry itself (`_parsed` refuses it, or, for
//! the few entries it reads and this does not, such as a version written `4.0` or an integer past
//! 64 bits, reads it): what this reads, Python reads the same.

use std::borrow::Cow;

use std::fmt;

use rustc_hash::FxHashMap;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

/// A probe as the cache stored it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// its text: where it stands in `Stored::texts`
    pub text: (u32, u32),
    /// the `(origin, block)` pairs of the flat `where`
    pub place: Vec<(i64, i64)>,
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
    /// the rows' texts, one after another
    pub texts: String,
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
}

/// The entry as `save` writes it: read straight into these columns (a text without escapes
/// borrowed from the bytes, a `where` read as its pairs), any other type of value refused by the
/// reading itself.
#[derive(Deserialize)]
struct Columns<'a> {
    version: i64,
    call: Vec<i64>,
    #[serde(borrow)]
    text: Vec<Text<'a>>,
    #[serde(rename = "where")]
    places: Vec<Place>,
    source_call: Vec<i64>,
    #[serde(borrow)]
    source_tool: Vec<Text<'a>>,
    #[serde(borrow)]
    kind: Vec<Text<'a>>,
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

/// A `where`: its flat list of integers read as `(origin, block)` pairs; an empty or odd one is
/// refused.
struct Place(Vec<(i64, i64)>);

impl<'de> Deserialize<'de> for Place {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Place;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-empty list of integer pairs")
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Place, S::Error> {
                let mut pairs = Vec::with_capacity(seq.size_hint().unwrap_or(2) / 2);
                while let Some(origin) = seq.next_element::<i64>()? {
                    let Some(block) = seq.next_element::<i64>()? else {
                        return Err(de::Error::custom("a pair cut short"));
                    };
                    pairs.push((origin, block));
                }
                if pairs.is_empty() {
                    return Err(de::Error::custom("nowhere"));
                }
                Ok(Place(pairs))
            }
        }
        d.deserialize_seq(Visit)
    }
}

/// The entry `bytes` read, or None where any value is not what `save` writes (see the module).
pub fn parse(bytes: &[u8], version: i64, kinds: &[&str]) -> Option<Stored> {
    let mut c: Columns<'_> = serde_json::from_slice(bytes).ok()?;
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
    let mut out = Stored {
        rows: Vec::with_capacity(n),
        ..Stored::default()
    };
    let mut tool_at: FxHashMap<&str, u32> = FxHashMap::default();
    for i in 0..n {
        let call = c.call[i];
        if call < 0 {
            return None;
        }
        let next = out.tools.len() as u32;
        let tool = &c.source_tool[i].0;
        let tool = *tool_at.entry(tool).or_insert_with(|| {
            out.tools.push(tool.to_string());
            next
        });
        let kind = kinds.iter().position(|k| *k == c.kind[i].0)? as u8;
        let text = &c.text[i].0;
        let at = u32::try_from(out.texts.len()).ok()?;
        out.texts.push_str(text);
        out.rows.push(Row {
            text: (at, u32::try_from(text.len()).ok()?),
            place: std::mem::take(&mut c.places[i].0),
            source_call: c.source_call[i],
            tool,
            kind,
        });
        match out.by_call.get_mut(&call) {
            Some(rows) => rows.push(i as u32),
            None => {
                out.calls.push(call);
                out.by_call.insert(call, vec![i as u32]);
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
        format!("{{\"version\": 4, {body}}}")
    }

    const GOOD: &str = "\"call\": [7, 0, 7], \"text\": [\"a\", \"b/c\", \"d\"], \
        \"where\": [[1, 0], [3, 1, 9, -1], [5, 2]], \"source_call\": [0, -1, 2], \
        \"source_tool\": [\"bash\", \"read\", \"bash\"], \"kind\": [\"identifier\", \"path\", \"line\"]";

    #[test]
    fn an_entry_as_saved_is_read_by_call_in_the_order_stored() {
        let got = parse(entry(GOOD).as_bytes(), 4, &KINDS).unwrap();
        assert_eq!(got.calls, [7, 0]);
        assert_eq!(got.by_call[&7], [0, 2]);
        assert_eq!(got.by_call[&0], [1]);
        assert_eq!(got.tools, ["bash", "read"]);
        assert_eq!(
            got.rows[1],
            Row {
                text: (1, 3),
                place: vec![(3, 1), (9, -1)],
                source_call: -1,
                tool: 1,
                kind: 1
            }
        );
        assert_eq!(got.text(&got.rows[1]), "b/c");
        // (a text with escapes is read as JSON reads it)
        let escaped = entry(GOOD).replacen("\"d\"", r#""d\"\n\u00e9""#, 1);
        let got = parse(escaped.as_bytes(), 4, &KINDS).unwrap();
        assert_eq!(got.text(&got.rows[2]), "d\"\n\u{e9}");
        assert_eq!(got.text(&got.rows[1]), "b/c");
        assert_eq!((got.rows[2].tool, got.rows[2].kind), (0, 2));
        let none = "\"call\": [], \"text\": [], \"where\": [], \"source_call\": [], \
            \"source_tool\": [], \"kind\": []";
        assert_eq!(
            parse(entry(none).as_bytes(), 4, &KINDS),
            Some(Stored::default())
        );
    }

    #[test]
    fn an_entry_with_a_value_save_does_not_write_is_not_read() {
        let good = entry(GOOD);
        assert!(parse(good.as_bytes(), 4, &KINDS).is_some());
        assert!(parse(good.as_bytes(), 5, &KINDS).is_none()); // another version
        for (from, to) in [
            ("[1, 0], [3, 1, 9, -1]", "[1, 0], [3, 1, 9]"), // a pair cut short
            ("[1, 0], [3, 1, 9, -1]", "[1, 0], []"),        // nowhere
            ("[1, 0], [3, 1, 9, -1]", "[1, 0], [3, 1.5]"),  // not a position
            ("[1, 0], [3, 1, 9, -1]", "[1, 0], [3, true]"),
            ("\"path\", \"line\"", "\"path\", \"word\""), // not a kind
            ("[7, 0, 7]", "[7, -7, 7]"),                  // a negative call
            ("[7, 0, 7]", "[7, 0.0, 7]"),
            ("[7, 0, 7]", "[7, 0, 9223372036854775808]"), // past 64 bits: Python reads it itself
            ("\"b/c\"", "null"),
            ("[\"bash\", \"read\", \"bash\"]", "[\"bash\", \"read\"]"), // a column short
            ("[[1, 0], [3, 1, 9, -1], [5, 2]]", "\"1,0\""),
            ("\"source_call\"", "\"source_calls\""), // a column missing
        ] {
            let damaged = good.replacen(from, to, 1);
            assert_ne!(damaged, good, "{from}");
            assert!(parse(damaged.as_bytes(), 4, &KINDS).is_none(), "{to}");
        }
        for other in [
            "[]",
            "{\"version\": 4.0}",
            "{\"version\": true}",
            "not json",
        ] {
            assert!(parse(other.as_bytes(), 4, &KINDS).is_none(), "{other}");
        }
        // (a lone surrogate is no text: Python says what it makes of it)
        let lone = good.replacen("\"b/c\"", "\"\\ud800\"", 1);
        assert!(parse(lone.as_bytes(), 4, &KINDS).is_none());
        // (a member it does not know is left alone, as Python leaves it)
        let more = good.replacen("\"version\": 4,", "\"version\": 4, \"made\": [1],", 1);
        assert!(parse(more.as_bytes(), 4, &KINDS).is_some());
    }
}
