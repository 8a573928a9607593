"""Compaction layers, one module each, and the one registry of them.

``CHEAP`` are the layers a policy orders in ``order`` (run on every call); ``summary`` runs
after them when the context is over its trigger; ``reactive`` and ``manual`` are run by the
engine on their events. All share the contract documented in ``layers.base``.
"""

from __future__ import annotations

from .base import NOTHING, LayerStats, RunEnv
from .budget import budget
from .manual import manual
from .micro import micro
from .reactive import reactive
from .snip import snip
from .summary import summary

CHEAP = {"budget": budget, "snip": snip, "micro": micro}
LAYERS = {**CHEAP, "summary": summary, "reactive": reactive, "manual": manual}

__all__ = ["CHEAP", "LAYERS", "NOTHING", "LayerStats", "RunEnv", "budget", "manual", "micro", "reactive", "snip", "summary"]
