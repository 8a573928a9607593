"""A tune's study (``corpus/study.py``): Optuna's TPE sampler computes log Φ on the native core,
to the bit what Optuna's own Python computes, so a seed asks the same trials on either core."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlab import core
from compactlab.corpus import study
from helpers import examples


optuna = pytest.importorskip("optuna")
truncnorm = pytest.importorskip("optuna.samplers._tpe._truncnorm")

#: the values where Optuna's function changes branch, and the ends
_EDGES = [-20.0, 6.0, math.nextafter(-20.0, 0), math.nextafter(-20.0, -30), math.nextafter(6.0, 0),
          math.nextafter(6.0, 10), 0.0, -0.0, -1 / 2**0.5, 1 / 2**0.5, -37.5, 38.0, -1e150, 5e-324, -5e-324,
          math.inf, -math.inf]


def _native():
    if core.in_use() is None:
        pytest.skip("the native core is not built in this install: Optuna's own function runs")
    return core.native_module()


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _reference(x: float) -> float:
    return truncnorm._log_ndtr_single.__wrapped__(x)  # (past its lru_cache)


def test_log_ndtr_is_optuna_s_to_the_bit_at_its_branches_and_ends():
    native = _native()
    assert [_bits(v) for v in native.log_ndtr(_EDGES)] == [_bits(_reference(x)) for x in _EDGES]
    assert math.isnan(native.log_ndtr([math.nan])[0]) and math.isnan(_reference(math.nan))


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.one_of(st.floats(-60, 60), st.floats(-1e6, -20), st.floats(-1e-3, 1e-3)), min_size=1,
                max_size=50))
def test_log_ndtr_is_optuna_s_to_the_bit(values):
    native = _native()
    assert [_bits(v) for v in native.log_ndtr(values)] == [_bits(_reference(x)) for x in values]


def _asked(seed: int) -> list[dict]:
    """The trials a multi-objective TPE study of an int and a float asks (the tune's sampler)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    s = optuna.create_study(directions=["maximize", "maximize"],
                            sampler=optuna.samplers.TPESampler(seed=seed, multivariate=True))
    for _ in range(30):
        t = s.ask()
        x, k = t.suggest_float("trigger", 20000, 200000), t.suggest_int("keep", 1, 10)
        s.tell(t, [-(x / 1e5 - 1.3) ** 2 - k / 10, math.log(x) + (k % 3)])
    return [t.params for t in s.trials]


def _optuna_s_own(monkeypatch):
    """Optuna's own ``_log_ndtr`` in place for the test (a tune run before in this process may have
    put the native one there), put back as it was after it."""
    current = truncnorm._log_ndtr
    monkeypatch.setattr(truncnorm, "_log_ndtr", getattr(current, "replaced", current))
    return truncnorm._log_ndtr


def test_the_sampler_asks_the_same_trials_with_the_native_log_ndtr(monkeypatch):
    _native()
    original = _optuna_s_own(monkeypatch)
    assert not getattr(original, "native", False)
    before = _asked(7)
    assert study.native_log_ndtr() and truncnorm._log_ndtr is not original
    assert study.native_log_ndtr()  # (once: installed again, the same)
    assert _asked(7) == before


def test_the_python_core_leaves_optuna_s_own(monkeypatch):
    original = _optuna_s_own(monkeypatch)
    monkeypatch.setenv("COMPACTLAB_CORE", "python")
    assert not study.native_log_ndtr() and truncnorm._log_ndtr is original
