//! The measures of each context a replay sends, in one crossing a call (`CallMeasures`: the prompt
//! cache, the raw baseline, violations and retention, written into the call's record; recall stays
//! Python's), and the whole per-call loop of a policy that keeps every message (`KeepingTurns`:
//! `none`, the reference every `compare` runs, and any policy whose layers are all off): each
//! call's messages appended, the context sized, judged against the window and measured, its record
//! made; and that loop with the micro layer in it, for a policy whose one layer is micro
//! (`MaskingTurns`: `observation-masking`, `micro.rs` its cutoff, recall asked of Python).
//! `measures/__init__.py`'s `Measures` and `engine/loop.py`'s `Turns` are the references
//! (`engine/keeping.py` chooses the loop); the differential tests hold them to the same records,
//! summaries and ledgers on every recording and preset.
//!
//! Not here: exact token counts (the measures are Python's then); for the loops, a policy with
//! another layer on (or micro options `keeping.masks` names), a recording's compactions kept (the
//! context restarts from their summaries), a run that keeps contexts — each runs on the Python loop.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use std::borrow::Cow;

use crate::bindings::{InvariantTracker, PromptCache};
use crate::cache::list_chars;
use crate::micro::{placeholder, Held, KeepBy, Rule, Turn};

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
        let record = make_record(
            self.record.bind(py),
            (call, pos),
            &row,
            (n, chars, tokens),
            0,
            overflow,
        )?;
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

/// A call's `TurnRecord`, made positionally (in its fields' order): what the layers did is the
/// micro layer's count of results replaced (`micro_compacted`), no other layer acting.
fn make_record<'py>(
    record: &Bound<'py, PyAny>,
    (call, pos): (usize, i64),
    row: &Row,
    (messages, chars, tokens): (usize, i64, i64),
    micro_compacted: i64,
    overflow: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = record.py();
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
            // persisted, persisted_chars, snipped
            zero()?,
            zero()?,
            zero()?,
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

/// The settings of a micro layer the masking loop runs besides its cutoff (`MicroConfig`'s).
struct Masking {
    rule: Rule,
    /// the placeholder (`{tool_name}` filled in)
    template: String,
    min_chars: i64,
    clear_short: bool,
    preserve: Vec<String>,
    /// act only over this many tokens (0: always), only where that frees this many
    trigger_tokens: i64,
    clear_at_least: i64,
    /// the trigger compares the history the client holds: the context with what the layer cleared
    /// counted whole (`trigger_on = "history"`, the API's server-side edit)
    history: bool,
}

/// The whole per-call loop of a policy whose one layer is micro (`observation-masking` among
/// them): each call's messages appended, the old tool results replaced by the placeholder as
/// `engine/layers/micro.py` replaces them, the context sized, judged and measured, recall asked
/// (in Python: `recall`), the record made. `engine/keeping.py`'s `masking_turns` chooses it;
/// `loop.Turns` is the reference. No message is dropped or made: the context is the transcript's
/// messages in order, some with results replaced.
#[pyclass(module = "compactlab._native")]
pub struct MaskingTurns {
    /// the context sent: every message so far, results replaced in place (`Entry` copies)
    entries: Py<PyList>,
    chars: Vec<i64>,
    chars_sum: i64,
    origins: Vec<i64>,
    /// what the layer reads: each message's turn, the tool results' places and sizes
    held: Held,
    masking: Masking,
    /// how many results, from the first, the layer has dealt with (its memo in Python), and the
    /// characters it has taken out of the context (`micro.Cleared`)
    dealt: usize,
    cleared_chars: i64,
    /// the run's tool names by tool_use id (filled as calls are read), and its ledger's
    /// `cleared_at` (when each result was replaced: recall's attribution)
    tool_names: Py<PyDict>,
    cleared_at: Py<PyDict>,
    /// `(call, pos, changed_from, intact, tokens, reply_chars, record)`: recall's row into the record
    recall: Py<PyAny>,
    measures: Py<CallMeasures>,
    record: Py<PyAny>,
}

#[pymethods]
impl MaskingTurns {
    /// The loop of a run: its `measures`, `TurnRecord`, the micro layer's `config` (a
    /// `MicroConfig` whose options this loop runs: `keeping.masks` says which), the run's tool
    /// names and `cleared_at`, and its `recall`.
    #[new]
    fn new(
        py: Python<'_>,
        measures: Py<CallMeasures>,
        record: Py<PyAny>,
        config: &Bound<'_, PyAny>,
        tool_names: Py<PyDict>,
        cleared_at: Py<PyDict>,
        recall: Py<PyAny>,
    ) -> PyResult<Self> {
        let get = |name: &str| config.getattr(name);
        for off in ["string_content_only", "clear_inputs", "at_prompts"] {
            if get(off)?.is_truthy()? {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "the masking loop does not run micro's {off}"
                )));
            }
        }
        let trigger_on: String = get("trigger_on")?.extract()?;
        let idle: f64 = get("idle_minutes")?.extract()?;
        if idle != 0.0 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "the masking loop does not run micro's idle_minutes",
            ));
        }
        let keep_by: String = get("keep_by")?.extract()?;
        let keep_by = KeepBy::parse(&keep_by).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!("keep_by {keep_by:?}"))
        })?;
        let chars_per_token = measures.borrow(py).inner.chars_per_token;
        let protect: f64 = get("protect_tokens")?.extract()?;
        Ok(MaskingTurns {
            entries: PyList::empty(py).unbind(),
            chars: Vec::new(),
            chars_sum: 0,
            origins: Vec::new(),
            held: Held::default(),
            masking: Masking {
                rule: Rule {
                    keep_recent: get("keep_recent")?.extract()?,
                    keep_by,
                    only_consumed: get("only_consumed")?.extract()?,
                    protect_chars: protect * chars_per_token,
                },
                template: get("placeholder")?.extract()?,
                min_chars: get("min_chars")?.extract()?,
                clear_short: get("clear_short")?.extract()?,
                preserve: get("preserve_tools")?.extract()?,
                trigger_tokens: get("trigger_tokens")?.extract()?,
                clear_at_least: get("clear_at_least")?.extract()?,
                history: trigger_on == "history",
            },
            dealt: 0,
            cleared_chars: 0,
            tool_names,
            cleared_at,
            recall,
            measures,
            record,
        })
    }

    /// The messages of the context so far.
    #[getter]
    fn entries(&self, py: Python<'_>) -> Py<PyList> {
        self.entries.clone_ref(py)
    }

    /// One call: `pending` appended, the micro layer run, the context measured against `window`
    /// (`as_recorded`: the context was the recording's until this call; `answered`: the recording
    /// shows this call answered), recall asked, the record made; then `reply` appended. Returns
    /// the record, the context's tokens before the layer acted, and the first message it changed.
    #[allow(clippy::too_many_arguments)]
    fn turn<'py>(
        &mut self,
        py: Python<'py>,
        call: usize,
        pos: i64,
        pending: &Bound<'py, PyAny>,
        reply: &Bound<'py, PyAny>,
        window: i64,
        as_recorded: bool,
        answered: bool,
    ) -> PyResult<(Bound<'py, PyAny>, i64, Option<usize>)> {
        for e in pending.try_iter()? {
            self.append(&e?)?;
        }
        let n = self.chars.len();
        let before = self.chars_sum;
        let (replaced, lowest) = self.micro(py, call)?;
        let chars = list_chars(self.chars_sum, n);
        let mut measures = self.measures.borrow_mut(py);
        let measured = &mut measures.inner;
        let tokens = measured.tokens(chars);
        let tokens_before = measured.tokens(list_chars(before, n));
        let intact = as_recorded && replaced == 0;
        let overflow = tokens > window && !(intact && answered);
        let reply_chars: i64 = reply.getattr(intern!(py, "chars"))?.extract()?;
        let changed_from = lowest.unwrap_or(n);
        let (all, origins) = (&self.chars, &self.origins);
        let at = At {
            call,
            changed_from,
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
        drop(measures);
        let record = make_record(
            self.record.bind(py),
            (call, pos),
            &row,
            (n, chars, tokens),
            replaced,
            overflow,
        )?;
        self.recall.bind(py).call1((
            call,
            pos,
            changed_from,
            intact,
            tokens,
            reply_chars,
            &record,
        ))?;
        self.append(reply)?;
        Ok((record, tokens_before, lowest))
    }
}

impl MaskingTurns {
    fn append(&mut self, entry: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = entry.py();
        let chars: i64 = entry.getattr(intern!(py, "chars"))?.extract()?;
        let origin: i64 = entry.getattr(intern!(py, "origin"))?.extract()?;
        let role = entry.getattr(intern!(py, "role"))?;
        let turn = if role.eq(intern!(py, "assistant"))? {
            Turn::Agent
        } else if origin >= 0
            && role.eq(intern!(py, "user"))?
            && entry.getattr(intern!(py, "has_text"))?.is_truthy()?
        {
            Turn::Prompt
        } else {
            Turn::Other
        };
        let results = entry.getattr(intern!(py, "results"))?;
        let sizes = results
            .try_iter()?
            .map(|fact| fact?.getattr(intern!(py, "size"))?.extract())
            .collect::<PyResult<Vec<i64>>>()?;
        self.held.push(turn, sizes);
        self.entries.bind(py).append(entry)?;
        self.chars.push(chars);
        self.chars_sum += chars;
        self.origins.push(origin);
        Ok(())
    }

    /// `layers/micro.py`'s `micro` at `call`: how many results it replaced, and the first message
    /// it changed.
    fn micro(&mut self, py: Python<'_>, call: usize) -> PyResult<(i64, Option<usize>)> {
        let m = &self.masking;
        let cutoff = self.held.cutoff(&m.rule);
        let start = self.dealt;
        if cutoff <= start {
            return Ok((0, None));
        }
        let measures = self.measures.borrow(py);
        let measured = &measures.inner;
        let cleared = if m.history { self.cleared_chars } else { 0 };
        if m.trigger_tokens != 0
            && measured.tokens(list_chars(self.chars_sum, self.chars.len()) + cleared)
                <= m.trigger_tokens
        {
            return Ok((0, None));
        }
        let entries = self.entries.bind(py);
        let names = self.tool_names.bind(py);
        // the results to replace (ref, placeholder) and the characters that frees
        let mut chosen: Vec<(usize, String)> = Vec::new();
        let mut freed = 0i64;
        for r in start..cutoff {
            let size = self.held.sizes[r];
            if size <= m.min_chars && !m.clear_short {
                continue;
            }
            let (pos, k) = self.held.refs[r];
            let fact = entries
                .get_item(pos)?
                .getattr(intern!(py, "results"))?
                .get_item(k)?;
            let id = fact.getattr(intern!(py, "tool_use_id"))?;
            let name = names.get_item(&id)?;
            let name: Cow<'_, str> = match &name {
                Some(n) => Cow::Owned(n.extract::<String>()?),
                None => Cow::Borrowed("unknown"),
            };
            if m.preserve.iter().any(|p| *p == *name) {
                continue;
            }
            let (text, len) = placeholder(&m.template, &name);
            if len >= size && !m.clear_short {
                continue;
            }
            freed += size - len;
            chosen.push((r, text));
        }
        if m.clear_at_least != 0
            && (freed as f64 / measured.chars_per_token) < m.clear_at_least as f64
        {
            return Ok((0, None)); // not worth it yet: looked at again when more is old
        }
        drop(measures);
        let before = self.chars_sum;
        let cleared_at = self.cleared_at.bind(py);
        let mut lowest: Option<usize> = None;
        for (r, text) in &chosen {
            let (pos, k) = self.held.refs[*r];
            let entry = entries
                .get_item(pos)?
                .call_method1(intern!(py, "with_result_content"), (k, text))?;
            let fact = entry.getattr(intern!(py, "results"))?.get_item(k)?;
            let origin = entry.getattr(intern!(py, "origin"))?;
            cleared_at.set_item((origin, fact.getattr(intern!(py, "block"))?), call)?;
            self.held.sizes[*r] = fact.getattr(intern!(py, "size"))?.extract()?;
            let chars: i64 = entry.getattr(intern!(py, "chars"))?.extract()?;
            self.chars_sum += chars - self.chars[pos];
            self.chars[pos] = chars;
            entries.set_item(pos, entry)?;
            lowest = Some(lowest.map_or(pos, |l| l.min(pos)));
        }
        self.dealt = cutoff;
        if self.masking.history {
            self.cleared_chars += before - self.chars_sum;
        }
        Ok((chosen.len() as i64, lowest))
    }
}
