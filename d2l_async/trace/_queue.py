"""Which work sits in a backend lane's queue, and the queue's step function (arrays only).

The launch queue of a lane holds work the frontend has issued but the backend has not started::

    frontend  --launch a--launch b--launch c-----------------------------
    backend   ---------------[ a ]---------[ b ]-----[ c ]----------------
    queue     0   1       2  1 2       ... 1         0

Each issue adds one, each start removes one (HolisticTraceAnalysis's definition); with
``in_flight=True`` work leaves at its end instead, so running work counts too.  When an issue and a
start fall on the same instant the start is applied first, which reproduces HTA 0.5.0's counts.

Which work counts: backend events (op, kernel, copy, memset) with a known issue time, except work
whose flow id links it to a frontend call that is not a launch (``cudaGraphLaunch``, a synchronous
``cudaMemcpy``): HTA counts only the launch calls in :data:`LAUNCH_CALLS`.

This lives next to the model (not in ``d2l_async.analysis``) because the Chrome writer draws the
same counter track; ``d2l_async.analysis`` wraps it in tables.
"""

from __future__ import annotations

import numpy as np

from ._model import BACKEND_KINDS, Kind, Trace

__all__ = ["queued_mask", "queue_steps"]


def queued_mask(trace: Trace) -> np.ndarray:
    """Boolean mask of the events that pass through a backend lane's launch queue."""
    c = trace.columns
    if not len(trace):
        return np.zeros(0, dtype=bool)
    backend_lanes = [l.name for l in trace.backend_lanes]
    on_back = np.isin(c["lane"], backend_lanes)
    mask = on_back & np.isin(c["kind"], BACKEND_KINDS) & np.isfinite(c["issue"])
    linked = mask & (c["flow"] >= 0)
    if linked.any():
        front_flow = (~on_back) & (c["flow"] >= 0)
        other = front_flow & (c["kind"] != Kind.LAUNCH.value)
        if other.any():
            launch_flows = c["flow"][front_flow & (c["kind"] == Kind.LAUNCH.value)]
            other_flows = np.setdiff1d(c["flow"][other], launch_flows)
            mask &= ~(linked & np.isin(c["flow"], other_flows))
    return mask


def queue_steps(trace: Trace, lane: str, *, in_flight: bool = False,
                mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The queue length of ``lane`` as a step function.

    Args:
        trace: the trace.
        lane: a backend lane name.
        in_flight: count work until it ends instead of until it starts.
        mask: a precomputed :func:`queued_mask` (saves work when looping over lanes).

    Returns:
        ``(times, values)``: one entry per issue and per start (or end), sorted by time; the value
        holds from its time until the next entry.  Several entries may share a time: the last holds.
    """
    c = trace.columns
    if mask is None:
        mask = queued_mask(trace)
    sel = mask & (c["lane"] == lane)
    t_in = c["issue"][sel]
    t_out = c["end"][sel] if in_flight else c["start"][sel]
    times = np.concatenate([t_in, t_out])
    delta = np.concatenate([np.ones(len(t_in), dtype=np.int64), -np.ones(len(t_out), dtype=np.int64)])
    # at equal times: -1 before +1 (a start frees its slot before a launch at the same instant)
    order = np.lexsort((delta, times))
    return times[order], np.cumsum(delta[order])
