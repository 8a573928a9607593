"""Dataclasses, named tuples and regular expressions made without compiling code when they are
imported.

The standard library's ``dataclass`` writes each method it makes (``__init__``, ``__eq__``, a
frozen class's ``__setattr__`` and ``__delattr__``, ``__repr__``, ``__hash__``) as Python source
and compiles it as the class is made: about 2.5 M instructions a method, a fifth of a replay's
start-up (the 29 methods a replay imported: 81 M of its 405 M instructions). ``dataclass`` here is
the standard library's asked to make none of them, with the same methods written once below,
reading the class's fields: what ``dataclasses.fields``, ``replace``, ``asdict``, pydantic and mypy
read of a class is the standard library's, and so is the behaviour (``tests/test_plain.py`` holds
each method to the one the standard library makes, class by class).

A class made thousands of times a run (a call's record) writes its own ``__init__`` and is made
with ``init=False``; the same test holds each such ``__init__`` to its fields.

``NamedTuple`` here is ``typing.NamedTuple``'s class syntax without its check of each field's
annotation: under ``from __future__ import annotations`` every annotation is a string, which
``typing`` turns into a ``ForwardRef`` by compiling it (a ``compile`` a field: 35 named tuples a
replay imports, about half of each one's making). The class made is the one ``typing`` makes,
``collections.namedtuple``'s with the class body's methods, docstring and defaults; its
``__annotations__`` hold the strings as written (``typing.get_type_hints`` reads either), and it
has no ``__orig_bases__`` (``typing``'s records its ``NamedTuple`` function there). mypy reads it as
``typing.NamedTuple``. ``collections.namedtuple`` compiles each class's ``__new__`` from source too
(``eval`` of a lambda of its fields: 10 M instructions of a replay's start-up); ``named_tuple``
here makes the same class, its ``__new__`` the lambda of as many fields written below, its
arguments renamed.

``pattern`` is ``re.compile`` compiled where it is first used, not where it is imported: ``re``
compiles a pattern in Python (its parser and compiler), 0.1 to 1.5 ms each, and 14 of the 16 a
replay imported were never used by one (3.5 ms of every start). Once compiled, its methods are
the compiled pattern's own, bound: as fast to call as ``re.compile``'s.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import sys
from collections.abc import Callable
from types import FunctionType
from dataclasses import MISSING, FrozenInstanceError, field
from typing import TYPE_CHECKING, Any, AnyStr, TypeVar, dataclass_transform, overload

T = TypeVar("T")


@overload
def dataclass(cls: type[T], /) -> type[T]: ...


@overload
def dataclass(*, init: bool = True, repr: bool = True, eq: bool = True, frozen: bool = False,
              slots: bool = False, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field,))
def dataclass(cls: type[T] | None = None, /, *, init: bool = True, repr: bool = True, eq: bool = True,
              frozen: bool = False, slots: bool = False, kw_only: bool = False) -> Any:
    """``dataclasses.dataclass`` with these options (the others are never used here), its methods
    not compiled: ``init=False`` where the class writes its own ``__init__``."""

    def make(cls: type[T]) -> type[T]:
        if frozen and slots:  # (the standard library's pickling of such a class is not made here)
            raise TypeError(f"{cls.__qualname__}: a frozen class with slots is not made by compactlab.plain")
        own = cls.__dict__
        made: Any = dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=False, slots=slots,
                                          kw_only=kw_only)
        fields = dataclasses.fields(made)
        compared = tuple(f.name for f in fields if f.compare)
        if init and "__init__" not in own:
            made.__init__ = _init(made, frozen)
        if repr and "__repr__" not in own:
            made.__repr__ = _repr(tuple(f.name for f in fields if f.repr))
        if eq and "__eq__" not in own:
            made.__eq__ = _eq(compared)
        own_hash = own.get("__hash__", MISSING)  # (None where the class wrote __eq__ alone: Python's)
        if eq and (own_hash is MISSING or (own_hash is None and "__eq__" in own)):
            # as the standard library: a frozen class hashes its fields, another that compares them
            # is unhashable
            made.__hash__ = _hash(compared) if frozen else None
        if frozen:
            made.__setattr__, made.__delattr__ = _frozen(made, frozenset(f.name for f in fields))
        return made  # type: ignore[no-any-return]

    return make if cls is None else make(cls)


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of ``names``' values of an object (the standard library compares and hashes it)."""
    return lambda obj: tuple([getattr(obj, name) for name in names])


def _init(cls: Any, frozen: bool) -> Callable[..., None]:
    """The ``__init__`` the standard library would make of ``cls``'s fields: positional ones, then
    keyword-only ones; a default, else a default factory, else required; fields with ``init=False``
    set to their default; ``__post_init__`` called last. A frozen class's fields are set by
    ``object.__setattr__``, another's by its own ``__setattr__``."""
    fields = dataclasses.fields(cls)
    taken = [f for f in fields if f.init]
    positional = [f.name for f in taken if not f.kw_only]
    specs = [(f.name, f.default, f.default_factory, f.init) for f in fields]
    allowed = frozenset(f.name for f in taken)
    post_init = hasattr(cls, "__post_init__")
    where = f"{cls.__qualname__}.__init__()"
    set_to = object.__setattr__ if frozen else setattr

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(positional):
            raise TypeError(f"{where} takes {len(positional) + 1} positional arguments but {len(args) + 1} were given")
        if kwargs:
            for name in kwargs:
                if name not in allowed:
                    raise TypeError(f"{where} got an unexpected keyword argument {name!r}")
            for name in positional[: len(args)]:
                if name in kwargs:
                    raise TypeError(f"{where} got multiple values for argument {name!r}")
        given = dict(zip(positional, args))
        given.update(kwargs)
        missing = []
        for name, default, factory, takes in specs:
            if takes and name in given:
                value = given[name]
            elif default is not MISSING:
                value = default
            elif factory is not MISSING:
                value = factory()
            else:
                missing.append(name)
                continue
            set_to(self, name, value)
        if missing:
            said = " and ".join([", ".join(map(repr, missing[:-1])), repr(missing[-1])] if len(missing) > 1
                                else [repr(missing[0])])
            raise TypeError(f"{where} missing {len(missing)} required argument{'s' * (len(missing) > 1)}: {said}")
        if post_init:
            self.__post_init__()

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        shown = ", ".join([f"{name}={getattr(self, name)!r}" for name in names])
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _eq(names: tuple[str, ...]) -> Callable[[Any, object], Any]:
    values = _values(names)

    def __eq__(self: Any, other: object) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash(names: tuple[str, ...]) -> Callable[[Any], int]:
    values = _values(names)

    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__


def _frozen(cls: Any, names: frozenset[str]) -> tuple[Callable[..., None], Callable[..., None]]:
    """A frozen class's ``__setattr__`` and ``__delattr__``: a field (or anything, on the class
    itself) is never set again once ``__init__`` has set it."""

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


#: what a named tuple's class body may not set (``typing``'s own list), and what it sets that the
#: class made keeps as ``collections.namedtuple`` made it
_PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults", "_make",
                         "_replace", "_asdict", "_source"})
_SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    class _NamedTupleMeta(type):
        """``typing.NamedTupleMeta`` without ``_type_check`` of each annotation (nor ``Generic``)."""

        def __new__(cls, typename: str, bases: tuple[type, ...], ns: dict[str, Any]) -> type:
            if bases != (NamedTuple,):
                raise TypeError("can only inherit from compactlab.plain.NamedTuple, and only from it")
            types = ns.get("__annotations__", {})
            default_names: list[str] = []
            for name in types:
                if name in ns:
                    default_names.append(name)
                elif default_names:
                    raise TypeError(f"Non-default namedtuple field {name} cannot follow default field"
                                    f"{'s' if len(default_names) > 1 else ''} {', '.join(default_names)}")
            made = named_tuple(typename, tuple(types), tuple(ns[n] for n in default_names), ns["__module__"])
            made.__annotations__ = made.__new__.__annotations__ = dict(types)
            for key in ns:
                if key in _PROHIBITED:
                    raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
                if key not in _SPECIAL and key not in made._fields:
                    setattr(made, key, ns[key])
            return made

    NamedTuple = type.__new__(_NamedTupleMeta, "NamedTuple", (), {"__module__": __name__})


_tuple_new: Callable[..., Any] = tuple.__new__

#: ``lambda _cls, a, b: _tuple_new(_cls, (a, b))`` for each number of fields from 0 to 23 (its
#: position here): what ``collections.namedtuple`` compiles for a class's ``__new__``, its arguments
#: renamed as its fields
_NEW: tuple[Callable[..., Any], ...] = (
    lambda _cls: _tuple_new(_cls, ()),
    lambda _cls, _0: _tuple_new(_cls, (_0,)),
    lambda _cls, _0, _1: _tuple_new(_cls, (_0, _1)),
    lambda _cls, _0, _1, _2: _tuple_new(_cls, (_0, _1, _2)),
    lambda _cls, _0, _1, _2, _3: _tuple_new(_cls, (_0, _1, _2, _3)),
    lambda _cls, _0, _1, _2, _3, _4: _tuple_new(_cls, (_0, _1, _2, _3, _4)),
    lambda _cls, _0, _1, _2, _3, _4, _5: _tuple_new(_cls, (_0, _1, _2, _3, _4, _5)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6: _tuple_new(_cls, (_0, _1, _2, _3, _4, _5, _6)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7: _tuple_new(_cls, (_0, _1, _2, _3, _4, _5, _6, _7)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8: _tuple_new(_cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9: _tuple_new(_cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8,
                                                                           _9)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10: _tuple_new(_cls, (_0, _1, _2, _3, _4, _5, _6, _7,
                                                                                _8, _9, _10)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11: _tuple_new(_cls, (_0, _1, _2, _3, _4, _5, _6,
                                                                                     _7, _8, _9, _10, _11)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12: _tuple_new(
        _cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13: _tuple_new(
        _cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14: _tuple_new(
        _cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15: _tuple_new(
        _cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16: _tuple_new(
        _cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17: _tuple_new(
        _cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18: _tuple_new(
        _cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19: (
        _tuple_new(_cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18,
                          _19))),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20: (
        _tuple_new(_cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18,
                          _19, _20))),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21: (
        _tuple_new(_cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18,
                          _19, _20, _21))),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21,
    _22: _tuple_new(_cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18,
                           _19, _20, _21, _22)),
    lambda _cls, _0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21,
    _22, _23: _tuple_new(_cls, (_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17,
                                _18, _19, _20, _21, _22, _23)),
)


def named_tuple(typename: str, fields: tuple[str, ...], defaults: tuple[Any, ...], module: str) -> type:
    """``collections.namedtuple(typename, fields, defaults=defaults, module=module)`` (Python
    3.11's, whose making this follows step by step, and whose checks of the names it keeps), its
    ``__new__`` not compiled (``_NEW``: a class of more fields than it has is made by
    ``collections``)."""
    from keyword import iskeyword

    if len(fields) >= len(_NEW):
        return collections.namedtuple(typename, fields, defaults=defaults, module=module)
    fields = tuple(map(str, fields))
    typename = sys.intern(str(typename))
    for name in (typename, *fields):
        if not name.isidentifier():
            raise ValueError(f"Type names and field names must be valid identifiers: {name!r}")
        if iskeyword(name):
            raise ValueError(f"Type names and field names cannot be a keyword: {name!r}")
    seen: set[str] = set()
    for name in fields:
        if name.startswith("_"):
            raise ValueError(f"Field names cannot start with an underscore: {name!r}")
        if name in seen:
            raise ValueError(f"Encountered duplicate field name: {name!r}")
        seen.add(name)
    if len(defaults) > len(fields):
        raise TypeError("Got more default values than field names")
    field_defaults = dict(reversed(list(zip(reversed(fields), reversed(defaults)))))
    field_names = tuple(map(sys.intern, fields))
    num_fields = len(field_names)
    arg_list = ", ".join(field_names) + ("," if num_fields == 1 else "")
    repr_fmt = "(" + ", ".join(f"{name}=%r" for name in field_names) + ")"
    _dict, _tuple, _len, _map, _zip = dict, tuple, len, map, zip
    namespace = {"_tuple_new": _tuple_new, "__builtins__": {}, "__name__": f"namedtuple_{typename}"}
    code = _NEW[num_fields].__code__
    __new__ = FunctionType(code.replace(co_varnames=("_cls", *field_names), co_filename="<string>",
                                        co_firstlineno=1), namespace, "<lambda>", defaults)
    __new__.__name__ = "__new__"
    __new__.__doc__ = f"Create new instance of {typename}({arg_list})"

    @classmethod  # type: ignore[misc]
    def _make(cls: Any, iterable: Any) -> Any:
        result = _tuple_new(cls, iterable)
        if _len(result) != num_fields:
            raise TypeError(f"Expected {num_fields} arguments, got {len(result)}")
        return result

    _make.__func__.__doc__ = f"Make a new {typename} object from a sequence or iterable"  # type: ignore[attr-defined]

    def _replace(self: Any, /, **kwds: Any) -> Any:
        result = self._make(_map(kwds.pop, field_names, self))
        if kwds:
            raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
        return result

    _replace.__doc__ = f"Return a new {typename} object replacing specified fields with new values"

    def __repr__(self: Any) -> str:
        "Return a nicely formatted representation string"
        return self.__class__.__name__ + repr_fmt % self  # type: ignore[no-any-return]

    def _asdict(self: Any) -> dict[str, Any]:
        "Return a new dict which maps field names to their values."
        return _dict(_zip(self._fields, self))

    def __getnewargs__(self: Any) -> tuple[Any, ...]:
        "Return self as a plain tuple.  Used by copy and pickle."
        return _tuple(self)

    for method in (__new__, _make.__func__, _replace, __repr__, _asdict, __getnewargs__):  # type: ignore[attr-defined]
        method.__qualname__ = f"{typename}.{method.__name__}"
        method.__annotations__ = {}  # (collections' are written without: the types here are for mypy)
    class_namespace: dict[str, Any] = {
        "__doc__": f"{typename}({arg_list})", "__slots__": (), "_fields": field_names,
        "_field_defaults": field_defaults, "__new__": __new__, "_make": _make, "_replace": _replace,
        "__repr__": __repr__, "_asdict": _asdict, "__getnewargs__": __getnewargs__, "__match_args__": field_names}
    for index, name in enumerate(field_names):
        class_namespace[name] = _tuplegetter(index, sys.intern(f"Alias for field number {index}"))
    made = type(typename, (tuple,), class_namespace)
    made.__module__ = module
    return made


#: a field's getter, as ``collections.namedtuple`` makes it (``_collections``' where it is C's)
_tuplegetter = collections._tuplegetter  # type: ignore[attr-defined]


#: the methods and attributes of a compiled pattern (``re.Pattern``'s public ones)
_PATTERN_NAMES = tuple(name for name in dir(re.Pattern) if not name.startswith("_"))


class _Pattern:
    """``re.compile(pattern, flags)``, compiled when one of its methods or attributes is first
    asked for; from then on each is the compiled pattern's own, held here."""

    def __init__(self, pattern: Any, flags: int) -> None:
        self._source: tuple[Any, int] = (pattern, flags)

    def __getattr__(self, name: str) -> Any:  # (asked only while a name is not held yet)
        if name not in _PATTERN_NAMES:
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        for held in _PATTERN_NAMES:
            setattr(self, held, getattr(compiled, held))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"compactlab.plain.pattern({self._source[0]!r}, {self._source[1]!r})"


def pattern(source: AnyStr, flags: int | re.RegexFlag = 0) -> re.Pattern[AnyStr]:
    """``re.compile(source, flags)``, compiled when first used (``_Pattern``); an invalid pattern is
    an error there, so every module-level one is compiled by ``tests/test_plain.py``."""
    made: Any = _Pattern(source, int(flags))
    return made
