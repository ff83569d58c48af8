"""No circle of imports among the package's modules (issue 21).

A split that leaves two files importing each other has not separated them: ``_guard`` imported
``_scheduler`` (for a type) while ``_scheduler`` imported ``_guard``.  Every import a module makes
at its top level counts here, ``if TYPE_CHECKING:`` ones included; an import inside a function
(a deliberate late import, e.g. a reader loaded on first use) does not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import d2l_async

ROOT = Path(d2l_async.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(tree: ast.Module, name: str, is_package: bool) -> set[str]:
    """Modules of the package imported at the top level (under ``if``/``try`` blocks too)."""
    out: set[str] = set()
    package = name if is_package else name.rpartition(".")[0]

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name.startswith("d2l_async"))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if not mod.startswith("d2l_async"):
                    continue
                out.add(mod)
                for a in node.names:  # `from . import _x` imports the submodule _x
                    out.add(f"{mod}.{a.name}")
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)
                visit(getattr(node, "finalbody", []))

    visit(tree.body)
    return out


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        deps = _top_level_imports(tree, name, path.name == "__init__.py")
        # an import of a package runs its __init__, not its submodules; a parent package of the
        # importer is already being imported, so that edge is no circle of files
        graph[name] = {d for d in deps if d in files and d != name and not name.startswith(d + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_type_checking_imports():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._scheduler import S\n")
    assert _top_level_imports(tree, "d2l_async.engine._guard", False) == {
        "d2l_async.engine._scheduler", "d2l_async.engine._scheduler.S"}


def test_the_engine_modules_import_in_one_direction():
    graph = import_graph()
    assert "d2l_async.engine._scheduler" in graph["d2l_async.engine._engine"]
    engine = [c for c in cycles(graph) if any(m.startswith("d2l_async.engine") for m in c)]
    assert engine == [], f"import circles in the engine: {engine}"


def test_no_module_of_the_package_is_in_a_circle_of_imports():
    assert cycles(import_graph()) == []
