"""Which core runs the per-call replay (#59): ``python`` (this package's engine, the reference) or
``native`` (``compactlab._native``, the Rust crate in ``native/``, built by ``pip install .`` where a
Rust toolchain is). Chosen here and nowhere else: ``COMPACTLAB_CORE=python|native``, by default the
native core where it is built. The native core runs the parts it has behind the typed per-call seam
(``docs/architecture.md``); a run's summary says which core ran (``core``), and ``compactlab
--version`` names the one a run would use.

What the native core runs so far: the prompt-cache prefix model (``cost/pricing.PromptCache`` is
its reference), the violations' tracker (``measures/violations.py``'s ``InvariantTracker``), recall's
check (``measures/probes.py``'s ``check``), the hindsight probes' string index (``runs``, ``tokens``
and ``ResultStrings`` there) and the facts of an Anthropic messages line (``transcripts/messages.py``'s
``build_entry``). Everything else of a run is the Python engine's."""

from __future__ import annotations

import os
from functools import cache
from types import ModuleType
from typing import Any

from .errors import UsageError

CORES = ("python", "native")
#: what the native core runs of a replay, in words (``--version`` and the docs say it)
NATIVE_PARTS = ("the whole loop of a policy that keeps every message, and of one made of the built-in layers "
                "(s08, claude-code and codex among them; micro's copies of a message, left in its file or loaded; "
                "the stub's summaries, the summary layer's and manual and reactive compaction's, and the texts they "
                "quote; budget's persisting, its files written through the output folder; a live summary's text "
                "in Python); recall, asked by that loop itself: its "
                "check, attribution and ledger (held in Rust), the texts it reads (a line read again cut from the blocks "
                "its reader read last, or from a piece of its file read once; a reply's message without its other members; a result's list of texts; a "
                "message in hand) and "
                "the ledger's tallies; each call's violations, checked and logged; each call's record (held in Rust: "
                "the replay's JSON, calls.csv and the summary's sums written from it); the compaction events (held in "
                "Rust: compactions.csv and recall's losses read from them); the run's pricing and its "
                "prices' look-ups, and the recording's side of it (each call's time, the recorded cache breaks and "
                "the reads the provider's rules expect, what the usage cost, the cache ledger's sums); "
                "the raw baseline without probes (a stream's handing the facts it reads of each message to the run's "
                "violations tracker) and the reading of a file's lines, a reply's usage among them, and the count of "
                "a parsed line's brackets (before its nesting is measured); a Claude Code session read as its "
                "loader reads it, its messages written as the Anthropic messages they make and left unread; a "
                "loaded message's facts; a comparison's bootstrap interval; the log normal CDF Optuna's sampler "
                "asks of a tune; the CSV files' text (a replay's probes and compactions written whole); a "
                "file's probes read back from the cache, held in Rust; the package's own TOML documents and a few "
                "bytes' SHA-256 (neither tomllib nor hashlib imported by a replay); for the others a call's measures, the "
                "probes' index, a line's facts and a step's messages")


#: what this package asks of ``compactlab._native`` (the crate's ``API``): bumped with it whenever
#: the Python side asks something new of the crate, so that a module built from other sources (a
#: working copy pulled and not rebuilt) is never used for this one
NATIVE_API = 63
#: why there is no native module where none was built
NOT_BUILT = "not built in this install"


@cache
def _import() -> tuple[ModuleType | None, str]:
    """The native module where it was built for this package, and where it was not, why."""
    from importlib import import_module

    try:
        module = import_module("compactlab._native")
    except ImportError:
        return None, NOT_BUILT
    api = getattr(module, "API", None)
    if api != NATIVE_API:
        return None, (f"built from other sources than this compactlab's (its interface {api}, this one asks for "
                      f"{NATIVE_API})")
    if _freed_kept is not None:
        module.keep_freed(*_freed_kept)
    return module, ""


#: glibc's allocator thresholds (mmap, trim) this process asked for (``keep_freed``), or None
_freed_kept: tuple[int, int] | None = None


def keep_freed(mmap: int, trim: int) -> None:
    """Have glibc's allocator keep the memory this process frees (``_native.keep_freed``: blocks under
    ``mmap`` bytes served from its heap, the heap's top handed back only past ``trim`` free bytes),
    as soon as the native module is loaded: now if it is, else when it first is (a command that
    replays nothing never loads it). The command's process asks it (``plumbing.process.start``); a
    program that imports compactlab keeps its allocator as it set it. Nothing where the native module
    is not built or the C library is not glibc."""
    global _freed_kept
    _freed_kept = (mmap, trim)
    if _import.cache_info().currsize:
        module = native_module()
        if module is not None:
            module.keep_freed(mmap, trim)


def native_module() -> ModuleType | None:
    """``compactlab._native`` where it was built for this package; None where it was not."""
    return _import()[0]


def _why_not() -> str:
    """Why there is no native module to run (``native_module`` is None)."""
    return _import()[1] or NOT_BUILT


def chosen() -> str:
    """The core a run uses: ``COMPACTLAB_CORE``, else native where it is built, else python."""
    asked = os.environ.get("COMPACTLAB_CORE", "").strip().lower()
    if asked and asked not in CORES:
        raise UsageError(f"COMPACTLAB_CORE={asked!r}: not a core (python or native)")
    if asked == "native" and native_module() is None:
        raise UsageError(f"COMPACTLAB_CORE=native: the native core is {_why_not()}", hint=_REBUILD)
    if asked:
        return asked
    return "native" if native_module() is not None else "python"


_REBUILD = ("install compactlab with a Rust toolchain (cargo) on PATH to build it (a working copy: pip install -e . "
            "again), or set COMPACTLAB_CORE=python")


def in_use() -> ModuleType | None:
    """The native module where the native core is the one chosen (``chosen``), else None."""
    return native_module() if chosen() == "native" else None


def line_facts(result_fact: type, measure: bool) -> Any:
    """The native reader of a message line's facts (``_native.LineFacts``, making its results of
    ``result_fact``) where the native core runs, else None (the formats read every line in Python)."""
    module = in_use()
    return module.LineFacts(result_fact, measure) if module is not None else None


def described(parts: bool = False) -> str:
    """The core a run would use, for ``--version``: which, and how to choose the other; with
    ``parts`` (``bench``, which measures it), what of a replay runs in Rust."""
    try:
        core = chosen()
    except UsageError as exc:
        return f"core: none usable ({exc})"
    if core == "native" and parts:
        return f"core: native (Rust: {NATIVE_PARTS}; the rest of a replay in Python)"
    if core == "native":
        return "core: native (Rust; COMPACTLAB_CORE=python runs the Python engine, its reference)"
    if native_module() is not None:
        return "core: python (the native core is built; COMPACTLAB_CORE chose python)"
    why = _why_not()
    if why == NOT_BUILT:
        return "core: python (no native core built: installed without a Rust toolchain)"
    return f"core: python (the native core is {why}: rebuild it with pip install . or, in a working copy, -e .)"
