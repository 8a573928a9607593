//! A custom step's messages as the seam gives them (`engine/layers/custom.py`): each message made
//! anew of read-only containers (`ReadOnlyDict`, `ReadOnlyList`: a step cannot change what it is
//! given), the strings and numbers shared. `custom._read_only` is the reference; this walks the
//! message once in Rust instead of a comprehension per container in Python.

use pyo3::exceptions::PyRecursionError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyType};

/// Deeper nesting than Python's own recursion limit would allow is refused as Python refuses it.
const MAX_DEPTH: usize = 1000;

/// The classes a message's containers are made of, and those that are walked into.
pub struct Containers<'py> {
    dict: Bound<'py, PyType>,
    list: Bound<'py, PyType>,
}

impl<'py> Containers<'py> {
    pub fn new(dict: Bound<'py, PyType>, list: Bound<'py, PyType>) -> Self {
        Containers { dict, list }
    }

    /// `value` made anew of read-only containers: a dict (of any class) or a list as the top;
    /// within it, only plain dicts and lists and the read-only classes are walked into (another
    /// subclass is kept as it is, as `_read_only` keeps it); anything else is shared.
    pub fn read_only(&self, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if value.is_instance_of::<PyDict>() || value.is_instance_of::<PyList>() {
            self.made(value, 0)
        } else {
            Ok(value.clone())
        }
    }

    /// Whether `value` is walked into: exactly a dict, a list or one of the read-only classes.
    fn walked(&self, value: &Bound<'py, PyAny>) -> bool {
        let t = value.get_type();
        value.is_exact_instance_of::<PyDict>()
            || value.is_exact_instance_of::<PyList>()
            || t.is(&self.dict)
            || t.is(&self.list)
    }

    fn made(&self, value: &Bound<'py, PyAny>, depth: usize) -> PyResult<Bound<'py, PyAny>> {
        if depth > MAX_DEPTH {
            return Err(PyRecursionError::new_err(
                "maximum recursion depth exceeded while making a message read-only",
            ));
        }
        let child = |v: Bound<'py, PyAny>| -> PyResult<Bound<'py, PyAny>> {
            if self.walked(&v) {
                self.made(&v, depth + 1)
            } else {
                Ok(v)
            }
        };
        if let Ok(d) = value.cast::<PyDict>() {
            // (an instance of the read-only class, filled through the C API's `PyDict_SetItem`: the
            // class's own `__setitem__`, which refuses, is Python's and is not called)
            let out = self.dict.call0()?;
            let target = out.cast::<PyDict>()?;
            for (k, v) in d.iter() {
                target.set_item(k, child(v)?)?;
            }
            return Ok(out);
        }
        let l = value.cast::<PyList>()?;
        let out = self.list.call0()?;
        let target = out.cast::<PyList>()?;
        for v in l.iter() {
            target.append(child(v)?)?;
        }
        Ok(out)
    }
}
