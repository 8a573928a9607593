//! A Python class's `__slots__` members read and written through their descriptors' own
//! functions (`member_descriptor.__get__` and `__set__`, CPython's `member_get` and `member_set`)
//! rather than by `getattr` and `setattr`, which look the name up through the class's MRO each
//! time: about a third of the instructions where thousands of entries are made a run (a
//! `LazyEntry` a line, micro's copies). What is read and written is the same, and an object of
//! another class is refused by the descriptor itself (`TypeError`), as Python refuses it.

use std::os::raw::c_int;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};

/// The member descriptors of `names` on a class, in that order, and their type's functions.
pub(crate) struct Members {
    descriptors: Vec<Py<PyAny>>,
    get: ffi::descrgetfunc,
    set: ffi::descrsetfunc,
}

impl Members {
    /// `class`'s members `names`; None where any is not a slot of the class or of a class it
    /// derives from (a property, a method, a name it does not have): the caller uses `getattr`
    /// and `setattr` there.
    pub(crate) fn of(
        class: &Bound<'_, PyType>,
        names: &[&Bound<'_, PyString>],
    ) -> PyResult<Option<Self>> {
        let py = class.py();
        let member = py.import("types")?.getattr("MemberDescriptorType")?;
        let mut descriptors = Vec::with_capacity(names.len());
        for name in names {
            let Ok(d) = class.getattr(*name) else {
                return Ok(None);
            };
            if !d.get_type().is(&member) {
                return Ok(None);
            }
            descriptors.push(d.unbind());
        }
        let kind = member.as_ptr().cast::<ffi::PyTypeObject>();
        // SAFETY: `kind` is `types.MemberDescriptorType`, a type object (checked to be the type of
        // every descriptor above) that the `types` module keeps alive for the interpreter's life;
        // `PyType_GetSlot` reads a slot of a static type since Python 3.10 (the abi3 floor here
        // is 3.11) and returns NULL for a slot the type does not fill. The GIL is held (`py`).
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
            descriptors,
            get,
            set,
        }))
    }

    /// `obj`'s member `k` (`getattr(obj, names[k])`).
    pub(crate) fn get<'py>(
        &self,
        obj: &Bound<'py, PyAny>,
        k: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = obj.py();
        let d = self.descriptors[k].as_ptr();
        // SAFETY: `d` is a member descriptor and `self.get` its type's `tp_descr_get`
        // (`member_get`), called as Python calls it: the descriptor, the object and its type, each
        // a live object this holds a reference to, with the GIL held (`py`). It checks that `obj`
        // is an instance of the descriptor's class (else sets TypeError and returns NULL) and
        // returns a new reference or NULL with an exception set (an empty slot: AttributeError),
        // which `from_owned_ptr_or_err` takes.
        unsafe {
            let got = (self.get)(d, obj.as_ptr(), obj.get_type().as_ptr());
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
        let d = self.descriptors[k].as_ptr();
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
