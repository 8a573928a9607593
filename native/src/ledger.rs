//! A run's probe ledger held in Rust (`Recall.ledger` on the native core): every probe's outcome,
//! call by call, as the check says it — not a Python `ProbeOutcome` made for each of the 17,000 a
//! replay has, only for those Python reads. To Python it is a sequence of `ProbeOutcome`s (a list
//! of them where it is pickled or compared), which the Python paths append to as they append to a
//! list; probes.csv, the kinds' tallies and the events' losses read its rows here
//! (`bindings.rs`' `probes_csv`, `ledger_kinds` and `ledger_losses`, whose references read a list).

use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PySlice, PyString, PyTuple};

/// A status's code: what the tallies and probes.csv tell apart without reading its text.
pub(crate) const KEPT: u8 = 0;
pub(crate) const RECOVERABLE: u8 = 1;
pub(crate) const LOST: u8 = 2;
/// (a status none of the check's: Python's own append, kept as it came)
pub(crate) const OTHER: u8 = 3;

/// One probe at one call: `ProbeOutcome`'s fields.
pub(crate) struct Row {
    pub call: i64,
    /// the probe's text, kind, source call and source tool, as the probe holds them
    pub probe: [Py<PyAny>; 4],
    pub status: u8,
    pub status_text: Py<PyString>,
    pub by: Py<PyString>,
    /// the call that removed it (-1: not known, or kept)
    pub at: i64,
}

/// How a `ProbeOutcome` is made: its class, made of a tuple of its fields by `tuple.__new__` (as
/// `probes._new` makes one).
pub(crate) struct Outcomes {
    class: Py<PyAny>,
    new_tuple: Py<PyAny>,
}

impl Outcomes {
    pub(crate) fn of(py: Python<'_>, class: Py<PyAny>) -> PyResult<Self> {
        Ok(Outcomes {
            class,
            new_tuple: crate::bindings::tuple_new(py)?,
        })
    }

    /// The outcome of a probe (its text, kind, source call and tool) at `call`.
    fn make<'py>(
        &self,
        call: i64,
        [text, kind, source_call, source_tool]: [Bound<'py, PyAny>; 4],
        status: Bound<'py, PyString>,
        by: Bound<'py, PyString>,
        at: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = status.py();
        let fields = PyTuple::new(
            py,
            [
                call.into_pyobject(py)?.into_any(),
                text,
                kind,
                source_call,
                source_tool,
                status.into_any(),
                by.into_any(),
                at.into_pyobject(py)?.into_any(),
            ],
        )?;
        self.new_tuple.bind(py).call1((self.class.bind(py), fields))
    }
}

/// Where the check appends its outcomes: the run's ledger held here, or a list (a test's, the
/// python core's reference).
pub(crate) enum Ledger<'py> {
    List(Bound<'py, PyList>),
    Rows(Bound<'py, ProbeLedger>),
}

impl<'py> Ledger<'py> {
    pub(crate) fn py(&self) -> Python<'py> {
        match self {
            Ledger::List(l) => l.py(),
            Ledger::Rows(r) => r.py(),
        }
    }

    pub(crate) fn of(ledger: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(rows) = ledger.cast::<ProbeLedger>() {
            return Ok(Ledger::Rows(rows.clone()));
        }
        Ok(Ledger::List(ledger.cast::<PyList>()?.clone()))
    }

    /// A probe's outcome (the call, the probe's text, kind, source call and tool, its status, the
    /// layer that removed it and when) appended: a row, or a `ProbeOutcome` made by `outcomes`.
    pub(crate) fn push(
        &self,
        outcomes: &Outcomes,
        call: i64,
        probe: [Bound<'py, PyAny>; 4],
        status: &Bound<'py, PyString>,
        by: Bound<'py, PyString>,
        at: i64,
    ) -> PyResult<()> {
        match self {
            Ledger::Rows(rows) => rows.borrow_mut().push(call, probe, status, by, at),
            Ledger::List(list) => {
                list.append(outcomes.make(call, probe, status.clone(), by, at)?)
            }
        }
    }
}

/// The most outcomes a ledger makes room for before it is given any (more are added as it grows).
const MAX_ROOM: usize = 1 << 20;

/// The ledger (`probes.ProbeOutcome`, the class its outcomes are made as, given).
#[pyclass(module = "compactlab._native", sequence)]
pub struct ProbeLedger {
    outcomes: Outcomes,
    pub(crate) rows: Vec<Row>,
}

fn code(status: &str) -> u8 {
    match status {
        "kept" => KEPT,
        "recoverable" => RECOVERABLE,
        "lost" => LOST,
        _ => OTHER,
    }
}

impl ProbeLedger {
    /// An outcome the check said, appended.
    pub(crate) fn push<'py>(
        &mut self,
        call: i64,
        probe: [Bound<'py, PyAny>; 4],
        status: &Bound<'py, PyString>,
        by: Bound<'py, PyString>,
        at: i64,
    ) -> PyResult<()> {
        self.rows.push(Row {
            call,
            probe: probe.map(Bound::unbind),
            status: code(status.to_str()?),
            status_text: status.clone().unbind(),
            by: by.unbind(),
            at,
        });
        Ok(())
    }

    /// The row at `k` as the `ProbeOutcome` Python would have appended.
    fn made<'py>(&self, py: Python<'py>, k: usize) -> PyResult<Bound<'py, PyAny>> {
        let r = &self.rows[k];
        self.outcomes.make(
            r.call,
            r.probe.each_ref().map(|f| f.bind(py).clone()),
            r.status_text.bind(py).clone(),
            r.by.bind(py).clone(),
            r.at,
        )
    }

    /// Every outcome, made.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let made = (0..self.rows.len())
            .map(|k| self.made(py, k))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, made)
    }
}

#[pymethods]
impl ProbeLedger {
    /// A ledger of `outcome`s, with room for `rows` of them (the probes of a run where they are
    /// known: its outcomes are not copied as it grows).
    #[new]
    #[pyo3(signature = (outcome, rows = 0))]
    fn new(py: Python<'_>, outcome: Py<PyAny>, rows: usize) -> PyResult<Self> {
        Ok(ProbeLedger {
            outcomes: Outcomes::of(py, outcome)?,
            rows: Vec::with_capacity(rows.min(MAX_ROOM)),
        })
    }

    /// How many outcomes it has room for without growing.
    #[getter]
    fn room(&self) -> usize {
        self.rows.capacity()
    }

    fn __len__(&self) -> usize {
        self.rows.len()
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        at: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(slice) = at.cast::<PySlice>() {
            return self.items(py)?.as_any().get_item(slice); // (a list's own slicing)
        }
        let k: isize = at.extract()?;
        let n = self.rows.len() as isize;
        let k = if k < 0 { k + n } else { k };
        if k < 0 || k >= n {
            return Err(PyIndexError::new_err("ledger index out of range"));
        }
        self.made(py, k as usize)
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.items(py)?.as_any().try_iter()?.into_any())
    }

    /// A `ProbeOutcome` (or any tuple of its eight fields) appended, as to a list.
    fn append(&mut self, outcome: &Bound<'_, PyAny>) -> PyResult<()> {
        let o = outcome
            .cast::<PyTuple>()
            .map_err(|_| PyTypeError::new_err("a ledger holds ProbeOutcomes"))?;
        if o.len() != 8 {
            return Err(PyTypeError::new_err("a ledger holds ProbeOutcomes"));
        }
        let status = o.get_item(5)?.cast_into::<PyString>()?;
        let by = o.get_item(6)?.cast_into::<PyString>()?;
        let probe = [
            o.get_item(1)?,
            o.get_item(2)?,
            o.get_item(3)?,
            o.get_item(4)?,
        ];
        self.push(
            o.get_item(0)?.extract()?,
            probe,
            &status,
            by,
            o.get_item(7)?.extract()?,
        )
    }

    /// Equal to another ledger, or to a list, outcome by outcome.
    fn __eq__<'py>(&self, py: Python<'py>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        let theirs = if let Ok(l) = other.cast::<ProbeLedger>() {
            l.borrow().items(py)?
        } else if let Ok(l) = other.cast::<PyList>() {
            l.clone()
        } else {
            return Ok(py.NotImplemented());
        };
        Ok(self
            .items(py)?
            .eq(theirs)?
            .into_pyobject(py)?
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "ProbeLedger({})",
            self.items(py)?.repr()?.to_str()?
        ))
    }

    /// Pickled as the list of its outcomes (a worker's run read back where no ledger is built).
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let list = py.get_type::<PyList>();
        PyTuple::new(
            py,
            [
                list.into_any(),
                PyTuple::new(py, [self.items(py)?])?.into_any(),
            ],
        )
    }
}
