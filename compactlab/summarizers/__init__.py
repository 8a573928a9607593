"""Summarizers: the protocol, the offline stub, and (later) the live Anthropic one."""

from __future__ import annotations

from .base import Summarizer, SummaryRequest, SummaryResult
from .prompts import PROMPTS
from .stub import StubSummarizer

SUMMARIZERS = {"stub": StubSummarizer}

__all__ = ["PROMPTS", "SUMMARIZERS", "StubSummarizer", "Summarizer", "SummaryRequest", "SummaryResult"]
