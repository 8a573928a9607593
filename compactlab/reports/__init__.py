"""Report writers, one per output format, chosen by name."""

from __future__ import annotations

from .replay_report import WRITERS, calls_csv, markdown, write_chart, write_files, write_runs
from .sparkline import sparkline

__all__ = ["WRITERS", "calls_csv", "markdown", "sparkline", "write_chart", "write_files", "write_runs"]
