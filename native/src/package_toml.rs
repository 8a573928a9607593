//! A TOML document the package ships (a preset, the price corrections, the priors) read into the
//! Python objects `tomllib.loads` makes of it, by the `toml` crate: importing `tomllib` costs a
//! replay more than all of its own parsing (about 36 M instructions, its regular expressions
//! compiled at import). Only the package's own documents come here (`plumbing/package_toml.py`),
//! each held to `tomllib`'s reading in the tests; a user's TOML is read by `tomllib`, whose errors
//! and TOML version are the ones documented.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// The document `text` as `tomllib.loads` reads it: a dict (in document order) of strings,
/// integers, floats, booleans, lists and dicts; None where it is not TOML or holds a date or a time
/// (`tomllib` reads those into `datetime` objects: left to it).
#[pyfunction]
pub(crate) fn package_toml<'py>(
    py: Python<'py>,
    text: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Ok(table) = text.parse::<toml::Table>() else {
        return Ok(None);
    };
    table_of(py, &table)
}

fn table_of<'py>(py: Python<'py>, table: &toml::Table) -> PyResult<Option<Bound<'py, PyAny>>> {
    let dict = PyDict::new(py);
    for (key, value) in table {
        let Some(value) = value_of(py, value)? else {
            return Ok(None);
        };
        dict.set_item(key, value)?;
    }
    Ok(Some(dict.into_any()))
}

fn value_of<'py>(py: Python<'py>, value: &toml::Value) -> PyResult<Option<Bound<'py, PyAny>>> {
    use toml::Value;
    Ok(Some(match value {
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Integer(n) => n.into_pyobject(py)?.into_any(),
        Value::Float(x) => x.into_pyobject(py)?.into_any(),
        Value::Boolean(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Datetime(_) => return Ok(None),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                let Some(item) = value_of(py, item)? else {
                    return Ok(None);
                };
                list.append(item)?;
            }
            list.into_any()
        }
        Value::Table(table) => return table_of(py, table),
    }))
}
