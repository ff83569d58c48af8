"""The book's cost model of one op: ``t1`` (issue), ``t2`` (compute), ``t3`` (return) (D2L §13.2.3).

Synchronous: ``n·(t1 + t2 + t3)``.  Asynchronous: ``t1 + n·t2 + t3`` — *if* the backend is the
bottleneck (``t2 ≥ t1``); otherwise the pipeline runs at the frontend's pace,
``n·max(t1, t2) + min(t1, t2) + t3``.  Both asynchronous models assume the frontend and the backend
run *side by side*.  When they take turns instead (Python's interpreter lock, or one usable CPU),
the time is the sum, ``n·(t1 + t2) + t3`` (:attr:`CostModel.async_serial`); which one a run was
closer to is measured, not assumed (:mod:`d2l_async.experiments._cpu`).

:func:`backend_pace` estimates ``t2`` from a trace; :mod:`d2l_async.experiments.sync_async` explains
how ``t1`` and ``t3`` are estimated and runs the experiment.

Each backend answers the lessons' questions about its two sides from its own clock, in one place:
:func:`side_costs` (each side's cost per op, hence which side is slower) and :func:`t2_share` (``t2``'s
share of an op's cost).  The engine's sides are threads, so the CPU clock measures both; a GPU's work
is seen by no CPU clock, so on CUDA both are read from the trace: the CPU's from the interval between
its launches, the GPU's from its kernels.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from d2l_async.verdict import Verdict, compare

from ._cuda_why import cpu_per_launch
from ._why import fmt_time

__all__ = ["DEVICE_GAP_S", "MIN_BACKLOGGED_PAIRS", "CostModel", "SideCosts", "backend_pace", "side_costs",
           "t2_share"]

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
        if not isinstance(self.t2_source, str) or self.t2_source not in _T2_SOURCES:
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
#: On a GPU, a kernel that starts within this long of the previous kernel's end on its stream followed it
#: straight away (back-to-back kernels are 1-8 µs apart on the shipped V100 and A100 traces).
DEVICE_GAP_S = 5e-6

_T2_SOURCES = {
    "backend pace": ("the backend's pace: median interval between consecutive op starts on a backend lane "
                     "while it was backlogged (engine: the next op issued before the previous ended; GPU: the "
                     f"next kernel started within {DEVICE_GAP_S * 1e6:g} µs of the previous one's end, its "
                     "launch having begun at least a launch latency before that end)"),
    "op duration": (f"median backend op duration (fallback: fewer than {MIN_BACKLOGGED_PAIRS} backlogged op "
                    "pairs, so the backend's pace was not observable)"),
}


def backend_pace(trace: Any) -> tuple[float, str]:
    """Estimate ``t2`` from a trace: ``(seconds per op, source)``.

    On each backend lane, ops are taken in start order and a pair of consecutive ops counts when the
    backend was backlogged, so that the second op's start-to-start interval is the backend's whole
    per-op cost, bookkeeping included:

    * on the engine's lanes (ops), when the second op was issued before the first ended: a push reaches
      the worker's queue at once;
    * on a GPU's lanes (kernels, copies, memsets), when the second started within :data:`DEVICE_GAP_S`
      of the first's end *and* its launch began at least the launch latency before that end.  A kernel
      starts on an idle GPU some 10-30 µs after its launch call begins, so "issued before the previous
      kernel ended" holds for kernels that never waited: 2 µs kernels launched every 8 µs would all count
      while the GPU idles three quarters of the time.  The launch latency is the median issue-to-start
      time of the pieces of work that found their lane idle (the first on each lane, and each that
      started over :data:`DEVICE_GAP_S` after the previous one ended).

    With at least :data:`MIN_BACKLOGGED_PAIRS` such pairs the median interval is returned with source
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
    lanes = []
    for lane in np.unique(work["lane"].astype(str)):
        on = work["lane"] == lane
        order = np.argsort(work["start"][on], kind="stable")
        lanes.append((work["start"][on][order], work["end"][on][order], work["issue"][on][order],
                      bool((work["kind"][on] != "op").all())))
    latency = _launch_latency([(s, e, i) for s, e, i, device in lanes if device])
    intervals: list[float] = []
    for start, end, issue, device in lanes:
        if device:  # NaN issue (unknown) compares False: not counted
            backlogged = (start[1:] - end[:-1] <= DEVICE_GAP_S) & (issue[1:] + latency <= end[:-1])
        else:
            backlogged = issue[1:] < end[:-1]
        intervals.extend((start[1:] - start[:-1])[backlogged].tolist())
    if len(intervals) >= MIN_BACKLOGGED_PAIRS:
        return float(statistics.median(intervals)), "backend pace"
    return float(statistics.median((work["end"] - work["start"]).tolist())), "op duration"


def _launch_latency(lanes: list[tuple[Any, Any, Any]]) -> float:
    """Median issue-to-start seconds of the device work that found its lane idle (0.0 when unknown)."""
    import numpy as np

    waits = []
    for start, end, issue in lanes:
        idle = np.ones(len(start), dtype=bool)
        idle[1:] = start[1:] - end[:-1] > DEVICE_GAP_S
        lat = (start - issue)[idle]
        waits.extend(lat[np.isfinite(lat)].tolist())
    return max(0.0, float(statistics.median(waits))) if waits else 0.0


# -- what each backend says about its two sides ------------------------------------------------------------
@dataclass(frozen=True)
class SideCosts:
    """Each side's cost per op in one asynchronous run, read from the clock that measures that side.

    The engine's two sides are threads on the CPU, so the CPU clock measures both (the frontend thread's
    CPU time, and the workers': :mod:`d2l_async.experiments._cpu`).  On CUDA the backend is the GPU, which
    no CPU clock sees: both sides are read from the traced run, the CPU's from the interval between its
    launches (:func:`~d2l_async.experiments._cuda_why.cpu_per_launch`), the GPU's from its kernels
    (:func:`backend_pace`).

    Attributes:
        backend: ``"engine"`` or ``"cuda"``.
        frontend_s: seconds per op on the frontend (engine: the frontend thread's CPU time per op; CUDA:
            the CPU's time per launch, waits left out).
        backend_s: seconds per op on the backend (engine: the workers' CPU time per op; CUDA: the GPU's
            time per kernel, its pace while backlogged or a kernel's duration).
        clock: how both were read (``"CPU per op"``, ``"wall-time model per op"`` or ``"trace per op"``).
        frontend_name, backend_name: what the two sides are called on this backend.
    """

    backend: str
    frontend_s: float
    backend_s: float
    clock: str
    frontend_name: str
    backend_name: str

    def verdict(self) -> Verdict:
        """:func:`~d2l_async.verdict.compare` of the backend's time per op against the frontend's (one number
        each, so decided beyond a factor of 2)."""
        return compare(self.backend_s, self.frontend_s, less=False)

    @property
    def slower(self) -> str | None:
        """``"backend"``, ``"frontend"``, or None when they are within the factor 2 one number each decides."""
        v = self.verdict()
        return "backend" if v.holds is True else "frontend" if v.holds is False else None

    def sentence(self) -> str:
        """``"CPU per op: frontend 12 µs, workers 30 µs"``."""
        return (f"{self.clock}: {self.frontend_name} {fmt_time(self.frontend_s)}, {self.backend_name} "
                f"{fmt_time(self.backend_s)}")

    def words(self) -> str:
        """The conclusion with the numbers that decided it, in that order: ``"backend slower (CPU per op:
        frontend 12.0 µs vs workers 30.0 µs)"``, or ``"neither side clearly slower (...: within the factor 2
        one measurement decides)"`` -- never beside another clock's numbers, which may say the other side."""
        side = self.slower
        if side is None:
            return f"neither side clearly slower ({self.sentence()}: within the factor 2 one measurement decides)"
        return f"{side} slower ({self.sentence()})"


def side_costs(r: Any) -> SideCosts:
    """:class:`SideCosts` of a :class:`~d2l_async.experiments.sync_async.SyncAsyncResult` (its backend's
    own clocks: the CPU clock for the engine, the traced run for CUDA)."""
    if getattr(r, "backend", "") == "cuda":
        per_launch, _, _ = cpu_per_launch(r.trace_async)
        gpu, _ = backend_pace(r.trace_async)
        if per_launch != per_launch:  # fewer than two launches traced: the issue loop's time per op instead
            return SideCosts("cuda", r.model.t1, gpu, "wall-time t1 and trace per op", "the CPU's launches",
                             "the GPU's kernels")
        return SideCosts("cuda", per_launch, gpu, "trace per op", "the CPU's launches", "the GPU's kernels")
    runs = max(1, len(getattr(r.async_, "raw", ()) or ()))
    cpu = r.cpu_async.divided(runs) if r.cpu_async is not None else None
    if cpu is None or cpu.frontend <= 0 or cpu.backend <= 0:
        return SideCosts("engine", r.model.t1, r.model.t2, "wall-time model per op", "frontend", "workers")
    return SideCosts("engine", cpu.frontend / r.ops, cpu.backend / r.ops, "CPU per op", "frontend", "workers")


def t2_share(p: Any, backend: str) -> tuple[float, str]:
    """``(t2's share of an op's synchronous cost, how it was read)`` at one sweep point.

    Engine: from the CPU clock of the synchronous runs when measured (the workers' CPU over the CPU of
    both sides: work, not the waits a busy machine adds to the wall clock), else from the wall-time
    model.  CUDA: from the model ``t2 / (t1 + t2 + t3)``, where ``t2`` is the GPU's time per kernel read
    from the trace (no CPU clock sees the GPU's work) and ``t1``, ``t3`` are the CPU's launch and the
    synchronize's round trip.
    """
    m = p.model
    whole = m.t1 + m.t2 + m.t3
    model = m.t2 / whole if whole > 0 else 0.0
    if backend == "cuda":
        return model, "the GPU's time per kernel over t1 + t2 + t3"
    c = p.cpu_sync
    if c is not None and c.busy > 0:
        return c.backend / c.busy, "CPU time of the synchronous runs: workers / (frontend + workers)"
    return model, "wall-time model t2 / (t1 + t2 + t3)"
