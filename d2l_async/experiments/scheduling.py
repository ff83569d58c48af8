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

from d2l_async import config, lesson
from d2l_async.verdict import compare, trend

from ._common import positive_int, positive_ints
from ._why import cpus_clause, fmt_time
from d2l_async._args import having

__all__ = ["GROWTH", "SchedulingResult", "run_scheduling", "checks", "growth_check"]

#: Kept for compatibility: growth is now decided by the trend over every run (``verdict.trend``), not
#: by this factor.
GROWTH = 1.1


@dataclass(frozen=True)
class SchedulingResult:
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


def checks(r: SchedulingResult) -> list[Any]:
    """Lesson checks (not displayed): scheduling costs more than the op; whether the cost grew."""
    having("r", r, ("raw", "workers"), what="a SchedulingResult")
    first = r.raw[0]
    # A claim about work: decided in CPU time on both sides, the engine's process CPU per op (frontend
    # and worker) against the eager op's thread CPU, every run a sample; the ratio as printed (engine / eager).
    if first.cpu_runs and r.eager_cpu_runs:
        engine_cpu = [u * 1e-6 for u in first.cpu_runs]
        costly = lesson.check(
            "scheduling an op costs more than running it (CPU time)",
            compare(engine_cpu, r.eager_cpu_runs, less=False, names=("engine", "eager")),
            shown=(f"CPU per op: engine with {first.workers} worker {fmt_time(statistics.median(engine_cpu))} (frontend "
                   f"and worker) vs eager PyTorch {fmt_time(r.eager_cpu_per_op_seconds)} "
                   f"(engine / eager = {statistics.median(engine_cpu) / r.eager_cpu_per_op_seconds:.2f}); wall time per op "
                   f"{fmt_time(r.per_op_seconds[0])} vs {fmt_time(r.eager_per_op_seconds)}"),
            otherwise=f"the eager op used more CPU than the whole engine round trip; {cpus_clause(r.machine)}: rerun",
            unclear=f"the runs of the two overlap in CPU time per op; {cpus_clause(r.machine)}: more repeats decide it",
        )
    else:
        costly = lesson.check(
            "scheduling an op costs more than running it (wall time)",
            compare(r.per_op_seconds[0], r.eager_per_op_seconds, less=False, names=("engine", "eager")),
            shown=(f"engine with {first.workers} worker: {fmt_time(r.per_op_seconds[0])} per op vs eager PyTorch "
                   f"{fmt_time(r.eager_per_op_seconds)} (wall time; the CPU clock was not read)"),
            otherwise=f"the eager op measured slower than the whole engine round trip; {cpus_clause(r.machine)}: rerun",
        )
    if len(r.raw) < 2:
        return [costly, lesson.check("the per-op cost grows with more worker threads", None,
                                     shown=f"only {first.workers} worker(s) measured",
                                     unclear="measure at least two worker counts, e.g. workers=(1, 16)")]
    return [costly, growth_check(r)]


def growth_check(r: SchedulingResult) -> Any:
    """Whether the per-op cost grows with the worker threads, decided by the one rule for "grows" of the
    book's notebooks: Spearman's rank correlation over *every run* at every worker count
    (:func:`d2l_async.verdict.trend`; ✔ grew, ✘ fell, can't tell when the runs do not move one way beyond
    their scatter), not from the two end points."""
    having("r", r, ("raw", "workers"), what="a SchedulingResult")
    lo, hi = r.raw[0], r.raw[-1]
    cpu = all(x.cpu_runs for x in r.raw)
    what = "CPU time" if cpu else "wall time"
    g = r.cpu_growth if cpu else r.growth
    lo_band, hi_band = lo.quantiles(cpu=cpu), hi.quantiles(cpu=cpu)
    med_lo = lo.cpu_per_op_us if cpu else lo.per_op_us
    med_hi = hi.cpu_per_op_us if cpu else hi.per_op_us
    xs = [x.workers for x in r.raw for _ in (x.cpu_runs if cpu else x.runs)]
    ys = [u for x in r.raw for u in (x.cpu_runs if cpu else x.runs)]
    verdict = trend(xs, ys, falling=False)  # the per-op cost rises with the workers, over every run
    shown = (f"{what} per op {med_lo:.3g} µs with {lo.workers} worker (quartiles {lo_band[0]:.3g}–{lo_band[1]:.3g}) → "
             f"{med_hi:.3g} µs with {hi.workers} ({hi_band[0]:.3g}–{hi_band[1]:.3g}): ×{g:.2f}, "
             f"{len(lo.runs)} runs of {r.ops:,} ops each; wall time ×{r.growth:.2f} (the wall clock also counts "
             "waits for a CPU and for a wake-up)")
    m = r.machine
    switches = ""
    if lo.switch_runs and hi.switch_runs:
        switches = (f"; the process made {lo.switches_per_op:.2f} context switches per op with {lo.workers} worker "
                    f"and {hi.switches_per_op:.2f} with {hi.workers} (each a thread put to sleep or preempted, "
                    "paid for in CPU time)")
    if verdict.holds is False:
        movement = f"it fell over the {len(r.raw)} worker counts (×{g:.2f} end to end, beyond the scatter of the runs)"
    else:
        movement = (f"over the {len(r.raw)} worker counts the runs do not move one way: the change is inside the "
                    "spread of the runs")
    if m is not None and float(m.usable_cpus) < 2:
        reason = (f"with {cpus_clause(m)}, one thread runs at a time: the extra workers sleep on the queue "
                  "instead of contending for its lock, so there is little contention to pay for")
    elif m is not None and float(m.spare_cpus) < 1:
        reason = (f"the CPUs were busy with other work ({cpus_clause(m)}): the threads ran in whatever slices "
                  "the other programs left them, so how often they slept and woke varied from run to run")
    else:
        reason = (f"on {cpus_clause(m)}, one device queue and Python's interpreter lock let about one "
                  "worker run at a time however many there are")
    meds = r.cpu_per_op_seconds if cpu else r.per_op_seconds
    shown += "; medians by count: " + ", ".join(f"{w}: {s * 1e6:.3g}" for w, s in zip(r.workers, meds)) + " µs"
    why = (f"{movement}{switches}; {reason}. More ops per run and more repeats (the sliders) narrow the spread; "
           "a machine with more free cores lets the threads contend.")
    return lesson.check(
        f"the per-op cost grows from {lo.workers} to {hi.workers} worker threads", verdict, shown=shown,
        otherwise=why, unclear=why,
    )
