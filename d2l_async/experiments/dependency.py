"""The dependency graph: what the backend may run in parallel and what must wait (D2L §13.2.1).

``z = x * y + 2``: the frontend pushes ``x * y`` and ``+ 2`` and returns; the backend runs the
product when ``x`` and ``y`` exist and the sum when the product is done.  Only ``print(z)`` (or any
other blocker) makes the frontend wait.  :func:`run_expression` evaluates such an expression on the
engine with named arrays, through a small *safe* evaluator (names ``x``, ``y``, ``w``; operators
``+ - * / @ **`` and unary ``-``; functions ``exp``, ``relu``, ``sum``, ``mean``; numbers) — never
``eval``.

:func:`run_independent_vs_dependent` shows why the graph matters: ``chains`` independent chains of
matrix products finish sooner on 2 workers than on 1, while one dependent chain of the same length
cannot use the second worker.  With ``backend="modelled"`` the workers belong to a modelled-time
device (:mod:`d2l_async.engine._modelled`): each worker holds its op for a modelled duration while
sleeping, so the lesson shows even on one shared core; labels say the durations are modelled.
"""

from __future__ import annotations

import ast
import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable

from d2l_async import config
from d2l_async._args import integer

from ._common import engine_label, positive_int, positive_ints, stable_matrix
from ._show import DisplayedTuple
from .parallelism import device_setup

__all__ = ["EXPRESSIONS", "NAMES", "FUNCTIONS", "DependencyResult", "IndependenceResult", "check_expression",
           "run_expression", "run_independent_vs_dependent"]

#: Expressions for the notebook's dropdown (the book's first).
EXPRESSIONS = (
    "x * y + 2",
    "(x + y) * (x - y)",
    "relu(x @ w) + y",
    "exp(x * y) / (1 + exp(x * y))",
    "sum(x * w) + mean(y)",
)
#: Names an expression may use.
NAMES = ("x", "y", "w")
#: Functions an expression may call -> the array method that implements it.
FUNCTIONS = {"exp": "exp", "relu": "relu", "sum": "sum", "mean": "mean"}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.MatMult: lambda a, b: a @ b,
    ast.Pow: lambda a, b: a ** b,
}


@dataclass(frozen=True)
class DependencyResult:
    """One expression run on the engine.

    Attributes:
        expression: the expression as given.
        value: the engine's result as a NumPy array.
        expected: the same expression in eager torch (the engine must agree).
        trace: the engine's trace: one op per operator, a block where the value was read.
        shape: shape of ``x``, ``y`` and ``w``.
        workers: worker threads of the engine.
        device: where it ran, in words.
        virtual: True (engine threads).
    """

    expression: str
    value: Any
    expected: Any
    trace: Any
    shape: tuple[int, int]
    workers: int
    device: str
    virtual: bool

    @property
    def matches(self) -> bool:
        """True when the engine's value equals eager torch's."""
        import numpy as np

        return bool(np.allclose(self.value, self.expected, equal_nan=True))


def check_expression(expression: str) -> ast.Expression:
    """Parse ``expression`` and check it only uses what the evaluator allows.

    Returns:
        The parsed ``ast.Expression`` (of the stripped text), for the evaluator to run.

    Raises:
        ValueError: a syntax error or anything outside :data:`NAMES`, :data:`FUNCTIONS`, numbers
            and ``+ - * / @ **`` (the message names the offending part); a number, or a part made
            of numbers only, larger than :data:`CONSTANT_LIMIT` (``9 ** 9 ** 9``).
    """
    if not isinstance(expression, str) or not expression.strip():
        raise ValueError(f"expression must be a non-empty string like 'x * y + 2', got {expression!r}")
    if len(expression) > 500:
        raise ValueError("expression is too long (at most 500 characters)")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"cannot parse {expression!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.Load, ast.operator, ast.USub, ast.UAdd)):
            if isinstance(node, ast.operator) and type(node) not in _BINOPS:
                raise ValueError(f"operator {type(node).__name__} is not allowed; use + - * / @ **")
            continue
        if isinstance(node, ast.BinOp):
            continue
        if isinstance(node, ast.UnaryOp):
            continue
        if isinstance(node, ast.Name):
            if node.id not in NAMES and node.id not in FUNCTIONS:
                raise ValueError(f"unknown name {node.id!r}; use the arrays {NAMES} and functions {tuple(FUNCTIONS)}")
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            continue
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                raise ValueError(f"only the functions {tuple(FUNCTIONS)} may be called")
            if len(node.args) != 1 or node.keywords:
                raise ValueError(f"{node.func.id}() takes exactly one argument")
            continue
        raise ValueError(f"{type(node).__name__} is not allowed in an expression; use names {NAMES}, numbers, "
                         f"+ - * / @ ** and {tuple(FUNCTIONS)}")
    _check_constants(tree.body)
    return tree


#: The largest magnitude a number, or a part of an expression made of numbers only, may have.
#: Python computes such parts exactly on the frontend: ``9 ** 9 ** 9`` is an integer of 370
#: million digits, minutes of work that not even Ctrl-C stops.
CONSTANT_LIMIT = 1e15


def _check_constants(node: ast.AST) -> float | None:
    """Bound every part of the expression made of numbers only, without computing it exactly.

    Returns the part's value as a float, or None for a part that involves an array.  The value is
    computed in floating point, which overflows (to inf or OverflowError) instead of growing
    without end, so even a tower of powers is refused at once.

    Raises:
        ValueError: a number, or a constant part, beyond :data:`CONSTANT_LIMIT`.
    """
    if isinstance(node, ast.Constant):
        value = abs(node.value) if isinstance(node.value, (int, float)) else 0.0
        if value > CONSTANT_LIMIT:  # an int literal of 500 digits too
            raise ValueError(f"the number {str(node.value)[:20]}... is too large; numbers in an expression "
                             f"must lie within ±{CONSTANT_LIMIT:g}")
        return float(node.value)
    if isinstance(node, ast.UnaryOp):
        value = _check_constants(node.operand)
        return None if value is None else -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Call):
        _check_constants(node.args[0])
        return None
    if isinstance(node, ast.BinOp):
        left, right = _check_constants(node.left), _check_constants(node.right)
        if left is None or right is None:
            return None
        try:
            value = _BINOPS[type(node.op)](left, right) if not isinstance(node.op, ast.MatMult) else 0.0
        except ZeroDivisionError:
            return 0.0  # raised again, with its own message, when the expression runs
        except OverflowError:
            value = float("inf")
        if isinstance(value, complex):  # (-8) ** 0.5: a complex constant; bound its size
            value = abs(value)
        if not abs(value) <= CONSTANT_LIMIT:  # also catches inf and nan
            raise ValueError(f"the constant part {ast.unparse(node)[:40]!r} is too large (beyond "
                             f"±{CONSTANT_LIMIT:g}); use smaller numbers")
        return value
    return None


def _evaluate(node: ast.AST, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, env)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ValueError(f"{node.id!r} is a function; call it, e.g. {node.id}(x)")
        return env[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, env), _evaluate(node.right, env)
        return _BINOPS[type(node.op)](left, right)  # number OP array uses the array's reflected op
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Call):
        arg = _evaluate(node.args[0], env)
        if not hasattr(arg, "shape"):
            raise ValueError(f"{node.func.id}() needs an array argument, got the number {arg!r}")
        return getattr(arg, FUNCTIONS[node.func.id])()
    raise ValueError(f"cannot evaluate {ast.dump(node)}")  # unreachable after check_expression


def run_expression(
    expression: str = "x * y + 2", *, size: int = 2, workers: int = 2, seed: int = 0
) -> DependencyResult:
    """Evaluate ``expression`` on the engine with named arrays ``x``, ``y``, ``w`` (size×size).

    The frontend pushes every op, then reads the result with ``asnumpy()`` — the only wait.

    Args:
        expression: see :func:`check_expression`; default the book's ``"x * y + 2"``.
        size: side of the square arrays (the book uses 1×2; square keeps ``@`` valid).
        workers: engine worker threads.
        seed: seed of the random arrays.

    Returns:
        The frozen :class:`DependencyResult`: the expression, the engine's value and eager PyTorch's (both NumPy
        arrays), the engine's trace, the arrays' shape, the worker count and the virtual-device label.

    Raises:
        ValueError: a bad expression or argument.
    """
    tree = check_expression(expression)
    size = positive_int("size", size, maximum=4096)
    workers = positive_int("workers", workers, maximum=64)
    seed = integer("seed", seed)
    import torch

    from d2l_async.engine import make_engine

    gen = torch.Generator().manual_seed(seed)
    tensors = {name: torch.rand(size, size, generator=gen) + 0.5 for name in NAMES}
    expected = _evaluate(tree, dict(tensors))
    expected = expected.numpy() if hasattr(expected, "numpy") else expected
    with make_engine(workers=workers, devices=("cpu:0",)) as eng:
        env = {name: eng.array(t.clone(), name=name) for name, t in tensors.items()}
        out = _evaluate(tree, env)
        if not hasattr(out, "asnumpy"):
            raise ValueError(f"{expression!r} does not use any array; use x, y or w")
        value = out.asnumpy()
        eng.waitall()
        trace = eng.trace()
    label = engine_label(1, workers)
    return DependencyResult(expression, value, expected, trace.with_meta(device=label, virtual=True,
                            experiment="dependency"), (size, size), workers, label, True)


@dataclass(frozen=True)
class IndependenceResult:
    """Independent chains vs one dependent chain of the same total work, on ``workers`` threads.

    Attributes:
        workers: engine worker threads.
        ops: matrix products in total (split over ``chains`` chains when independent).
        chains: independent chains.
        size: matrix side.
        independent_seconds: wall time of the independent chains (push to ``waitall``).
        dependent_seconds: wall time of one chain of ``ops`` products.
        trace_independent, trace_dependent: the engine's traces.
        device, virtual: where it ran.
        backend: ``"engine"`` (threads) or ``"modelled"`` (modelled-time device).
        facts: usable and busy CPUs and the load when it ran (:class:`.parallel_lessons.RunFacts`).
        modelled: the model's speed and overruns (``trace.meta["modelled"]``), or None.
        independent_cpu_seconds: this process's CPU time during the independent chains (median):
            about ``workers`` times the wall time when thread-workers really ran side by side.
        independent_runs, dependent_runs: every timed run (the medians' samples; lesson checks
            decide against their spread).
    """

    workers: int
    ops: int
    chains: int
    size: int
    independent_seconds: float
    dependent_seconds: float
    trace_independent: Any
    trace_dependent: Any
    device: str
    virtual: bool
    backend: str = "engine"
    facts: Any = None
    modelled: Any = None
    independent_cpu_seconds: float = float("nan")
    independent_runs: tuple[float, ...] = ()
    dependent_runs: tuple[float, ...] = ()

    @property
    def speedup(self) -> float:
        """dependent / independent time: ~1 on one worker, up to ``min(workers, chains)``."""
        return self.dependent_seconds / self.independent_seconds if self.independent_seconds > 0 else float("nan")


class IndependenceRows(DisplayedTuple):
    """:func:`run_independent_vs_dependent`'s rows (one :class:`IndependenceResult` per worker count); displayed,
    a table of their times and the checks of notebook 02's claims
    (:func:`~d2l_async.experiments.parallel_lessons.independence_checks`)."""

    def checks(self) -> list[Any]:
        """The checks of the independent and the dependent chains' claims."""
        from .parallel_lessons import independence_checks

        return independence_checks(self)

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        from ._why import fmt_time

        last = self[-1]
        return (f"Ran on: {last.device}; {last.ops} products of {last.size}×{last.size}, medians of "
                f"{len(last.independent_runs) or 1} runs",
                [(f"{r.workers} worker(s)", f"independent {fmt_time(r.independent_seconds)}, dependent "
                  f"{fmt_time(r.dependent_seconds)}") for r in self])


def run_independent_vs_dependent(
    *, workers: tuple[int, ...] = (1, 2), ops: int | None = None, chains: int = 2, size: int | None = None,
    repeat: int | None = None, backend: str = "engine", model: Any = None,
) -> IndependenceRows:
    """Time independent and dependent chains of matrix products for each worker count.

    Args:
        workers: worker counts to compare (the book's point: 1 vs 2).
        ops: products in total; default 32 (quick mode 8), modelled 16: a longer run comes nearer the ideal
            speed-up on threads (the CHANGELOG has the measurement).
        chains: independent chains (each gets ``ops // chains`` products).
        size: matrix side; default 600 (quick mode 500); modelled 320 (quick mode 256), so that this
            CPU's real work stays a small share of each modelled op.
        repeat: runs of each variant (medians reported, last traces kept), in rounds over the worker
            counts; default 7 (quick mode 2), modelled 3 (modelled durations do not scatter).
        backend: ``"engine"`` (threads) or ``"modelled"`` (a modelled-time device, see above).
        model: the :class:`~d2l_async.engine.DeviceModel` of ``backend="modelled"``.

    Returns:
        One frozen :class:`IndependenceResult` per entry of ``workers``, in that order: the median independent and
        dependent seconds (and every run's), the last run's trace of each, the independent runs' CPU seconds, the
        facts of this machine and, for ``backend="modelled"``, the model's record -- as :class:`IndependenceRows`,
        a tuple that displays its table and checks.

    Raises:
        ValueError: bad counts (``ops`` must be at least ``chains``).
    """
    workers = positive_ints("workers", workers, maximum=64)
    if backend not in ("engine", "modelled"):
        raise ValueError(f"backend={backend!r}: use 'engine' (threads) or 'modelled' (modelled-time device)")
    modelled = backend == "modelled"
    ops = positive_int("ops", ops if ops is not None else config.scale(16 if modelled else 32, 8), maximum=100_000)
    chains = positive_int("chains", chains, maximum=64)
    if ops < chains:
        raise ValueError(f"ops={ops} must be at least chains={chains}")

    _, model = device_setup(backend, model, n_devices=1)
    default_size = config.scale(320, 256) if model is not None else config.scale(600, 500)
    size = positive_int("size", size if size is not None else default_size, maximum=8192)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(3 if modelled else 7, 2),
                          maximum=1000)
    import statistics

    from d2l_async.engine import MODELLED_LABEL, make_engine

    from .parallel_lessons import run_facts

    facts = run_facts()

    base = stable_matrix(size)  # long chains stay bounded, no denormals
    with contextlib.ExitStack() as stack:
        engines = [stack.enter_context(make_engine(workers=w, devices=("cpu:0",), model=model)) for w in workers]
        ms = [eng.array(base.clone(), name="m") for eng in engines]
        for eng, m in zip(engines, ms):
            _chain_run(eng, m, [base] * chains, ops // chains)  # warm-up: threads, allocator
        ind_runs, dep_runs, ind_cpu = ([[] for _ in workers] for _ in range(3))
        traces: list[tuple[Any, Any]] = [(None, None)] * len(workers)
        # in rounds (1 worker, 2 workers, 1 worker, ...): a change in the machine's load between the
        # first worker count's runs and the last one's falls on every count alike
        for _ in range(repeat):
            for i, (eng, m) in enumerate(zip(engines, ms)):
                eng.reset_trace()
                c0 = time.process_time()
                ind_runs[i].append(_chain_run(eng, m, [base.clone() for _ in range(chains)], ops // chains))
                ind_cpu[i].append(time.process_time() - c0)
                t_ind = eng.trace()
                eng.reset_trace()
                dep_runs[i].append(_chain_run(eng, m, [base.clone()], (ops // chains) * chains))
                traces[i] = (t_ind, eng.trace())
    out = []
    for i, w in enumerate(workers):
        t_ind, t_dep = traces[i]
        ind, dep = statistics.median(ind_runs[i]), statistics.median(dep_runs[i])
        label = engine_label(1, w)
        if model is not None:
            label = (f"CPU engine, 1 modelled device, {w} worker(s) ({MODELLED_LABEL}; "
                     f"{model.flops_per_s / 1e9:g} GFLOP/s)")
        out.append(IndependenceResult(w, (ops // chains) * chains, chains, size, ind, dep,
                                      t_ind.with_meta(device=label, virtual=True, experiment="independent"),
                                      t_dep.with_meta(device=label, virtual=True, experiment="dependent"),
                                      label, True, backend, facts, t_ind.meta.get("modelled"),
                                      statistics.median(ind_cpu[i]), tuple(ind_runs[i]), tuple(dep_runs[i])))
    return IndependenceRows(out)


def _chain_run(eng: Any, m: Any, starts: list[Any], length: int) -> float:
    t0 = time.perf_counter()
    arrays = [eng.array(s.clone(), name=f"c{i}") for i, s in enumerate(starts)]
    for _ in range(length):
        arrays = [a @ m for a in arrays]  # chain i depends only on chain i
    eng.waitall()
    return time.perf_counter() - t0


# ---------------------------------------------------------------- what makes 02's claims false
def _rows(one_ind: float, many_ind: float, one_dep: float, many_dep: float, *, chains: int = 2,
          dep_overlap: bool = False, facts: Any = None) -> tuple[IndependenceResult, IndependenceResult]:
    """Two synthetic rows (1 and 2 workers) with these median seconds, three runs each 1% apart."""
    from .parallel_lessons import RunFacts, _lanes_trace

    serial = _lanes_trace([("cpu:0", 0.00, 0.01), ("cpu:0", 0.01, 0.02)])
    side = _lanes_trace([("cpu:0", 0.00, 0.01), ("cpu:1", 0.00, 0.01)])
    facts = facts or RunFacts(4.0, 0.0, 0.0, "4 usable CPUs")

    def row(w: int, ind: float, dep: float) -> IndependenceResult:
        return IndependenceResult(w, 8, chains, 64, ind, dep, side if w > 1 and chains > 1 else serial,
                                  side if dep_overlap and w > 1 else serial, "example", True, "engine", facts, None,
                                  float("nan"), (ind, ind * 1.01, ind * 0.99), (dep, dep * 1.01, dep * 0.99))
    return row(1, one_ind, one_dep), row(2, many_ind, many_dep)


def _naive_rows() -> tuple[IndependenceResult, ...]:
    """The experiment, small, on a naive engine (``D2L_ASYNC_ENGINE=naive``: no worker thread)."""
    import os

    old = os.environ.get("D2L_ASYNC_ENGINE")
    os.environ["D2L_ASYNC_ENGINE"] = "naive"
    try:
        return run_independent_vs_dependent(workers=(1, 2), ops=4, size=64, repeat=2, backend="engine")
    finally:
        os.environ.pop("D2L_ASYNC_ENGINE") if old is None else os.environ.__setitem__("D2L_ASYNC_ENGINE", old)


def _register() -> None:
    from d2l_async import claims
    from d2l_async.lesson import Cause

    from .parallel_lessons import DEPENDENT, SIDE_BY_SIDE_02, RunFacts, independence_checks

    busy = RunFacts(1.0, 1.0, 2.0, "1 usable CPU, 1.0 busy with other work")
    claims.falsifier(SIDE_BY_SIDE_02, "two workers as slow as one",
                     lambda: independence_checks(_rows(0.02, 0.02, 0.02, 0.02))[0])
    claims.counterfactual(SIDE_BY_SIDE_02, "chains=1 (one chain: nothing independent)", Cause.ONE_CHAIN,
                          lambda: independence_checks(_rows(0.02, 0.02, 0.02, 0.02, chains=1, facts=busy))[0])
    claims.counterfactual(SIDE_BY_SIDE_02, "chains=1, run on modelled devices", Cause.ONE_CHAIN,
                          lambda: independence_checks(run_independent_vs_dependent(
                              chains=1, ops=4, size=64, repeat=2, backend="modelled"))[0])
    claims.counterfactual(SIDE_BY_SIDE_02, "one usable CPU, busy", Cause.NO_SPARE_CPU,
                          lambda: independence_checks(_rows(0.02, 0.011, 0.02, 0.02, facts=busy))[0])
    claims.counterfactual(SIDE_BY_SIDE_02, "D2L_ASYNC_ENGINE=naive (no worker thread)", Cause.NO_WORKER_THREAD,
                          lambda: independence_checks(_naive_rows())[0])
    claims.falsifier(DEPENDENT, "two of the chain's ops at once", lambda: independence_checks(
        _rows(0.02, 0.011, 0.02, 0.02, dep_overlap=True))[1])
    claims.falsifier(DEPENDENT, "the chain 1.9× faster on two workers, one op at a time", lambda: independence_checks(
        _rows(0.02, 0.011, 0.019, 0.010))[1])
    claims.counterfactual(DEPENDENT, "the chain 1.9× faster on two workers, one op at a time", Cause.TRACE,
                          lambda: independence_checks(_rows(0.02, 0.011, 0.019, 0.010))[1])
    claims.counterfactual(DEPENDENT, "two of the chain's ops at once", Cause.BUG, lambda: independence_checks(
        _rows(0.02, 0.011, 0.02, 0.02, dep_overlap=True))[1])


_register()
