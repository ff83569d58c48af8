"""The dependency graph, executing: the book's ``z = x * y + 2`` picture, brought to life.

Nodes are arrays (squares), constants (diamonds) and ops (circles); an edge runs from each array
an op reads to the op, and from the op to each array it writes.  Nodes are laid out left to right
by depth (longest path from an input).  Over time each op moves through the engine's states::

    not issued --push--> queued --inputs done--> ready --worker takes it--> running --> done

``ready`` is not a column of the trace: it is derived as the moment the op's inputs were written
(the end of the ops it depends on) and the op had been issued, clamped to its start.  An array is
``pending`` from the push of the op that writes it until that op ends, then ``done``.

The animation is a plain ``go.Figure`` with frames, a play/pause button and a time slider, so it
plays anywhere plotly.js runs (JupyterLab, Colab, nbviewer, an exported HTML file) without a
kernel.  A ring marks the op the frontend pushed last and a caption says which statement the
frontend is on, or what it is blocked on.

An expression string (``"z = x * y + 2"``) gives the static graph through :mod:`ast`; its
animation follows a *schematic* schedule (one time step per op, on one worker), and says so.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..trace import BACKEND_KINDS, Trace
from . import style
from ._common import check_positive_int, check_trace
from ._graph_layout import _layout, lane_device  # noqa: F401 (lane_device: re-exported)
from .._args import instance, number

__all__ = ["DependencyGraph", "dependency_graph", "expression_graph", "node_states", "frontend_status",
           "frame_times", "user_names", "OP_STATES", "ARRAY_STATES"]

OP_STATES = ("not issued", "queued", "ready", "running", "done")
ARRAY_STATES = ("not issued", "pending", "done")


@dataclass(frozen=True)
class DependencyGraph:
    """Nodes, edges and event times of a dependency graph (times in seconds, or steps if schematic).

    Attributes:
        nodes: one row per node: ``key, label, type`` (op/array/const), ``depth, y`` (layout),
            ``event`` (trace row of an op, -1 otherwise), ``lane``, and times ``issue, ready,
            start, end``: for ops when they were pushed, became ready, started, ended; for an
            array the push and end of the op that writes it (``-inf`` for inputs).
        edges: ``src, dst`` node keys.
        frontend: the frontend's statements over time: ``start, end, text, blocked``.
        schematic: True when the times are a made-up schedule (expression graphs), not measured.
        n_ops_total: ops in the source before ``max_ops`` cut the graph.
    """

    nodes: pd.DataFrame
    edges: pd.DataFrame
    frontend: pd.DataFrame
    schematic: bool = False
    n_ops_total: int = 0
    title: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_ops(self) -> int:
        return int((self.nodes["type"] == "op").sum())


# -- building graphs --------------------------------------------------------------------------
class _Builder:
    """Accumulates nodes and edges, giving each written array a new version node."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.edges: list[tuple[str, str]] = []
        self.latest: dict[str, str] = {}  # array label -> key of its current version
        self.versions: dict[str, int] = {}

    def array_for_read(self, label: str, type_: str = "array") -> str:
        if label not in self.latest:
            key = f"{type_}:{label}"
            self.rows.append({"key": key, "label": label, "type": type_, "event": -1, "lane": "",
                              "issue": -np.inf, "ready": -np.inf, "start": -np.inf, "end": -np.inf})
            self.latest[label] = key
            self.versions[label] = 1
        return self.latest[label]

    def op(self, key: str, label: str, event: int, lane: str, times: tuple[float, float, float]) -> str:
        issue, start, end = times
        self.rows.append({"key": key, "label": label, "type": "op", "event": event, "lane": lane,
                          "issue": issue, "ready": np.nan, "start": start, "end": end})
        return key

    def array_written(self, label: str, op_key: str, issue: float, end: float) -> str:
        version = self.versions.get(label, 0) + 1
        self.versions[label] = version
        key = f"array:{label}#{version}"
        shown = label if version == 1 else f"{label} (v{version})"
        self.rows.append({"key": key, "label": shown, "type": "array", "event": -1, "lane": "",
                          "issue": issue, "ready": np.nan, "start": np.nan, "end": end})
        self.latest[label] = key
        self.edges.append((op_key, key))
        return key

    def frame(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        nodes = pd.DataFrame(self.rows, columns=["key", "label", "type", "event", "lane", "issue", "ready",
                                                 "start", "end"])
        edges = pd.DataFrame(self.edges, columns=["src", "dst"]).drop_duplicates(ignore_index=True)
        return nodes, edges


def _ready_times(nodes: pd.DataFrame, edges: pd.DataFrame) -> pd.DataFrame:
    """An op is ready when it was issued and every node feeding it was done (clamped to its start)."""
    end = dict(zip(nodes["key"], nodes["end"]))
    inputs: dict[str, list[float]] = {}
    for s, d in zip(edges["src"], edges["dst"]):
        inputs.setdefault(d, []).append(end[s])
    ready = []
    for r in nodes.itertuples(index=False):
        if r.type != "op":
            ready.append(r.ready)
            continue
        t = max([r.issue if np.isfinite(r.issue) else -np.inf, *inputs.get(r.key, [])])
        ready.append(min(t, r.start) if np.isfinite(r.start) else t)
    return nodes.assign(ready=ready)


_CODE = re.compile(r"(?:line\s+\d+|:\d+)\s*:\s*(?P<code>.+)$")  # "In[4]:3: z = x * y + 2", "line 3: ..."
_AUTO = re.compile(r"a\d+\Z")  # the engine's automatic array names


@lru_cache(maxsize=1)
def _package_files() -> frozenset[str]:
    """Base names of this package's modules: a push from one of them is the library's, not the reader's."""
    root = Path(__file__).resolve().parents[1]
    return frozenset(p.name for p in root.rglob("*.py"))


def _code(source: str) -> str:
    m = _CODE.search(str(source or ""))
    return m.group("code").strip() if m else ""


def _library(source: str) -> bool:
    head = str(source or "").split(":", 1)[0]
    return head in _package_files()


def _assigned(code: str) -> str | None:
    """``z`` for ``z = x * y + 2`` (one plain name on the left), else None."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assign) and len(tree.body[0].targets) == 1 \
            and isinstance(tree.body[0].targets[0], ast.Name):
        return tree.body[0].targets[0].id
    return None


def user_names(trace: Trace, rows: np.ndarray) -> dict[str, str]:
    """Automatic array names (``a6``) -> the reader's variable (``z``), where the source says it.

    The last op pushed from a line ``z = x * y + 2`` makes the array assigned to ``z``; an array
    named by the reader, or by an experiment's ``name=``, keeps its name.
    """
    last: dict[str, int] = {}
    for i in rows:
        src = str(trace["source"][i])
        if src and not _library(src):
            last[src] = int(i)
    names: dict[str, str] = {}
    taken = {str(a) for i in rows for a in (*trace["reads"][i], *trace["writes"][i]) if not _AUTO.match(str(a))}
    for src, i in last.items():
        target = _assigned(_code(src))
        writes = [str(a) for a in trace["writes"][i]]
        if target and len(writes) == 1 and _AUTO.match(writes[0]) and target not in names.values() \
                and target not in taken:
            names[writes[0]] = target
    return names


def _frontend_rows(trace: Trace) -> pd.DataFrame:
    fe = [l.name for l in trace.frontend_lanes]
    mask = np.isin(trace["lane"], fe) & np.isfinite(trace["start"])
    idx = np.flatnonzero(mask)
    idx = idx[np.argsort(trace["start"][idx], kind="stable")]
    texts, blocked = [], []
    for i in idx:
        kind, src, name = str(trace["kind"][i]), str(trace["source"][i]), str(trace["name"][i])
        if kind == "block":
            texts.append("blocked: " + style.block_label(str(trace["reason"][i]), src))
            blocked.append(True)
        else:  # a push inside this package (an experiment) is named by its op, not by our source line
            texts.append(name if (not src or _library(src)) else src)
            blocked.append(False)
    return pd.DataFrame({"start": trace["start"][idx], "end": trace["end"][idx], "text": texts,
                         "blocked": np.asarray(blocked, dtype=bool)})


def dependency_graph(trace: Trace, *, max_ops: int = 16) -> DependencyGraph:
    """The graph of an engine recording: arrays and ops from the reads/writes/deps columns.

    Ops are the backend events (op, kernel, copy, memset) in issue order; the first ``max_ops``
    are kept.  Without reads/writes, the ``deps`` column gives op→op edges; with neither, ops of
    one lane are chained in lane order (a stream runs its work in order).

    Returns:
        The :class:`DependencyGraph` of the kept ops and their arrays (measured times, ``schematic=False``, with
        ``n_ops_total`` counting every op before the cut) and the frontend's statements.
    """
    trace = check_trace(trace, "dependency_graph")
    max_ops = check_positive_int(max_ops, "max_ops")
    backend = {l.name for l in trace.backend_lanes}
    idx = np.flatnonzero(np.isin(trace["kind"], BACKEND_KINDS) & np.isin(trace["lane"], list(backend)))
    order_time = np.where(np.isfinite(trace["issue"][idx]), trace["issue"][idx], trace["start"][idx])
    idx = idx[np.lexsort((trace["id"][idx], order_time))]
    n_total = len(idx)
    idx = idx[:max_ops]
    b = _Builder()
    op_key_of_id: dict[int, str] = {}
    writer_of: dict[str, str] = {}  # array key -> op key
    has_arrays = any(len(trace["reads"][i]) or len(trace["writes"][i]) for i in idx)
    has_deps = any(len(trace["deps"][i]) for i in idx)
    last_on_lane: dict[str, str] = {}
    rename = user_names(trace, idx)
    for i in idx:
        ev_id = int(trace["id"][i])
        issue, start, end = (float(trace[c][i]) for c in ("issue", "start", "end"))
        reads = [b.array_for_read(rename.get(str(a), str(a))) for a in trace["reads"][i]]
        key = b.op(f"op:{ev_id}", str(trace["name"][i]), int(i), str(trace["lane"][i]), (issue, start, end))
        op_key_of_id[ev_id] = key
        for a in reads:
            b.edges.append((a, key))
        fed = {writer_of.get(a) for a in reads}
        for dep in trace["deps"][i]:
            dep_key = op_key_of_id.get(int(dep))
            if dep_key is not None and dep_key not in fed:
                b.edges.append((dep_key, key))
        if not has_arrays and not has_deps:
            prev = last_on_lane.get(str(trace["lane"][i]))
            if prev is not None:
                b.edges.append((prev, key))
            last_on_lane[str(trace["lane"][i])] = key
        for a in trace["writes"][i]:
            writer_of[b.array_written(rename.get(str(a), str(a)), key, issue, end)] = key
    nodes, edges = b.frame()
    nodes = _ready_times(_layout(nodes, edges), edges)
    return DependencyGraph(nodes, edges, _frontend_rows(trace), schematic=False, n_ops_total=n_total,
                           meta={"virtual": trace.is_virtual, "source": trace.meta.get("source", ""),
                                 "modelled_label": trace.meta.get("modelled_label", "")})


_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.MatMult: "matmul",
           ast.Pow: "pow", ast.Mod: "mod", ast.FloorDiv: "floordiv"}
_UNARY = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert", ast.Not: "not"}


def expression_graph(expr: str, *, push_time: float = 0.25, op_time: float = 1.0,
                     workers: int = 1) -> DependencyGraph:
    """The static graph of Python statements such as ``"z = x * y + 2"``, with a schematic schedule.

    Names are input arrays, numbers constants; each operator or call is an op writing a temporary
    array labelled with its sub-expression.  The schedule is made up, for teaching: the frontend
    pushes one op every ``push_time`` steps; an op runs for ``op_time`` steps on the first of
    ``workers`` free workers once its inputs are done.

    Returns:
        The :class:`DependencyGraph` of the statements, with the made-up schedule as its times (``schematic=True``).

    Raises:
        ValueError: the text is not Python, or uses a construct other than assignments, names,
            numbers, operators and calls.
    """
    return _expression_graph(expr, "expr", push_time=push_time, op_time=op_time, workers=workers)


def _expression_graph(expr: Any, name: str, *, push_time: Any = 0.25, op_time: Any = 1.0,
                      workers: Any = 1) -> DependencyGraph:
    """:func:`expression_graph`, its messages naming the argument ``name`` (the caller's)."""
    if not isinstance(expr, str):
        raise TypeError(f"{name} must be a string such as 'z = x * y + 2', got {type(expr).__name__} {expr!r}")
    push_time = number("push_time", push_time, minimum=0)
    op_time = number("op_time", op_time, above=0)
    workers = check_positive_int(workers, "workers", maximum=64)  # a schematic: one lane per worker
    try:
        tree = ast.parse(expr.strip())
    except SyntaxError as exc:
        raise ValueError(f"could not parse {name}={expr!r} as Python ({exc.msg}): write statements such as "
                         "'z = x * y + 2'") from exc
    b = _Builder()
    free = [0.0] * workers
    clock = {"t": 0.0, "n": 0}
    end_of: dict[str, float] = {}
    front: list[tuple[float, float, str]] = []

    def visit(node: ast.AST, line: str) -> str:
        if isinstance(node, ast.Name):
            return b.array_for_read(node.id)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, complex)):
            return b.array_for_read(repr(node.value), "const")
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            args, name = [visit(node.left, line), visit(node.right, line)], _BINOPS[type(node.op)]
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            args, name = [visit(node.operand, line)], _UNARY[type(node.op)]
        elif isinstance(node, ast.Call) and not node.keywords:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name is None:
                raise ValueError(f"unsupported call {ast.unparse(node)!r}: call a name, e.g. np.dot(x, y)")
            args = [visit(a, line) for a in node.args]
        else:
            raise ValueError(
                f"unsupported expression {ast.unparse(node)!r}: use names, numbers, + - * / @ ** and calls")
        issue = clock["t"]
        clock["t"] += push_time
        ready = max([issue, *(end_of.get(a, -np.inf) for a in args)])
        w = int(np.argmin(free))
        start = max(ready, free[w])
        end = start + op_time
        free[w] = end
        key = b.op(f"op:{clock['n']}", name, -1, f"worker {w}", (issue, start, end))
        clock["n"] += 1
        front.append((issue, issue + push_time, f"{line}  (push {name})"))
        for a in args:
            b.edges.append((a, key))
        out = b.array_written(ast.unparse(node), key, issue, end)
        end_of[out] = end
        return out

    for stmt in tree.body:
        line = f"line {stmt.lineno}: {ast.unparse(stmt)}"
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            result = visit(stmt.value, line)
            target = stmt.targets[0].id
            row = next(r for r in b.rows if r["key"] == result)
            if row["type"] == "array" and row["key"].startswith("array:") and row["issue"] != -np.inf:
                row["label"] = target  # the temporary is the assigned array
            b.latest[target] = result
        elif isinstance(stmt, ast.Expr):
            visit(stmt.value, line)
        else:
            raise ValueError(f"unsupported statement {ast.unparse(stmt)!r}: use 'name = expression' or an expression")
    nodes, edges = b.frame()
    if not (nodes["type"] == "op").any():
        raise ValueError(f"{name}={expr!r} has no operation to draw: write one such as 'z = x * y + 2'")
    nodes = _ready_times(_layout(nodes, edges), edges)
    frontend = pd.DataFrame(front, columns=["start", "end", "text"]).assign(blocked=False)
    return DependencyGraph(nodes, edges, frontend, schematic=True, n_ops_total=int((nodes["type"] == "op").sum()),
                           title=expr.strip())


# -- states -----------------------------------------------------------------------------------
def node_states(graph: DependencyGraph, t: float) -> np.ndarray:
    """State of every node at time ``t``: ops one of :data:`OP_STATES`, arrays of
    :data:`ARRAY_STATES`, constants ``"done"``.

    Returns:
        An object array of state names, one per row of ``graph.nodes``.
    """
    instance("graph", graph, DependencyGraph, what="d2l_async.viz.DependencyGraph (from dependency_graph(trace))")
    t = number("t", t, finite=False)
    n = graph.nodes
    typ = n["type"].to_numpy()
    issue = np.nan_to_num(n["issue"].to_numpy(float), nan=-np.inf)
    ready = np.nan_to_num(n["ready"].to_numpy(float), nan=-np.inf)
    start = n["start"].to_numpy(float)
    end = n["end"].to_numpy(float)
    op = np.select([t < issue, t < ready, t < start, t < end], OP_STATES[:4], "done")
    arr = np.select([t < issue, t < end], ["not issued", "pending"], "done")
    return np.where(typ == "op", op, np.where(typ == "array", arr, "done")).astype(object)


def frontend_status(graph: DependencyGraph, t: float) -> tuple[str, bool]:
    """(what the frontend is doing at ``t``, whether it is blocked).

    Returns:
        ``(text, blocked)``: the statement running at ``t`` (an open wait wins, ``blocked=True``), ``"after ..."``
        once a wait has ended, ``"not started"`` before the first statement, or ``("", False)`` when the graph has
        no frontend rows.
    """
    instance("graph", graph, DependencyGraph, what="d2l_async.viz.DependencyGraph (from dependency_graph(trace))")
    t = number("t", t, finite=False)
    f = graph.frontend
    if not len(f):
        return "", False
    starts = f["start"].to_numpy(float)
    i = int(np.searchsorted(starts, t, side="right")) - 1
    if i < 0:
        return "not started", False
    # a block still running wins over a later instant event
    open_blocks = np.flatnonzero(f["blocked"].to_numpy() & (starts <= t) & (f["end"].to_numpy(float) > t))
    if len(open_blocks):
        return str(f["text"].iloc[open_blocks[-1]]), True
    row = f.iloc[i]
    if bool(row["blocked"]):
        return "after " + str(row["text"]).removeprefix("blocked: "), False
    return str(row["text"]), False


def frame_times(graph: DependencyGraph, max_frames: int) -> np.ndarray:
    """The animation's times: every change of state when there are few, else evenly spaced."""
    n = graph.nodes
    ts = np.concatenate([n[c].to_numpy(float) for c in ("issue", "ready", "start", "end")]
                        + [graph.frontend["start"].to_numpy(float), graph.frontend["end"].to_numpy(float)])
    ts = np.unique(ts[np.isfinite(ts)])
    if not len(ts):
        return np.zeros(1)
    lo, hi = ts[0], ts[-1]
    before = lo - max((hi - lo) * 0.01, 1e-9)
    if len(ts) + 1 <= max_frames:
        return np.r_[before, ts]
    return np.r_[before, np.linspace(lo, hi, max_frames - 1)]
