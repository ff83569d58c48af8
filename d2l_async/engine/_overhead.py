"""How the cost of scheduling grows with concurrency (the book: "bookkeeping grows with the
number of workers").

:func:`measure_scheduling_overhead` pushes many tiny ops (``y = x + 1`` on one element, so the
kernel costs almost nothing) to an engine with 1, 2, 4, ... workers on one device and reports the
all-in time per op: push, queue, wake-ups, lock traffic and the op itself.  More workers *can* mean
more threads competing for the lock and the GIL — whether the per-op cost rises is measured, not
assumed: on one usable CPU only one thread runs at a time, and the difference may stay inside the
noise.

Each run is timed twice: wall time per op (what a user waits) and CPU time per op of the whole
process, frontend and workers (:func:`time.process_time`).  On a shared machine the wall time also
counts the moments another program had the CPU; the CPU time does not, so it is the steadier
measure of the bookkeeping itself.  Runs are kept; summaries are medians and quantiles.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Sequence

import torch

from .._args import integer, sequence
from ._engine import make_engine

__all__ = ["SchedulingOverhead", "measure_scheduling_overhead", "quantiles"]


@dataclass(frozen=True)
class SchedulingOverhead:
    """Per-op cost of a tiny op with ``workers`` worker threads (median of ``runs``, in µs).

    Attributes:
        workers: worker threads on the one device.
        per_op_us: median wall µs per op.
        ops: ops per run.
        runs: wall µs per op of each run.
        cpu_runs: process CPU µs per op of each run (frontend and workers; empty if not measured).
        switch_runs: context switches of the process per op in each run (a thread went to sleep or
            was preempted; ``getrusage``; empty where the platform has no ``resource`` module).
    """

    workers: int
    per_op_us: float
    ops: int
    runs: tuple[float, ...]
    cpu_runs: tuple[float, ...] = ()
    switch_runs: tuple[float, ...] = ()

    @property
    def switches_per_op(self) -> float:
        """Median context switches per op (NaN when not measured)."""
        return statistics.median(self.switch_runs) if self.switch_runs else float("nan")

    @property
    def spread_us(self) -> float:
        """max - min of the runs (µs per op)."""
        return max(self.runs) - min(self.runs)

    @property
    def cpu_per_op_us(self) -> float:
        """Median CPU µs per op (NaN when not measured)."""
        return statistics.median(self.cpu_runs) if self.cpu_runs else float("nan")

    def quantiles(self, q: tuple[float, float] = (0.25, 0.75), *, cpu: bool = False) -> tuple[float, float]:
        """Low and high quantiles of the runs (linear interpolation; one run gives it twice)."""
        return quantiles(self.cpu_runs if cpu else self.runs, q)


def quantiles(values: Sequence[float], q: tuple[float, float] = (0.25, 0.75)) -> tuple[float, float]:
    """``(low, high)`` quantiles of ``values`` by linear interpolation (numpy's default method)."""
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("quantiles() needs at least one value")

    def at(p: float) -> float:
        if not 0 <= p <= 1:
            raise ValueError(f"quantile {p} is outside [0, 1]")
        pos = p * (len(xs) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    return at(q[0]), at(q[1])


def measure_scheduling_overhead(workers: Sequence[int] = (1, 2, 4, 8, 16), ops: int = 2000,
                                repeats: int = 3, record: bool = False) -> list[SchedulingOverhead]:
    """Time ``ops`` pushes of ``y = x + 1`` and one ``waitall``, per worker count.

    Args:
        workers: worker thread counts to try (one virtual device).
        ops: ops per run.
        repeats: runs per count; the median is reported, all runs are kept.
        record: record traces while measuring (off: measure the scheduler alone).

    Returns:
        One :class:`SchedulingOverhead` per worker count, in the order given.  The engines come
        from :func:`~d2l_async.engine.make_engine`: with ``D2L_ASYNC_ENGINE=naive`` every count
        runs on a naive engine (no worker threads at all), so the counts do not differ in kind.
    """
    counts = tuple(sequence("workers", workers, what="worker thread counts, e.g. (1, 2, 4)", empty=False))
    if any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in counts):
        raise ValueError(f"workers={workers!r}: pass positive ints, e.g. (1, 2, 4)")
    ops = integer("ops", ops, minimum=1)
    repeats = integer("repeats", repeats, minimum=1)
    out = []
    for w in counts:
        with make_engine(workers=w, devices=("cpu:0",), record=record) as eng:
            x = eng.array(torch.ones(1))
            for _ in range(min(ops, 200)):  # warm up: caches, thread start
                y = x + 1
            eng.waitall()
            runs, cpu_runs, switch_runs = [], [], []
            for _ in range(repeats):
                s0 = _switches()
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(ops):
                    y = x + 1
                eng.waitall()
                runs.append((time.perf_counter() - t0) / ops * 1e6)
                cpu_runs.append((time.process_time() - c0) / ops * 1e6)
                s1 = _switches()
                if s0 is not None and s1 is not None:
                    switch_runs.append((s1 - s0) / ops)
            del y
        out.append(SchedulingOverhead(w, statistics.median(runs), ops, tuple(runs), tuple(cpu_runs),
                                      tuple(switch_runs)))
    return out


def _switches() -> int | None:
    """Voluntary + involuntary context switches of the whole process so far (None: not available)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    u = resource.getrusage(resource.RUSAGE_SELF)
    return int(u.ru_nvcsw + u.ru_nivcsw)
