"""Scheduling overhead: what the bookkeeping of an asynchronous, parallel scheduler costs (D2L §13.2).

Every op the frontend issues is tracked: its dependencies, the queue it waits in, the thread that
runs it, the notification when it ends.  The book notes that a modern machine has 4 to 256 threads
to keep busy, which is why frameworks schedule asynchronously and in parallel, in C++.  Here the
per-op cost of a tiny op is measured as the engine's worker threads grow from 1 to 16, each run
timed in wall time and in the process's CPU time (:mod:`d2l_async.engine._overhead`).

Whether the cost *grows* with the threads is a measurement, not a promise: extra threads add lock
traffic, wake-ups and interpreter-lock hand-offs only when they get to run, and on one usable CPU
they mostly sleep.  :meth:`SchedulingResult.lessons` states the growth only where it is larger than the
scatter of the runs (:func:`d2l_async.verdict.trend`: Spearman's rank correlation over every run at
every worker count, the same rule as notebook 5's "shrinks"), says "can't tell" inside it, with the reason from the machine (usable CPUs, other work on them), and
compares the scheduler with eager PyTorch in CPU time on both sides (a claim about work).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from d2l_async import claims, config, lesson
from d2l_async.verdict import compare, trend

from ._common import positive_int, positive_ints
from ._show import Displayed, ran_on
from ._why import cpu_cause, fmt_time
from d2l_async._args import having

__all__ = ["GROWTH", "SchedulingResult", "run_scheduling", "checks", "growth_check", "COSTS_MORE", "GROWS"]

#: Kept for compatibility: growth is now decided by the trend over every run (``verdict.trend``), not
#: by this factor.
GROWTH = 1.1


@dataclass(frozen=True)
class SchedulingResult(Displayed):
    """Per-op cost of a tiny op as worker threads grow.

    Attributes:
        workers: worker-thread counts measured.
        per_op_seconds: median wall seconds per op (push to completion, amortized) for each count.
        ops: ops per measurement.
        raw: the engine's rows (:class:`d2l_async.engine.SchedulingOverhead`: runs in µs per op, wall
            and CPU).
        cpu_count: usable CPUs, rounded down (affinity and cgroup quota; at least 1).
        device, virtual: where it ran.
        cpu_per_op_seconds: median process CPU seconds per op for each count.
        eager_per_op_seconds: the same op run directly by PyTorch (no scheduler): median wall seconds.
        machine: :func:`d2l_async.devices.machine` when the run started.
        eager_cpu_runs: CPU seconds per op of each eager run (the calling thread: the only one working).
    """

    workers: tuple[int, ...]
    per_op_seconds: tuple[float, ...]
    ops: int
    raw: Any
    cpu_count: int
    device: str
    virtual: bool
    cpu_per_op_seconds: tuple[float, ...] = ()
    eager_per_op_seconds: float = float("nan")
    machine: Any = None
    eager_cpu_runs: tuple[float, ...] = ()

    @property
    def eager_cpu_per_op_seconds(self) -> float:
        """Median CPU seconds per eager op (NaN when not measured)."""
        return statistics.median(self.eager_cpu_runs) if self.eager_cpu_runs else float("nan")

    @property
    def growth(self) -> float:
        """Median wall cost per op at the most threads divided by the cost at the fewest."""
        return self.per_op_seconds[-1] / self.per_op_seconds[0]

    @property
    def cpu_growth(self) -> float:
        """The same for the CPU time per op (NaN when not measured)."""
        c = self.cpu_per_op_seconds
        return c[-1] / c[0] if len(c) >= 2 and c[0] > 0 else float("nan")

    def rows(self) -> tuple[tuple[int, float], ...]:
        return tuple(zip(self.workers, self.per_op_seconds))

    def figure_rows(self) -> list[dict[str, Any]]:
        """Rows for :func:`d2l_async.viz.plot_scheduling_overhead`: wall and CPU µs per op, each run kept."""
        out = []
        for r in self.raw:
            out.append({"workers": r.workers, "per_op_us": r.per_op_us, "runs": tuple(r.runs),
                        "label": "wall time per op"})
            if r.cpu_runs:
                out.append({"workers": r.workers, "per_op_us": statistics.median(r.cpu_runs),
                            "runs": tuple(r.cpu_runs), "label": "CPU time per op (all threads)"})
        return out

    def lessons(self) -> list[Any]:
        """Lesson checks (not displayed): :func:`checks` of this result."""
        return checks(self)

    def checks(self) -> list[Any]:
        """The checks of this run's claims (:func:`checks`)."""
        return checks(self)

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        cpu = bool(self.cpu_per_op_seconds)
        rows = [(f"{w} worker thread(s)", f"{fmt_time(s)} per op" + (f" ({fmt_time(c)} of CPU)" if cpu else ""))
                for w, s, c in zip(self.workers, self.per_op_seconds, self.cpu_per_op_seconds or self.per_op_seconds)]
        rows.append(("eager PyTorch, no scheduler", f"{fmt_time(self.eager_per_op_seconds)} per op"
                     + (f" ({fmt_time(self.eager_cpu_per_op_seconds)} of CPU)" if self.eager_cpu_runs else "")))
        return (f"{ran_on(self.device, self.virtual)}; {self.ops:,} ops per run, medians of {len(self.raw[0].runs)} "
                "runs (wall time, and CPU time of every thread)", rows)


def run_scheduling(*, workers: tuple[int, ...] = (1, 2, 4, 8, 16), ops: int | None = None,
                   repeats: int | None = None) -> SchedulingResult:
    """Measure the engine's per-op scheduling cost for each worker count.

    Args:
        workers: worker-thread counts (each 1..256).
        ops: tiny ops per measurement; default 5000 (quick mode 500).
        repeats: runs per worker count; default 5 (quick mode 3): quantiles need a few.

    Returns:
        The frozen :class:`SchedulingResult`: the worker counts (sorted, distinct), the median wall seconds per op
        for each (and per CPU second, when every run measured CPU time, else ``()``), the raw measurements, the
        usable CPU count, the label, eager PyTorch's median seconds per op and CPU runs, and the
        :class:`~d2l_async.devices.Machine`.

    Raises:
        ValueError: bad counts.
    """
    workers = tuple(sorted(set(positive_ints("workers", workers, maximum=256))))
    ops = positive_int("ops", ops if ops is not None else config.scale(5000, 500), maximum=10_000_000)
    repeats = positive_int("repeats", repeats if repeats is not None else config.scale(5, 3), maximum=100)
    import torch

    from d2l_async.devices import machine
    from d2l_async.engine import measure_scheduling_overhead

    here = machine()
    raw = tuple(measure_scheduling_overhead(workers=workers, ops=ops, repeats=repeats))
    table = {r.workers: r for r in raw}
    per_op = tuple(table[w].per_op_us * 1e-6 for w in workers)
    cpu = tuple(table[w].cpu_per_op_us * 1e-6 for w in workers) if all(r.cpu_runs for r in raw) else ()
    x = torch.ones(1)
    eager_wall, eager_cpu = _eager_runs(lambda: x + 1, number=min(ops, 2000), repeats=repeats)
    return SchedulingResult(workers, per_op, ops, raw, max(1, int(here.usable_cpus)),
                            f"CPU engine, 1 virtual device, {workers[0]}–{workers[-1]} worker threads", True,
                            cpu, statistics.median(eager_wall), here, eager_cpu)


def _eager_runs(fn: Any, *, number: int, repeats: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds per call of ``fn`` in each of ``repeats`` runs (collector off, as the engine's)."""
    from ._common import no_collector_pauses

    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        with no_collector_pauses():
            w0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(number):
                fn()
            c1, w1 = time.thread_time(), time.perf_counter()
        wall.append((w1 - w0) / number)
        cpu.append((c1 - c0) / number)
    return wall, cpu


COSTS_MORE = claims.claim(
    "08.costs-more", notebooks=("08_scheduling_overhead",),
    sentence="scheduling an op costs more than running it ({clock})",
    book="§13.2.3: the overhead of scheduling operations can become significant",
    quantity="the engine's CPU time per op (frontend and worker) / eager PyTorch's, every run",
    rule="compare: the interval wholly above 1")
GROWS = claims.claim(
    "08.grows", notebooks=("08_scheduling_overhead",),
    sentence="the per-op cost grows from {lo} to {hi} workers",
    book="§13.2.3: on a heavily multithreaded system the overhead of scheduling can become significant",
    quantity="CPU time per op of every run at every worker count",
    rule="trend: Spearman's rank correlation with the worker count, one-sided p < 0.05")


def checks(r: SchedulingResult) -> list[Any]:
    """Lesson checks (not displayed): scheduling costs more than the op; whether the cost grew.

    Returns:
        The checks of :data:`COSTS_MORE` and :data:`GROWS`.
    """
    having("r", r, ("raw", "workers"), what="a SchedulingResult")
    first = r.raw[0]
    # A claim about work: decided in CPU time on both sides, the engine's process CPU per op (frontend
    # and worker) against the eager op's thread CPU, every run a sample; the ratio as printed (engine / eager).
    cpu = bool(first.cpu_runs and r.eager_cpu_runs)
    v = (compare([u * 1e-6 for u in first.cpu_runs], r.eager_cpu_runs, less=False, names=("engine", "eager")) if cpu
         else compare(r.per_op_seconds[0], r.eager_per_op_seconds, less=False, names=("engine", "eager")))
    runs = {"runs": f"{v.n_a} vs {v.n_b} runs"}
    cause, facts = (lesson.Cause.SPREAD, runs) if v.holds is None else (lesson.Cause.OTHER_WAY, runs)
    costly = COSTS_MORE.check(v, cause=cause, facts={**facts, "clock": "CPU time" if cpu else "wall time"},
                              detail=f"wall time per op {fmt_time(r.per_op_seconds[0])} vs "
                                     f"{fmt_time(r.eager_per_op_seconds)}")
    if len(r.raw) < 2:
        return [costly, GROWS.check(None, cause=lesson.Cause.MISSING, shown=f"only {first.workers} worker(s) measured",
                                    facts={"lo": first.workers, "hi": first.workers,
                                           "missing": "measure at least two worker counts, e.g. workers=(1, 16)"})]
    return [costly, growth_check(r)]


def growth_check(r: SchedulingResult) -> Any:
    """Whether the per-op cost grows with the worker threads, decided by the one rule for "grows" of the
    book's notebooks: Spearman's rank correlation over *every run* at every worker count
    (:func:`d2l_async.verdict.trend`; ✔ grew, ✘ fell, can't tell when the runs do not move one way beyond
    their scatter), not from the two end points.

    Returns:
        The check of :data:`GROWS`.
    """
    having("r", r, ("raw", "workers"), what="a SchedulingResult")
    lo, hi = r.raw[0], r.raw[-1]
    cpu = all(x.cpu_runs for x in r.raw)
    xs = [x.workers for x in r.raw for _ in (x.cpu_runs if cpu else x.runs)]
    ys = [u for x in r.raw for u in (x.cpu_runs if cpu else x.runs)]
    verdict = trend(xs, ys, falling=False)  # the per-op cost rises with the workers, over every run
    m = r.machine
    if verdict.holds is None and m is not None and float(m.usable_cpus) >= 2 and float(m.spare_cpus) >= 1:
        cause, facts = lesson.Cause.SPREAD, {"runs": f"{len(ys)} runs"}
    elif verdict.holds is None or verdict.holds is False:
        # one thread at a time, whatever the count: the extra workers sleep instead of contending
        cause, facts = cpu_cause(m, f"{hi.workers} worker threads")
        if cause is lesson.Cause.INTERPRETER_LOCK and verdict.holds is None:
            cause, facts = lesson.Cause.SPREAD, {"runs": f"{len(ys)} runs"}
    else:
        cause, facts = lesson.Cause.SPREAD, {"runs": f"{len(ys)} runs"}
    meds = r.cpu_per_op_seconds if cpu else r.per_op_seconds
    return GROWS.check(verdict, cause=cause, facts={**facts, "lo": lo.workers, "hi": hi.workers,
                                                    "trend_of": "the cost"},
                       detail=f"{'CPU' if cpu else 'wall'} time per op, medians by count: "
                              + ", ".join(f"{w}: {fmt_time(s)}" for w, s in zip(r.workers, meds)))


# ---------------------------------------------------------------- what makes each claim false
def _example(cpu_us: dict[int, list[float]], eager_cpu_us: list[float], machine: Any = None) -> SchedulingResult:
    """A synthetic sweep: CPU µs per op of each run at each worker count (wall the same)."""
    from d2l_async.engine import SchedulingOverhead

    raw = tuple(SchedulingOverhead(w, statistics.median(us), 1000, tuple(us), tuple(us)) for w, us in cpu_us.items())
    return SchedulingResult(tuple(cpu_us), tuple(statistics.median(us) * 1e-6 for us in cpu_us.values()), 1000, raw, 2,
                            "example", True, tuple(statistics.median(us) * 1e-6 for us in cpu_us.values()),
                            statistics.median(eager_cpu_us) * 1e-6, machine, tuple(u * 1e-6 for u in eager_cpu_us))


def _register() -> None:
    from ._why import example_machine

    busy, spare = example_machine(1, 0), example_machine(4, 4)
    flat = {1: [10.0, 10.5, 9.5], 2: [10.2, 9.8, 10.1], 4: [9.9, 10.3, 10.0], 8: [10.1, 9.7, 10.2]}
    falling = {1: [14.0, 14.5, 13.5], 2: [12.2, 12.8, 12.1], 4: [11.0, 11.3, 10.8], 8: [9.1, 9.7, 9.2]}
    claims.falsifier(COSTS_MORE, "the engine's op as cheap as eager's",
                     lambda: checks(_example(flat, [10.0, 10.2, 9.9], spare))[0])
    claims.counterfactual(COSTS_MORE, "engine and eager runs that overlap", lesson.Cause.SPREAD,
                          lambda: checks(_example(flat, [7.0, 10.2, 12.9], spare))[0])
    claims.counterfactual(COSTS_MORE, "eager dearer beyond the spread", lesson.Cause.OTHER_WAY,
                          lambda: checks(_example(flat, [20.0, 20.2, 19.9], busy))[0])
    claims.falsifier(GROWS, "a flat cost", lambda: checks(_example(flat, [1.0, 1.1, 0.9], spare))[1])
    claims.falsifier(GROWS, "a falling cost", lambda: checks(_example(falling, [1.0, 1.1, 0.9], spare))[1])
    claims.counterfactual(GROWS, "a flat cost on one busy CPU", lesson.Cause.NO_SPARE_CPU,
                          lambda: checks(_example(flat, [1.0, 1.1, 0.9], busy))[1])
    claims.counterfactual(GROWS, "a flat cost on four spare CPUs", lesson.Cause.SPREAD,
                          lambda: checks(_example(flat, [1.0, 1.1, 0.9], spare))[1])


_register()
