//! A tool result's content replaced in a message of the context: what micro does to each result
//! it clears (`Entry.with_result_content` in `transcripts/messages.py`, and `LazyEntry`'s in
//! `engine/feeds/read_ahead.py`, a message left unread in its file: the references), made here
//! without Python's frames. The new `Entry` is the one Python makes: the message copied with the
//! block's content replaced, its length by difference, the result's facts and the changed blocks.
//!
//! Made here only where a string replaces a string and neither holds a sized placeholder (whose
//! length counts as its N): any other entry, message or content is made by the reference.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFrozenSet, PyInt, PyList, PyString, PyTuple, PyType};

use crate::facts::json_str_len;

static ENTRY: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static LAZY_ENTRY: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static RESULT_FACT: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static TUPLE_NEW: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `messages.SIZED_MARK`: the character a sized placeholder starts with
const SIZED_MARK: char = '\u{fdd0}';

/// `entry.with_result_content(k, text)`: made here where it can be, else by the reference.
pub fn with_result_content<'py>(
    entry: &Bound<'py, PyAny>,
    k: usize,
    text: &str,
) -> PyResult<Bound<'py, PyAny>> {
    match replaced(entry, k, text)? {
        Some(made) => Ok(made),
        None => entry.call_method1(intern!(entry.py(), "with_result_content"), (k, text)),
    }
}

/// The kind of entry: a plain `Entry`, a `LazyEntry`, or another (None: the reference makes it).
fn lazy_or_plain(entry: &Bound<'_, PyAny>) -> PyResult<Option<bool>> {
    let py = entry.py();
    let ty = entry.get_type();
    if ty.is(ENTRY.import(py, "compactlab.transcripts.messages", "Entry")?) {
        return Ok(Some(false));
    }
    // (a LazyEntry's module is loaded where there is one: the name is asked first, so a replay
    // without one never imports it)
    if ty.name()? == "LazyEntry"
        && ty.is(LAZY_ENTRY.import(py, "compactlab.engine.feeds.read_ahead", "LazyEntry")?)
    {
        return Ok(Some(true));
    }
    Ok(None)
}

/// orjson's nesting limit: a value deeper than this is the reference's to measure (and refuse)
const MAX_DEPTH: usize = 254;

/// `messages.json_len(value)`: the length in characters of `value`'s compact JSON as orjson writes
/// it, for a value of dicts with string keys, lists, strings without a sized placeholder, 64-bit
/// integers, booleans and None (the exact types); None for anything else (a float among them,
/// whose text is orjson's to write).
fn json_len(value: &Bound<'_, PyAny>, depth: usize) -> PyResult<Option<usize>> {
    if depth > MAX_DEPTH {
        return Ok(None);
    }
    if let Ok(text) = value.cast_exact::<PyString>() {
        return Ok(match text.to_str() {
            Ok(t) if !t.contains(SIZED_MARK) => Some(json_str_len(t)),
            _ => None,
        });
    }
    if let Ok(dict) = value.cast_exact::<PyDict>() {
        let mut n = 1 + dict.len().max(1);
        for (key, item) in dict.iter() {
            let (Some(k), Some(v)) = (json_len(&key, depth + 1)?, json_len(&item, depth + 1)?)
            else {
                return Ok(None);
            };
            if !key.is_exact_instance_of::<PyString>() {
                return Ok(None);
            }
            n += k + 1 + v;
        }
        return Ok(Some(n));
    }
    if let Ok(list) = value.cast_exact::<PyList>() {
        let mut n = 1 + list.len().max(1);
        for item in list.iter() {
            let Some(v) = json_len(&item, depth + 1)? else {
                return Ok(None);
            };
            n += v;
        }
        return Ok(Some(n));
    }
    if value.is_none() {
        return Ok(Some(4));
    }
    if let Ok(b) = value.cast_exact::<PyBool>() {
        return Ok(Some(if b.is_true() { 4 } else { 5 }));
    }
    if value.is_exact_instance_of::<PyInt>() {
        if let Ok(i) = value.extract::<i64>() {
            return Ok(Some(decimal_len(i.unsigned_abs()) + usize::from(i < 0)));
        }
        if let Ok(u) = value.extract::<u64>() {
            return Ok(Some(decimal_len(u)));
        }
    }
    Ok(None)
}

/// The digits of `n` in decimal.
fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// The replaced entry, or None where the reference makes it.
fn replaced<'py>(
    entry: &Bound<'py, PyAny>,
    k: usize,
    text: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    if text.contains(SIZED_MARK) {
        return Ok(None);
    }
    let Some(lazy) = lazy_or_plain(entry)? else {
        return Ok(None);
    };
    let py = entry.py();
    let results = entry.getattr(intern!(py, "results"))?;
    let Ok(results) = results.cast::<PyTuple>() else {
        return Ok(None);
    };
    let fact = results.get_item(k)?;
    let Ok(fact) = fact.cast::<PyTuple>() else {
        return Ok(None);
    };
    // ResultFact: (block, tool_use_id, size, is_str, is_error, json_size)
    let block: usize = fact.get_item(0)?.extract()?;
    let json_size: i64 = fact.get_item(5)?.extract()?;
    let chars: i64 = entry.getattr(intern!(py, "chars"))?.extract()?;
    let new_json = json_str_len(text) as i64;
    let size = text.chars().count() as i64;
    let with_fact = |measured: i64| -> PyResult<Bound<'py, PyTuple>> {
        let new_fact = PyTuple::new(
            py,
            [
                fact.get_item(0)?,
                fact.get_item(1)?,
                size.into_pyobject(py)?.into_any(),
                true.into_pyobject(py)?.to_owned().into_any(),
                fact.get_item(4)?,
                measured.into_pyobject(py)?.into_any(),
            ],
        )?;
        let tuple_new = TUPLE_NEW.get_or_try_init(py, || {
            py.get_type::<PyTuple>()
                .getattr(intern!(py, "__new__"))
                .map(Bound::unbind)
        })?;
        let result_fact =
            RESULT_FACT.import(py, "compactlab.transcripts.messages", "ResultFact")?;
        let new_fact = tuple_new.bind(py).call1((result_fact, new_fact))?;
        let mut all: Vec<Bound<'py, PyAny>> = results.iter().collect();
        all[k] = new_fact;
        PyTuple::new(py, all)
    };
    let changed = entry.getattr(intern!(py, "changed"))?;
    let Ok(changed) = changed.cast::<PyFrozenSet>() else {
        return Ok(None);
    };
    let changed = PyFrozenSet::new(
        py,
        changed
            .iter()
            .chain(std::iter::once(block.into_pyobject(py)?.into_any())),
    )?;
    let facts = |e: &Bound<'py, PyAny>, name: &Bound<'py, PyString>| e.getattr(name);
    if lazy {
        let message = entry.getattr(intern!(py, "_message"))?;
        if message.is_none() && json_size >= 0 {
            // left unread: the change noted, the length by the facts (`LazyEntry.with_result_content`)
            let held = entry.getattr(intern!(py, "_lazy"))?;
            let held = held.cast::<PyTuple>()?;
            let patches = held.get_item(3)?;
            let patches = patches.cast::<PyTuple>()?;
            let patch = PyTuple::new(
                py,
                [
                    block.into_pyobject(py)?.into_any(),
                    PyString::new(py, text).into_any(),
                ],
            )?;
            let mut all: Vec<Bound<'py, PyAny>> = patches.iter().collect();
            all.push(patch.into_any());
            let held = PyTuple::new(
                py,
                [
                    held.get_item(0)?,
                    held.get_item(1)?,
                    held.get_item(2)?,
                    PyTuple::new(py, all)?.into_any(),
                    held.get_item(4)?,
                ],
            )?;
            let args = PyTuple::new(
                py,
                [
                    (chars - json_size + new_json).into_pyobject(py)?.into_any(),
                    facts(entry, intern!(py, "role"))?,
                    facts(entry, intern!(py, "origin"))?,
                    facts(entry, intern!(py, "tool_use_ids"))?,
                    facts(entry, intern!(py, "tool_names"))?,
                    facts(entry, intern!(py, "use_files"))?,
                    with_fact(new_json)?.into_any(),
                    facts(entry, intern!(py, "misplaced_results"))?,
                    facts(entry, intern!(py, "empty"))?,
                    facts(entry, intern!(py, "has_text"))?,
                    held.into_any(),
                    facts(entry, intern!(py, "use_set"))?,
                    facts(entry, intern!(py, "result_set"))?,
                    changed.into_any(),
                ],
            )?;
            return entry.get_type().call1(args).map(Some);
        }
    }
    // as any Entry (a LazyEntry read by now too): the message copied, the block's content replaced
    let message = entry.getattr(intern!(py, "message"))?;
    let Ok(message) = message.cast_exact::<PyDict>() else {
        return Ok(None);
    };
    let content = message.get_item(intern!(py, "content"))?;
    let Some(content) = content else {
        return Ok(None);
    };
    let Ok(content) = content.cast_exact::<PyList>() else {
        return Ok(None);
    };
    let Ok(old) = content.get_item(block) else {
        return Ok(None);
    };
    let Ok(old) = old.cast_exact::<PyDict>() else {
        return Ok(None);
    };
    let Some(old_content) = old.get_item(intern!(py, "content"))? else {
        return Ok(None); // (the reference counts the whole block as changed)
    };
    let Ok(old_text) = old_content.cast_exact::<PyString>() else {
        return Ok(None);
    };
    let Ok(old_text) = old_text.to_str() else {
        return Ok(None); // (a lone surrogate: orjson refuses it, as the reference will say)
    };
    if old_text.contains(SIZED_MARK) {
        return Ok(None);
    }
    let new_block = old.copy()?;
    new_block.set_item(intern!(py, "content"), text)?;
    let new_content = PyList::new(py, content.iter())?;
    new_content.set_item(block, new_block)?;
    let new_message = message.copy()?;
    new_message.set_item(intern!(py, "content"), new_content)?;
    // measured on whichever is shorter, the new message or the old content (by difference), as
    // the reference measures it
    let size: i64 = fact.get_item(2)?.extract()?;
    let new_chars = if chars - size < size {
        match json_len(new_message.as_any(), 0)? {
            Some(n) => n as i64,
            None => return Ok(None),
        }
    } else {
        chars - json_str_len(old_text) as i64 + new_json
    };
    let args = PyTuple::new(
        py,
        [
            new_message.into_any(),
            new_chars.into_pyobject(py)?.into_any(),
            facts(entry, intern!(py, "role"))?,
            facts(entry, intern!(py, "origin"))?,
            facts(entry, intern!(py, "tool_use_ids"))?,
            facts(entry, intern!(py, "tool_names"))?,
            facts(entry, intern!(py, "use_files"))?,
            with_fact(-1)?.into_any(),
            facts(entry, intern!(py, "misplaced_results"))?,
            facts(entry, intern!(py, "empty"))?,
            facts(entry, intern!(py, "has_text"))?,
            facts(entry, intern!(py, "use_set"))?,
            facts(entry, intern!(py, "result_set"))?,
            changed.into_any(),
        ],
    )?;
    ENTRY
        .import(py, "compactlab.transcripts.messages", "Entry")?
        .call1(args)
        .map(Some)
}
