//! Recall's check of a context sent, as `compactlab/engine/measures/probes.py`'s `check` finds it
//! (the reference this is tested against): a probe is kept where a result that held it is still
//! intact in the context, else anywhere in what is sent — a message a layer changed or made, an
//! intact result between the first and the latest that held it, or, last, the whole text; and what
//! is not kept, attributed (`Check::attribute`: which layer removed it and when, from what the run's
//! ledger says, asked of the caller: `Done`).
//!
//! Plain data in: each message's origin, the blocks a layer changed and its tool results' blocks,
//! and its texts, asked of the caller (`Texts`) the first time they are needed and kept with the
//! message (a message never changes: a changed one is another message).

use memchr::memmem::Finder;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// A message of a context, as the check reads it.
#[derive(Debug, Default)]
pub struct Msg {
    /// its identity (the same message has the same key)
    pub key: usize,
    pub origin: i64,
    /// the blocks a layer changed (sorted)
    pub changed: Vec<i64>,
    /// its tool results' blocks, in order
    pub results: Vec<i64>,
    whole: OnceLock<String>,
    edited: OnceLock<String>,
    result_texts: Mutex<FxHashMap<i64, Arc<str>>>,
}

impl Msg {
    pub fn new(key: usize, origin: i64, mut changed: Vec<i64>, results: Vec<i64>) -> Self {
        changed.sort_unstable();
        Msg {
            key,
            origin,
            changed,
            results,
            ..Default::default()
        }
    }

    fn unchanged(&self, block: i64) -> bool {
        self.changed.binary_search(&block).is_err()
    }
}

/// A probe, as the check reads it.
#[derive(Debug)]
pub struct Probe<'a> {
    pub text: &'a str,
    /// (origin, block) of the results that held it and of the agent's messages that repeated it
    /// (block -1), oldest first
    pub place: &'a [(i64, i64)],
    /// a line reference: only where a result holds it (never looked for elsewhere)
    pub line: bool,
}

/// The texts the check may need of a message, made by the caller (`probes.py`'s).
pub trait Texts {
    type Error;
    /// the message's compact JSON
    fn whole(&mut self, i: usize) -> Result<String, Self::Error>;
    /// what is searched of a message a layer changed or made (`probes._text`)
    fn edited(&mut self, i: usize) -> Result<String, Self::Error>;
    /// the text of its tool result at `block` (`probes._result_text`)
    fn result(&mut self, i: usize, block: i64) -> Result<String, Self::Error>;
    /// a probe's text as a message's compact JSON holds it, for one that JSON escapes
    fn escaped(&mut self, text: &str) -> Result<String, Self::Error>;
}

/// What the run's ledger says of the messages a policy made or changed (`RunEnv.ledger`'s
/// `made_by`, `made_at`, `cleared_at` and `dropped`), asked of the caller.
pub trait Done {
    type Error;
    /// the layer that made the message `origin` (a message a policy made)
    fn made_by(&mut self, origin: i64) -> Result<Option<String>, Self::Error>;
    /// the call at which it was made
    fn made_at(&mut self, origin: i64) -> Result<Option<i64>, Self::Error>;
    /// the call at which a layer replaced the result at `block` of the message `origin` in place
    fn cleared_at(&mut self, origin: i64, block: i64) -> Result<Option<i64>, Self::Error>;
    /// the layer that dropped the message `origin` with nothing in its place (a step's own
    /// edits), and the call
    fn dropped(&mut self, origin: i64) -> Result<Option<(String, i64)>, Self::Error>;
}

/// Where a probe no message of the context holds went (`probes._attributed`): recoverable (a
/// persisted output holds it) or lost, the layer that removed it and the call (-1: not known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gone {
    pub recoverable: bool,
    pub by: String,
    pub at: i64,
}

/// A probe's outcome: kept where a result that held it stands, kept elsewhere, or missing.
pub const KEPT_WHERE_HELD: u8 = 0;
pub const KEPT_ELSEWHERE: u8 = 1;
pub const MISSING: u8 = 2;

/// The check's memo over a run (`probes.ProbeMemo`), of the last context checked: per position the
/// origin of its message or of the transcript's message before it, the positions of the messages a
/// layer changed or made, the whole text and the edited messages' texts joined, and its intact
/// results — each kept for the messages the next context has unchanged at its head (`stable`) and
/// extended from there, as first needed.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Check {
    keys: Vec<i64>,
    edited: Vec<usize>,
    /// the first position of a message a layer made
    made: Option<usize>,
    /// each message's compact JSON after a NUL, over the first `whole_ends.len()` messages (the
    /// end of each in `whole`)
    whole: String,
    whole_ends: Vec<usize>,
    /// the texts of the first `joined_ends.len()` edited messages, joined by NUL
    joined: String,
    joined_ends: Vec<usize>,
    /// the intact results of the first `intact_upto` messages
    intact: Intact,
    intact_upto: usize,
    /// each probe text's searcher, and the text as JSON writes it where JSON escapes it
    finders: Finders,
}

/// How many texts' searchers `Finders` holds before it lets them all go (a run's probes have a few
/// hundred texts: the bench's 5,000-call file 421, asked about 17,005 times).
const FINDERS_HELD: usize = 4096;

/// Each probe text's searcher (memchr's `Finder`, whose tables cost more to make than most
/// searches of a short text), and for a text JSON escapes, the searcher of its escaped form, made
/// the first time the text is looked for and kept: a text is asked about at many calls. A cache:
/// what it holds never decides an outcome, so two checks are equal whatever theirs hold.
#[derive(Debug, Default, Clone)]
struct Finders(FxHashMap<Box<str>, (Finder<'static>, Option<Finder<'static>>)>);

impl PartialEq for Finders {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Finders {
    /// `text`'s searcher, and its escaped form's where it is not `plain` (`escaped`: that form).
    fn of<E>(
        &mut self,
        text: &str,
        escaped: impl FnOnce() -> Result<String, E>,
    ) -> Result<&(Finder<'static>, Option<Finder<'static>>), E> {
        if !self.0.contains_key(text) {
            if self.0.len() >= FINDERS_HELD {
                self.0.clear();
            }
            let made = (
                Finder::new(text).into_owned(),
                if plain(text) {
                    None
                } else {
                    Some(Finder::new(&escaped()?).into_owned())
                },
            );
            self.0.insert(text.into(), made);
        }
        Ok(&self.0[text])
    }
}

fn cached<E>(cell: &OnceLock<String>, make: impl FnOnce() -> Result<String, E>) -> Result<&str, E> {
    if let Some(text) = cell.get() {
        return Ok(text);
    }
    let text = make()?;
    Ok(cell.get_or_init(|| text))
}

/// `probes._as_sent`'s test: a text JSON writes as it is (printable ASCII, no quote or backslash);
/// any other is escaped by the caller.
fn plain(text: &str) -> bool {
    text.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

/// Whether `haystack` holds what `needle` finds (memchr's SIMD search, made once a probe: the whole
/// text of a context is long, and each text is searched once for each probe not kept where it was
/// held).
fn holds(needle: &Finder<'_>, haystack: &str) -> bool {
    needle.find(haystack.as_bytes()).is_some()
}

/// `text` cut back to the end of its first `n` parts (`ends`: where each ends), and `ends` with it.
fn cut(text: &mut String, ends: &mut Vec<usize>, n: usize) {
    if n < ends.len() {
        ends.truncate(n);
        text.truncate(ends.last().copied().unwrap_or(0));
    }
}

impl Check {
    /// Each probe's outcome in the context `msgs` (`KEPT_WHERE_HELD`, `KEPT_ELSEWHERE`, `MISSING`),
    /// and whether it has a message a layer made. `stable`: how many of its first messages are the
    /// last context's (0: none known to be).
    pub fn outcomes<T: Texts>(
        &mut self,
        probes: &[Probe],
        msgs: &[Arc<Msg>],
        stable: usize,
        texts: &mut T,
    ) -> Result<(Vec<u8>, bool), T::Error> {
        self.follow(msgs, stable);
        let keys = &self.keys;
        let n = msgs.len();
        let mut out = vec![MISSING; probes.len()];
        for (k, p) in probes.iter().enumerate() {
            for &(o, b) in p.place {
                let pos = keys.partition_point(|&key| key < o);
                if pos < n && o >= 0 && msgs[pos].origin == o {
                    let e = &msgs[pos];
                    if if b >= 0 {
                        e.unchanged(b)
                    } else {
                        e.changed.is_empty()
                    } {
                        out[k] = KEPT_WHERE_HELD;
                        break;
                    }
                }
            }
        }
        let made = self.made.is_some();
        let missing: Vec<usize> = (0..probes.len()).filter(|&k| out[k] == MISSING).collect();
        if missing.is_empty() {
            return Ok((out, made));
        }
        // (a plain text is looked for in the whole text alone: see below)
        if missing
            .iter()
            .any(|&k| !probes[k].line && !plain(probes[k].text))
        {
            self.join_edited(msgs, texts)?;
        }
        let mut finders = std::mem::take(&mut self.finders);
        let found = self.look_for(probes, &missing, &mut out, msgs, texts, &mut finders);
        self.finders = finders;
        found?;
        Ok((out, made))
    }

    /// Where each of the `missing` probes (not kept where held) is kept elsewhere: `out` set to
    /// `KEPT_ELSEWHERE` for each found (`outcomes`).
    fn look_for<T: Texts>(
        &mut self,
        probes: &[Probe],
        missing: &[usize],
        out: &mut [u8],
        msgs: &[Arc<Msg>],
        texts: &mut T,
        finders: &mut Finders,
    ) -> Result<(), T::Error> {
        let mut whole_made = false;
        for &k in missing {
            let p = &probes[k];
            if p.line {
                continue;
            }
            let (finder, escaped) = finders.of(p.text, || texts.escaped(p.text))?;
            // What the edited messages' texts hold (their compact JSON, or their changed contents'
            // JSON, each a part of the message's compact JSON) and what an intact result's text
            // holds (a string, or a list's texts joined by line breaks: each string a part of the
            // message's compact JSON as JSON writes it), the whole text holds too where the probe's
            // text is plain: printable ASCII but the quote and the backslash, which JSON writes as it
            // stands, with no line break or NUL to span two of those parts. For such a text (most)
            // the whole text alone decides, as it does where those two miss (a lost probe: most of
            // those missing), and neither is read.
            if escaped.is_some() {
                if !p.text.contains('\0') && holds(finder, &self.joined) {
                    out[k] = KEPT_ELSEWHERE;
                    continue;
                }
                if p.place.len() > 1 {
                    self.find_intact(msgs);
                    let (origins, found) = &self.intact;
                    if between(p, finder, origins, found, msgs, texts)? {
                        out[k] = KEPT_ELSEWHERE;
                        continue;
                    }
                }
            }
            if !whole_made {
                self.make_whole(msgs, texts)?;
                whole_made = true;
            }
            if holds(escaped.as_ref().unwrap_or(finder), &self.whole) {
                out[k] = KEPT_ELSEWHERE;
            }
        }
        Ok(())
    }

    /// The memo made to follow `msgs`, of which the first `stable` are the last context's: what it
    /// knows of those kept, the positions and edited messages of the others read.
    fn follow(&mut self, msgs: &[Arc<Msg>], stable: usize) {
        let stable = stable.min(self.keys.len()).min(msgs.len());
        self.keys.truncate(stable);
        let mut key = self.keys.last().copied().unwrap_or(-1);
        for m in &msgs[stable..] {
            key = key.max(m.origin);
            self.keys.push(key);
        }
        let kept = self.edited.partition_point(|&i| i < stable);
        self.edited.truncate(kept);
        self.edited.extend(
            (stable..msgs.len()).filter(|&i| msgs[i].origin < 0 || !msgs[i].changed.is_empty()),
        );
        if !matches!(self.made, Some(i) if i < stable) {
            self.made = (stable..msgs.len()).find(|&i| msgs[i].origin < 0);
        }
        cut(&mut self.whole, &mut self.whole_ends, stable);
        cut(&mut self.joined, &mut self.joined_ends, kept);
        if self.intact_upto > stable {
            let (origins, found) = &mut self.intact;
            let k = found.partition_point(|&(i, _)| i < stable);
            origins.truncate(k);
            found.truncate(k);
            self.intact_upto = stable;
        }
    }

    /// Where a probe the context `msgs` does not hold went (`probes._attributed`, its reference),
    /// from the places that held it (`place`), newest first: the newest result decides, a persisted
    /// one makes it recoverable. A message gone with a message made in its place is put down to the
    /// layer that made it (`made`: whether the context has a message a layer made, a summary's);
    /// one a layer dropped with nothing in its place, to that layer. Asked after `outcomes` of the
    /// same `msgs` (whose positions it looks up).
    pub fn attribute<T: Texts, D: Done<Error = T::Error>>(
        &self,
        place: &[(i64, i64)],
        msgs: &[Arc<Msg>],
        made: bool,
        texts: &mut T,
        done: &mut D,
    ) -> Result<Gone, T::Error> {
        let (mut by, mut at) = (String::new(), -1);
        for &(o, b) in place.iter().rev() {
            if b < 0 {
                continue;
            }
            let j = self.keys.partition_point(|&key| key < o);
            if !(o >= 0 && j < msgs.len() && msgs[j].origin == o) {
                if by.is_empty() {
                    let stand_in = (j > 0 && msgs[j - 1].origin < 0).then(|| msgs[j - 1].origin);
                    match stand_in {
                        Some(s) => {
                            by = done.made_by(s)?.unwrap_or_else(|| "summary".into());
                            at = done.made_at(s)?.unwrap_or(-1);
                        }
                        None => match done.dropped(o)? {
                            Some((layer, call)) => (by, at) = (layer, call),
                            None => {
                                by = if made { "summary" } else { "snip" }.into();
                                at = -1;
                            }
                        },
                    }
                }
                continue;
            }
            if result_text(msgs, j, b, texts)?.contains("persisted-output") {
                let at = done.cleared_at(o, b)?.unwrap_or(-1);
                return Ok(Gone {
                    recoverable: true,
                    by: "budget".into(),
                    at,
                });
            }
            if by.is_empty() {
                by = "micro".into();
                at = done.cleared_at(o, b)?.unwrap_or(-1);
            }
        }
        if by.is_empty() {
            by = "snip".into();
        }
        Ok(Gone {
            recoverable: false,
            by,
            at,
        })
    }

    /// The texts of the edited messages joined by NUL (which no JSON text holds raw), from the
    /// first not joined yet.
    fn join_edited<T: Texts>(&mut self, msgs: &[Arc<Msg>], texts: &mut T) -> Result<(), T::Error> {
        for j in self.joined_ends.len()..self.edited.len() {
            let i = self.edited[j];
            if j > 0 {
                self.joined.push('\0');
            }
            self.joined
                .push_str(cached(&msgs[i].edited, || texts.edited(i))?);
            self.joined_ends.push(self.joined.len());
        }
        Ok(())
    }

    /// The context's whole text: each message's compact JSON, each after a NUL, from the first
    /// message not in it yet.
    fn make_whole<T: Texts>(&mut self, msgs: &[Arc<Msg>], texts: &mut T) -> Result<(), T::Error> {
        for (i, m) in msgs.iter().enumerate().skip(self.whole_ends.len()) {
            self.whole.push('\0');
            self.whole.push_str(cached(&m.whole, || texts.whole(i))?);
            self.whole_ends.push(self.whole.len());
        }
        Ok(())
    }

    /// The context's intact results (`probes.intact_results`), from the first message not read yet.
    fn find_intact(&mut self, msgs: &[Arc<Msg>]) {
        let (origins, found) = &mut self.intact;
        for (i, m) in msgs.iter().enumerate().skip(self.intact_upto) {
            if m.origin < 0 {
                continue;
            }
            for &b in &m.results {
                if m.unchanged(b) {
                    origins.push(m.origin);
                    found.push((i, b));
                }
            }
        }
        self.intact_upto = msgs.len();
    }
}

/// The tool results of a context that no layer changed, in order: their origins, and (message
/// position, block) of each.
type Intact = (Vec<i64>, Vec<(usize, i64)>);

#[cfg(test)]
impl Check {
    /// What the memo knows of `msgs`, all of it made (its texts joined, its intact results read).
    fn known<T: Texts>(&mut self, msgs: &[Arc<Msg>], texts: &mut T) -> Result<Check, T::Error> {
        self.join_edited(msgs, texts)?;
        self.make_whole(msgs, texts)?;
        self.find_intact(msgs);
        Ok(self.clone())
    }
}

/// `probes._between`: whether an intact result from the first to the latest that held `p` holds it
/// (`finder`: its text's).
fn between<T: Texts>(
    p: &Probe,
    finder: &Finder<'_>,
    origins: &[i64],
    found: &[(usize, i64)],
    msgs: &[Arc<Msg>],
    texts: &mut T,
) -> Result<bool, T::Error> {
    let results: Vec<i64> = p
        .place
        .iter()
        .filter(|&&(_, b)| b >= 0)
        .map(|&(o, _)| o)
        .collect();
    if results.len() < 2 {
        return Ok(false);
    }
    let (lo, hi) = (
        *results.iter().min().unwrap_or(&0),
        *results.iter().max().unwrap_or(&0),
    );
    let start = origins.partition_point(|&o| o < lo);
    let stop = origins.partition_point(|&o| o <= hi);
    for &(i, block) in &found[start..stop.max(start)] {
        if holds(finder, &result_text(msgs, i, block, texts)?) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The text of the tool result at `block` of the message at `i`, made once a message.
fn result_text<T: Texts>(
    msgs: &[Arc<Msg>],
    i: usize,
    block: i64,
    texts: &mut T,
) -> Result<Arc<str>, T::Error> {
    let m = &msgs[i];
    let held = {
        let memo = m.result_texts.lock().unwrap_or_else(|e| e.into_inner());
        memo.get(&block).cloned()
    };
    if let Some(text) = held {
        return Ok(text);
    }
    let text: Arc<str> = texts.result(i, block)?.into();
    m.result_texts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(block, text.clone());
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts made from fixed strings: a message's whole text, its edited text and its results'.
    struct Fixed {
        whole: Vec<String>,
        results: Vec<Vec<(i64, String)>>,
        asked: usize,
    }

    thread_local! {
        /// how many texts `Fixed::escaped` escaped on this thread
        static ESCAPED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    impl Texts for Fixed {
        type Error = ();
        fn whole(&mut self, i: usize) -> Result<String, ()> {
            self.asked += 1;
            Ok(self.whole[i].clone())
        }
        fn edited(&mut self, i: usize) -> Result<String, ()> {
            self.asked += 1;
            Ok(self.whole[i].clone())
        }
        fn result(&mut self, i: usize, block: i64) -> Result<String, ()> {
            self.asked += 1;
            Ok(self.results[i]
                .iter()
                .find(|(b, _)| *b == block)
                .map(|(_, t)| t.clone())
                .unwrap_or_default())
        }
        fn escaped(&mut self, text: &str) -> Result<String, ()> {
            ESCAPED.with(|n| n.set(n.get() + 1));
            Ok(text.replace('"', "\\\""))
        }
    }

    fn msg(key: usize, origin: i64, changed: &[i64], results: &[i64]) -> Arc<Msg> {
        Arc::new(Msg::new(key, origin, changed.to_vec(), results.to_vec()))
    }

    #[test]
    fn a_probe_is_kept_where_held_elsewhere_or_missing() {
        let msgs = vec![
            msg(1, 0, &[], &[]),
            msg(2, 1, &[], &[]),
            msg(3, 2, &[0], &[0]), // its result cleared
            msg(4, -1, &[], &[]),  // a summary a layer made
        ];
        let mut texts = Fixed {
            whole: vec![
                "go".into(),
                "ls".into(),
                "[cleared]".into(),
                "summary: src/app.py".into(),
            ],
            results: vec![vec![], vec![], vec![(0, "src/app.py x_y".into())], vec![]],
            asked: 0,
        };
        let probes = [
            Probe {
                text: "src/app.py",
                place: &[(2, 0)],
                line: false,
            },
            Probe {
                text: "x_y",
                place: &[(2, 0)],
                line: false,
            },
            Probe {
                text: "ls",
                place: &[(1, -1)],
                line: false,
            },
            Probe {
                text: "line 3",
                place: &[(2, 0)],
                line: true,
            },
        ];
        let mut check = Check::default();
        let (out, made) = check.outcomes(&probes, &msgs, 0, &mut texts).unwrap();
        assert_eq!(out, [KEPT_ELSEWHERE, MISSING, KEPT_WHERE_HELD, MISSING]);
        assert!(made);
        let asked = texts.asked;
        check.outcomes(&probes, &msgs, 0, &mut texts).unwrap();
        assert_eq!(texts.asked, asked); // (each text made once)
        check
            .outcomes(&probes, &msgs, msgs.len(), &mut texts)
            .unwrap();
        assert_eq!(texts.asked, asked);
    }

    #[test]
    fn an_intact_result_between_the_first_and_the_latest_holds_a_probe() {
        let msgs = vec![
            msg(1, 0, &[], &[]),
            msg(2, 1, &[0], &[0]),
            msg(3, 2, &[], &[0]),
            msg(4, 3, &[0], &[0]),
        ];
        let mut texts = Fixed {
            whole: vec!["go".into(), "a".into(), "b".into(), "c".into()],
            results: vec![
                vec![],
                vec![(0, String::new())],
                vec![(0, "copy of abc \"def\"".into())],
                vec![(0, String::new())],
            ],
            asked: 0,
        };
        let probes = [Probe {
            text: "abc \"def\"",
            place: &[(1, 0), (3, 0)],
            line: false,
        }];
        let out = Check::default()
            .outcomes(&probes, &msgs, 0, &mut texts)
            .unwrap()
            .0;
        assert_eq!(out, [KEPT_ELSEWHERE]);
    }

    #[test]
    fn a_plain_text_is_looked_for_in_the_whole_text_alone() {
        // (what an edited message's text or an intact result's holds of a plain text, the whole
        // text holds too: neither is read for it)
        // (each message's texts are made once: its own memo, so fresh messages each time)
        let msgs = || {
            vec![
                msg(1, 0, &[], &[]),
                msg(2, 1, &[0], &[0]),
                msg(3, 2, &[], &[0]),
                msg(4, 3, &[0], &[0]),
            ]
        };
        let whole: Vec<String> = vec![
            "go".into(),
            "a".into(),
            r#"{"content":"copy of abc_def here"}"#.into(),
            "c".into(),
        ];
        let results = vec![
            vec![],
            vec![(0, String::new())],
            vec![(0, "copy of abc_def here".into())],
            vec![(0, String::new())],
        ];
        for (text, kept) in [("abc_def", KEPT_ELSEWHERE), ("abc_xyz", MISSING)] {
            let mut texts = Fixed {
                whole: whole.clone(),
                results: results.clone(),
                asked: 0,
            };
            let probes = [Probe {
                text,
                place: &[(1, 0), (3, 0)],
                line: false,
            }];
            let msgs = msgs();
            let out = Check::default()
                .outcomes(&probes, &msgs, 0, &mut texts)
                .unwrap()
                .0;
            assert_eq!((out[0], texts.asked), (kept, msgs.len()), "{text}");
        }
    }

    #[test]
    fn a_text_is_escaped_once_over_the_calls_it_is_looked_for_at() {
        // (its searchers are made the first time and kept: the same outcomes at every call)
        let msgs = vec![msg(1, 0, &[], &[]), msg(2, -1, &[], &[])];
        let mut texts = Fixed {
            whole: vec![r#"{"content":"say \"hi\" now"}"#.into(), "made".into()],
            results: vec![vec![], vec![]],
            asked: 0,
        };
        let probes = [
            Probe {
                text: "\"hi\"",
                place: &[(5, 0)],
                line: false,
            },
            Probe {
                text: "\"bye\"",
                place: &[(5, 0)],
                line: false,
            },
            Probe {
                text: "now",
                place: &[(5, 0)],
                line: false,
            },
        ];
        let mut check = Check::default();
        let before = ESCAPED.with(|n| n.get());
        for stable in [0, 2, 0, 1] {
            let (out, made) = check.outcomes(&probes, &msgs, stable, &mut texts).unwrap();
            assert_eq!(out, [KEPT_ELSEWHERE, MISSING, KEPT_ELSEWHERE]);
            assert!(made);
        }
        // (the two texts JSON escapes, each once; the plain one never)
        assert_eq!(ESCAPED.with(|n| n.get()) - before, 2);
        assert_eq!(check.finders.0.len(), 3);
    }

    #[test]
    fn the_searchers_held_are_let_go_past_their_limit() {
        let mut finders = Finders::default();
        for k in 0..FINDERS_HELD + 3 {
            let text = format!("text {k}");
            let (finder, escaped) = finders.of(&text, || Err::<String, ()>(())).unwrap();
            assert_eq!(finder.needle(), text.as_bytes());
            assert!(escaped.is_none());
        }
        assert_eq!(finders.0.len(), 3);
        // (a text JSON escapes: its escaped form asked of the caller, an error passed on)
        assert_eq!(
            finders.of("a \"b\"", || Err::<String, u8>(7)).err(),
            Some(7)
        );
        assert!(!finders.0.contains_key("a \"b\""));
    }

    #[test]
    fn the_whole_text_is_searched_as_json_writes_the_probe() {
        let msgs = vec![msg(1, 0, &[], &[]), msg(2, -1, &[], &[])];
        let mut texts = Fixed {
            whole: vec![
                r#"{"content":"say \"hi there\" now"}"#.into(),
                "made".into(),
            ],
            results: vec![vec![], vec![]],
            asked: 0,
        };
        let probes = [Probe {
            text: "\"hi there\"",
            place: &[(5, 0)],
            line: false,
        }];
        assert_eq!(
            Check::default()
                .outcomes(&probes, &msgs, 0, &mut texts)
                .unwrap()
                .0,
            [KEPT_ELSEWHERE]
        );
    }
    /// A run's contexts: messages appended, one replaced (a result cleared), the middle dropped (a
    /// snip), a summary made at the head; each checked with what the memo keeps of the last one and
    /// by a memo that knows nothing: the same outcomes, every call.
    #[test]
    fn a_context_that_follows_the_last_is_checked_as_a_new_one() {
        let words = ["alpha_1", "beta_2", "gamma_3", "delta_4", "eps_5", "zeta_6"];
        let mut whole = Vec::new();
        let mut results = Vec::new();
        let mut ctx: Vec<Arc<Msg>> = Vec::new();
        let mut check = Check::default();
        let mut seed = 7u64;
        let mut next = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for call in 0..200 {
            // the messages since the last call: a result holding a word, at a new key
            let key = whole.len();
            let word = words[next(words.len() as u64) as usize];
            whole.push(format!("result {word}"));
            results.push(vec![(0, word.to_string())]);
            ctx.push(msg(key, call as i64, &[], &[0]));
            let mut stable = ctx.len() - 1;
            match next(4) {
                0 if ctx.len() > 3 => {
                    // a result cleared in place: another message, the same origin
                    let i = next(ctx.len() as u64) as usize;
                    let key = whole.len();
                    whole.push("[cleared]".into());
                    results.push(vec![(0, String::new())]);
                    ctx[i] = msg(key, ctx[i].origin, &[0], &[0]);
                    stable = stable.min(i);
                }
                1 if ctx.len() > 6 => {
                    // the middle dropped, or the head (a summary with it)
                    let a = next(3) as usize;
                    let b = a + next((ctx.len() - 4) as u64) as usize;
                    ctx.drain(a..b);
                    stable = stable.min(a);
                }
                2 if call % 25 == 0 => {
                    // a summary made at the head
                    let key = whole.len();
                    let word = words[next(words.len() as u64) as usize];
                    whole.push(format!("summary {word}"));
                    results.push(vec![]);
                    ctx.insert(0, msg(key, -1, &[], &[]));
                    stable = 0;
                }
                _ => {}
            }
            let (mut said, mut places, mut lines) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..3 {
                said.push(words[next(words.len() as u64) as usize]);
                places.push(
                    (0..1 + next(3))
                        .map(|_| (next(call as u64 + 1) as i64, 0))
                        .collect::<Vec<_>>(),
                );
                lines.push(next(5) == 0);
            }
            let probes: Vec<Probe> = (0..3)
                .map(|k| Probe {
                    text: said[k],
                    place: &places[k],
                    line: lines[k],
                })
                .collect();
            let mut texts = Fixed {
                whole: whole.clone(),
                results: results.clone(),
                asked: 0,
            };
            // (the texts are asked by position: this context's)
            texts.whole = ctx.iter().map(|m| whole[m.key].clone()).collect();
            texts.results = ctx.iter().map(|m| results[m.key].clone()).collect();
            let mut fresh = Fixed {
                whole: texts.whole.clone(),
                results: texts.results.clone(),
                asked: 0,
            };
            let got = check.outcomes(&probes, &ctx, stable, &mut texts).unwrap();
            let mut new = Check::default();
            let want = new.outcomes(&probes, &ctx, 0, &mut fresh).unwrap();
            assert_eq!(got, want, "call {call}");
            if call % 3 == 0 {
                // (and all it knows, made: what a later call may read)
                assert_eq!(
                    check.known(&ctx, &mut texts).unwrap(),
                    new.known(&ctx, &mut fresh).unwrap(),
                    "call {call}"
                );
            }
        }
    }

    #[test]
    fn a_text_holds_what_str_contains_finds() {
        let texts = [
            "",
            "a",
            "src/app.py",
            "ünï_code and x_y",
            "\"quoted\" \\ back",
            "ab\u{0}cd",
        ];
        for haystack in texts {
            for needle in texts.iter().chain(&["ü", "ï_c", "x_y ", "\u{0}", "d"]) {
                assert_eq!(
                    holds(&Finder::new(needle), haystack),
                    haystack.contains(needle),
                    "{haystack:?} {needle:?}"
                );
            }
        }
    }

    /// The run's ledger, as fixed maps.
    #[derive(Default)]
    struct Ledger {
        made_by: FxHashMap<i64, String>,
        made_at: FxHashMap<i64, i64>,
        cleared_at: FxHashMap<(i64, i64), i64>,
        dropped: FxHashMap<i64, (String, i64)>,
    }

    impl Done for Ledger {
        type Error = ();
        fn made_by(&mut self, origin: i64) -> Result<Option<String>, ()> {
            Ok(self.made_by.get(&origin).cloned())
        }
        fn made_at(&mut self, origin: i64) -> Result<Option<i64>, ()> {
            Ok(self.made_at.get(&origin).copied())
        }
        fn cleared_at(&mut self, origin: i64, block: i64) -> Result<Option<i64>, ()> {
            Ok(self.cleared_at.get(&(origin, block)).copied())
        }
        fn dropped(&mut self, origin: i64) -> Result<Option<(String, i64)>, ()> {
            Ok(self.dropped.get(&origin).cloned())
        }
    }

    fn gone(recoverable: bool, by: &str, at: i64) -> Gone {
        Gone {
            recoverable,
            by: by.into(),
            at,
        }
    }

    #[test]
    fn a_probe_not_held_is_put_down_to_the_layer_that_removed_it() {
        // origins 0..=5: 2 cleared in place, 3 persisted, 4 gone with a summary in its place, 5
        // dropped by a step with nothing in its place; 1 gone with nothing made before the next
        let msgs = vec![
            msg(1, 0, &[], &[]),
            msg(2, 2, &[0], &[0]),
            msg(3, 3, &[0], &[0]),
            msg(4, -7, &[], &[]),
            msg(5, 6, &[], &[]),
        ];
        let mut texts = Fixed {
            whole: vec![String::new(); 5],
            results: vec![
                vec![],
                vec![(0, "[cleared]".into())],
                vec![(0, "<persisted-output> at x.txt".into())],
                vec![],
                vec![],
            ],
            asked: 0,
        };
        let mut ledger = Ledger::default();
        ledger.made_by.insert(-7, "summary".into());
        ledger.made_at.insert(-7, 9);
        ledger.cleared_at.insert((2, 0), 4);
        ledger.cleared_at.insert((3, 0), 5);
        ledger.dropped.insert(5, ("step".into(), 8));
        let mut check = Check::default();
        check.outcomes(&[], &msgs, 0, &mut texts).unwrap();
        let mut attribute = |place: &[(i64, i64)], made: bool| {
            check
                .attribute(place, &msgs, made, &mut texts, &mut ledger)
                .unwrap()
        };
        assert_eq!(attribute(&[(2, 0)], true), gone(false, "micro", 4));
        assert_eq!(attribute(&[(2, 0), (3, 0)], true), gone(true, "budget", 5));
        assert_eq!(attribute(&[(3, 0), (2, 0)], true), gone(true, "budget", 5)); // (a persisted one anywhere)
        assert_eq!(attribute(&[(5, 0)], true), gone(false, "summary", 9)); // (made in its gap)
        assert_eq!(attribute(&[(1, 0)], true), gone(false, "summary", -1));
        assert_eq!(attribute(&[(1, 0)], false), gone(false, "snip", -1));
        assert_eq!(attribute(&[(1, 0), (2, 0)], false), gone(false, "micro", 4)); // (the newest decides)
        assert_eq!(attribute(&[(2, -1)], false), gone(false, "snip", -1)); // (a reply's: no result)
        let msgs = vec![msg(1, 0, &[], &[]), msg(6, 7, &[], &[])];
        check.outcomes(&[], &msgs, 0, &mut texts).unwrap();
        assert_eq!(
            check
                .attribute(&[(5, 0)], &msgs, true, &mut texts, &mut ledger)
                .unwrap(),
            gone(false, "step", 8)
        );
    }
}
