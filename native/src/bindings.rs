//! The Python module `compactlab._native`: plain data in, plain data out.

use pyo3::prelude::*;

use crate::cache;

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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PromptCache>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
