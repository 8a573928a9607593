//! Objects of a Python class made as `object.__new__(class)` and `tuple.__new__(class, items)`
//! make them (CPython's `object_new` and `tuple_subtype_new`: the class's `tp_alloc`, then the
//! items put in place), without the call through the class's `__new__` and its argument tuple:
//! about two thirds of what making a `LazyEntry` (one a line read) or a `ResultFact` (one a tool
//! result read, and one each copy micro makes) cost. Where the class is not one these make alike (a
//! `__new__` of its own, an abstract class, instances with a `__dict__`, not a tuple), it is None
//! and the caller calls the class's `__new__` as before.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};

/// What makes the objects of one class by its own `tp_alloc`.
pub(crate) struct Alloc {
    class: Py<PyType>,
    alloc: ffi::allocfunc,
}

impl Alloc {
    /// What makes `class`'s objects as `object.__new__(class)` makes them, where that is what its
    /// `__new__` is, it is not abstract and its objects have no `__dict__` (`object_new` also makes
    /// a managed dict's values); else None.
    pub(crate) fn object(class: &Bound<'_, PyType>) -> PyResult<Option<Self>> {
        let py = class.py();
        let object_new = py
            .get_type::<PyAny>()
            .getattr(pyo3::intern!(py, "__new__"))?;
        if !class.getattr(pyo3::intern!(py, "__new__"))?.is(&object_new) {
            return Ok(None);
        }
        let dict_offset: isize = class
            .getattr(pyo3::intern!(py, "__dictoffset__"))?
            .extract()?;
        if dict_offset != 0 || abstract_(class) {
            return Ok(None);
        }
        Ok(Self::of(class))
    }

    /// What makes `class`'s objects as `tuple.__new__(class, items)` makes them, where it is a
    /// subclass of `tuple` (a named tuple); else None.
    pub(crate) fn tuple(class: &Bound<'_, PyType>) -> PyResult<Option<Self>> {
        if !class.is_subclass_of::<PyTuple>()? || class.is(class.py().get_type::<PyTuple>()) {
            return Ok(None);
        }
        Ok(Self::of(class))
    }

    /// `class` and its `tp_alloc` (None where it has none).
    fn of(class: &Bound<'_, PyType>) -> Option<Self> {
        // SAFETY: `class` is a live type object (a bound reference held here) and the GIL is held
        // (`class.py()`); `PyType_GetSlot` reads a slot of any type, heap or static, since Python
        // 3.10 (compactlab asks for 3.11 or later) and returns NULL for a slot the type does not
        // fill.
        let slot = unsafe { ffi::PyType_GetSlot(class.as_type_ptr(), ffi::Py_tp_alloc) };
        if slot.is_null() {
            return None;
        }
        // SAFETY: a type's `tp_alloc` slot holds, by CPython's definition of that slot, an
        // `allocfunc` (not NULL: checked).
        let alloc = unsafe { std::mem::transmute::<*mut std::ffi::c_void, ffi::allocfunc>(slot) };
        Some(Alloc {
            class: class.clone().unbind(),
            alloc,
        })
    }

    /// The class these are made of.
    pub(crate) fn class(&self) -> &Py<PyType> {
        &self.class
    }

    /// A new object of the class, every slot empty (`object.__new__(class)`).
    pub(crate) fn object_of<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: `self.alloc` is the class's own `tp_alloc`, called as `object_new` calls it: the
        // class (kept alive by `self.class`) and no items, with the GIL held (`py`). It returns a
        // new reference to a zeroed object of the class (its type set and, for a heap type,
        // incremented; tracked by the collector where the class is collected), or NULL with an
        // exception set, which `from_owned_ptr_or_err` takes. `Alloc::object` checked that
        // `object_new` would do nothing else for this class.
        unsafe {
            let made = (self.alloc)(self.class.as_ptr().cast(), 0);
            Bound::from_owned_ptr_or_err(py, made)
        }
    }

    /// A new tuple of the class holding `items` (`tuple.__new__(class, items)`).
    pub(crate) fn tuple_of<'py, const N: usize>(
        &self,
        py: Python<'py>,
        items: [Bound<'py, PyAny>; N],
    ) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: as `object_of`: the class's `tp_alloc` called as `tuple_subtype_new` calls it,
        // with the number of items, returns a new reference to a tuple of the class whose N items
        // are NULL, or NULL with an exception set.
        let made = unsafe {
            let made = (self.alloc)(self.class.as_ptr().cast(), N as ffi::Py_ssize_t);
            Bound::from_owned_ptr_or_err(py, made)?
        };
        for (k, item) in items.into_iter().enumerate() {
            // SAFETY: `made` is a tuple (of a subclass of `tuple`: `Alloc::tuple` checked) of N
            // items, referenced here alone (refcount 1, as `PyTuple_SetItem` requires), and
            // `k < N`; `PyTuple_SetItem` steals the reference `into_ptr` gives it, and returns 0,
            // or -1 with an exception set (then `made`, dropped, frees what it holds: the items
            // not set are NULL, which a tuple's deallocation skips).
            if unsafe { ffi::PyTuple_SetItem(made.as_ptr(), k as ffi::Py_ssize_t, item.into_ptr()) }
                < 0
            {
                return Err(PyErr::fetch(py));
            }
        }
        Ok(made)
    }
}

/// Whether `class` has abstract methods left (`object.__new__` refuses to make one).
fn abstract_(class: &Bound<'_, PyType>) -> bool {
    // SAFETY: `class` is a live type object and the GIL is held; `PyType_GetFlags` reads its flags.
    let flags = unsafe { ffi::PyType_GetFlags(class.as_type_ptr()) };
    flags & ffi::Py_TPFLAGS_IS_ABSTRACT != 0
}
