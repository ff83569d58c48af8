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

import statistics
from typing import Any

from d2l_async._args import having

from . import _cuda_why as cuda_why
from ._common import backend_work
from ._cost_model import side_costs, t2_share
from ._why import cpus_clause, few_cpus, fmt_time, overlap_clause
from .book import BOOK

__all__ = ["MODEL_SLACK", "TAKES_TURNS", "book_loop_check", "queue_check", "run_checks", "slower_side", "sweep_checks"]

#: The pipeline model's best case may be undercut by this much (relative) before the bound fails: its terms
#: are estimates (t1 from the issue loop, t2 from the traced run), each off by some tens of percent.
MODEL_SLACK = 0.25
#: Below this concurrency (CPU seconds of both sides per wall second) the two sides took turns.
TAKES_TURNS = 1.3


def _runs(measurement: Any) -> int:
    return max(1, len(getattr(measurement, "raw", ()) or ()))


def run_checks(r: Any) -> list[Any]:
    """Two checks: asynchrony is faster; the pipeline model is a lower bound on the asynchronous time.

    Both are decided against the spread of the timed runs (:mod:`d2l_async.verdict`): every run of
    each loop is a sample, so a ratio inside the run-to-run spread is "can't tell", not ✔ or ✘.  The
    comparison is written in one direction throughout, synchronous / asynchronous as the book prints it.

    The book's ``t1 + n·t2 + t3`` (and the pipeline model ``n·max(t1, t2) + min(t1, t2) + t3``) assume
    that issuing and computing overlap fully: that is the best case, so the claim checked is that no run
    beats it (beyond :data:`MODEL_SLACK`, the error of its estimated terms).  How far above it the run
    landed, and why, is read from the run's CPU clock: on this engine both sides are Python threads,
    and when they took turns the time sits near ``n·(t1 + t2) + t3`` instead -- where the book's
    overlap does not reproduce, the check's numbers say why.
    """
    from d2l_async import lesson
    from d2l_async.verdict import at_least, compare

    m = r.model
    measured = r.async_.median
    cuda = getattr(r, "backend", "") == "cuda"  # t1 a launch, t2 a kernel's pace, t3 a round trip
    facts = cuda_why.cuda_facts(r.trace_async) if cuda else None
    sides = ("synchronous", "asynchronous")
    faster_v = compare(r.sync.raw, r.async_.raw, less=False, names=sides)
    faster = lesson.check(
        "asynchronous issue is faster than waiting after every op",
        faster_v,
        shown=(f"{r.ops:,} ops: synchronous {fmt_time(r.sync.median)} vs asynchronous {fmt_time(measured)} "
               f"(synchronous / asynchronous = {faster_v.ratio:.2f}; the book: {BOOK['sync_async.ratio'].value:g})"),
        otherwise=cuda_why.why_async_not_faster(m, facts) if cuda else _why_not_faster(r),
        unclear=cuda_why.why_async_not_faster(m, facts, unclear=True) if cuda else (
                f"{len(r.sync.raw)} and {len(r.async_.raw)} run(s) on {cpus_clause(r.machine)}{_inline_clause(r)}; "
                "more repeats (repeat=) or more ops per run narrow the spread"),
    )
    bound = m.async_pipeline
    v = at_least(r.async_.raw, bound, slack=MODEL_SLACK, names=("measured", "pipeline model")) if bound > 0 else False
    lower = lesson.check(
        "the pipeline model n·max(t1, t2) + min(t1, t2) + t3 is a lower bound on the asynchronous time "
        "(full overlap is the best case)",
        v,
        shown=(f"pipeline model {fmt_time(bound)} vs measured {fmt_time(measured)} (measured / pipeline model = "
               f"{measured / bound:.2f})" if bound > 0 else f"pipeline model {fmt_time(bound)}: no time to bound")
              + ((f"; {cuda_why.above_bound(m, measured, facts)}" if measured >= bound > 0 else "") if cuda
                 else _above_bound(r)),
        otherwise=cuda_why.why_model_missed(m, measured, facts) if cuda else _why_below_bound(r),
        unclear=("the runs scatter across the bound (less its estimates' error): more repeats (repeat=) or more "
                 "ops per run decide it"),
    )
    return [faster, lower]


def _why_not_faster(r: Any) -> str:
    """Why asynchronous issue was not faster on the engine, from the run's own terms and CPU clock."""
    m = r.model
    save, whole = m.t3 + min(m.t1, m.t2), m.t1 + m.t2 + m.t3
    cpu = r.cpu_async.divided(_runs(r.async_)) if r.cpu_async is not None else None
    ran = f"; {overlap_clause(cpu)}" if cpu is not None else ""
    return (f"per op t1 {fmt_time(m.t1)}, t2 {fmt_time(m.t2)}, t3 {fmt_time(m.t3)}: asynchrony can save at most "
            f"t3 + min(t1, t2) = {fmt_time(save)} of {fmt_time(whole)} per op{ran}{_inline_clause(r)}; "
            f"{cpus_clause(r.machine)}. Fewer elements per op (numel) leave t3 a larger share; rerun on a quieter "
            "machine.")


def _above_bound(r: Any) -> str:
    """Where the measured time sits between full overlap and taking turns, and why, from the CPU clock."""
    m, measured = r.model, r.async_.median
    cpu = r.cpu_async.divided(_runs(r.async_)) if r.cpu_async is not None else None
    if cpu is None or cpu.wall <= 0:
        return ""
    serial = m.async_serial
    if cpu.concurrency >= TAKES_TURNS:
        return (f"; the two sides ran side by side ({overlap_clause(cpu)}), the overlap the book assumes (taking "
                f"turns would give n·(t1 + t2) + t3 = {fmt_time(serial)})")
    inline, traced = _inline(r)
    if inline * 2 > traced > 0:  # JAX: XLA ran the ops on the dispatching thread, so there was no second side
        cause = (f"XLA ran {inline:,} of the {traced:,} traced ops inline, on the dispatching thread (a program "
                 "under 1000 flops costs less than a thread switch), so there was no second thread to overlap with")
    elif getattr(r, "backend", "") == "jax" and not few_cpus(r.machine, 2):
        cause = (f"the CPUs were there ({cpus_clause(r.machine)}) and XLA's threads run outside Python's interpreter "
                 "lock: what kept them from overlapping is not on the CPU clock")
    elif few_cpus(r.machine, 2):
        cause = (f"with {cpus_clause(r.machine)} there was not a CPU for each thread (and Python's interpreter lock "
                 "runs one thread's Python at a time anyway)")
    else:
        cause = (f"the CPUs were there ({cpus_clause(r.machine)}), so Python's interpreter lock serialized them: "
                 "the engine's bookkeeping for each op is Python code, and one thread runs Python at a time")
    short = (f"; the process ran only {cpu.concurrency:.0%} of the wall time, waiting for a CPU the rest"
             if cpu.concurrency < 0.9 else "")
    side = "above" if measured >= serial else "below"
    return (f"; the book's overlap did not happen here: {overlap_clause(cpu)}{short}; {cause}. So the run took "
            f"{fmt_time(measured)}, {side} what taking turns gives: n·(t1 + t2) + t3 = {fmt_time(serial)}")


def _inline(r: Any) -> tuple[int, int]:
    """``(ops run inline, ops traced)`` in the asynchronous run's trace: XLA's CPU client runs a tiny program on
    the dispatching thread (``meta["inline_executions"]`` of a JAX trace); ``(0, n)`` on other backends."""
    trace = getattr(r, "trace_async", None)
    if trace is None:
        return 0, 0
    return int(trace.meta.get("inline_executions", 0) or 0), len(backend_work(trace))


def _inline_clause(r: Any) -> str:
    """``"; XLA ran 1,000 of the 1,000 traced ops inline ..."`` when most ran inline, else ``""``."""
    inline, traced = _inline(r)
    if not inline * 2 > traced > 0:
        return ""
    return (f"; XLA ran {inline:,} of the {traced:,} traced ops inline, on the dispatching thread (under 1000 flops "
            "each), so the asynchronous loop was synchronous in fact")


def _why_below_bound(r: Any) -> str:
    """Why the run beat the model's best case: the model's terms cost more than the timed runs did."""
    m, cpu = r.model, r.cpu_async
    if cpu is not None:
        cpu = cpu.divided(_runs(r.async_))  # one run, like the median it explains
    if cpu is None:
        return (f"the model's terms (t1 {fmt_time(m.t1)}, t2 {fmt_time(m.t2)}, {m.t2_source}) come from the issue "
                "loop and the traced run, and this run did not measure the CPU time that would say which one the "
                "timed runs undercut. Rerun with run_sync_async().")
    per_op = cpu.backend / r.ops
    return (f"the model over-predicts: its t2 = {fmt_time(m.t2)} ({m.t2_source}) comes from the traced run, where the "
            f"engine also records every op, while the timed runs cost the workers only {fmt_time(per_op)} of CPU per "
            f"op ({overlap_clause(cpu)}; {cpus_clause(r.machine)}). With that t2 the pipeline model gives "
            f"{fmt_time(m.n * max(m.t1, per_op) + min(m.t1, per_op) + m.t3)}. More ops per run (trace_ops) steady "
            "the estimate.")


def book_loop_check(sync_s: Any, async_s: Any, *, ops: int, machine: Any = None, backend: str = "engine") -> Any:
    """The book's hand-timed loop (one :class:`~d2l_async.benchmark.Benchmark` per variant, as §13.2.3
    writes it): asynchronous beats synchronous, decided against the spread of repeated runs.

    Args:
        sync_s, async_s: seconds of each run of each loop (a number for one run, a sequence for several).
        ops: ops per loop (for the time per op in the words).
        machine: :func:`d2l_async.devices.machine` when the runs were made (for the reason).
        backend: where the loops ran, ``"engine"`` or ``"cuda"`` (a GPU's loop gets the GPU's reasons).

    Raises:
        ValueError: a non-positive op count or time.
    """
    from d2l_async import lesson
    from d2l_async.verdict import compare

    sync_runs = tuple(sync_s) if isinstance(sync_s, (tuple, list)) else (sync_s,)
    async_runs = tuple(async_s) if isinstance(async_s, (tuple, list)) else (async_s,)
    if isinstance(ops, bool) or not isinstance(ops, int) or ops < 1:
        raise ValueError(f"ops must be a positive int, got {ops!r}")
    if not sync_runs or not async_runs or min(sync_runs + async_runs) <= 0:
        raise ValueError(f"sync_s and async_s must be positive seconds, got {sync_s!r} and {async_s!r}")
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    if backend not in ("engine", "cuda"):
        raise ValueError(f"backend={backend!r}: use one of ('engine', 'cuda')")
    v = compare(sync_runs, async_runs, less=False, names=("synchronous", "asynchronous"))
    s, a = statistics.median(sync_runs), statistics.median(async_runs)
    runs = f"{len(sync_runs)} run(s) each" if len(sync_runs) == len(async_runs) else (
        f"{len(sync_runs)} and {len(async_runs)} runs")
    return lesson.check(
        "in the book's loop, asynchronous issue beats waiting after every op",
        v,
        shown=(f"{ops:,} ops, medians of {runs}: synchronous {fmt_time(s)} vs asynchronous {fmt_time(a)} "
               f"(synchronous / asynchronous = {v.ratio:.2f}; the book: {BOOK['sync_async.sync'].value:g} s vs "
               f"{BOOK['sync_async.async'].value:g} s, {BOOK['sync_async.ratio'].value:g})"),
        otherwise=cuda_why.why_book_loop(s, a, ops) if backend == "cuda" else (
                  f"the asynchronous loop took {fmt_time(a / ops)} per op against {fmt_time(s / ops)} with a wait "
                   f"after each, on {cpus_clause(machine)}: "
                   + ("the frontend and the worker had no CPU each, so the queued ops ran in the frontend's turns and "
                      "nothing overlapped" if few_cpus(machine, 2) else
                      "the CPUs were there, so what held the queued loop back is not on a wall clock")
                   + ". The next cell repeats both loops and reads their CPU clock to say how the time was shared."),
        unclear=cuda_why.why_book_loop(s, a, ops, unclear=True) if backend == "cuda" else (
                f"{runs} on {cpus_clause(machine)}: more runs (or a quieter machine) decide it; the next cell "
                 "repeats both loops and reads their CPU clock"),
    )


def _largest_ops(sweep: Any) -> list[Any]:
    most = max(p.ops for p in sweep.points)
    return sorted((p for p in sweep.points if p.ops == most), key=lambda p: p.numel)


def sweep_checks(sweep: Any) -> list[Any]:
    """Two checks at the largest op count swept, each decided from the whole series (Spearman's rank
    correlation over every size, :func:`d2l_async.verdict.trend`): the ratio falls as ops grow; t2
    takes over an op's cost (its share read from the backend's own clock, :func:`t2_share`: a claim about work).

    Where the sweep kept every round (``sweep.runs``), the trend is over every round's point -- each size
    once per round, its ties sharing their rank -- so one round's outlier at one size moves one point of
    many, not the size's only one; the numbers shown are the medians over the rounds."""
    from dataclasses import replace

    from d2l_async import lesson
    from d2l_async.verdict import trend

    pts = _largest_ops(sweep) if getattr(sweep, "points", ()) else []
    sizes = sorted({p.numel for p in pts})
    if len(sizes) < 4:
        # with 3 points even a perfectly monotone series has p = 1/6: no rank test can decide it
        why = "sweep at least four tensor sizes (the default numels sweep seven) to decide a trend"
        return [lesson.check("the advantage of asynchrony shrinks as the ops grow", None,
                             shown=f"only {len(sizes)} size(s) swept", unclear=why)]
    first, last = pts[0], pts[-1]
    ratios = ", ".join(f"{p.numel:,} el. {p.ratio:.2f}×" for p in pts)
    below = ""
    if last.ratio < 0.9:
        below = (f" (below 1 at {last.numel:,} elements: the asynchronous run was the slower one"
                 + _cpu_compare(last) + ")")
    most = pts[0].ops
    series = [p for p in getattr(sweep, "runs", ()) if p.ops == most] or pts  # every round's point, or the medians
    falls = trend([p.numel for p in series], [p.ratio for p in series], falling=True)
    cuda = getattr(sweep, "backend", "") == "cuda"  # the GPU's terms, not CPU clocks and wake-ups
    shrinks = lesson.check(
        "the advantage of asynchrony shrinks as the ops grow",
        falls,
        shown=f"sync / async at {first.ops:,} ops: {ratios}{below}; {falls.spread}",
        otherwise=cuda_why.why_ratio_rose(last) if cuda else (
                  f"{_against(pts, [p.ratio for p in pts], falling=True, fmt='{:.2f}×', what='the ratio')}; "
                  f"at {last.numel:,} elements t2 was {fmt_time(last.model.t2)} per op and t1 + t3 "
                  f"{fmt_time(last.model.t1 + last.model.t3)}{_cpu_compare(last)}; {cpus_clause(sweep.machine)}. "
                  "Microsecond timings are fragile on a busy machine: rerun, or sweep larger sizes."),
        unclear=cuda_why.why_ratio_rose(last, unclear=True) if cuda else (
                f"{_against(pts, [p.ratio for p in pts], falling=True, fmt='{:.2f}×', what='the ratio')}; timings on "
                f"{cpus_clause(sweep.machine)} scatter that much: more repeats or more sizes decide it"),
    )
    read = [t2_share(p, getattr(sweep, "backend", "engine")) for p in pts]
    shares = [sh for sh, _ in read]
    grows = trend([p.numel for p in series],
                  [t2_share(p, getattr(sweep, "backend", "engine"))[0] for p in series], falling=False)
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
        unclear=cuda_why.why_t2_share(pts, shares, unclear=True) if cuda else (
                _against(pts, shares, falling=False, fmt="{:.0%}", what="t2's share") + "; more repeats or larger "
                "sizes (10**7 elements) decide it"),
    )
    return [shrinks, takes_over]


def _against(pts: Any, values: list[float], *, falling: bool, fmt: str, what: str) -> str:
    """The steps of a series that went against the claimed direction, from its own numbers:
    ``"the ratio went up and down: it rose from 1 el. (7.79×) to 100 el. (8.63×)"``; when no step did,
    that it went the claimed way at every step but not beyond the spread."""
    steps = [(a, b, x, y) for a, b, x, y in zip(pts, pts[1:], values, values[1:]) if (y > x if falling else y < x)]
    if not steps:
        return f"{what} went the claimed way at every step, but not far enough beyond the spread"
    verb = "rose" if falling else "fell"
    return f"{what} went up and down: it {verb} " + ", and ".join(
        f"from {a.numel:,} el. ({fmt.format(x)}) to {b.numel:,} el. ({fmt.format(y)})" for a, b, x, y in steps)


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
        spread of one measurement: a factor of 2), the :func:`~d2l_async.verdict.compare` record, and
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

    # device work only: a CUDA capture's frontend cpu_ops are kind "op" too
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
