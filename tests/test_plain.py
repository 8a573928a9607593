"""``compactlab.plain``: dataclasses made without compiling code, held to the standard library's."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle
import pkgutil
from dataclasses import FrozenInstanceError, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compactlab
from compactlab import plain
from helpers import examples


OPTIONS = [dict(eq=eq, repr=repr_, frozen=frozen, slots=slots, kw_only=kw_only)
           for eq in (True, False) for repr_ in (True, False) for frozen in (True, False)
           for slots in (True, False) for kw_only in (True, False) if not (frozen and slots)]


def _body(with_post_init: bool) -> dict[str, Any]:
    """A class body of every kind of field: required, defaulted, a factory's, one not taken by
    ``__init__``, one keyword-only, one not compared; and a ``__post_init__`` that checks one."""
    body: dict[str, Any] = {
        "__annotations__": {"a": "int", "b": "str", "c": "list", "d": "int", "e": "int", "f": "int"},
        "b": "x",
        "c": field(default_factory=list),
        "d": field(default=7, init=False),
        "e": field(default=3, kw_only=True),
        "f": field(default=0, compare=False, repr=False),
    }
    if with_post_init:
        def __post_init__(self: Any) -> None:
            if self.a < 0:  # (a string: TypeError)
                raise ValueError("a below 0")

        body["__post_init__"] = __post_init__
    return body


def _both(options: dict[str, Any], post_init: bool) -> tuple[type, type]:
    std = dataclasses.dataclass(**options)(type("Made", (), _body(post_init)))
    ours = plain.dataclass(**options)(type("Made", (), _body(post_init)))
    return std, ours


def _outcome(cls: type, args: tuple, kwargs: dict) -> Any:
    try:
        made = cls(*args, **kwargs)
    except (TypeError, ValueError) as exc:
        return type(exc)
    return {name: getattr(made, name, None) for name in ("a", "b", "c", "d", "e", "f")}


CALLS = st.tuples(
    st.lists(st.one_of(st.integers(-2, 5), st.text(max_size=2), st.just([1])), max_size=5).map(tuple),
    st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e", "f", "g"]), st.integers(-2, 5), max_size=4))


@settings(max_examples=examples(300), deadline=None)
@given(options=st.sampled_from(OPTIONS), post_init=st.booleans(), call=CALLS)
def test_an_init_binds_as_the_standard_librarys(options: dict[str, Any], post_init: bool,
                                                call: tuple[tuple, dict]) -> None:
    """The same arguments make the same fields, or the same kind of error (too many, unknown,
    given twice, missing; what ``__post_init__`` raises), for every option a class here takes."""
    std, ours = _both(options, post_init)
    args, kwargs = call
    assert _outcome(ours, args, kwargs) == _outcome(std, args, kwargs)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(k for k, v in o.items() if v) or "plain")
def test_the_other_methods_are_the_standard_librarys(options: dict[str, Any]) -> None:
    """Equality (its fields, not those with compare=False), hashing (a frozen class's by its
    fields, another that compares them unhashable), the repr, a frozen class's refusal, what
    ``replace``, ``asdict``, ``fields`` and pickle read."""
    std, ours = _both(options, False)
    kw = {"e": 4} if options["kw_only"] else {}
    one = (1, "y", (2,)) if not options["kw_only"] else ()
    kw = {**kw, **({"a": 1, "b": "y", "c": (2,)} if options["kw_only"] else {})}
    s1, s2, s3 = std(*one, **kw), std(*one, **kw), std(*one, **{**kw, "f": 9})
    o1, o2, o3 = ours(*one, **kw), ours(*one, **kw), ours(*one, **{**kw, "f": 9})
    assert (o1 == o2, o1 == o3, o1 != o2, o1 == object()) == (s1 == s2, s1 == s3, s1 != s2, s1 == object())
    assert (ours.__hash__ is None) == (std.__hash__ is None)
    if std.__hash__ is not None and options["eq"]:
        assert hash(o1) == hash(s1) and hash(o1) == hash(o3)
    if options["repr"]:
        assert repr(o1) == repr(s1)
    else:
        assert repr(o1).startswith("<") and repr(s1).startswith("<")
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(std)]
    assert dataclasses.asdict(o1) == dataclasses.asdict(s1)
    assert _outcome(lambda: dataclasses.replace(o1, b="z"), (), {}) == _outcome(lambda: dataclasses.replace(s1, b="z"), (), {})
    if options["frozen"]:
        for target in (o1, s1):
            with pytest.raises(FrozenInstanceError):
                target.a = 2  # type: ignore[attr-defined]
            with pytest.raises(FrozenInstanceError):
                del target.a  # type: ignore[attr-defined]
    else:
        o1.a = s1.a = 5  # type: ignore[attr-defined]
        assert o1.a == s1.a == 5  # type: ignore[attr-defined]
    assert hasattr(ours, "__slots__") == hasattr(std, "__slots__")


@pytest.mark.parametrize("frozen", [True, False])
def test_a_class_that_writes_its_own_methods_keeps_them(frozen: bool) -> None:
    """Its ``__init__`` and ``__eq__`` are its own; its hash is what the standard library gives
    such a class (a frozen one's fields', Python's None for another)."""
    def made(decorator: Any) -> Any:
        @decorator(frozen=frozen)
        class Own:
            a: int = 0

            def __init__(self, a: int = 5) -> None:
                object.__setattr__(self, "a", a * 2)

            def __eq__(self, other: object) -> bool:
                return True

        return Own

    ours, std = made(plain.dataclass), made(dataclasses.dataclass)
    assert ours().a == 10 and ours(1) == ours(2)
    assert (ours.__hash__ is None) == (std.__hash__ is None) == (not frozen)
    if frozen:
        assert hash(ours(3)) == hash(std(3))


def test_a_frozen_class_with_slots_is_refused() -> None:
    with pytest.raises(TypeError, match="frozen class with slots"):
        plain.dataclass(frozen=True, slots=True)(type("Made", (), {"__annotations__": {"a": "int"}}))


def _package_classes(kind: Any) -> list[type]:
    """Every class of ``kind`` (a predicate) the package defines (a module that needs an extra not
    installed is left out)."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(compactlab.__path__, "compactlab."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__ and kind(value):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return sorted(found.values(), key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _package_dataclasses() -> list[type]:
    """Every dataclass the package defines."""
    return _package_classes(dataclasses.is_dataclass)


def test_no_dataclass_of_the_package_compiles_a_method() -> None:
    """Every method of every dataclass here is written in a file (``plain``'s, or the class's own),
    none compiled from source the standard library writes (``<string>``), and each ``__init__`` a
    class writes itself takes its fields: their names, in order, positional or keyword-only, and
    their defaults (None standing for a default factory's)."""
    classes = _package_dataclasses()
    assert len(classes) > 40
    for cls in classes:
        for name in ("__init__", "__eq__", "__repr__", "__hash__", "__setattr__", "__delattr__"):
            method = cls.__dict__.get(name)
            code = getattr(method, "__code__", None)
            assert code is None or code.co_filename != "<string>", f"{cls.__qualname__}.{name} was compiled"
        init = cls.__init__
        if getattr(init, "__module__", None) == plain.__name__ or init is object.__init__:
            continue
        params = list(inspect.signature(init).parameters.values())[1:]
        taken = [f for f in dataclasses.fields(cls) if f.init]
        assert [p.name for p in params] == [f.name for f in taken], cls.__qualname__
        for p, f in zip(params, taken):
            assert (p.kind is p.KEYWORD_ONLY) == f.kw_only, (cls.__qualname__, f.name)
            if f.default is not dataclasses.MISSING:
                assert p.default == f.default, (cls.__qualname__, f.name)
            elif f.default_factory is not dataclasses.MISSING:
                assert p.default is None, (cls.__qualname__, f.name)
            else:
                assert p.default is p.empty, (cls.__qualname__, f.name)


def test_a_record_written_out_takes_what_it_took() -> None:
    """The records whose ``__init__`` is written out make what the generic one makes of the same
    arguments, positional and by name."""
    from compactlab.engine.layers.base import LayerStats
    from compactlab.engine.records import CompactionEvent, PythonTurnRecord

    for cls, args in ((PythonTurnRecord, tuple(range(28))), (CompactionEvent, (1, ["snip"], 2, 3, 4, 5, 6, 7, 8, [("x", 1)])),
                      (LayerStats, tuple(range(15)))):
        names = [f.name for f in dataclasses.fields(cls)]
        generic = plain._init(cls, False)
        for n in range(len(args) + 1):
            ours, theirs = object.__new__(cls), object.__new__(cls)
            cls.__init__(ours, *args[:n], **dict(zip(names[n:], args[n:])))
            generic(theirs, *args[:n], **dict(zip(names[n:], args[n:])))
            assert vars(ours) == vars(theirs)
        assert pickle.loads(pickle.dumps(cls(*args))).__dict__ == cls(*args).__dict__


def _named_tuple_body() -> dict[str, Any]:
    """A named tuple's class body: required and defaulted fields, a docstring, a method, a property
    and a class attribute."""

    def doubled(self: Any) -> int:
        return self.a * 2

    return {"__annotations__": {"a": "int", "b": "str", "c": "tuple[int, ...] | None"}, "__doc__": "A row.",
            "__qualname__": "Outer.Row", "b": "x", "c": None, "doubled": doubled,
            "shown": property(lambda self: f"{self.a}:{self.b}"), "LIMIT": 3}


def _named_tuples() -> tuple[type, type]:
    import typing

    body = _named_tuple_body()
    theirs = typing.NamedTupleMeta("Row", (typing._NamedTuple,), {"__module__": __name__, **body})  # type: ignore[attr-defined]
    ours = type(plain.NamedTuple)("Row", (plain.NamedTuple,), {"__module__": __name__, **_named_tuple_body()})
    return theirs, ours


@given(st.lists(st.one_of(st.integers(-3, 3), st.text(max_size=2), st.none()), max_size=4))
@settings(max_examples=examples(60), deadline=None)
def test_a_named_tuple_is_typings(args: list[Any]) -> None:
    """``plain.NamedTuple`` makes the class ``typing.NamedTuple`` makes of the same body: its
    fields, defaults, docstring, names, bases, methods and class attributes; made of the same
    arguments (or refusing them alike), its instances equal, hash, print, replace, pickle and
    remake alike (``_make``, ``__getnewargs__``). Only the annotations differ: the strings as written, not ``ForwardRef``s."""
    theirs, ours = _named_tuples()
    for name in ("_fields", "_field_defaults", "__doc__", "__name__", "__qualname__", "__module__", "__bases__",
                 "__match_args__", "LIMIT"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.__annotations__ == {"a": "int", "b": "str", "c": "tuple[int, ...] | None"}
    assert [a.__forward_arg__ for a in theirs.__annotations__.values()] == list(ours.__annotations__.values())
    assert not hasattr(ours, "__orig_bases__")  # (typing's: its NamedTuple function, which nothing here reads)
    _held_to_collections(ours, theirs)

    def made(cls: type) -> Any:
        try:
            row = cls(*args)
        except TypeError as exc:
            return type(exc), str(exc)
        return (tuple(row), repr(row), hash(row), row._asdict(), tuple(row._replace(b="y")), row.doubled()
                if type(row.a) is int else None, row.shown, tuple(cls._make(row)), row.__getnewargs__())

    assert made(ours) == made(theirs)


def _bare(signature: inspect.Signature) -> inspect.Signature:
    """A signature without its annotations."""
    return signature.replace(parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
                             return_annotation=signature.empty)


def _held_to_collections(ours: type, theirs: type) -> None:
    """What ``collections.namedtuple`` made of ``theirs`` and ``plain.named_tuple`` of ``ours``:
    each method's name, qualified name, docstring and signature, ``__new__``'s defaults and the
    source it names, each field's getter and its docstring."""
    fields = theirs._fields  # type: ignore[attr-defined]
    for name in ("__new__", "_make", "_replace", "__repr__", "_asdict", "__getnewargs__", *fields):
        a, b = getattr(ours, name), getattr(theirs, name)
        for attr in ("__name__", "__qualname__", "__doc__"):
            assert getattr(a, attr, None) == getattr(b, attr, None), (name, attr)
        if callable(b):  # (the annotations aside: strings here, typing's ForwardRefs)
            assert _bare(inspect.signature(a)) == _bare(inspect.signature(b)), name
    assert ours.__new__.__defaults__ == theirs.__new__.__defaults__  # type: ignore[misc]
    assert (ours.__new__.__code__.co_filename, ours.__new__.__code__.co_name) == (  # type: ignore[misc]
        theirs.__new__.__code__.co_filename, theirs.__new__.__code__.co_name)  # type: ignore[misc]
    assert type(vars(ours)["a"]) is type(vars(theirs)["a"])


@pytest.mark.parametrize("n", [0, 1, 2, 7, 23, 24, 30])
def test_a_named_tuple_of_any_number_of_fields_is_collections(n: int) -> None:
    """``plain.named_tuple`` of 0 to 23 fields (``_NEW``'s), and more (``collections``' own):
    the class ``collections.namedtuple`` makes, made and refused alike, its defaults the last
    fields'."""
    import collections

    fields = tuple(f"f{k}" for k in range(n))
    defaults = tuple(range(n // 2))
    ours = plain.named_tuple("Wide", fields, defaults, __name__)
    theirs = collections.namedtuple("Wide", fields, defaults=defaults, module=__name__)
    for name in ("_fields", "_field_defaults", "__doc__", "__name__", "__module__", "__match_args__"):
        assert getattr(ours, name) == getattr(theirs, name), name
    for name in ("__new__", "_make", "_replace", "__repr__"):
        assert inspect.signature(getattr(ours, name)) == inspect.signature(getattr(theirs, name))
    assert ours.__new__.__defaults__ == theirs.__new__.__defaults__  # type: ignore[misc]
    args = list(range(100, 100 + n))
    assert repr(ours(*args)) == repr(theirs(*args)) and tuple(ours(*args)) == tuple(args)
    assert ours(**dict(zip(fields, args)))._asdict() == dict(zip(fields, args))
    for wrong in (args + [1], args[: n - len(defaults) - 1] if n - len(defaults) else None):
        if wrong is None:
            continue
        with pytest.raises(TypeError) as a:
            ours(*wrong)
        with pytest.raises(TypeError) as b:
            theirs(*wrong)
        assert str(a.value) == str(b.value)
    assert ours(*args).__getnewargs__() == theirs(*args).__getnewargs__() == tuple(args)


def test_a_named_tuples_names_are_checked_as_collections_checks_them() -> None:
    """A field or type name that is no identifier, a keyword, a field that starts with an
    underscore or is given twice, more defaults than fields: refused as ``collections`` refuses
    them, in the same words."""
    import collections

    for typename, fields, defaults in (("Row", ("a b",), ()), ("class", ("a",), ()), ("Row", ("def",), ()),
                                       ("Row", ("_a",), ()), ("Row", ("a", "a"), ()), ("Row", ("a",), (1, 2)),
                                       ("Row", (1,), ()), (2, ("a",), ())):
        with pytest.raises((TypeError, ValueError)) as theirs:
            collections.namedtuple(typename, fields, defaults=defaults)  # type: ignore[arg-type]
        with pytest.raises(theirs.type) as ours:
            plain.named_tuple(typename, fields, defaults, __name__)  # type: ignore[arg-type]
        assert str(ours.value) == str(theirs.value)


def test_no_named_tuple_of_the_package_compiles_its_new() -> None:
    """Importing the package makes each of its named tuples by ``plain.named_tuple``, none by
    ``collections.namedtuple`` (which compiles each one's ``__new__``: ``eval``)."""
    import subprocess
    import sys

    script = (
        "import collections\n"
        "import compactlab.plain as plain\n"
        "theirs, ours = [], []\n"
        "was, made = collections.namedtuple, plain.named_tuple\n"
        "def counted(*a, **k):\n"
        "    if str(k.get('module')).startswith('compactlab'): theirs.append(a[0])\n"
        "    return was(*a, **k)\n"
        "def making(*a):\n"
        "    ours.append(a[0]); return made(*a)\n"
        "collections.namedtuple, plain.named_tuple = counted, making\n"
        "import compactlab.cli, compactlab.jobs.replay, compactlab.engine.loop, compactlab.engine.keeping\n"
        "print(len(theirs), len(ours))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    theirs, ours = map(int, out.split())
    assert theirs == 0 and ours > 30


def test_a_named_tuple_refuses_what_typings_refuses() -> None:
    """A required field after a defaulted one, a body that sets what the named tuple makes, and a
    base besides ``NamedTuple``: refused as ``typing`` refuses them."""
    import typing

    meta = type(plain.NamedTuple)
    for body, error in (({"__annotations__": {"a": "int", "b": "int"}, "a": 1}, TypeError),
                        ({"__annotations__": {"a": "int"}, "_make": classmethod(lambda cls: cls)}, AttributeError)):
        with pytest.raises(error) as theirs:
            typing.NamedTupleMeta("Row", (typing._NamedTuple,), {"__module__": __name__, **body})  # type: ignore[attr-defined]
        with pytest.raises(error) as ours:
            meta("Row", (plain.NamedTuple,), {"__module__": __name__, **body})
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError):
        meta("Row", (plain.NamedTuple, object), {"__module__": __name__})


def test_every_named_tuple_of_the_package_has_types_for_annotations() -> None:
    """What ``typing.NamedTuple`` checks as each class is made, and ``plain.NamedTuple`` leaves out
    (each annotation a type), checked here of every named tuple of the package: each class's
    annotations resolve to types (``typing.get_type_hints``), one for each field."""
    import typing

    found = _package_classes(lambda cls: issubclass(cls, tuple) and "_fields" in vars(cls))
    assert len(found) > 40
    for cls in found:
        assert isinstance(cls.__annotations__, dict) and list(cls.__annotations__) == list(cls._fields), cls
        hints = typing.get_type_hints(cls)
        assert list(hints) == list(cls._fields), cls
        for name, hint in hints.items():
            typing._type_check(hint, f"{cls.__qualname__}.{name}")  # type: ignore[attr-defined]


PATTERN_SOURCES = [r"a(b)+", r"(?m)^\s{0,8}(\d{1,7})(?:[:\t|]|\s{2})", r"(?P<name>[a-z]+)_(\d)", "[\x00-\x1f\u202a]",
                   r"\bx\b"]


@settings(max_examples=examples(60), deadline=None)
@given(source=st.sampled_from(PATTERN_SOURCES), text=st.text(alphabet="ab_xyz019 \n\t:|\x01\u202a", max_size=40),
       as_bytes=st.booleans())
def test_a_pattern_compiled_when_first_used_is_res(source: str, text: str, as_bytes: bool) -> None:
    """``plain.pattern`` answers as ``re.compile`` of the same source does, every method and
    attribute, as text and as bytes; it compiles nothing until one is asked for, and then holds
    the compiled pattern's own methods (``re``'s speed from the second use)."""
    import re

    if as_bytes:
        try:
            source_b, text_b = source.encode("ascii"), text.encode("utf-8")
        except UnicodeEncodeError:
            return
        theirs: Any = re.compile(source_b)
        ours: Any = plain.pattern(source_b)
        subject: Any = text_b
    else:
        theirs, ours, subject = re.compile(source), plain.pattern(source), text
    assert "search" not in vars(ours)  # (not compiled yet)
    found = ours.search(subject)
    assert (found and found.span()) == ((m := theirs.search(subject)) and m.span())
    assert ours.search.__self__ is not ours and ours.search.__self__.pattern == theirs.pattern  # (its own, bound)
    assert [m.span() for m in ours.finditer(subject)] == [m.span() for m in theirs.finditer(subject)]
    assert ours.findall(subject) == theirs.findall(subject)
    empty: Any = b"" if as_bytes else ""
    assert ours.sub(empty, subject) == theirs.sub(empty, subject) and ours.split(subject) == theirs.split(subject)
    assert (ours.match(subject) is None) == (theirs.match(subject) is None)
    assert (ours.fullmatch(subject) is None) == (theirs.fullmatch(subject) is None)
    assert (ours.pattern, ours.flags, ours.groups, ours.groupindex) == (
        theirs.pattern, theirs.flags, theirs.groups, theirs.groupindex)


def test_a_pattern_is_an_error_where_first_used_and_names_only_res_attributes() -> None:
    """An invalid source is ``re``'s error where the pattern is first used (which is why every
    module-level pattern of the package is compiled below); a name a compiled pattern lacks is an
    ``AttributeError``, as on one."""
    import re

    broken: Any = plain.pattern("(unclosed")
    with pytest.raises(re.error):
        broken.search("x")
    with pytest.raises(AttributeError):
        plain.pattern("x").no_such_method  # noqa: B018
    assert not hasattr(plain.pattern("x"), "__array__")
    assert "x" in repr(plain.pattern("x", re.I)) and plain.pattern("X", re.I).search("x")


def test_every_pattern_of_the_package_compiles_and_none_is_compiled_on_import() -> None:
    """Every regular expression a module of the package holds is a ``plain.pattern`` (compiled
    where first used, not at every start), and each one compiles."""
    import re

    found = 0
    for info in pkgutil.walk_packages(compactlab.__path__, "compactlab."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue
        for name, value in vars(module).items():
            assert not isinstance(value, re.Pattern), f"{info.name}.{name}: compiled on import (use plain.pattern)"
            if isinstance(value, plain._Pattern):
                found += 1
                assert value.groups >= 0, f"{info.name}.{name}"  # (compiled: an invalid one raises re.error)
    assert found >= 16
