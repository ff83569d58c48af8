"""How the cost of scheduling grows with concurrency (the book: "bookkeeping grows with the
number of workers").

:func:`measure_scheduling_overhead` pushes many tiny ops (``y = x + 1`` on one element, so the
kernel costs almost nothing) to an engine with 1, 2, 4, ... workers on one device and reports the
all-in time per op: push, queue, wake-ups, lock traffic and the op itself.  More workers means more
threads competing for the lock and the GIL, so the per-op cost rises even though no op got slower.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Sequence

import torch

from ._engine import ThreadedEngine

__all__ = ["SchedulingOverhead", "measure_scheduling_overhead"]


@dataclass(frozen=True)
class SchedulingOverhead:
    """Per-op cost of a tiny op with ``workers`` worker threads (median of ``runs``, in µs)."""

    workers: int
    per_op_us: float
    ops: int
    runs: tuple[float, ...]

    @property
    def spread_us(self) -> float:
        """max - min of the runs (µs per op)."""
        return max(self.runs) - min(self.runs)


def measure_scheduling_overhead(workers: Sequence[int] = (1, 2, 4, 8, 16), ops: int = 2000,
                                repeats: int = 3, record: bool = False) -> list[SchedulingOverhead]:
    """Time ``ops`` pushes of ``y = x + 1`` and one ``waitall``, per worker count.

    Args:
        workers: worker thread counts to try (one virtual device).
        ops: ops per run.
        repeats: runs per count; the median is reported, all runs are kept.
        record: record traces while measuring (off: measure the scheduler alone).
    """
    counts = tuple(workers)
    if not counts or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in counts):
        raise ValueError(f"workers={workers!r}: pass positive ints, e.g. (1, 2, 4)")
    if ops < 1 or repeats < 1:
        raise ValueError(f"ops={ops}, repeats={repeats}: both must be positive")
    out = []
    for w in counts:
        with ThreadedEngine(workers=w, devices=("cpu:0",), record=record) as eng:
            x = eng.array(torch.ones(1))
            for _ in range(min(ops, 200)):  # warm up: caches, thread start
                y = x + 1
            eng.waitall()
            runs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(ops):
                    y = x + 1
                eng.waitall()
                runs.append((time.perf_counter() - t0) / ops * 1e6)
            del y
        out.append(SchedulingOverhead(w, statistics.median(runs), ops, tuple(runs)))
    return out
