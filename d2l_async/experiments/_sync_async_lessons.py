"""Lesson checks of notebooks 05 and 05b, as pure functions of a frozen result (D2L §13.2.3).

* :func:`book_loop_check` and :func:`run_checks` -- :data:`FASTER`: asynchronous issue beats waiting after
  every op, decided against the spread of the timed runs (the book's hand-timed loop, or
  :func:`~d2l_async.experiments.run_sync_async`'s repeats);
* :func:`queue_check` -- :data:`QUEUE`: the queue of issued ops fills when the backend does more work per
  op and stays short when the frontend does.  Which side is slower is read from the backend's own clock
  (:func:`~d2l_async.experiments._cost_model.side_costs`: the CPU clock on the engine, kernels and launch
  intervals on CUDA) -- a measurement independent of the queue it predicts;
* :func:`sweep_checks` -- :data:`SHRINKS`: the advantage shrinks as the ops grow, decided by the rank trend
  over every round's point (:func:`d2l_async.verdict.trend`): one size's slow round moves one point of many.
  The medians the figure shows may go up and down while the trend over every point falls; the check
  shows the trend, the medians are its detail.

The cost model's asynchronous predictions (``t1 + n·t2 + t3`` and the pipeline model) are not checked:
their terms are estimated from the very runs they would be checked against, so a check of them could
not fail for a reason of its own.  They are shown as the model's numbers.

Every reason is a :class:`~d2l_async.lesson.Cause` read from the run: its engine (a naive one has no
worker thread), its CPU clock and machine, the GPU's capture (:mod:`d2l_async.experiments._cuda_why`).
"""

from __future__ import annotations

import statistics
from typing import Any

from d2l_async import claims, lesson
from d2l_async._args import having, samples

from . import _cuda_why as cuda_why
from ._common import backend_work
from ._cost_model import side_costs
from ._why import cpu_cause, fmt_time
from .book import BOOK

__all__ = ["TAKES_TURNS", "book_loop_check", "queue_check", "run_checks", "slower_side", "sweep_checks",
           "FASTER", "QUEUE", "SHRINKS"]

#: Below this concurrency (CPU seconds of both sides per wall second) the two sides took turns.
TAKES_TURNS = 1.3

FASTER = claims.claim(
    "05.async-faster", notebooks=("05_sync_vs_async",),
    sentence="asynchronous issue beats waiting after every op",
    book=f"§13.2.3: 10,000 × y = x + 1 took {BOOK['sync_async.sync'].value:g} s synchronously and "
         f"{BOOK['sync_async.async'].value:g} s asynchronously (MXNet)",
    quantity="synchronous / asynchronous wall time of the same loop, every run",
    rule="compare: the interval wholly above 1")
QUEUE = claims.claim(
    "05b.queue", notebooks=("05b_where_asynchrony_stops_helping",),
    sentence="the queue follows the slower side ({expect})",
    book="§13.2.3: when the backend is the bottleneck the frontend runs ahead and the queue grows",
    quantity="the longest queue of the traced run against the side that did more work per op (the backend's own "
             "clock: CPU time on the engine)",
    rule="fact: at least half the ops queued when the backend is slower, at most a tenth when the frontend is; "
         "the sides decided beyond a factor 2")
SHRINKS = claims.claim(
    "05b.shrinks", notebooks=("05b_where_asynchrony_stops_helping",),
    sentence="the advantage of asynchrony shrinks as the ops grow",
    book="§13.2.3: as t2 grows, less of each op is left for asynchrony to hide",
    quantity="synchronous / asynchronous time at each tensor size, every round's point",
    rule="trend: Spearman's rank correlation with the size, one-sided p < 0.05")


def _runs(measurement: Any) -> int:
    return max(1, len(getattr(measurement, "raw", ()) or ()))


def _engine_of(r: Any) -> str:
    trace = getattr(r, "trace_async", None)
    return str(trace.meta.get("engine", "")) if trace is not None else ""


def _why_not_faster(r: Any, v: Any) -> tuple[Any, dict[str, Any]]:
    """Why asynchronous issue was not faster, from the run: the engine, the spread, the GPU, the CPUs."""
    if _engine_of(r) == "naive":
        return lesson.Cause.NO_WORKER_THREAD, {}
    inline, traced = _inline(r)
    if inline * 2 > traced > 0:  # JAX: XLA ran the ops on the dispatching thread: there was no second side
        return lesson.Cause.TRACE, {"seen": f"XLA ran {inline:,} of the {traced:,} traced ops inline, on the "
                                            "dispatching thread (under 1000 flops each): the asynchronous loop "
                                            "was synchronous in fact"}
    if v.holds is None:
        return lesson.Cause.SPREAD, {"runs": f"{v.n_a} vs {v.n_b} runs"}
    if getattr(r, "backend", "") == "cuda":
        facts = cuda_why.cuda_facts(r.trace_async)
        return lesson.Cause.GPU, {"gpu": cuda_why.why_async_not_faster(r.model, facts)}
    if getattr(r, "backend", "") == "jax":  # XLA's threads run outside Python's lock: not the engine's reasons
        return lesson.Cause.TRACE, {"seen": "XLA's threads run outside Python's interpreter lock, so what kept "
                                            "the loops level is not on the CPU clock"}
    return cpu_cause(getattr(r, "machine", None), "the frontend and the worker")


def run_checks(r: Any) -> list[Any]:
    """The check of :data:`FASTER` on :func:`~d2l_async.experiments.run_sync_async`'s repeats.

    Returns:
        One :class:`~d2l_async.lesson.Check`, in a list.
    """
    from d2l_async.verdict import compare

    v = compare(r.sync.raw, r.async_.raw, less=False, names=("synchronous", "asynchronous"))
    cause, facts = _why_not_faster(r, v)
    return [FASTER.check(v, cause=cause, facts=facts,
                         detail=f"{r.ops:,} ops; medians {fmt_time(r.sync.median)} vs {fmt_time(r.async_.median)}")]


def _inline(r: Any) -> tuple[int, int]:
    """``(ops run inline, ops traced)`` in the asynchronous run's trace: XLA's CPU client runs a tiny program on
    the dispatching thread (``meta["inline_executions"]`` of a JAX trace); ``(0, n)`` on other backends."""
    trace = getattr(r, "trace_async", None)
    if trace is None:
        return 0, 0
    return int(trace.meta.get("inline_executions", 0) or 0), len(backend_work(trace))


def book_loop_check(sync_s: Any, async_s: Any, *, ops: int, machine: Any = None, engine: str = "",
                    backend: str = "engine") -> Any:
    """The book's hand-timed loop (one :class:`~d2l_async.benchmark.Benchmark` per variant, as §13.2.3
    writes it): the check of :data:`FASTER`, decided against the spread of repeated runs.

    Args:
        sync_s, async_s: seconds of each run of each loop (a number for one run, a sequence for several).
        ops: ops per loop (for the detail).
        machine: :func:`d2l_async.devices.machine` when the runs were made (for the reason).
        backend: where the loops ran, ``"engine"`` or ``"cuda"`` (a GPU's loop gets the GPU's reasons).
        engine: the engine's kind (``eng.engine_kind``): a naive engine is the reason before the machine.

    Returns:
        The :class:`~d2l_async.lesson.Check` (not displayed).

    Raises:
        ValueError: a non-positive op count or time.
    """
    from d2l_async.verdict import compare

    sync_runs = tuple(samples("sync_s", sync_s, above=0, what="seconds"))
    async_runs = tuple(samples("async_s", async_s, above=0, what="seconds"))
    if isinstance(ops, bool) or not isinstance(ops, int) or ops < 1:
        raise ValueError(f"ops must be a positive int, got {ops!r}")
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    if backend not in ("engine", "cuda"):
        raise ValueError(f"backend={backend!r}: use one of ('engine', 'cuda')")
    v = compare(sync_runs, async_runs, less=False, names=("synchronous", "asynchronous"))
    if engine == "naive":
        cause, facts = lesson.Cause.NO_WORKER_THREAD, {}
    elif backend == "cuda" and v.holds is not True:  # a GPU's loop: the GPU's reasons, not the CPU's
        why = cuda_why.why_book_loop(statistics.median(sync_runs), statistics.median(async_runs), ops,
                                     unclear=v.holds is None)
        cause, facts = lesson.Cause.GPU, {"gpu": why}
    elif v.holds is None:
        cause, facts = lesson.Cause.SPREAD, {"runs": f"{len(sync_runs)} vs {len(async_runs)} runs"}
    else:
        cause, facts = cpu_cause(machine, "the frontend and the worker")
    return FASTER.check(v, cause=cause, facts=facts,
                        detail=f"{ops:,} ops; medians {fmt_time(statistics.median(sync_runs))} vs "
                               f"{fmt_time(statistics.median(async_runs))}")


def _largest_ops(sweep: Any) -> list[Any]:
    most = max(p.ops for p in sweep.points)
    return sorted((p for p in sweep.points if p.ops == most), key=lambda p: p.numel)


def sweep_checks(sweep: Any) -> list[Any]:
    """The check of :data:`SHRINKS` at the largest op count swept: the rank trend over every round's point
    (each size once per round, ties sharing their rank), or over the medians of a sweep built from medians
    only.  A series may go up and down and still fall overall; it is can't tell when its ups and downs are
    as large as its fall.

    Returns:
        One :class:`~d2l_async.lesson.Check`, in a list.
    """
    from d2l_async.verdict import trend

    pts = _largest_ops(sweep) if getattr(sweep, "points", ()) else []
    ratios = ", ".join(f"{p.numel:,} el. {p.ratio:.2f}" for p in pts)
    if len(pts) < 4:
        # with 3 points even a perfectly monotone series has p = 1/6: no rank test can decide it
        return [SHRINKS.check(None, cause=lesson.Cause.MISSING, shown=f"{len(pts)} size(s) swept",
                              facts={"missing": "sweep at least four tensor sizes to decide a trend"})]
    series = [p for p in getattr(sweep, "runs", ()) if p.ops == pts[0].ops] or pts  # every round's point
    falls = trend([p.numel for p in series], [p.ratio for p in series], falling=True)
    if getattr(sweep, "backend", "") == "cuda" and falls.holds is not True:
        cause, facts = lesson.Cause.GPU, {"gpu": cuda_why.why_ratio_rose(pts[-1], unclear=falls.holds is None)}
    elif _engine_of(sweep) == "naive" or str(getattr(sweep, "device", "")).startswith("CPU naive"):
        cause, facts = lesson.Cause.NO_WORKER_THREAD, {}
    elif falls.holds is None:
        cause, facts = lesson.Cause.SPREAD, {"runs": f"{len(series)} points"}
    else:
        cause, facts = lesson.Cause.OTHER_WAY, {"runs": f"{len(series)} points"}
    return [SHRINKS.check(falls, cause=cause, facts={**facts, "trend_of": "the ratio"},
                          detail=f"medians at {pts[0].ops:,} ops: {ratios}",
                          numbers={f"ratio {p.numel}": p.ratio for p in pts})]


def slower_side(r: Any) -> tuple[str | None, Any, float, float]:
    """Which side did more work per op, from the backend's own clock (:func:`side_costs`): the CPU clock
    of the asynchronous runs on the engine (a claim about work is decided in CPU time, never from wall
    time a busy machine inflates), the traced run's launch intervals and kernels on CUDA (no CPU clock
    sees the GPU's work).

    Returns:
        ``(side, verdict, frontend_s, backend_s)``: ``"backend"``, ``"frontend"`` or None (within the
        spread of one measurement: a factor of 2), the :func:`~d2l_async.verdict.compare` record, and
        each side's seconds per op.  On the engine without a CPU clock, the model's wall-time ``t1`` vs
        ``t2``.
    """
    costs = side_costs(r)
    return costs.slower, costs.verdict(), costs.frontend_s, costs.backend_s


def queue_check(r: Any) -> Any:
    """The check of :data:`QUEUE`: the traced asynchronous run's queue agrees with the slower side, decided
    from each side's cost per op on the backend's own clock (:func:`slower_side`).

    Returns:
        The :class:`~d2l_async.lesson.Check` (not displayed).
    """
    from dataclasses import replace

    from d2l_async.analysis import queue_length_summary

    n = len(backend_work(r.trace_async))  # device work only: a CUDA capture's frontend cpu_ops are kind "op" too
    summary = queue_length_summary(r.trace_async)
    q = int(summary["max"].max()) if len(summary) else 0
    costs = side_costs(r)
    side, v = costs.slower, costs.verdict()
    cuda = costs.backend == "cuda"
    facts = {"queue": q, "ops": n, "costs": costs.sentence()}
    numbers = {"max_queue": q, "ops": n, "slower": side or "", "frontend_s": costs.frontend_s,
               "backend_s": costs.backend_s}
    if side is None:
        return QUEUE.check(None, cause=lesson.Cause.SIDES_CLOSE, shown=f"longest queue {q} of {n} ops",
                           facts={**facts, "expect": "neither is clearly slower", "sides": costs.sentence()},
                           numbers=numbers)
    full = cuda_why.queue_full(n, cuda) if side == "backend" else max(10, n // 10)
    holds = q >= full if side == "backend" else q <= full
    # the queue is a fact of the trace; which side is slower was decided by compare (recorded with it)
    decided = replace(v, holds=holds, method=f"queue read from the trace; slower side by {v.method}")
    if cuda:
        cause, why = lesson.Cause.GPU, {"gpu": cuda_why.why_queue(cuda_why.cuda_facts(r.trace_async),
                                                                 backend_slower=side == "backend")}
    elif _engine_of(r) == "naive":
        cause, why = lesson.Cause.NO_WORKER_THREAD, {}
    else:
        cause, why = cpu_cause(getattr(r, "machine", None), "the frontend and the worker")
    expect = {"backend": f"{'the GPU' if cuda else 'the backend'}: it fills",
              "frontend": f"{'the CPU' if cuda else 'the frontend'}: it stays short"}[side]
    return QUEUE.check(decided, cause=cause, shown=f"longest queue {q} of {n} ops",
                       facts={**facts, **why, "expect": expect},
                       detail=f"{costs.sentence()}; {r.numel:,} element(s) per op; "
                              + (f"filled means at least {full:.0f} queued" if side == "backend"
                                 else f"short means at most {full}"), numbers=numbers)
