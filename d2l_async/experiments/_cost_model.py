"""The book's cost model of one op: ``t1`` (issue), ``t2`` (compute), ``t3`` (return) (D2L §13.2.3).

Synchronous: ``n·(t1 + t2 + t3)``.  Asynchronous: ``t1 + n·t2 + t3`` — *if* the backend is the
bottleneck (``t2 ≥ t1``); otherwise the pipeline runs at the frontend's pace,
``n·max(t1, t2) + min(t1, t2) + t3``.  Both asynchronous models assume the frontend and the backend
run *side by side*.  When they take turns instead (Python's interpreter lock, or one usable CPU),
the time is the sum, ``n·(t1 + t2) + t3`` (:attr:`CostModel.async_serial`); which one a run was
closer to is measured, not assumed (:mod:`d2l_async.experiments._cpu`).

:func:`backend_pace` estimates ``t2`` from a trace; :mod:`d2l_async.experiments.sync_async` explains
how ``t1`` and ``t3`` are estimated and runs the experiment.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

__all__ = ["MIN_BACKLOGGED_PAIRS", "CostModel", "backend_pace"]

@dataclass(frozen=True)
class CostModel:
    """The book's three per-op costs, estimated from a run (see the module docstring for how).

    Attributes:
        n: ops per run.
        t1: frontend issue time per op (s).
        t2: backend time per op (s): its pace while backlogged, or the op duration (see ``t2_source``).
        t3: return/wake-up time per op in the synchronous run (s).
        t2_source: ``"backend pace"`` (median start-to-start interval while the backend was
            backlogged) or ``"op duration"`` (the fallback: median op duration, when fewer than
            :data:`MIN_BACKLOGGED_PAIRS` backlogged pairs were recorded).
    """

    n: int
    t1: float
    t2: float
    t3: float
    t2_source: str = "backend pace"

    def __post_init__(self) -> None:
        if self.t2_source not in _T2_SOURCES:
            raise ValueError(f"t2_source must be one of {sorted(_T2_SOURCES)}, got {self.t2_source!r}")

    @property
    def sync(self) -> float:
        """The book's synchronous model ``n·(t1 + t2 + t3)``."""
        return self.n * (self.t1 + self.t2 + self.t3)

    @property
    def async_book(self) -> float:
        """The book's asynchronous model ``t1 + n·t2 + t3`` (backend-bound)."""
        return self.t1 + self.n * self.t2 + self.t3

    @property
    def async_pipeline(self) -> float:
        """``n·max(t1, t2) + min(t1, t2) + t3``: whichever side is slower sets the pace."""
        return self.n * max(self.t1, self.t2) + min(self.t1, self.t2) + self.t3

    @property
    def async_serial(self) -> float:
        """``n·(t1 + t2) + t3``: the two sides take turns instead of overlapping (one interpreter
        lock or one usable CPU), so issuing and computing add up."""
        return self.n * (self.t1 + self.t2) + self.t3

    @property
    def bottleneck(self) -> str:
        """``"frontend"`` when issuing an op costs more than the backend's time per op (``t1 > t2``),
        else ``"backend"`` (the backend falls behind and the queue of issued ops grows)."""
        return "frontend" if self.t1 > self.t2 else "backend"

    @property
    def method(self) -> str:
        """How the three costs were estimated, naming which ``t2`` this model used."""
        t2 = _T2_SOURCES[self.t2_source]
        return (f"t2 = {t2}; t1 = async frontend issue time / n; "
                "t3 = sync time / n - t1 - t2 (so the sync model fits by construction).")


#: Fewer backlogged op pairs than this and ``t2`` falls back to the median op duration.
MIN_BACKLOGGED_PAIRS = 10

_T2_SOURCES = {
    "backend pace": ("the backend's pace: median interval between consecutive op starts on a backend lane "
                     "while it was backlogged (next op issued before the previous ended)"),
    "op duration": (f"median backend op duration (fallback: fewer than {MIN_BACKLOGGED_PAIRS} backlogged op "
                    "pairs, so the backend's pace was not observable)"),
}


def backend_pace(trace: Any) -> tuple[float, str]:
    """Estimate ``t2`` from a trace: ``(seconds per op, source)``.

    On each backend lane, ops are taken in start order; a pair of consecutive ops counts when the
    second was issued before the first ended (the backend was backlogged), and its start-to-start
    interval is the backend's whole per-op cost, bookkeeping included.  With at least
    :data:`MIN_BACKLOGGED_PAIRS` such pairs the median interval is returned with source
    ``"backend pace"``; otherwise the median op duration with ``"op duration"`` (0.0 when the trace
    has no backend work).

    Raises:
        TypeError: ``trace`` is not a :class:`~d2l_async.trace.Trace`.
    """
    import numpy as np

    from d2l_async.trace import BACKEND_KINDS, Trace

    if not isinstance(trace, Trace):
        raise TypeError(f"backend_pace() expects a d2l_async.trace.Trace, got {type(trace).__name__}")
    back = [l.name for l in trace.backend_lanes]
    work = trace.where(kind=BACKEND_KINDS, lane=back) if back else trace.where(kind=BACKEND_KINDS)
    if not len(work):
        return 0.0, "op duration"
    intervals: list[float] = []
    for lane in np.unique(work["lane"].astype(str)):
        on = work["lane"] == lane
        order = np.argsort(work["start"][on], kind="stable")
        start, end, issue = work["start"][on][order], work["end"][on][order], work["issue"][on][order]
        backlogged = issue[1:] < end[:-1]  # NaN issue (unknown) compares False: not counted
        intervals.extend((start[1:] - start[:-1])[backlogged].tolist())
    if len(intervals) >= MIN_BACKLOGGED_PAIRS:
        return float(statistics.median(intervals)), "backend pace"
    return float(statistics.median((work["end"] - work["start"]).tolist())), "op duration"
