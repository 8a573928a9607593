"""Build ``compactlab/data/vocabulary.txt``: the public names of major frameworks and languages, and
the English compounds, that a probe is not made of (#58 §1).

A name a user of a framework writes without reading anything (``django.urls``, ``on_delete``,
``addEventListener``) or an English compound (``real-time``) is no evidence that the agent used
what an earlier result showed. The list is built from packages, reproducibly, never from the
sessions it is judged on:

- Python: the wheels named in ``PYTHON`` (pinned), read with ``ast`` without importing them: every
  public module's dotted path, its ``__all__``, the names a public package's ``__init__`` exports
  (also as its last part names them: ``models.CharField``), and of each exported class its public
  methods, class attributes and ``__init__`` parameters;
- Python's standard library (of the Python that runs the script; 3.11 here): what its public
  modules export (``TestCase``, ``ArgumentParser``), not their classes' members;
- TypeScript and the DOM: TypeScript's own ``lib.*.d.ts`` (Debian's ``node-typescript``): the
  interfaces, their members and the declared globals;
- Elixir: its standard modules and their exported functions (Debian's ``elixir``, the compiled
  ``Elixir.*.beam`` files: ``ExUnit.Case``, ``on_exit``, ``Enum.find``);
- English: WordNet's hyphenated lemmas (Debian's ``wordnet-base``): ``real-time``, ``built-in``,
  ``end-to-end``.

A framework's names are its own, and so no longer common, in a session working on its source
(a result shows a file of it outside an installed package's folder): ``probes.Own``.

Run (the downloads are a few tens of MB, in a folder of your choice)::

    pip download --no-deps -d WHEELS <each of PYTHON>
    apt-get download node-typescript wordnet-base elixir && dpkg-deb -x <each>.deb DEBS
    python scripts/build_vocabulary.py WHEELS DEBS

Only names a probe could be are kept (``engine.measures.probes.tokens`` would take them: an
underscore, a digit, a hyphen, inner capitals or a dot); plain words are no probes anyway.
"""

from __future__ import annotations

import ast
import re
import sys
import sysconfig
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

#: the frameworks read, by what they are for (the most used of their kind on PyPI), pinned
PYTHON = ("django==5.2.8", "flask==3.1.2", "fastapi==0.121.3", "starlette==0.50.0", "pydantic==2.12.4",
          "sqlalchemy==2.0.44", "pytest==9.0.1", "requests==2.32.5", "numpy==2.3.5", "pandas==2.3.3")
#: the names a module is imported as by convention (``import numpy as np``)
ALIASES = {"numpy": ("np",), "pandas": ("pd",), "sqlalchemy": ("sa",)}
DEBIAN = ("node-typescript 4.8.4+ds1-2", "wordnet-base 1:3.0-37", "elixir 1.14.0.dfsg-2")
OUT = Path(__file__).parents[1] / "compactlab" / "data"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PRIVATE_DIRS = {"tests", "test", "testing", "_testing", "conftest"}


def probe_like(name: str) -> bool:
    core = name.strip("_-")
    return len(name) >= 4 and ("." in name or not core.isalpha() or bool(re.search(r"[a-z][A-Z]", core)))


def _public_module(parts: list[str]) -> bool:
    return all(not p.startswith("_") for p in parts) and not _PRIVATE_DIRS & set(parts)


def _all_of(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
                and isinstance(node.value, (ast.List, ast.Tuple))):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _members(cls: ast.ClassDef) -> set[str]:
    out = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not node.name.startswith("_"):
                out.add(node.name)
            if node.name == "__init__":
                args = node.args
                out.update(a.arg for a in args.args + args.kwonlyargs if a.arg != "self")
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return {n for n in out if not n.startswith("_")}


def _star_target(module: list[str], node: ast.ImportFrom, package: bool) -> str:
    base = module if package else module[:-1]
    base = base[: len(base) - node.level + 1] if node.level else []
    return ".".join(base + (node.module.split(".") if node.module else []))


def wheel_files(wheel: Path) -> Iterator[tuple[str, bytes]]:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.filename.endswith(".py") and ".dist-info/" not in info.filename:
                yield info.filename, z.read(info)


def stdlib_files() -> Iterator[tuple[str, bytes]]:
    """The running Python's standard library (3.11 when the list was built)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if not name.startswith(("site-packages/", "test/", "idlelib/", "lib2to3/", "turtledemo/")):
            yield name, path.read_bytes()


def python_names(files: Iterable[tuple[str, bytes]], members: bool = True) -> tuple[set[str], set[str]]:
    """The public names of a package's files (a wheel's, the standard library's), and its top-level
    packages (where its source is); ``members``: an exported class's too."""
    names: set[str] = set()
    top: set[str] = set()
    classes: dict[str, ast.ClassDef] = {}
    found: dict[str, list[str]] = {}  # a public module -> the names it exports
    stars: dict[str, list[str]] = {}  # a public module -> the modules it star-imports
    for filename, source in files:
        parts = filename[:-3].split("/")
        if len(parts) > 1:
            top.add(parts[0])
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        if not parts:
            continue
        module = ".".join(parts)
        if _public_module(parts):
            names.add(module)
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        found[module] = _all_of(tree) or [  # (no __all__: its public definitions)
            n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        for node in ast.walk(tree):  # (imports inside try/if blocks too)
            if isinstance(node, ast.ImportFrom) and package:
                found[module] += [a.asname or a.name for a in node.names if a.name != "*"]
            if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
                stars.setdefault(module, []).append(_star_target(parts, node, package))
            if isinstance(node, ast.ClassDef) and node in tree.body:
                classes.setdefault(node.name, node)

    def exports(module: str, seen: set[str]) -> set[str]:
        seen.add(module)
        out = {n for n in found.get(module, ()) if not n.startswith("_")}
        for target in stars.get(module, ()):
            if target not in seen:
                out |= exports(target, seen)
        return out

    exported: set[str] = set()
    for module in found:
        if not _public_module(module.split(".")):
            continue
        those = exports(module, set())
        exported |= those
        # as a module is used after ``from django.db import models``: models.CharField
        for alias in (module.rsplit(".", 1)[-1], *ALIASES.get(module, ())):
            names.update(f"{alias}.{n}" for n in those)
    names |= exported
    for name in exported if members else ():
        if name in classes:
            names |= _members(classes[name])
    return {n for n in names if _NAME.match(n.replace(".", "_")) and probe_like(n)}, top


_TS_DECL = re.compile(r"^\s*(?:declare\s+)?(?:interface|var|function|type|namespace|class|const|let)\s+([A-Za-z_$][\w$]*)",
                      re.M)
_TS_MEMBER = re.compile(r"^\s+(?:readonly\s+)?([A-Za-z_$][\w$]*)\??\s*[(:<]", re.M)


def typescript_names(lib: Path) -> set[str]:
    names: set[str] = set()
    for f in sorted(lib.glob("lib*.d.ts")):
        text = f.read_text(encoding="utf-8")
        names.update(_TS_DECL.findall(text))
        names.update(_TS_MEMBER.findall(text))
    return {n for n in names if probe_like(n)}


def _beam_exports(data: bytes) -> list[str]:
    """The exported functions of a compiled Erlang/Elixir module (its ``AtU8`` atoms, its ``ExpT``)."""
    atoms: list[str] = []
    exports: list[int] = []
    at = 12  # (FOR1, size, BEAM)
    while at + 8 <= len(data):
        tag, size = data[at:at + 4], int.from_bytes(data[at + 4:at + 8], "big")
        body = data[at + 8:at + 8 + size]
        if tag == b"AtU8":
            n, i = int.from_bytes(body[:4], "big"), 4
            for _ in range(n):
                length = body[i]
                atoms.append(body[i + 1:i + 1 + length].decode("utf-8", "replace"))
                i += 1 + length
        elif tag == b"ExpT":
            n = int.from_bytes(body[:4], "big")
            exports = [int.from_bytes(body[4 + 12 * k:8 + 12 * k], "big") for k in range(n)]
        at += 8 + (size + 3) // 4 * 4
    return [atoms[i - 1] for i in exports if 0 < i <= len(atoms)]


def elixir_names(lib: Path) -> set[str]:
    """Elixir's standard modules (``ExUnit.Case``) and their public functions (``on_exit``), from
    the compiled library (Debian's ``elixir``)."""
    names: set[str] = set()
    for beam in sorted(lib.rglob("Elixir.*.beam")):
        module = beam.name[len("Elixir."):-len(".beam")]
        functions = [f for f in _beam_exports(beam.read_bytes()) if not f.startswith(("_", "MACRO-"))]
        names.add(module)
        names.update(functions)
        names.update(f"{module}.{f}" for f in functions)
    return {n for n in names if probe_like(n)}


def compounds(wordnet: Path) -> set[str]:
    """WordNet's hyphenated lemmas (its index files: a lemma first on each line)."""
    out = set()
    for part in ("noun", "verb", "adj", "adv"):
        for line in (wordnet / f"index.{part}").read_text(encoding="utf-8").splitlines():
            lemma = line.split(" ", 1)[0]
            if not line.startswith(" ") and "-" in lemma.strip("-") and lemma.replace("-", "").isalpha():
                out.add(lemma)
    return out


def main(wheels: str, debs: str) -> None:
    frameworks: dict[str, tuple[list[str], set[str]]] = {}  # name -> (its source folders, its names)
    for wheel in sorted(Path(wheels).glob("*.whl")):
        names, top = python_names(wheel_files(wheel))
        frameworks[wheel.name.split("-")[0].lower()] = sorted(top), names
    frameworks["python"] = [], python_names(stdlib_files(), members=False)[0]
    frameworks["typescript"] = [], typescript_names(Path(debs) / "usr/share/nodejs/typescript/lib")
    frameworks["elixir"] = [], elixir_names(Path(debs) / "usr/lib/elixir")
    frameworks["english"] = [], compounds(Path(debs) / "usr/share/wordnet")
    mask: dict[str, int] = {}
    for bit, (_, names) in enumerate(frameworks.values()):
        for name in names:
            mask[name] = mask.get(name, 0) | 1 << bit
    lines = [f"# compactlab's vocabulary (#58 §1), built by scripts/build_vocabulary.py from {', '.join(PYTHON)}",
             f"# (PyPI wheels), Python {sys.version_info[0]}.{sys.version_info[1]}'s standard library, {DEBIAN[0]}'s "
             f"lib.*.d.ts, {DEBIAN[2]}'s compiled modules and {DEBIAN[1]}'s hyphenated lemmas.",
             "# Each line: a name and the frameworks it is of (a bit mask, their order below: name, source folders)."]
    lines += [f"# framework {name} {','.join(source) or '-'}" for name, (source, _) in frameworks.items()]
    lines += [f"{name}\t{mask[name]}" for name in sorted(mask)]
    (OUT / "vocabulary.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(mask):,} names of {len(frameworks)} frameworks (English compounds among them)")


if __name__ == "__main__":
    main(*sys.argv[1:3])
