"""Scheduling overhead: what the bookkeeping of an asynchronous, parallel scheduler costs (D2L §13.2).

Every op the frontend issues is tracked: its dependencies, the queue it waits in, the thread that
runs it, the notification when it ends.  The book notes that a modern machine has 4 to 256 threads
to keep busy, which is why frameworks schedule asynchronously and in parallel, in C++.  Here the
per-op cost of a tiny op is measured as the engine's worker threads grow from 1 to 16: on a small
machine more threads mean more contention and context switches, not more speed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from d2l_async import config

from ._common import positive_int, positive_ints

__all__ = ["SchedulingResult", "run_scheduling"]


@dataclass(frozen=True)
class SchedulingResult:
    """Per-op cost of a tiny op as worker threads grow.

    Attributes:
        workers: worker-thread counts measured.
        per_op_seconds: median seconds per op (push to completion, amortized) for each count.
        ops: ops per measurement.
        raw: the engine's rows (:class:`d2l_async.engine.SchedulingOverhead`, raw runs in µs per op).
        cpu_count: logical CPUs of this machine (the overhead grows once threads exceed it).
        device, virtual: where it ran.
    """

    workers: tuple[int, ...]
    per_op_seconds: tuple[float, ...]
    ops: int
    raw: Any
    cpu_count: int
    device: str
    virtual: bool

    @property
    def growth(self) -> float:
        """Per-op cost at the most threads divided by the cost at the fewest."""
        return self.per_op_seconds[-1] / self.per_op_seconds[0]

    def rows(self) -> tuple[tuple[int, float], ...]:
        return tuple(zip(self.workers, self.per_op_seconds))


def run_scheduling(*, workers: tuple[int, ...] = (1, 2, 4, 8, 16), ops: int | None = None) -> SchedulingResult:
    """Measure the engine's per-op scheduling cost for each worker count.

    Args:
        workers: worker-thread counts (each 1..256).
        ops: tiny ops per measurement; default 5000 (quick mode 500).

    Raises:
        ValueError: bad counts.
    """
    import os

    workers = tuple(sorted(set(positive_ints("workers", workers, maximum=256))))
    ops = positive_int("ops", ops if ops is not None else config.scale(5000, 500), maximum=10_000_000)
    from d2l_async.engine import measure_scheduling_overhead

    raw = tuple(measure_scheduling_overhead(workers=workers, ops=ops, repeats=config.scale(3, 1)))
    per_op = _per_op(raw, workers)
    return SchedulingResult(workers, per_op, ops, raw, os.cpu_count() or 1,
                            f"CPU engine, 1 virtual device, {workers[0]}–{workers[-1]} worker threads", True)


def _per_op(raw: Any, workers: tuple[int, ...]) -> tuple[float, ...]:
    """Per-op seconds from the engine's rows (:class:`d2l_async.engine.SchedulingOverhead`, in µs)."""
    table = {r.workers: r.per_op_us * 1e-6 for r in raw}
    return tuple(table[w] for w in workers)
