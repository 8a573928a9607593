"""Which core runs the per-call replay (#59): ``python`` (this package's engine, the reference) or
``native`` (``compactlab._native``, the Rust crate in ``native/``, built by ``pip install .`` where a
Rust toolchain is). Chosen here and nowhere else: ``COMPACTLAB_CORE=python|native``, by default the
native core where it is built. The native core runs the parts it has behind the typed per-call seam
(``docs/architecture.md``); a run's summary says which core ran (``core``), and ``compactlab
--version`` names the one a run would use.

What the native core runs so far: the prompt-cache prefix model (``cost/pricing.PromptCache`` is
its reference), the violations' tracker (``measures/violations.py``'s ``InvariantTracker``), recall's
check (``measures/probes.py``'s ``check``) and the hindsight probes' string index (``runs``, ``tokens``
and ``ResultStrings`` there). Everything else of a run is the Python engine's."""

from __future__ import annotations

import os
from functools import cache
from types import ModuleType

from ..errors import UsageError

CORES = ("python", "native")
#: what the native core runs of a replay, in words (``--version`` and the docs say it)
NATIVE_PARTS = "the prompt-cache model, the violations' tracker, recall's check and the probes' string index"


@cache
def native_module() -> ModuleType | None:
    """``compactlab._native`` where it was built; None where it was not."""
    from importlib import import_module

    try:
        return import_module("compactlab._native")
    except ImportError:
        return None


def chosen() -> str:
    """The core a run uses: ``COMPACTLAB_CORE``, else native where it is built, else python."""
    asked = os.environ.get("COMPACTLAB_CORE", "").strip().lower()
    if asked and asked not in CORES:
        raise UsageError(f"COMPACTLAB_CORE={asked!r}: not a core (python or native)")
    if asked == "native" and native_module() is None:
        raise UsageError("COMPACTLAB_CORE=native: the native core is not built in this install",
                         hint="install compactlab with a Rust toolchain (cargo) on PATH to build it, "
                              "or set COMPACTLAB_CORE=python")
    if asked:
        return asked
    return "native" if native_module() is not None else "python"


def in_use() -> ModuleType | None:
    """The native module where the native core is the one chosen (``chosen``), else None."""
    return native_module() if chosen() == "native" else None


def described() -> str:
    """The core a run would use, for ``--version``: which, and what it runs."""
    try:
        core = chosen()
    except UsageError as exc:
        return f"core: none usable ({exc})"
    if core == "native":
        return f"core: native (Rust: {NATIVE_PARTS}; the rest of a replay in Python)"
    built = "" if native_module() is None else " (the native core is built; COMPACTLAB_CORE chose python)"
    return f"core: python{built or ' (no native core built: installed without a Rust toolchain)'}"
