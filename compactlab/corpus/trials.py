"""A tune's trials (#20 §2): the parameters searched, each trial's point (its values and scores)
and the result of a search (the front, the reference, what is recommended)."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

from .. import metrics
from ..plain import dataclass


def direction(objective: str) -> Literal["maximize", "minimize"]:
    """Which way an objective (metrics.OBJECTIVES: what each is, over the corpus) is optimised."""
    return "maximize" if metrics.OBJECTIVES[objective].better == "higher" else "minimize"


def column(objective: str) -> str:
    """The name of an objective in the front's columns: its metric's."""
    m = metrics.OBJECTIVES.get(objective)
    return m.name if m is not None else objective


@dataclass(frozen=True)
class Param:
    """A searched key: an int or float range (log scale or not), or a list of choices."""

    key: str
    kind: str  # int | float | choice
    low: float = 0
    high: float = 0
    log: bool = False
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: Any) -> Any:
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)
        if self.kind == "float":
            return trial.suggest_float(self.key, self.low, self.high, log=self.log)
        return trial.suggest_categorical(self.key, list(self.choices))

    def holds(self, value: Any) -> bool:
        """Whether ``value`` is one this key's space can suggest (a study file edited by hand or
        damaged may hold any other)."""
        if self.kind == "choice":
            return any(type(value) is type(c) and value == c for c in self.choices)
        if type(value) is not (int if self.kind == "int" else float) and not (self.kind == "float" and type(value) is int):
            return False
        return self.low <= value <= self.high

    def __str__(self) -> str:
        if self.kind == "choice":
            return f"{self.key} in {{{', '.join(map(str, self.choices))}}}"
        return f"{self.key} {self.kind} {self.low:g}..{self.high:g}{' (log)' if self.log else ''}"


#: the scores a suggestion is held to, shown beside the objectives (#55 §3)
GUARDED = ("cost", "recall", "retention")


@dataclass
class Point:
    """A trial (or the base policy) and what it scored."""

    number: int  # the trial's number; -1 for the base policy
    values: dict[str, Any]
    scores: dict[str, float]
    feasible: bool = True
    acted: dict[str, int] | None = None  # how often each layer acted over the corpus (None: not known)


@dataclass
class TuneResult:
    base: str
    params: list[Param]
    objectives: list[str]
    base_point: Point
    points: list[Point]  # every finished trial, in order
    front: list[Point]  # the feasible Pareto front, best first objective first
    interrupted: KeyboardInterrupt | None = None
    failures: list[str] = field(default_factory=list)
    recommendation: str = ""
    notes: list[str] = field(default_factory=list)  # searched keys that changed nothing
    #: no compaction on the same corpus with the same settings: the floors and the cost every
    #: suggestion is held to (None: not run; recall and retention 1.0)
    reference: Point | None = None
    #: what the recommendation names: a front point, the base, no compaction (the reference), or
    #: None (nothing qualifies)
    chosen: Point | None = None
    #: whether ``chosen`` keeps recall and retention above the floors (False: none did, and it is
    #: the one to use if you must compact, as compare's verdict names one)
    passes: bool = True
    #: the floors the recommendation held the points to (recall, retention: no compaction's less
    #: the margin), for the chart to draw
    floors: dict[str, float] = field(default_factory=dict)
    #: the harness whose settings were searched (``harness_settings``), and the setting to paste, or
    #: why there is none to make (``nothing_to_set``: the point recommended is your current setting,
    #: or the harness's default)
    harness: str | None = None
    #: why no compaction cannot be set on these sessions where their versions say so though the
    #: harness's table does not (``harness_settings.as_recorded``: Qwen Code 0.17's); None: the table's
    no_off: str | None = None
    paste: list[str] = field(default_factory=list)
    nothing_to_set: str | None = None
    #: with a harness: your current setting of it, in words with its source (the base is set to it)
    current: str | None = None

    def shown(self) -> list[str]:
        """The objectives, then what every suggestion is held to (cost saving, recall, retention)."""
        return [*self.objectives, *(o for o in GUARDED if o not in self.objectives)]

    def front_rows(self) -> list[dict[str, Any]]:
        return [{"point": i + 1, "trial": p.number, **p.values,
                 **{column(o): round(p.scores[o], 6) for o in self.shown() if o in p.scores},
                 "cost_usd": round(p.scores["cost_usd"], 6), "violations": int(p.scores["violations"]),
                 "overflows": int(p.scores["overflows"])} for i, p in enumerate(self.front)]
