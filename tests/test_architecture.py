"""The package's layering, read from its source: formats never import the engine, and no two
modules import each other, directly or round a loop (imports inside functions included)."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "compactlab"
#: the engine side, which the formats (transcripts/) must not know
ENGINE = {"compactlab.baseline", "compactlab.invariants", "compactlab.engine", "compactlab.layers", "compactlab.feeds",
          "compactlab.compare", "compactlab.cost", "compactlab.context"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """module -> the package modules it imports (``from . import x`` counts x when x is a module)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in modules else base)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_the_formats_never_import_the_engine():
    graph = imports()
    for name, targets in graph.items():
        if name.startswith("compactlab.transcripts"):
            bad = {t for t in targets if any(t == e or t.startswith(e + ".") for e in ENGINE)}
            assert not bad, f"{name} imports {sorted(bad)}"


def test_no_import_cycle():
    graph = imports()

    def parent_packages(name: str) -> set[str]:  # importing a submodule runs its package first: not a cycle
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts))}

    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node] - parent_packages(node)):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
