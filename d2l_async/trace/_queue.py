"""Which work sits in a backend lane's queue, and the queue's step function (arrays only).

The launch queue of a lane holds work the frontend has issued but the backend has not started::

    frontend  --launch a--launch b--launch c-----------------------------
    backend   ---------------[ a ]---------[ b ]-----[ c ]----------------
    queue     0   1       2  1 2       ... 1         0

Each issue adds one, each start removes one (HolisticTraceAnalysis's definition); with
``in_flight=True`` work leaves at its end instead, so running work counts too.  When an issue and a
start fall on the same instant the issue is applied first, as HTA 0.5.0 orders them (its launch
rows come before its GPU rows at equal ``ts``): on ``cuda_event_sync_multi_stream`` a launch and a
memset that start on the same microsecond make a queue of 2, not 1.

The last profiler step: ``torch.profiler.schedule`` marks steps (``ProfilerStep#N``), and the last
one may be cut short by the end of the recording.  HTA drops the work *launched* in it by default
(``include_last_profiler_step=False``) when the trace has two steps or more; :func:`queued_mask`
does the same when asked, per rank in a merged trace.

Which work counts: backend events (op, kernel, copy, memset) with a known issue time, except work
whose flow id links it to a frontend call that is not a launch (``cudaGraphLaunch``, a synchronous
``cudaMemcpy``): HTA counts only the launch calls in :data:`LAUNCH_CALLS`, by name.  A
``cudaMemcpyAsync`` into pageable memory is a wait in the trace (``block``: it held the CPU until its
copy was done) and a launch here: it put its copy on the stream like any other (:func:`launch_calls`).

This lives next to the model (not in ``d2l_async.analysis``) because the Chrome writer draws the
same counter track; ``d2l_async.analysis`` wraps it in tables.
"""

from __future__ import annotations

import math

import numpy as np

from ._kineto import LAUNCH_CALLS
from ._model import BACKEND_KINDS, Kind, Trace
from ._ranks import rank_metas
from .._args import TRACE_HINT, instance

__all__ = ["queued_mask", "queue_steps", "last_step_starts", "hta_tie_ranks", "hta_window_mask", "launch_calls"]


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


def hta_window_mask(trace: Trace) -> np.ndarray:
    """The events HTA 0.5.0 analyses by default (``include_last_profiler_step=False``).

    On a rank with two profiler steps or more, HTA keeps the CPU events that start before the last
    ``ProfilerStep`` starts and the device work launched by them (its launch starts before then;
    work with no known launch is dropped); a rank with fewer steps is kept whole, as HTA does.

    Returns:
        A boolean array of ``len(trace)``: ``True`` for the events HTA keeps (all of them on ranks with fewer than
        two steps).
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    c = trace.columns
    keep = np.ones(len(trace), dtype=bool)
    for rank, last in last_step_starts(trace).items():
        mine = [l for l in trace.lanes if l.rank == rank]
        front = isin(c["lane"], [l.name for l in mine if l.is_frontend or not l.device.startswith(("cuda", "mtia"))])
        device = isin(c["lane"], [l.name for l in mine if not l.is_frontend and l.device.startswith(("cuda", "mtia"))])
        with np.errstate(invalid="ignore"):
            keep &= ~(front & (c["start"] >= last)) & ~(device & ~(c["issue"] < last))
    return keep


def queued_mask(trace: Trace, *, include_last_profiler_step: bool = True) -> np.ndarray:
    """Boolean mask of the events that pass through a backend lane's launch queue.

    Args:
        trace: the trace.
        include_last_profiler_step: ``False`` leaves out work issued in the last
            ``ProfilerStep`` of a multi-step trace, as HTA does by default.

    Returns:
        A boolean array of ``len(trace)`` (empty for an empty trace).
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    c = trace.columns
    if not len(trace):
        return np.zeros(0, dtype=bool)
    mask = _queued(trace)
    if not include_last_profiler_step:
        for rank, last in last_step_starts(trace).items():
            lanes = [l.name for l in trace.backend_lanes if l.rank == rank]
            mask &= ~(isin(c["lane"], lanes) & (c["issue"] >= last))
    return mask


def isin(col: np.ndarray, values) -> np.ndarray:
    """``np.isin`` for an object column of strings: a set lookup per row (np.isin sorts objects,
    ~20x slower on a 10^6-row column)."""
    wanted = set(values)
    return np.fromiter(map(wanted.__contains__, col.tolist()), dtype=bool, count=len(col))


def launch_calls(trace: Trace, on_back: np.ndarray | None = None) -> np.ndarray:
    """Mask of the frontend calls that put work on a launch queue: every ``launch``, and the waits named
    as launch calls (a ``cudaMemcpyAsync`` into pageable memory: a ``block`` that queued its copy).

    Returns:
        A boolean array of ``len(trace)``: ``True`` for those calls, never for an event on a backend lane.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    c = trace.columns
    if on_back is None:
        on_back = isin(c["lane"], [l.name for l in trace.backend_lanes])
    launch = c["kind"] == Kind.LAUNCH.value
    held = c["kind"] == Kind.BLOCK.value
    if held.any():
        rows = np.flatnonzero(held)
        launch[rows] = isin(c["name"][rows], LAUNCH_CALLS)
    return launch & ~on_back


def _queued(trace: Trace) -> np.ndarray:
    c = trace.columns
    backend_lanes = [l.name for l in trace.backend_lanes]
    on_back = isin(c["lane"], backend_lanes)
    mask = on_back & isin(c["kind"], BACKEND_KINDS) & np.isfinite(c["issue"])
    linked = mask & (c["flow"] >= 0)
    if linked.any():
        front_flow = (~on_back) & (c["flow"] >= 0)
        is_launch = launch_calls(trace, on_back)
        other = front_flow & ~is_launch
        if other.any():
            launch_flows = c["flow"][front_flow & is_launch]
            other_flows = np.setdiff1d(c["flow"][other], launch_flows)
            mask &= ~(linked & np.isin(c["flow"], other_flows))
    return mask


def hta_tie_ranks(trace: Trace, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Where HTA 0.5.0 would put each queued event's +1 and -1 row, as global ranks.

    HTA rounds each ``ts`` up to a whole microsecond, stacks the launch calls (in file order) over
    the GPU ops (in file order) and sorts that table by ``ts`` with numpy's default, unstable
    quicksort: rows with equal ``ts`` come out in an order only that sort decides (a launch before
    a start on some traces, after it on others).  Repeating the same sort on the same keys in the
    same row order reproduces HTA's order on this machine exactly.  HTA reads a folder of ranks one
    rank at a time, so a merged trace is ordered rank by rank, each on its own clock and in its own
    file's order.  Returns None for traces that did not come from profiler files (engine
    recordings): they keep the plain rule, a launch before a start at equal times.

    Returns:
        ``(plus, minus)``: two int64 arrays of ``len(trace)``, indexed by event row, holding each queued event's
        global rank of its +1 (launch) row and of its -1 (start) row in HTA's sorted table (-1 for rows outside
        ``mask``). ``None`` when ``mask`` selects nothing, when a rank's meta has no ``origin_us`` or its ``source``
        is not a profiler file's, or when a queued event has no launch call (HTA would not count it).
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    c = trace.columns
    sel_all = np.flatnonzero(mask)
    if not len(sel_all):
        return None
    on_back = isin(c["lane"], [l.name for l in trace.backend_lanes])
    is_launch = launch_calls(trace, on_back) & (c["flow"] >= 0)
    r_in = np.full(len(trace), -1, dtype=np.int64)
    r_out = np.full(len(trace), -1, dtype=np.int64)
    if trace.ranks:
        rank_of = {l.name: l.rank for l in trace.lanes}
        row_rank = np.fromiter(map(rank_of.__getitem__, c["lane"].tolist()), dtype=np.int64, count=len(trace))
        parts = [(row_rank == r, shift, m) for r, shift, m in rank_metas(trace)]
    else:
        parts = [(np.ones(len(trace), dtype=bool), 0.0, trace.meta)]
    base = 0
    for rows, shift, meta in parts:
        origin = meta.get("origin_us")
        if origin is None or meta.get("source") not in ("chrome", "cuda", "cpu"):
            return None
        sel = np.flatnonzero(mask & rows)
        if not len(sel):
            continue
        got = _rank_order(c, sel, np.flatnonzero(is_launch & rows), float(origin), shift)
        if got is None:
            return None
        (rows_in, ranks_in), ranks_out = got
        r_in[rows_in] = ranks_in + base
        r_out[sel] = ranks_out + base
        base += 2 * len(sel)
    return r_in, r_out


def _rank_order(c, sel: np.ndarray, launch: np.ndarray, origin: float, shift: float):
    """HTA's order of one file's queued events ``sel`` (rows) launched by the calls ``launch``:
    ``((rows in launch order, their +1 ranks), the -1 ranks of sel)``; None when an event has no
    launch call (HTA would not count it: the plain rule applies)."""
    flow = c["flow"][sel]
    if (flow < 0).any():
        return None
    first = {}
    for row, f in zip(launch.tolist(), c["flow"][launch].tolist()):
        first.setdefault(f, row)
    launch_row = np.fromiter((first.get(f, -1) for f in flow.tolist()), dtype=np.int64, count=len(sel))
    if (launch_row < 0).any():
        return None
    # whole µs of the file's clock, less a whole constant (an absolute 1.7e15 µs has no room
    # for ns in a float; shifting every key alike leaves the sort unchanged)
    frac = origin - math.floor(origin)
    with np.errstate(invalid="ignore"):
        us_in = np.ceil(np.round(frac + (c["issue"][sel] - shift) * 1e6, 3))
        us_out = np.ceil(np.round(frac + (c["start"][sel] - shift) * 1e6, 3))
    in_order = np.argsort(launch_row, kind="stable")
    keys = np.concatenate([us_in[in_order], us_out]).astype(np.int64)
    perm = np.argsort(keys)  # numpy's default quicksort, as pandas' sort_values uses
    rank = np.empty(len(keys), dtype=np.int64)
    rank[perm] = np.arange(len(keys))
    n = len(sel)
    return (sel[in_order], rank[:n]), rank[n:]


def queue_steps(trace: Trace, lane: str, *, in_flight: bool = False,
                mask: np.ndarray | None = None,
                ties: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The queue length of ``lane`` as a step function.

    Args:
        trace: the trace.
        lane: a backend lane name.
        in_flight: count work until it ends instead of until it starts.
        mask: a precomputed :func:`queued_mask` (saves work when looping over lanes).
        ties: :func:`hta_tie_ranks` of the trace and mask, to order equal times as HTA does
            (ignored with ``in_flight``); without it a launch comes before a start at equal times.

    Returns:
        ``(times, values)``: one entry per issue and per start (or end), sorted by time; the value
        holds from its time until the next entry.  Several entries may share a time: the last holds.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    c = trace.columns
    if mask is None:
        mask = queued_mask(trace)
    sel = mask & (c["lane"] == lane)
    t_in = c["issue"][sel]
    t_out = c["end"][sel] if in_flight else c["start"][sel]
    times = np.concatenate([t_in, t_out])
    delta = np.concatenate([np.ones(len(t_in), dtype=np.int64), -np.ones(len(t_out), dtype=np.int64)])
    if ties is not None and (not isinstance(ties, tuple) or len(ties) != 2):
        raise TypeError(f"ties must be None or the pair hta_tie_ranks(trace, mask) returns, got {type(ties).__name__}")
    if ties is not None and not in_flight:
        order = np.argsort(np.concatenate([ties[0][sel], ties[1][sel]]), kind="stable")
        times = times[order]
        # HTA sorts whole microseconds: keep our exact times, but in HTA's order
        return np.maximum.accumulate(times) if len(times) else times, np.cumsum(delta[order])
    # at equal times: +1 before -1 (a launch counts before a start at the same instant)
    order = np.lexsort((-delta, times))
    return times[order], np.cumsum(delta[order])
