"""Lesson checks of notebook 05, as pure functions of a frozen result (D2L §13.2.3).

:func:`run_checks` reads a :class:`~d2l_async.experiments.sync_async.SyncAsyncResult`,
:func:`sweep_checks` a :class:`~d2l_async.experiments.sync_async.SyncAsyncSweep`, :func:`queue_check` the
queue of a run's trace against its bottleneck; all return
:class:`d2l_async.lesson.Check` objects without displaying them.  The checks ask; the backend answers
from its own clock (:func:`~d2l_async.experiments._cost_model.side_costs`,
:func:`~d2l_async.experiments._cost_model.t2_share`): the CPU clock for the engine, the trace's kernels
and launch intervals for CUDA.  When the cost model misses the measured asynchronous time on the
engine, the reason is read from the run's CPU clock: if the frontend's and the workers' CPU times add
up to the wall time, they took turns, and whether the CPUs or Python's interpreter lock made them take
turns is read from the machine snapshot; on CUDA it is read from the capture
(:mod:`d2l_async.experiments._cuda_why`).
"""

from __future__ import annotations

from typing import Any

from . import _cuda_why as cuda_why
from ._common import backend_work
from ._cost_model import side_costs, t2_share
from ._why import cpus_clause, few_cpus, fmt_time, overlap_clause

__all__ = ["MODEL_TOLERANCE", "TAKES_TURNS", "queue_check", "run_checks", "slower_side", "sweep_checks"]

#: The model "predicts" the asynchronous time when it is within this relative error.
MODEL_TOLERANCE = 0.25
#: Below this concurrency (CPU seconds of both sides per wall second) the two sides took turns.
TAKES_TURNS = 1.3


def _runs(measurement: Any) -> int:
    return max(1, len(getattr(measurement, "raw", ()) or ()))


def run_checks(r: Any) -> list[Any]:
    """Two checks: asynchrony is faster; the pipeline model predicts the asynchronous time.

    Both are decided against the spread of the timed runs (:mod:`d2l_async._verdict`): every run of
    each loop is a sample, so a ratio inside the run-to-run spread is "can't tell", not ✔ or ✘.
    """
    from d2l_async import lesson
    from d2l_async._verdict import compare, within

    m = r.model
    measured = r.async_.median
    cuda = getattr(r, "backend", "") == "cuda"  # t1 a launch, t2 a kernel's pace, t3 a round trip
    facts = cuda_why.cuda_facts(r.trace_async) if cuda else None
    faster = lesson.check(
        "asynchronous issue is faster than waiting after every op",
        compare(r.async_.raw, r.sync.raw),
        shown=(f"{r.ops:,} ops: synchronous {fmt_time(r.sync.median)} vs asynchronous {fmt_time(measured)} "
               f"({r.ratio:.2f}×; the book: 3.4×)"),
        otherwise=cuda_why.why_async_not_faster(m, facts) if cuda else (
                  f"per op t1 {fmt_time(m.t1)}, t2 {fmt_time(m.t2)}, t3 {fmt_time(m.t3)}: asynchrony can save "
                  f"at most t3 + min(t1, t2) = {fmt_time(m.t3 + min(m.t1, m.t2))} of "
                  f"{fmt_time(m.t1 + m.t2 + m.t3)} per op; {cpus_clause(r.machine)}. Fewer elements per op "
                  "(numel) leave t3 a larger share; rerun on a quieter machine."),
        unclear=cuda_why.why_async_not_faster(m, facts, unclear=True) if cuda else
                "more repeats (repeat=) or more ops per run narrow the spread; a quieter machine too",
    )
    gap = (m.async_pipeline - measured) / measured if measured > 0 else 0.0
    predicted = lesson.check(
        f"the pipeline model n·max(t1, t2) + min(t1, t2) + t3 predicts the asynchronous time "
        f"(within {MODEL_TOLERANCE:.0%})",
        within(r.async_.raw, m.async_pipeline, tolerance=MODEL_TOLERANCE) if m.async_pipeline > 0 else False,
        shown=f"model {fmt_time(m.async_pipeline)} vs measured {fmt_time(measured)} ({gap:+.0%})",
        otherwise=cuda_why.why_model_missed(m, measured, facts) if cuda else _why_model_missed(r),
        unclear="the runs scatter across the tolerance: more repeats (repeat=) tell whether the model fits",
    )
    return [faster, predicted]


def _why_model_missed(r: Any) -> str:
    m, cpu, measured = r.model, r.cpu_async, r.async_.median
    if cpu is not None:
        cpu = cpu.divided(_runs(r.async_))  # one run, like the median it explains
    if cpu is None:
        return ("the model assumes issuing and computing overlap; this run did not measure the CPU time "
                "that would say whether they did. Rerun with run_sync_async().")
    serial = m.async_serial
    serial_gap = (serial - measured) / measured if measured > 0 else 0.0
    per_op = cpu.backend / r.ops
    if m.async_pipeline > measured:
        # over-predicted: the timed runs were cheaper per op than the traced run the model's t2 came from
        return (f"the model over-predicts: its t2 = {fmt_time(m.t2)} ({m.t2_source}) comes from the traced run, "
                f"where the engine also records every op, while the timed runs cost the workers only "
                f"{fmt_time(per_op)} of CPU per op ({overlap_clause(cpu)}; {cpus_clause(r.machine)}). With that t2 "
                f"the pipeline model gives {fmt_time(m.n * max(m.t1, per_op) + min(m.t1, per_op) + m.t3)}. "
                "More ops per run (trace_ops) steady the estimate.")
    if cpu.concurrency < TAKES_TURNS:
        if few_cpus(r.machine, 2):
            cause = (f"with {cpus_clause(r.machine)}, there was not a CPU for each thread (and Python's "
                     "interpreter lock lets only one of them run the engine's Python bookkeeping at a time anyway)")
        else:
            cause = (f"the CPUs were there ({cpus_clause(r.machine)}), so what serialized them is Python's "
                     "interpreter lock: the engine's bookkeeping for each op is Python code, and only one "
                     "thread runs Python at a time (a tiny op's kernel releases the lock only briefly)")
        short = (f", and the process ran only {cpu.concurrency:.0%} of the wall time: the rest of the "
                 f"{fmt_time(cpu.wall)} it waited for a CPU it shares with other work"
                 if cpu.concurrency < 0.9 else "")
        return (f"the model assumes the frontend issues while the backend computes, but they took turns: "
                f"{overlap_clause(cpu)}{short}; {cause}. Taking turns, n·(t1 + t2) + t3 = {fmt_time(serial)} "
                f"({serial_gap:+.0%} of the measurement). Larger ops (numel) spend longer in torch kernels, which "
                "release the lock; on a GPU the kernels run on the device while Python issues.")
    return (f"the two sides did overlap ({overlap_clause(cpu)}), but the workers' CPU per op in the "
            f"asynchronous run was {fmt_time(per_op)} against t2 = {fmt_time(m.t2)} ({m.t2_source}) read from "
            f"the traced run: the model's t2 is not what the timed runs cost ({cpus_clause(r.machine)}). "
            "Rerun; more ops per run steady the estimate.")


def _largest_ops(sweep: Any) -> list[Any]:
    most = max(p.ops for p in sweep.points)
    return sorted((p for p in sweep.points if p.ops == most), key=lambda p: p.numel)


def sweep_checks(sweep: Any) -> list[Any]:
    """Two checks at the largest op count swept, each decided from the whole series (Spearman's rank
    correlation over every size, :func:`d2l_async._verdict.trend`): the ratio falls as ops grow; t2
    takes over an op's cost (its share read from the backend's own clock, :func:`t2_share`: a claim about work)."""
    from dataclasses import replace

    from d2l_async import lesson
    from d2l_async._verdict import trend

    pts = _largest_ops(sweep) if getattr(sweep, "points", ()) else []
    sizes = sorted({p.numel for p in pts})
    if len(sizes) < 4:
        # with 3 points even a perfectly monotone series has p = 1/6: no rank test can decide it
        why = "sweep at least four tensor sizes (numels=(1, 10**3, 10**5, 10**6)) to decide a trend"
        return [lesson.check("the advantage of asynchrony shrinks as the ops grow", None,
                             shown=f"only {len(sizes)} size(s) swept", unclear=why)]
    first, last = pts[0], pts[-1]
    ratios = ", ".join(f"{p.numel:,} el. {p.ratio:.2f}×" for p in pts)
    below = ""
    if last.ratio < 0.9:
        below = (f" (below 1 at {last.numel:,} elements: the asynchronous run was the slower one"
                 + _cpu_compare(last) + ")")
    falls = trend([p.numel for p in pts], [p.ratio for p in pts], falling=True)
    cuda = getattr(sweep, "backend", "") == "cuda"  # the GPU's terms, not CPU clocks and wake-ups
    shrinks = lesson.check(
        "the advantage of asynchrony shrinks as the ops grow",
        falls,
        shown=f"sync / async at {first.ops:,} ops: {ratios}{below}; {falls.spread}",
        otherwise=cuda_why.why_ratio_rose(last) if cuda else (
                  f"the ratio rose with the size: at {last.numel:,} elements t2 was {fmt_time(last.model.t2)} per op "
                  f"and t1 + t3 {fmt_time(last.model.t1 + last.model.t3)}{_cpu_compare(last)}; "
                  f"{cpus_clause(sweep.machine)}. Microsecond timings are fragile on a busy machine: rerun, or sweep "
                  "larger sizes."),
        unclear=cuda_why.why_ratio_rose(last, unclear_spread=falls.spread) if cuda else (
                f"the ratio went up and down across the sizes ({falls.spread}), not one way: microsecond timings on "
                f"{cpus_clause(sweep.machine)} scatter more than the trend; more repeats or more sizes decide it"),
    )
    read = [t2_share(p, getattr(sweep, "backend", "engine")) for p in pts]
    shares = [sh for sh, _ in read]
    grows = trend([p.numel for p in pts], shares, falling=False)
    clocks = {how for _, how in read}
    clock = clocks.pop() if len(clocks) == 1 else "wall-time model t2 / (t1 + t2 + t3)"
    m = last.model
    decided = grows
    if grows.holds is True and shares[-1] < 0.5:
        decided = replace(grows, holds=False)  # it grows, but never becomes most of the cost
    takes_over = lesson.check(
        "t2 (computing) takes most of an op's synchronous cost as the ops grow",
        decided,
        shown=(f"t2's share ({clock}): " + ", ".join(f"{p.numel:,} el. {sh:.0%}" for p, sh in zip(pts, shares))
               + f"; {grows.spread}"),
        otherwise=cuda_why.why_t2_share(pts, shares) if cuda else (
                  f"at {last.numel:,} elements t2 was {shares[-1]:.0%} of the CPU an op cost (t2 {fmt_time(m.t2)}, "
                  f"t3 {fmt_time(m.t3)} of wall time){_cpu_compare(last)}{_sync_waiting(last)}; "
                  f"{cpus_clause(sweep.machine)}. Sweep larger sizes (10**7 elements)."),
        unclear=cuda_why.why_t2_share(pts, shares, unclear_spread=grows.spread) if cuda else (
                f"t2's share went up and down across the sizes ({grows.spread}); more repeats or larger sizes "
                "(10**7 elements) decide it"),
    )
    return [shrinks, takes_over]


def _cpu_compare(p: Any) -> str:
    if p.cpu_sync is None or p.cpu_async is None or p.cpu_sync.wall <= 0 or p.cpu_async.wall <= 0:
        return ""
    # per op of one run: the CPU clock sums the repeats, the medians are one run each
    runs_s = max(1, round(p.cpu_sync.wall / p.sync_seconds)) if p.sync_seconds > 0 else 1
    runs_a = max(1, round(p.cpu_async.wall / p.async_seconds)) if p.async_seconds > 0 else 1
    sync_op = p.cpu_sync.backend / (p.ops * runs_s)
    async_op = p.cpu_async.backend / (p.ops * runs_a)
    return (f"; the workers used {fmt_time(async_op)} of CPU per op asynchronously vs {fmt_time(sync_op)} "
            "synchronously")


def _sync_waiting(p: Any) -> str:
    """How much of the synchronous run's wall time no thread of ours was running (waits, wake-ups)."""
    c = p.cpu_sync
    idle = max(0.0, 1.0 - c.concurrency) if c is not None and c.wall > 0 else 0.0
    if idle < 0.1:
        return ", and every wait adds a thread wake-up"
    runs = max(1, round(c.wall / p.sync_seconds)) if p.sync_seconds > 0 else 1
    c = c.divided(runs)  # one run, like the medians
    return (f"; the synchronous run used {fmt_time(c.busy)} of CPU in {fmt_time(c.wall)} of wall time, so for "
            f"{idle:.0%} of it no thread of ours ran: each wait hands the CPU over, and getting it back takes a wake-up and, on a "
            "busy machine, a turn on the CPU")



def slower_side(r: Any) -> tuple[str | None, Any, float, float]:
    """Which side did more work per op, from the backend's own clock (:func:`side_costs`): the CPU clock
    of the asynchronous runs on the engine (a claim about work is decided in CPU time, never from wall
    time a busy machine inflates), the traced run's launch intervals and kernels on CUDA (no CPU clock
    sees the GPU's work).

    Returns:
        ``(side, verdict, frontend_s, backend_s)``: ``"backend"``, ``"frontend"`` or None (within the
        spread of one measurement: a factor of 2), the :func:`~d2l_async._verdict.compare` record, and
        each side's seconds per op.  On the engine without a CPU clock, the model's wall-time ``t1`` vs
        ``t2``.
    """
    costs = side_costs(r)
    return costs.slower, costs.verdict(), costs.frontend_s, costs.backend_s


def queue_check(r: Any) -> Any:
    """The queue of the traced asynchronous run agrees with the slower side, decided from each side's
    cost per op on the backend's own clock (:func:`slower_side`): it fills when the backend does more work
    per op, and stays short when the frontend does."""
    from d2l_async import lesson
    from d2l_async.analysis import queue_length_summary

    # device work only: a CUDA capture's frontend cpu_ops are kind "op" too (issue 18)
    n = len(backend_work(r.trace_async))
    summary = queue_length_summary(r.trace_async)
    q = int(summary["max"].max()) if len(summary) else 0
    costs = side_costs(r)
    side, v = costs.slower, costs.verdict()
    shown = f"{r.numel:,} element(s): {costs.sentence()}; longest queue {q} of {n} traced ops"
    cpu = r.cpu_async.divided(_runs(r.async_)) if r.cpu_async is not None else None
    ran = f"; {overlap_clause(cpu)}" if cpu is not None else ""
    if side is None:
        return lesson.check("the slower side decides whether the queue of issued ops fills", v,
                            shown=shown,
                            unclear=cuda_why.why_sides_unclear(costs) if costs.backend == "cuda" else (
                                    "the frontend and the workers did about the same work per op (within the "
                                    "factor 2 one measurement can decide): either side may lead. Larger ops (numel) "
                                    "make the workers the slower side"))
    from dataclasses import replace

    # the queue is a fact of the trace; which side is slower was decided by compare (recorded with it)
    def fact(holds: bool) -> Any:
        return replace(v, holds=holds, method=f"queue read from the trace; slower side by {v.method}")

    if costs.backend == "cuda":  # the GPU's terms: launches, the queue's cap
        facts = cuda_why.cuda_facts(r.trace_async)
        if side == "backend":
            full = cuda_why.queue_full(n, True)
            return lesson.check("the GPU is the slower side here, so the queue of launches fills",
                                fact(q >= full), shown=f"{shown} (full: {full:.0f}, CUDA's cap ~1024)",
                                otherwise=cuda_why.why_queue(facts, backend_slower=True))
        short = max(10, n // 10)
        return lesson.check("the CPU's launches are the slower side here, so the queue stays short", fact(q <= short),
                            shown=shown, otherwise=cuda_why.why_queue(facts, backend_slower=False))
    if side == "backend":
        return lesson.check("the backend is the slower side here (CPU per op), so the queue of issued ops fills",
                            fact(q >= n / 2), shown=shown,
                            otherwise=(f"the frontend did not get far ahead although the workers did more work per op: "
                                       f"the backend took ops as they came{ran}; {cpus_clause(r.machine)}. On a busy CPU "
                                       "the frontend itself waits for the CPU between pushes; rerun, or use larger ops."))
    short = max(10, n // 10)
    return lesson.check("the frontend is the slower side here (CPU per op), so the queue stays short", fact(q <= short),
                        shown=shown,
                        otherwise=(f"the queue reached {q} > {short} ops: the worker did not run while the frontend "
                                   f"issued{ran}; " + (f"with {cpus_clause(r.machine)}, the two threads did not have a "
                                   "CPU each" if few_cpus(r.machine, 2) else
                                   "the interpreter lock kept the worker waiting (up to sys.getswitchinterval())")
                                   + ". sys.setswitchinterval(1e-5) hands the lock over sooner (exercise 4)."))
