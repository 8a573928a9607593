//! Recall's check of a context sent, as `compactlab/engine/measures/probes.py`'s `check` finds it
//! (the reference this is tested against): a probe is kept where a result that held it is still
//! intact in the context, else anywhere in what is sent — a message a layer changed or made, an
//! intact result between the first and the latest that held it, or, last, the whole text. What is
//! not kept the caller attributes (which layer removed it and when: the run's ledger is Python's).
//!
//! Plain data in: each message's origin, the blocks a layer changed and its tool results' blocks,
//! and its texts, asked of the caller (`Texts`) the first time they are needed and kept with the
//! message (a message never changes: a changed one is another message).

use rustc_hash::FxHashMap;
use std::borrow::Cow;
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
    whole: OnceLock<Arc<str>>,
    edited: OnceLock<Arc<str>>,
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
    pub place: Vec<(i64, i64)>,
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

/// A probe's outcome: kept where a result that held it stands, kept elsewhere, or missing.
pub const KEPT_WHERE_HELD: u8 = 0;
pub const KEPT_ELSEWHERE: u8 = 1;
pub const MISSING: u8 = 2;

/// The check's memo over a run (`probes.ProbeMemo`): the last context's whole text and the texts of
/// its edited messages joined, which the next call's context mostly extends or repeats.
#[derive(Debug, Default)]
pub struct Check {
    whole_keys: Vec<usize>,
    whole: String,
    edited_keys: Vec<usize>,
    joined: String,
}

fn cached<E>(
    cell: &OnceLock<Arc<str>>,
    make: impl FnOnce() -> Result<String, E>,
) -> Result<Arc<str>, E> {
    if let Some(text) = cell.get() {
        return Ok(text.clone());
    }
    let text: Arc<str> = make()?.into();
    Ok(cell.get_or_init(|| text).clone())
}

/// `probes._as_sent`'s test: a text JSON writes as it is (printable ASCII, no quote or backslash);
/// any other is escaped by the caller.
fn plain(text: &str) -> bool {
    text.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

impl Check {
    /// Each probe's outcome in the context `msgs` (`KEPT_WHERE_HELD`, `KEPT_ELSEWHERE`, `MISSING`).
    pub fn outcomes<T: Texts>(
        &mut self,
        probes: &[Probe],
        msgs: &[Arc<Msg>],
        texts: &mut T,
    ) -> Result<Vec<u8>, T::Error> {
        let n = msgs.len();
        // per position, the origin of its message or of the transcript's message before it
        // (non-decreasing: a transcript message is found by bisection)
        let mut keys = Vec::with_capacity(n);
        let mut key = -1;
        for m in msgs {
            key = key.max(m.origin);
            keys.push(key);
        }
        let mut out = vec![MISSING; probes.len()];
        for (k, p) in probes.iter().enumerate() {
            for &(o, b) in &p.place {
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
        let missing: Vec<usize> = (0..probes.len()).filter(|&k| out[k] == MISSING).collect();
        if missing.is_empty() {
            return Ok(out);
        }
        let edited: Vec<usize> = (0..n)
            .filter(|&i| msgs[i].origin < 0 || !msgs[i].changed.is_empty())
            .collect();
        if missing.iter().any(|&k| !probes[k].line) {
            self.join_edited(&edited, msgs, texts)?;
        }
        let mut intact: Option<Intact> = None;
        let mut whole_made = false;
        for k in missing {
            let p = &probes[k];
            if p.line {
                continue;
            }
            if !p.text.contains('\0') && self.joined.contains(p.text) {
                out[k] = KEPT_ELSEWHERE;
                continue;
            }
            if p.place.len() > 1 {
                let (origins, found) = intact.get_or_insert_with(|| intact_results(msgs));
                if between(p, origins, found, msgs, texts)? {
                    out[k] = KEPT_ELSEWHERE;
                    continue;
                }
            }
            if !whole_made {
                self.make_whole(msgs, texts)?;
                whole_made = true;
            }
            let sent: Cow<str> = if plain(p.text) {
                Cow::Borrowed(p.text)
            } else {
                Cow::Owned(texts.escaped(p.text)?)
            };
            if self.whole.contains(&*sent) {
                out[k] = KEPT_ELSEWHERE;
            }
        }
        Ok(out)
    }

    /// The texts of the edited messages joined by NUL (which no JSON text holds raw).
    fn join_edited<T: Texts>(
        &mut self,
        edited: &[usize],
        msgs: &[Arc<Msg>],
        texts: &mut T,
    ) -> Result<(), T::Error> {
        if edited.len() == self.edited_keys.len()
            && edited
                .iter()
                .zip(&self.edited_keys)
                .all(|(&i, &k)| msgs[i].key == k)
        {
            return Ok(());
        }
        let mut joined = String::new();
        for (j, &i) in edited.iter().enumerate() {
            if j > 0 {
                joined.push('\0');
            }
            joined.push_str(&cached(&msgs[i].edited, || texts.edited(i))?);
        }
        self.edited_keys = edited.iter().map(|&i| msgs[i].key).collect();
        self.joined = joined;
        Ok(())
    }

    /// The context's whole text: each message's compact JSON, each after a NUL; extended where the
    /// context is the last one with messages appended (most calls).
    fn make_whole<T: Texts>(&mut self, msgs: &[Arc<Msg>], texts: &mut T) -> Result<(), T::Error> {
        let known = self.whole_keys.len();
        let mut from = known;
        if !(msgs.len() >= known && msgs.iter().zip(&self.whole_keys).all(|(m, &k)| m.key == k)) {
            self.whole.clear();
            self.whole_keys.clear();
            from = 0;
        }
        if from < msgs.len() {
            for (i, m) in msgs.iter().enumerate().skip(from) {
                self.whole.push('\0');
                self.whole.push_str(&cached(&m.whole, || texts.whole(i))?);
                self.whole_keys.push(m.key);
            }
        }
        Ok(())
    }
}

/// The tool results of a context that no layer changed, in order: their origins, and (message
/// position, block) of each.
type Intact = (Vec<i64>, Vec<(usize, i64)>);

/// A context's `Intact` results (`probes.intact_results`).
fn intact_results(msgs: &[Arc<Msg>]) -> Intact {
    let mut origins = Vec::new();
    let mut found = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
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
    (origins, found)
}

/// `probes._between`: whether an intact result from the first to the latest that held `p` holds it.
fn between<T: Texts>(
    p: &Probe,
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
        let m = &msgs[i];
        let held = {
            let memo = m.result_texts.lock().unwrap_or_else(|e| e.into_inner());
            memo.get(&block).cloned()
        };
        let held = match held {
            Some(text) => text,
            None => {
                let text: Arc<str> = texts.result(i, block)?.into();
                m.result_texts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(block, text.clone());
                text
            }
        };
        if held.contains(p.text) {
            return Ok(true);
        }
    }
    Ok(false)
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
                place: vec![(2, 0)],
                line: false,
            },
            Probe {
                text: "x_y",
                place: vec![(2, 0)],
                line: false,
            },
            Probe {
                text: "ls",
                place: vec![(1, -1)],
                line: false,
            },
            Probe {
                text: "line 3",
                place: vec![(2, 0)],
                line: true,
            },
        ];
        let mut check = Check::default();
        let out = check.outcomes(&probes, &msgs, &mut texts).unwrap();
        assert_eq!(out, [KEPT_ELSEWHERE, MISSING, KEPT_WHERE_HELD, MISSING]);
        let asked = texts.asked;
        check.outcomes(&probes, &msgs, &mut texts).unwrap();
        assert_eq!(texts.asked, asked); // (each text made once)
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
                vec![(0, "copy of abc_def".into())],
                vec![(0, String::new())],
            ],
            asked: 0,
        };
        let probes = [Probe {
            text: "abc_def",
            place: vec![(1, 0), (3, 0)],
            line: false,
        }];
        let out = Check::default()
            .outcomes(&probes, &msgs, &mut texts)
            .unwrap();
        assert_eq!(out, [KEPT_ELSEWHERE]);
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
            place: vec![(5, 0)],
            line: false,
        }];
        assert_eq!(
            Check::default()
                .outcomes(&probes, &msgs, &mut texts)
                .unwrap(),
            [KEPT_ELSEWHERE]
        );
    }
}
