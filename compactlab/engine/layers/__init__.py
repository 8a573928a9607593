"""Compaction layers, one module each, each registered once with its config (``registry.py``).

``CHEAP`` are the layers a policy orders in ``order`` (run on every call); ``summary`` runs
after them when the context is over its trigger; ``reactive`` and ``manual`` are run by the
engine on their events. All share the contract documented in ``layers.base``.
"""

from __future__ import annotations

from .base import NOTHING, CallFacts, LayerLedger, LayerStats, RunEnv

# imported in the order of a policy's tables (registration order is the order of Policy's sections)
from .budget import BudgetConfig, budget  # noqa: I001
from .snip import SnipConfig, snip
from .micro import MicroConfig, micro
from .summary import Summarising, SummaryConfig, summary
from .reactive import ReactiveConfig, reactive
from .manual import ManualConfig, manual
from .custom import CustomConfig, StepFacts, custom
from .registry import REGISTRY, Layer, register

LAYERS = {name: layer.run for name, layer in REGISTRY.items()}
CHEAP = {name: layer.run for name, layer in REGISTRY.items() if layer.cheap}

__all__ = ["CHEAP", "LAYERS", "NOTHING", "REGISTRY", "BudgetConfig", "CallFacts", "CustomConfig", "StepFacts", "custom", "Layer", "LayerLedger", "LayerStats", "ManualConfig", "MicroConfig",
           "ReactiveConfig", "RunEnv", "SnipConfig", "Summarising", "SummaryConfig", "budget", "manual", "micro", "reactive",
           "register", "snip", "summary"]
