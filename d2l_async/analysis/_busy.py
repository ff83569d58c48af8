"""When lanes are busy: backend utilisation, and how much two lanes overlap in time.

A lane is busy at time t when one of its events covers t (nested or overlapping events count
once) and no ``block`` event does: a frontend waiting in ``cudaStreamSynchronize`` is not working,
even inside the ``aten::item`` that called it.  Busy and idle are measured over the whole trace, from its first issue or start to its last
end, so a GPU stream that waits for the first launch shows that wait as idle time.  The overlap of
the frontend with a backend lane is the chapter's picture of asynchrony in one number: the time the
Python thread and the device were working at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace import Kind, Trace, TraceError
from ._common import check_trace

__all__ = ["busy_idle", "overlap", "Overlap", "BUSY_COLUMNS"]

#: columns of :func:`busy_idle`
BUSY_COLUMNS = ("lane", "device", "stream", "count", "busy", "idle", "span", "utilization")


def _window(trace: Trace) -> tuple[float, float]:
    if not len(trace):
        return 0.0, 0.0
    c = trace.columns
    lo = float(np.nanmin(np.concatenate([c["start"], c["issue"]])))
    return lo, float(np.nanmax(c["end"]))


def _busy_counts(intervals: list[tuple[np.ndarray, np.ndarray]]):
    """Sweep over several interval sets: sorted times and, per set, how many intervals cover
    each segment [t[i], t[i+1])."""
    times, deltas = [], []
    for k, (s, e) in enumerate(intervals):
        d = np.zeros((2 * len(s), len(intervals)), dtype=np.int64)
        d[: len(s), k] = 1
        d[len(s):, k] = -1
        times.append(np.concatenate([s, e]))
        deltas.append(d)
    t = np.concatenate(times)
    d = np.concatenate(deltas)
    order = np.argsort(t, kind="stable")
    return t[order], np.cumsum(d[order], axis=0)


def _lane_intervals(trace: Trace, lane: str, *, block: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Work intervals of ``lane`` (or, with ``block=True``, its block intervals)."""
    c = trace.columns
    sel = (c["lane"] == lane) & ((c["kind"] == Kind.BLOCK.value) == block)
    s, e = c["start"][sel], c["end"][sel]
    ok = np.isfinite(s) & np.isfinite(e) & (e >= s)
    return s[ok], e[ok]


def _busy_mask(trace: Trace, lanes: list[str]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Segment boundaries, a (segments, lanes) busy mask, and the work-event count per lane."""
    sets, counts = [], []
    for name in lanes:
        work = _lane_intervals(trace, name)
        sets += [work, _lane_intervals(trace, name, block=True)]
        counts.append(len(work[0]))
    t, cnt = _busy_counts(sets)
    busy = (cnt[:-1, 0::2] > 0) & (cnt[:-1, 1::2] == 0)
    return np.diff(t), busy, counts


def busy_idle(trace: Trace) -> pd.DataFrame:
    """Busy and idle seconds of each backend lane over the trace's duration.

    Returns:
        A DataFrame with ``lane``, ``device``, ``stream``, ``count`` (events), ``busy`` and
        ``idle`` (seconds), ``span`` (the trace's duration) and ``utilization`` (busy / span).
        Empty, with these columns, for a trace without backend lanes.
    """
    check_trace(trace)
    lo, hi = _window(trace)
    span = hi - lo
    rows = []
    for ln in trace.backend_lanes:
        dt, mask, (count,) = _busy_mask(trace, [ln.name])
        busy = float(dt[mask[:, 0]].sum()) if len(dt) else 0.0
        rows.append({"lane": ln.name, "device": ln.device, "stream": ln.stream, "count": int(count),
                     "busy": busy, "idle": max(span - busy, 0.0), "span": span,
                     "utilization": busy / span if span > 0 else 0.0})
    if not rows:
        return pd.DataFrame({"lane": np.zeros(0, dtype=object), "device": np.zeros(0, dtype=object),
                             "stream": np.zeros(0, dtype=np.int64), "count": np.zeros(0, dtype=np.int64),
                             "busy": np.zeros(0), "idle": np.zeros(0), "span": np.zeros(0),
                             "utilization": np.zeros(0)})
    return pd.DataFrame(rows, columns=list(BUSY_COLUMNS))


@dataclass(frozen=True)
class Overlap:
    """How two lanes' busy time relates, in seconds over the trace's duration ``span``."""

    lane_a: str
    lane_b: str
    both: float
    only_a: float
    only_b: float
    neither: float
    span: float

    @property
    def busy_a(self) -> float:
        return self.both + self.only_a

    @property
    def busy_b(self) -> float:
        return self.both + self.only_b

    @property
    def fraction_of_a(self) -> float:
        """Share of ``lane_a``'s busy time during which ``lane_b`` was busy too (0 when idle)."""
        return self.both / self.busy_a if self.busy_a > 0 else 0.0

    @property
    def fraction_of_b(self) -> float:
        return self.both / self.busy_b if self.busy_b > 0 else 0.0


def overlap(trace: Trace, lane_a: str, lane_b: str) -> Overlap:
    """Seconds during which ``lane_a`` and ``lane_b`` were busy at once, and apart.

    Any two lanes may be compared: the frontend thread with a GPU stream shows how much Python
    work overlapped device work; two streams show concurrent kernels.

    Returns:
        The frozen :class:`Overlap`: seconds with both lanes busy, only ``lane_a``, only ``lane_b``, neither, and
        the trace's span (first issue or start to last end); when the lanes hold no work, ``neither`` is the whole
        span and the rest 0.
    """
    check_trace(trace)
    lanes = [lane.name for lane in trace.lanes]
    for arg, name in (("lane_a", lane_a), ("lane_b", lane_b)):
        if not isinstance(name, str):
            raise TypeError(f"{arg} must be a lane's name (str), got {type(name).__name__} {name!r}; lanes are {lanes}")
        if name not in lanes:
            raise TraceError(f"{arg}: no lane {name!r}; lanes are {lanes}")
    if lane_a == lane_b:
        raise ValueError(f"overlap needs two different lanes, got {lane_a!r} twice")
    lo, hi = _window(trace)
    span = hi - lo
    dt, mask, _ = _busy_mask(trace, [lane_a, lane_b])
    if not len(dt):
        return Overlap(lane_a, lane_b, 0.0, 0.0, 0.0, span, span)
    ba, bb = mask[:, 0], mask[:, 1]
    both = float(dt[ba & bb].sum())
    only_a = float(dt[ba & ~bb].sum())
    only_b = float(dt[~ba & bb].sum())
    return Overlap(lane_a, lane_b, both, only_a, only_b, max(span - both - only_a - only_b, 0.0), span)
