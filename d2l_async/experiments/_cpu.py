"""Who used the CPU while a loop ran: the frontend thread, the engine's workers, and the wall clock.

A cost model like the book's ``t1 + n·t2 + t3`` assumes the frontend issues op ``i + 1`` *while* the
backend computes op ``i``: the two run side by side.  Whether they did is measurable without any
instrumentation inside the engine:

* ``frontend`` — CPU seconds of the calling (frontend) thread, :func:`time.thread_time`;
* ``process`` — CPU seconds of the whole process, :func:`time.process_time`; the engine's worker
  threads are the rest, ``backend = process - frontend`` (the process's other threads, e.g. a
  notebook kernel's heartbeat, add microseconds);
* ``wall`` — :func:`time.perf_counter`.

Then ``concurrency = (frontend + backend) / wall``: 2 means both sides ran the whole time side by
side, 1 that their CPU times add up to the wall time — they took turns (Python's interpreter lock
lets one thread run Python at a time; one usable CPU runs one thread at a time), below 1 that the
process also waited for a CPU it shared with something else.  ``overlap_share`` is the part of the
smaller side's CPU time that provably overlapped the other side: ``max(0, busy - wall) /
min(frontend, backend)``; the model's perfect overlap is 1.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

__all__ = ["CpuTimes", "CpuClock", "total"]


@dataclass(frozen=True)
class CpuTimes:
    """CPU and wall seconds of one timed region (or the sum of several).

    Attributes:
        wall: elapsed seconds.
        frontend: CPU seconds of the thread that ran the loop.
        process: CPU seconds of the whole process (frontend included).
    """

    wall: float
    frontend: float
    process: float

    def __post_init__(self) -> None:
        for name in ("wall", "frontend", "process"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise ValueError(f"CpuTimes.{name} must be seconds >= 0, got {v!r}")

    @property
    def backend(self) -> float:
        """CPU seconds of every other thread of the process: the engine's workers."""
        return max(0.0, self.process - self.frontend)

    @property
    def busy(self) -> float:
        """``frontend + backend``: CPU seconds the two sides used together."""
        return self.frontend + self.backend

    @property
    def concurrency(self) -> float:
        """``busy / wall``: 2 = side by side all along, 1 = one at a time, < 1 = waited for a CPU too."""
        return self.busy / self.wall if self.wall > 0 else 0.0

    @property
    def overlap(self) -> float:
        """Seconds during which both sides provably ran at once: ``max(0, busy - wall)``."""
        return max(0.0, self.busy - self.wall)

    @property
    def overlap_share(self) -> float:
        """Share of the smaller side's CPU time that overlapped the other side (the model assumes 1)."""
        smaller = min(self.frontend, self.backend)
        return min(1.0, self.overlap / smaller) if smaller > 0 else 0.0

    def divided(self, n: int) -> "CpuTimes":
        """The same times divided by ``n`` (>= 1): per run of a sum over runs, or per op."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        return CpuTimes(self.wall / n, self.frontend / n, self.process / n)


def total(times: Iterable[CpuTimes]) -> CpuTimes:
    """The sum of several regions (e.g. the repeats of a measurement)."""
    times = list(times)
    if not times:
        raise ValueError("total() needs at least one CpuTimes")
    return CpuTimes(sum(t.wall for t in times), sum(t.frontend for t in times), sum(t.process for t in times))


class CpuClock:
    """Measure a region: ``with CpuClock() as c: ...`` then ``c.times`` (a :class:`CpuTimes`).

    Run it on the frontend thread: ``frontend`` is the CPU time of the thread that enters it.
    """

    def __enter__(self) -> "CpuClock":
        self._start = (time.perf_counter(), time.thread_time(), time.process_time())
        self.times: CpuTimes | None = None
        return self

    def __exit__(self, *exc: object) -> None:
        w0, f0, p0 = self._start
        w, f, p = time.perf_counter() - w0, time.thread_time() - f0, time.process_time() - p0
        self.times = CpuTimes(max(w, 0.0), max(f, 0.0), max(p, f, 0.0))
