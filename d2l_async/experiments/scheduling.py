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

from ._common import engine_label, positive_int, positive_ints

__all__ = ["SchedulingResult", "run_scheduling"]


@dataclass(frozen=True)
class SchedulingResult:
    """Per-op cost of a tiny op as worker threads grow.

    Attributes:
        workers: worker-thread counts measured.
        per_op_seconds: median seconds per op (push to completion, amortized) for each count.
        ops: ops per measurement.
        raw: whatever :func:`d2l_async.engine.measure_scheduling_overhead` returned.
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

    raw = measure_scheduling_overhead(workers=workers, ops=ops)
    per_op = _per_op(raw, workers)
    return SchedulingResult(workers, per_op, ops, raw, os.cpu_count() or 1,
                            f"CPU engine, 1 virtual device, {workers[0]}–{workers[-1]} worker threads", True)


def _per_op(raw: Any, workers: tuple[int, ...]) -> tuple[float, ...]:
    """Pull per-op seconds out of the engine's table, whatever its shape (frame, mapping, rows)."""
    if hasattr(raw, "columns") and hasattr(raw, "to_dict"):  # a pandas DataFrame
        cols = [c for c in raw.columns if "per_op" in str(c) or "seconds" in str(c)]
        if "workers" in raw.columns and cols:
            table = dict(zip(raw["workers"].tolist(), raw[cols[0]].tolist()))
            return tuple(float(table[w]) for w in workers)
    if isinstance(raw, dict):
        return tuple(float(getattr(raw[w], "median", raw[w])) for w in workers)
    rows = list(raw)
    if len(rows) == len(workers):
        out = []
        for r in rows:
            for name in ("per_op_seconds", "per_op", "seconds", "median"):
                if hasattr(r, name):
                    out.append(float(getattr(r, name)))
                    break
            else:
                out.append(float(r[1] if isinstance(r, tuple) else r))
        return tuple(out)
    raise TypeError(f"cannot read per-op times from {type(raw).__name__}")
