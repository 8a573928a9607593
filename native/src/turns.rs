//! The measures of each context a replay sends, in one crossing a call (`CallMeasures`: the prompt
//! cache, the raw baseline, violations and retention, written into the call's record; recall stays
//! Python's), and the whole per-call loop of a policy that keeps every message (`KeepingTurns`:
//! `none`, the reference every `compare` runs, and any policy whose layers are all off): each
//! call's messages appended, the context sized, judged against the window and measured, its record
//! made. `measures/__init__.py`'s `Measures` and `engine/loop.py`'s `Turns` are the references
//! (`engine/keeping.py` chooses the loop); the differential tests hold them to the same records,
//! summaries and ledgers on every recording and preset.
//!
//! Not here: exact token counts (the measures are Python's then); for the loop, a policy with a
//! layer on, a recording's compactions kept (the context restarts from their summaries and recall
//! is measured), a run that keeps contexts — each runs on the Python loop.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::bindings::{InvariantTracker, PromptCache};
use crate::cache::list_chars;

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
        let (introduced, inherited): (i64, i64) = if total != 0 {
            self.violations_row.bind(py).call1((call,))?.extract()?
        } else {
            (0, 0)
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
        for r in found.try_iter()? {
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
    /// the `Retention` measure (a stream's references let go) and the run's `TokenEstimator`.
    #[new]
    fn new(
        cache: Py<PromptCache>,
        violations: &Bound<'_, PyAny>,
        baseline: &Bound<'_, PyAny>,
        retention: &Bound<'_, PyAny>,
        estimator: &Bound<'_, PyAny>,
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
        for (name, value) in [
            (intern!(py, "raw_messages"), row.raw_messages),
            (intern!(py, "raw_chars"), row.raw_chars),
            (intern!(py, "raw_tokens"), row.raw_tokens),
            (intern!(py, "violations_introduced"), row.introduced),
            (intern!(py, "violations_inherited"), row.inherited),
            (intern!(py, "cache_read_tokens"), row.read),
            (intern!(py, "cache_write_tokens"), row.write),
        ] {
            record.setattr(name, value)?;
        }
        if row.refs != 0 {
            record.setattr(intern!(py, "refs"), row.refs)?;
            record.setattr(intern!(py, "refs_retained"), row.retained)?;
        }
        Ok(())
    }
}

/// A run's turns (`KeepingTurns` in `engine/keeping.py` drives it, a call at a time), measured by
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
}

#[pymethods]
impl KeepingTurns {
    #[new]
    fn new(py: Python<'_>, measures: Py<CallMeasures>, record: Py<PyAny>) -> Self {
        KeepingTurns {
            entries: PyList::empty(py).unbind(),
            chars: Vec::new(),
            chars_sum: 0,
            origins: Vec::new(),
            measures,
            record,
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
        for e in pending.try_iter()? {
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
        let record = self.record.bind(py).call1(PyTuple::new(
            py,
            [
                call.into_pyobject(py)?.into_any(),
                pos.into_pyobject(py)?.into_any(),
                row.raw_messages.into_pyobject(py)?.into_any(),
                row.raw_chars.into_pyobject(py)?.into_any(),
                row.raw_tokens.into_pyobject(py)?.into_any(),
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
                row.introduced.into_pyobject(py)?.into_any(),
                row.inherited.into_pyobject(py)?.into_any(),
                row.read.into_pyobject(py)?.into_any(),
                row.write.into_pyobject(py)?.into_any(),
                0.0f64.into_pyobject(py)?.into_any(),
                row.refs.into_pyobject(py)?.into_any(),
                row.retained.into_pyobject(py)?.into_any(),
            ],
        )?)?;
        drop(measures);
        self.append(reply)?;
        Ok(record)
    }
}

impl KeepingTurns {
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
