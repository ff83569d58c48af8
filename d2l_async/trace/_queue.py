"""Which work sits in a backend lane's queue, and the queue's step function (arrays only).

The launch queue of a lane holds work the frontend has issued but the backend has not started::

    frontend  --launch a--launch b--launch c-----------------------------
    backend   ---------------[ a ]---------[ b ]-----[ c ]----------------
    queue     0   1       2  1 2       ... 1         0

Each issue adds one, each start removes one (HolisticTraceAnalysis's definition); with
``in_flight=True`` work leaves at its end instead, so running work counts too.

Equal times, one rule: events are ordered by their exact times, and at equal times an issue comes
before a start (or an end): a kernel cannot start before its launch, and two events that share an
instant by chance are then ordered the same way on every machine.  Every sort that orders events in
the trace layer and the analyses is stable or has a key for every tie (``lexsort``).

HTA's order of equal times is not a rule: it sorts whole microseconds (``_hta.py``) with numpy's
default quicksort, and numpy picks that sort's SIMD kernel for the CPU (AVX-512, AVX2 or its own
baseline code), each of which leaves rows with equal keys in a different order.  So on a lane where
a launch and a start fall on the same whole microsecond, HTA's ``max`` and ``mean`` (over change
points) depend on the machine HTA runs on.  What it decides independently of that order, and this
module reproduces: each lane's ``count``, and the queue length as a function of time (the value
after every row of an instant, which the series holds until the next instant).  Where no instant
of a lane holds both a launch and a start (:func:`hta_ties` is 0), its ``max`` and ``mean`` are
order-free too, and equal HTA's; elsewhere HTA's lie between those of the two extreme orders,
starts first and launches first (``queue_steps(..., hta_order=...)``).

The last profiler step: ``torch.profiler.schedule`` marks steps (``ProfilerStep#N``), and the last
one may be cut short by the end of the recording.  HTA drops the work *launched* in it by default
(``include_last_profiler_step=False``) when the trace has two steps or more; :func:`queued_mask`
does the same when asked, per rank in a merged trace (:func:`~d2l_async.trace.hta_window_mask`).

Which work counts: backend events (op, kernel, copy, memset) with a known issue time, except work
whose flow id links it to a frontend call that is not a launch (a synchronous ``cudaMemcpy``): a
launch is any call of :data:`LAUNCH_CALLS`, whichever vendor's API made it (``_kineto.py``; HTA
0.5.0 counts fewer of them).  A ``cudaMemcpyAsync`` into pageable memory is a wait in the trace
(``block``: it held the CPU until its copy was done) and a launch here: it put its copy on the
stream like any other (:func:`launch_calls`).

This lives next to the model (not in ``d2l_async.analysis``) because the Chrome writer draws the
same counter track; ``d2l_async.analysis`` wraps it in tables.
"""

from __future__ import annotations

import numpy as np

from ._hta import hta_times, hta_window_mask
from ._kineto import LAUNCH_CALLS
from ._model import BACKEND_KINDS, Kind, Trace
from .._args import TRACE_HINT, instance

__all__ = ["queued_mask", "queue_steps", "hta_ties", "launch_calls", "HTA_ORDERS"]

#: the two orders of equal whole microseconds between which HTA's own falls (``queue_steps(hta_order=)``)
HTA_ORDERS = ("starts first", "launches first")


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
        mask &= hta_window_mask(trace)
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
    elif (not isinstance(on_back, np.ndarray) or on_back.dtype != bool or on_back.shape != (len(trace),)):
        raise TypeError(f"on_back must be a boolean array of len(trace)={len(trace)} (True for events on backend lanes) "
                        f"or None, got {type(on_back).__name__} {getattr(on_back, 'shape', on_back)!r:.80}")
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


def queue_steps(trace: Trace, lane: str, *, in_flight: bool = False, mask: np.ndarray | None = None,
                hta_order: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The queue length of ``lane`` as a step function.

    Args:
        trace: the trace.
        lane: a backend lane name.
        in_flight: count work until it ends instead of until it starts.
        mask: a precomputed :func:`queued_mask` (saves work when looping over lanes).
        hta_order: ``None`` (the default): exact times, an issue before a start at equal times.
            One of :data:`HTA_ORDERS`: HTA's whole microseconds (:func:`~d2l_async.trace.hta_times`),
            and at an equal microsecond the starts first or the launches first, the two orders
            between which HTA's own order falls (not with ``in_flight``: HTA has no such queue).

    Returns:
        ``(times, values)``: one entry per issue and per start (or end), sorted by time; the value
        holds from its time until the next entry.  Several entries may share a time: the last holds.
        With ``hta_order`` the times are the exact ones, made non-decreasing in HTA's order.

    Raises:
        ValueError: ``hta_order`` is not None or one of :data:`HTA_ORDERS`, or is given with ``in_flight``.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    instance("lane", lane, str, what="lane's name (str)")
    if hta_order is not None and hta_order not in HTA_ORDERS:
        raise ValueError(f"hta_order must be None or one of {HTA_ORDERS}, got {hta_order!r}")
    if hta_order is not None and in_flight:
        raise ValueError("hta_order orders HTA's queue, which has no in-flight variant: pass in_flight=False")
    c = trace.columns
    mask = _mask(trace, mask)
    sel = mask & (c["lane"] == lane)
    t_in = c["issue"][sel]
    t_out = c["end"][sel] if in_flight else c["start"][sel]
    times = np.concatenate([t_in, t_out])
    delta = np.concatenate([np.ones(len(t_in), dtype=np.int64), -np.ones(len(t_out), dtype=np.int64)])
    if hta_order is not None:
        issue_us, start_us, _ = hta_times(trace)
        keys = np.concatenate([issue_us[sel], start_us[sel]])
        order = np.lexsort((times, delta if hta_order == "starts first" else -delta, keys))
        times = times[order]
        return np.maximum.accumulate(times) if len(times) else times, np.cumsum(delta[order])
    # at equal times: +1 before -1 (a launch counts before a start at the same instant); lexsort is stable
    order = np.lexsort((-delta, times))
    return times[order], np.cumsum(delta[order])


def hta_ties(trace: Trace, mask: np.ndarray | None = None) -> dict[str, int]:
    """Per backend lane, the instants at which HTA's own ``max`` and ``mean`` depend on the CPU it runs on.

    Counts the whole microseconds of HTA's clock (:func:`~d2l_async.trace.hta_times`) at which a
    queued event of the lane was issued and a queued event of the lane started: HTA orders those two
    rows with numpy's unstable sort, whose result differs between SIMD sort kernels.  Where the count
    is 0 the lane's ``count``, ``max`` and ``mean`` are HTA's on any machine.

    Args:
        trace: the trace.
        mask: a precomputed :func:`queued_mask` (default: ``queued_mask(trace)``).

    Returns:
        Backend lane name -> how many such microseconds it has (0 for a lane without queued work), for every
        backend lane of the trace.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    c = trace.columns
    mask = _mask(trace, mask)
    out = {l.name: 0 for l in trace.backend_lanes}
    if not len(trace) or not mask.any():
        return out
    issue_us, start_us, _ = hta_times(trace)
    for name in out:
        sel = mask & (c["lane"] == name)
        if sel.any():
            out[name] = int(len(np.intersect1d(issue_us[sel], start_us[sel])))
    return out


def _mask(trace: Trace, mask: object) -> np.ndarray:
    """``mask`` as given (a boolean array of ``len(trace)``), :func:`queued_mask` for None, else a TypeError."""
    if mask is None:
        return queued_mask(trace)
    if not isinstance(mask, np.ndarray) or mask.dtype != bool or mask.shape != (len(trace),):
        got = (f"an array of {mask.dtype} and shape {mask.shape}" if isinstance(mask, np.ndarray)
               else type(mask).__name__)
        raise TypeError(f"mask must be a boolean array of len(trace) = {len(trace)}, as queued_mask(trace) returns; "
                        f"got {got}")
    return mask
