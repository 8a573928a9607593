"""The one registry of layers: each layer module registers its function and its config, once.

A policy's tables (``Policy``'s sections), the layers a policy may order (the cheap ones), the
CLI's help and the layer contract tests all come from here; registering a name twice is an
error. Every layer has the one signature ``layer(context, config, env) -> (Context, LayerStats)``
(the contract in ``base.py``); ``config`` is what ``Policy.config_for`` gives it: its table, with
the policy's summary table beside it for a layer that ``summarises`` on its own event.
"""

from __future__ import annotations

from collections.abc import Callable

from typing import Any

from ...plain import NamedTuple


class Layer(NamedTuple):
    name: str
    run: Callable[..., Any]
    config: type
    #: run on every call, in the order the policy's ``order`` gives (else the engine runs it on
    #: its event: the summary after the cheap layers, reactive over the window, manual on the tool)
    cheap: bool
    #: it summarises by the policy's summary table (its config: ``summary.Summarising``)
    summarises: bool = False


REGISTRY: dict[str, Layer] = {}


def register(name: str, config: type, *, cheap: bool = False,
             summarises: bool = False) -> Callable[[Callable], Callable]:
    """Register the decorated function as layer ``name`` with its config class."""

    def add(run: Callable) -> Callable:
        if name in REGISTRY:
            raise ValueError(f"layer {name!r} is registered twice")
        REGISTRY[name] = Layer(name, run, config, cheap, summarises)
        return run

    return add
