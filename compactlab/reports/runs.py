"""The runs of a comparison as a table of columns: one list a column, one entry a run, in the
order the reports show them. What the reports need of a table (a column, a row, an order, a
filter, CSV) without pandas, which was 84 MB of the install and a third of a small compare's
import; ``Runs.to_pandas`` makes a DataFrame for a user who wants one (pandas installed)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def missing(v: Any) -> bool:
    """No value: None, or a float NaN."""
    return v is None or (isinstance(v, float) and math.isnan(v))


class Runs:
    """Columns of equal length, by name, in results.csv's order."""

    __slots__ = ("columns",)

    def __init__(self, columns: dict[str, list[Any]]) -> None:
        lengths = {len(c) for c in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        self.columns = columns

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()), []))

    def __getitem__(self, name: str) -> list[Any]:
        return self.columns[name]

    def __contains__(self, name: object) -> bool:
        return name in self.columns

    def names(self) -> list[str]:
        return list(self.columns)

    def row(self, i: int) -> dict[str, Any]:
        return {name: column[i] for name, column in self.columns.items()}

    def rows(self) -> Iterator[dict[str, Any]]:
        """Each run as {column: value}, made one at a time (30,000 runs' dicts at once are 60 MB)."""
        for i in range(len(self)):
            yield self.row(i)

    def take(self, order: Sequence[int]) -> "Runs":
        """The runs at positions ``order``, in that order."""
        return Runs({name: [column[i] for i in order] for name, column in self.columns.items()})

    def order_by(self, name: str, ascending: bool = True) -> list[int]:
        """The positions sorted by column ``name``, stable (equal values keep their order), a
        missing value last either way."""
        column = self.columns[name]
        present = [i for i in range(len(column)) if not missing(column[i])]
        ordered = sorted(present, key=column.__getitem__, reverse=not ascending)
        return ordered + [i for i in range(len(column)) if missing(column[i])]

    def csv(self, cell: Callable[[str], str]) -> str:
        """The table as CSV, a header then a line a run; text cells passed through ``cell`` (for
        spreadsheets: ``text.csv_cell``), a missing value empty, numbers as Python writes them."""
        from .text import csv_bytes

        return csv_bytes([self.names(), *(["" if missing(v) else cell(v) if isinstance(v, str) else v for v in row]
                                          for row in zip(*self.columns.values()))]).decode("utf-8")

    def to_pandas(self) -> "pd.DataFrame":
        """The runs as a pandas DataFrame of their own (a copy)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("to_pandas() needs pandas: pip install 'compactlab[pandas]'") from exc
        return pd.DataFrame({name: list(column) for name, column in self.columns.items()})
