//! A call's record (`engine/records.py`'s `TurnRecord`, the reference: the same columns, in the
//! same order, with the same defaults) held as a Rust struct, for the native core's loops: made
//! without a Python call, its columns set by the measures and the pricing without an attribute's
//! look-up, and written as the replay's JSON and calls.csv, and summed into the run's summary,
//! from the struct itself. Python reads and sets its columns as it does the reference's
//! (`record.tokens`, `record.overflow = False`), pickles it and asks for its dict.
//!
//! The writers take a list of records and give None where one is not of this class (a run of the
//! Python engine's records is written by the reference writers, which are what these are tested
//! against: `tests/engine/test_native_records.py`).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple, PyType};

use crate::float_text::float_text;

/// The record's columns, in the reference's order (a test holds them to `TURN_COLUMNS`).
pub const COLUMNS: [&str; 28] = [
    "call",
    "message_index",
    "raw_messages",
    "raw_chars",
    "raw_tokens",
    "messages",
    "chars",
    "tokens",
    "persisted",
    "persisted_chars",
    "snipped",
    "micro_compacted",
    "summarized",
    "summary_input_chars",
    "summary_output_chars",
    "reactive",
    "manual",
    "overflow",
    "violations_introduced",
    "violations_inherited",
    "cache_read_tokens",
    "cache_write_tokens",
    "input_cost_usd",
    "refs",
    "refs_retained",
    "probes",
    "probes_kept",
    "probes_recoverable",
];

/// A column's value: every column is an integer but `overflow` and `input_cost_usd`.
#[derive(Clone, Copy)]
enum Value {
    Int(i64),
    Bool(bool),
    Float(f64),
}

/// One call: the context as sent and what the policy did to it (a row of calls.csv).
#[pyclass(module = "compactlab._native", get_all, set_all)]
#[derive(Clone, Default, Debug, PartialEq)]
pub struct TurnRecord {
    pub call: i64,
    pub message_index: i64,
    pub raw_messages: i64,
    pub raw_chars: i64,
    pub raw_tokens: i64,
    pub messages: i64,
    pub chars: i64,
    pub tokens: i64,
    pub persisted: i64,
    pub persisted_chars: i64,
    pub snipped: i64,
    pub micro_compacted: i64,
    pub summarized: i64,
    pub summary_input_chars: i64,
    pub summary_output_chars: i64,
    pub reactive: i64,
    pub manual: i64,
    pub overflow: bool,
    pub violations_introduced: i64,
    pub violations_inherited: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub input_cost_usd: f64,
    pub refs: i64,
    pub refs_retained: i64,
    pub probes: i64,
    pub probes_kept: i64,
    pub probes_recoverable: i64,
}

impl TurnRecord {
    /// The columns' values, in `COLUMNS`' order.
    fn values(&self) -> [Value; 28] {
        use Value::{Bool, Float, Int};
        [
            Int(self.call),
            Int(self.message_index),
            Int(self.raw_messages),
            Int(self.raw_chars),
            Int(self.raw_tokens),
            Int(self.messages),
            Int(self.chars),
            Int(self.tokens),
            Int(self.persisted),
            Int(self.persisted_chars),
            Int(self.snipped),
            Int(self.micro_compacted),
            Int(self.summarized),
            Int(self.summary_input_chars),
            Int(self.summary_output_chars),
            Int(self.reactive),
            Int(self.manual),
            Bool(self.overflow),
            Int(self.violations_introduced),
            Int(self.violations_inherited),
            Int(self.cache_read_tokens),
            Int(self.cache_write_tokens),
            Float(self.input_cost_usd),
            Int(self.refs),
            Int(self.refs_retained),
            Int(self.probes),
            Int(self.probes_kept),
            Int(self.probes_recoverable),
        ]
    }
}

fn value_object<'py>(py: Python<'py>, value: Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Int(n) => n.into_pyobject(py)?.into_any(),
        Value::Bool(b) => pyo3::types::PyBool::new(py, b).to_owned().into_any(),
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
    })
}

#[pymethods]
impl TurnRecord {
    #[new]
    #[pyo3(signature = (call, message_index, raw_messages, raw_chars, raw_tokens, messages=0, chars=0,
                        tokens=0, persisted=0, persisted_chars=0, snipped=0, micro_compacted=0,
                        summarized=0, summary_input_chars=0, summary_output_chars=0, reactive=0,
                        manual=0, overflow=false, violations_introduced=0, violations_inherited=0,
                        cache_read_tokens=0, cache_write_tokens=0, input_cost_usd=0.0, refs=0,
                        refs_retained=0, probes=0, probes_kept=0, probes_recoverable=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        call: i64,
        message_index: i64,
        raw_messages: i64,
        raw_chars: i64,
        raw_tokens: i64,
        messages: i64,
        chars: i64,
        tokens: i64,
        persisted: i64,
        persisted_chars: i64,
        snipped: i64,
        micro_compacted: i64,
        summarized: i64,
        summary_input_chars: i64,
        summary_output_chars: i64,
        reactive: i64,
        manual: i64,
        overflow: bool,
        violations_introduced: i64,
        violations_inherited: i64,
        cache_read_tokens: i64,
        cache_write_tokens: i64,
        input_cost_usd: f64,
        refs: i64,
        refs_retained: i64,
        probes: i64,
        probes_kept: i64,
        probes_recoverable: i64,
    ) -> Self {
        TurnRecord {
            call,
            message_index,
            raw_messages,
            raw_chars,
            raw_tokens,
            messages,
            chars,
            tokens,
            persisted,
            persisted_chars,
            snipped,
            micro_compacted,
            summarized,
            summary_input_chars,
            summary_output_chars,
            reactive,
            manual,
            overflow,
            violations_introduced,
            violations_inherited,
            cache_read_tokens,
            cache_write_tokens,
            input_cost_usd,
            refs,
            refs_retained,
            probes,
            probes_kept,
            probes_recoverable,
        }
    }

    /// The columns by name, in order (the reference's `to_dict`).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, value) in COLUMNS.iter().zip(self.values()) {
            d.set_item(name, value_object(py, value)?)?;
        }
        Ok(d)
    }

    /// Pickled (a worker's run sent back, a copy) as the class and its columns in order.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyType>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let values = slf
            .borrow()
            .values()
            .into_iter()
            .map(|v| value_object(py, v))
            .collect::<PyResult<Vec<_>>>()?;
        Ok((slf.get_type(), PyTuple::new(py, values)?))
    }
}

/// A call at which the policy changed the context (`engine/records.py`'s `CompactionEvent`, the
/// reference: the same fields, in the same order, with the same default) held as a Rust struct,
/// for the native core's loops: made without a Python call (4,048 of them on the bench's 5,000-call
/// file, each an `__init__` of ten attributes), and read without an attribute's look-up by
/// compactions.csv's writer and by recall's losses. Its `layers` and `lost` are the lists Python
/// reads and appends to, as the reference's are. Equal to an event of either class with the same
/// fields (a run of each core compared), unhashable as the reference is, pickled as its fields.
#[pyclass(module = "compactlab._native", get_all, set_all)]
pub struct CompactionEvent {
    pub call: i64,
    pub layers: Py<PyList>,
    pub messages_before: i64,
    pub messages_after: i64,
    pub tokens_before: i64,
    pub tokens_after: i64,
    /// tool results replaced by a placeholder (micro) or a preview (budget)
    pub results_cleared: i64,
    pub snipped: i64,
    /// summaries made: the summary layer's, reactive and manual ones
    pub summaries: i64,
    /// (string, the call that first needed it)
    pub lost: Py<PyList>,
}

/// The event's fields, in order (a test holds them to the reference's).
pub const EVENT_FIELDS: [&str; 10] = [
    "call",
    "layers",
    "messages_before",
    "messages_after",
    "tokens_before",
    "tokens_after",
    "results_cleared",
    "snipped",
    "summaries",
    "lost",
];

impl CompactionEvent {
    /// Its fields' values, in `EVENT_FIELDS`' order.
    fn values<'py>(&self, py: Python<'py>) -> PyResult<[Bound<'py, PyAny>; 10]> {
        let n = |v: i64| v.into_pyobject(py).map(|v| v.into_any());
        Ok([
            n(self.call)?,
            self.layers.bind(py).clone().into_any(),
            n(self.messages_before)?,
            n(self.messages_after)?,
            n(self.tokens_before)?,
            n(self.tokens_after)?,
            n(self.results_cleared)?,
            n(self.snipped)?,
            n(self.summaries)?,
            self.lost.bind(py).clone().into_any(),
        ])
    }
}

impl CompactionEvent {
    /// `event`'s call: as held where it is of this class, else by name (the reference's).
    pub(crate) fn call_of(event: &Bound<'_, PyAny>) -> PyResult<i64> {
        match event.cast_exact::<CompactionEvent>() {
            Ok(native) => Ok(native.borrow().call),
            Err(_) => event.getattr(intern!(event.py(), "call"))?.extract(),
        }
    }

    /// `event`'s `lost` list, read as `call_of` reads its call.
    pub(crate) fn lost_of<'py>(event: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        match event.cast_exact::<CompactionEvent>() {
            Ok(native) => Ok(native.borrow().lost.bind(event.py()).clone()),
            Err(_) => Ok(event
                .getattr(intern!(event.py(), "lost"))?
                .cast_into::<PyList>()?),
        }
    }
}

#[pymethods]
impl CompactionEvent {
    #[new]
    #[pyo3(signature = (call, layers, messages_before, messages_after, tokens_before, tokens_after,
                        results_cleared, snipped, summaries, lost=None))]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        py: Python<'_>,
        call: i64,
        layers: Py<PyList>,
        messages_before: i64,
        messages_after: i64,
        tokens_before: i64,
        tokens_after: i64,
        results_cleared: i64,
        snipped: i64,
        summaries: i64,
        lost: Option<Py<PyList>>,
    ) -> Self {
        CompactionEvent {
            call,
            layers,
            messages_before,
            messages_after,
            tokens_before,
            tokens_after,
            results_cleared,
            snipped,
            summaries,
            lost: lost.unwrap_or_else(|| PyList::empty(py).unbind()),
        }
    }

    /// Equal to an event of this class or the reference's whose fields are equal (another object:
    /// not known, as the reference says of one).
    fn __eq__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let reference = py
            .import(intern!(py, "compactlab.engine.records"))?
            .getattr(intern!(py, "CompactionEvent"))?;
        if !(other.is_instance_of::<CompactionEvent>() || other.get_type().is(&reference)) {
            return Ok(py.NotImplemented().into_bound(py));
        }
        let mine = slf.borrow().values(py)?;
        for (name, value) in EVENT_FIELDS.iter().zip(mine) {
            if !value.eq(other.getattr(*name)?)? {
                return Ok(false.into_pyobject(py)?.to_owned().into_any());
            }
        }
        Ok(true.into_pyobject(py)?.to_owned().into_any())
    }

    /// Pickled (a worker's run sent back, a copy) as the class and its fields in order.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyType>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        Ok((slf.get_type(), PyTuple::new(py, slf.borrow().values(py)?)?))
    }
}

/// A column's value as the replay's JSON and calls.csv both write it: an integer's digits,
/// `true`/`false`, a float by `float_text` or, outside its range, as `other` writes it.
#[derive(Default)]
struct Cells {
    digits: itoa::Buffer,
    floats: ryu::Buffer,
}

impl Cells {
    fn push(
        &mut self,
        out: &mut Vec<u8>,
        value: Value,
        other: impl Fn(f64) -> PyResult<Vec<u8>>,
    ) -> PyResult<()> {
        match value {
            Value::Int(n) => out.extend_from_slice(self.digits.format(n).as_bytes()),
            Value::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
            Value::Float(f) => match float_text(f, &mut self.floats) {
                Some(text) => out.extend_from_slice(text.as_bytes()),
                None => out.extend_from_slice(&other(f)?),
            },
        }
        Ok(())
    }
}

/// `records` as this class's records, borrowed; None where one is of another class.
fn native_records<'py>(records: &Bound<'py, PyList>) -> Option<Vec<PyRef<'py, TurnRecord>>> {
    records
        .iter()
        .map(|r| r.cast_exact::<TurnRecord>().ok().map(|r| r.borrow()))
        .collect()
}

/// The records as the JSON array orjson writes of the reference's dataclasses (`[{"call":0,…},…]`),
/// a float outside `float_text`'s range written by `orjson.dumps`; None where a record is not of
/// this class. Of a part of the array (`first`, `last`: a long run's written a part at a time),
/// its `[` only where it is the first part and its `]` only where it is the last, the records
/// after a `,` where it is not the first: the parts joined are the whole array's bytes.
#[pyfunction]
#[pyo3(signature = (records, first = true, last = true))]
pub fn records_json<'py>(
    records: &Bound<'py, PyList>,
    first: bool,
    last: bool,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let py = records.py();
    let Some(rows) = native_records(records) else {
        return Ok(None);
    };
    // (each column's key as it is written: after the record's `{`, or after the last value's `,`)
    let keys: Vec<String> = COLUMNS
        .iter()
        .enumerate()
        .map(|(j, c)| format!("{}\"{c}\":", if j == 0 { "{" } else { "," }))
        .collect();
    // (about 520 bytes a record of a long run: room for them at once, not grown as it is written)
    let mut out: Vec<u8> = Vec::with_capacity(rows.len() * 640 + 2);
    let mut cells = Cells::default();
    // (a float outside `float_text`'s range: orjson's own text of it)
    let orjson = |f: f64| -> PyResult<Vec<u8>> {
        let dumps = py
            .import(intern!(py, "orjson"))?
            .getattr(intern!(py, "dumps"))?;
        Ok(dumps
            .call1((f,))?
            .cast_into::<PyBytes>()?
            .as_bytes()
            .to_vec())
    };
    if first {
        out.push(b'[');
    }
    for (k, r) in rows.iter().enumerate() {
        if k > 0 || !first {
            out.push(b',');
        }
        for (key, value) in keys.iter().zip(r.values()) {
            out.extend_from_slice(key.as_bytes());
            cells.push(&mut out, value, orjson)?;
        }
        out.push(b'}');
    }
    if last {
        out.push(b']');
    }
    Ok(Some(PyBytes::new(py, &out)))
}

/// calls.csv (its header, then a row a record) as `replay_report.calls_csv_bytes`, the reference,
/// writes it: numbers as they are, `overflow` as `true`/`false`, a float outside `float_text`'s
/// range as its `repr` (a number needs no quotes); None where a record is not of this class.
#[pyfunction]
pub fn calls_csv<'py>(records: &Bound<'py, PyList>) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let py = records.py();
    let Some(rows) = native_records(records) else {
        return Ok(None);
    };
    // (about 120 bytes a row of a long run: room for them at once)
    let mut out: Vec<u8> = Vec::with_capacity(rows.len() * 160 + 400);
    out.extend_from_slice(COLUMNS.join(",").as_bytes());
    out.push(b'\n');
    let mut cells = Cells::default();
    // (a float outside `float_text`'s range: its `repr`, which needs no quotes)
    let repr = |f: f64| -> PyResult<Vec<u8>> {
        Ok(pyo3::types::PyFloat::new(py, f)
            .repr()?
            .to_str()?
            .as_bytes()
            .to_vec())
    };
    for r in &rows {
        for (j, value) in r.values().into_iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            cells.push(&mut out, value, repr)?;
        }
        out.push(b'\n');
    }
    Ok(Some(PyBytes::new(py, &out)))
}

/// What `records.summarize` sums of the records (None where one is not of this class): the
/// references, those retained, the probes, those kept and recoverable, the raw and the sent tokens,
/// the peak and the last call's tokens, the overflows, the cache's reads and writes, and the input
/// cost: summed as Python's `sum` sums floats (`compensated`: 3.12's, Neumaier's compensated sum;
/// else one addition after another, 3.11's).
#[pyfunction]
pub fn record_sums(records: &Bound<'_, PyList>, compensated: bool) -> Option<([i128; 12], f64)> {
    let rows = native_records(records)?;
    // (in 128 bits: a column's sum is Python's integer, past any 64-bit one)
    let mut s = [0i128; 12];
    let (mut cost, mut c) = (0.0f64, 0.0f64);
    for (k, r) in rows.iter().enumerate() {
        for (slot, v) in s.iter_mut().zip([
            r.refs,
            r.refs_retained,
            r.probes,
            r.probes_kept,
            r.probes_recoverable,
            r.raw_tokens,
            r.tokens,
        ]) {
            *slot += i128::from(v);
        }
        let tokens = i128::from(r.tokens);
        s[7] = if k == 0 { tokens } else { s[7].max(tokens) };
        s[8] = tokens;
        s[9] += i128::from(r.overflow);
        s[10] += i128::from(r.cache_read_tokens);
        s[11] += i128::from(r.cache_write_tokens);
        let x = r.input_cost_usd;
        if k == 0 {
            // (Python's `sum` starts from the integer 0: `0 + -0.0` is `0.0`)
            cost = 0.0 + x;
        } else if compensated {
            let t = cost + x;
            c += if cost.abs() >= x.abs() {
                (cost - t) + x
            } else {
                (x - t) + cost
            };
            cost = t;
        } else {
            cost += x;
        }
    }
    if compensated && c != 0.0 && c.is_finite() {
        cost += c;
    }
    Some((s, cost))
}

/// Sets a record's columns named in `values`: directly on one of this class, by `setattr` on any
/// other (the Python engine's records, measured by the native measures).
pub fn set_columns(record: &Bound<'_, PyAny>, values: &[(Column, i64)]) -> PyResult<()> {
    if let Ok(native) = record.cast_exact::<TurnRecord>() {
        let mut r = native.borrow_mut();
        for &(column, v) in values {
            *column.of(&mut r) = v;
        }
        return Ok(());
    }
    for &(column, v) in values {
        record.setattr(column.name(), v)?;
    }
    Ok(())
}

/// The integer columns the native measures set after a record is made: each `Column`, its name
/// (`setattr`'s) and the struct's field, from one list.
macro_rules! columns {
    ($($column:ident => $field:ident),* $(,)?) => {
        #[derive(Clone, Copy)]
        pub enum Column {
            $($column),*
        }

        impl Column {
            fn name(self) -> &'static str {
                match self {
                    $(Column::$column => stringify!($field)),*
                }
            }

            fn of(self, r: &mut TurnRecord) -> &mut i64 {
                match self {
                    $(Column::$column => &mut r.$field),*
                }
            }
        }
    };
}

columns! {
    RawMessages => raw_messages,
    RawChars => raw_chars,
    RawTokens => raw_tokens,
    ViolationsIntroduced => violations_introduced,
    ViolationsInherited => violations_inherited,
    CacheReadTokens => cache_read_tokens,
    CacheWriteTokens => cache_write_tokens,
    Refs => refs,
    RefsRetained => refs_retained,
    Probes => probes,
    ProbesKept => probes_kept,
    ProbesRecoverable => probes_recoverable,
    Persisted => persisted,
    PersistedChars => persisted_chars,
    Summarized => summarized,
    SummaryInputChars => summary_input_chars,
    SummaryOutputChars => summary_output_chars,
    Reactive => reactive,
    Manual => manual,
}
