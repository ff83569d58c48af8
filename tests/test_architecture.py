"""The package's layers, read from its source with :mod:`ast`: imports point down, never in a circle.

Every import counts — at a module's top level, under ``if TYPE_CHECKING:``, and inside functions: a
late import keeps a heavy library off the import path, but two modules that import each other, late or
not, have not separated their concepts.

The layers, lowest first (a unit is a subpackage or a top-level module of ``d2l_async``):

====  ===========================================================
0     ``_words``, ``_machine``, ``_args``
1     ``config``, ``trace``, ``devices``, ``verdict``, ``lesson``
2     ``engine``, ``capture``, ``analysis``, ``data``, ``benchmark``, ``claims``
3     ``torch_async``, ``distributed``
4     ``experiments``, ``viz``
5     ``widgets``, ``report``
6     ``__main__`` and the package itself (``d2l_async/__init__.py``)
====  ===========================================================

A unit imports only units of a lower layer (and itself), and only their public modules: a module whose
name starts with ``_`` belongs to its own subpackage.  The top-level ``_words``, ``_machine`` and ``_args``
are the whole package's (the number format, the machine's description and the argument checks every
layer uses).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import d2l_async

ROOT = Path(d2l_async.__file__).parent

LAYERS = {
    "_words": 0, "_machine": 0, "_args": 0,
    "config": 1, "trace": 1, "devices": 1, "verdict": 1, "lesson": 1,
    "engine": 2, "capture": 2, "analysis": 2, "data": 2, "benchmark": 2, "claims": 2,
    "torch_async": 3, "distributed": 3,
    "experiments": 4, "viz": 4,
    "widgets": 5, "report": 5,
    "__main__": 6, "": 6,
}
#: top-level private modules that belong to the whole package (see the module docstring)
SHARED = {"_words", "_machine", "_args"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def imports(tree: ast.Module, name: str, is_package: bool) -> list[tuple[str, int]]:
    """Every module of the package that ``tree`` imports, anywhere in it, with the line."""
    package = name if is_package else name.rpartition(".")[0]
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "d2l_async"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "d2l_async":
                continue
            # `from d2l_async.x import _y` imports the module _y when there is one, else names of x
            subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in MODULES]
            out += [(s, node.lineno) for s in subs] or [(mod, node.lineno)]
    return out


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        deps = {m for m, _ in imports(tree, name, path.name == "__init__.py")}
        # a parent package of the importer is being imported already: that edge closes no circle
        graph[name] = {d for d in deps if d in MODULES and d != name and not name.startswith(d + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
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


def unit(module: str) -> str:
    """``d2l_async.engine._op`` -> ``engine``; ``d2l_async`` -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def problems(importer: str, imported: str) -> list[str]:
    """What is wrong with ``importer`` importing ``imported`` (both module names of the package)."""
    src, dst = unit(importer), unit(imported)
    if src == dst:
        return []
    out = []
    for u in (src, dst):
        if u not in LAYERS:
            out.append(f"{u!r} has no layer: add it to LAYERS")
    if out:
        return out
    if LAYERS[dst] >= LAYERS[src]:
        out.append(f"imports up or across the layers ({src}: {LAYERS[src]}, {dst}: {LAYERS[dst]})")
    private = [p for p in imported.split(".")[1:] if p.startswith("_") and p not in SHARED and p != "__main__"]
    if private:
        out.append(f"imports {dst}'s private module {'.'.join(private)}")
    return out


def all_problems() -> list[str]:
    found = []
    for name, path in sorted(MODULES.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for imported, line in imports(tree, name, path.name == "__init__.py"):
            if imported in MODULES or imported == "d2l_async":
                found += [f"{path.relative_to(ROOT.parent)}:{line} -> {imported}: {p}"
                          for p in problems(name, imported)]
    return found


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_inside_functions_and_type_checking_blocks_count():
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._scheduler import S\n"
              "def f():\n    from d2l_async.trace import _model\n")
    found = {m for m, _ in imports(ast.parse(source), "d2l_async.engine._guard", False)}
    assert found == {"d2l_async.engine._scheduler", "d2l_async.trace._model"}


@pytest.mark.parametrize("importer,imported,says", [
    ("d2l_async.trace._model", "d2l_async.engine", "up or across"),
    ("d2l_async.viz._timeline", "d2l_async.experiments", "up or across"),
    ("d2l_async.widgets._dashboard", "d2l_async.experiments._common", "private module _common"),
    ("d2l_async.torch_async._runtime", "d2l_async.engine._scheduler", "private module _scheduler"),
])
def test_the_layer_rule_refuses(importer, imported, says):
    assert any(says in p for p in problems(importer, imported)), problems(importer, imported)


@pytest.mark.parametrize("importer,imported", [
    ("d2l_async.engine._op", "d2l_async.trace"),
    ("d2l_async.engine._op", "d2l_async.engine._scheduler"),
    ("d2l_async.viz._timeline", "d2l_async._words"),
    ("d2l_async", "d2l_async.widgets"),
])
def test_the_layer_rule_allows(importer, imported):
    assert problems(importer, imported) == []


def test_every_unit_has_a_layer():
    assert {unit(m) for m in MODULES} <= set(LAYERS), {unit(m) for m in MODULES} - set(LAYERS)


def test_no_module_of_the_package_is_in_a_circle_of_imports():
    assert cycles(import_graph()) == []


def test_imports_point_down_the_layers_and_at_public_modules():
    found = all_problems()
    assert found == [], "\n".join(found)
