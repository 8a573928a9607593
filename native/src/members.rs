//! A Python class's `__slots__` members read and written through their descriptors' own
//! functions (`member_descriptor.__get__` and `__set__`, CPython's `member_get` and `member_set`)
//! rather than by `getattr` and `setattr`, which look the name up through the class's MRO each
//! time: about a third of the instructions where thousands of entries are made or read a run (a
//! `LazyEntry` a line, micro's copies, the facts the loop and recall read of each message). What is
//! read and written is the same: only an object of exactly the class the descriptors were looked up
//! on is read through them, and a name that is not a slot there (a property, a method) is read and
//! written by name, as any object of another class is.

use std::os::raw::c_int;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyType};

/// The members `names` of a class, in that order: each its member descriptor where it is a slot of
/// the class (or of a class it derives from, not overridden), and the type's functions.
pub(crate) struct Members {
    class: Py<PyType>,
    names: Vec<Py<PyString>>,
    descriptors: Vec<Option<Py<PyAny>>>,
    get: ffi::descrgetfunc,
    set: ffi::descrsetfunc,
}

impl Members {
    /// `class`'s members `names`; None where Python has no member descriptor type to read them by.
    pub(crate) fn of(class: &Bound<'_, PyType>, names: &[&str]) -> PyResult<Option<Self>> {
        let py = class.py();
        let member = py.import("types")?.getattr("MemberDescriptorType")?;
        let names: Vec<Py<PyString>> = names
            .iter()
            .map(|n| PyString::intern(py, n).unbind())
            .collect();
        let mut descriptors = Vec::with_capacity(names.len());
        for name in &names {
            let d = class.getattr(name.bind(py)).ok();
            descriptors.push(d.filter(|d| d.get_type().is(&member)).map(Bound::unbind));
        }
        let kind = member.as_ptr().cast::<ffi::PyTypeObject>();
        // SAFETY: `kind` is `types.MemberDescriptorType`, a type object that the `types` module
        // keeps alive for the interpreter's life; `PyType_GetSlot` reads a slot of a static type
        // since Python 3.10 (the abi3 floor here is 3.11) and returns NULL for a slot the type does
        // not fill. The GIL is held (`py`).
        let (get, set) = unsafe {
            (
                ffi::PyType_GetSlot(kind, ffi::Py_tp_descr_get),
                ffi::PyType_GetSlot(kind, ffi::Py_tp_descr_set),
            )
        };
        if get.is_null() || set.is_null() {
            return Ok(None);
        }
        // SAFETY: the `tp_descr_get` and `tp_descr_set` slots of a type hold, by CPython's
        // definition of those slots, a `descrgetfunc` and a `descrsetfunc` (both not NULL: checked).
        let (get, set) = unsafe {
            (
                std::mem::transmute::<*mut std::ffi::c_void, ffi::descrgetfunc>(get),
                std::mem::transmute::<*mut std::ffi::c_void, ffi::descrsetfunc>(set),
            )
        };
        Ok(Some(Members {
            class: class.clone().unbind(),
            names,
            descriptors,
            get,
            set,
        }))
    }

    /// The descriptor of member `k` where `obj` is of exactly this class and `k` is a slot of it.
    fn descriptor(&self, obj: &Bound<'_, PyAny>, k: usize) -> Option<*mut ffi::PyObject> {
        let d = self.descriptors[k].as_ref()?;
        (obj.get_type_ptr() == self.class.as_ptr().cast::<ffi::PyTypeObject>()).then(|| d.as_ptr())
    }

    /// `obj`'s member `k` (`getattr(obj, names[k])`).
    pub(crate) fn get<'py>(
        &self,
        obj: &Bound<'py, PyAny>,
        k: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = obj.py();
        let Some(d) = self.descriptor(obj, k) else {
            return obj.getattr(self.names[k].bind(py));
        };
        // SAFETY: `d` is a member descriptor and `self.get` its type's `tp_descr_get`
        // (`member_get`), called as Python calls it: the descriptor, the object and its type, each
        // a live object this holds a reference to, with the GIL held (`py`). It checks that `obj`
        // is an instance of the descriptor's class (else sets TypeError and returns NULL) and
        // returns a new reference or NULL with an exception set (an empty slot: AttributeError),
        // which `from_owned_ptr_or_err` takes.
        unsafe {
            let got = (self.get)(d, obj.as_ptr(), obj.get_type_ptr().cast());
            Bound::from_owned_ptr_or_err(py, got)
        }
    }

    /// Set `obj`'s member `k` to `value` (`setattr(obj, names[k], value)`).
    pub(crate) fn set(
        &self,
        obj: &Bound<'_, PyAny>,
        k: usize,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let Some(d) = self.descriptor(obj, k) else {
            return obj.setattr(self.names[k].bind(obj.py()), value);
        };
        // SAFETY: `d` is a member descriptor and `self.set` its type's `tp_descr_set`
        // (`member_set`), called as `setattr` calls it: the descriptor, the object and the value,
        // each a live object this holds a reference to, with the GIL held (`obj.py()`). It checks
        // that `obj` is an instance of the descriptor's class, takes its own reference to `value`
        // and returns 0, or -1 with an exception set, which `PyErr::fetch` takes.
        let done: c_int = unsafe { (self.set)(d, obj.as_ptr(), value.as_ptr()) };
        if done < 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(())
    }
}

/// The facts of a message the native core reads (`transcripts/messages.py`'s `Entry` slots and
/// `LazyEntry`'s own), by `Fact` (`ENTRY_FACTS[fact]`).
pub(crate) const ENTRY_FACTS: [&str; 15] = [
    "chars",
    "role",
    "origin",
    "tool_use_ids",
    "tool_names",
    "use_files",
    "results",
    "misplaced_results",
    "empty",
    "has_text",
    "_use_set",
    "_result_set",
    "changed",
    "_message",
    "_lazy",
];

/// An index into `ENTRY_FACTS`.
#[derive(Clone, Copy)]
pub(crate) enum Fact {
    Chars,
    Role,
    Origin,
    ToolUseIds,
    Results = 6,
    HasText = 9,
    Changed = 12,
    Message = 13,
    Lazy = 14,
}

/// The `ENTRY_FACTS` members of the first two classes of message read (`Entry` and `LazyEntry`:
/// any other is read by name).
static SEEN: [PyOnceLock<Option<Members>>; 2] = [PyOnceLock::new(), PyOnceLock::new()];

/// `entry`'s fact (`getattr(entry, ENTRY_FACTS[fact])`), through its class's slots.
pub(crate) fn fact<'py>(entry: &Bound<'py, PyAny>, fact: Fact) -> PyResult<Bound<'py, PyAny>> {
    let py = entry.py();
    let kind = entry.get_type_ptr().cast::<ffi::PyObject>();
    for seen in &SEEN {
        let members = match seen.get(py) {
            Some(members) => members,
            None => seen.get_or_try_init(py, || Members::of(&entry.get_type(), &ENTRY_FACTS))?,
        };
        match members {
            Some(m) if m.class.as_ptr() == kind => return m.get(entry, fact as usize),
            Some(_) => {}
            None => break,
        }
    }
    entry.getattr(ENTRY_FACTS[fact as usize])
}

/// The items of a tuple or a list, read in place, or of any other iterable, through its iterator
/// (`items`): an entry's facts are tuples (most of them empty), which `try_iter` would walk with
/// an iterator object and size by `PyObject_LengthHint` (about 1,000 instructions a `collect`).
pub(crate) enum Items<'py> {
    Tuple(pyo3::types::tuple::BoundTupleIterator<'py>),
    List(pyo3::types::list::BoundListIterator<'py>),
    Other(Bound<'py, pyo3::types::PyIterator>),
}

/// The items of `values` (`Items`): as `values.try_iter()` gives them.
pub(crate) fn items<'py>(values: &Bound<'py, PyAny>) -> PyResult<Items<'py>> {
    use pyo3::types::{PyList, PyTuple};
    if let Ok(t) = values.cast_exact::<PyTuple>() {
        return Ok(Items::Tuple(t.clone().into_iter()));
    }
    if let Ok(l) = values.cast_exact::<PyList>() {
        return Ok(Items::List(l.clone().into_iter()));
    }
    Ok(Items::Other(values.try_iter()?))
}

impl<'py> Iterator for Items<'py> {
    type Item = PyResult<Bound<'py, PyAny>>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Items::Tuple(t) => t.next().map(Ok),
            Items::List(l) => l.next().map(Ok),
            Items::Other(i) => i.next(),
        }
    }

    /// Exact for a tuple or a list; for any other, nothing asked of Python (`try_iter`'s asks
    /// `__length_hint__`).
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Items::Tuple(t) => t.size_hint(),
            Items::List(l) => l.size_hint(),
            Items::Other(_) => (0, None),
        }
    }
}
