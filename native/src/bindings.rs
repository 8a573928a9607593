//! The Python module `compactlab._native`: plain data in, plain data out.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PySet, PyString, PyTuple};
use std::borrow::Cow;

use crate::{cache, strings};

/// The prompt-cache prefix model (`cost/pricing.py`'s `PromptCache` is its reference).
#[pyclass(module = "compactlab._native")]
struct PromptCache {
    inner: cache::PromptCache,
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
    /// `wanted`: a variant -> its string (`ProbeIndex.wanted`), or None to keep every string.
    #[new]
    #[pyo3(signature = (wanted=None))]
    fn new(wanted: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let wanted = match wanted {
            None => None,
            Some(pairs) => {
                let mut keyed = Vec::with_capacity(pairs.len());
                for (variant, string) in pairs.iter() {
                    keyed.push((key(&variant)?.into_owned(), key(&string)?.into_owned()));
                }
                Some(strings::Wanted::new(
                    keyed.iter().map(|(v, s)| (&v[..], &s[..])),
                ))
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
        for s in found.try_iter()? {
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
        for s in found.try_iter()? {
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

impl ResultStrings {
    fn source(&mut self, source: Py<PyAny>) -> u32 {
        self.sources.push(source);
        (self.sources.len() - 1) as u32
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PromptCache>()?;
    m.add_class::<ResultStrings>()?;
    m.add_function(wrap_pyfunction!(runs, m)?)?;
    m.add_function(wrap_pyfunction!(tokens, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
