"""The frameworks' own compactors as policy steps (#45 §3): the real code of LangChain's and Strands
Agents' context managers, run by the ``custom`` layer on the recorded messages, converted to the
framework's message types and back, with the framework's model calls answered by compactlab's
summarizer (``StepFacts.summarize``: the stub offline, a live model when asked).

Each module is one framework: its steps (functions of the custom-step contract, each with a
settings dataclass) and its message conversion. They find the framework when they are loaded, so
a missing extra is one clear error naming it, and import it when a step first runs (a preset of
them is loaded, listed and fingerprinted without a second of its import). The presets that use
them are ``langchain-*.toml`` and ``strands-*.toml``.

A step gives back a message it did not change as the very object it was given (so it keeps its
place in the prompt cache and what the recall measure knows of it); a message the framework
changed or made is converted back to a new Anthropic message.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import PolicyError

#: the versions the steps were written and checked against (pyproject's extras pin them)
TESTED = {"langchain": "1.5.2", "strands-agents": "1.62.0"}


def missing(extra: str, module: str) -> PolicyError:
    """The error for a framework step whose extra is not installed."""
    return PolicyError(f"the {extra} steps need the {extra} extra (no module {module})",
                       hint=f"pip install 'compactlab[{extra}]'")


def require(extra: str, *modules: str) -> None:
    """The error naming ``extra`` where one of its framework's ``modules`` is not installed (found,
    not imported: a step's module says it when it is loaded, and imports them when a step runs)."""
    from importlib.util import find_spec

    for module in modules:
        if find_spec(module) is None:
            raise missing(extra, module)


def installed_version(distribution: str) -> str:
    """An installed distribution's version, read from its metadata (the framework not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


@contextmanager
def imported(extra: str) -> Iterator[None]:
    """Imports of an ``extra``'s framework, their failure the error that names it (an install
    broken since the step was loaded)."""
    try:
        yield
    except ImportError as exc:
        raise missing(extra, exc.name or extra) from None
