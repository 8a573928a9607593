//! The Python module `compactlab._native`: plain data in, plain data out.

use hashbrown::HashTable;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyInt, PyList, PySet, PyString, PyTuple, PyType};
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::facts::MARK;
use crate::instances::Alloc;
use crate::members::{self, Fact, Members, ENTRY_FACTS};
use crate::pieces::Pieces;

use crate::ledger::{Ledger, Outcomes, ProbeLedger};
use crate::records::TurnRecord;
use crate::{
    cache, csv_text, facts, lines, pricing, probe_cache, recall, seam, strings, violations,
};

/// The prompt-cache prefix model (`cost/pricing.py`'s `PromptCache` is its reference).
#[pyclass(module = "compactlab._native")]
pub(crate) struct PromptCache {
    pub(crate) inner: cache::PromptCache,
    /// the Python `CacheRules` last set (given back as set)
    rules: Py<PyAny>,
}

#[pymethods]
impl PromptCache {
    #[new]
    fn new(chars_per_token: f64, overhead_tokens: i64, exact: bool, rules: Py<PyAny>) -> Self {
        PromptCache {
            inner: cache::PromptCache::new(chars_per_token, overhead_tokens, exact),
            rules,
        }
    }

    /// The provider's rules (a `CacheRules`): read once, where they are set.
    #[getter]
    fn rules(&self, py: Python<'_>) -> Py<PyAny> {
        self.rules.clone_ref(py)
    }

    #[setter]
    fn set_rules(&mut self, rules: Bound<'_, PyAny>) -> PyResult<()> {
        self.inner.rules = rules_of(&rules)?;
        self.rules = rules.unbind();
        Ok(())
    }

    #[getter]
    fn calls(&self) -> i64 {
        self.inner.calls
    }

    #[getter]
    fn sent_messages(&self) -> usize {
        self.inner.sent_messages
    }

    #[getter]
    fn sent_tokens(&self) -> i64 {
        self.inner.sent_tokens
    }

    #[getter]
    fn reply_tokens(&self) -> i64 {
        self.inner.reply_tokens
    }

    #[getter]
    fn replies(&self) -> Vec<i64> {
        self.inner.replies.clone()
    }

    /// How many messages of the context last sent it knows the characters of.
    fn known(&self) -> usize {
        self.inner.known()
    }

    /// A call's (cache read, cache write) tokens (`cache::PromptCache::at_call`).
    fn at_call(
        &mut self,
        changed_from: usize,
        tokens: i64,
        reply_chars: i64,
        tail_from: usize,
        tail: Vec<i64>,
    ) -> PyResult<(i64, i64)> {
        if tail_from > self.inner.known() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "a tail from message {tail_from} of a context of {} known messages",
                self.inner.known()
            )));
        }
        Ok(self
            .inner
            .at_call(changed_from, tokens, reply_chars, tail_from, &tail))
    }
}

/// What the model needs of a Python `CacheRules`.
fn rules_of(rules: &Bound<'_, PyAny>) -> PyResult<cache::Rules> {
    Ok(cache::Rules {
        reply_cached: rules.getattr("reply_cached")?.extract()?,
        granularity: rules.getattr("granularity")?.extract()?,
        minimum: rules.getattr("minimum")?.extract()?,
        caches: rules.getattr("caches")?.extract()?,
    })
}

/// A text as UTF-8, or None where it has none (a lone surrogate): Python then reads it itself.
fn utf8<'a>(text: &'a Bound<'_, PyString>) -> Option<&'a str> {
    text.to_str().ok()
}

/// A file's probes read back from the probe cache (`probe_cache.rs`; `probe_cache._parsed` is the
/// reference), held here rather than as a Python object a probe: a call's `Probe`s are made when
/// Python asks for them (`get` and a mapping's other methods: call -> its probes, in the order
/// stored); the native loop's recall reads the rows themselves (`given`).
#[pyclass(frozen, module = "compactlab._native")]
pub(crate) struct StoredProbes {
    stored: probe_cache::Stored,
    /// each row's text, as its outcome in the ledger repeats it
    texts: Vec<Py<PyString>>,
    tools: Vec<Py<PyString>>,
    /// the kinds `parse` was given, and which of them is a line's
    kinds: Vec<Py<PyString>>,
    line: Option<u8>,
    /// the class of a call's probes (`Probe`)
    probe: Py<PyType>,
}

#[pymethods]
impl StoredProbes {
    /// The entry `data` (the cache file's bytes) read, or None where any value is not what the
    /// cache writes (Python then reads it itself). `kinds`: the probes' kinds (`probes.KINDS`).
    #[staticmethod]
    fn parse(
        data: &Bound<'_, PyBytes>,
        version: i64,
        probe: Bound<'_, PyType>,
        kinds: Vec<Bound<'_, PyString>>,
    ) -> PyResult<Option<Self>> {
        let py = data.py();
        let names = kinds
            .iter()
            .map(|k| k.to_str())
            .collect::<PyResult<Vec<_>>>()?;
        if names.len() > usize::from(u8::MAX) {
            return Err(pyo3::exceptions::PyValueError::new_err("too many kinds"));
        }
        let Some(stored) = probe_cache::parse(data.as_bytes(), version, &names) else {
            return Ok(None);
        };
        // (one Python string a text, shared by its rows: `probe_cache::stored` stores each once)
        let mut made: FxHashMap<(u32, u32), Py<PyString>> = FxHashMap::default();
        let texts = stored
            .rows
            .iter()
            .map(|r| {
                made.entry(r.text)
                    .or_insert_with(|| PyString::new(py, stored.text(r)).unbind())
                    .clone_ref(py)
            })
            .collect();
        let tools = stored
            .tools
            .iter()
            .map(|t| PyString::new(py, t).unbind())
            .collect();
        let line = names.iter().position(|k| *k == "line").map(|i| i as u8);
        Ok(Some(StoredProbes {
            stored,
            texts,
            tools,
            kinds: kinds.into_iter().map(Bound::unbind).collect(),
            line,
            probe: probe.unbind(),
        }))
    }

    /// `call`'s probes (a new list), or `default` where it has none.
    #[pyo3(signature = (call, default=None))]
    fn get<'py>(
        &self,
        call: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = call.py();
        match self.rows_of(call) {
            Some(rows) => Ok(self.probes(py, rows)?.into_any()),
            None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    fn __getitem__<'py>(&self, call: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        match self.rows_of(call) {
            Some(rows) => self.probes(call.py(), rows),
            None => Err(pyo3::exceptions::PyKeyError::new_err(call.clone().unbind())),
        }
    }

    fn __contains__(&self, call: &Bound<'_, PyAny>) -> bool {
        self.rows_of(call).is_some()
    }

    /// Equal to a mapping with the same calls and probes (a `dict` among them), as a `Mapping` is.
    fn __eq__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = slf.py();
        let Ok(items) = other.call_method0(intern!(py, "items")) else {
            return Ok(false);
        };
        let mine = pyo3::types::PyDict::from_sequence(&slf.get().items(py)?.into_any())?;
        mine.eq(pyo3::types::PyDict::from_sequence(&items)?)
    }

    fn __len__(&self) -> usize {
        self.stored.calls.len()
    }

    /// How many probes it holds, over all its calls (a ledger's room for their outcomes).
    #[getter]
    fn rows(&self) -> usize {
        self.stored.rows.len()
    }

    fn __iter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, pyo3::types::PyIterator>> {
        slf.get().keys(slf.py())?.try_iter()
    }

    /// The calls that have probes, in the order stored.
    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, &self.stored.calls)
    }

    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let lists = self
            .stored
            .calls
            .iter()
            .map(|c| self.probes(py, &self.stored.by_call[c]))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, lists)
    }

    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let pairs = self
            .stored
            .calls
            .iter()
            .map(|c| Ok((*c, self.probes(py, &self.stored.by_call[c])?)))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, pairs)
    }
}

impl StoredProbes {
    fn rows_of(&self, call: &Bound<'_, PyAny>) -> Option<&[u32]> {
        let call = call.cast::<PyInt>().ok()?.extract::<i64>().ok()?;
        self.stored.by_call.get(&call).map(Vec::as_slice)
    }

    /// Whether `call` has probes.
    pub(crate) fn holds(&self, call: i64) -> bool {
        self.stored.by_call.contains_key(&call)
    }

    /// `rows` made into `Probe`s.
    fn probes<'py>(&self, py: Python<'py>, rows: &[u32]) -> PyResult<Bound<'py, PyList>> {
        let new_tuple = tuple_new(py)?;
        let (new_tuple, probe) = (new_tuple.bind(py), self.probe.bind(py));
        let made = rows
            .iter()
            .map(|&i| {
                let row = &self.stored.rows[i as usize];
                let place = self
                    .stored
                    .place(row)
                    .iter()
                    .map(|&(origin, block)| PyTuple::new(py, [origin, block]))
                    .collect::<PyResult<Vec<_>>>()?;
                let fields = PyTuple::new(
                    py,
                    [
                        self.texts[i as usize].bind(py).clone().into_any(),
                        PyTuple::new(py, place)?.into_any(),
                        row.source_call.into_pyobject(py)?.into_any(),
                        self.tools[row.tool as usize].bind(py).clone().into_any(),
                        self.kinds[usize::from(row.kind)]
                            .bind(py)
                            .clone()
                            .into_any(),
                    ],
                )?;
                new_tuple.call1((probe, fields))
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, made)
    }

    /// `call`'s probes as the check reads them (none where it has none).
    pub(crate) fn given<'py, 'a>(
        &'a self,
        py: Python<'py>,
        call: i64,
    ) -> PyResult<Vec<GivenProbe<'py, 'a>>> {
        let Some(rows) = self.stored.by_call.get(&call) else {
            return Ok(Vec::new());
        };
        rows.iter()
            .map(|&i| {
                let row = &self.stored.rows[i as usize];
                Ok(GivenProbe {
                    text: self.texts[i as usize].bind(py).clone(),
                    kind: self.kinds[usize::from(row.kind)]
                        .bind(py)
                        .clone()
                        .into_any(),
                    source_call: row.source_call.into_pyobject(py)?.into_any(),
                    source_tool: self.tools[row.tool as usize].bind(py).clone().into_any(),
                    place: Cow::Borrowed(self.stored.place(row)),
                    line: Some(row.kind) == self.line,
                })
            })
            .collect()
    }
}

/// `rows` (each a sequence of fields) as `csv.writer(out, lineterminator="\n")` writes them, in
/// UTF-8 (`csv_text.rs`; `reports/text.py`'s `csv_bytes` and its csv module the reference): a
/// string as it stands, None empty, a float as its `repr`, any other field as its `str`. None where a
/// text has no UTF-8 (a lone surrogate): the reference says so.
#[pyfunction]
fn csv_rows<'py>(rows: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let py = rows.py();
    let mut out = Csv::default();
    for row in members::items(rows)? {
        let row = row?;
        out.start();
        for field in members::items(&row)? {
            if !out.field(&field?)? {
                return Ok(None);
            }
        }
        out.end();
    }
    Ok(Some(out.bytes(py)))
}

/// `value`'s text where it is a `str` (not a subclass) that has UTF-8; else None (Python's).
fn exact_text<'a>(value: &'a Bound<'_, PyAny>) -> Option<&'a str> {
    value.cast_exact::<PyString>().ok()?.to_str().ok()
}

/// A CSV text being written (`csv_rows`' rules), a row at a time.
#[derive(Default)]
struct Csv {
    text: Vec<u8>,
    /// where the row began and how many fields it has so far
    row: (usize, usize),
}

impl Csv {
    /// A table begun with `header`'s row (its names); None where a name is not a text.
    fn headed(header: &Bound<'_, PyAny>) -> PyResult<Option<Self>> {
        let mut out = Csv::default();
        out.start();
        for name in members::items(header)? {
            if !out.field(&name?)? {
                return Ok(None);
            }
        }
        out.end();
        Ok(Some(out))
    }

    fn bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.text)
    }

    fn start(&mut self) {
        self.row = (self.text.len(), 0);
    }

    fn end(&mut self) {
        csv_text::end_row(&mut self.text, self.row.0, self.row.1);
    }

    fn text(&mut self, text: &str) {
        csv_text::push_field(&mut self.text, text, self.row.1 == 0);
        self.row.1 += 1;
    }

    /// A field that needs no quotes (a number's text, `true`).
    fn plain(&mut self, text: &str) {
        if self.row.1 > 0 {
            self.text.push(b',');
        }
        self.text.extend_from_slice(text.as_bytes());
        self.row.1 += 1;
    }

    fn int(&mut self, n: i64) {
        let mut digits = itoa::Buffer::new();
        let text = digits.format(n);
        self.plain(text);
    }

    /// A float as Python's `repr` writes it, asked of Python: Rust's shortest digits break a tie
    /// otherwise (70368744177664.625: `...664.63` to Rust, `...664.62` to Python, which rounds it
    /// to even), and only the exact value tells a tie.
    fn float(&mut self, float: &Bound<'_, PyFloat>) -> PyResult<()> {
        self.plain(float.repr()?.to_str()?);
        Ok(())
    }

    /// `field` written by its kind; false where a text has no UTF-8.
    fn field(&mut self, field: &Bound<'_, PyAny>) -> PyResult<bool> {
        if let Ok(text) = field.cast_exact::<PyString>() {
            let Ok(text) = text.to_str() else {
                return Ok(false);
            };
            self.text(text);
        } else if field.is_none() {
            self.text("");
        } else if let Some(n) = field
            .cast_exact::<PyInt>()
            .ok()
            .and_then(|n| n.extract::<i64>().ok())
        {
            self.int(n);
        } else if let Ok(x) = field.cast_exact::<PyFloat>() {
            self.float(x)?;
        } else {
            let text = if field.is_instance_of::<PyFloat>() {
                field.repr()?
            } else {
                field.str()?
            };
            let Ok(text) = text.to_str() else {
                return Ok(false);
            };
            self.text(text);
        }
        Ok(true)
    }

    /// `csv_cell` of `field` (a text made visible, a formula not run; any other as it is).
    fn cell(&mut self, field: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(text) = field.cast_exact::<PyString>() else {
            return self.field(field);
        };
        let Ok(text) = text.to_str() else {
            return Ok(false);
        };
        self.text(&csv_text::csv_cell(text));
        Ok(true)
    }
}

/// glibc's allocator told to keep what this process frees (`allocator::keep_freed`): whether it
/// took the thresholds.
#[pyfunction]
fn keep_freed(mmap: i32, trim: i32) -> bool {
    crate::allocator::keep_freed(mmap, trim)
}

/// What `LineReader.blocks` reads next (`transcripts/reader.py`'s `_read_on`, its reference): the
/// bytes of `kept` from `start` (the line the last piece cut, or all of a line longer than a
/// piece), then up to `want` bytes of `file` from `at` (where `kept` ends in it), fewer where the
/// file ends, as one bytes object. What was read once is copied here, not read from the file again.
#[pyfunction]
fn read_on<'py>(
    file: &Bound<'py, PyAny>,
    kept: &Bound<'py, PyBytes>,
    start: usize,
    want: usize,
    at: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let py = file.py();
    let raw_fd: i32 = file.call_method0(intern!(py, "fileno"))?.extract()?;
    if raw_fd < 0 {
        return Err(os_error(py, rustix::io::Errno::BADF));
    }
    // SAFETY: `raw_fd` is not negative and is what `file.fileno()` just gave: the descriptor of
    // an open file object (`fileno` raises on a closed one). `file` is borrowed for this whole call
    // and the GIL is held throughout, with no Python code run after `fileno`, so nothing can close
    // the descriptor while it is borrowed.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(raw_fd) };
    let carried = kept.as_bytes().get(start..).unwrap_or_default();
    let total = carried.len() + want;
    let size = isize::try_from(total).map_err(|_| pyo3::exceptions::PyMemoryError::new_err(()))?;
    // SAFETY: `PyBytes_FromStringAndSize` with a null pointer makes a bytes object of `size`
    // bytes whose contents are not set (the C API's documented way to fill one in place); it
    // returns a new reference or null with an exception set, which `from_owned_ptr_or_err`
    // takes. The object is new and referenced only here, so writing into it is what the C API
    // allows until it is handed on.
    let made = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), size),
        )?
    };
    // SAFETY: `made` is the bytes object just made (`PyBytes_AsString` of a bytes object cannot
    // fail): its buffer holds `total` bytes (and the terminating NUL, not touched), owned by
    // `made`, which outlives this slice; nothing else can see it yet.
    let buf = unsafe {
        std::slice::from_raw_parts_mut(
            pyo3::ffi::PyBytes_AsString(made.as_ptr()).cast::<u8>(),
            total,
        )
    };
    let (head, rest) = buf.split_at_mut(carried.len());
    head.copy_from_slice(carried);
    let (mut filled, mut failed) = (0usize, None);
    while filled < rest.len() {
        match rustix::io::pread(fd, &mut rest[filled..], at + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let made = made.cast_into::<PyBytes>()?;
    if let Some(e) = failed {
        return Err(os_error(py, e));
    }
    if filled < want {
        // (the file ended first: the bytes read, and no more)
        return Ok(PyBytes::new(py, &made.as_bytes()[..carried.len() + filled]));
    }
    Ok(made)
}

/// How many `{` and `[` a line holds (`lines::brackets`; `transcripts/reader.py`'s `_brackets` is
/// its reference).
#[pyfunction]
fn brackets(line: &[u8]) -> usize {
    lines::brackets(line)
}

/// The SHA-256 of `data` in hexadecimal (`hashlib.sha256(data).hexdigest()`, the reference: a
/// digest asked a run, of a few bytes, without importing `hashlib` and its OpenSSL).
#[pyfunction]
fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(data);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    out
}

/// `reports/text.py`'s `csv_cell` of a text (the tests' way to the native one).
#[pyfunction]
fn csv_cell(text: &str) -> String {
    csv_text::csv_cell(text).into_owned()
}

/// probes.csv (`replay_report.probes_csv_bytes`, the reference): `header`, then each
/// `ProbeOutcome` of `ledger` — its probe and tool as `csv_cell`s, the call that removed it only
/// where it was not kept. None where a text has no UTF-8 or an outcome is not one.
#[pyfunction]
fn probes_csv<'py>(
    ledger: &Bound<'py, PyAny>,
    header: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let py = ledger.py();
    let Some(mut out) = Csv::headed(header)? else {
        return Ok(None);
    };
    let ledger = match Ledger::of(ledger)? {
        Ledger::Rows(rows) => return probe_rows_csv(py, &rows.borrow(), out),
        Ledger::List(list) => list,
    };
    let kept = intern!(py, "kept");
    for outcome in ledger.iter() {
        let Ok(o) = outcome.cast::<PyTuple>() else {
            return Ok(None);
        };
        if o.len() != 8 {
            return Ok(None);
        }
        out.start();
        let status = o.get_item(5)?;
        for k in 0..8 {
            let field = o.get_item(k)?;
            let written = match k {
                1 | 4 => out.cell(&field)?,
                7 if status.eq(kept)? => {
                    out.text("");
                    true
                }
                _ => out.field(&field)?,
            };
            if !written {
                return Ok(None);
            }
        }
        out.end();
    }
    Ok(Some(out.bytes(py)))
}

/// probes.csv's rows of a ledger held here (`probes_csv`): the same fields, read from the rows.
fn probe_rows_csv<'py>(
    py: Python<'py>,
    ledger: &ProbeLedger,
    mut out: Csv,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    // (each field a row holds an object of is written once an object and copied after: the rows
    // of one probe share its text, kind and tool, and a status and a layer are a few strings)
    let mut seen = Written::default();
    for r in &ledger.rows {
        out.start();
        out.int(r.call);
        let [text, kind, source_call, source_tool] = &r.probe;
        let written = seen.cell(&mut out, text.bind(py))?
            && seen.field(&mut out, kind.bind(py))?
            && out.field(source_call.bind(py))?
            && seen.cell(&mut out, source_tool.bind(py))?
            && seen.field(&mut out, r.status_text.bind(py).as_any())?
            && seen.field(&mut out, r.by.bind(py).as_any())?
            && if r.status == crate::ledger::KEPT {
                out.text("");
                true
            } else {
                out.int(r.at);
                true
            };
        if !written {
            return Ok(None);
        }
        out.end();
    }
    Ok(Some(out.bytes(py)))
}

/// The fields a table's rows hold the same strings in, each written once a string (what `Csv`
/// appended of it, its comma included: never a row's first field) and copied after. Known by the
/// string's identity, each alive for as long as the rows that hold it are read: a string is never
/// another's while this is.
#[derive(Default)]
struct Written {
    cells: FxHashMap<usize, Box<[u8]>>,
    fields: FxHashMap<usize, Box<[u8]>>,
}

impl Written {
    /// `Csv::cell` of `field`.
    fn cell(&mut self, out: &mut Csv, field: &Bound<'_, PyAny>) -> PyResult<bool> {
        Self::once(&mut self.cells, out, field, Csv::cell)
    }

    /// `Csv::field` of `field`.
    fn field(&mut self, out: &mut Csv, field: &Bound<'_, PyAny>) -> PyResult<bool> {
        Self::once(&mut self.fields, out, field, Csv::field)
    }

    fn once(
        made: &mut FxHashMap<usize, Box<[u8]>>,
        out: &mut Csv,
        field: &Bound<'_, PyAny>,
        write: fn(&mut Csv, &Bound<'_, PyAny>) -> PyResult<bool>,
    ) -> PyResult<bool> {
        if out.row.1 == 0 || !field.is_exact_instance_of::<PyString>() {
            return write(out, field);
        }
        let key = field.as_ptr() as usize;
        if let Some(bytes) = made.get(&key) {
            out.text.extend_from_slice(bytes);
            out.row.1 += 1;
            return Ok(true);
        }
        let start = out.text.len();
        if !write(out, field)? {
            return Ok(false);
        }
        made.insert(key, out.text[start..].into());
        Ok(true)
    }
}

/// compactions.csv (`replay_report.compactions_csv_bytes`, the reference): `header`, then each
/// `CompactionEvent` of `events` — its layers joined by spaces, how many strings it lost and
/// those strings, each with the call that first needed it, as one `csv_cell`. None where a text
/// has no UTF-8 or an event is not one.
#[pyfunction]
fn compactions_csv<'py>(
    events: &Bound<'py, PyList>,
    header: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let py = events.py();
    let Some(mut out) = Csv::headed(header)? else {
        return Ok(None);
    };
    let counts = [
        intern!(py, "messages_before"),
        intern!(py, "messages_after"),
        intern!(py, "tokens_before"),
        intern!(py, "tokens_after"),
        intern!(py, "results_cleared"),
        intern!(py, "snipped"),
        intern!(py, "summaries"),
    ];
    let mut text = String::new();
    let mut digits = itoa::Buffer::new();
    for e in events.iter() {
        out.start();
        // (the native core's events read as they are held; any other's fields by name)
        let native = e.cast_exact::<crate::records::CompactionEvent>().ok();
        let native = native.as_ref().map(|n| n.borrow());
        let (layers, lost) = match &native {
            Some(n) => {
                out.int(n.call);
                (
                    n.layers.bind(py).clone().into_any(),
                    n.lost.bind(py).clone().into_any(),
                )
            }
            None => {
                if !out.field(&e.getattr(intern!(py, "call"))?)? {
                    return Ok(None);
                }
                (
                    e.getattr(intern!(py, "layers"))?,
                    e.getattr(intern!(py, "lost"))?,
                )
            }
        };
        text.clear();
        for (k, layer) in members::items(&layers)?.enumerate() {
            let layer = layer?;
            let Some(layer) = exact_text(&layer) else {
                return Ok(None);
            };
            if k > 0 {
                text.push(' ');
            }
            text.push_str(layer);
        }
        out.text(&text);
        match &native {
            Some(n) => {
                for count in [
                    n.messages_before,
                    n.messages_after,
                    n.tokens_before,
                    n.tokens_after,
                    n.results_cleared,
                    n.snipped,
                    n.summaries,
                ] {
                    out.int(count);
                }
            }
            None => {
                for name in counts {
                    if !out.field(&e.getattr(name)?)? {
                        return Ok(None);
                    }
                }
            }
        }
        text.clear();
        let mut n = 0i64;
        for item in members::items(&lost)? {
            let Ok((s, c)) = item?.extract::<(Bound<'py, PyAny>, Bound<'py, PyAny>)>() else {
                return Ok(None);
            };
            let (Some(s), Ok(c)) = (
                exact_text(&s),
                c.cast_exact::<PyInt>().map(|c| c.extract::<i64>()),
            ) else {
                return Ok(None);
            };
            if n > 0 {
                text.push_str("; ");
            }
            text.push_str(s);
            text.push_str(" (call ");
            text.push_str(digits.format(c?));
            text.push(')');
            n += 1;
        }
        out.int(n);
        out.text(&csv_text::csv_cell(&text));
        out.end();
    }
    Ok(Some(out.bytes(py)))
}

/// The verdict's bootstrap interval of the total saving (`verdict._interval`; numpy's code is the
/// reference): the 2.5th and 97.5th percentiles, unrounded, over `resamples` resamples of the
/// transcripts' costs and raw costs; None where it is left to the reference (`bootstrap::interval`).
#[pyfunction]
fn bootstrap_interval(cost: Vec<f64>, raw: Vec<f64>, resamples: usize) -> Option<(f64, f64)> {
    crate::bootstrap::interval(&cost, &raw, resamples)
}

/// `log Φ(a)` of each value, as Optuna's TPE sampler computes it (`normal::log_ndtr`; its
/// `_log_ndtr_single` is the reference): what `study.py` has the sampler map over its arrays.
#[pyfunction]
fn log_ndtr(values: Vec<f64>) -> Vec<f64> {
    values.into_iter().map(crate::normal::log_ndtr).collect()
}

/// Per kind of `kinds`, how many probes `ledger` (`probes.ProbeOutcome`s) holds, how many kept
/// and how many recoverable (`Recall.kinds`, the reference); an error for a kind or status it does
/// not know, as there.
#[pyfunction]
fn ledger_kinds(ledger: &Bound<'_, PyAny>, kinds: Vec<String>) -> PyResult<Vec<[u64; 3]>> {
    let mut out = vec![[0u64; 3]; kinds.len()];
    let ledger = match Ledger::of(ledger)? {
        Ledger::Rows(rows) => {
            let py = rows.py();
            // (a kind is one of a few strings, the same objects row after row: read once each)
            let mut last: Option<(usize, usize)> = None;
            for r in &rows.borrow().rows {
                let kind = r.probe[1].bind(py);
                let at = match last {
                    Some((ptr, k)) if ptr == kind.as_ptr() as usize => k,
                    _ => {
                        let text = kind.cast::<PyString>()?.to_cow()?;
                        let Some(k) = kinds.iter().position(|k| *k == text) else {
                            return Err(pyo3::exceptions::PyKeyError::new_err(text.into_owned()));
                        };
                        last = Some((kind.as_ptr() as usize, k));
                        k
                    }
                };
                let row = &mut out[at];
                row[0] += 1;
                match r.status {
                    crate::ledger::KEPT => row[1] += 1,
                    crate::ledger::RECOVERABLE => row[2] += 1,
                    crate::ledger::LOST => {}
                    _ => {
                        let other = r.status_text.bind(py).to_cow()?.into_owned();
                        return Err(pyo3::exceptions::PyKeyError::new_err(other));
                    }
                }
            }
            return Ok(out);
        }
        Ledger::List(list) => list,
    };
    for p in ledger.iter() {
        let p = p.cast_into::<PyTuple>()?;
        let kind = p.get_borrowed_item(2)?;
        let kind = kind.cast::<PyString>()?;
        let kind = kind.to_cow()?;
        let Some(row) = kinds.iter().position(|k| *k == kind).map(|k| &mut out[k]) else {
            return Err(pyo3::exceptions::PyKeyError::new_err(kind.into_owned()));
        };
        row[0] += 1;
        match &*p.get_borrowed_item(5)?.cast::<PyString>()?.to_cow()? {
            "kept" => row[1] += 1,
            "recoverable" => row[2] += 1,
            "lost" => {}
            other => return Err(pyo3::exceptions::PyKeyError::new_err(other.to_owned())),
        }
    }
    Ok(out)
}

/// The probes of `ledger` (`probes.ProbeOutcome`s) not kept that a layer removed at one of
/// `calls` (the run's events): each (that call, the probe's text, the first call that needed it),
/// in that order (`Recall.losses`, the reference); None where a text is no UTF-8 (Python orders
/// those).
#[pyfunction]
fn ledger_losses(
    ledger: &Bound<'_, PyAny>,
    calls: Vec<i64>,
) -> PyResult<Option<Vec<(i64, String, i64)>>> {
    let calls: FxHashSet<i64> = calls.into_iter().collect();
    let mut first: FxHashMap<(i64, String), i64> = FxHashMap::default();
    let ledger = match Ledger::of(ledger)? {
        Ledger::Rows(rows) => {
            let py = rows.py();
            let rows = rows.borrow();
            let Some(found) = row_losses(py, &rows, &calls)? else {
                return Ok(None);
            };
            return Ok(Some(
                found
                    .into_iter()
                    .map(|(at, needed, text, _)| (at, text.to_owned(), needed))
                    .collect(),
            ));
        }
        Ledger::List(list) => list,
    };
    for p in ledger.iter() {
        let p = p.cast_into::<PyTuple>()?;
        if *p.get_borrowed_item(5)?.cast::<PyString>()?.to_cow()? == *"kept" {
            continue;
        }
        let at: i64 = p.get_borrowed_item(7)?.extract()?;
        if !calls.contains(&at) {
            continue;
        }
        let text = p.get_borrowed_item(1)?;
        let text = text.cast::<PyString>()?;
        let Some(text) = utf8(&text) else {
            return Ok(None);
        };
        let call: i64 = p.get_borrowed_item(0)?.extract()?;
        first
            .entry((at, text.to_owned()))
            .and_modify(|c| *c = (*c).min(call))
            .or_insert(call);
    }
    Ok(Some(losses_in_order(first)))
}

/// `Recall.losses` of the run's `events` (`CompactionEvent`s): each loss `ledger_losses` finds of
/// `ledger` at an event's call appended to that event's `lost` as `(text, needed)`, in order (the
/// last event of a call, as Python's map of them keeps it). False where Python finds them (a text
/// that is no UTF-8), nothing appended.
#[pyfunction]
fn append_losses(ledger: &Bound<'_, PyAny>, events: &Bound<'_, PyList>) -> PyResult<bool> {
    let py = events.py();
    let mut by_call: FxHashMap<i64, Bound<'_, PyAny>> = FxHashMap::default();
    for event in events.iter() {
        by_call.insert(crate::records::CompactionEvent::call_of(&event)?, event);
    }
    let calls: FxHashSet<i64> = by_call.keys().copied().collect();
    // (a ledger held here: each loss's text the row's own string, not a copy made again)
    let (held, listed);
    let found: Vec<(i64, i64, Bound<'_, PyAny>)> = match Ledger::of(ledger)? {
        Ledger::Rows(rows) => {
            held = rows.borrow();
            let Some(found) = row_losses(py, &held, &calls)? else {
                return Ok(false);
            };
            found
                .into_iter()
                .map(|(at, needed, _, text)| (at, needed, text.bind(py).clone()))
                .collect()
        }
        Ledger::List(_) => {
            let Some(found) = ledger_losses(ledger, calls.into_iter().collect())? else {
                return Ok(false);
            };
            listed = found;
            listed
                .iter()
                .map(|(at, text, needed)| Ok((*at, *needed, PyString::new(py, text).into_any())))
                .collect::<PyResult<_>>()?
        }
    };
    let mut lost: FxHashMap<i64, Bound<'_, PyList>> = FxHashMap::default();
    for (at, needed, text) in found {
        let list = match lost.get(&at) {
            Some(list) => list.clone(),
            None => {
                // (a loss is found only at a call asked: `ledger_losses`)
                let Some(event) = by_call.get(&at) else {
                    continue;
                };
                let list = crate::records::CompactionEvent::lost_of(event)?;
                lost.insert(at, list.clone());
                list
            }
        };
        list.append((text, needed))?;
    }
    Ok(true)
}

/// `ledger_losses` of a ledger held here: each loss `(the call that removed it, the first call that
/// needed it, its text, the row's string of it)`, in `losses_in_order`'s order (a probe lost at
/// many calls one loss); None where a text is no UTF-8.
#[allow(clippy::type_complexity)]
fn row_losses<'a>(
    py: Python<'a>,
    rows: &'a crate::ledger::ProbeLedger,
    calls: &FxHashSet<i64>,
) -> PyResult<Option<Vec<(i64, i64, &'a str, &'a Py<PyAny>)>>> {
    let mut found: FxHashMap<(i64, &str), (i64, &Py<PyAny>)> = FxHashMap::default();
    for r in &rows.rows {
        if r.status == crate::ledger::KEPT || !calls.contains(&r.at) {
            continue;
        }
        let Some(text) = utf8(r.probe[0].bind(py).cast::<PyString>()?) else {
            return Ok(None);
        };
        found
            .entry((r.at, text))
            .and_modify(|c| c.0 = c.0.min(r.call))
            .or_insert((r.call, &r.probe[0]));
    }
    let mut out: Vec<_> = found
        .into_iter()
        .map(|((at, text), (needed, object))| (at, needed, text, object))
        .collect();
    out.sort_unstable_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
    Ok(Some(out))
}

/// `ledger_losses`' found losses in order: by the call that removed each, then the call that first
/// needed it, then its text (a str's order is its code points', which UTF-8's bytes keep).
fn losses_in_order(first: FxHashMap<(i64, String), i64>) -> Vec<(i64, String, i64)> {
    let mut out: Vec<(i64, String, i64)> = first
        .into_iter()
        .map(|((at, text), needed)| (at, text, needed))
        .collect();
    out.sort_unstable_by(|a, b| (a.0, a.2, &a.1).cmp(&(b.0, b.2, &b.1)));
    out
}

/// The runs of a text (`probes.runs`, after its cut and sized placeholders), as a set; None for a
/// text without UTF-8 (the caller's Python reads it).
#[pyfunction]
fn runs<'py>(text: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PySet>>> {
    let Some(s) = utf8(text) else {
        return Ok(None);
    };
    PySet::new(text.py(), strings::runs(s)).map(Some)
}

/// The tokens of a text (`probes.tokens`, after its cut and sized placeholders): the set it
/// decided, and the names beyond ASCII whose being a plain word Python's `str.isalpha` decides;
/// None for a text without UTF-8.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn tokens<'py>(
    text: &Bound<'py, PyString>,
) -> PyResult<Option<(Bound<'py, PySet>, Vec<Bound<'py, PyString>>)>> {
    let Some(s) = utf8(text) else {
        return Ok(None);
    };
    let py = text.py();
    let found = strings::tokens(s);
    let undecided = found
        .undecided
        .iter()
        .map(|t| PyString::new(py, t))
        .collect();
    Ok(Some((PySet::new(py, found.decided)?, undecided)))
}

/// The phrases of a text (`probes.phrases`); None for a text beyond ASCII (the caller's Python reads
/// it: its Unicode rules decide).
#[pyfunction]
fn phrases<'py>(text: &Bound<'py, PyString>) -> PyResult<Option<Vec<Bound<'py, PyString>>>> {
    let Some(s) = utf8(text) else {
        return Ok(None);
    };
    let py = text.py();
    Ok(strings::phrases(s).map(|found| found.into_iter().map(|q| PyString::new(py, q)).collect()))
}

/// The lines a text goes to (`probes.line_refs`); None for a text beyond ASCII (Python's `re`
/// reads it: its Unicode classes decide).
#[pyfunction]
fn line_refs(text: &Bound<'_, PyString>) -> Option<Vec<u32>> {
    strings::line_refs(utf8(text)?)
}

/// The names inside the longer tokens of `strings` (`probes.parts`, its reference), a set; None
/// where a string has no UTF-8 (a lone surrogate: Python splits it).
#[pyfunction]
fn parts<'py>(strings: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PySet>>> {
    let py = strings.py();
    let out = PySet::empty(py)?;
    for s in members::items(strings)? {
        let s = s?;
        let Some(t) = utf8(s.cast::<PyString>()?) else {
            return Ok(None);
        };
        for part in strings::parts(t) {
            out.add(PyString::new(py, part))?;
        }
    }
    Ok(Some(out))
}

/// Where a text shows a framework's own source (`probes.own_frameworks`): the folders of its trees.
#[pyclass(module = "compactlab._native", frozen)]
struct FrameworkSources {
    folders: Vec<String>,
}

#[pymethods]
impl FrameworkSources {
    /// `folders`: the frameworks' top folders, in the order the Python pattern tries them.
    #[new]
    fn new(folders: Vec<String>) -> Self {
        FrameworkSources { folders }
    }

    /// The folders a text's paths go into, match by match; None for a text beyond ASCII.
    fn found(&self, text: &Bound<'_, PyString>) -> Option<Vec<&str>> {
        strings::framework_sources(utf8(text)?, &self.folders)
    }
}

/// A Python string as the index keys it: its UTF-8, or where it has none (a lone surrogate) its
/// `surrogatepass` bytes (`strings::ResultStrings`).
fn key<'a>(s: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
    let s = s.cast::<PyString>()?;
    match s.to_str() {
        Ok(t) => Ok(Cow::Borrowed(t.as_bytes())),
        Err(_) => Ok(Cow::Owned(
            s.call_method1("encode", ("utf-8", "surrogatepass"))?
                .extract::<Vec<u8>>()?,
        )),
    }
}

/// The strings the tool results held (`probes.ResultStrings`, its reference; `strings::ResultStrings`).
#[pyclass(module = "compactlab._native")]
struct ResultStrings {
    inner: strings::ResultStrings,
    /// each result's source, as Python gave it (a result's is its number here)
    sources: Vec<Py<PyAny>>,
}

#[pymethods]
impl ResultStrings {
    /// `wanted`: the strings some reply holds (a set: `probes.wanted_strings`), or None to keep
    /// every string.
    #[new]
    #[pyo3(signature = (wanted=None))]
    fn new(wanted: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let wanted = match wanted {
            None => None,
            Some(strings) => {
                let mut keyed = Vec::new();
                for s in members::items(strings)? {
                    keyed.push(key(&s?)?.into_owned());
                }
                Some(strings::Wanted::of_strings(keyed.iter().map(|s| &s[..])))
            }
        };
        Ok(ResultStrings {
            inner: strings::ResultStrings::new(wanted),
            sources: Vec::new(),
        })
    }

    /// A result's text at `at` from `source`; False where the text has no UTF-8 (then the caller
    /// gives its strings: `add_strings`).
    fn add_result(
        &mut self,
        text: &Bound<'_, PyString>,
        at: strings::Ref,
        source: Py<PyAny>,
    ) -> bool {
        let Ok(text) = text.to_str() else {
            return false;
        };
        let n = self.source(source);
        self.inner.add_result(text, at, n);
        true
    }

    /// A result's strings, found by the caller (the runs of a text without UTF-8).
    fn add_strings(
        &mut self,
        found: &Bound<'_, PyAny>,
        at: strings::Ref,
        source: Py<PyAny>,
    ) -> PyResult<()> {
        let n = self.source(source);
        for s in members::items(found)? {
            let s = s?;
            let k = key(&s)?;
            if let Some(kept) = self.inner.kept_as(&k) {
                let kept: Box<[u8]> = kept.into();
                self.inner.add(kept, at, n);
            }
        }
        Ok(())
    }

    /// Strings seen outside a result (a prompt's; the parts of the agent's own): never probes,
    /// unless a result held them first. `wanted_only`: as the index keeps them (`kept_as`).
    fn not_learnt(&mut self, found: &Bound<'_, PyAny>, wanted_only: bool) -> PyResult<()> {
        for s in members::items(found)? {
            let s = s?;
            let k = key(&s)?;
            let kept: Option<Box<[u8]>> = if wanted_only {
                self.inner.kept_as(&k).map(Box::from)
            } else {
                Some(k.into_owned().into())
            };
            if let Some(kept) = kept {
                self.inner.not_learnt(&kept);
            }
        }
        Ok(())
    }

    fn is_mine(&self, s: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.inner.is_mine(&key(s)?))
    }

    fn add_mine(&mut self, s: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inner.add_mine(&key(s)?);
        Ok(())
    }

    /// `ProbeIndex._reply`'s look at each string of a reply (`found`, a set; the order is not
    /// read): one the agent said first is its own; one no result held becomes its own; one a result
    /// held, neither generic (`known`, `own`: the frameworks whose own source the session showed)
    /// nor in the prompts (`prompts`, `in_prompts` its memo), is a probe, placed where the results
    /// held it and, last, at the latest reply that repeated it (`said`). The probes, in no order;
    /// None, and nothing changed, where a string is not ASCII (Python looks at that reply).
    #[allow(clippy::too_many_arguments)]
    fn reply_probes<'py>(
        &mut self,
        found: &Bound<'py, PySet>,
        own: u64,
        prompts: &Bound<'py, PyString>,
        in_prompts: &Bound<'py, PyDict>,
        said: &Bound<'py, PyDict>,
        known: &Bound<'py, KnownNames>,
    ) -> PyResult<Option<Vec<Bound<'py, PyAny>>>> {
        let py = found.py();
        let mut strings = Vec::with_capacity(found.len());
        for s in found.iter() {
            let s = s.cast_into::<PyString>()?;
            if !s.to_str().is_ok_and(str::is_ascii) {
                return Ok(None);
            }
            strings.push(s);
        }
        let known = known.get();
        let (probe, new_tuple) = (known.probe.bind(py), known.new_tuple.bind(py));
        let mut probes = Vec::new();
        for s in strings {
            let t = s.to_str()?;
            if self.inner.is_mine(t.as_bytes()) {
                continue;
            }
            let Some((first, last, source)) = self.inner.held(t.as_bytes()) else {
                self.inner.add_mine(t.as_bytes());
                continue;
            };
            if known.inner.generic(t, own) != Some(false) {
                continue;
            }
            let prompted = match in_prompts.get_item(&s)? {
                Some(answer) => answer.is_truthy()?,
                None => {
                    let answer = prompts.contains(&s)?;
                    in_prompts.set_item(&s, answer)?;
                    answer
                }
            };
            if prompted {
                continue;
            }
            let mut place: Vec<Bound<'py, PyAny>> = vec![first.into_pyobject(py)?.into_any()];
            if last != first {
                place.push(last.into_pyobject(py)?.into_any());
            }
            if let Some(at) = said.get_item(&s)? {
                place.push(
                    PyTuple::new(py, [at, (-1i64).into_pyobject(py)?.into_any()])?.into_any(),
                );
            }
            let source = self.sources[source as usize].bind(py);
            let fields = PyTuple::new(
                py,
                [
                    s.clone().into_any(),
                    PyTuple::new(py, place)?.into_any(),
                    source.get_item(0)?,
                    source.get_item(1)?,
                    PyString::new(py, strings::kind(t)).into_any(),
                ],
            )?;
            probes.push(new_tuple.call1((probe, fields))?);
        }
        Ok(Some(probes))
    }

    /// Where the results held `s` (its first result and the latest, one where they are the same)
    /// and the first one's source; None if none did.
    fn held<'py>(
        &self,
        py: Python<'py>,
        s: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let Some((first, last, source)) = self.inner.held(&key(s)?) else {
            return Ok(None);
        };
        let place = if first == last {
            PyTuple::new(py, [first])?
        } else {
            PyTuple::new(py, [first, last])?
        };
        PyTuple::new(
            py,
            [
                place.into_any(),
                self.sources[source as usize].bind(py).clone(),
            ],
        )
        .map(Some)
    }
}

/// `tuple.__new__`: a named tuple made of a tuple of its fields, without its Python `__new__` (as
/// `probes._new` makes one).
pub(crate) fn tuple_new(py: Python<'_>) -> PyResult<Py<PyAny>> {
    Ok(py
        .get_type::<PyTuple>()
        .getattr(intern!(py, "__new__"))?
        .unbind())
}

/// Names known without reading a result (`strings::Known`; `probes.generic` is its reference), with
/// the `Probe` class the index makes its probes of.
#[pyclass(module = "compactlab._native", frozen)]
struct KnownNames {
    inner: strings::Known,
    /// `Probe`, made of a tuple of its fields by `tuple.__new__`
    probe: Py<PyAny>,
    new_tuple: Py<PyAny>,
}

#[pymethods]
impl KnownNames {
    /// `standard` (`GENERIC`), `other_names`, `receivers` and `other_modules`: sets of names;
    /// `vocabulary`: the vocabulary's lines (`name<TAB>mask`).
    #[new]
    fn new(
        py: Python<'_>,
        standard: &Bound<'_, PyAny>,
        other_names: &Bound<'_, PyAny>,
        receivers: &Bound<'_, PyAny>,
        other_modules: &Bound<'_, PyAny>,
        vocabulary: &str,
        probe: Py<PyAny>,
    ) -> PyResult<Self> {
        let set = |names: &Bound<'_, PyAny>| -> PyResult<FxHashSet<Box<str>>> {
            let mut out = FxHashSet::default();
            for name in members::items(names)? {
                out.insert(name?.extract::<String>()?.into());
            }
            Ok(out)
        };
        let names = strings::Known::names_of(vocabulary).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(
                "the vocabulary has a mask that is not a number",
            )
        })?;
        Ok(KnownNames {
            inner: strings::Known {
                standard: set(standard)?,
                other_names: set(other_names)?,
                receivers: set(receivers)?,
                other_modules: set(other_modules)?,
                names,
            },
            probe,
            new_tuple: tuple_new(py)?,
        })
    }

    /// `probes.generic(t, own)` of an ASCII name; None for another (Python judges it).
    fn generic(&self, t: &str, own: u64) -> Option<bool> {
        self.inner.generic(t, own)
    }
}

impl ResultStrings {
    fn source(&mut self, source: Py<PyAny>) -> u32 {
        self.sources.push(source);
        (self.sources.len() - 1) as u32
    }
}

/// The numbers of the two roles (interned first, in this order, by `InvariantTracker::new`).
const USER: violations::Id = 0;
const ASSISTANT: violations::Id = 1;

/// The API's tool-pairing rules checked incrementally (`violations.InvariantTracker`, its reference;
/// `violations::Tracker`): shown each context the loop sends (a list of `Entry`), it keeps them
/// alive, knows each one's facts by its identity, and lists or counts the context's violations.
#[pyclass(module = "compactlab._native")]
pub(crate) struct InvariantTracker {
    pub(crate) inner: violations::Tracker,
    /// the context's messages, held while it holds them (their identity is their key: no other
    /// message takes the address of one held)
    objects: Vec<Py<PyAny>>,
    /// the strings it numbers where it has no `shared` table (then it is empty)
    names: Names,
    /// what the trackers of the runs of one recording know of its own messages (`KnownFacts`:
    /// their facts, and the numbers of the strings in them, which this tracker then uses)
    shared: Option<Py<KnownFacts>>,
    /// the Python `Violation` a listing is made of
    violation: Py<PyAny>,
    /// the placeholder of the messages a stream freed, kept with its slot
    freed: Option<(Py<PyAny>, violations::Slot)>,
    /// the copies made since it was last shown a context whose facts are their original's (a
    /// result's content replaced: `alias`), by identity, each held with its original until then
    aliases: FxHashMap<usize, (Py<PyAny>, Py<PyAny>)>,
    /// how many messages' facts it took from their originals
    aliased: u64,
}

/// The strings a tracker numbers (a tool id, a role): the numbers, found by the hash of the
/// string's key (`key`) and told apart by the strings themselves, which `names` holds (no copy of
/// them). The roles come first, in the order of `USER` and `ASSISTANT`.
struct Names {
    ids: HashTable<violations::Id>,
    names: Vec<Py<PyAny>>,
}

impl Names {
    fn new(py: Python<'_>) -> PyResult<Self> {
        let mut names = Names {
            ids: HashTable::new(),
            names: Vec::new(),
        };
        for role in ["user", "assistant"] {
            names.intern(PyString::new(py, role).as_any())?;
        }
        Ok(names)
    }

    /// The number of `s` (a string, or None: `NONE`). No Python code runs: a string's key is its
    /// UTF-8, or its `surrogatepass` bytes, made in C.
    fn intern(&mut self, s: &Bound<'_, PyAny>) -> PyResult<violations::Id> {
        if s.is_none() {
            return Ok(violations::NONE);
        }
        let py = s.py();
        let k = key(s)?;
        let hash = FxBuildHasher.hash_one(&*k);
        let (ids, names) = (&mut self.ids, &mut self.names);
        // (a string interned has a key: `key` read it when it came)
        let key_of = |id: violations::Id| key(names[id as usize].bind(py)).ok();
        if let Some(&id) = ids.find(hash, |&id| key_of(id).is_some_and(|n| *n == *k)) {
            return Ok(id);
        }
        let id = names.len() as violations::Id;
        names.push(s.clone().unbind());
        let names = &*names;
        ids.insert_unique(hash, id, |&id| {
            FxBuildHasher.hash_one(&*key(names[id as usize].bind(py)).unwrap_or_default())
        });
        Ok(id)
    }

    fn name(&self, py: Python<'_>, id: violations::Id) -> Py<PyAny> {
        if id == violations::NONE {
            py.None()
        } else {
            self.names[id as usize].clone_ref(py)
        }
    }
}

/// The facts of messages, by their identity, each message held with them.
type FactsKnown = FxHashMap<usize, (Py<PyAny>, Arc<violations::Facts>)>;

/// What the violations' trackers of the runs of one recording know of its own messages
/// (`violations.shared_facts`): each message no layer changed is the same object in every run,
/// its facts read once rather than once a run; the strings in them numbered once, in one table
/// every such tracker numbers by. Known by identity, kept alive as long as this is (so an identity
/// is never another message's).
///
/// A stream's (`KnownFacts(stream=True)`, `baseline.stream_baseline`) knows no message by identity
/// (a stream lets go of them): its raw baseline's tracker numbers by its table, and hands the facts
/// it read of each message to the run's tracker (`Handed`), which takes each as the message reaches
/// it instead of reading them again.
#[pyclass(module = "compactlab._native", frozen)]
pub(crate) struct KnownFacts {
    /// (a run's tracker asks between calls into Python, where another thread's run may ask too;
    /// held only while no Python code runs: what a panic left is whole, each write one insert)
    known: Mutex<(Names, FactsKnown)>,
    /// a stream's: the facts its baseline read, waiting for its run's tracker (None: a recording's)
    handed: Option<Mutex<Handed>>,
}

/// The facts a stream's baseline read of its messages (`KnownFacts::hand`), in the order it read
/// them, waiting for the run's tracker (`KnownFacts::take`), each held with its message (so that no
/// other message takes its address while it waits). A message the run's tracker never asks for (one
/// a layer replaced before a call) is let go when a later one is taken; at most `HANDED_MAX` wait
/// (the oldest let go first), so a run that takes none holds no more than that.
#[derive(Default)]
struct Handed {
    waiting: VecDeque<(u64, Py<PyAny>, Arc<violations::Facts>)>,
    /// a waiting message's number in `waiting`, by its identity
    at: FxHashMap<usize, u64>,
    next: u64,
    /// whether a run's tracker takes them (until one is made, none is handed)
    taker: bool,
    /// how many it took
    took: u64,
}

/// The most facts that wait for a stream's run (`Handed`): its read batch is a few hundred messages.
const HANDED_MAX: usize = 4096;

impl KnownFacts {
    fn table(&self) -> MutexGuard<'_, (Names, FactsKnown)> {
        self.known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether it is a stream's (its messages handed over, none known by identity).
    fn streamed(&self) -> bool {
        self.handed.is_some()
    }

    fn handed(&self) -> Option<MutexGuard<'_, Handed>> {
        self.handed
            .as_ref()
            .map(|h| h.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// A run's tracker takes what a stream's baseline hands over, from now on.
    fn start_taking(&self) {
        if let Some(mut h) = self.handed() {
            h.taker = true;
        }
    }

    /// The facts a stream's baseline read of `entry`, handed to its run's tracker (where one
    /// takes them). What it lets go is dropped once no lock is held (a message's release may run
    /// Python code).
    fn hand(&self, entry: &Bound<'_, PyAny>, facts: &Arc<violations::Facts>) {
        let gone = {
            let Some(mut h) = self.handed() else {
                return;
            };
            let key = entry.as_ptr() as usize;
            if !h.taker || h.at.contains_key(&key) {
                return;
            }
            let gone = if h.waiting.len() >= HANDED_MAX {
                h.waiting.pop_front()
            } else {
                None
            };
            if let Some((_, old, _)) = &gone {
                h.at.remove(&(old.as_ptr() as usize));
            }
            let n = h.next;
            h.next += 1;
            h.at.insert(key, n);
            h.waiting
                .push_back((n, entry.clone().unbind(), facts.clone()));
            gone
        };
        drop(gone);
    }

    /// The facts handed over of the message whose identity is `key` (None: none wait for it),
    /// and those of the messages handed before it let go.
    fn take(&self, key: usize) -> Option<Arc<violations::Facts>> {
        let mut gone = Vec::new();
        let found = {
            let mut h = self.handed()?;
            let n = h.at.remove(&key)?;
            let mut found = None;
            while let Some((m, entry, facts)) = h.waiting.pop_front() {
                if m == n {
                    h.took += 1;
                    found = Some(facts);
                    gone.push(entry);
                    break;
                }
                h.at.remove(&(entry.as_ptr() as usize));
                gone.push(entry);
            }
            found
        };
        drop(gone);
        found
    }
}

#[pymethods]
impl KnownFacts {
    /// `stream`: a stream's (its baseline's facts handed to its run's tracker).
    #[new]
    #[pyo3(signature = (stream=false))]
    fn new(py: Python<'_>, stream: bool) -> PyResult<Self> {
        Ok(KnownFacts {
            known: Mutex::new((Names::new(py)?, FxHashMap::default())),
            handed: stream.then(|| Mutex::new(Handed::default())),
        })
    }

    /// How many messages it knows (a stream's: how many facts wait for its run's tracker).
    fn __len__(&self) -> usize {
        match self.handed() {
            Some(h) => h.waiting.len(),
            None => self.table().1.len(),
        }
    }

    /// A stream's: how many facts its run's tracker took (0: a recording's).
    #[getter]
    fn taken(&self) -> u64 {
        self.handed().map_or(0, |h| h.took)
    }

    /// The most facts that wait for a stream's run (the oldest are let go past it).
    #[classattr]
    const MOST_WAITING: usize = HANDED_MAX;
}

/// The messages a tracker saw from a position on, each by its identity and with its facts: a few
/// (a call's tail, most often) looked through in turn, more by a map made of them.
enum SeenFrom {
    Few(Vec<(usize, Arc<violations::Facts>)>),
    Many(FxHashMap<usize, Arc<violations::Facts>>),
}

impl SeenFrom {
    /// How many a map is made for.
    const MANY: usize = 32;

    fn of(slots: &[violations::Slot]) -> Self {
        let pairs = slots.iter().map(|s| (s.key, s.facts.clone()));
        if slots.len() <= Self::MANY {
            SeenFrom::Few(pairs.collect())
        } else {
            SeenFrom::Many(pairs.collect())
        }
    }

    fn get(&self, key: usize) -> Option<Arc<violations::Facts>> {
        match self {
            // (the last of a key, as the map keeps it)
            SeenFrom::Few(pairs) => pairs
                .iter()
                .rev()
                .find(|(k, _)| *k == key)
                .map(|(_, f)| f.clone()),
            SeenFrom::Many(map) => map.get(&key).cloned(),
        }
    }
}

/// A message's facts as read from it, its strings not yet numbered.
struct ReadFacts<'py> {
    origin: i64,
    role: Bound<'py, PyAny>,
    uses: Vec<Bound<'py, PyAny>>,
    results: Vec<Bound<'py, PyAny>>,
    misplaced: Vec<Bound<'py, PyAny>>,
    empty: bool,
}

#[pymethods]
impl InvariantTracker {
    /// `shared`: what the trackers of the runs of its recording know (`KnownFacts`), or None.
    /// A run's tracker takes the facts a stream's baseline hands over (`KnownFacts::hand`).
    #[new]
    #[pyo3(signature = (violation, shared=None))]
    fn new(py: Python<'_>, violation: Py<PyAny>, shared: Option<Py<KnownFacts>>) -> PyResult<Self> {
        if let Some(shared) = &shared {
            shared.get().start_taking();
        }
        Self::numbering(py, violation, shared)
    }

    /// Show it `entries` (a context), whose first `dirty_from` messages it has seen before.
    pub(crate) fn update(
        &mut self,
        entries: &Bound<'_, PyList>,
        dirty_from: usize,
    ) -> PyResult<()> {
        let n_new = entries.len();
        let d0 = self.inner.start(dirty_from, n_new);
        // the messages it saw from there on, by identity: a layer keeps most of them (a snip's
        // tail), whose facts are not read again (a context that only grew has none)
        let seen = SeenFrom::of(&self.inner.entries[d0..]);
        let mut tail = Vec::with_capacity(n_new - d0);
        let mut held = Vec::with_capacity(n_new - d0);
        for i in d0..n_new {
            let entry = entries.get_item(i)?;
            let key = entry.as_ptr() as usize;
            let facts = match seen.get(key) {
                Some(facts) => facts,
                None => self.facts_of(&entry, &seen)?,
            };
            tail.push(violations::Slot { key, facts });
            held.push(entry.unbind());
        }
        self.inner.update(d0, tail);
        self.objects.truncate(d0);
        self.objects.extend(held);
        self.aliases.clear();
        Ok(())
    }

    /// `copy`, made since it was last shown a context, has the facts of `original` (a result's
    /// content replaced, nothing else: micro's copies): where it is shown it next, they are taken
    /// from `original` (one it was shown, or read from it), not read.
    pub(crate) fn alias(&mut self, copy: &Bound<'_, PyAny>, original: &Bound<'_, PyAny>) {
        self.aliases.insert(
            copy.as_ptr() as usize,
            (copy.clone().unbind(), original.clone().unbind()),
        );
    }

    /// `ViolationLog.record`'s work on the context it was last shown (`log`): each violation
    /// classed against `raw` and logged once into `seen`; (introduced, inherited).
    #[pyo3(name = "log", signature = (call, raw, seen))]
    fn log_py(
        &self,
        py: Python<'_>,
        call: i64,
        raw: Option<Bound<'_, PyDict>>,
        seen: Bound<'_, PyDict>,
    ) -> PyResult<(i64, i64)> {
        self.log(py, call, raw.as_ref(), &seen)
    }

    /// How many messages' facts it took from their originals (`alias`), not read.
    #[getter]
    fn aliased(&self) -> u64 {
        self.aliased
    }

    /// The stream's messages from `start` to `stop` it no longer needs: `freed` in their place.
    fn free(&mut self, start: usize, stop: usize, freed: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = freed.as_ptr() as usize;
        let slot = match &self.freed {
            // (the same placeholder each time: its facts read once, shared by every slot it fills)
            Some((same, slot)) if same.as_ptr() as usize == key => slot.clone(),
            _ => {
                let slot = violations::Slot {
                    key,
                    facts: self.facts(freed)?,
                };
                self.freed = Some((freed.clone().unbind(), slot.clone()));
                slot
            }
        };
        self.inner.free(start, stop, &slot);
        let stop = stop.min(self.objects.len());
        for o in &mut self.objects[start.min(stop)..stop] {
            *o = freed.clone().unbind();
        }
        Ok(())
    }

    /// How many violations the context has.
    #[getter]
    fn total(&self) -> i64 {
        self.inner.total()
    }

    /// The multiset of (kind, tool id) of its violations, as a dict.
    fn counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for ((kind, id), n) in self.inner.counts() {
            out.set_item((kind.name(), self.name(py, id)), n)?;
        }
        Ok(out)
    }

    /// Every violation (`Violation`s), by position and kind.
    fn violations<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let make = self.violation.bind(py);
        self.inner
            .violations()
            .into_iter()
            .map(|v| {
                make.call1((
                    v.kind.name(),
                    v.position,
                    self.name(py, v.tool_id),
                    v.origin,
                ))
            })
            .collect()
    }
}

impl InvariantTracker {
    /// `ViolationLog.record` of the context it was last shown (`violations.py`, the reference):
    /// each violation classed introduced or inherited against `raw`, the raw context's counts by
    /// (kind, tool id) (a `Counter`; None: none) — the first so many of a kind and id inherited,
    /// the rest introduced, as `classify` has it — and each logged once into `seen` (the log's
    /// table), at the first call that has it; (introduced, inherited).
    pub(crate) fn log(
        &self,
        py: Python<'_>,
        call: i64,
        raw: Option<&Bound<'_, PyDict>>,
        seen: &Bound<'_, PyDict>,
    ) -> PyResult<(i64, i64)> {
        let (mut introduced, mut inherited) = (0, 0);
        // per (kind, tool id): how many so far, and how many the raw context has
        let mut counted: FxHashMap<(u8, violations::Id), (i64, i64)> = FxHashMap::default();
        for v in self.inner.violations() {
            let (kind, name) = (v.kind.name(), self.name(py, v.tool_id));
            let n = match counted.get_mut(&(v.kind as u8, v.tool_id)) {
                Some(n) => n,
                None => {
                    let in_raw = match raw {
                        Some(raw) => match raw.get_item((kind, &name))? {
                            Some(n) => n.extract::<i64>()?,
                            None => 0,
                        },
                        None => 0,
                    };
                    counted
                        .entry((v.kind as u8, v.tool_id))
                        .or_insert((0, in_raw))
                }
            };
            n.0 += 1;
            let is_new = n.0 > n.1;
            if is_new {
                introduced += 1;
            } else {
                inherited += 1;
            }
            let key = (kind, &name, v.origin, is_new).into_pyobject(py)?;
            if !seen.contains(&key)? {
                let logged = PyDict::new(py);
                logged.set_item(intern!(py, "kind"), kind)?;
                logged.set_item(intern!(py, "call"), call)?;
                logged.set_item(intern!(py, "message_index"), v.position)?;
                logged.set_item(intern!(py, "tool_use_id"), &name)?;
                logged.set_item(intern!(py, "introduced"), is_new)?;
                seen.set_item(key, logged)?;
            }
        }
        Ok((introduced, inherited))
    }

    /// A tracker numbering its strings by `shared`'s table (its own where None).
    fn numbering(
        py: Python<'_>,
        violation: Py<PyAny>,
        shared: Option<Py<KnownFacts>>,
    ) -> PyResult<Self> {
        Ok(InvariantTracker {
            inner: violations::Tracker::new(violations::Roles {
                user: USER,
                assistant: ASSISTANT,
            }),
            objects: Vec::new(),
            // (a tracker that numbers by the shared table has none of its own: nothing made)
            names: match shared {
                Some(_) => Names {
                    ids: HashTable::new(),
                    names: Vec::new(),
                },
                None => Names::new(py)?,
            },
            shared,
            violation,
            freed: None,
            aliases: FxHashMap::default(),
            aliased: 0,
        })
    }

    /// The facts of `entry`, which it has not seen among the context's messages from where it
    /// changed (`seen`): its original's where it is a copy made since (`alias`), else its own.
    fn facts_of(
        &mut self,
        entry: &Bound<'_, PyAny>,
        seen: &SeenFrom,
    ) -> PyResult<Arc<violations::Facts>> {
        let py = entry.py();
        let mut at = entry.clone();
        // (a copy of a copy: followed to the first one it has seen, or read from the last)
        while let Some((_, original)) = self.aliases.get(&(at.as_ptr() as usize)) {
            let original = original.bind(py).clone();
            if let Some(facts) = seen.get(original.as_ptr() as usize) {
                self.aliased += 1;
                return Ok(facts);
            }
            at = original;
        }
        if !at.is(entry) {
            self.aliased += 1;
        }
        self.facts(&at)
    }

    /// Its message at `pos` let go (`violations::Tracker::release`): `freed` held in its place.
    pub(crate) fn release(&mut self, pos: usize, freed: &Bound<'_, PyAny>) {
        self.inner.release(pos);
        if let Some(o) = self.objects.get_mut(pos) {
            *o = freed.clone().unbind();
        }
    }

    /// The number of `s` in the table it numbers by.
    fn intern(&mut self, s: &Bound<'_, PyAny>) -> PyResult<violations::Id> {
        match &self.shared {
            Some(shared) => shared.get().table().0.intern(s),
            None => self.names.intern(s),
        }
    }

    fn ids_of(&mut self, values: Bound<'_, PyAny>) -> PyResult<Vec<violations::Id>> {
        members::items(&values)?.map(|v| self.intern(&v?)).collect()
    }

    fn name(&self, py: Python<'_>, id: violations::Id) -> Py<PyAny> {
        match &self.shared {
            Some(shared) => shared.get().table().0.name(py, id),
            None => self.names.name(py, id),
        }
    }

    /// A message's facts: those its recording's runs know (`shared`), or its stream's baseline
    /// handed over, else read from it, and then known to a recording's runs where it is one of
    /// the recording's own, unchanged.
    fn facts(&mut self, entry: &Bound<'_, PyAny>) -> PyResult<Arc<violations::Facts>> {
        let py = entry.py();
        let key = entry.as_ptr() as usize;
        if let Some(shared) = &self.shared {
            let known = shared.get();
            let found = match known.streamed() {
                true => known.take(key),
                false => known.table().1.get(&key).map(|(_, facts)| facts.clone()),
            };
            if let Some(facts) = found {
                return Ok(facts);
            }
        }
        // (read first: Python may run in a getattr, and no lock is held while it does)
        let origin: i64 = members::fact(entry, Fact::Origin)?.extract()?;
        let results = members::fact(entry, Fact::Results)?;
        let read = ReadFacts {
            origin,
            role: members::fact(entry, Fact::Role)?,
            uses: members::items(&members::fact(entry, Fact::ToolUseIds)?)?
                .collect::<PyResult<_>>()?,
            results: if results.cast::<PyTuple>().is_ok_and(|t| t.is_empty()) {
                Vec::new()
            } else {
                let mut ids = Vec::new();
                for fact in members::items(&results)? {
                    ids.push(fact?.getattr(intern!(py, "tool_use_id"))?);
                }
                ids
            },
            misplaced: members::items(&entry.getattr(intern!(py, "misplaced_results"))?)?
                .collect::<PyResult<_>>()?,
            empty: entry.getattr(intern!(py, "empty"))?.is_truthy()?,
        };
        let own = origin >= 0
            && self.shared.as_ref().is_some_and(|s| !s.get().streamed())
            && members::fact(entry, Fact::Changed)?.len()? == 0;
        match &self.shared {
            Some(shared) => {
                let mut table = shared.get().table();
                let facts = Arc::new(Self::numbered(&mut table.0, &read)?);
                if own {
                    table.1.insert(key, (entry.clone().unbind(), facts.clone()));
                }
                Ok(facts)
            }
            None => Ok(Arc::new(Self::numbered(&mut self.names, &read)?)),
        }
    }

    /// The facts read, their strings numbered in `names`.
    fn numbered(names: &mut Names, read: &ReadFacts<'_>) -> PyResult<violations::Facts> {
        let mut ids = |values: &[Bound<'_, PyAny>]| -> PyResult<Vec<violations::Id>> {
            values.iter().map(|v| names.intern(v)).collect()
        };
        let (uses, results, misplaced) =
            (ids(&read.uses)?, ids(&read.results)?, ids(&read.misplaced)?);
        Ok(violations::Facts::new(
            read.origin,
            names.intern(&read.role)?,
            uses,
            results,
            misplaced,
            read.empty,
        ))
    }
}

/// The raw baseline of a stream whose probes are not looked for (`baseline.BaselineBuilder` with
/// `keep=False` and no probes, its reference): shown every message in order, it writes each call's
/// row into the `RawBaseline`'s own lists and dicts (the messages before the call, their compact
/// JSON length, the violations of that history, the earlier tool results its tool inputs refer
/// to), the violations counted by the tracker's rules on facts it reads once a message. No message
/// is held: a stream lets go of them; one given `first_seen` (a loaded transcript's) keeps their
/// facts and writes each violation there at the first call that has it.
#[pyclass(module = "compactlab._native")]
struct StreamBaseline {
    tracker: InvariantTracker,
    /// the facts of the messages added since the last call (each keyed by its position)
    fresh: Vec<violations::Slot>,
    added: usize,
    /// messages the tracker has been shown; those before `freed_upto` stand as `freed`
    seen: usize,
    freed_upto: usize,
    freed: violations::Slot,
    chars: i64,
    /// a tool_use id -> the files its input names; a file -> its latest tool result (each string
    /// by its number in the tracker's table, which holds the string itself: no copy)
    files_of: FxHashMap<violations::Id, Vec<violations::Id>>,
    latest: FxHashMap<violations::Id, (usize, i64)>,
    messages: Py<PyList>,
    sizes: Py<PyList>,
    counts: Py<PyDict>,
    refs: Py<PyDict>,
    counter: Py<PyAny>,
    /// where each violation is written at its first call; None: a stream's (none written)
    first_seen: Option<FirstSeen>,
}

/// `RawBaseline.first_seen` (`(call, Violation)` each, in the order the tracker lists them) and the
/// violations written there (kind, tool id, origin).
type FirstSeen = (
    Py<PyList>,
    FxHashSet<(violations::Kind, violations::Id, i64)>,
);

#[pymethods]
impl StreamBaseline {
    #[new]
    /// `handed`: a stream's `KnownFacts` (`stream=True`), whose table its tracker numbers by and to
    /// which it hands the facts it reads of each message, for the run's tracker.
    #[pyo3(signature = (violation, freed, messages, sizes, counts, refs, counter, first_seen=None, handed=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        violation: Py<PyAny>,
        freed: &Bound<'_, PyAny>,
        messages: Py<PyList>,
        sizes: Py<PyList>,
        counts: Py<PyDict>,
        refs: Py<PyDict>,
        counter: Py<PyAny>,
        first_seen: Option<Py<PyList>>,
        handed: Option<Py<KnownFacts>>,
    ) -> PyResult<Self> {
        if handed.as_ref().is_some_and(|h| !h.get().streamed()) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "handed: a stream's KnownFacts (stream=True)",
            ));
        }
        let mut tracker = InvariantTracker::numbering(freed.py(), violation, handed)?;
        let freed = violations::Slot {
            key: usize::MAX,
            facts: tracker.facts(freed)?,
        };
        Ok(StreamBaseline {
            tracker,
            fresh: Vec::new(),
            added: 0,
            seen: 0,
            freed_upto: 0,
            freed,
            chars: 0,
            files_of: FxHashMap::default(),
            latest: FxHashMap::default(),
            messages,
            sizes,
            counts,
            refs,
            counter,
            first_seen: first_seen.map(|list| (list, FxHashSet::default())),
        })
    }

    /// The next message: at a reply (a call), the call's row first, from the messages before it.
    fn add(&mut self, entry: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = entry.py();
        let facts = self.tracker.facts(entry)?;
        self.hand(entry, &facts);
        let mut seen = Seen {
            chars: members::fact(entry, Fact::Chars)?.extract()?,
            results: Vec::new(),
            uses: Vec::new(),
        };
        if facts.role == ASSISTANT {
            let uses = members::fact(entry, Fact::ToolUseIds)?;
            if uses.is_truthy()? {
                let files = entry.getattr(intern!(py, "use_files"))?;
                for (id, names) in members::items(&uses)?.zip(members::items(&files)?) {
                    let id = self.tracker.intern(&id?)?;
                    let names = members::items(&names?)?
                        .map(|name| self.tracker.intern(&name?))
                        .collect::<PyResult<Vec<violations::Id>>>()?;
                    seen.uses.push((id, names));
                }
            }
        } else if !self.files_of.is_empty() {
            for fact in members::items(&members::fact(entry, Fact::Results)?)? {
                let fact = fact?;
                let id = self
                    .tracker
                    .intern(&fact.getattr(intern!(py, "tool_use_id"))?)?;
                seen.results
                    .push((id, fact.getattr(intern!(py, "block"))?.extract()?));
            }
        }
        self.add_message(py, facts, seen)
    }
}

/// What the raw baseline reads of a message besides its tracker's facts: its size, its tool
/// results' (id, block) (a user message's, where a tool input named a file), its tool uses' (id,
/// files) (a reply's).
struct Seen {
    chars: i64,
    results: Vec<(violations::Id, i64)>,
    uses: Vec<(violations::Id, Vec<violations::Id>)>,
}

impl StreamBaseline {
    /// The facts read of `entry`, handed to the run's tracker (where it was given a stream's
    /// `KnownFacts`).
    fn hand(&self, entry: &Bound<'_, PyAny>, facts: &Arc<violations::Facts>) {
        if let Some(known) = &self.tracker.shared {
            known.get().hand(entry, facts);
        }
    }

    /// A message read natively (`LineFacts.entries`), `entry`: as `add` of it, from its facts and
    /// the Python objects of its entry's arguments (`LineFacts::entry_args`: their strings are the
    /// ones interned, no copy made).
    fn add_read(
        &mut self,
        entry: &Bound<'_, PyAny>,
        f: &facts::Facts,
        origin: i64,
        args: &[Bound<'_, PyAny>],
    ) -> PyResult<()> {
        let py = args[0].py();
        let t = &mut self.tracker;
        let role = match f.role {
            facts::Role::User => USER,
            facts::Role::Assistant => ASSISTANT,
        };
        // (the facts say which of the entry's tuples hold any string: most hold none)
        let strings = |t: &mut InvariantTracker, i: usize, any: bool| match any {
            true => t.ids_of(args[i].clone()),
            false => Ok(Vec::new()),
        };
        let uses = strings(t, 3, !f.uses.is_empty())?;
        let mut results = Vec::with_capacity(f.results.len());
        if !f.results.is_empty() {
            for fact in args[6].cast::<PyTuple>()?.iter() {
                results.push(t.intern(&fact.get_item(1)?)?);
            }
        }
        let misplaced = strings(t, 7, !f.misplaced.is_empty())?;
        let mut seen = Seen {
            chars: f.chars as i64,
            results: Vec::new(),
            uses: Vec::new(),
        };
        if role == ASSISTANT {
            if !uses.is_empty() {
                for (names, &id) in args[5].cast::<PyTuple>()?.iter().zip(&uses) {
                    seen.uses.push((id, t.ids_of(names)?));
                }
            }
        } else if !self.files_of.is_empty() {
            seen.results = f
                .results
                .iter()
                .zip(&results)
                .map(|(r, &id)| (id, r.block as i64))
                .collect();
        }
        let facts = Arc::new(violations::Facts::new(
            origin, role, uses, results, misplaced, f.empty,
        ));
        self.hand(entry, &facts);
        self.add_message(py, facts, seen)
    }

    fn add_message(
        &mut self,
        py: Python<'_>,
        facts: Arc<violations::Facts>,
        seen: Seen,
    ) -> PyResult<()> {
        let pos = self.added;
        if facts.role == ASSISTANT {
            self.call(py, pos, seen.uses)?;
        } else {
            for (id, block) in seen.results {
                if let Some(names) = self.files_of.get(&id) {
                    for &name in names {
                        self.latest.insert(name, (pos, block));
                    }
                }
            }
        }
        self.fresh.push(violations::Slot { key: pos, facts });
        self.added += 1;
        self.chars += seen.chars;
        Ok(())
    }

    fn call(
        &mut self,
        py: Python<'_>,
        pos: usize,
        uses: Vec<(violations::Id, Vec<violations::Id>)>,
    ) -> PyResult<()> {
        let tracker = &mut self.tracker.inner;
        let fresh = std::mem::take(&mut self.fresh);
        let d0 = tracker.start(self.seen, self.seen + fresh.len());
        tracker.update(d0, fresh);
        if pos >= 2 && pos - 2 > self.freed_upto && self.first_seen.is_none() {
            tracker.free(self.freed_upto, pos - 2, &self.freed);
            self.freed_upto = pos - 2;
        }
        self.seen = pos;
        let messages = self.messages.bind(py);
        let call = messages.len();
        messages.append(pos)?;
        let n = pos as i64;
        self.sizes
            .bind(py)
            .append(self.chars + (n - 1).max(0) + 2)?;
        if self.tracker.inner.total() != 0 {
            let counts = self.counter.bind(py).call1((self.tracker.counts(py)?,))?;
            self.counts.bind(py).set_item(call, counts)?;
            if let Some((list, written)) = &mut self.first_seen {
                let (list, make) = (list.bind(py), self.tracker.violation.bind(py));
                for v in self.tracker.inner.violations() {
                    if written.insert((v.kind, v.tool_id, v.origin)) {
                        let name = self.tracker.name(py, v.tool_id);
                        let violation = make.call1((v.kind.name(), v.position, name, v.origin))?;
                        list.append((call, violation))?;
                    }
                }
            }
        }
        let mut found = Vec::new();
        for (id, names) in uses {
            for name in &names {
                if let Some(&at) = self.latest.get(name) {
                    found.push(at);
                }
            }
            self.files_of.insert(id, names);
        }
        if !found.is_empty() {
            self.refs.bind(py).set_item(call, found)?;
        }
        Ok(())
    }
}

/// Recall's check of each context sent (`probes.check` is its reference; `recall::Check`): each
/// probe kept where a result that held it stands, kept elsewhere in what is sent, or not kept — then
/// recoverable or lost, put down to the layer that removed it (`recall::Check::attribute`) — its
/// outcome written to the run's ledger. Messages are known by identity, kept alive with their texts.
#[pyclass(module = "compactlab._native")]
pub(crate) struct RecallCheck {
    check: recall::Check,
    /// the messages of the last context checked
    last: Vec<Arc<recall::Msg>>,
    known: FxHashMap<usize, (Py<PyAny>, Arc<recall::Msg>)>,
    /// the recording's own messages (no layer changed them), known for every run of it where
    /// the run was given its recording's (`KnownMessages`)
    shared: Option<Py<KnownMessages>>,
    /// the recording's micro replacements its runs share (`keeping.shared_replacements`, given by
    /// the run's native loop: `share_replacements`): a replacement it holds is the same object at
    /// every run, so it is known for every run too
    replaced: Option<Py<PyDict>>,
    /// the Python functions that make a message's texts: whole, edited, a result's; and a probe's
    /// text as JSON writes it
    whole: Py<PyAny>,
    edited: Py<PyAny>,
    result: Py<PyAny>,
    escaped: Py<PyAny>,
    /// how a `ProbeOutcome` is made (for a ledger that is a list)
    outcomes: Outcomes,
    /// the texts it makes itself (a plain `Entry`'s, and those of a message left in its file)
    texts_here: NativeTexts,
    /// the names of the layers a probe not kept is put down to, as the ledger's rows hold them: a
    /// string a name, made once a run (interning one again, for each row, cost more than the row)
    layer_names: FxHashMap<String, Py<PyString>>,
}

/// `compactlab.transcripts.messages.ResultFact`, a tool result's facts (a named tuple whose first
/// item is its block), looked up once.
fn result_fact(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static CLASS: pyo3::sync::PyOnceLock<Py<PyType>> = pyo3::sync::PyOnceLock::new();
    CLASS
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(
                py.import("compactlab.transcripts.messages")?
                    .getattr("ResultFact")?
                    .cast_into::<PyType>()?
                    .unbind(),
            )
        })
        .map(|class| class.bind(py))
}

/// The texts of the messages of a context, made by the Python functions the check was given.
struct PyTexts<'a, 'py> {
    entries: &'a Bound<'py, PyList>,
    owner: &'a RecallCheck,
}

impl<'py> PyTexts<'_, 'py> {
    /// What the Python function `f` makes of `args`, a string.
    fn made(&self, f: &Py<PyAny>, args: impl pyo3::call::PyCallArgs<'py>) -> PyResult<String> {
        let made = f.bind(self.entries.py()).call1(args)?;
        Ok(made.cast::<PyString>()?.to_str()?.to_owned())
    }
}

impl recall::Texts for PyTexts<'_, '_> {
    type Error = PyErr;

    fn whole(&mut self, i: usize) -> PyResult<String> {
        let entry = self.entries.get_item(i)?;
        if let Some(text) = self.owner.texts_here.whole(&entry)? {
            return Ok(text);
        }
        self.made(&self.owner.whole, (entry,))
    }

    fn edited(&mut self, i: usize) -> PyResult<String> {
        let entry = self.entries.get_item(i)?;
        if let Some(text) = self.owner.texts_here.edited(&entry)? {
            return Ok(text);
        }
        self.made(&self.owner.edited, (entry,))
    }

    fn result(&mut self, i: usize, block: i64) -> PyResult<String> {
        let entry = self.entries.get_item(i)?;
        if let Some(text) = self.owner.texts_here.result(&entry, block)? {
            return Ok(text);
        }
        self.made(&self.owner.result, (entry, block))
    }

    fn escaped(&mut self, text: &str) -> PyResult<String> {
        self.made(&self.owner.escaped, (text,))
    }
}

/// The texts of a list's dicts that hold a string `text` (those of `type` `kind` only, where
/// given), joined by line breaks; None where a string is not one Rust holds (a lone surrogate:
/// Python's).
fn texts_in_hand(blocks: &Bound<'_, PyList>, kind: Option<&str>) -> PyResult<Option<String>> {
    let py = blocks.py();
    let mut parts = Vec::new();
    for block in blocks.iter() {
        let Ok(block) = block.cast::<PyDict>() else {
            continue;
        };
        if let Some(kind) = kind {
            match block.get_item(intern!(py, "type"))? {
                Some(given) if given.eq(kind)? => {}
                _ => continue,
            }
        }
        if let Some(text) = block.get_item(intern!(py, "text"))? {
            if let Ok(text) = text.cast::<PyString>() {
                let Ok(text) = text.to_str() else {
                    return Ok(None);
                };
                parts.push(text.to_owned());
            }
        }
    }
    Ok(Some(parts.join("\n")))
}

/// `probes._result_text` of a tool result's content in hand: a string, or the texts of a list's
/// dicts that hold a string `text`, or nothing (""); None where a string is not one Rust holds.
fn result_text_in_hand(content: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if let Ok(text) = content.cast::<PyString>() {
        return Ok(text.to_str().ok().map(str::to_owned));
    }
    match content.cast::<PyList>() {
        Ok(blocks) => texts_in_hand(blocks, None),
        Err(_) => Ok(Some(String::new())),
    }
}

/// `stub.stripped_text` of a message in hand (`text_of(message).strip()`): its string content,
/// or its text blocks' texts joined by line breaks, stripped; None where Python reads it (a message
/// not a dict, a string not one Rust holds).
fn stripped_in_hand(message: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let Ok(message) = message.cast::<PyDict>() else {
        return Ok(None);
    };
    let text = match message.get_item(intern!(message.py(), "content"))? {
        Some(content) => match (content.cast::<PyString>(), content.cast::<PyList>()) {
            (Ok(text), _) => text.to_str().ok().map(str::to_owned),
            (_, Ok(blocks)) => texts_in_hand(blocks, Some("text"))?,
            _ => Some(String::new()),
        },
        None => Some(String::new()),
    };
    Ok(text.map(|t| facts::py_strip(&t).to_owned()))
}

/// The texts recall reads of a message, made here: a plain `Entry`'s compact JSON (`orjson.dumps`
/// of its message) and a string result's text; and those of a message left in its file
/// (`feeds/read_ahead.py`'s `LazyEntry`, unread), read from its line: its compact JSON (`LazyEntry.json_text`: the line, or the
/// line with its changed results' contents written in their places, or a reply's role and content
/// without its other members (`facts::reply_message_text`: what Python parses the line for), where
/// that is as long as the message's compact JSON and holds no sized placeholder) and an unchanged tool result's text
/// (`block_content` and `probes._result_text`: a string content, parsed alone from its place). Any
/// other case — a message read, a content not a string, a line no longer what was read — is left
/// to Python, the reference, which says what is wrong.
pub(crate) struct NativeTexts {
    /// the plain `Entry` class (never left in a file) and `orjson.dumps`
    entry: Py<PyType>,
    dumps: Py<PyAny>,
    /// the pieces of the files the lines are cut from (`pieces::Pieces`; asked only with the GIL
    /// held: the lock is never waited on)
    pieces: Mutex<Pieces<Source>>,
}

/// The bytes a piece of a file reads (a line is most often under a kilobyte), and how many are kept.
const PIECE: usize = 64 << 10;
const PIECES: usize = 4;

/// A `SourceFile` as the pieces tell files apart: the object (kept alive by the piece, so that
/// its identity is never another's) and the descriptor it reads by.
struct Source(Py<PyAny>, i32);

impl PartialEq for Source {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_ptr() == other.0.as_ptr() && self.1 == other.1
    }
}

/// The blocks of a file its reader read last (`LineFacts.entries` keeps each it is given, a
/// `SourceFile`'s `recent`): recall reads the lines of a context's new messages again soon after
/// they were read (the loop runs a batch of calls behind the reader), and cuts them from these
/// with no read of the file. A line is cut as it was when its block was read, as from `Pieces`.
#[pyclass(frozen, module = "compactlab._native")]
pub(crate) struct RecentBlocks {
    /// each block's offset in its file and its bytes, the newest last (asked only with the GIL
    /// held: the lock is never waited on)
    held: Mutex<VecDeque<(u64, Py<PyBytes>)>>,
}

/// How many bytes of blocks a `RecentBlocks` keeps (the newest block always): eight of
/// `reader.BLOCK`'s 256 KiB. The loop reads a batch of 256 messages (`READ_BATCH`) ahead; on the
/// bench's 5,000-call file these leave 29 of the 748 reads recall made without them.
const RECENT_BYTES: usize = 2 << 20;

#[pymethods]
impl RecentBlocks {
    #[new]
    fn new() -> Self {
        RecentBlocks {
            held: Mutex::new(VecDeque::new()),
        }
    }

    /// Each block kept, the oldest first: its offset in the file and its length.
    fn spans(&self, py: Python<'_>) -> Vec<(u64, usize)> {
        self.held()
            .iter()
            .map(|(at, block)| (*at, block.bind(py).as_bytes().len()))
            .collect()
    }
}

impl RecentBlocks {
    fn held(&self) -> MutexGuard<'_, VecDeque<(u64, Py<PyBytes>)>> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `block`, read from `at`, kept (once: `entries` is asked of a block again after each line
    /// Python reads in it), the oldest let go past `RECENT_BYTES`.
    fn keep(&self, at: u64, block: &Bound<'_, PyBytes>) {
        let py = block.py();
        let mut held = self.held();
        if held
            .back()
            .is_some_and(|(a, b)| *a == at && b.as_ptr() == block.as_ptr())
        {
            return;
        }
        held.push_back((at, block.clone().unbind()));
        let mut bytes: usize = held.iter().map(|(_, b)| b.bind(py).as_bytes().len()).sum();
        while bytes > RECENT_BYTES && held.len() > 1 {
            if let Some((_, oldest)) = held.pop_front() {
                bytes -= oldest.bind(py).as_bytes().len();
            }
        }
    }

    /// The block that holds the `length` bytes at `offset`, and where they start in it.
    fn holding<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        length: usize,
    ) -> Option<(Bound<'py, PyBytes>, usize)> {
        let held = self.held();
        held.iter().rev().find_map(|(at, block)| {
            let from = usize::try_from(offset.checked_sub(*at)?).ok()?;
            let block = block.bind(py);
            (from.checked_add(length)? <= block.as_bytes().len()).then(|| (block.clone(), from))
        })
    }
}

/// Reads as `os.pread` does into `buf`'s spare capacity from `at`, until it is full or the file
/// ends (a read interrupted by a signal is made again).
fn pread_into(
    fd: std::os::fd::BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    at: u64,
) -> Result<(), rustix::io::Errno> {
    use rustix::io::Errno;
    while buf.len() < buf.capacity() {
        let from = at + buf.len() as u64;
        match rustix::io::pread(fd, rustix::buffer::spare_capacity(buf), from) {
            Ok(0) => break,
            Ok(_) => {}
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The `OSError` Python raises for `errno` (`OSError(errno, os.strerror(errno))`: the subclass
/// of the errno, as `os.pread`'s).
fn os_error(py: Python<'_>, errno: rustix::io::Errno) -> PyErr {
    let n = errno.raw_os_error();
    let text = py
        .import("os")
        .and_then(|os| os.getattr("strerror")?.call1((n,))?.extract::<String>())
        .unwrap_or_default();
    pyo3::exceptions::PyOSError::new_err((n, text))
}

/// What stands just before a result's content on a line orjson wrote (`read_ahead.CONTENT_KEY`).
const CONTENT_KEY: &[u8] = b"\"content\":";

/// Whether `text` is `chars` code points long and holds no sized placeholder's mark: an ASCII
/// text (most lines) is as long as its bytes and holds no mark, checked in one pass.
fn as_long_unmarked(text: &str, chars: usize) -> bool {
    if text.is_ascii() {
        return text.len() == chars;
    }
    !text.contains(MARK) && text.chars().count() == chars
}

/// A message left in its file: its file's descriptor, its line's offset and length, its
/// patches, where its results' contents stand, its chars.
struct Left<'py> {
    /// the `SourceFile` the message was read from
    source: Bound<'py, PyAny>,
    offset: i64,
    length: usize,
    patches: Bound<'py, PyTuple>,
    placed: Vec<(i64, usize, usize)>,
    chars: usize,
}

impl NativeTexts {
    /// The texts of messages whose plain class is `entry` (`orjson.dumps`: what a message in hand's
    /// compact JSON is made by).
    pub(crate) fn new(entry: Py<PyType>, dumps: Py<PyAny>) -> Self {
        NativeTexts {
            entry,
            dumps,
            pieces: Mutex::new(Pieces::new(PIECE, PIECES)),
        }
    }

    /// The content of the tool result at `block` where it is a string (`Entry.block_content`, of
    /// a message in hand or left in its file: the last patch of the block, or the string on the
    /// line where its facts placed it), as `content_text` gives it; None where it is another
    /// value, or one this reading leaves to Python (a lone surrogate, a line no longer what was
    /// read).
    pub(crate) fn string_content(
        &self,
        entry: &Bound<'_, PyAny>,
        block: i64,
    ) -> PyResult<Option<String>> {
        let py = entry.py();
        if let Some(message) = self.read_already(entry)? {
            let Ok(blocks) = message
                .get_item(intern!(py, "content"))?
                .cast_into_exact::<PyList>()
            else {
                return Ok(None);
            };
            let Ok(at) = usize::try_from(block) else {
                return Ok(None);
            };
            let Some(Ok(item)) = (at < blocks.len()).then(|| blocks.get_item(at)) else {
                return Ok(None);
            };
            let Ok(item) = item.cast_into_exact::<PyDict>() else {
                return Ok(None);
            };
            return Ok(item
                .get_item(intern!(py, "content"))?
                .as_ref()
                .and_then(exact_text)
                .map(str::to_owned));
        }
        let Some(left) = self.left(entry)? else {
            return Ok(None);
        };
        self.left_content(&left, block, |value| {
            (value.first() == Some(&b'"'))
                .then(|| facts::string_text(value))
                .flatten()
        })
    }

    /// The text of the result at `block` of a message left in its file: its last patch where a
    /// layer changed it (`LazyEntry.block_content`'s `_patched`: a string, any other Python's),
    /// else what `text` makes of its JSON value where the line's facts placed it (None: not
    /// placed, or no `"content":` stands before it).
    fn left_content(
        &self,
        left: &Left<'_>,
        block: i64,
        text: impl FnOnce(&[u8]) -> Option<String>,
    ) -> PyResult<Option<String>> {
        if let Some((_, content)) = Self::latest(left)?.into_iter().find(|(b, _)| *b == block) {
            return Ok(exact_text(&content).map(str::to_owned));
        }
        let Some(&(_, start, end)) = left.placed.iter().find(|(b, _, _)| *b == block) else {
            return Ok(None);
        };
        if start < CONTENT_KEY.len() || end < start {
            return Ok(None);
        }
        let at = left.offset + (start - CONTENT_KEY.len()) as i64;
        self.read(left, end - start + CONTENT_KEY.len(), at, |raw| {
            Ok(raw.strip_prefix(CONTENT_KEY).and_then(text))
        })
    }

    /// `entry` where it is a message left unread in its file, else None.
    fn left<'py>(&self, entry: &Bound<'py, PyAny>) -> PyResult<Option<Left<'py>>> {
        let py = entry.py();
        if entry.get_type().is(self.entry.bind(py)) {
            return Ok(None);
        }
        let (Ok(message), Ok(lazy)) = (
            members::fact(entry, Fact::Message),
            members::fact(entry, Fact::Lazy),
        ) else {
            return Ok(None);
        };
        if !message.is_none() {
            return Ok(None);
        }
        let Ok(lazy) = lazy.cast_into::<PyTuple>() else {
            return Ok(None);
        };
        if lazy.len() != 5 {
            return Ok(None);
        }
        let source = lazy.get_item(0)?;
        Ok(Some(Left {
            source,
            offset: lazy.get_item(1)?.extract()?,
            length: lazy.get_item(2)?.extract()?,
            patches: lazy.get_item(3)?.cast_into::<PyTuple>()?,
            placed: lazy
                .get_item(4)?
                .cast::<PyBytes>()?
                .as_bytes()
                .chunks_exact(12)
                .map(|c| {
                    let n = |k: usize| u32::from_le_bytes([c[k], c[k + 1], c[k + 2], c[k + 3]]);
                    (i64::from(n(0)), n(4) as usize, n(8) as usize)
                })
                .collect(),
            chars: members::fact(entry, Fact::Chars)?.extract()?,
        }))
    }

    /// What `then` makes of `length` bytes of the file `left` was read from, from `offset`, read
    /// as `SourceFile._line_at` reads them (`os.pread`) without making them a Python object (None:
    /// fewer were there, the file cut short: Python says so; an error of the read is Python's
    /// `OSError`): cut from a piece of the file (`pieces`) where one holds them or can (a line of a
    /// piece is read as it was when the piece was read), or from the file's bytes where its
    /// `SourceFile` holds them in memory (no descriptor: its `data`).
    fn read<R>(
        &self,
        left: &Left<'_>,
        length: usize,
        offset: i64,
        then: impl FnOnce(&[u8]) -> PyResult<Option<R>>,
    ) -> PyResult<Option<R>> {
        use rustix::io::Errno;
        let py = left.source.py();
        let raw_fd: i32 = left.source.getattr(intern!(py, "fd"))?.extract()?;
        let Ok(offset) = u64::try_from(offset) else {
            return Err(os_error(py, Errno::INVAL));
        };
        if raw_fd < 0 {
            let data = left.source.getattr(intern!(py, "data"))?;
            let Ok(data) = data.cast::<PyBytes>() else {
                return Err(os_error(py, Errno::BADF));
            };
            let held = data.as_bytes();
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(held.len());
            let end = start.saturating_add(length).min(held.len());
            if end - start < length {
                return Ok(None);
            }
            return then(&held[start..end]);
        }
        // SAFETY: `raw_fd` is not -1 (checked above) and is the descriptor of the file the
        // `SourceFile` `left.source` opened (its `_file`, closed only when that object is
        // collected). `left` holds a reference to that object for as long as this borrow lives,
        // and the GIL is held throughout, so no Python code runs meanwhile that could close it.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(raw_fd) };
        if let Ok(recent) = left.source.getattr(intern!(py, "recent")) {
            if let Ok(recent) = recent.cast::<RecentBlocks>() {
                if let Some((block, from)) = recent.get().holding(py, offset, length) {
                    return then(&block.as_bytes()[from..from + length]);
                }
            }
        }
        let source = Source(left.source.clone().unbind(), raw_fd);
        {
            let mut pieces = self
                .pieces
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let cut = pieces.get(source, offset, length, |buf, at| pread_into(fd, buf, at));
            match cut {
                Ok(Some(bytes)) => return then(bytes), // (no Python runs meanwhile: never asked again)
                Ok(None) => {}
                Err(e) => return Err(os_error(py, e)),
            }
        }
        let mut raw = Vec::with_capacity(length); // (read into as it is: no zeroes written first)
        pread_into(fd, &mut raw, offset).map_err(|e| os_error(py, e))?;
        if raw.len() < length {
            return Ok(None);
        }
        then(&raw)
    }

    /// A message in hand: a plain `Entry`'s, or a `LazyEntry`'s read already (its patches applied
    /// as it was read), else None.
    fn read_already<'py>(&self, entry: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if let Some(message) = self.in_hand(entry)? {
            return Ok(Some(message));
        }
        if members::fact(entry, Fact::Lazy).is_err() {
            return Ok(None);
        }
        Ok(members::fact(entry, Fact::Message)
            .ok()
            .filter(|m| !m.is_none()))
    }

    /// A plain `Entry`'s message (its message in hand), else None.
    fn in_hand<'py>(&self, entry: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if !entry.get_type().is(self.entry.bind(entry.py())) {
            return Ok(None);
        }
        entry.getattr(intern!(entry.py(), "message")).map(Some)
    }

    /// `LazyEntry.json_text` of a message left in its file, where its line gives it; a plain
    /// `Entry`'s (`Entry.json_text`: what orjson writes of its message).
    fn whole(&self, entry: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        if let Some(message) = self.in_hand(entry)? {
            let raw = self.dumps.bind(entry.py()).call1((message,))?;
            return Ok(
                simdutf8::basic::from_utf8(raw.cast::<PyBytes>()?.as_bytes())
                    .ok()
                    .map(str::to_owned),
            );
        }
        let Some(left) = self.left(entry)? else {
            return Ok(None);
        };
        if !left.patches.is_empty() && left.placed.is_empty() {
            return Ok(None);
        }
        self.read(&left, left.length, left.offset, |raw| {
            let text = if left.patches.is_empty() {
                simdutf8::basic::from_utf8(raw).ok().map(str::to_owned)
            } else {
                Self::spliced(raw, &left)?
            };
            let text = text
                .map(|mut t| {
                    if t.ends_with('\n') {
                        t.pop();
                    }
                    t
                })
                .filter(|t| as_long_unmarked(t, left.chars));
            if text.is_some() || !left.patches.is_empty() {
                return Ok(text);
            }
            // a reply's line: its role and content, without its other members (`message_of`)
            Ok(facts::reply_message_text(raw).filter(|t| as_long_unmarked(t, left.chars)))
        })
    }

    /// `stub.stripped_text` of a message in hand (`read_already`), and of a message left unread in
    /// its file, read from its line (`facts::stripped_message_text`) without making its message a
    /// Python object: None where Python reads it (a line or a string this reading leaves to
    /// Python, a file cut short).
    pub(crate) fn stripped(&self, entry: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        if let Some(message) = self.read_already(entry)? {
            return stripped_in_hand(&message);
        }
        let Some(left) = self.left(entry)? else {
            return Ok(None);
        };
        self.read(&left, left.length, left.offset, |raw| {
            Ok(facts::stripped_message_text(raw))
        })
    }

    /// `probes._text` of a message left in its file (a tool-result message: its changed blocks'
    /// contents, the last patch of each, in block order, each as orjson writes it, joined by NUL),
    /// where each is a string.
    fn edited(&self, entry: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        let py = entry.py();
        let whole = |entry: &Bound<'_, PyAny>| -> PyResult<bool> {
            Ok(
                members::fact(entry, Fact::Role)?.eq(intern!(py, "assistant"))?
                    || members::fact(entry, Fact::Origin)?.extract::<i64>()? < 0,
            )
        };
        if let Some(message) = self.in_hand(entry)? {
            if whole(entry)? {
                return self.whole(entry);
            }
            return self.changed_in_hand(entry, &message);
        }
        let Some(left) = self.left(entry)? else {
            return Ok(None);
        };
        if whole(entry)? {
            return Ok(None); // (its whole text: `whole`)
        }
        let mut latest = Self::latest(&left)?;
        latest.sort_by_key(|(b, _)| *b);
        let mut out = String::new();
        for (k, (_, content)) in latest.iter().enumerate() {
            let Some(text) = exact_text(content) else {
                return Ok(None);
            };
            if k > 0 {
                out.push('\0');
            }
            facts::push_json_string(text, &mut out);
        }
        Ok(Some(out))
    }

    /// Each patched block's last patch, in the order the blocks were first patched.
    fn latest<'py>(left: &Left<'py>) -> PyResult<Vec<(i64, Bound<'py, PyAny>)>> {
        let mut latest: Vec<(i64, Bound<'py, PyAny>)> = Vec::new();
        for patch in left.patches.iter() {
            let (block, content): (i64, Bound<'py, PyAny>) = patch.extract()?;
            match latest.iter_mut().find(|(b, _)| *b == block) {
                Some(held) => held.1 = content,
                None => latest.push((block, content)),
            }
        }
        Ok(latest)
    }

    /// `SourceFile.spliced_at`: the line with each patched result's content (the last patch of
    /// its block, a string: any other is Python's) written in its place.
    fn spliced(raw: &[u8], left: &Left<'_>) -> PyResult<Option<String>> {
        let latest = Self::latest(left)?;
        let mut out = String::with_capacity(raw.len());
        let (mut at, mut used) = (0, 0);
        for &(block, start, end) in &left.placed {
            let Some((_, content)) = latest.iter().find(|(b, _)| *b == block) else {
                continue;
            };
            let Ok(content) = content.cast_exact::<PyString>() else {
                return Ok(None);
            };
            if start < CONTENT_KEY.len()
                || end > raw.len()
                || &raw[start - CONTENT_KEY.len()..start] != CONTENT_KEY
            {
                return Ok(None);
            }
            let (Ok(before), Ok(content)) = (
                simdutf8::basic::from_utf8(&raw[at..start]),
                content.to_str(),
            ) else {
                return Ok(None);
            };
            out.push_str(before);
            facts::push_json_string(content, &mut out);
            at = end;
            used += 1;
        }
        if used != latest.len() {
            return Ok(None);
        }
        let Ok(rest) = simdutf8::basic::from_utf8(&raw[at..]) else {
            return Ok(None);
        };
        out.push_str(rest);
        Ok(Some(out))
    }

    /// `probes._text` of a plain `Entry`'s tool-result message (`Entry.changed_contents`, each as
    /// orjson writes it, joined by NUL), where its content is a list that has each changed block.
    fn changed_in_hand(
        &self,
        entry: &Bound<'_, PyAny>,
        message: &Bound<'_, PyAny>,
    ) -> PyResult<Option<String>> {
        let py = entry.py();
        let Ok(blocks) = message
            .get_item(intern!(py, "content"))?
            .cast_into_exact::<PyList>()
        else {
            return Ok(None);
        };
        let mut changed = Vec::new();
        for b in members::items(&members::fact(entry, Fact::Changed)?)? {
            changed.push(b?.extract::<i64>()?);
        }
        changed.sort_unstable();
        let mut out = String::new();
        for (k, &b) in changed.iter().enumerate() {
            let Some(block) = usize::try_from(b)
                .ok()
                .filter(|&b| b < blocks.len())
                .map(|b| blocks.get_item(b))
                .transpose()?
            else {
                return Ok(None);
            };
            let content = match block.cast_exact::<PyDict>() {
                Ok(d) => {
                    let result = match d.get_item(intern!(py, "type"))? {
                        Some(t) => t.eq(intern!(py, "tool_result"))?,
                        None => false,
                    };
                    if result {
                        d.get_item(intern!(py, "content"))?.unwrap_or(block)
                    } else {
                        block
                    }
                }
                Err(_) => block,
            };
            if k > 0 {
                out.push('\0');
            }
            if let Ok(text) = content.cast_exact::<PyString>() {
                let Ok(text) = text.to_str() else {
                    return Ok(None); // (a lone surrogate: Python's)
                };
                facts::push_json_string(text, &mut out);
                continue;
            }
            let Ok(raw) = self.dumps.bind(py).call1((content,)) else {
                return Ok(None); // (what orjson refuses: Python says so)
            };
            let Ok(text) = simdutf8::basic::from_utf8(raw.cast::<PyBytes>()?.as_bytes()) else {
                return Ok(None);
            };
            out.push_str(text);
        }
        Ok(Some(out))
    }

    /// `probes._result_text` of an unchanged tool result of a message left in its file, where its
    /// content is a string its line placed.
    fn result(&self, entry: &Bound<'_, PyAny>, block: i64) -> PyResult<Option<String>> {
        if let Some(message) = self.read_already(entry)? {
            // (`Entry.block_content`: the block's content)
            let py = entry.py();
            let content = message
                .get_item(intern!(py, "content"))?
                .get_item(block)?
                .call_method1(intern!(py, "get"), (intern!(py, "content"),))?;
            return result_text_in_hand(&content);
        }
        let Some(left) = self.left(entry)? else {
            return Ok(None);
        };
        self.left_content(&left, block, |value| match value.first() {
            Some(b'[') => facts::result_list_text(value),
            _ => facts::string_text(value),
        })
    }
}

/// The run's ledger (`RunEnv.ledger`: its `made_by`, `made_at`, `cleared_at` and `dropped`
/// dicts; none without one), read as the check's attribution asks.
struct PyDone<'py> {
    maps: Option<[Bound<'py, PyDict>; 4]>,
}

impl<'py> PyDone<'py> {
    fn of(ledger: Option<&Bound<'py, PyAny>>) -> PyResult<Self> {
        let Some(ledger) = ledger else {
            return Ok(PyDone { maps: None });
        };
        let py = ledger.py();
        let map = |name: &Bound<'py, PyString>| -> PyResult<Bound<'py, PyDict>> {
            Ok(ledger.getattr(name)?.cast_into::<PyDict>()?)
        };
        Ok(PyDone {
            maps: Some([
                map(intern!(py, "made_by"))?,
                map(intern!(py, "made_at"))?,
                map(intern!(py, "cleared_at"))?,
                map(intern!(py, "dropped"))?,
            ]),
        })
    }

    fn get<T: for<'a> pyo3::FromPyObject<'a, 'py, Error = PyErr>>(
        &self,
        which: usize,
        key: impl IntoPyObject<'py>,
    ) -> PyResult<Option<T>> {
        let Some(maps) = &self.maps else {
            return Ok(None);
        };
        match maps[which].get_item(key)? {
            Some(value) => Ok(Some(value.extract()?)),
            None => Ok(None),
        }
    }
}

impl recall::Done for PyDone<'_> {
    type Error = PyErr;

    fn made_by(&mut self, origin: i64) -> PyResult<Option<String>> {
        self.get(0, origin)
    }

    fn made_at(&mut self, origin: i64) -> PyResult<Option<i64>> {
        self.get(1, origin)
    }

    fn cleared_at(&mut self, origin: i64, block: i64) -> PyResult<Option<i64>> {
        self.get(2, (origin, block))
    }

    fn dropped(&mut self, origin: i64) -> PyResult<Option<(String, i64)>> {
        self.get(3, origin)
    }
}

/// A probe as Python gave it: the objects its outcome repeats, and what the check reads (its
/// places, where the cache's rows hold them: `StoredProbes`, borrowed).
pub(crate) struct GivenProbe<'py, 'a> {
    text: Bound<'py, PyString>,
    kind: Bound<'py, PyAny>,
    source_call: Bound<'py, PyAny>,
    source_tool: Bound<'py, PyAny>,
    place: Cow<'a, [(i64, i64)]>,
    line: bool,
}

#[pymethods]
impl RecallCheck {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (whole, edited, result, escaped, outcome, entry, dumps, shared=None))]
    fn new(
        py: Python<'_>,
        whole: Py<PyAny>,
        edited: Py<PyAny>,
        result: Py<PyAny>,
        escaped: Py<PyAny>,
        outcome: Py<PyAny>,
        entry: Py<PyType>,
        dumps: Py<PyAny>,
        shared: Option<Py<KnownMessages>>,
    ) -> PyResult<Self> {
        Ok(RecallCheck {
            check: recall::Check::default(),
            last: Vec::new(),
            known: FxHashMap::default(),
            layer_names: FxHashMap::default(),
            shared,
            replaced: None,
            whole,
            edited,
            result,
            escaped,
            outcomes: Outcomes::of(py, outcome)?,
            texts_here: NativeTexts::new(entry, dumps),
        })
    }

    /// The text the check makes itself of `entry` (a message of a context): its whole compact
    /// JSON, the text of its tool result at `block`, (`edited`) its changed blocks' text, or
    /// (`stripped`) what the stub summary quotes of it (None: Python makes it). For the tests,
    /// which hold it to Python's.
    #[pyo3(signature = (entry, block=None, edited=false, stripped=false))]
    fn native_text(
        &self,
        entry: &Bound<'_, PyAny>,
        block: Option<i64>,
        edited: bool,
        stripped: bool,
    ) -> PyResult<Option<String>> {
        match (block, edited, stripped) {
            (_, _, true) => self.texts_here.stripped(entry),
            (_, true, _) => self.texts_here.edited(entry),
            (None, _, _) => self.texts_here.whole(entry),
            (Some(b), _, _) => self.texts_here.result(entry, b),
        }
    }

    /// `probes.check` of the context `entries` at `call`: how many of `probes` it holds, and how
    /// many more a persisted output it points to holds; each probe's outcome appended to `ledger`
    /// (None: not kept), those kept where a result that held them stands first, then the others in
    /// order (the layer that removed one and when, from the run's ledger `done`: `RunEnv.ledger`).
    /// `stable`: how many of its first messages are, at most, those of the last context checked,
    /// unchanged (the lowest position a layer changed at the calls since; None: compared one by one).
    #[pyo3(signature = (probes, entries, stable, call, ledger, done))]
    pub(crate) fn check<'py>(
        &mut self,
        probes: &Bound<'py, PyAny>,
        entries: &Bound<'py, PyList>,
        stable: Option<usize>,
        call: i64,
        ledger: Option<&Bound<'py, PyAny>>,
        done: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(usize, usize)> {
        let given = GivenProbe::all_of(probes)?;
        let ledger = ledger.map(Ledger::of).transpose()?;
        self.check_given(&given, entries, stable, call, ledger.as_ref(), done)
    }
}

impl GivenProbe<'_, '_> {
    /// Python's `Probe`s, as the check reads them.
    pub(crate) fn all_of<'py>(
        probes: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<GivenProbe<'py, 'static>>> {
        let py = probes.py();
        let mut given = Vec::new();
        for p in members::items(probes)? {
            let p = p?;
            let kind = p.getattr(intern!(py, "kind"))?;
            given.push(GivenProbe {
                text: p.getattr(intern!(py, "text"))?.cast_into::<PyString>()?,
                line: kind.eq(intern!(py, "line"))?,
                kind,
                source_call: p.getattr(intern!(py, "source_call"))?,
                source_tool: p.getattr(intern!(py, "source_tool"))?,
                place: Cow::Owned(p.getattr(intern!(py, "where"))?.extract()?),
            });
        }
        Ok(given)
    }
}

impl RecallCheck {
    /// `check` of probes given as the check reads them (Python's, or the cache's: `StoredProbes`).
    pub(crate) fn check_given<'py>(
        &mut self,
        given: &[GivenProbe<'py, '_>],
        entries: &Bound<'py, PyList>,
        stable: Option<usize>,
        call: i64,
        ledger: Option<&Ledger<'py>>,
        done: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(usize, usize)> {
        let mut read = Vec::with_capacity(given.len());
        for p in given {
            read.push(recall::Probe {
                text: p.text.to_str()?,
                place: &p.place,
                line: p.line,
            });
        }
        let (n, mut msgs) = (entries.len(), std::mem::take(&mut self.last));
        let stable = self.stable(entries, &msgs, stable)?;
        msgs.truncate(stable);
        for i in stable..n {
            msgs.push(self.msg(&entries.get_item(i)?)?);
        }
        let mut check = std::mem::take(&mut self.check);
        let mut names = std::mem::take(&mut self.layer_names);
        let mut texts = PyTexts {
            entries,
            owner: self,
        };
        let checked = check
            .outcomes(&read, &msgs, stable, &mut texts)
            .and_then(|(out, made)| {
                self.said(
                    given,
                    &out,
                    made,
                    (&check, &msgs),
                    (call, &mut names),
                    ledger,
                    done,
                    entries,
                )
            });
        self.check = check;
        self.layer_names = names;
        if checked.is_err() {
            // (what the memo knows is no longer sure)
            self.check = recall::Check::default();
            msgs.clear();
        }
        if self.known.len() > 2 * n + 64 {
            // (what is no longer in the context is let go)
            self.known = entries
                .iter()
                .zip(&msgs)
                .map(|(e, m)| (m.key, (e.unbind(), m.clone())))
                .collect();
        }
        self.last = msgs;
        checked
    }
}

impl RecallCheck {
    /// What the stub summary quotes of `entry` (`NativeTexts::stripped`), read as this check reads
    /// a message's texts (from the pieces of its file it holds); None: Python's.
    pub(crate) fn stripped_text(&self, entry: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        self.texts_here.stripped(entry)
    }

    /// `probes.check_intact` of a context that is the recording's own: every one of `probes`
    /// kept where its first result stands, its outcome appended to `ledger`; how many.
    pub(crate) fn all_kept<'py>(
        &self,
        probes: &[GivenProbe<'py, '_>],
        call: i64,
        ledger: &Ledger<'py>,
    ) -> PyResult<usize> {
        let py = ledger.py();
        let mut n = 0;
        for p in probes {
            let probe = [
                p.text.clone().into_any(),
                p.kind.clone(),
                p.source_call.clone(),
                p.source_tool.clone(),
            ];
            ledger.push(
                &self.outcomes,
                call,
                probe,
                intern!(py, "kept"),
                intern!(py, "").clone(),
                -1,
            )?;
            n += 1;
        }
        Ok(n)
    }

    /// The outcomes `out` of `probes` said: those kept where held to `ledger` first, then the
    /// others in order, each kept elsewhere, or attributed (once for probes that share their
    /// places); how many were kept, and how many recoverable.
    #[allow(clippy::too_many_arguments)]
    fn said<'py>(
        &self,
        probes: &[GivenProbe<'py, '_>],
        out: &[u8],
        made: bool,
        (check, msgs): (&recall::Check, &[Arc<recall::Msg>]),
        (call, names): (i64, &mut FxHashMap<String, Py<PyString>>),
        ledger: Option<&Ledger<'py>>,
        done: Option<&Bound<'py, PyAny>>,
        entries: &Bound<'py, PyList>,
    ) -> PyResult<(usize, usize)> {
        let py = entries.py();
        let say = |p: &GivenProbe<'py, '_>,
                   status: &Bound<'py, PyString>,
                   by: Bound<'py, PyString>,
                   at: i64| {
            let Some(ledger) = ledger else {
                return Ok(());
            };
            let probe = [
                p.text.clone().into_any(),
                p.kind.clone(),
                p.source_call.clone(),
                p.source_tool.clone(),
            ];
            ledger.push(&self.outcomes, call, probe, status, by, at)
        };
        let (kept_, nothing) = (intern!(py, "kept"), intern!(py, ""));
        let mut kept = 0;
        for (p, &o) in probes.iter().zip(out) {
            if o == recall::KEPT_WHERE_HELD {
                kept += 1;
                say(p, kept_, nothing.clone(), -1)?;
            }
        }
        if kept == probes.len() {
            return Ok((kept, 0));
        }
        let mut done = PyDone::of(done)?;
        let mut texts = PyTexts {
            entries,
            owner: self,
        };
        let mut attributed: FxHashMap<&[(i64, i64)], recall::Gone> = FxHashMap::default();
        let mut recoverable = 0;
        for (p, &o) in probes.iter().zip(out) {
            if o == recall::KEPT_WHERE_HELD {
                continue;
            }
            if o == recall::KEPT_ELSEWHERE && !p.line {
                kept += 1;
                say(p, kept_, nothing.clone(), -1)?;
                continue;
            }
            let gone = match attributed.get(&*p.place) {
                Some(gone) => gone.clone(),
                None => {
                    let gone = check.attribute(&p.place, msgs, made, &mut texts, &mut done)?;
                    attributed.insert(&*p.place, gone.clone());
                    gone
                }
            };
            let status = if gone.recoverable {
                recoverable += 1;
                intern!(py, "recoverable")
            } else {
                intern!(py, "lost")
            };
            // (a layer's name, one of a few: one string for every row that names it)
            let by = match names.get(&gone.by) {
                Some(by) => by.bind(py).clone(),
                None => {
                    let by = PyString::intern(py, &gone.by);
                    names.insert(gone.by.clone(), by.clone().unbind());
                    by
                }
            };
            say(p, status, by, gone.at)?;
        }
        Ok((kept, recoverable))
    }

    /// How many of the first `entries` are the last context's messages (`last`), at most
    /// `stable`: trusted where the message before that bound is the last context's there (the
    /// memo holds every message it knows, so an identity is never another message's), else found
    /// by comparing each.
    fn stable(
        &self,
        entries: &Bound<'_, PyList>,
        last: &[Arc<recall::Msg>],
        stable: Option<usize>,
    ) -> PyResult<usize> {
        let bound = last.len().min(entries.len());
        let same = |i: usize| -> PyResult<bool> {
            Ok(entries.get_item(i)?.as_ptr() as usize == last[i].key)
        };
        if let Some(s) = stable.map(|s| s.min(bound)) {
            if s == 0 || same(s - 1)? {
                return Ok(s);
            }
        }
        let mut s = 0;
        while s < bound && same(s)? {
            s += 1;
        }
        Ok(s)
    }

    /// A message as the check reads it: known by its identity, or its facts read.
    fn msg(&mut self, entry: &Bound<'_, PyAny>) -> PyResult<Arc<recall::Msg>> {
        let key = entry.as_ptr() as usize;
        if let Some((_, m)) = self.known.get(&key) {
            return Ok(m.clone());
        }
        if let Some(shared) = &self.shared {
            if let Some(m) = shared.get().get(key) {
                return Ok(m);
            }
        }
        let py = entry.py();
        let origin: i64 = members::fact(entry, Fact::Origin)?.extract()?;
        let mut changed = Vec::new();
        for b in members::items(&members::fact(entry, Fact::Changed)?)? {
            changed.push(b?.extract::<i64>()?);
        }
        let mut results = Vec::new();
        for fact in members::items(&members::fact(entry, Fact::Results)?)? {
            let fact = fact?;
            // (a `ResultFact`, a named tuple: its block is its first item; any other by name)
            let block = match fact.cast::<PyTuple>() {
                Ok(t) if fact.get_type().is(result_fact(py)?) => t.get_item(0)?,
                _ => fact.getattr(intern!(py, "block"))?,
            };
            results.push(block.extract::<i64>()?);
        }
        let m = Arc::new(recall::Msg::new(key, origin, changed, results));
        match &self.shared {
            Some(shared)
                if m.origin >= 0 && (m.changed.is_empty() || self.shared_replacement(entry)?) =>
            {
                shared.get().insert(key, entry, &m)
            }
            _ => {
                self.known.insert(key, (entry.clone().unbind(), m.clone()));
            }
        }
        Ok(m)
    }

    /// Whether `entry` is one of the recording's micro replacements its runs share (the memo holds
    /// each as a key of its own): what the check reads of it is the same at every run.
    fn shared_replacement(&self, entry: &Bound<'_, PyAny>) -> PyResult<bool> {
        match &self.replaced {
            Some(replaced) => replaced.bind(entry.py()).contains(entry),
            None => Ok(false),
        }
    }

    /// The recording's micro replacements its runs share (`keeping.shared_replacements`): the
    /// messages they hold are known for every run, as the recording's own are.
    pub(crate) fn share_replacements(&mut self, replaced: Py<PyDict>) {
        self.replaced = Some(replaced);
    }
}

/// The messages of a recording that recall's check has read (its facts, the texts it made of
/// each), kept for every run of the recording (`recall.shared_messages`): a message no layer
/// changed, or one of micro's replacements the runs share (`keeping.shared_replacements`), is the
/// same object in every run, read once rather than once a run. Known by identity,
/// kept alive with its texts (so an identity is never another message's) as long as this is.
#[pyclass(module = "compactlab._native", frozen)]
pub(crate) struct KnownMessages {
    /// (a run's check asks between calls into Python, where another thread's run may ask too)
    known: Mutex<Known>,
}

type Known = FxHashMap<usize, (Py<PyAny>, Arc<recall::Msg>)>;

impl KnownMessages {
    /// Its table, held only while read or written (no Python runs meanwhile: what a panic left
    /// is whole, each write being one insert)
    fn table(&self) -> MutexGuard<'_, Known> {
        self.known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn get(&self, key: usize) -> Option<Arc<recall::Msg>> {
        self.table().get(&key).map(|(_, m)| m.clone())
    }

    fn insert(&self, key: usize, entry: &Bound<'_, PyAny>, m: &Arc<recall::Msg>) {
        self.table()
            .insert(key, (entry.clone().unbind(), m.clone()));
    }
}

#[pymethods]
impl KnownMessages {
    #[new]
    fn new() -> Self {
        KnownMessages {
            known: Mutex::new(FxHashMap::default()),
        }
    }

    /// How many messages it knows.
    fn __len__(&self) -> usize {
        self.table().len()
    }

    /// Whether it knows `entry` (this very object).
    fn __contains__(&self, entry: &Bound<'_, PyAny>) -> bool {
        self.table().contains_key(&(entry.as_ptr() as usize))
    }
}

/// What `LineFacts::lazy_entry` makes an entry with: its class's `__new__`, the class, the empty
/// frozenset, and the class's members where they are slots and what makes its objects without
/// calling it (`Alloc::object`).
type LazyMaker<'a, 'py> = (
    &'a Bound<'py, PyAny>,
    &'a Bound<'py, PyType>,
    &'a Bound<'py, PyAny>,
    Option<&'a EntryMaking>,
);

/// A message's facts read from its JSONL line (`facts::line_facts`; `messages.build_entry` is
/// the reference): the arguments of an `Entry` after its message (and a reply's other members), or
/// None where Python reads the line. Made once a file, with the `ResultFact` class its results are made of.
#[pyclass(module = "compactlab._native", frozen)]
struct LineFacts {
    /// `tuple.__new__` and the `ResultFact` class: a result's fact made of a tuple of its fields
    /// without a Python frame (its `__new__`, or `_make`, each one), and without the call where
    /// the class is a tuple's (`Alloc::tuple`)
    result_fact: (Py<PyAny>, Py<PyAny>, Option<Alloc>),
    /// each tool result's `json_size` too (`build_entry`'s `measure`)
    measure: bool,
    /// the class `entries` makes its entries of, its members (`members::ENTRY_FACTS`) where they
    /// are slots and what makes its objects (`Alloc::object`) (the first class it was given)
    members: std::sync::OnceLock<(Py<PyType>, Option<EntryMaking>)>,
}

/// A class's members (`members::ENTRY_FACTS`) and what makes its objects (`Alloc::object`).
type EntryMaking = (Members, Option<Alloc>);

#[pymethods]
impl LineFacts {
    #[new]
    fn new(result_fact: &Bound<'_, PyAny>, measure: bool) -> PyResult<Self> {
        let alloc = match result_fact.cast::<PyType>() {
            Ok(class) => Alloc::tuple(class)?,
            Err(_) => None,
        };
        Ok(LineFacts {
            result_fact: (
                tuple_new(result_fact.py())?,
                result_fact.clone().unbind(),
                alloc,
            ),
            measure,
            members: std::sync::OnceLock::new(),
        })
    }

    /// The facts of the message on `line` (`(chars, role, origin, tool_use_ids, tool_names,
    /// use_files, results, misplaced_results, empty, has_text)`, an Entry's arguments after its
    /// message) and, for a reply recorded with other members (an API response object's usage,
    /// model...), those members as a JSON object of their own, their text as on the line (None: the
    /// line is a message and nothing else); or None where Python reads the line.
    fn read<'py>(&self, line: &Bound<'py, PyBytes>, origin: i64) -> PyResult<Option<Reply<'py>>> {
        let bytes = line.as_bytes();
        let Some((f, others)) = facts::line_facts(bytes, self.measure, true) else {
            return Ok(None);
        };
        self.reply(line.py(), bytes, &f, &others, origin).map(Some)
    }

    /// `read`, with where the message's tool results' contents stand on the line (packed as
    /// `entries` packs them: `read_ahead.Placed`), for a reader that sends the facts on to a
    /// process that reads the contents from the file (`read_ahead._read_and_send`).
    fn read_placed<'py>(
        &self,
        line: &Bound<'py, PyBytes>,
        origin: i64,
    ) -> PyResult<Option<PlacedReply<'py>>> {
        let py = line.py();
        let bytes = line.as_bytes();
        let Some((f, others, spans)) = facts::line_facts_placed(bytes, self.measure, true) else {
            return Ok(None);
        };
        let (args, rest) = self.reply(py, bytes, &f, &others, origin)?;
        Ok(Some((args, rest, PyBytes::new(py, &packed_spans(&spans)))))
    }

    /// The usual lines of `block[start..stop]` (`block`: a piece of the file from its byte `at`;
    /// from `start`, whole lines, a last one without its line break ending the file or longer
    /// than `max_line`), each made
    /// an entry whose message stays in the file: `make`'s `LazyEntry(*facts, (source, offset,
    /// length, (), placed))` (`lazy_entry`; `placed`: where its results' contents stand on the
    /// line, `(block, start, end)` each as three little-endian `u32`s: `read_ahead.Placed`), its
    /// origin counted on from `origin` and each added to `baseline` where one is given (a stream's
    /// raw baseline without probes); a reply's other members read too where `reply_members`
    /// reads them (its usage, model and time: an API response object's). Read until a line Python
    /// reads (one `read` does not read, a reply whose members it does not, longer than `max_line`
    /// bytes, or a blank one past `max_blank` in a row) or the block's end. Returns the entries,
    /// where the reading stopped in the block, how many lines it read (blank ones too), the blank
    /// lines in a row at its end, the stopping line's `read` where it is a reply with other
    /// members (read already: not again), and what the replies read recorded: each usage as
    /// `(position, usage)` (`TranscriptBuilder.usage`'s), the last model and the last recorded
    /// format named (None: none).
    #[allow(clippy::too_many_arguments)]
    fn entries<'py>(
        &self,
        block: &Bound<'py, PyBytes>,
        start: usize,
        stop: usize,
        at: i64,
        origin: i64,
        mut blank: usize,
        limits: (usize, usize),
        make: (Bound<'py, PyType>, Bound<'py, PyAny>),
        source: &Bound<'py, PyAny>,
        mut baseline: Option<PyRefMut<'py, StreamBaseline>>,
    ) -> PyResult<Entries<'py>> {
        let py = block.py();
        // (the class's `__new__` looked up once a block, not once an entry)
        let new = make.0.getattr(intern!(py, "__new__"))?;
        let members = self.members_of(&make.0)?;
        let make = (&new, &make.0, &make.1, members);
        let bytes = block
            .as_bytes()
            .get(..stop)
            .ok_or_else(|| pyo3::exceptions::PyValueError::new_err("stop past the block's end"))?;
        if let (Ok(recent), Ok(from)) = (source.getattr(intern!(py, "recent")), u64::try_from(at)) {
            if let Ok(recent) = recent.cast::<RecentBlocks>() {
                recent.get().keep(from, block);
            }
        }
        let (max_line, max_blank) = limits;
        let mut made = Vec::new();
        let (mut i, mut lines) = (start, 0);
        let mut pending = None;
        let (mut usages, mut replies) = (Vec::new(), facts::ReplyMembers::default());
        while let Some(end) = lines::line_end(bytes, i, true) {
            let line = &bytes[i..end];
            if line.len() > max_line {
                break;
            }
            if lines::blank(line) {
                if blank >= max_blank {
                    break;
                }
                blank += 1;
            } else {
                let origin = origin + made.len() as i64;
                let Some((f, others, spans)) = facts::line_facts_placed(line, self.measure, true)
                else {
                    break;
                };
                if !others.is_empty() {
                    let assistant = f.role == facts::Role::Assistant;
                    let Some(members) = facts::reply_members(line, &others, assistant) else {
                        pending = Some((
                            PyTuple::new(py, self.entry_args(py, &f, origin)?)?,
                            Some(Self::members(py, line, &others)),
                        ));
                        break;
                    };
                    if let Some(usage) = &members.usage {
                        usages.push((origin, usage_dict(py, usage, &members)?));
                    }
                    // (the last of the block's: the loader keeps each in turn)
                    replies.model = members.model.or(replies.model);
                    replies.recorded_format = members.recorded_format.or(replies.recorded_format);
                }
                let placed = PyBytes::new(py, &packed_spans(&spans));
                let lazy = (
                    source,
                    at + i as i64,
                    line.len(),
                    PyTuple::empty(py),
                    placed,
                );
                let lazy = lazy.into_pyobject(py)?.into_any();
                let args = self.entry_args(py, &f, origin)?;
                let entry = Self::lazy_entry(py, make, &args, lazy)?;
                if let Some(b) = baseline.as_deref_mut() {
                    b.add_read(&entry, &f, origin, &args)?;
                }
                made.push(entry);
                blank = 0;
            }
            i = end;
            lines += 1;
        }
        Ok((
            made,
            i,
            lines,
            blank,
            pending,
            (usages, replies.model, replies.recorded_format),
        ))
    }
}

/// A reply's recorded usage as `model.anthropic_usage` makes it: the counts in `USAGE_KEYS`' order,
/// the 1-hour writes where there are any, the reply's model and time where each is a string
/// that is not empty.
fn usage_dict<'py>(
    py: Python<'py>,
    usage: &facts::Usage,
    members: &facts::ReplyMembers,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (key, n) in facts::USAGE_KEYS.iter().zip(usage.counts) {
        d.set_item(key, n)?;
    }
    if let Some(n) = usage.one_hour {
        d.set_item(intern!(py, "cache_creation_1h_input_tokens"), n)?;
    }
    for (key, text) in [("model", &members.model), ("timestamp", &members.timestamp)] {
        if let Some(text) = text.as_deref().filter(|t| !t.is_empty()) {
            d.set_item(key, text)?;
        }
    }
    Ok(d)
}

/// Where a line's results' contents stand, packed (`read_ahead.Placed`: `(block, start, end)`
/// each as three little-endian `u32`s); none where a number does not fit (no line is that long).
fn packed_spans(spans: &[facts::Span]) -> Vec<u8> {
    let mut packed = Vec::with_capacity(12 * spans.len());
    for (block, at) in spans {
        for n in [*block, at.start, at.end] {
            let Ok(n) = u32::try_from(n) else {
                return Vec::new();
            };
            packed.extend_from_slice(&n.to_le_bytes());
        }
    }
    packed
}

/// What `LineFacts.entries` read: the entries, where it stopped, the lines read, the blank lines
/// in a row, the stopping line's reply, and what the replies read among the entries recorded.
type Entries<'py> = (
    Vec<Bound<'py, PyAny>>,
    usize,
    usize,
    usize,
    Option<Reply<'py>>,
    Recorded<'py>,
);

/// What replies recorded (`LineFacts.entries`): each usage with its message's position, the last
/// model named and the last format `compactlab convert` recorded (None: none was).
type Recorded<'py> = (
    Vec<(i64, Bound<'py, PyDict>)>,
    Option<String>,
    Option<String>,
);

/// A reply read: its Entry's arguments, its other members' JSON object (None: it has none).
type Reply<'py> = (Bound<'py, PyTuple>, Option<Bound<'py, PyBytes>>);
/// A reply read with where its results' contents stand on its line (`read_ahead.Placed`).
type PlacedReply<'py> = (
    Bound<'py, PyTuple>,
    Option<Bound<'py, PyBytes>>,
    Bound<'py, PyBytes>,
);

impl LineFacts {
    /// What `read` gives of a line's facts `f` and its other members' spans `others`: the
    /// Entry's arguments, and those members as a JSON object of their own (None: none).
    fn reply<'py>(
        &self,
        py: Python<'py>,
        bytes: &[u8],
        f: &facts::Facts,
        others: &[(usize, usize)],
        origin: i64,
    ) -> PyResult<Reply<'py>> {
        let rest = (!others.is_empty()).then(|| Self::members(py, bytes, others));
        Ok((PyTuple::new(py, self.entry_args(py, f, origin)?)?, rest))
    }

    /// The `LazyEntry` of a line read (`make`: its class's `__new__`, the class and the empty
    /// frozenset, its `changed`), made as its `__init__` makes one from its facts (`entry_args`)
    /// and `lazy`, its id sets left to be made when first read (the reference: the tests hold every
    /// slot of one made here to one it makes) without running its Python.
    fn lazy_entry<'py>(
        py: Python<'py>,
        make: LazyMaker<'_, 'py>,
        args: &[Bound<'py, PyAny>],
        lazy: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (new, class, no_ids, members) = make;
        let entry = match members {
            Some((_, Some(alloc))) => alloc.object_of(py)?,
            _ => new.call1((class,))?,
        };
        // (the id sets left to be made when first read, as `__init__` leaves them)
        let none = py.None().into_bound(py);
        if let Some((members, _)) = members {
            let rest = [&none, &none, no_ids, &none, &lazy];
            for (k, value) in args.iter().take(10).chain(rest).enumerate() {
                members.set(&entry, k, value)?;
            }
            return Ok(entry);
        }
        let names = [
            intern!(py, "chars"),
            intern!(py, "role"),
            intern!(py, "origin"),
            intern!(py, "tool_use_ids"),
            intern!(py, "tool_names"),
            intern!(py, "use_files"),
            intern!(py, "results"),
            intern!(py, "misplaced_results"),
            intern!(py, "empty"),
            intern!(py, "has_text"),
        ];
        for (name, value) in names.into_iter().zip(args.iter()) {
            entry.setattr(name, value)?;
        }
        entry.setattr(intern!(py, "_use_set"), &none)?;
        entry.setattr(intern!(py, "_result_set"), &none)?;
        entry.setattr(intern!(py, "changed"), no_ids)?;
        entry.setattr(intern!(py, "_message"), py.None())?;
        entry.setattr(intern!(py, "_lazy"), lazy)?;
        Ok(entry)
    }

    /// The members of `class` `lazy_entry` fills where they are its slots (None: it sets them
    /// by name), looked up once for the first class given (another one: by name).
    fn members_of(&self, class: &Bound<'_, PyType>) -> PyResult<Option<&EntryMaking>> {
        let py = class.py();
        if self.members.get().is_none() {
            let found = match Members::of(class, &ENTRY_FACTS)? {
                Some(members) => Some((members, Alloc::object(class)?)),
                None => None,
            };
            let _ = self.members.set((class.clone().unbind(), found));
        }
        Ok(match self.members.get() {
            Some((known, members)) if known.bind(py).is(class) => members.as_ref(),
            _ => None,
        })
    }

    /// A reply's other members (at their spans on `line`) as a JSON object of their own.
    fn members<'py>(
        py: Python<'py>,
        line: &[u8],
        others: &[(usize, usize)],
    ) -> Bound<'py, PyBytes> {
        let mut rest = Vec::with_capacity(2 + others.iter().map(|(a, b)| b - a + 1).sum::<usize>());
        rest.push(b'{');
        for (k, &(a, b)) in others.iter().enumerate() {
            if k > 0 {
                rest.push(b',');
            }
            rest.extend_from_slice(&line[a..b]);
        }
        rest.push(b'}');
        PyBytes::new(py, &rest)
    }

    /// An Entry's arguments after its message (`read`'s facts).
    fn entry_args<'py>(
        &self,
        py: Python<'py>,
        f: &facts::Facts,
        origin: i64,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let role = match f.role {
            facts::Role::User => intern!(py, "user"),
            facts::Role::Assistant => intern!(py, "assistant"),
        };
        let ids = PyTuple::new(py, f.uses.iter().map(|u| u.id.as_str()))?;
        let names = PyTuple::new(py, f.uses.iter().map(|u| u.name.as_str()))?;
        let mut files = Vec::with_capacity(f.uses.len());
        for u in &f.uses {
            files.push(PyTuple::new(py, u.files.iter().map(String::as_str))?);
        }
        let (new_tuple, class) = (self.result_fact.0.bind(py), self.result_fact.1.bind(py));
        let mut results = Vec::with_capacity(f.results.len());
        for r in &f.results {
            results.push(match &self.result_fact.2 {
                Some(alloc) => alloc.tuple_of(
                    py,
                    [
                        r.block.into_pyobject(py)?.into_any(),
                        PyString::new(py, &r.tool_use_id).into_any(),
                        r.size.into_pyobject(py)?.into_any(),
                        pyo3::types::PyBool::new(py, r.is_str).to_owned().into_any(),
                        pyo3::types::PyBool::new(py, r.is_error)
                            .to_owned()
                            .into_any(),
                        r.json_size.into_pyobject(py)?.into_any(),
                    ],
                )?,
                None => new_tuple.call1((
                    class,
                    (
                        r.block,
                        r.tool_use_id.as_str(),
                        r.size,
                        r.is_str,
                        r.is_error,
                        r.json_size,
                    ),
                ))?,
            });
        }
        let misplaced = PyTuple::new(py, f.misplaced.iter().map(String::as_str))?;
        Ok(vec![
            f.chars.into_pyobject(py)?.into_any(),
            role.clone().into_any(),
            origin.into_pyobject(py)?.into_any(),
            ids.into_any(),
            names.into_any(),
            PyTuple::new(py, files)?.into_any(),
            PyTuple::new(py, results)?.into_any(),
            misplaced.into_any(),
            pyo3::types::PyBool::new(py, f.empty).to_owned().into_any(),
            pyo3::types::PyBool::new(py, f.has_text)
                .to_owned()
                .into_any(),
        ])
    }
}

/// `RunEnv.new_entry(message, by, call)` made here for a message of one string content (a
/// summary, its acknowledgement, snip's placeholder), without running Python: the run's next origin
/// taken, what made it and at which call noted in the run's ledger as Python notes them, its
/// `Entry` made with the facts `build_entry` gives such a message (`make_entry`, the reference:
/// the tests hold every slot of one made here to one it makes). Python makes it where `new_entry`
/// is not `RunEnv`'s own (a test's), or where the content holds a sized placeholder.
pub(crate) struct MadeEntries {
    env: Py<PyAny>,
    entry: Py<PyType>,
    new: Py<PyAny>,
    members: Members,
}

/// The characters of `{"role":,"content":}`: a message's compact JSON but its two strings.
const MESSAGE_CHARS: usize = 20;

impl MadeEntries {
    /// What makes the messages `new_entry` makes, where it is `RunEnv.new_entry` (else None).
    pub(crate) fn of(new_entry: &Bound<'_, PyAny>) -> PyResult<Option<Self>> {
        let py = new_entry.py();
        let own = py
            .import("compactlab.engine.layers.base")?
            .getattr("RunEnv")?
            .getattr("new_entry")?;
        let (Ok(func), Ok(env)) = (
            new_entry.getattr(intern!(py, "__func__")),
            new_entry.getattr(intern!(py, "__self__")),
        ) else {
            return Ok(None);
        };
        if !func.is(&own) {
            return Ok(None);
        }
        let entry = py
            .import("compactlab.transcripts.messages")?
            .getattr("Entry")?
            .cast_into::<PyType>()?;
        let Some(members) = Members::of(&entry, &ENTRY_FACTS)? else {
            return Ok(None);
        };
        Ok(Some(MadeEntries {
            env: env.unbind(),
            new: entry.getattr(intern!(py, "__new__"))?.unbind(),
            entry: entry.unbind(),
            members,
        }))
    }

    /// The `Entry` of `message` (`{"role": role, "content": content}`), made by `by` at `call`;
    /// None where Python makes it (a sized placeholder in `content`).
    pub(crate) fn made<'py>(
        &self,
        message: &Bound<'py, PyDict>,
        (role, content): (&str, &str),
        by: &str,
        call: usize,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        if content.contains(MARK) {
            return Ok(None);
        }
        let py = message.py();
        let env = self.env.bind(py);
        let origin: i64 = env.getattr(intern!(py, "_next_origin"))?.extract()?;
        env.setattr(intern!(py, "_next_origin"), origin - 1)?;
        let ledger = env.getattr(intern!(py, "ledger"))?;
        ledger
            .getattr(intern!(py, "made_by"))?
            .set_item(origin, by)?;
        ledger
            .getattr(intern!(py, "made_at"))?
            .set_item(origin, call)?;
        let entry = self.new.bind(py).call1((self.entry.bind(py),))?;
        entry.setattr(intern!(py, "message"), message)?;
        let chars =
            MESSAGE_CHARS + facts::json_string_chars(role) + facts::json_string_chars(content);
        let empty = content.is_empty();
        let has_text = !empty && !content.chars().all(facts::py_space);
        let none = PyTuple::empty(py).into_any();
        let no_ids = pyo3::types::PyFrozenSet::empty(py)?.into_any();
        let facts = [
            chars.into_pyobject(py)?.into_any(),
            PyString::new(py, role).into_any(),
            origin.into_pyobject(py)?.into_any(),
            none.clone(),
            none.clone(),
            none.clone(),
            none.clone(),
            none,
            pyo3::types::PyBool::new(py, empty).to_owned().into_any(),
            pyo3::types::PyBool::new(py, has_text).to_owned().into_any(),
            no_ids.clone(),
            no_ids.clone(),
            no_ids,
        ];
        for (k, value) in facts.iter().enumerate() {
            self.members.set(&entry, k, value)?;
        }
        Ok(Some(entry))
    }
}

/// `MadeEntries` asked of `new_entry` for `message` (a dict of a role and a string content), made
/// by `by` at `call`: the `Entry` made here, or None where Python makes it. For the tests, which
/// hold it to `RunEnv.new_entry`.
#[pyfunction]
fn made_entry<'py>(
    new_entry: &Bound<'py, PyAny>,
    message: &Bound<'py, PyDict>,
    by: &str,
    call: usize,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = message.py();
    let Some(made) = MadeEntries::of(new_entry)? else {
        return Ok(None);
    };
    let (Some(role), Some(content)) = (
        message.get_item(intern!(py, "role"))?,
        message.get_item(intern!(py, "content"))?,
    ) else {
        return Ok(None);
    };
    let (role, content) = (
        role.cast_into::<PyString>()?,
        content.cast_into::<PyString>()?,
    );
    made.made(message, (role.to_str()?, content.to_str()?), by, call)
}

/// What makes micro's copy of a message, one tool result's content replaced, without running its
/// Python (`Entry.with_result_content` and `read_ahead.LazyEntry.with_result_content`, the
/// references: the tests hold every slot of a copy made here to one they make): `LazyEntry`,
/// `ResultFact` and `Entry`, and the `__new__` each is made by.
#[pyclass(module = "compactlab._native", frozen)]
pub(crate) struct EntryCopies {
    class: Py<PyType>,
    new: Py<PyAny>,
    result_fact: Py<PyType>,
    new_tuple: Py<PyAny>,
    entry: Py<PyType>,
    new_entry: Py<PyAny>,
    /// the members (`members::ENTRY_FACTS`) of `LazyEntry` and of `Entry`
    members: (Option<Members>, Option<Members>),
    /// what makes a `LazyEntry`, an `Entry` and a `ResultFact` without calling its `__new__`
    /// (`Alloc`), where one does
    allocs: [Option<Alloc>; 3],
}

/// The facts (`members::ENTRY_FACTS`) a copy shares with its original: all but its length, its
/// results and its changed blocks, which `made` gives it (a `LazyEntry`'s own, by its caller).
const SHARED_FACTS: [usize; 10] = [1, 2, 3, 4, 5, 7, 8, 9, 10, 11];

#[pymethods]
impl EntryCopies {
    #[new]
    fn new(
        lazy_entry: Bound<'_, PyType>,
        result_fact: Bound<'_, PyType>,
        entry: Bound<'_, PyType>,
    ) -> PyResult<Self> {
        let py = lazy_entry.py();
        let members = (
            Members::of(&lazy_entry, &ENTRY_FACTS)?,
            Members::of(&entry, &ENTRY_FACTS)?,
        );
        let allocs = [
            Alloc::object(&lazy_entry)?,
            Alloc::object(&entry)?,
            Alloc::tuple(&result_fact)?,
        ];
        Ok(EntryCopies {
            members,
            allocs,
            new: lazy_entry.getattr(intern!(py, "__new__"))?.unbind(),
            class: lazy_entry.unbind(),
            new_tuple: py
                .get_type::<PyTuple>()
                .getattr(intern!(py, "__new__"))?
                .unbind(),
            result_fact: result_fact.unbind(),
            new_entry: entry.getattr(intern!(py, "__new__"))?.unbind(),
            entry: entry.unbind(),
        })
    }

    /// `entry.with_result_content(k, text)` made here where `entry` is a `LazyEntry` left unread
    /// or a plain `Entry` whose content is a list of plain dicts, its k-th result's content
    /// measured when it was read, and `text` holds no sized placeholder; else None (Python makes
    /// it).
    fn with_result<'py>(
        &self,
        entry: &Bound<'py, PyAny>,
        k: usize,
        text: &str,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.copy(entry, k, text)
    }
}

/// What a copy of a message with its k-th result's content replaced has of its own: its results,
/// the block replaced, its length and the blocks changed.
struct Replaced<'py> {
    results: Bound<'py, PyTuple>,
    block: Bound<'py, PyAny>,
    chars: i64,
    changed: Bound<'py, pyo3::types::PyFrozenSet>,
}

impl EntryCopies {
    /// The plain `Entry` class, whose messages are in hand.
    pub(crate) fn entry_class(&self, py: Python<'_>) -> Py<PyType> {
        self.entry.clone_ref(py)
    }

    pub(crate) fn copy<'py>(
        &self,
        entry: &Bound<'py, PyAny>,
        k: usize,
        text: &str,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = entry.py();
        if text.contains(MARK) {
            return Ok(None);
        }
        let kind = entry.get_type();
        if kind.is(self.class.bind(py)) {
            self.copy_left(entry, k, text)
        } else if kind.is(self.entry.bind(py)) {
            self.copy_in_hand(entry, k, text)
        } else {
            Ok(None)
        }
    }

    /// The facts a copy has of its own (`Entry.results_with`, the length by difference: the
    /// replaced content's JSON length measured when it was read), None where that length was not.
    fn replaced<'py>(
        &self,
        entry: &Bound<'py, PyAny>,
        k: usize,
        text: &str,
    ) -> PyResult<Option<Replaced<'py>>> {
        let py = entry.py();
        let Ok(results) = members::fact(entry, Fact::Results)?.cast_into::<PyTuple>() else {
            return Ok(None);
        };
        if k >= results.len() {
            return Ok(None);
        }
        let Ok(fact) = results.get_item(k)?.cast_into::<PyTuple>() else {
            return Ok(None);
        };
        if fact.len() != 6 {
            return Ok(None);
        }
        let json_size: i64 = fact.get_item(5)?.extract()?;
        if json_size < 0 {
            return Ok(None);
        }
        // (`json_len` of the text: its JSON string's characters; `sized_len`: its own)
        let new_json = facts::json_string_chars(text) as i64;
        let size = text.chars().count() as i64;
        let chars: i64 = members::fact(entry, Fact::Chars)?.extract()?;
        let block = fact.get_item(0)?;
        let replaced = match &self.allocs[2] {
            Some(alloc) => alloc.tuple_of(
                py,
                [
                    block.clone(),
                    fact.get_item(1)?,
                    size.into_pyobject(py)?.into_any(),
                    pyo3::types::PyBool::new(py, true).to_owned().into_any(),
                    fact.get_item(4)?,
                    new_json.into_pyobject(py)?.into_any(),
                ],
            )?,
            None => self.new_tuple.bind(py).call1((
                self.result_fact.bind(py),
                (
                    &block,
                    fact.get_item(1)?,
                    size,
                    true,
                    fact.get_item(4)?,
                    new_json,
                ),
            ))?,
        };
        let results = PyTuple::new(
            py,
            results
                .iter()
                .enumerate()
                .map(|(i, r)| if i == k { replaced.clone() } else { r }),
        )?;
        let changed = members::fact(entry, Fact::Changed)?;
        let mut blocks = Vec::with_capacity(1);
        if changed.len()? > 0 {
            blocks = members::items(&changed)?.collect::<PyResult<Vec<_>>>()?;
        }
        blocks.push(block.clone());
        Ok(Some(Replaced {
            results,
            block,
            chars: chars - json_size + new_json,
            changed: pyo3::types::PyFrozenSet::new(py, blocks)?,
        }))
    }

    /// A copy made by `new` of `class`, its own facts `own`, the others its original's objects.
    fn made<'py>(
        &self,
        new: &Bound<'py, PyAny>,
        class: &Bound<'py, PyType>,
        entry: &Bound<'py, PyAny>,
        own: &Replaced<'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = entry.py();
        let alloc = self.allocs[..2]
            .iter()
            .flatten()
            .find(|a| a.class().bind(py).is(class));
        let copy = match alloc {
            Some(alloc) => alloc.object_of(py)?,
            None => new.call1((class,))?,
        };
        let members = if class.is(self.class.bind(py)) {
            self.members.0.as_ref()
        } else if class.is(self.entry.bind(py)) {
            self.members.1.as_ref()
        } else {
            None
        };
        if let Some(m) = members {
            m.set(
                &copy,
                Fact::Chars as usize,
                &own.chars.into_pyobject(py)?.into_any(),
            )?;
            for k in SHARED_FACTS {
                m.set(&copy, k, &m.get(entry, k)?)?;
            }
            m.set(&copy, Fact::Results as usize, own.results.as_any())?;
            m.set(&copy, Fact::Changed as usize, own.changed.as_any())?;
            return Ok(copy);
        }
        copy.setattr(intern!(py, "chars"), own.chars)?;
        // (the facts a result's new content leaves as they were: its original's objects)
        for name in [
            intern!(py, "role"),
            intern!(py, "origin"),
            intern!(py, "tool_use_ids"),
            intern!(py, "tool_names"),
            intern!(py, "use_files"),
            intern!(py, "misplaced_results"),
            intern!(py, "empty"),
            intern!(py, "has_text"),
            intern!(py, "_use_set"),
            intern!(py, "_result_set"),
        ] {
            copy.setattr(name, entry.getattr(name)?)?;
        }
        copy.setattr(intern!(py, "results"), &own.results)?;
        copy.setattr(intern!(py, "changed"), &own.changed)?;
        Ok(copy)
    }

    /// A `LazyEntry` left unread: its copy left unread too, the new content one more patch.
    fn copy_left<'py>(
        &self,
        entry: &Bound<'py, PyAny>,
        k: usize,
        text: &str,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = entry.py();
        if !members::fact(entry, Fact::Message)?.is_none() {
            return Ok(None);
        }
        let Ok(lazy) = members::fact(entry, Fact::Lazy)?.cast_into::<PyTuple>() else {
            return Ok(None);
        };
        if lazy.len() != 5 {
            return Ok(None);
        }
        let Ok(patches) = lazy.get_item(3)?.cast_into::<PyTuple>() else {
            return Ok(None);
        };
        let Some(own) = self.replaced(entry, k, text)? else {
            return Ok(None);
        };
        let text = PyString::new(py, text);
        let mut patched: Vec<Bound<'py, PyAny>> = patches.iter().collect();
        patched.push(PyTuple::new(py, [&own.block, text.as_any()])?.into_any());
        let patches = PyTuple::new(py, patched)?;
        let lazy = PyTuple::new(
            py,
            [
                lazy.get_item(0)?,
                lazy.get_item(1)?,
                lazy.get_item(2)?,
                patches.into_any(),
                lazy.get_item(4)?,
            ],
        )?;
        let copy = self.made(self.new.bind(py), self.class.bind(py), entry, &own)?;
        copy.setattr(intern!(py, "_message"), py.None())?;
        copy.setattr(intern!(py, "_lazy"), lazy)?;
        Ok(Some(copy))
    }

    /// A plain `Entry`: its message copied as `with_result_content` copies it (the message, its
    /// content list and the result's block each a new plain object, the block's `content` replaced
    /// in its place), where each is a plain dict or list and the block has a `content`.
    fn copy_in_hand<'py>(
        &self,
        entry: &Bound<'py, PyAny>,
        k: usize,
        text: &str,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = entry.py();
        let Ok(message) = entry
            .getattr(intern!(py, "message"))?
            .cast_into_exact::<PyDict>()
        else {
            return Ok(None);
        };
        let Some(content) = message.get_item(intern!(py, "content"))? else {
            return Ok(None);
        };
        let Ok(content) = content.cast_into_exact::<PyList>() else {
            return Ok(None);
        };
        let Some(own) = self.replaced(entry, k, text)? else {
            return Ok(None);
        };
        let Ok(at) = own.block.extract::<usize>() else {
            return Ok(None);
        };
        if at >= content.len() {
            return Ok(None);
        }
        let Ok(old) = content.get_item(at)?.cast_into_exact::<PyDict>() else {
            return Ok(None);
        };
        if !old.contains(intern!(py, "content"))? {
            return Ok(None);
        }
        let block = old.copy()?;
        block.set_item(intern!(py, "content"), text)?;
        let blocks = PyList::new(py, content.iter())?;
        blocks.set_item(at, block)?;
        let copied = message.copy()?;
        copied.set_item(intern!(py, "content"), blocks)?;
        let copy = self.made(self.new_entry.bind(py), self.entry.bind(py), entry, &own)?;
        copy.setattr(intern!(py, "message"), copied)?;
        Ok(Some(copy))
    }
}

/// `value` (a message) made anew of `dict_class` and `list_class` instances, the read-only
/// containers a custom step is given (`seam::Containers`; `custom._read_only` is the reference).
#[pyfunction]
fn read_only<'py>(
    value: &Bound<'py, PyAny>,
    dict_class: Bound<'py, PyType>,
    list_class: Bound<'py, PyType>,
) -> PyResult<Bound<'py, PyAny>> {
    seam::Containers::new(dict_class, list_class).read_only(value)
}

/// A model's rates as Python hands them (`pricing._rates`): `(input, cache_read, cache_write_5m,
/// cache_write_1h, output)`.
type RatesArg = (f64, f64, f64, f64, f64);
/// A model's prices as Python hands them: its rates and its tiers, `(start, rates)` each.
type PricesArg = (RatesArg, Vec<(i64, RatesArg)>);
/// The provider's cache as Python hands it: `(caches, reply_cached, granularity, minimum, lifetime)`.
type RulesArg = (bool, bool, i64, i64, f64);

fn rates_of(
    (input, cache_read, cache_write_5m, cache_write_1h, output): RatesArg,
) -> pricing::Rates {
    pricing::Rates {
        input,
        cache_read,
        cache_write_5m,
        cache_write_1h,
        output,
    }
}

/// The table of prices Python hands over, each with its tiers, for `calls` calls; a call priced at
/// prices not in it (`index`; empty: every call at the first) is an error. (No call, no prices: a
/// transcript whose one message has no reply.)
fn prices_table(
    prices: Vec<PricesArg>,
    index: &[usize],
    calls: usize,
) -> PyResult<Vec<pricing::Prices>> {
    let prices: Vec<pricing::Prices> = prices
        .into_iter()
        .map(|(base, tiers)| pricing::Prices {
            base: rates_of(base),
            tiers: tiers
                .into_iter()
                .map(|(start, r)| (start, rates_of(r)))
                .collect(),
        })
        .collect();
    if (prices.is_empty() && calls > 0) || index.iter().any(|&i| i >= prices.len()) {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "a call priced at prices not given",
        ));
    }
    Ok(prices)
}

fn pricing_rules(
    (caches, reply_cached, granularity, minimum, lifetime): RulesArg,
) -> pricing::Rules {
    pricing::Rules {
        caches,
        reply_cached,
        granularity,
        minimum,
        lifetime,
    }
}

/// The usage keys the pricing reads, in `pricing::Used`'s order (`model.USAGE_KEYS` and the 1-hour
/// writes).
const USED_KEYS: [&str; 5] = [
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
    "cache_creation_1h_input_tokens",
];

/// Each call's recorded usage (`calls_usage`: a usage dict each, `{}` where it recorded none) as
/// the pricing reads it, and whether every call names its time as text or not at all (as
/// `pricing._calls_of` reads it). None where Python reads them: an item not a dict, a count not a
/// whole number of 64 bits (`usage.get(key, 0)`: absent is 0), a model not a string.
fn used_of(calls_usage: &Bound<'_, PyList>) -> PyResult<Option<(Vec<pricing::Used>, bool)>> {
    let py = calls_usage.py();
    let keys = USED_KEYS.map(|k| PyString::intern(py, k));
    let (model_key, time_key) = (intern!(py, "model"), intern!(py, "timestamp"));
    let ids = PyDict::new(py);
    let mut used = Vec::with_capacity(calls_usage.len());
    let mut plain_times = true;
    for item in calls_usage.iter() {
        let Ok(d) = item.cast::<PyDict>() else {
            return Ok(None);
        };
        let mut counts = [0i64; 5];
        for (count, key) in counts.iter_mut().zip(&keys) {
            match d.get_item(key)? {
                None => {}
                Some(v) if v.is_exact_instance_of::<PyInt>() => match v.extract::<i64>() {
                    Ok(n) => *count = n,
                    Err(_) => return Ok(None),
                },
                Some(_) => return Ok(None),
            }
        }
        let model = match d.get_item(model_key)? {
            None => None,
            Some(m) if m.is_none() => None,
            Some(m) if m.is_exact_instance_of::<PyString>() => Some(match ids.get_item(&m)? {
                Some(id) => id.extract::<i64>()?,
                None => {
                    let id = ids.len() as i64;
                    ids.set_item(&m, id)?;
                    id
                }
            }),
            Some(_) => return Ok(None),
        };
        if let Some(t) = d.get_item(time_key)? {
            plain_times &= t.is_none() || t.is_exact_instance_of::<PyString>();
        }
        let [fresh, written, read, output, one_hour] = counts;
        used.push(pricing::Used {
            any: !d.is_empty(),
            fresh,
            written,
            read,
            output,
            one_hour,
            model,
        });
    }
    Ok(Some((used, plain_times)))
}

/// Each call's time (`pricing._calls_of`: `seconds(usage.get("timestamp"))`, the reference) in
/// seconds, None where it names none or none as text: the form recordings write read here
/// (`iso_time::seconds`), any other text by `seconds` (Python's). `calls_usage`: a usage dict each.
#[pyfunction]
fn times_of<'py>(
    calls_usage: &Bound<'py, PyList>,
    seconds: &Bound<'py, PyAny>,
) -> PyResult<Vec<Option<f64>>> {
    let key = intern!(calls_usage.py(), "timestamp");
    calls_usage
        .iter()
        .map(|u| {
            let Some(t) = u.cast::<PyDict>()?.get_item(key)? else {
                return Ok(None);
            };
            let Ok(text) = t.cast::<PyString>() else {
                return Ok(None);
            };
            match text.to_str().ok().and_then(crate::iso_time::seconds) {
                Some(s) => Ok(Some(s)),
                None => seconds.call1((text,))?.extract(),
            }
        })
        .collect()
}

/// `pricing.expected_reads_in_python`, the reference, on each call's usage (`calls_usage`) under
/// `rules`; None where Python reads the usage (`used_of`).
#[pyfunction]
fn expected_reads(
    calls_usage: &Bound<'_, PyList>,
    rules: RulesArg,
) -> PyResult<Option<BTreeMap<usize, i64>>> {
    Ok(
        used_of(calls_usage)?
            .map(|(used, _)| pricing::expected_reads(&used, &pricing_rules(rules))),
    )
}

/// `pricing.recorded_breaks_in_python`, the reference: the recorded cache breaks of the calls
/// (`calls_usage`, `times`: each call's, None or empty: none recorded), `restarted` the calls just
/// after a recorded compaction, `rules` with the cache's lifetime, `expected` the rules' expected
/// reads where the caller has them. None where Python reads the usage, or `expected` lacks a call.
#[pyfunction]
#[pyo3(signature = (calls_usage, times, restarted, rules, expected=None))]
fn recorded_breaks(
    calls_usage: &Bound<'_, PyList>,
    times: Option<Vec<Option<f64>>>,
    restarted: HashSet<usize>,
    rules: RulesArg,
    expected: Option<BTreeMap<usize, i64>>,
) -> PyResult<Option<BTreeMap<usize, i64>>> {
    let Some((used, _)) = used_of(calls_usage)? else {
        return Ok(None);
    };
    Ok(pricing::recorded_breaks(
        &used,
        times.as_deref().unwrap_or_default(),
        &restarted,
        &pricing_rules(rules),
        expected.as_ref(),
    ))
}

/// `pricing.cache_ledger_in_python`'s sums (the reference) of a run's records (the native core's
/// `TurnRecord`s) beside each call's recorded usage: `(calls, modelled read, recorded read,
/// modelled write, recorded write, modelled input cost, per call [call, modelled read, recorded
/// read])`. None where Python reads them: a record of another class, usage not plain whole counts.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn cache_ledger(
    records: &Bound<'_, PyList>,
    calls_usage: &Bound<'_, PyList>,
) -> PyResult<Option<(usize, i64, i64, i64, i64, f64, Vec<[i64; 3]>)>> {
    let Some(calls) = records
        .iter()
        .map(|r| {
            r.cast_into_exact::<TurnRecord>().ok().map(|r| {
                let r = r.borrow();
                pricing::Priced1 {
                    call: r.call,
                    cache_read: r.cache_read_tokens,
                    cache_write: r.cache_write_tokens,
                    input_cost: r.input_cost_usd,
                }
            })
        })
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let Some((used, _)) = used_of(calls_usage)? else {
        return Ok(None);
    };
    let l = pricing::cache_ledger(&calls, &used);
    Ok(Some((
        l.calls,
        l.modelled_read,
        l.read,
        l.modelled_write,
        l.write,
        l.cost,
        l.per_call,
    )))
}

/// `pricing.recorded_of` of a recording's calls (`calls_usage`), each at its prices in the table
/// `prices_looked_up` gave (`prices`, `index`): the input and output cost their usage implies. None
/// where Python reads the usage, or where a call names its time otherwise than as text (Python
/// prices it at that time, not at the one the look-ups were made at).
#[pyfunction]
fn recorded_cost(
    calls_usage: &Bound<'_, PyList>,
    prices: Vec<PricesArg>,
    index: Vec<usize>,
) -> PyResult<Option<(f64, f64)>> {
    Ok(match used_of(calls_usage)? {
        Some((used, _)) if used.is_empty() => Some((0.0, 0.0)),
        Some((used, true)) if index.is_empty() || index.len() >= used.len() => Some(
            pricing::recorded_cost(&used, &prices_table(prices, &index, used.len())?, &index),
        ),
        _ => None,
    })
}

/// `pricing.prices_looked_up_in_python`, the reference: the distinct prices of `n` calls and each
/// call's among them, `prices(model, time)` asked once for each distinct `(model, time)` of a call
/// (`models`, `times`: each call's; None or empty: none named) — the same prices for the same
/// arguments, as `pricing._Prices` gives them — and the prices told apart by value, in the order
/// first met.
#[pyfunction]
#[pyo3(signature = (prices, models, times, n))]
fn prices_looked_up<'py>(
    prices: &Bound<'py, PyAny>,
    models: Option<&Bound<'py, PyList>>,
    times: Option<&Bound<'py, PyList>>,
    n: usize,
) -> PyResult<(Bound<'py, PyList>, Vec<usize>)> {
    let py = prices.py();
    let nothing = py.None().into_bound(py);
    let at = |list: Option<&Bound<'py, PyList>>, i: usize| -> PyResult<Bound<'py, PyAny>> {
        match list {
            Some(l) if !l.is_empty() => l.get_item(i),
            _ => Ok(nothing.clone()),
        }
    };
    let (by_key, seen) = (PyDict::new(py), PyDict::new(py));
    let table = PyList::empty(py);
    let mut index = Vec::with_capacity(n);
    for i in 0..n {
        let key = PyTuple::new(py, [at(models, i)?, at(times, i)?])?;
        if let Some(k) = by_key.get_item(&key)? {
            index.push(k.extract()?);
            continue;
        }
        let p = prices.call1(key.clone())?;
        let k = match seen.get_item(&p)? {
            Some(k) => k.extract()?,
            None => {
                let k = table.len();
                seen.set_item(&p, k)?;
                table.append(&p)?;
                k
            }
        };
        by_key.set_item(key, k)?;
        index.push(k);
    }
    Ok((table, index))
}

/// `pricing.restarted` (`_cache_events`' set, the reference): the calls just after a recorded
/// compaction, from each call's message index (`at`) and the compactions' positions.
#[pyfunction]
fn restarted(at: Vec<i64>, positions: Vec<i64>) -> FxHashSet<usize> {
    crate::pricing::restarted(&at, &positions)
        .into_iter()
        .collect()
}

/// `pricing.price_calls` on `records` (`TurnRecord`s, each settled and priced in place): `prices`
/// the distinct prices, `index` each call's (empty: all the first), `models` each call's model as
/// an id (empty: none named), `times` each call's time, `rules` the cache's `(caches,
/// reply_cached, granularity, minimum, lifetime)`, `replies` each reply's tokens. Returns the raw
/// history's cost, both without caching, and the calls made after the cache expired.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn price_calls(
    records: &Bound<'_, PyList>,
    prices: Vec<PricesArg>,
    index: Vec<usize>,
    models: Vec<Option<i64>>,
    times: Vec<Option<f64>>,
    one_hour: bool,
    breaks: HashMap<usize, i64>,
    expected: HashMap<usize, i64>,
    rules: RulesArg,
    replies: Vec<i64>,
) -> PyResult<(f64, f64, f64, Option<i64>)> {
    let py = records.py();
    let prices = prices_table(prices, &index, records.len())?;
    // (the native core's records read and set directly; the Python engine's by their attributes)
    let native: Option<Vec<Bound<'_, TurnRecord>>> = records
        .iter()
        .map(|r| r.cast_into_exact::<TurnRecord>().ok())
        .collect();
    let mut calls = match &native {
        Some(native) => native
            .iter()
            .map(|r| {
                let r = r.borrow();
                pricing::Call {
                    tokens: r.tokens,
                    raw_tokens: r.raw_tokens,
                    cache_read_tokens: r.cache_read_tokens,
                    cache_write_tokens: 0,
                    input_cost_usd: 0.0,
                }
            })
            .collect(),
        None => records
            .iter()
            .map(|r| {
                Ok(pricing::Call {
                    tokens: r.getattr(intern!(py, "tokens"))?.extract()?,
                    raw_tokens: r.getattr(intern!(py, "raw_tokens"))?.extract()?,
                    cache_read_tokens: r.getattr(intern!(py, "cache_read_tokens"))?.extract()?,
                    cache_write_tokens: 0,
                    input_cost_usd: 0.0,
                })
            })
            .collect::<PyResult<Vec<_>>>()?,
    };
    let run = pricing::Run {
        prices: &prices,
        index: &index,
        models: &models,
        times: &times,
        one_hour,
        breaks: &breaks,
        expected: &expected,
        rules: pricing_rules(rules),
        replies: &replies,
    };
    let priced = pricing::price_calls(&mut calls, &run);
    match &native {
        Some(native) => {
            for (r, c) in native.iter().zip(&calls) {
                let mut r = r.borrow_mut();
                r.cache_read_tokens = c.cache_read_tokens;
                r.cache_write_tokens = c.cache_write_tokens;
                r.input_cost_usd = c.input_cost_usd;
            }
        }
        None => {
            for (r, c) in records.iter().zip(&calls) {
                r.setattr(intern!(py, "cache_read_tokens"), c.cache_read_tokens)?;
                r.setattr(intern!(py, "cache_write_tokens"), c.cache_write_tokens)?;
                r.setattr(intern!(py, "input_cost_usd"), c.input_cost_usd)?;
            }
        }
    }
    Ok((
        priced.raw,
        priced.nocache,
        priced.raw_nocache,
        priced.expired,
    ))
}

/// A Claude Code session read as `transcripts/claude_code.py` reads it (`claude_code::read`), its
/// messages handed on as the Anthropic messages file they make, a piece at a time
/// (`engine/feeds/claude_code_lazily.py`): the file is held open, its blocks read again as they
/// are written.
#[pyclass(module = "compactlab._native")]
struct ClaudeCodeLines {
    file: std::fs::File,
    reading: crate::claude_code::Reading,
}

/// How many bytes of messages `ClaudeCodeLines.chunk` hands on at a time (at least).
const CHUNK: usize = 1 << 20;

#[pymethods]
impl ClaudeCodeLines {
    /// The next messages, one a line (at least `CHUNK` bytes but at the end), or None once all
    /// are handed on; `OSError` where the file no longer holds what was read.
    fn chunk<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let mut out = Vec::with_capacity(CHUNK + (CHUNK >> 2));
        self.reading
            .fill(&self.file, &mut out, CHUNK)
            .map_err(PyErr::from)?;
        Ok((!out.is_empty()).then(|| PyBytes::new(py, &out)))
    }

    /// Each compaction, once every message is handed on: (the messages before it, its summary's
    /// line, its boundary's line or None).
    #[allow(clippy::type_complexity)]
    fn compactions<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<Vec<(usize, Bound<'py, PyBytes>, Option<Bound<'py, PyBytes>>)>> {
        let spans = self.reading.compactions.clone();
        let mut out = Vec::with_capacity(spans.len());
        for (at, summary, boundary) in spans {
            let summary = self.line(py, &summary)?;
            let boundary = boundary.map(|b| self.line(py, &b)).transpose()?;
            out.push((at, summary, boundary));
        }
        Ok(out)
    }

    /// The main session's inline subagent replies' lines (the loader reads their usage).
    fn sidechain_replies<'py>(&mut self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let spans = self.reading.sidechain_replies.clone();
        spans.iter().map(|s| self.line(py, s)).collect()
    }

    /// The lines left out, by why, in the order first met: (the line's `type` as its JSON text,
    /// None where it has none or it is a user line shown in the transcript only; whether it is
    /// that; how many).
    fn ignored<'py>(&self, py: Python<'py>) -> Vec<(Option<Bound<'py, PyBytes>>, bool, u64)> {
        use crate::claude_code::Ignored;
        let ignored = &self.reading.ignored;
        ignored
            .iter()
            .map(|(why, n)| match why {
                Ignored::Kind(Some(text)) => (Some(PyBytes::new(py, text)), false, *n),
                Ignored::Kind(None) => (None, false, *n),
                Ignored::TranscriptOnly => (None, true, *n),
            })
            .collect()
    }

    /// (the version named, whether the file is a subagent's, the inline subagent lines, the
    /// title, the session id)
    fn metadata(&self) -> (Option<String>, bool, u64, Option<String>, Option<String>) {
        let r = &self.reading;
        (
            r.version.clone(),
            r.subagent,
            r.sidechain_lines,
            r.title.clone(),
            r.session_id.clone(),
        )
    }
}

impl ClaudeCodeLines {
    fn line<'py>(
        &mut self,
        py: Python<'py>,
        span: &crate::claude_code::Span,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.reading.bytes(&self.file, span).map_err(PyErr::from)?;
        Ok(PyBytes::new(py, &bytes))
    }
}

/// The Claude Code session at `path` (a regular file) read as the loader reads it, or None where
/// Python reads it (`claude_code::read`; `max_line`, `max_blank`: the reader's limits); an
/// `OSError` where it cannot be read.
#[pyfunction]
fn claude_code_lines(
    path: &str,
    max_line: usize,
    max_blank: usize,
) -> PyResult<Option<ClaudeCodeLines>> {
    let file = std::fs::File::open(path).map_err(PyErr::from)?;
    if !file.metadata().map_err(PyErr::from)?.is_file() {
        return Ok(None);
    }
    let reading = crate::claude_code::read(&file, max_line, max_blank).map_err(PyErr::from)?;
    Ok(reading.map(|reading| ClaudeCodeLines { file, reading }))
}

/// What the Python package may ask of this module (`core.py`'s `NATIVE_API`): bumped with it
/// whenever a class, function or signature here changes, so that a module built from other sources
/// is never used (the package runs on its Python engine and says why).
const API: u32 = 63;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("API", API)?;
    m.add_class::<PromptCache>()?;
    m.add_class::<ResultStrings>()?;
    m.add_class::<KnownNames>()?;
    m.add_class::<InvariantTracker>()?;
    m.add_class::<StreamBaseline>()?;
    m.add_class::<RecallCheck>()?;
    m.add_class::<ProbeLedger>()?;
    m.add_class::<KnownMessages>()?;
    m.add_class::<KnownFacts>()?;
    m.add_class::<EntryCopies>()?;
    m.add_class::<crate::records::TurnRecord>()?;
    m.add_class::<crate::records::CompactionEvent>()?;
    m.add_function(wrap_pyfunction!(crate::records::records_json, m)?)?;
    m.add_function(wrap_pyfunction!(crate::records::calls_csv, m)?)?;
    m.add_function(wrap_pyfunction!(crate::records::record_sums, m)?)?;
    m.add_function(wrap_pyfunction!(runs, m)?)?;
    m.add_function(wrap_pyfunction!(sha256_hex, m)?)?;
    m.add_function(wrap_pyfunction!(crate::package_toml::package_toml, m)?)?;
    m.add_function(wrap_pyfunction!(bootstrap_interval, m)?)?;
    m.add_function(wrap_pyfunction!(log_ndtr, m)?)?;
    m.add_function(wrap_pyfunction!(ledger_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(prices_looked_up, m)?)?;
    m.add_function(wrap_pyfunction!(restarted, m)?)?;
    m.add_function(wrap_pyfunction!(expected_reads, m)?)?;
    m.add_function(wrap_pyfunction!(times_of, m)?)?;
    m.add_function(wrap_pyfunction!(recorded_breaks, m)?)?;
    m.add_function(wrap_pyfunction!(recorded_cost, m)?)?;
    m.add_function(wrap_pyfunction!(cache_ledger, m)?)?;
    m.add_function(wrap_pyfunction!(ledger_losses, m)?)?;
    m.add_function(wrap_pyfunction!(append_losses, m)?)?;
    m.add_function(wrap_pyfunction!(csv_rows, m)?)?;
    m.add_function(wrap_pyfunction!(csv_cell, m)?)?;
    m.add_function(wrap_pyfunction!(brackets, m)?)?;
    m.add_function(wrap_pyfunction!(read_on, m)?)?;
    m.add_function(wrap_pyfunction!(keep_freed, m)?)?;
    m.add_function(wrap_pyfunction!(probes_csv, m)?)?;
    m.add_function(wrap_pyfunction!(compactions_csv, m)?)?;
    m.add_class::<StoredProbes>()?;
    m.add_function(wrap_pyfunction!(tokens, m)?)?;
    m.add_function(wrap_pyfunction!(phrases, m)?)?;
    m.add_function(wrap_pyfunction!(line_refs, m)?)?;
    m.add_function(wrap_pyfunction!(parts, m)?)?;
    m.add_function(wrap_pyfunction!(read_only, m)?)?;
    m.add_function(wrap_pyfunction!(price_calls, m)?)?;
    m.add_class::<ClaudeCodeLines>()?;
    m.add_function(wrap_pyfunction!(claude_code_lines, m)?)?;
    m.add_class::<FrameworkSources>()?;
    m.add_class::<LineFacts>()?;
    m.add_class::<RecentBlocks>()?;
    m.add_function(wrap_pyfunction!(made_entry, m)?)?;
    m.add_class::<crate::turns::KeepingTurns>()?;
    m.add_class::<crate::turns::LayerTurns>()?;
    m.add_class::<crate::turns::CallMeasures>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // (the kinds in the order a listing sorts by: a test holds them to violations.KINDS)
    m.add("VIOLATION_KINDS", violations::Kind::NAMES.to_vec())?;
    Ok(())
}
