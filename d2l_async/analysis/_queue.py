"""Launch-queue length: how much work the frontend has issued that a backend lane has not started.

This is the number the chapter's argument turns on: while it is above zero the frontend is ahead
of the backend, and the two run concurrently.  The definition is HolisticTraceAnalysis's::

    queue(t) = #(work issued to the lane at or before t) - #(work started on it at or before t)

so each issue adds one and each start removes one (``in_flight=True`` removes at the end instead,
counting running work too).  The series has one row per change, like HTA's: several rows may share
a time, the last one holds.

HTA's defaults, reproduced: work *launched* in the last ``ProfilerStep`` of a trace with two
steps or more is left out (``include_last_profiler_step=False``: the recording may have cut that
step short; pass ``True`` to count the whole file; on ROCm the last step begins where the GPU's
copy of it does, as HTA reads it), and only launch calls fill the queue.  At equal times an issue
comes before a start, on every machine (:func:`d2l_async.trace.queue_steps`).

Parity with HTA 0.5.0, per rank and stream, for what HTA itself decides independently of the CPU
it runs on: ``count``, and the queue length as a function of time.  HTA orders rows of equal whole
microseconds with numpy's unstable quicksort, whose SIMD kernel (AVX-512, AVX2, baseline) differs
between CPUs, so its ``max`` and ``mean`` (over change points) move with the machine wherever a
launch and a start share a microsecond: the ``hta_ties`` column counts those instants per lane.
Where it is 0, ``max`` and ``mean`` equal HTA's too; elsewhere HTA's lie between the two extreme
orders (``queue_steps(..., hta_order=...)``).  ``tests/trace/test_hta_oracle.py`` holds this on
every trace the tests carry (2021 Kineto, ROCm with several steps, MTIA, multi-rank NCCL, Triton,
multi-step training steps) against numbers recorded on one CPU and against HTA run live.  One
difference on purpose: a launch is a launch whichever API made it (``cuLaunchKernelEx``, ROCm's
``hipModuleLaunchKernel``, graph launches: :data:`d2l_async.trace.LAUNCH_CALLS`), and HTA 0.5.0
counts fewer of them, so its ``count`` is lower by two per such launch
(``trace.meta["launches_not_in_hta"]`` says how many a trace has).  The time-weighted mean and the
time spent at the maximum are what a figure should show, since they weigh each level by how long
it lasted.  The step function itself is :func:`d2l_async.trace.queue_steps`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Trace, hta_ties, queue_steps, queued_mask
from ._common import backend_lane, check_trace

__all__ = ["queue_length_series", "queue_length_summary", "SUMMARY_COLUMNS"]

SERIES_COLUMNS = ("time", "lane", "stream", "queue_length")
#: columns of :func:`queue_length_summary`
SUMMARY_COLUMNS = ("lane", "device", "stream", "count", "mean", "max", "time_weighted_mean",
                   "time_at_max", "fraction_at_max", "span", "hta_ties")


def queue_length_series(trace: Trace, lane: str | None = None, *, in_flight: bool = False,
                        include_last_profiler_step: bool = False) -> pd.DataFrame:
    """The queue length of each backend lane as a step series.

    Args:
        trace: any trace (engine recording, CUDA capture, profiler file).
        lane: one backend lane's name; ``None`` for all of them, in lane order.
        in_flight: count work from issue until it *ends* (queued plus running) instead of until it
            starts.
        include_last_profiler_step: also count work launched in the last ``ProfilerStep`` of a
            multi-step trace (HTA's default, ``False``, leaves it out).

    Returns:
        A DataFrame with columns ``time`` (seconds), ``lane``, ``stream`` and ``queue_length``:
        one row per issue and per start, sorted by time within each lane.  Empty, with the same
        columns, when the trace has no backend work with known issue times.
    """
    check_trace(trace)
    lanes = [backend_lane(trace, lane)] if lane is not None else list(trace.backend_lanes)
    mask = queued_mask(trace, include_last_profiler_step=_flag(include_last_profiler_step))
    parts = []
    for ln in lanes:
        t, q = queue_steps(trace, ln.name, in_flight=in_flight, mask=mask)
        if len(t):
            parts.append(pd.DataFrame({"time": t, "lane": ln.name, "stream": ln.stream, "queue_length": q}))
    if not parts:
        return _empty_series()
    return pd.concat(parts, ignore_index=True)


def _empty_series() -> pd.DataFrame:
    return pd.DataFrame({"time": np.zeros(0), "lane": np.zeros(0, dtype=object),
                         "stream": np.zeros(0, dtype=np.int64), "queue_length": np.zeros(0, dtype=np.int64)})


def _flag(value: object) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"include_last_profiler_step must be True or False, got {value!r}")
    return bool(value)


def queue_length_summary(trace: Trace, *, in_flight: bool = False,
                         include_last_profiler_step: bool = False) -> pd.DataFrame:
    """Queue-length statistics, one row per backend lane that had queued work.

    Columns: ``lane``, ``device``, ``stream``; ``count`` (change points), ``mean`` (over change
    points, HTA's ``mean``) and ``max``; ``time_weighted_mean`` (each level weighted by how long it
    held, from the first change to the last); ``time_at_max`` (seconds at the maximum) and
    ``fraction_at_max`` (of ``span``); ``span`` (seconds from the first change to the last);
    ``hta_ties``: the whole microseconds at which the lane has both a launch and a start on HTA's
    clock (:func:`d2l_async.trace.hta_ties`; it describes HTA's queue, so ``in_flight`` leaves it as
    is): 0 means HTA 0.5.0 gives this ``count``, ``max`` and ``mean`` on any machine, more means its
    ``max`` and ``mean`` depend on numpy's sort kernel there (its ``count`` does not).

    ``include_last_profiler_step``: as in :func:`queue_length_series` (HTA's default: ``False``).
    A trace without backend work (a CPU-only profile) gives an empty frame with these columns.

    Returns:
        A pandas DataFrame with the columns above, one row per backend lane with queued work, in the trace's lane
        order.
    """
    check_trace(trace)
    mask = queued_mask(trace, include_last_profiler_step=_flag(include_last_profiler_step))
    ties = hta_ties(trace, mask)
    rows = []
    for ln in trace.backend_lanes:
        t, q = queue_steps(trace, ln.name, in_flight=in_flight, mask=mask)
        if not len(t):
            continue
        rows.append({"lane": ln.name, "device": ln.device, "stream": ln.stream, **_stats(t, q),
                     "hta_ties": ties[ln.name]})
    if not rows:
        return pd.DataFrame({
            "lane": np.zeros(0, dtype=object), "device": np.zeros(0, dtype=object),
            "stream": np.zeros(0, dtype=np.int64), "count": np.zeros(0, dtype=np.int64),
            "mean": np.zeros(0), "max": np.zeros(0, dtype=np.int64), "time_weighted_mean": np.zeros(0),
            "time_at_max": np.zeros(0), "fraction_at_max": np.zeros(0), "span": np.zeros(0),
            "hta_ties": np.zeros(0, dtype=np.int64)})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def _stats(t: np.ndarray, q: np.ndarray) -> dict:
    dt = np.diff(t)  # how long each row's value held; rows sharing a time hold for 0 s
    held = q[:-1]
    span = float(t[-1] - t[0])
    qmax = int(q.max())
    twm = float((held * dt).sum() / span) if span > 0 else float(q[-1])
    at_max = float(dt[held == qmax].sum())
    return {"count": int(len(q)), "mean": float(q.mean()), "max": qmax, "time_weighted_mean": twm,
            "time_at_max": at_max, "fraction_at_max": at_max / span if span > 0 else 0.0, "span": span}
