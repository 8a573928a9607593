"""What every policy section is made of: typed, documented keys that pydantic validates.

The configs are standard-library dataclasses with their constraints in ``Annotated`` metadata,
which pydantic reads when it validates (``extra = "forbid"``, types, bounds; the cross-field
rules are in ``__post_init__``). Each layer's config lives beside the layer (``layers/``) and is
registered with it; ``policy.py`` assembles them into a Policy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import FrozenInstanceError, field
from typing import Annotated, Any, ClassVar, TypeVar, dataclass_transform

from .plain import dataclass

T = TypeVar("T")
S = TypeVar("S")


class Bound:
    """A bound pydantic applies when it validates, e.g. ``Bound(ge=1)``: the constraints of its
    core schema (``ge``, ``gt``, ``min_length``), through pydantic's documented hook. What
    annotated_types.Ge does, without importing it on every start (~7 ms)."""

    __slots__ = ("constraints",)

    def __init__(self, **constraints: Any) -> None:
        self.constraints = constraints

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return {**handler(source), **self.constraints}


#: the largest count, size or trigger a policy may name: far beyond any context, and small enough
#: that tokens, costs and sums of them stay exact (10^23 or 2^63-1 overflowed into exit 3)
MAX_COUNT = 10**12
Positive = Annotated[int, Bound(ge=1, le=MAX_COUNT)]
NonNegative = Annotated[int, Bound(ge=0, le=MAX_COUNT)]


def opt(default: Any, doc: str, added: bool = False) -> Any:
    """A config key: its default and the one line that documents it. ``added``: a key added after
    policies were fingerprinted, whose default keeps the earlier behaviour: at its default it is
    left out of the fingerprint, so a policy that does not use it keeps its fingerprint."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"doc": doc, "added": added})
    return field(default=default, metadata={"doc": doc, "added": added})


def per_class(fn: Callable[[type], T]) -> Callable[[type], T]:
    """``fn(kind)`` computed once per class (functools.cache, typed for classes)."""
    memo: dict[type, T] = {}

    @functools.wraps(fn)
    def cached(kind: type) -> T:
        if kind not in memo:
            memo[kind] = fn(kind)
        return memo[kind]

    return cached


@per_class
def added_defaults(kind: type) -> dict[str, Any]:
    """The keys of a config class added later, with the defaults that keep the earlier behaviour."""
    from dataclasses import MISSING, fields

    return {f.name: f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc, operator]
            for f in fields(kind) if f.metadata.get("added")
            and (f.default is not MISSING or f.default_factory is not MISSING)}


@per_class
def field_names(kind: type) -> tuple[str, ...]:
    """A dataclass's fields' names, in order (its ClassVars are not fields)."""
    from dataclasses import fields

    return tuple(f.name for f in fields(kind))


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def section(cls: type[S]) -> type[S]:
    """A policy's table: a slotted dataclass that is frozen and compared field by field, as
    ``dataclass(frozen=True, slots=True)`` makes one, except that equality, hashing and
    immutability are ``Section``'s, written once, not generated for every table: ``dataclass``
    compiles six methods a frozen class (about 4 M instructions of every start-up each); here it
    compiles ``__init__`` only. mypy reads the decorator as a frozen dataclass's."""
    return dataclass(eq=False, repr=False, slots=True)(cls)  # type: ignore[return-value]


@section
class Section:
    """What every part of a policy shares: unknown keys are errors; a field is set once, when the
    table is made, and never again; two tables are equal when they are of one class and every
    field is equal (a table's hash is its fields')."""

    __pydantic_config__: ClassVar[dict] = {"extra": "forbid"}

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, name):  # (a slot is empty until __init__ sets it: set once, then frozen)
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in field_names(self.__class__))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(field_names(self.__class__), self._values()))
        return f"{self.__class__.__qualname__}({shown})"


@section
class LayerConfig(Section):
    """What every layer's table has."""

    enabled: bool = opt(True, "run this layer at all")
