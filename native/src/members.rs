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
    /// where in an object of the class each slot holds its object (`placed`: found by writing
    /// through the descriptor), read and written there; None where not found (read through the
    /// descriptor)
    offsets: Vec<Option<usize>>,
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
        // since Python 3.10 (compactlab asks for 3.11 or later) and returns NULL for a slot the
        // type does not fill. The GIL is held (`py`).
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
        let offsets = placed(class, &descriptors, set)?;
        Ok(Some(Members {
            class: class.clone().unbind(),
            names,
            descriptors,
            get,
            set,
            offsets,
        }))
    }

    /// Where object `obj`'s slot `k` holds its object, where `obj` is of exactly this class and
    /// that place was found (`placed`).
    fn place(&self, obj: &Bound<'_, PyAny>, k: usize) -> Option<*mut *mut ffi::PyObject> {
        let offset = self.offsets[k]?;
        (obj.get_type_ptr() == self.class.as_ptr().cast::<ffi::PyTypeObject>()).then(|| {
            // SAFETY: `obj` is of exactly this class (checked), whose objects are at least its
            // `__basicsize__` bytes, and `offset` is a word-aligned place within them that the
            // class's member descriptor writes slot `k`'s object to (`placed` found it so on an
            // object of this class): the pointer stays inside `obj`'s own memory.
            unsafe {
                obj.as_ptr()
                    .cast::<u8>()
                    .add(offset)
                    .cast::<*mut ffi::PyObject>()
            }
        })
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
        if let Some(place) = self.place(obj, k) {
            // SAFETY: `place` is slot `k`'s place in `obj` (`place`), which holds the slot's object
            // or NULL where it is empty, as `member_get` reads it; the GIL is held, so nothing
            // writes it meanwhile. The object is live (`obj` holds it), and `from_borrowed_ptr`
            // takes a new reference to it, as `member_get` returns one.
            let held = unsafe { place.read() };
            if !held.is_null() {
                return Ok(unsafe { Bound::from_borrowed_ptr(py, held) });
            }
            // (an empty slot: the descriptor raises its AttributeError, below)
        }
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
        if let Some(place) = self.place(obj, k) {
            // SAFETY: `place` is slot `k`'s place in `obj` (`place`), with the GIL held: this is
            // `member_set` for a slot (`T_OBJECT_EX`, writable: `placed` wrote it through the
            // descriptor): the new object's reference taken and put there, then the old one's, if
            // any, let go (which may run its finalizer, as it may there).
            unsafe {
                let old = place.read();
                place.write(value.clone().into_ptr());
                if !old.is_null() {
                    ffi::Py_DECREF(old);
                }
            }
            return Ok(());
        }
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

/// Where in an object of `class` each slot member of `descriptors` holds its object: found on an
/// object made as `object.__new__(class)` makes one (`instances::Alloc`), by writing two objects
/// in turn through the slot's descriptor (`set`, `member_set`) and finding the one word of the
/// object's `__basicsize__` bytes that holds each after it was written. None for a member not found
/// so (a class whose objects `Alloc` does not make, a read-only member, a place not unique): it is
/// read and written through its descriptor. What a slot holds is the only thing asked of the
/// layout, so this holds for any CPython that keeps a slot's object in its object.
fn placed(
    class: &Bound<'_, PyType>,
    descriptors: &[Option<Py<PyAny>>],
    set: ffi::descrsetfunc,
) -> PyResult<Vec<Option<usize>>> {
    let py = class.py();
    let mut offsets = vec![None; descriptors.len()];
    let Some(alloc) = crate::instances::Alloc::object(class)? else {
        return Ok(offsets);
    };
    let size: usize = class
        .getattr(pyo3::intern!(py, "__basicsize__"))?
        .extract()?;
    let word = std::mem::size_of::<*mut ffi::PyObject>();
    let obj = alloc.object_of(py)?;
    // the words of `obj` past its header that hold `target`
    let holding = |target: *mut ffi::PyObject| -> Vec<usize> {
        (std::mem::size_of::<ffi::PyObject>()..size)
            .step_by(word)
            .filter(|&at| at + word <= size)
            // SAFETY: `obj` was made by its class's `tp_alloc` with no items: `__basicsize__`
            // bytes, aligned as any object is (to at least a word); `at` is a multiple of the word
            // past the header, and the word ends within those bytes. The GIL is held and nothing
            // else holds `obj`: the read sees what the last write put there.
            .filter(|&at| unsafe {
                obj.as_ptr()
                    .cast::<u8>()
                    .add(at)
                    .cast::<*mut ffi::PyObject>()
                    .read()
                    == target
            })
            .collect()
    };
    for (k, d) in descriptors.iter().enumerate() {
        let Some(d) = d else { continue };
        let mut found = None;
        for round in 0..2 {
            let marker = pyo3::types::PyList::empty(py);
            // SAFETY: as `Members::set`'s call of the descriptor's `tp_descr_set`: the descriptor,
            // the object (of exactly its class) and the value are live objects held here, with
            // the GIL held; it returns 0, or -1 with an exception set (taken and dropped here).
            if unsafe { set(d.as_ptr(), obj.as_ptr(), marker.as_ptr()) } < 0 {
                drop(PyErr::fetch(py));
                found = None;
                break;
            }
            match holding(marker.as_ptr())[..] {
                [at] if round == 0 || found == Some(at) => found = Some(at),
                _ => {
                    found = None;
                    break;
                }
            }
        }
        offsets[k] = found;
    }
    Ok(offsets)
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
