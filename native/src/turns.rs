//! The measures of each context a replay sends, in one crossing a call (`CallMeasures`: the prompt
//! cache, the raw baseline, violations and retention, written into the call's record; recall stays
//! Python's), and the whole per-call loop of a policy that keeps every message (`KeepingTurns`:
//! `none`, the reference every `compare` runs, and any policy whose layers are all off): each
//! call's messages appended, the context sized, judged against the window and measured, its record
//! made; and that loop with the snip and micro layers in it, for a policy made of them
//! (`LayerTurns`: `observation-masking` among them, `layers.rs` their arithmetic, recall's row asked
//! of the run's native check, `RecallCheck`, or of Python for a recall of another kind).
//! `measures/__init__.py`'s `Measures` and `engine/loop.py`'s `Turns` are the references
//! (`engine/keeping.py` chooses the loop); the differential tests hold them to the same records,
//! summaries and ledgers on every recording and preset.
//!
//! Not here: exact token counts (the measures are Python's then); for the loops, a policy with
//! another layer on (or micro options `keeping.native_layers` names), a recording's compactions kept (the
//! context restarts from their summaries), a run that keeps contexts — each runs on the Python loop.

use pyo3::intern;
use pyo3::prelude::*;

use crate::members::{self, Fact};
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::sync::Arc;

use crate::bindings::{
    EntryCopies, GivenProbe, InvariantTracker, MadeEntries, NativeTexts, PromptCache, RecallCheck,
    StoredProbes,
};
use crate::cache::list_chars;
use crate::facts::MARK;
use crate::layers::{placeholder, spliced_count, Facts, Held, KeepBy, PairSafe, Rule, Turn};
use crate::ledger::Ledger;
use crate::records::{set_columns, Column, CompactionEvent, TurnRecord};
use crate::stub;

/// What the measures in Rust give of a call (`TurnRecord`'s columns).
struct Row {
    raw_messages: i64,
    raw_chars: i64,
    raw_tokens: i64,
    introduced: i64,
    inherited: i64,
    read: i64,
    write: i64,
    refs: usize,
    retained: usize,
}

/// What a call is measured at (`measures.base.CallAt`'s fields the measures in Rust read).
struct At {
    call: usize,
    /// the first message changed since the previous call (the context's length: none)
    changed_from: usize,
    /// the context's size by the run's estimate, and the reply's characters
    tokens: i64,
    reply_chars: i64,
}

/// The run's measures that live in Rust, and what they read of the run.
struct Measured {
    /// the prompt cache's model and the violations' tracker (the Python measures' own objects)
    cache: Py<PromptCache>,
    tracker: Py<InvariantTracker>,
    /// `(call) -> (introduced, inherited)`: the violation log's record of a call whose context has
    /// any (`Violations`' log, in Python: it lists each one once)
    violations_row: Py<PyAny>,
    /// where the tracker logs each call's violations itself (`ViolationLog.record`'s work, its
    /// reference): the log's table and the raw baseline's counts by call; None: Python logs them
    violations_log: Option<(Py<PyDict>, Py<PyDict>)>,
    /// the raw baseline's rows (`RawBaseline`: messages and characters per call, each call's
    /// retention references), read as a stream fills them
    raw_messages: Py<PyList>,
    raw_chars: Py<PyList>,
    refs: Py<PyDict>,
    /// a stream's references are let go as they are used
    keep_refs: bool,
    chars_per_token: f64,
    overhead_tokens: i64,
}

impl Measured {
    /// `TokenEstimator.tokens`: the overhead plus the characters over chars-per-token, rounded up.
    fn tokens(&self, chars: i64) -> i64 {
        self.overhead_tokens + (chars as f64 / self.chars_per_token).ceil() as i64
    }

    /// A call's measures: `entries` sent at `at`; `chars_from(start)` the characters of the
    /// messages from `start` on; `find(origin)` where the transcript's message `origin` is.
    fn measure(
        &mut self,
        py: Python<'_>,
        entries: &Bound<'_, PyList>,
        at: At,
        chars_from: impl FnOnce(usize) -> PyResult<Vec<i64>>,
        find: impl Fn(i64) -> PyResult<Option<usize>>,
    ) -> PyResult<Row> {
        let At {
            call,
            changed_from,
            tokens,
            reply_chars,
        } = at;
        // the raw baseline (`RawSize`): the history before the call, as recorded
        let raw_messages: i64 = self.raw_messages.bind(py).get_item(call)?.extract()?;
        let raw_chars: i64 = self.raw_chars.bind(py).get_item(call)?.extract()?;
        let raw_tokens = self.tokens(raw_chars);

        // the prompt cache (`NativePromptCache.at_call`): told the characters of the messages it
        // does not know yet (from the first one changed, or from the end of the context it last sent)
        let (read, write) = {
            let mut cache = self.cache.borrow_mut(py);
            let start = changed_from.min(cache.inner.known());
            let tail = chars_from(start)?;
            cache
                .inner
                .at_call(changed_from, tokens, reply_chars, start, &tail)
        };

        // violations (`Violations.at_call`): the tracker shown the context, from where it changed
        let total = {
            let mut tracker = self.tracker.borrow_mut(py);
            tracker.update(entries, changed_from)?;
            tracker.inner.total()
        };
        let (introduced, inherited): (i64, i64) = match (&self.violations_log, total) {
            (_, 0) => (0, 0),
            (Some((seen, counts)), _) => {
                let raw = counts.bind(py).get_item(call)?;
                let raw = raw.as_ref().map(|r| r.cast::<PyDict>()).transpose()?;
                self.tracker
                    .borrow(py)
                    .log(py, call as i64, raw, seen.bind(py))?
            }
            (None, _) => self.violations_row.bind(py).call1((call,))?.extract()?,
        };

        // retention (`Retention.at_call`): a reference is held where its message is here with its
        // block unchanged
        let (refs, retained) = self.retention(py, call, entries, find)?;
        Ok(Row {
            raw_messages,
            raw_chars,
            raw_tokens,
            introduced,
            inherited,
            read,
            write,
            refs,
            retained,
        })
    }

    /// The call's references and those the context holds unchanged (`retention.retained`).
    fn retention(
        &mut self,
        py: Python<'_>,
        call: usize,
        entries: &Bound<'_, PyList>,
        find: impl Fn(i64) -> PyResult<Option<usize>>,
    ) -> PyResult<(usize, usize)> {
        let refs = self.refs.bind(py);
        let found = if self.keep_refs {
            refs.get_item(call)?
        } else {
            let key = call.into_pyobject(py)?;
            let found = refs.get_item(&key)?;
            if found.is_some() {
                refs.del_item(&key)?;
            }
            found
        };
        let Some(found) = found else {
            return Ok((0, 0));
        };
        let (mut n, mut kept) = (0, 0);
        for r in members::items(&found)? {
            let (origin, block): (i64, Bound<'_, PyAny>) = r?.extract()?;
            n += 1;
            if let Some(j) = find(origin)? {
                let changed = entries.get_item(j)?.getattr(intern!(py, "changed"))?;
                if !changed.contains(block)? {
                    kept += 1;
                }
            }
        }
        Ok((n, kept))
    }
}

/// A run's measures in Rust (`Measures.at_call` on the native core, exact counts aside): a call's
/// rows written into its record, recall's left to Python.
#[pyclass(module = "compactlab._native")]
pub struct CallMeasures {
    inner: Measured,
}

#[pymethods]
impl CallMeasures {
    /// The measures of a run, from its Python ones: the prompt cache's model in Rust (`cache`),
    /// the `Violations` measure (its tracker, its log's `logged`), the raw baseline (`RawBaseline`),
    /// the `Retention` measure (a stream's references let go) and the run's `TokenEstimator`;
    /// `log`: the violations log's table and the raw baseline's counts by call, where the tracker
    /// logs each call's violations itself (None: the `Violations` measure's `logged` does).
    #[new]
    #[pyo3(signature = (cache, violations, baseline, retention, estimator, log=None))]
    fn new(
        cache: Py<PromptCache>,
        violations: &Bound<'_, PyAny>,
        baseline: &Bound<'_, PyAny>,
        retention: &Bound<'_, PyAny>,
        estimator: &Bound<'_, PyAny>,
        log: Option<(Py<PyDict>, Py<PyDict>)>,
    ) -> PyResult<Self> {
        let py = violations.py();
        let chars_per_token: f64 = estimator
            .getattr(intern!(py, "chars_per_token"))?
            .extract()?;
        if chars_per_token.is_nan() || chars_per_token <= 0.0 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "chars_per_token must be positive",
            ));
        }
        Ok(CallMeasures {
            inner: Measured {
                cache,
                tracker: violations.getattr(intern!(py, "tracker"))?.extract()?,
                violations_row: violations.getattr(intern!(py, "logged"))?.unbind(),
                violations_log: log,
                raw_messages: baseline.getattr(intern!(py, "messages"))?.extract()?,
                raw_chars: baseline.getattr(intern!(py, "chars"))?.extract()?,
                refs: retention.getattr(intern!(py, "refs"))?.extract()?,
                keep_refs: retention.getattr(intern!(py, "keep"))?.extract()?,
                chars_per_token,
                overhead_tokens: estimator
                    .getattr(intern!(py, "overhead_tokens"))?
                    .extract()?,
            },
        })
    }

    /// Measure the context sent at `call` (its `entries` and `keys`, the context's origin log:
    /// non-decreasing, a transcript message found by bisection) and write the rows into `record`.
    #[allow(clippy::too_many_arguments)]
    fn measure(
        &mut self,
        py: Python<'_>,
        call: usize,
        entries: &Bound<'_, PyList>,
        keys: &Bound<'_, PyList>,
        changed_from: usize,
        tokens: i64,
        reply_chars: i64,
        record: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let n = entries.len();
        let chars_from = |start: usize| -> PyResult<Vec<i64>> {
            (start..n)
                .map(|i| {
                    entries
                        .get_item(i)?
                        .getattr(intern!(py, "chars"))?
                        .extract()
                })
                .collect()
        };
        // `Context.find_origin`: the first key not below `origin`, the message there if it is that one
        let find = |origin: i64| -> PyResult<Option<usize>> {
            if origin < 0 {
                return Ok(None);
            }
            let (mut lo, mut hi) = (0, n.min(keys.len()));
            while lo < hi {
                let mid = (lo + hi) / 2;
                if keys.get_item(mid)?.extract::<i64>()? < origin {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            if lo < n {
                let at: i64 = entries
                    .get_item(lo)?
                    .getattr(intern!(py, "origin"))?
                    .extract()?;
                if at == origin {
                    return Ok(Some(lo));
                }
            }
            Ok(None)
        };
        let at = At {
            call,
            changed_from,
            tokens,
            reply_chars,
        };
        let row = self.inner.measure(py, entries, at, chars_from, find)?;
        let mut columns = vec![
            (Column::RawMessages, row.raw_messages),
            (Column::RawChars, row.raw_chars),
            (Column::RawTokens, row.raw_tokens),
            (Column::ViolationsIntroduced, row.introduced),
            (Column::ViolationsInherited, row.inherited),
            (Column::CacheReadTokens, row.read),
            (Column::CacheWriteTokens, row.write),
        ];
        if row.refs != 0 {
            columns.push((Column::Refs, row.refs as i64));
            columns.push((Column::RefsRetained, row.retained as i64));
        }
        set_columns(record, &columns)
    }
}

/// A run's turns (`Turns.kept` in `engine/loop.py` drives it, a batch of calls at a time), measured by
/// the run's `CallMeasures`.
#[pyclass(module = "compactlab._native")]
pub struct KeepingTurns {
    /// the context sent: every message so far (the tracker is shown it)
    entries: Py<PyList>,
    /// each message's characters (its compact JSON length), and their sum
    chars: Vec<i64>,
    chars_sum: i64,
    /// each message's origin (its index in the transcript), for retention's look-up
    origins: Vec<i64>,
    measures: Py<CallMeasures>,
    /// `TurnRecord`, made positionally
    record: Py<PyAny>,
    /// the placeholder a message let go is replaced by (`baseline.FREED`; None: every message is
    /// held to the end), and how many of the first messages have been looked at to let go
    freed: Option<Py<PyAny>>,
    released: usize,
}

#[pymethods]
impl KeepingTurns {
    /// `freed`: where given, the messages before the call's last two are let go as the loop passes
    /// them (`release`), so that a stream's messages are freed as it is read, not at the end.
    #[new]
    #[pyo3(signature = (measures, record, freed=None))]
    fn new(
        py: Python<'_>,
        measures: Py<CallMeasures>,
        record: Py<PyAny>,
        freed: Option<Py<PyAny>>,
    ) -> Self {
        KeepingTurns {
            entries: PyList::empty(py).unbind(),
            chars: Vec::new(),
            chars_sum: 0,
            origins: Vec::new(),
            measures,
            record,
            freed,
            released: 0,
        }
    }

    /// The messages of the context so far.
    #[getter]
    fn entries(&self, py: Python<'_>) -> Py<PyList> {
        self.entries.clone_ref(py)
    }

    /// One call: `pending` (the messages since the previous call) appended, the context measured
    /// against `window` (an overflow unless `answered`: the recording shows this very context
    /// answered), its record made; then `reply` appended.
    #[allow(clippy::too_many_arguments)]
    fn turn<'py>(
        &mut self,
        py: Python<'py>,
        call: usize,
        pos: i64,
        pending: &Bound<'py, PyAny>,
        reply: &Bound<'py, PyAny>,
        window: i64,
        answered: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        for e in members::items(pending)? {
            self.append(&e?)?;
        }
        let n = self.chars.len();
        let chars = list_chars(self.chars_sum, n);
        let mut measures = self.measures.borrow_mut(py);
        let measured = &mut measures.inner;
        let tokens = measured.tokens(chars);
        let overflow = tokens > window && !answered;
        let reply_chars: i64 = reply.getattr(intern!(py, "chars"))?.extract()?;
        // nothing changed: the cache is told the messages after the context it last sent, the
        // tracker checks from where the context grew, every message is the transcript's (in order)
        let (all, origins) = (&self.chars, &self.origins);
        let at = At {
            call,
            changed_from: n,
            tokens,
            reply_chars,
        };
        let row = measured.measure(
            py,
            self.entries.bind(py),
            at,
            |start| Ok(all[start..].to_vec()),
            |origin| Ok(find_origin(origins, origin)),
        )?;
        let record = make_record(
            self.record.bind(py),
            (call, pos),
            &row,
            (n, chars, tokens),
            (0, 0),
            overflow,
        )?;
        drop(measures);
        self.release(py, n.saturating_sub(2))?;
        self.append(reply)?;
        Ok(record)
    }

    /// The calls of `batch` in order, each a `(call, pos, pending, reply)` that `turn` takes, all in
    /// one crossing (the feed hands them over a read batch at a time): their records. `answered`:
    /// each call's (None: no call is); a list of another length is an error, and nothing is run.
    fn turns<'py>(
        &mut self,
        py: Python<'py>,
        batch: &Bound<'py, PyList>,
        window: i64,
        answered: Option<Vec<bool>>,
    ) -> PyResult<Bound<'py, PyList>> {
        if let Some(flags) = &answered {
            if flags.len() != batch.len() {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "{} answered flags for {} calls",
                    flags.len(),
                    batch.len()
                )));
            }
        }
        let records = PyList::empty(py);
        for (k, item) in batch.iter().enumerate() {
            let (call, pos, pending, reply): (usize, i64, Bound<'py, PyAny>, Bound<'py, PyAny>) =
                item.extract()?;
            let flag = answered.as_ref().is_some_and(|flags| flags[k]);
            records.append(self.turn(py, call, pos, &pending, &reply, window, flag)?)?;
        }
        Ok(records)
    }
}

impl KeepingTurns {
    /// The messages before `stop` let go where a placeholder was given: each one no layer changed
    /// (all of them: no layer runs here) replaced by it, in the context and the tracker. Nothing
    /// reads them again: the measures read the messages from where the context grew (the tracker
    /// its facts, which it keeps), retention a message's changed blocks, which the placeholder has
    /// as few of as the message had (none), and the lengths and origins are this loop's own.
    fn release(&mut self, py: Python<'_>, stop: usize) -> PyResult<()> {
        let Some(freed) = &self.freed else {
            return Ok(());
        };
        if stop <= self.released {
            return Ok(());
        }
        let (entries, freed) = (self.entries.bind(py), freed.bind(py));
        let measures = self.measures.borrow(py);
        let mut tracker = measures.inner.tracker.borrow_mut(py);
        for pos in self.released..stop {
            if entries
                .get_item(pos)?
                .getattr(intern!(py, "changed"))?
                .is_truthy()?
            {
                continue; // (a changed message is held: what retention reads of it stays its own)
            }
            entries.set_item(pos, freed)?;
            tracker.release(pos, freed);
        }
        self.released = stop;
        Ok(())
    }

    fn append(&mut self, entry: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = entry.py();
        let chars: i64 = members::fact(entry, Fact::Chars)?.extract()?;
        let origin: i64 = members::fact(entry, Fact::Origin)?.extract()?;
        self.entries.bind(py).append(entry)?;
        self.chars.push(chars);
        self.chars_sum += chars;
        self.origins.push(origin);
        Ok(())
    }
}

/// Where the transcript's message `origin` is in a context of the transcript's messages alone, in
/// order (origins increase).
fn find_origin(origins: &[i64], origin: i64) -> Option<usize> {
    if origin < 0 {
        return None;
    }
    let j = origins.partition_point(|&o| o < origin);
    (j < origins.len() && origins[j] == origin).then_some(j)
}

/// A call's record: the native `TurnRecord` made here where `record` is its class, else `record`
/// called positionally (in its fields' order; a test's class): what the layers did is the messages
/// snipped and the results micro replaced, no other layer acting.
fn make_record<'py>(
    record: &Bound<'py, PyAny>,
    (call, pos): (usize, i64),
    row: &Row,
    (messages, chars, tokens): (usize, i64, i64),
    (snipped, micro_compacted): (i64, i64),
    overflow: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = record.py();
    if record.is(py.get_type::<TurnRecord>()) {
        let made = TurnRecord {
            call: call as i64,
            message_index: pos,
            raw_messages: row.raw_messages,
            raw_chars: row.raw_chars,
            raw_tokens: row.raw_tokens,
            messages: messages as i64,
            chars,
            tokens,
            snipped,
            micro_compacted,
            overflow,
            violations_introduced: row.introduced,
            violations_inherited: row.inherited,
            cache_read_tokens: row.read,
            cache_write_tokens: row.write,
            refs: row.refs as i64,
            refs_retained: row.retained as i64,
            ..TurnRecord::default()
        };
        return Ok(Bound::new(py, made)?.into_any());
    }
    let zero = || 0i64.into_pyobject(py).map(|z| z.into_any());
    record.call1(PyTuple::new(
        py,
        [
            call.into_pyobject(py)?.into_any(),
            pos.into_pyobject(py)?.into_any(),
            row.raw_messages.into_pyobject(py)?.into_any(),
            row.raw_chars.into_pyobject(py)?.into_any(),
            row.raw_tokens.into_pyobject(py)?.into_any(),
            messages.into_pyobject(py)?.into_any(),
            chars.into_pyobject(py)?.into_any(),
            tokens.into_pyobject(py)?.into_any(),
            // persisted, persisted_chars
            zero()?,
            zero()?,
            snipped.into_pyobject(py)?.into_any(),
            micro_compacted.into_pyobject(py)?.into_any(),
            // summarized .. manual
            zero()?,
            zero()?,
            zero()?,
            zero()?,
            zero()?,
            pyo3::types::PyBool::new(py, overflow).to_owned().into_any(),
            row.introduced.into_pyobject(py)?.into_any(),
            row.inherited.into_pyobject(py)?.into_any(),
            row.read.into_pyobject(py)?.into_any(),
            row.write.into_pyobject(py)?.into_any(),
            0.0f64.into_pyobject(py)?.into_any(),
            row.refs.into_pyobject(py)?.into_any(),
            row.retained.into_pyobject(py)?.into_any(),
        ],
    )?)
}

/// The micro layer's settings besides its cutoff (`MicroConfig`'s), and what it keeps from call
/// to call.
struct Micro {
    rule: Rule,
    /// the placeholder (`{tool_name}` filled in)
    template: String,
    /// the placeholder of each tool name met, and its characters (`layers::placeholder`'s, made
    /// once a name: a run's results are of a few tools)
    placeholders: FxHashMap<String, (Arc<str>, i64)>,
    min_chars: i64,
    clear_short: bool,
    /// only results whose content is a string (seed 003's `string_content_only`)
    string_only: bool,
    preserve: Vec<String>,
    /// act only over this many tokens (0: always), only where that frees this many
    trigger_tokens: i64,
    clear_at_least: i64,
    /// the trigger compares the history the client holds: the context with what the layer cleared
    /// counted whole (`trigger_on = "history"`, the API's server-side edit)
    history: bool,
    /// how many results, from the first, the layer has dealt with (its `ResultMemo` count in
    /// Python), and the characters it has taken out of the context (`micro.Cleared`)
    dealt: usize,
    cleared_chars: i64,
}

/// The snip layer's settings (`SnipConfig`'s).
struct Snip {
    max_messages: usize,
    keep_head: usize,
    pair_safe: PairSafe,
    /// the message put in the middle (`{n}`: how many it stands for)
    placeholder: String,
}

/// The budget layer: where the last message's results are over `max_chars`, the largest over
/// `persist_threshold` persisted as `layers/budget.py`'s `persisted` persists them (the reference):
/// here, where each is a string this loop reads and the message one it copies (`NativeBudget`),
/// else by Python (`persist(call, last, pos) -> message or None`: `keeping.PythonSteps.budget`).
struct Budget {
    max_chars: i64,
    persist_threshold: i64,
    preview_chars: usize,
    persist: Py<PyAny>,
    native: Option<NativeBudget>,
}

/// What budget's persisting is done with here: what tells Python its stats where a step Python
/// runs acts at the call (`PythonSteps.persisted`), the run's `RunEnv.persist(tool_use_id, text)
/// -> path` (the file written, as every output is), `NOTE` cut at its two fields, its length and
/// `MAX_PATH`; Python's `result_text(entry, block)` for a result whose content is not a string this
/// loop reads, its `persist_result(entry, k, text, call)` for a text this loop does not hold (a
/// sized placeholder in it, a lone surrogate), and `sized_len`; and what reads a string content.
struct NativeBudget {
    told: Py<PyAny>,
    write: Py<PyAny>,
    note: [String; 3],
    note_chars: i64,
    max_path: i64,
    result_text: Py<PyAny>,
    persist_result: Py<PyAny>,
    sized_len: Py<PyAny>,
    texts: NativeTexts,
}

/// What `LayerTurns::new` is given of budget's step: Python's persisting alone, or with what
/// persists here (`NativeBudget`'s parts, in its fields' order, but the texts).
type BudgetParts = (
    Py<PyAny>,
    Py<PyAny>,
    Py<PyAny>,
    String,
    i64,
    Py<PyAny>,
    Py<PyAny>,
    Py<PyAny>,
);

impl Budget {
    fn of(
        config: &Bound<'_, PyAny>,
        step: &Bound<'_, PyAny>,
        copies: Option<&Py<EntryCopies>>,
    ) -> PyResult<Self> {
        let py = config.py();
        let (persist, native) = match step.extract::<BudgetParts>() {
            Ok((persist, told, write, note, max_path, result_text, persist_result, sized_len)) => {
                // (`NOTE.format(path=..., preview=...)`: the template cut at its two fields, which
                // it holds once each, with no other brace)
                let cut = note.split_once("{path}").and_then(|(head, rest)| {
                    let (mid, tail) = rest.split_once("{preview}")?;
                    let parts = [head, mid, tail];
                    (!parts.iter().any(|p| p.contains(['{', '}'])))
                        .then(|| parts.map(str::to_owned))
                });
                let native = match (cut, copies) {
                    (Some(cut), Some(copies)) => Some(NativeBudget {
                        told,
                        write,
                        note_chars: note.chars().count() as i64,
                        note: cut,
                        max_path,
                        result_text,
                        persist_result,
                        sized_len,
                        texts: NativeTexts::new(
                            copies.borrow(py).entry_class(py),
                            py.import("orjson")?.getattr("dumps")?.unbind(),
                        ),
                    }),
                    _ => None,
                };
                (persist, native)
            }
            Err(_) => (step.clone().unbind(), None),
        };
        Ok(Budget {
            max_chars: config.getattr("max_chars")?.extract()?,
            persist_threshold: config.getattr("persist_threshold")?.extract()?,
            preview_chars: config.getattr("preview_chars")?.extract()?,
            persist,
            native,
        })
    }
}

/// The text budget persists of a result: held here, or a Python object this loop leaves to
/// Python (`persist_result`).
enum ResultText<'py> {
    Held(String),
    Python(Bound<'py, PyAny>),
}

impl NativeBudget {
    /// The text of the result at `block` of `entry` (`budget.result_text`): a string content read
    /// here, any other by Python; held where it is a string with no sized placeholder.
    fn text<'py>(&self, entry: &Bound<'py, PyAny>, block: i64) -> PyResult<ResultText<'py>> {
        let py = entry.py();
        let text = match self.texts.string_content(entry, block)? {
            Some(text) => text,
            None => {
                let text = self.result_text.bind(py).call1((entry, block))?;
                match text.cast::<PyString>().ok().and_then(|t| t.to_str().ok()) {
                    Some(t) => t.to_owned(),
                    None => return Ok(ResultText::Python(text)),
                }
            }
        };
        Ok(if text.contains(MARK) {
            ResultText::Python(PyString::new(py, &text).into_any())
        } else {
            ResultText::Held(text)
        })
    }
}

/// A message budget persisted results of here: the copy, how many and their characters, and what
/// tells Python its stats (`PythonSteps.persisted`).
struct Persisted<'py> {
    entry: Bound<'py, PyAny>,
    persisted: i64,
    chars: i64,
    told: Py<PyAny>,
}

enum Layer {
    Budget(Budget),
    Snip(Snip),
    Micro(Micro),
}

/// Where a manual compaction goes among the tool results of the call that asked for it
/// (`ManualConfig.mode`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Manual {
    Before,
    After,
    Replace,
}

/// What manual compaction's stub summary is made with here, beside the summary layer's `Stub`
/// (the same summary table: `Policy.config_for`): the steps' stats told of it
/// (`PythonSteps.manualised`) and, in `replace_results` mode, the message appended after it.
struct ManualStub {
    told: Py<PyAny>,
    message: Option<String>,
}

/// What `LayerTurns::new` is given of manual compaction's stub (`ManualStub`, in its fields' order).
type ManualStubParts = (Py<PyAny>, Option<String>);

/// What reactive compaction's stub summary is made with here (`layers/reactive.py` the reference:
/// the whole context summarised, its last `keep_tail` messages kept after it, the tail's cut moved
/// so that a tool pair is not split where `pair_safe`, its own template): the steps' stats told of
/// it (`PythonSteps.reactivated`).
struct ReactiveStub {
    told: Py<PyAny>,
    keep_tail: usize,
    pair_safe: bool,
    template: String,
}

/// What `LayerTurns::new` is given of reactive compaction's stub (`ReactiveStub`, in its fields'
/// order).
type ReactiveStubParts = (Py<PyAny>, usize, bool, String);

/// The compaction a stub summary is made for (`LayerTurns::stub_summary`; a compaction's stub
/// shared with the loop that holds it, which the summary's making changes).
enum Made {
    Summary,
    Manual(Arc<ManualStub>),
    Reactive(Arc<ReactiveStub>),
}

/// The compactions Python runs on the loop's context when it finds them due.
#[derive(Clone, Copy)]
enum Compaction {
    Reactive,
    Manual,
}

/// What the summary layer's trigger compares (`SummaryConfig.unit` and `measure`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Messages,
    Chars,
    Tokens,
    /// tokens as the harness measured them while the context is the recording's, else estimated
    Recorded,
}

/// The summary layer after the others (`loop.Turns._prepare`): its trigger checked here, the
/// layer itself run by Python (`summarise`) where the context is over it.
struct Summary {
    unit: Unit,
    /// `(call, recorded, entries, dealt) -> (entries or None, dealt, lowest changed, acted, closed)`:
    /// `layers/summary.py`'s `summary` on the context (`keeping.SummaryStep`); closed, its circuit
    /// breaker is open: it is not asked again
    summarise: Py<PyAny>,
    /// the summary made here, where the run's summarizer is the stub (None: Python makes it)
    stub: Option<Stub>,
}

/// The summary layer's options this loop makes a stub summary with (`keeping.stub_summary`
/// chooses: the stub summarizer, no option that needs Python; `layers/summary.py`'s `compact` and
/// `summarizers/stub.py` are the references): the messages kept verbatim around it, its message's
/// template and the assistant's acknowledgement, the input's limit, the prompt's characters (what
/// the stub bills), the stub's most characters; and what it asks of Python: an entry's text
/// (`text_of(message).strip()`), the ledger's saved transcripts (each summary's context noted
/// there, as `save_transcript` notes it) and the steps' stats (`PythonSteps.summarised`).
struct Stub {
    keep_head: usize,
    keep_tail: usize,
    template: String,
    ack: Option<String>,
    input_chars: i64,
    prompt_chars: usize,
    max_chars: usize,
    text_of: Py<PyAny>,
    saved: Py<PyList>,
    summarised: Py<PyAny>,
}

/// What `LayerTurns::new` is given of the stub (`Stub`, in its fields' order).
type StubParts = (
    usize,
    usize,
    String,
    Option<String>,
    i64,
    usize,
    usize,
    Py<PyAny>,
    Py<PyList>,
    Py<PyAny>,
);

/// What the layers did at a call (`LayerStats`' counts of them).
#[derive(Default)]
struct Done {
    snipped: i64,
    micro: i64,
    /// a layer Python ran changed the context (budget persisted a result; the summary, reactive or
    /// manual compaction summarised it)
    stepped: bool,
    /// the first message a layer changed
    lowest: Option<usize>,
    /// a step Python runs was asked (its stats are the call's: `loop.Turns._stepped` reads them)
    python: bool,
    /// the stub summaries made here at the call, their stats not yet told to Python
    made: Vec<MadeStats>,
}

impl Done {
    fn changed_at(&mut self, pos: usize) {
        self.lowest = Some(self.lowest.map_or(pos, |l| l.min(pos)));
    }

    /// What the loop made itself at this call (a stub summary, budget's persisting): told to Python
    /// now where a step Python runs acted at the call already; else counted by the batch
    /// (`LayerTurns.turns`) or told at the end of the call (`turn`).
    fn made(&mut self, py: Python<'_>, made: MadeStats) -> PyResult<()> {
        if self.python {
            made.tell(py)?;
        } else {
            self.made.push(made);
        }
        Ok(())
    }

    /// A step Python runs is asked at this call: the stub summaries made before it told to Python
    /// first (their stats are then the step's call's, in the order Python would have had them).
    fn python_asked(&mut self, py: Python<'_>) -> PyResult<()> {
        for m in self.made.drain(..) {
            m.tell(py)?;
        }
        self.python = true;
        Ok(())
    }
}

/// What made a stub summary: the summary layer, manual or reactive compaction (`LayerStats`'
/// `summaries`, `manual`, `reactive`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum MadeBy {
    Summary,
    Manual,
    Reactive,
    /// budget's persisting (no summary: its results persisted and their characters)
    Budget,
}

/// A stub summary made here: its stats as `PythonSteps._made` counts them, and what tells them to
/// Python (`summarised`, `manualised` or `reactivated`) where a step Python runs acts at its call.
struct MadeStats {
    by: MadeBy,
    told: Py<PyAny>,
    input_chars: i64,
    output_chars: usize,
    input_tokens: usize,
    output_tokens: usize,
    /// the results budget persisted, and their characters
    persisted: i64,
    persisted_chars: i64,
    lowest: usize,
}

impl MadeStats {
    /// Budget's persisting at a call (`PythonSteps.persisted` tells Python of it): `persisted`
    /// results of `chars` characters, the message at `lowest`.
    fn persisted(told: Py<PyAny>, persisted: i64, chars: i64, lowest: usize) -> Self {
        MadeStats {
            by: MadeBy::Budget,
            told,
            input_chars: 0,
            output_chars: 0,
            input_tokens: 0,
            output_tokens: 0,
            persisted,
            persisted_chars: chars,
            lowest,
        }
    }

    fn tell(&self, py: Python<'_>) -> PyResult<()> {
        if self.by == MadeBy::Budget {
            self.told
                .bind(py)
                .call1((self.persisted, self.persisted_chars, self.lowest))?;
            return Ok(());
        }
        self.told.bind(py).call1((
            self.input_chars,
            self.output_chars,
            self.input_tokens,
            self.output_tokens,
            self.lowest,
        ))?;
        Ok(())
    }
}

/// What the loop gives back of a call: its record, the context before the layers acted (messages,
/// the sum of their characters), what they did (snipped, results replaced) and the first message
/// they changed.
type Turned<'py> = (Bound<'py, PyAny>, usize, i64, i64, i64, Option<usize>);

/// The whole per-call loop of a policy made of snip and micro (`observation-masking` among them):
/// each call's messages appended, the layers run in the policy's order as `engine/layers/snip.py`
/// and `micro.py` run them (`layers.rs` their arithmetic), the context sized, judged and measured,
/// recall asked (of the run's native check; for a recall of another kind, of Python's `recall`,
/// given this loop as the context it reads), the record made.
/// `engine/keeping.py`'s `layer_turns` chooses it; `loop.Turns` is the reference.
#[pyclass(module = "compactlab._native")]
pub struct LayerTurns {
    /// the context sent (`Entry` objects: a replaced result's message is the copy Python made)
    entries: Py<PyList>,
    chars: Vec<i64>,
    chars_sum: i64,
    origins: Vec<i64>,
    /// `Context`'s origin keys: per position the origin, or for a message a policy made the one
    /// before it (-1 at the start): non-decreasing, a transcript message found by bisection
    keys: Vec<i64>,
    /// what the layers read: each message's turn, tool uses and results
    held: Held,
    layers: Vec<Layer>,
    summary: Option<Summary>,
    /// reactive compaction (`(max_retries, step)`) and manual compaction (`(mode, step)`): each
    /// `(call, recorded, entries, dealt) -> (entries or None, dealt, lowest changed, acted)`, run by
    /// Python on the context (`keeping.PythonSteps`) when the loop finds it due
    reactive: Option<(usize, Py<PyAny>, Option<Arc<ReactiveStub>>)>,
    manual: Option<(Manual, Py<PyAny>, Option<Arc<ManualStub>>)>,
    /// the run's tool names by tool_use id (filled as calls are read), and its ledger's
    /// `cleared_at` (when each result was replaced: recall's attribution)
    tool_names: Py<PyDict>,
    cleared_at: Py<PyDict>,
    /// `RunEnv.new_entry(message, by, call)`: a message the policy made (a fresh origin, noted),
    /// made here where it is `RunEnv`'s own (`MadeEntries`)
    new_entry: Py<PyAny>,
    made: Option<MadeEntries>,
    /// recall's row of each call: asked of the run's native check here, or of Python
    recall: Recall,
    measures: Py<CallMeasures>,
    record: Py<PyAny>,
    /// micro's gates by the recording's times and prompts hold at this call (`at_prompts`,
    /// `idle_minutes`: the caller's to judge, told at each call; `layers/micro.py`'s `_due`)
    micro_due: bool,
    /// the recording's micro replacements shared by its runs after the first (`replaced`:
    /// `(source entry, k, placeholder) -> entry`, of the recording's own messages unchanged or so
    /// replaced, at most `limit` items; None: this run's own, as a recording replayed once)
    replaced: Option<(Py<PyDict>, usize)>,
    /// micro's copies of a message left unread in its file, made without its Python (None:
    /// each made by its `with_result_content`)
    copies: Option<Py<EntryCopies>>,
}

#[pymethods]
impl LayerTurns {
    /// The loop of a run: its `measures`, `TurnRecord`, its `layers` in order (`(name, config,
    /// step)`: `budget` a `BudgetConfig` and its step in Python, `snip` a `SnipConfig`, `micro` a
    /// `MicroConfig` whose options this loop runs, as
    /// `keeping.native_layers` says), the run's tool names, `cleared_at` and `new_entry`, its
    /// `recall`, and its `summary` layer (`(unit, summarise)`: what its trigger compares, and the
    /// layer run on the context) if it has one; `replaced`: the recording's micro replacements
    /// its runs share (`keeping.shared_replacements`) and how many it may hold; `copies`: what
    /// makes micro's copies of a message left unread (`EntryCopies`), or None.
    #[new]
    #[pyo3(signature = (measures, record, layers, tool_names, cleared_at, new_entry, recall, summary=None,
                        reactive=None, manual=None, native_recall=None, replaced=None, copies=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        measures: Py<CallMeasures>,
        record: Py<PyAny>,
        layers: &Bound<'_, PyAny>,
        tool_names: Py<PyDict>,
        cleared_at: Py<PyDict>,
        new_entry: Py<PyAny>,
        recall: Py<PyAny>,
        summary: Option<(String, Py<PyAny>, Option<StubParts>)>,
        reactive: Option<(usize, Py<PyAny>, Option<ReactiveStubParts>)>,
        manual: Option<(String, Py<PyAny>, Option<ManualStubParts>)>,
        native_recall: Option<NativeRecallParts>,
        replaced: Option<(Py<PyDict>, usize)>,
        copies: Option<Py<EntryCopies>>,
    ) -> PyResult<Self> {
        let manual = match manual {
            None => None,
            Some((mode, step, stub)) => Some((
                match mode.as_str() {
                    "before_results" => Manual::Before,
                    "after_results" => Manual::After,
                    "replace_results" => Manual::Replace,
                    other => {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "a manual compaction mode {other:?}"
                        )))
                    }
                },
                step,
                stub.map(|(told, message)| Arc::new(ManualStub { told, message })),
            )),
        };
        let chars_per_token = measures.borrow(py).inner.chars_per_token;
        let mut made = Vec::new();
        for layer in members::items(layers)? {
            let (name, config, step): (String, Bound<'_, PyAny>, Option<Py<PyAny>>) =
                layer?.extract()?;
            made.push(match (name.as_str(), step) {
                ("micro", _) => Layer::Micro(micro_of(&config, chars_per_token)?),
                ("snip", _) => Layer::Snip(snip_of(&config)?),
                ("budget", Some(step)) => {
                    Layer::Budget(Budget::of(&config, step.bind(py), copies.as_ref())?)
                }
                (other, _) => {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "the native loop does not run a {other} layer (budget: with its step)"
                    )))
                }
            });
        }
        // (the check knows the shared replacements for every run, as the recording's own messages)
        if let (Some((_, _, check, _, _)), Some((known, _))) = (&native_recall, &replaced) {
            check.borrow_mut(py).share_replacements(known.clone_ref(py));
        }
        Ok(LayerTurns {
            entries: PyList::empty(py).unbind(),
            chars: Vec::new(),
            chars_sum: 0,
            origins: Vec::new(),
            keys: Vec::new(),
            held: Held::default(),
            layers: made,
            summary: match summary {
                None => None,
                Some((unit, summarise, stub)) => Some(Summary {
                    unit: match unit.as_str() {
                        "messages" => Unit::Messages,
                        "chars" => Unit::Chars,
                        "tokens" => Unit::Tokens,
                        "recorded" => Unit::Recorded,
                        other => {
                            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                                "a summary trigger in {other:?}"
                            )))
                        }
                    },
                    summarise,
                    stub: stub.map(|p| Stub {
                        keep_head: p.0,
                        keep_tail: p.1,
                        template: p.2,
                        ack: p.3,
                        input_chars: p.4,
                        prompt_chars: p.5,
                        max_chars: p.6,
                        text_of: p.7,
                        saved: p.8,
                        summarised: p.9,
                    }),
                }),
            },
            reactive: reactive.map(|(max_retries, step, stub)| {
                (
                    max_retries,
                    step,
                    stub.map(|(told, keep_tail, pair_safe, template)| {
                        Arc::new(ReactiveStub {
                            told,
                            keep_tail,
                            pair_safe,
                            template,
                        })
                    }),
                )
            }),
            manual,
            tool_names,
            cleared_at,
            made: MadeEntries::of(new_entry.bind(py))?,
            new_entry,
            recall: match native_recall {
                None => Recall::Python(recall),
                Some((probes, ledger, check, done, intact_first)) => Recall::Native(AskRecall {
                    probes,
                    ledger,
                    check,
                    done,
                    intact_first,
                    stable: usize::MAX,
                }),
            },
            measures,
            record,
            micro_due: true,
            replaced,
            copies,
        })
    }

    /// The messages of the context so far.
    #[getter]
    fn entries(&self, py: Python<'_>) -> Py<PyList> {
        self.entries.clone_ref(py)
    }

    /// `Context.find_origin`: the position of the transcript's message `origin` (None: not here).
    fn find_origin(&self, origin: i64) -> Option<usize> {
        find_by_keys(&self.keys, &self.origins, origin)
    }

    /// `Context.made_in_gap`: for a transcript message not here, the message a policy made that
    /// stands where it was (None: none).
    fn made_in_gap<'py>(
        &self,
        py: Python<'py>,
        origin: i64,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let j = self.keys.partition_point(|&k| k < origin);
        if j > 0 && self.origins[j - 1] < 0 {
            return Ok(Some(self.entries.bind(py).get_item(j - 1)?));
        }
        Ok(None)
    }

    /// One call: `pending` appended, the layers run (the summary's over `trigger`, `recorded`: the
    /// context's tokens as the harness measured them, where known), the context measured against
    /// `window` (`as_recorded`: the context was the recording's until this call; `answered`: the
    /// recording shows this call answered), recall asked, the record made; then `reply` appended.
    /// `micro_due`: micro's gates by time and prompt hold at this call (else it does not act).
    #[pyo3(signature = (call, pos, pending, reply, window, as_recorded, answered, recorded=None, trigger=0,
                        manual=false, reactive_window=0, micro_due=true))]
    #[allow(clippy::too_many_arguments)]
    fn turn<'py>(
        slf: &Bound<'py, Self>,
        call: usize,
        pos: i64,
        pending: &Bound<'py, PyAny>,
        reply: &Bound<'py, PyAny>,
        window: i64,
        as_recorded: bool,
        answered: bool,
        recorded: Option<i64>,
        trigger: i64,
        manual: bool,
        reactive_window: i64,
        micro_due: bool,
    ) -> PyResult<Turned<'py>> {
        let asked = Asked {
            window,
            as_recorded,
            answered,
            recorded,
            trigger,
            manual,
            reactive_window,
            micro_due,
        };
        let t = Self::turn_in(slf, call, pos, pending, reply, asked)?;
        for m in &t.made {
            m.tell(slf.py())?; // (the caller's `_layered` reads the steps' stats)
        }
        Ok((
            t.record,
            t.n_before,
            t.chars_before,
            t.snipped,
            t.micro,
            t.lowest,
        ))
    }

    /// A batch of calls (`(call, pos, pending, reply)` each, as `Feed.call_batches` gives them) in
    /// one crossing, where no step reads the call's times or the recorded tokens (`loop.Turns._batch`
    /// says when): each as `turn` runs it, with what `loop.Turns._layered` does around it done here
    /// — the reply's tool names learnt before its call (`add_tool_names`); the context no longer the
    /// recording's from a call the recording `departs` at (before it) or one a layer changed (after
    /// it); a compact tool's call noted for the next call (`manual_tool`); and, where only snip and
    /// micro acted, their counts added up and their event (`event(...)`, appended to `events`: the
    /// layers `named` for snip alone, micro alone, both) made. A call where a step Python runs acted
    /// is handed to `stepped(call, record, n_before, chars_before, snipped, micro, lowest)`, which does
    /// what `_layered` does with the step's stats and says whether the layers acted.
    /// `answered`/`departs`: per call (None: none answered, none departs). Returns the records, whether
    /// the context is still the recording's, whether the last reply called the compact tool, and
    /// the snip and micro counts and lowest change of the calls `stepped` was not given.
    #[pyo3(signature = (batch, window, as_recorded, answered, departs, trigger, manual, reactive_window,
                        manual_tool, stepped, events, event, named, made=None))]
    #[allow(clippy::too_many_arguments)]
    fn turns<'py>(
        slf: &Bound<'py, Self>,
        batch: &Bound<'py, PyList>,
        window: i64,
        mut as_recorded: bool,
        answered: Option<Vec<bool>>,
        departs: Option<Vec<bool>>,
        trigger: i64,
        mut manual: bool,
        reactive_window: i64,
        manual_tool: Option<Bound<'py, PyAny>>,
        stepped: &Bound<'py, PyAny>,
        events: &Bound<'py, PyList>,
        event: &Bound<'py, PyAny>,
        named: (Bound<'py, PyList>, Bound<'py, PyList>, Bound<'py, PyList>),
        made: Option<MadeCounted<'py>>,
    ) -> PyResult<Batched<'py>> {
        let py = slf.py();
        if [&answered, &departs]
            .iter()
            .any(|v| v.as_ref().is_some_and(|v| v.len() != batch.len()))
        {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "answered and departs: one flag a call of the batch",
            ));
        }
        let tool_names = slf.borrow().tool_names.clone_ref(py);
        let tool_names = tool_names.bind(py);
        let records = PyList::empty(py);
        let (mut snipped_sum, mut micro_sum, mut lowest_all) = (0i64, 0i64, None::<usize>);
        let mut made_sums: MadeSums = [0; 9];
        for (k, item) in batch.iter().enumerate() {
            let (call, pos, pending, reply): (usize, i64, Bound<'py, PyAny>, Bound<'py, PyAny>) =
                item.extract()?;
            // (a name is known from its tool_use on: `add_tool_names`)
            let ids = reply.getattr(intern!(py, "tool_use_ids"))?;
            let names = reply.getattr(intern!(py, "tool_names"))?;
            if ids.is_truthy()? {
                for (id, name) in members::items(&ids)?.zip(members::items(&names)?) {
                    tool_names.set_item(id?, name?)?;
                }
            }
            if departs.as_ref().is_some_and(|d| d[k]) {
                as_recorded = false;
            }
            let asked = Asked {
                window,
                as_recorded,
                answered: answered.as_ref().is_some_and(|a| a[k]),
                recorded: None,
                trigger,
                manual,
                reactive_window,
                micro_due: true,
            };
            let t = Self::turn_in(slf, call, pos, &pending, &reply, asked)?;
            let counted = match (&made, t.made.is_empty()) {
                (Some(counted), false) => Some(counted),
                (None, false) => {
                    for m in &t.made {
                        m.tell(py)?;
                    }
                    None
                }
                _ => None,
            };
            if t.python || (!t.made.is_empty() && counted.is_none()) {
                let acted: bool = stepped
                    .call1((
                        call,
                        &t.record,
                        t.n_before,
                        t.chars_before,
                        t.snipped,
                        t.micro,
                        t.lowest,
                    ))?
                    .extract()?;
                as_recorded &= !acted;
            } else if let Some(lowest) = t.lowest {
                // (what the layers did counted here, as `_stepped` counts a step's: snip's and
                // micro's, and the stub summaries' where the loop made them)
                snipped_sum += t.snipped;
                micro_sum += t.micro;
                lowest_all = Some(lowest_all.map_or(lowest, |l| l.min(lowest)));
                if let Some(counted) = counted {
                    let sums = count_made(counted, slf, call, &t, (events, event))?;
                    for (sum, n) in made_sums.iter_mut().zip(sums) {
                        *sum += n;
                    }
                    as_recorded = false;
                } else if t.snipped != 0 || t.micro != 0 {
                    let layers = match (t.snipped != 0, t.micro != 0) {
                        (true, false) => &named.0,
                        (false, true) => &named.1,
                        _ => &named.2,
                    };
                    let layers = layers.get_slice(0, layers.len());
                    append_event(slf, call, &t, (layers, 0, 0), (events, event))?;
                    as_recorded = false;
                }
            }
            manual = match &manual_tool {
                Some(tool) => names.contains(tool)?,
                None => false,
            };
            records.append(t.record)?;
        }
        Ok((
            records,
            as_recorded,
            manual,
            snipped_sum,
            micro_sum,
            lowest_all,
            made_sums,
        ))
    }
}

/// What a batch's loop counts a stub summary with where no step Python runs acted at its call
/// (`loop.Turns._batch` gives it): the `ACTIONS` (each counter's name, the layer an event names for
/// it), the run's summary requests (`SummaryCalls.rows`), and what gives the summary layer's
/// circuit breaker (its state, made where first asked: `RunEnv.state_of(Breaker)`).
type MadeCounted<'py> = (Vec<(String, String)>, Bound<'py, PyList>, Bound<'py, PyAny>);

/// `Turns._stepped` of a call whose layers' only steps were stub summaries made here: their
/// stats into the call's record, the run's summary requests and the call's event (`_event`: the
/// layers that acted, in `ACTIONS`' order), the breaker's failures cleared as `summarised` clears
/// them; the stats for the run's totals.
fn count_made<'py>(
    (actions, rows, breaker): &MadeCounted<'py>,
    slf: &Bound<'py, LayerTurns>,
    call: usize,
    t: &Called<'py>,
    events: (&Bound<'py, PyList>, &Bound<'py, PyAny>),
) -> PyResult<MadeSums> {
    let py = slf.py();
    let [mut summaries, mut reactive, mut manual, mut input_chars, mut output_chars] = [0i64; 5];
    let [mut input_tokens, mut output_tokens, mut persisted, mut persisted_chars] = [0i64; 4];
    for m in &t.made {
        match m.by {
            MadeBy::Summary => {
                summaries += 1;
                breaker.call0()?.setattr(intern!(py, "failures"), 0)?;
            }
            MadeBy::Reactive => reactive += 1,
            MadeBy::Manual => manual += 1,
            MadeBy::Budget => {}
        }
        persisted += m.persisted;
        persisted_chars += m.persisted_chars;
        input_chars += m.input_chars;
        output_chars += m.output_chars as i64;
        input_tokens += m.input_tokens as i64;
        output_tokens += m.output_tokens as i64;
    }
    set_columns(
        &t.record,
        &[
            (Column::Persisted, persisted),
            (Column::PersistedChars, persisted_chars),
            (Column::Summarized, summaries),
            (Column::SummaryInputChars, input_chars),
            (Column::SummaryOutputChars, output_chars),
            (Column::Reactive, reactive),
            (Column::Manual, manual),
        ],
    )?;
    let requests = summaries + reactive + manual;
    if input_tokens != 0 || output_tokens != 0 {
        rows.append((call, input_tokens, 0, output_tokens, requests.max(1)))?;
    }
    let layers = PyList::empty(py);
    for (stat, layer) in actions {
        let count = match stat.as_str() {
            "persisted" => persisted,
            "snipped" => t.snipped,
            "micro_compacted" => t.micro,
            "summaries" => summaries,
            "reactive" => reactive,
            "manual" => manual,
            _ => 0,
        };
        if count != 0 {
            layers.append(layer)?;
        }
    }
    append_event(slf, call, t, (layers, requests, persisted), events)?;
    Ok([
        summaries,
        reactive,
        manual,
        input_chars,
        output_chars,
        input_tokens,
        output_tokens,
        persisted,
        persisted_chars,
    ])
}

/// The call's event (`Turns._event`), appended to `events` (made by `event`): the `layers` that
/// acted, the context before them (its tokens counted as the run counts them) and after, the
/// results micro replaced, the messages snip dropped and the `summaries` made.
fn append_event<'py>(
    slf: &Bound<'py, LayerTurns>,
    call: usize,
    t: &Called<'py>,
    (layers, summaries, persisted): (Bound<'py, PyList>, i64, i64),
    (events, event): (&Bound<'py, PyList>, &Bound<'py, PyAny>),
) -> PyResult<()> {
    let before = {
        let this = slf.borrow();
        let measures = this.measures.borrow(slf.py());
        measures
            .inner
            .tokens(list_chars(t.chars_before, t.n_before))
    };
    let py = slf.py();
    // (the results replaced: micro's placeholders and budget's notes)
    let (cleared, n_before, n) = (t.micro + persisted, t.n_before as i64, t.n as i64);
    if event.is(py.get_type::<CompactionEvent>()) {
        // (the native class: made here, as its `__new__` makes one)
        let made = CompactionEvent::new(
            py,
            call as i64,
            layers.unbind(),
            n_before,
            n,
            before,
            t.tokens,
            cleared,
            t.snipped,
            summaries,
            None,
        );
        return events.append(Bound::new(py, made)?);
    }
    events.append(event.call1((
        call, layers, n_before, n, before, t.tokens, cleared, t.snipped, summaries,
    ))?)
}

/// What a call is asked with besides its messages (`LayerTurns.turn`'s arguments).
struct Asked {
    window: i64,
    as_recorded: bool,
    answered: bool,
    recorded: Option<i64>,
    trigger: i64,
    manual: bool,
    reactive_window: i64,
    micro_due: bool,
}

/// What a call gave: its record, the context before the layers acted (messages, the sum of their
/// characters) and after (messages, tokens), what they did (snipped, results replaced), the
/// first message they changed, and whether a step Python runs was asked.
struct Called<'py> {
    record: Bound<'py, PyAny>,
    n_before: usize,
    chars_before: i64,
    n: usize,
    tokens: i64,
    snipped: i64,
    micro: i64,
    lowest: Option<usize>,
    python: bool,
    /// the stub summaries made at the call, where no step Python runs acted (their stats the loop's)
    made: Vec<MadeStats>,
}

/// The stats of the stub summaries and budget's persisting a batch's loop counted itself:
/// `(summaries, reactive, manual, summary input chars, output chars, input tokens, output tokens,
/// persisted, persisted chars)` (`LayerStats`' fields).
type MadeSums = [i64; 9];

/// What `LayerTurns.turns` gives back of a batch.
type Batched<'py> = (
    Bound<'py, PyList>,
    bool,
    bool,
    i64,
    i64,
    Option<usize>,
    MadeSums,
);

impl LayerTurns {
    /// One call (`turn`'s, and each of a batch's).
    fn turn_in<'py>(
        slf: &Bound<'py, Self>,
        call: usize,
        pos: i64,
        pending: &Bound<'py, PyAny>,
        reply: &Bound<'py, PyAny>,
        asked: Asked,
    ) -> PyResult<Called<'py>> {
        let Asked {
            window,
            as_recorded,
            answered,
            recorded,
            trigger,
            manual,
            reactive_window,
            micro_due,
        } = asked;
        let py = slf.py();
        let reply_chars: i64 = reply.getattr(intern!(py, "chars"))?.extract()?;
        let (record, recall, asked, turned) = {
            let mut this = slf.borrow_mut();
            this.micro_due = micro_due;
            let mut done = Done::default();
            let mode = this
                .manual
                .as_ref()
                .map(|(mode, _, _)| *mode)
                .filter(|_| manual);
            // the context as it would be sent with no layer acting (what an event removed is
            // measured from it): the pending messages counted before a manual compaction
            let (n_before, before) = if mode.is_some_and(|m| m != Manual::After) {
                let pending = members::items(pending)?.collect::<PyResult<Vec<_>>>()?;
                let mut chars = this.chars_sum;
                for e in &pending {
                    chars += e.getattr(intern!(py, "chars"))?.extract::<i64>()?;
                }
                let before = (this.chars.len() + pending.len(), chars);
                this.compact(py, Compaction::Manual, call, recorded, &mut done)?;
                for e in &pending {
                    // (seed 004 appends its own message instead of the tool results)
                    if mode == Some(Manual::Replace)
                        && done.stepped
                        && e.getattr(intern!(py, "results"))?.is_truthy()?
                    {
                        continue;
                    }
                    this.append(e)?;
                }
                before
            } else {
                for e in members::items(pending)? {
                    this.append(&e?)?;
                }
                (this.chars.len(), this.chars_sum)
            };
            if mode == Some(Manual::After) {
                this.compact(py, Compaction::Manual, call, recorded, &mut done)?;
            }
            // (a context manual compaction changed is not the one the recording measured)
            let recorded = if done.lowest.is_some() {
                None
            } else {
                recorded
            };
            this.prepare(py, call, recorded, trigger, &mut done)?;
            let mut tokens = this.tokens(py);
            let mut retries = 0;
            while let Some((max_retries, _, _)) = this.reactive {
                if retries >= max_retries || tokens <= reactive_window {
                    break;
                }
                retries += 1;
                if !this.compact(py, Compaction::Reactive, call, recorded, &mut done)? {
                    break; // it changed nothing
                }
                this.prepare(py, call, recorded, trigger, &mut done)?;
                tokens = this.tokens(py);
            }
            let n = this.chars.len();
            let chars = list_chars(this.chars_sum, n);
            let mut measures = this.measures.borrow_mut(py);
            let measured = &mut measures.inner;
            let acted = done.snipped != 0 || done.micro != 0 || done.stepped;
            let intact = as_recorded && !acted;
            let overflow = tokens > window && !(intact && answered);
            let changed_from = done.lowest.unwrap_or(n);
            let at = At {
                call,
                changed_from,
                tokens,
                reply_chars,
            };
            let (all, keys, origins) = (&this.chars, &this.keys, &this.origins);
            let row = measured.measure(
                py,
                this.entries.bind(py),
                at,
                |start| Ok(all[start..].to_vec()),
                |origin| Ok(find_by_keys(keys, origins, origin)),
            )?;
            drop(measures);
            let record = make_record(
                this.record.bind(py),
                (call, pos),
                &row,
                (n, chars, tokens),
                (done.snipped, done.micro),
                overflow,
            )?;
            let asked = (call, pos, changed_from, intact, tokens, reply_chars);
            let turned = Called {
                record: record.clone(),
                n_before,
                chars_before: before,
                n,
                tokens,
                snipped: done.snipped,
                micro: done.micro,
                lowest: done.lowest,
                python: done.python,
                made: std::mem::take(&mut done.made),
            };
            let recall = this.recall.asking(py, call, changed_from, intact)?;
            let entries = this.entries.clone_ref(py);
            (record, recall, (asked, entries), turned)
        };
        // (recall reads this loop's context: its borrow is let go first)
        let ((call, pos, changed_from, intact, tokens, reply_chars), entries) = asked;
        match recall {
            Asking::Python(recall) => {
                recall.bind(py).call1((
                    call,
                    pos,
                    changed_from,
                    intact,
                    tokens,
                    reply_chars,
                    &record,
                    slf,
                ))?;
            }
            Asking::Nothing => {}
            Asking::Native(ask) => ask.row(call, entries.bind(py), &record)?,
        }
        slf.borrow_mut().append(reply)?;
        Ok(turned)
    }
}

/// What the native recall is made of (`Recall.natively` in `measures/recall.py`): the run's probes
/// by call, its ledger, its native check, the run's ledger of what each layer did (`RunEnv.ledger`:
/// the attribution's), and whether a context that is the recording's own is not read
/// (`IntactFirstRecall`).
type NativeRecallParts = (
    Py<PyAny>,
    Py<PyAny>,
    Py<RecallCheck>,
    Option<Py<PyAny>>,
    bool,
);

/// Where the loop asks recall's row of a call.
enum Recall {
    /// Python's `(call, pos, changed_from, intact, tokens, reply_chars, record, context)`
    /// (`Measures.recall_at`: a recall of another kind, a test's)
    Python(Py<PyAny>),
    /// the run's native check, asked here as `Recall.at_call` asks it (its reference)
    Native(AskRecall),
}

/// `Recall.at_call` (and `IntactFirstRecall`'s) on the run's native check, with no Python between.
struct AskRecall {
    /// by call: a `dict` of Python's `Probe`s, or those read back from the cache (`StoredProbes`)
    probes: Py<PyAny>,
    ledger: Py<PyAny>,
    check: Py<RecallCheck>,
    done: Option<Py<PyAny>>,
    intact_first: bool,
    /// the lowest position a layer changed at the calls since the last check (`Recall.stable`)
    stable: usize,
}

/// What a call asks of recall once the loop's borrow is let go.
enum Asking {
    Python(Py<PyAny>),
    /// the call has no probes
    Nothing,
    Native(Ask),
}

/// A call's probes and how they are checked: every one kept (`stable` None: the context is the
/// recording's own), or by the native check, told how much of the context it read last time.
struct Ask {
    probes: CallProbes,
    ledger: Py<PyAny>,
    check: Py<RecallCheck>,
    done: Option<Py<PyAny>>,
    stable: Option<usize>,
}

/// A call's probes: Python's (a list of `Probe`s), or the rows read back from the cache.
enum CallProbes {
    Python(Py<PyAny>),
    Stored(Py<StoredProbes>),
}

impl Recall {
    /// What `call` asks of recall (`Recall.at_call` up to the check), `changed_from` noted.
    fn asking(
        &mut self,
        py: Python<'_>,
        call: usize,
        changed_from: usize,
        intact: bool,
    ) -> PyResult<Asking> {
        let r = match self {
            Recall::Python(recall) => return Ok(Asking::Python(recall.clone_ref(py))),
            Recall::Native(r) => r,
        };
        r.stable = r.stable.min(changed_from);
        let by_call = r.probes.bind(py);
        let probes = if let Ok(stored) = by_call.cast::<StoredProbes>() {
            if !stored.get().holds(call as i64) {
                return Ok(Asking::Nothing);
            }
            CallProbes::Stored(stored.clone().unbind())
        } else {
            let Some(probes) = by_call.cast::<PyDict>()?.get_item(call)? else {
                return Ok(Asking::Nothing);
            };
            if !probes.is_truthy()? {
                return Ok(Asking::Nothing);
            }
            CallProbes::Python(probes.unbind())
        };
        let stable = if intact && r.intact_first {
            None
        } else {
            Some(std::mem::replace(&mut r.stable, usize::MAX))
        };
        Ok(Asking::Native(Ask {
            probes,
            ledger: r.ledger.clone_ref(py),
            check: r.check.clone_ref(py),
            done: r.done.as_ref().map(|d| d.clone_ref(py)),
            stable,
        }))
    }
}

impl Ask {
    /// The call's probes checked against the context `entries`, their count, those kept and
    /// those recoverable written into its `record` (`Measures.recall_at`).
    fn row(
        self,
        call: usize,
        entries: &Bound<'_, PyList>,
        record: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = entries.py();
        let ledger = Ledger::of(self.ledger.bind(py))?;
        let ledger = &ledger;
        let call = call as i64;
        let probes = match &self.probes {
            CallProbes::Python(probes) => GivenProbe::all_of(probes.bind(py))?,
            CallProbes::Stored(stored) => stored.get().given(py, call)?,
        };
        let (n, kept, recoverable) = match self.stable {
            None => {
                let n = self.check.borrow(py).all_kept(&probes, call, ledger)?;
                (n, n, 0)
            }
            Some(stable) => {
                let n = probes.len();
                let done = self.done.as_ref().map(|d| d.bind(py));
                let (kept, recoverable) = self.check.borrow_mut(py).check_given(
                    &probes,
                    entries,
                    Some(stable),
                    call,
                    Some(ledger),
                    done,
                )?;
                (n, kept, recoverable)
            }
        };
        set_columns(
            record,
            &[
                (Column::Probes, n as i64),
                (Column::ProbesKept, kept as i64),
                (Column::ProbesRecoverable, recoverable as i64),
            ],
        )
    }
}

/// `(micro config) -> Micro`, refusing an option the loop does not run.
fn micro_of(config: &Bound<'_, PyAny>, chars_per_token: f64) -> PyResult<Micro> {
    let get = |name: &str| config.getattr(name);
    if get("clear_inputs")?.is_truthy()? {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "the native loop does not run micro's clear_inputs",
        ));
    }
    let keep_by: String = get("keep_by")?.extract()?;
    let keep_by = KeepBy::parse(&keep_by)
        .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("keep_by {keep_by:?}")))?;
    let protect: f64 = get("protect_tokens")?.extract()?;
    let trigger_on: String = get("trigger_on")?.extract()?;
    Ok(Micro {
        rule: Rule {
            keep_recent: get("keep_recent")?.extract()?,
            keep_by,
            only_consumed: get("only_consumed")?.extract()?,
            protect_chars: protect * chars_per_token,
        },
        template: get("placeholder")?.extract()?,
        placeholders: FxHashMap::default(),
        min_chars: get("min_chars")?.extract()?,
        clear_short: get("clear_short")?.extract()?,
        string_only: get("string_content_only")?.extract()?,
        preserve: get("preserve_tools")?.extract()?,
        trigger_tokens: get("trigger_tokens")?.extract()?,
        clear_at_least: get("clear_at_least")?.extract()?,
        history: trigger_on == "history",
        dealt: 0,
        cleared_chars: 0,
    })
}

/// `(snip config) -> Snip`.
fn snip_of(config: &Bound<'_, PyAny>) -> PyResult<Snip> {
    let py = config.py();
    let pair_safe = config.getattr("pair_safe")?;
    let pair_safe = if pair_safe.eq(intern!(py, "head"))? {
        PairSafe::Head
    } else if pair_safe.is_truthy()? {
        PairSafe::Both
    } else {
        PairSafe::Off
    };
    let (max_messages, keep_head): (usize, usize) = (
        config.getattr("max_messages")?.extract()?,
        config.getattr("keep_head")?.extract()?,
    );
    if keep_head >= max_messages {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "keep_head must be smaller than max_messages",
        ));
    }
    Ok(Snip {
        max_messages,
        keep_head,
        pair_safe,
        placeholder: config.getattr("placeholder")?.extract()?,
    })
}

/// What the layers read of a message (`Entry`): its turn, whether it calls tools, its results' sizes.
fn facts_of(entry: &Bound<'_, PyAny>, origin: i64) -> PyResult<Facts> {
    let py = entry.py();
    let role = members::fact(entry, Fact::Role)?;
    let turn = if role.eq(intern!(py, "assistant"))? {
        Turn::Agent
    } else if origin >= 0
        && role.eq(intern!(py, "user"))?
        && members::fact(entry, Fact::HasText)?.is_truthy()?
    {
        Turn::Prompt
    } else {
        Turn::Other
    };
    let sizes = members::items(&members::fact(entry, Fact::Results)?)?
        .map(|fact| fact?.getattr(intern!(py, "size"))?.extract())
        .collect::<PyResult<Vec<i64>>>()?;
    let uses = members::fact(entry, Fact::ToolUseIds)?.is_truthy()?;
    Ok(Facts { turn, uses, sizes })
}

impl LayerTurns {
    fn append(&mut self, entry: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = entry.py();
        let chars: i64 = members::fact(entry, Fact::Chars)?.extract()?;
        let origin: i64 = members::fact(entry, Fact::Origin)?.extract()?;
        self.held.push(facts_of(entry, origin)?);
        self.entries.bind(py).append(entry)?;
        self.chars.push(chars);
        self.chars_sum += chars;
        let key = self.keys.last().copied().unwrap_or(-1).max(origin);
        self.keys.push(key);
        self.origins.push(origin);
        Ok(())
    }

    /// The context's tokens by the run's estimate.
    fn tokens(&self, py: Python<'_>) -> i64 {
        let chars = list_chars(self.chars_sum, self.chars.len());
        self.measures.borrow(py).inner.tokens(chars)
    }

    /// `loop.Turns._prepare`: the layers in the policy's order, then the summary.
    fn prepare(
        &mut self,
        py: Python<'_>,
        call: usize,
        recorded: Option<i64>,
        trigger: i64,
        done: &mut Done,
    ) -> PyResult<()> {
        self.run_layers(py, call, done)?;
        self.summary(py, call, recorded, trigger, done)
    }

    /// Reactive or manual compaction at `call`, run by Python on the context (its stub summary made
    /// here, where the loop makes the summary layer's: `stub_summary`): whether it changed it.
    fn compact(
        &mut self,
        py: Python<'_>,
        which: Compaction,
        call: usize,
        recorded: Option<i64>,
        done: &mut Done,
    ) -> PyResult<bool> {
        // (the stub's summary made here where it can be; an empty context is Python's, which
        // leaves it)
        let made = match which {
            Compaction::Manual => self
                .manual
                .as_ref()
                .and_then(|(_, _, s)| s.clone())
                .map(Made::Manual),
            Compaction::Reactive => (self.reactive.as_ref())
                .and_then(|(_, _, s)| s.clone())
                .map(Made::Reactive),
        };
        if let Some(made) = made {
            if !self.chars.is_empty() && self.stub_summary(py, call, done, &made)? {
                return Ok(true);
            }
        }
        let step = match which {
            Compaction::Reactive => self
                .reactive
                .as_ref()
                .map(|(_, step, _)| step.clone_ref(py)),
            Compaction::Manual => self.manual.as_ref().map(|(_, step, _)| step.clone_ref(py)),
        };
        let Some(step) = step else {
            return Ok(false);
        };
        let n = self.chars.len();
        done.python_asked(py)?;
        let got = step.bind(py).call1((
            call,
            recorded,
            self.entries.bind(py).get_slice(0, n),
            self.dealt(),
        ))?;
        let (entries, dealt, lowest, acted): (
            Option<Bound<'_, PyList>>,
            Option<usize>,
            Option<usize>,
            bool,
        ) = got.extract()?;
        self.take(py, entries, dealt, lowest, done)?;
        done.stepped |= acted;
        Ok(acted)
    }

    /// Micro's count of results dealt with (None: no micro layer).
    fn dealt(&self) -> Option<usize> {
        self.layers.iter().find_map(|l| match l {
            Layer::Micro(m) => Some(m.dealt),
            Layer::Snip(_) | Layer::Budget(_) => None,
        })
    }

    /// What a step Python ran gave back: the context's messages (None: unchanged), micro's count in
    /// it, the first message it changed.
    fn take(
        &mut self,
        py: Python<'_>,
        entries: Option<Bound<'_, PyList>>,
        dealt: Option<usize>,
        lowest: Option<usize>,
        done: &mut Done,
    ) -> PyResult<()> {
        if let Some(entries) = entries {
            self.adopt(py, &entries)?;
        }
        for layer in self.layers.iter_mut() {
            if let (Layer::Micro(m), Some(d)) = (layer, dealt) {
                m.dealt = d;
            }
        }
        if let Some(lowest) = lowest {
            done.changed_at(lowest);
        }
        Ok(())
    }

    /// The summary layer at `call`, where the context is over `trigger` (the trigger at this call,
    /// as `keeping.PythonSteps.told` gives it: at most the layer's own, which decides): run by Python
    /// on the context, whose result this loop adopts.
    fn summary(
        &mut self,
        py: Python<'_>,
        call: usize,
        recorded: Option<i64>,
        trigger: i64,
        done: &mut Done,
    ) -> PyResult<()> {
        let Some(summary) = &self.summary else {
            return Ok(());
        };
        let n = self.chars.len();
        if n == 0 {
            return Ok(());
        }
        let chars = list_chars(self.chars_sum, n);
        let size = {
            let measures = self.measures.borrow(py);
            match summary.unit {
                Unit::Messages => n as i64,
                Unit::Chars => chars,
                Unit::Tokens => measures.inner.tokens(chars),
                Unit::Recorded => recorded.unwrap_or_else(|| measures.inner.tokens(chars)),
            }
        };
        if size <= trigger {
            return Ok(());
        }
        if summary.stub.is_some() && self.stub_summary(py, call, done, &Made::Summary)? {
            return Ok(());
        }
        let Some(summary) = &self.summary else {
            return Ok(());
        };
        let dealt = self.dealt();
        done.python_asked(py)?;
        let got = summary.summarise.bind(py).call1((
            call,
            recorded,
            self.entries.bind(py).get_slice(0, n),
            dealt,
        ))?;
        let (entries, dealt, lowest, acted, closed): (
            Option<Bound<'_, PyList>>,
            Option<usize>,
            Option<usize>,
            bool,
            bool,
        ) = got.extract()?;
        if closed {
            self.summary = None; // (its circuit breaker open: the layer never acts again)
        }
        self.take(py, entries, dealt, lowest, done)?;
        done.stepped |= acted;
        Ok(())
    }

    /// The summary layer's stub summary at `call`, made here (`Stub`; `layers/summary.py`'s
    /// `compact` and `summarizers/stub.py` are the references), or manual or reactive compaction's
    /// (`made_for`: the whole context summarised, `layers/manual.py` and `layers/reactive.py` the
    /// references): the context noted as a saved
    /// transcript, its middle summarised by the messages' facts and three of their texts, the
    /// summary's message (and the acknowledgement) made in its place, micro's count of results
    /// dealt with spliced, the call's stats told to Python. Whether it was made: not where a text
    /// is Python's to read (a sized placeholder in it, a string Rust cannot hold), which is then
    /// made by Python, nothing changed here.
    fn stub_summary(
        &mut self,
        py: Python<'_>,
        call: usize,
        done: &mut Done,
        made_for: &Made,
    ) -> PyResult<bool> {
        let Some(stub) = self.summary.as_ref().and_then(|s| s.stub.as_ref()) else {
            return Ok(false);
        };
        let held = &self.held.messages;
        let n = held.len();
        // (manual compaction summarises the whole context: `manual.py` asks `compact` for no head
        // or tail kept; reactive compaction too, and keeps its tail after the summary)
        let (keep_head, keep_tail) = match made_for {
            Made::Manual(_) | Made::Reactive(_) => (0, 0),
            Made::Summary => (stub.keep_head, stub.keep_tail),
        };
        // pair-safe cuts (`pair_safe_head`, `pair_safe_tail`)
        let head_end = self.held.pair_safe_head(keep_head.min(n));
        let tail_start = match keep_tail {
            0 => n,
            keep => self.held.pair_safe_tail(n - keep.min(n)),
        }
        .max(head_end);
        // what the summary's message replaces: the middle summarised, or reactive's all but its
        // tail (`reactive.py`: the tail's cut moved only where `pair_safe`)
        let (splice_from, splice_to) = match made_for {
            Made::Reactive(r) if r.keep_tail > 0 => {
                let cut = n - r.keep_tail.min(n);
                (
                    0,
                    if r.pair_safe {
                        self.held.pair_safe_tail(cut)
                    } else {
                        cut
                    },
                )
            }
            Made::Reactive(_) => (0, n),
            _ => (head_end, tail_start),
        };
        let entries = self.entries.bind(py);
        // (a message left unread in its file quoted from its line by the run's native check, which
        // reads its texts so: not made a Python message here, nor read by Python at later calls)
        let native = match &self.recall {
            Recall::Native(ask) => Some(ask.check.bind(py)),
            Recall::Python(_) => None,
        };
        let text_of = |i: usize| -> PyResult<Option<String>> {
            let entry = entries.get_item(i)?;
            if let Some(check) = native.and_then(|c| c.try_borrow().ok()) {
                if let Some(text) = check.stripped_text(&entry)? {
                    return Ok(Some(text));
                }
            }
            let text = stub.text_of.bind(py).call1((entry,))?;
            Ok(text.cast::<PyString>()?.to_str().ok().map(str::to_owned))
        };
        // `_first_text`'s test of a message: of the role, with text
        let of_role = |i: usize, role: &str| -> PyResult<bool> {
            let entry = || entries.get_item(i);
            Ok(match held[i].turn {
                Turn::Prompt => role == "user",
                Turn::Agent => {
                    role == "assistant" && entry()?.getattr(intern!(py, "has_text"))?.is_truthy()?
                }
                Turn::Other => {
                    let e = entry()?;
                    e.getattr(intern!(py, "role"))?.eq(role)?
                        && e.getattr(intern!(py, "has_text"))?.is_truthy()?
                }
            })
        };
        let middle = head_end..tail_start;
        let mut facts = stub::Facts {
            messages: middle.len(),
            ..Default::default()
        };
        // `_first_text`: the first message of the role with text, in the order given
        let first =
            |order: &mut dyn Iterator<Item = usize>, role: &str| -> PyResult<Option<usize>> {
                for i in order {
                    if of_role(i, role)? {
                        return Ok(Some(i));
                    }
                }
                Ok(None)
            };
        let picks = [
            first(&mut middle.clone(), "user")?,
            first(&mut middle.clone().rev(), "user")?,
            first(&mut middle.clone().rev(), "assistant")?,
        ];
        for (pick, text) in picks.iter().zip([
            &mut facts.first_user,
            &mut facts.latest_user,
            &mut facts.last_assistant,
        ]) {
            if let Some(i) = pick {
                match text_of(*i)? {
                    Some(t) => *text = t,
                    None => return Ok(false),
                }
            }
        }
        let mut counts: rustc_hash::FxHashMap<String, usize> = Default::default();
        let mut named: rustc_hash::FxHashSet<String> = Default::default();
        for i in middle.clone() {
            if held[i].uses {
                let entry = entries.get_item(i)?;
                for name in members::items(&entry.getattr(intern!(py, "tool_names"))?)? {
                    let Ok(name) = name?.cast::<PyString>()?.to_str().map(str::to_owned) else {
                        return Ok(false);
                    };
                    *counts.entry(name).or_default() += 1;
                }
                for files in members::items(&entry.getattr(intern!(py, "use_files"))?)? {
                    for file in members::items(&files?)? {
                        let Ok(file) = file?.cast::<PyString>()?.to_str().map(str::to_owned) else {
                            return Ok(false);
                        };
                        if named.insert(file.clone()) {
                            facts.files.push(file);
                        }
                    }
                }
            }
            if !held[i].sizes.is_empty() {
                for fact in members::items(&entries.get_item(i)?.getattr(intern!(py, "results"))?)?
                {
                    if fact?.getattr(intern!(py, "is_error"))?.is_truthy()? {
                        facts.errors += 1;
                    }
                }
            }
        }
        facts.tools = counts.into_iter().collect();
        let Some(text) = stub::text(&facts, stub.max_chars) else {
            return Ok(false);
        };
        // what `summarize` counts: the input (the middle's JSON, to the limit), the stub's tokens
        let middle_sum: i64 = self.chars[middle.clone()].iter().sum();
        let input_chars = stub.input_chars.min(list_chars(middle_sum, middle.len()));
        let output_chars = stub::chars(&text);
        let input_tokens = stub::tokens(stub.prompt_chars + input_chars.max(0) as usize);
        let output_tokens = stub::tokens(output_chars);
        // `save_transcript`: the context noted (its file written only with --write-transcripts)
        let saved = stub.saved.bind(py);
        let transcript = format!("transcripts/transcript-{call:05}-{}.jsonl", saved.len() + 1);
        let noted = PyDict::new(py);
        noted.set_item(intern!(py, "call"), call)?;
        noted.set_item(intern!(py, "messages"), n)?;
        noted.set_item(intern!(py, "chars"), list_chars(self.chars_sum, n))?;
        noted.set_item(intern!(py, "path"), py.None())?;
        saved.append(noted)?;
        let mut made = Vec::new();
        // (reactive's own template, filled without the transcript's name: `fill(template, text)`;
        // no acknowledgement)
        let (template, transcript, ack) = match made_for {
            Made::Reactive(r) => (&r.template, "", None),
            _ => (&stub.template, transcript.as_str(), stub.ack.clone()),
        };
        let content = template
            .replace("{transcript}", transcript)
            .replace("{summary}", &text);
        for (role, content) in
            std::iter::once(("user", content)).chain(ack.map(|a| ("assistant", a)))
        {
            made.push(self.new_message(py, (role, content.as_str()), "summary", call)?);
        }
        let appended = match made_for {
            Made::Manual(m) => m.message.as_ref(),
            _ => None,
        };
        if let Some(message) = appended {
            // (seed 004: its own message after the summary, as `manual.py` appends it)
            made.push(self.new_message(py, ("user", message.as_str()), "summary", call)?);
        }
        let summarised = match made_for {
            Made::Manual(m) => m.told.clone_ref(py),
            Made::Reactive(r) => r.told.clone_ref(py),
            Made::Summary => stub.summarised.clone_ref(py),
        };
        let counts = (
            self.held.refs_before(splice_from),
            self.held.refs_before(splice_to),
        );
        self.splice(py, splice_from, made, splice_to)?;
        for layer in self.layers.iter_mut() {
            if let Layer::Micro(m) = layer {
                m.dealt = spliced_count(m.dealt, counts.0, counts.1, 0);
            }
        }
        let made = MadeStats {
            by: match made_for {
                Made::Manual(_) => MadeBy::Manual,
                Made::Reactive(_) => MadeBy::Reactive,
                Made::Summary => MadeBy::Summary,
            },
            told: summarised,
            input_chars,
            output_chars,
            input_tokens,
            output_tokens,
            persisted: 0,
            persisted_chars: 0,
            lowest: splice_from,
        };
        done.made(py, made)?;
        done.stepped = true;
        done.changed_at(splice_from);
        Ok(true)
    }

    /// The message `{"role": role, "content": content}` a layer made at `call` (`by`), as
    /// `RunEnv.new_entry` makes it.
    fn new_message<'py>(
        &self,
        py: Python<'py>,
        (role, content): (&str, &str),
        by: &str,
        call: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let message = PyDict::new(py);
        message.set_item(intern!(py, "role"), role)?;
        message.set_item(intern!(py, "content"), content)?;
        if let Some(made) = &self.made {
            if let Some(entry) = made.made(&message, (role, content), by, call)? {
                return Ok(entry);
            }
        }
        self.new_entry.bind(py).call1((message, by, call))
    }

    /// `message` (a dict of a role and a string content) as `RunEnv.new_entry` makes it.
    fn made_message<'py>(
        &self,
        message: &Bound<'py, PyDict>,
        by: &str,
        call: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = message.py();
        let role = message.get_item(intern!(py, "role"))?;
        let content = message.get_item(intern!(py, "content"))?;
        if let (Some(made), Some(role), Some(content)) = (&self.made, role, content) {
            if let (Ok(role), Ok(content)) = (role.cast::<PyString>(), content.cast::<PyString>()) {
                if let (Ok(role), Ok(content)) = (role.to_str(), content.to_str()) {
                    if let Some(entry) = made.made(message, (role, content), by, call)? {
                        return Ok(entry);
                    }
                }
            }
        }
        self.new_entry.bind(py).call1((message, by, call))
    }

    /// The context a Python layer made of this one: every fact read again from its messages.
    fn adopt(&mut self, py: Python<'_>, entries: &Bound<'_, PyList>) -> PyResult<()> {
        self.entries = PyList::empty(py).unbind();
        self.chars.clear();
        self.chars_sum = 0;
        self.origins.clear();
        self.keys.clear();
        self.held = Held::default();
        for e in entries.iter() {
            self.append(&e)?;
        }
        Ok(())
    }

    /// The layers in the policy's order.
    fn run_layers(&mut self, py: Python<'_>, call: usize, done: &mut Done) -> PyResult<()> {
        let mut layers = std::mem::take(&mut self.layers);
        let ran = (|| {
            for i in 0..layers.len() {
                match &mut layers[i] {
                    Layer::Budget(b) => self.budget(py, b, call, done)?,
                    Layer::Micro(m) => self.micro(py, m, call, done)?,
                    Layer::Snip(s) => {
                        if let Some((head, tail, made)) = self.snip(py, s, call, done)? {
                            // micro's count of results dealt with, spliced as the context was
                            for layer in layers.iter_mut() {
                                if let Layer::Micro(m) = layer {
                                    m.dealt = spliced_count(m.dealt, head, tail, made);
                                }
                            }
                        }
                    }
                }
            }
            Ok::<(), PyErr>(())
        })();
        self.layers = layers;
        ran
    }

    /// `layers/budget.py`'s `budget` at `call`: where the last message's results are over the
    /// budget, its largest persisted (here where `persisted_here` can, else by Python); the message
    /// made put in the last one's place.
    fn budget(&mut self, py: Python<'_>, b: &Budget, call: usize, done: &mut Done) -> PyResult<()> {
        let Some(last) = self.held.messages.last() else {
            return Ok(());
        };
        if last.sizes.is_empty() || last.sizes.iter().sum::<i64>() <= b.max_chars {
            return Ok(());
        }
        let pos = self.chars.len() - 1;
        let entries = self.entries.bind(py);
        let entry = entries.get_item(pos)?;
        let got = match self.persisted_here(py, b, call, &entry)? {
            Some(None) => return Ok(()),
            Some(Some(p)) => {
                done.made(py, MadeStats::persisted(p.told, p.persisted, p.chars, pos))?;
                p.entry
            }
            None => {
                done.python_asked(py)?;
                let got = b.persist.bind(py).call1((call, &entry, pos))?;
                if got.is_none() {
                    return Ok(());
                }
                got
            }
        };
        let chars: i64 = got.getattr(intern!(py, "chars"))?.extract()?;
        let origin: i64 = got.getattr(intern!(py, "origin"))?.extract()?;
        self.held.replace(pos, facts_of(&got, origin)?);
        self.chars_sum += chars - self.chars[pos];
        self.chars[pos] = chars;
        entries.set_item(pos, got)?;
        done.stepped = true;
        done.changed_at(pos);
        Ok(())
    }

    /// `layers/budget.py`'s `persisted` of the last message `entry` at `call`, done here: its
    /// largest results over the threshold written to their files (`RunEnv.persist`) and replaced
    /// by the note, largest first, until under the budget, a note no smaller than what it would
    /// replace skipped, the call each was replaced at noted in the run's ledger; the message (None:
    /// the budget leaves it). None where Python persists them (no native parts, or a message whose
    /// results it does not read as `persisted` reads them).
    fn persisted_here<'py>(
        &self,
        py: Python<'py>,
        b: &Budget,
        call: usize,
        entry: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Option<Persisted<'py>>>> {
        let (Some(native), Some(copies)) = (&b.native, &self.copies) else {
            return Ok(None);
        };
        if !entry
            .getattr(intern!(py, "role"))?
            .eq(intern!(py, "user"))?
        {
            return Ok(Some(None));
        }
        let Ok(results) = entry
            .getattr(intern!(py, "results"))?
            .cast_into::<PyTuple>()
        else {
            return Ok(None);
        };
        // (each result's block, tool_use id and size: `ResultFact`'s first three)
        let mut facts = Vec::with_capacity(results.len());
        for r in results.iter() {
            let Ok(r) = r.cast_into::<PyTuple>() else {
                return Ok(None);
            };
            let (Ok(block), Ok(size)) = (
                r.get_item(0)?.extract::<i64>(),
                r.get_item(2)?.extract::<i64>(),
            ) else {
                return Ok(None);
            };
            facts.push((block, r.get_item(1)?, size));
        }
        let mut total: i64 = facts.iter().map(|f| f.2).sum();
        if facts.is_empty() || total <= b.max_chars {
            return Ok(Some(None));
        }
        // (largest first; of equal sizes, the first first: Python's stable sort, reversed)
        let mut order: Vec<usize> = (0..facts.len()).collect();
        order.sort_by(|&x, &y| facts[y].2.cmp(&facts[x].2));
        let origin = entry.getattr(intern!(py, "origin"))?;
        let cleared_at = self.cleared_at.bind(py);
        let [head, mid, tail] = &native.note;
        let (mut copy, mut persisted, mut chars) = (entry.clone(), 0, 0);
        for k in order {
            if total <= b.max_chars {
                break;
            }
            let (block, id, size) = &facts[k];
            if *size <= b.persist_threshold {
                continue;
            }
            let text = match native.text(entry, *block)? {
                ResultText::Held(text) => text,
                ResultText::Python(text) => {
                    let done = native
                        .persist_result
                        .bind(py)
                        .call1((&copy, k, text, call))?;
                    if done.is_none() {
                        continue;
                    }
                    let note_len: i64;
                    (copy, note_len) = done.extract()?;
                    total += note_len - size;
                    persisted += 1;
                    chars += size;
                    continue;
                }
            };
            // (`cut_text` of a text with no sized placeholder: its first characters)
            let preview = match text.char_indices().nth(b.preview_chars) {
                Some((at, _)) => &text[..at],
                None => text.as_str(),
            };
            if native.note_chars + preview.chars().count() as i64 + native.max_path >= *size {
                continue; // the note would not be smaller than what it replaces
            }
            let path: String = native.write.bind(py).call1((id, &text))?.extract()?;
            let note = format!("{head}{path}{mid}{preview}{tail}");
            copy = match copies.borrow(py).copy(&copy, k, &note)? {
                Some(made) => made,
                None => copy.call_method1(intern!(py, "with_result_content"), (k, &note))?,
            };
            cleared_at.set_item((&origin, *block), call)?;
            let note_len: i64 = if note.contains(MARK) {
                native.sized_len.bind(py).call1((&note,))?.extract()?
            } else {
                note.chars().count() as i64
            };
            total += note_len - size;
            persisted += 1;
            chars += size;
        }
        Ok(Some((persisted > 0).then(|| Persisted {
            entry: copy,
            persisted,
            chars,
            told: native.told.clone_ref(py),
        })))
    }

    /// `layers/snip.py`'s `snip` at `call`: the middle dropped, a placeholder in its place; the
    /// splice's counts of results (before the head's end, before the tail's start, made).
    fn snip(
        &mut self,
        py: Python<'_>,
        s: &Snip,
        call: usize,
        done: &mut Done,
    ) -> PyResult<Option<(usize, usize, usize)>> {
        let Some((head_end, tail_start)) =
            self.held.snip_cut(s.max_messages, s.keep_head, s.pair_safe)
        else {
            return Ok(None);
        };
        let snipped = tail_start - head_end;
        let message = PyDict::new(py);
        message.set_item(intern!(py, "role"), intern!(py, "user"))?;
        message.set_item(
            intern!(py, "content"),
            s.placeholder.replace("{n}", &snipped.to_string()),
        )?;
        let entries = self.entries.bind(py);
        let here = entries.get_item(head_end)?;
        let (placeholder, changed) =
            if self.origins[head_end] < 0 && here.getattr(intern!(py, "message"))?.eq(&message)? {
                // the placeholder already there, to the letter: the change starts after it
                (here, head_end + 1)
            } else {
                let made = self.made_message(&message, "snip", call)?;
                (made, head_end)
            };
        let counts = (
            self.held.refs_before(head_end),
            self.held.refs_before(tail_start),
            0,
        );
        self.splice(py, head_end, vec![placeholder], tail_start)?;
        done.snipped += snipped as i64;
        done.changed_at(changed);
        Ok(Some(counts))
    }

    /// `Context.spliced` with one message made: the first `head_end` messages, `made`, then those
    /// from `tail_start` on.
    fn splice(
        &mut self,
        py: Python<'_>,
        head_end: usize,
        made: Vec<Bound<'_, PyAny>>,
        tail_start: usize,
    ) -> PyResult<()> {
        let (mut chars, mut origins, mut facts) = (Vec::new(), Vec::new(), Vec::new());
        for m in &made {
            let origin: i64 = m.getattr(intern!(py, "origin"))?.extract()?;
            chars.push(m.getattr(intern!(py, "chars"))?.extract::<i64>()?);
            facts.push(facts_of(m, origin)?);
            origins.push(origin);
        }
        self.entries
            .bind(py)
            .set_slice(head_end, tail_start, PyList::new(py, made)?.as_any())?;
        let dropped: i64 = self.chars[head_end..tail_start].iter().sum();
        self.chars_sum += chars.iter().sum::<i64>() - dropped;
        self.chars.splice(head_end..tail_start, chars);
        self.origins.splice(head_end..tail_start, origins);
        self.held.splice(head_end, facts, tail_start);
        let mut key = -1;
        self.keys = self
            .origins
            .iter()
            .map(|&o| {
                key = key.max(o);
                key
            })
            .collect();
        Ok(())
    }

    /// `layers/micro.py`'s `micro` at `call`: the results it replaced counted in `done`.
    fn micro(
        &mut self,
        py: Python<'_>,
        m: &mut Micro,
        call: usize,
        done: &mut Done,
    ) -> PyResult<()> {
        let cutoff = self.held.cutoff(&m.rule);
        let start = m.dealt;
        if cutoff <= start || !self.micro_due {
            return Ok(());
        }
        let measures = self.measures.borrow(py);
        let measured = &measures.inner;
        let cleared = if m.history { m.cleared_chars } else { 0 };
        if m.trigger_tokens != 0
            && measured.tokens(list_chars(self.chars_sum, self.chars.len()) + cleared)
                <= m.trigger_tokens
        {
            return Ok(());
        }
        let entries = self.entries.bind(py);
        let names = self.tool_names.bind(py);
        // the results to replace (ref, placeholder) and the characters that frees
        let mut chosen: Vec<(usize, Arc<str>)> = Vec::new();
        let mut freed = 0i64;
        for r in start..cutoff {
            let size = self.held.sizes[r];
            if size <= m.min_chars && !m.clear_short {
                continue;
            }
            let (pos, k) = self.held.refs[r];
            let fact = members::fact(&entries.get_item(pos)?, Fact::Results)?.get_item(k)?;
            if m.string_only && !fact.getattr(intern!(py, "is_str"))?.is_truthy()? {
                continue;
            }
            let id = fact.getattr(intern!(py, "tool_use_id"))?;
            let name = names.get_item(&id)?;
            let name: Cow<'_, str> = match &name {
                Some(n) => Cow::Owned(n.extract::<String>()?),
                None => Cow::Borrowed("unknown"),
            };
            if m.preserve.iter().any(|p| *p == *name) {
                continue;
            }
            let (text, len) = match m.placeholders.get(&*name) {
                Some((text, len)) => (text.clone(), *len),
                None => {
                    let (text, len) = placeholder(&m.template, &name);
                    let text: Arc<str> = text.into();
                    m.placeholders
                        .insert(name.clone().into_owned(), (text.clone(), len));
                    (text, len)
                }
            };
            if len >= size && !m.clear_short {
                continue;
            }
            freed += size - len;
            chosen.push((r, text));
        }
        if m.clear_at_least != 0
            && (freed as f64 / measured.chars_per_token) < m.clear_at_least as f64
        {
            return Ok(()); // not worth it yet: looked at again when more is old
        }
        drop(measures);
        let before = self.chars_sum;
        let cleared_at = self.cleared_at.bind(py);
        let copies = self.copies.as_ref().map(|c| c.get());
        for (r, text) in &chosen {
            let (pos, k) = self.held.refs[*r];
            let original = entries.get_item(pos)?;
            let entry = replaced_result(py, &self.replaced, copies, &original, k, text)?;
            {
                // (its violation facts are its original's, a result's content replaced: the
                // tracker takes them from there)
                let measures = self.measures.borrow(py);
                measures
                    .inner
                    .tracker
                    .borrow_mut(py)
                    .alias(&entry, &original);
            }
            let fact = members::fact(&entry, Fact::Results)?.get_item(k)?;
            let origin = members::fact(&entry, Fact::Origin)?;
            cleared_at.set_item((origin, fact.getattr(intern!(py, "block"))?), call)?;
            self.held
                .resize(*r, fact.getattr(intern!(py, "size"))?.extract()?);
            let chars: i64 = members::fact(&entry, Fact::Chars)?.extract()?;
            self.chars_sum += chars - self.chars[pos];
            self.chars[pos] = chars;
            entries.set_item(pos, entry)?;
            done.changed_at(pos);
        }
        m.dealt = cutoff;
        if m.history {
            m.cleared_chars += before - self.chars_sum;
        }
        done.micro += chosen.len() as i64;
        Ok(())
    }
}

/// `entry.with_result_content(k, text)`: micro's replacement of the k-th result of `entry`,
/// taken from the recording's `replaced` (shared by its runs) where a run made it before. Only a
/// replacement of one of the recording's own messages is kept there, unchanged or itself such a
/// replacement (another of its results replaced before: the memo holds it as a key of its own,
/// to `None`): the same object at every run, so the same key; and only while the memo holds fewer
/// than its limit. Made by `copies` where it makes it, else by its Python; either way, the copy's
/// violation facts are `entry`'s.
fn replaced_result<'py>(
    py: Python<'py>,
    replaced: &Option<(Py<PyDict>, usize)>,
    copies: Option<&EntryCopies>,
    entry: &Bound<'py, PyAny>,
    k: usize,
    text: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let make = || -> PyResult<Bound<'py, PyAny>> {
        if let Some(copy) = copies
            .map(|c| c.copy(entry, k, text))
            .transpose()?
            .flatten()
        {
            return Ok(copy);
        }
        entry.call_method1(intern!(py, "with_result_content"), (k, text))
    };
    let Some((known, limit)) = replaced else {
        return make();
    };
    let known = known.bind(py);
    let key = (entry, k, text).into_pyobject(py)?;
    if let Some(made) = known.get_item(&key)? {
        return Ok(made);
    }
    let made = make()?;
    if known.len() < *limit
        && members::fact(entry, Fact::Origin)?.extract::<i64>()? >= 0
        && (!members::fact(entry, Fact::Changed)?.is_truthy()? || known.contains(entry)?)
    {
        known.set_item(key, &made)?;
        known.set_item(&made, py.None())?;
    }
    Ok(made)
}

/// `Context.find_origin` on a context's keys and origins.
fn find_by_keys(keys: &[i64], origins: &[i64], origin: i64) -> Option<usize> {
    if origin < 0 {
        return None;
    }
    let j = keys.partition_point(|&k| k < origin);
    (j < keys.len() && origins[j] == origin).then_some(j)
}
