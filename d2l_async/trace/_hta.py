"""A trace as HolisticTraceAnalysis 0.5.0 sees it: its clock and its default window.

HTA is this package's oracle for the queue length and the communication overlap.  Two of its
reading habits change numbers, so the functions that compare with it copy them:

* **its clock**: HTA keeps whole microseconds.  On a file with fractional ``ts`` (ns resolution) it
  rounds every start *up* and every end *down* (``trace_parser.round_down_time_stamps``); a file
  whose times are whole µs keeps them.  :func:`hta_times` gives each event's issue, start and end
  on that clock.
* **its window** (``include_last_profiler_step=False``, its default): on a rank with two profiler
  steps or more, HTA keeps the rows that are not GPU work when they start before the last
  ``ProfilerStep`` starts, and the GPU work (``stream >= 0`` and ``correlation >= 0``) whose
  correlation id one of the kept rows carries (``Trace._filter_irrelevant_gpu_kernels``).  A device
  op that carries no correlation id is not GPU work to that filter: it stays when it starts before
  the last step, like a CPU row.  :func:`hta_window_mask` is that rule.

What HTA decides by *sorting* (the order of rows with equal times) is left to numpy's unstable
quicksort in HTA, whose result depends on the CPU's SIMD sort kernel; nothing here copies it
(``_queue.py`` says which numbers it touches).

Only numpy and the standard library.
"""

from __future__ import annotations

import math

import numpy as np

from ._model import Trace
from ._ranks import rank_metas
from .._args import TRACE_HINT, instance

__all__ = ["hta_times", "hta_window_mask", "last_step_starts"]

#: device lanes whose work HTA files as GPU work (its ``stream >= 0``); gloo's threads are CPU rows
_DEVICE_PREFIXES = ("cuda", "mtia")


def last_step_starts(trace: Trace) -> dict[int, float]:
    """Rank -> start (seconds, on the trace's clock) of its last ``ProfilerStep`` when it has two
    or more (rank -1: a single-rank trace); HTA keeps only work launched before it.

    HTA takes the steps from every row that is not a GPU kernel to it (``stream >= 0`` and
    ``correlation >= 0``): the CPU's ``ProfilerStep#N`` ranges, and the GPU's copies of them where
    they carry no stream or correlation id, as ROCm writes them (``meta["device_annotations"]``).
    The GPU begins a step after the CPU launched it, so on such a trace the last step starts at
    the GPU's copy.

    Returns:
        Rank -> the last step's start, in seconds on the trace's clock, for each rank with two or more distinctly
        named steps; ranks with fewer are absent (an empty dict when none has two).
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    out: dict[int, float] = {}
    for r, shift, meta in rank_metas(trace):
        steps = [s for s in meta.get("steps") or [] if isinstance(s, dict)]
        steps += [s for s in meta.get("device_annotations") or [] if isinstance(s, dict)
                  and str(s.get("name", "")).startswith("ProfilerStep#")
                  and not (int(s.get("stream", -1)) >= 0 and int(s.get("correlation", -1)) >= 0)]
        names = {s.get("name") for s in steps}
        if len(names) >= 2:
            out[r] = max(float(s["start"]) for s in steps) + shift
    return out


def hta_times(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each event's issue, start and end on HTA 0.5.0's clock: whole microseconds of its file's clock.

    A rank whose file has fractional microseconds (ns resolution) has its issues and starts rounded
    up and its ends rounded down, as HTA rounds that file; a rank whose starts are all whole
    microseconds keeps its times (HTA rounds no file of integer ``ts``).  A trace that did not come
    from a profiler file (no ``meta["origin_us"]``) is read on its own clock, from 0.

    Returns:
        ``(issue, start, end)``: three float arrays of ``len(trace)`` in microseconds of each rank's file clock,
        less a whole constant per rank (an absolute 1.7e15 µs holds no ns in a float); the values are whole
        numbers except a whole-µs file's ends; NaN where the time is unknown (an issue without a launch).
        Subtracting the same whole constant from every time of a rank changes no order HTA sorts.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    c = trace.columns
    out = [np.full(len(trace), np.nan) for _ in range(3)]
    for rows, shift, meta in _rank_rows(trace):
        frac = _frac(meta)
        with np.errstate(invalid="ignore"):
            # back to the file's µs, to the ns it was written with (undoing the float error of seconds)
            us = [np.round(frac + (c[k][rows] - shift) * 1e6, 3) for k in ("issue", "start", "end")]
            fractional = bool((us[1] != np.floor(us[1])).any())
            out[0][rows], out[1][rows] = np.ceil(us[0]), np.ceil(us[1])
            out[2][rows] = np.floor(us[2]) if fractional else us[2]
    return out[0], out[1], out[2]


def hta_window_mask(trace: Trace) -> np.ndarray:
    """The events HTA 0.5.0 analyses by default (``include_last_profiler_step=False``).

    On a rank with two profiler steps or more (:func:`last_step_starts`), HTA keeps

    * the events that are not device work (CPU calls and ops, gloo's threads) and the device ops
      without a correlation id, when they start before the last step starts (on its whole-µs
      clock, :func:`hta_times`);
    * the device ops linked (``flow``, its correlation id) to a kept event of the first kind, whatever
      that event is; a device op whose link leads to no event of the trace is dropped.

    A rank with fewer steps is kept whole, as HTA does.

    Returns:
        A boolean array of ``len(trace)``: ``True`` for the events HTA keeps (all of them on ranks with fewer than
        two steps).
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    c = trace.columns
    keep = np.ones(len(trace), dtype=bool)
    lasts = last_step_starts(trace)
    if not lasts:
        return keep
    _, start_us, _ = hta_times(trace)
    device_lanes = {l.name for l in trace.lanes if not l.is_frontend and l.device.startswith(_DEVICE_PREFIXES)}
    on_device = np.fromiter(map(device_lanes.__contains__, c["lane"].tolist()), dtype=bool, count=len(trace))
    flow = c["flow"]
    for rows, shift, meta in _rank_rows(trace):
        rank = meta.get("_rank", -1)
        if rank not in lasts:
            continue
        frac = _frac(meta)
        last_us = math.ceil(round(frac + (lasts[rank] - shift) * 1e6, 3))
        # HTA's GPU work: a stream and a correlation id (the reader keeps ids above 0 as flows; HTA
        # would also take an id of 0 for one)
        gpu = rows & on_device & (flow >= 0)
        cpu = rows & ~gpu
        kept_cpu = cpu & (start_us < last_us)
        linked = np.isin(flow[gpu], flow[kept_cpu & (flow >= 0)])
        keep[cpu] = kept_cpu[cpu]
        keep[np.flatnonzero(gpu)] = linked
    return keep


def _frac(meta) -> float:
    """The fraction of a microsecond in the file's zero (``meta["origin_us"]``; 0 without one)."""
    origin = meta.get("origin_us")
    return float(origin) - math.floor(float(origin)) if isinstance(origin, (int, float)) else 0.0


def _rank_rows(trace: Trace) -> list[tuple[np.ndarray, float, dict]]:
    """``(row mask, clock shift, the rank's meta with "_rank")`` per rank (one entry for an unranked trace)."""
    metas = rank_metas(trace)
    if not trace.ranks:
        return [(np.ones(len(trace), dtype=bool), metas[0][1], {**metas[0][2], "_rank": -1})]
    rank_of = {l.name: l.rank for l in trace.lanes}
    row_rank = np.fromiter(map(rank_of.__getitem__, trace.columns["lane"].tolist()), dtype=np.int64,
                           count=len(trace))
    return [(row_rank == r, shift, {**m, "_rank": r}) for r, shift, m in metas]
