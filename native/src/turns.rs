//! The per-call loop of a policy that keeps every message (no layer on: `none`, the reference
//! every `compare` runs, and any policy whose layers are all off), run in Rust: each call's
//! messages appended, the context sized, judged against the window and measured (the prompt
//! cache, the raw baseline, violations, retention) and its record made, in one crossing a call.
//! `engine/loop.py`'s `Turns` is the reference (`engine/keeping.py` chooses); the differential
//! tests hold the two to the same records, summaries and ledgers on every recording.
//!
//! Not here: a policy with a layer on, a recording's compactions kept (the context restarts from
//! their summaries and recall is measured), exact token counts, a run that keeps contexts — each
//! runs on the Python loop.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::bindings::{InvariantTracker, PromptCache};
use crate::cache::list_chars;

/// A run's turns (`KeepingTurns` in `engine/keeping.py` drives it, a call at a time).
#[pyclass(module = "compactlab._native")]
pub struct KeepingTurns {
    /// the context sent: every message so far (the tracker is shown it)
    entries: Py<PyList>,
    /// each message's characters (its compact JSON length), and their sum
    chars: Vec<i64>,
    chars_sum: i64,
    /// each message's origin (its index in the transcript), for retention's look-up
    origins: Vec<i64>,
    /// the run's measures that live in Rust: the prompt cache's model, the violations' tracker
    cache: Py<PromptCache>,
    tracker: Py<InvariantTracker>,
    /// `(call) -> (introduced, inherited)`: the violation log's record of a call whose context has
    /// any (`Violations`' log, in Python: it lists each one once)
    violations_row: Py<PyAny>,
    /// the raw baseline's rows (`RawBaseline`: messages and characters per call, each call's
    /// retention references), read as a stream fills them
    raw_messages: Py<PyList>,
    raw_chars: Py<PyList>,
    refs: Py<PyDict>,
    /// a stream's references are let go as they are used
    keep_refs: bool,
    chars_per_token: f64,
    overhead_tokens: i64,
    /// `TurnRecord`, made positionally
    record: Py<PyAny>,
}

#[pymethods]
impl KeepingTurns {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        cache: Py<PromptCache>,
        tracker: Py<InvariantTracker>,
        violations_row: Py<PyAny>,
        raw_messages: Py<PyList>,
        raw_chars: Py<PyList>,
        refs: Py<PyDict>,
        keep_refs: bool,
        chars_per_token: f64,
        overhead_tokens: i64,
        record: Py<PyAny>,
    ) -> PyResult<Self> {
        if chars_per_token.is_nan() || chars_per_token <= 0.0 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "chars_per_token must be positive",
            ));
        }
        Ok(KeepingTurns {
            entries: PyList::empty(py).unbind(),
            chars: Vec::new(),
            chars_sum: 0,
            origins: Vec::new(),
            cache,
            tracker,
            violations_row,
            raw_messages,
            raw_chars,
            refs,
            keep_refs,
            chars_per_token,
            overhead_tokens,
            record,
        })
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
        for e in pending.try_iter()? {
            self.append(&e?)?;
        }
        let n = self.chars.len();
        let chars = list_chars(self.chars_sum, n);
        let tokens = self.tokens(chars);
        let overflow = tokens > window && !answered;

        // the raw baseline (`RawSize`): the history before the call, as recorded
        let raw_messages: i64 = self.raw_messages.bind(py).get_item(call)?.extract()?;
        let raw_chars: i64 = self.raw_chars.bind(py).get_item(call)?.extract()?;
        let raw_tokens = self.tokens(raw_chars);

        // the prompt cache (`NativePromptCache.at_call`): nothing changed, the messages it does not
        // know yet are those after the context it last sent
        let reply_chars: i64 = reply.getattr(intern!(py, "chars"))?.extract()?;
        let (read, write) = {
            let mut cache = self.cache.borrow_mut(py);
            let start = n.min(cache.inner.known());
            cache
                .inner
                .at_call(n, tokens, reply_chars, start, &self.chars[start..])
        };

        // violations (`Violations.at_call`): the tracker shown the context, from where it grew
        let total = {
            let mut tracker = self.tracker.borrow_mut(py);
            tracker.update(self.entries.bind(py), n)?;
            tracker.inner.total()
        };
        let (introduced, inherited): (i64, i64) = if total != 0 {
            self.violations_row.bind(py).call1((call,))?.extract()?
        } else {
            (0, 0)
        };

        // retention (`Retention.at_call`): every reference is held, unless its message is not
        // here or its block was changed
        let (refs, retained) = self.retention(py, call)?;

        let record = self.record.bind(py).call1(PyTuple::new(
            py,
            [
                call.into_pyobject(py)?.into_any(),
                pos.into_pyobject(py)?.into_any(),
                raw_messages.into_pyobject(py)?.into_any(),
                raw_chars.into_pyobject(py)?.into_any(),
                raw_tokens.into_pyobject(py)?.into_any(),
                n.into_pyobject(py)?.into_any(),
                chars.into_pyobject(py)?.into_any(),
                tokens.into_pyobject(py)?.into_any(),
                // persisted .. manual: no layer acts
                0i64.into_pyobject(py)?.into_any(),
                0i64.into_pyobject(py)?.into_any(),
                0i64.into_pyobject(py)?.into_any(),
                0i64.into_pyobject(py)?.into_any(),
                0i64.into_pyobject(py)?.into_any(),
                0i64.into_pyobject(py)?.into_any(),
                0i64.into_pyobject(py)?.into_any(),
                0i64.into_pyobject(py)?.into_any(),
                0i64.into_pyobject(py)?.into_any(),
                pyo3::types::PyBool::new(py, overflow).to_owned().into_any(),
                introduced.into_pyobject(py)?.into_any(),
                inherited.into_pyobject(py)?.into_any(),
                read.into_pyobject(py)?.into_any(),
                write.into_pyobject(py)?.into_any(),
                0.0f64.into_pyobject(py)?.into_any(),
                refs.into_pyobject(py)?.into_any(),
                retained.into_pyobject(py)?.into_any(),
            ],
        )?)?;
        self.append(reply)?;
        Ok(record)
    }
}

impl KeepingTurns {
    /// `TokenEstimator.tokens`: the overhead plus the characters over chars-per-token, rounded up.
    fn tokens(&self, chars: i64) -> i64 {
        self.overhead_tokens + (chars as f64 / self.chars_per_token).ceil() as i64
    }

    fn append(&mut self, entry: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = entry.py();
        let chars: i64 = entry.getattr(intern!(py, "chars"))?.extract()?;
        let origin: i64 = entry.getattr(intern!(py, "origin"))?.extract()?;
        self.entries.bind(py).append(entry)?;
        self.chars.push(chars);
        self.chars_sum += chars;
        self.origins.push(origin);
        Ok(())
    }

    /// The call's references and those the context holds unchanged (`retention.retained`).
    fn retention(&mut self, py: Python<'_>, call: usize) -> PyResult<(usize, usize)> {
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
        let entries = self.entries.bind(py);
        let (mut n, mut kept) = (0, 0);
        for r in found.try_iter()? {
            let (origin, block): (i64, Bound<'_, PyAny>) = r?.extract()?;
            n += 1;
            if let Some(j) = self.find_origin(origin) {
                let changed = entries.get_item(j)?.getattr(intern!(py, "changed"))?;
                if !changed.contains(block)? {
                    kept += 1;
                }
            }
        }
        Ok((n, kept))
    }

    /// Where the transcript's message `origin` is in the context: its messages are the
    /// transcript's, in order (origins increase), none made by a policy.
    fn find_origin(&self, origin: i64) -> Option<usize> {
        if origin < 0 {
            return None;
        }
        let j = self.origins.partition_point(|&o| o < origin);
        (j < self.origins.len() && self.origins[j] == origin).then_some(j)
    }
}
