"""How much communication hid behind the backward pass: facts read from a merged multi-rank trace.

A rank's trace (``torch.profiler``, CPU activity) holds two kinds of intervals that matter here::

    rank 0 · thread (python)        [fwd][ bwd layer 6 ][ bwd layer 5 ] ... [ bwd layer 1 ][step]
    rank 0 · pt_gloo_runloop                   [ gloo:all_reduce bucket 1 ]   [ bucket 2 ]
                                               '------ hidden ------'            exposed

* **communication**: the collectives' own intervals, ``gloo:all_reduce`` on gloo's worker threads
  (``nccl:`` / NCCL kernels on a GPU), found on the rank's communication lanes
  (:func:`d2l_async.trace.rank_lanes`);
* **the backward pass**: the autograd nodes the frontend runs, ``autograd::engine::
  evaluate_function: AddmmBackward0``, ``...: torch::autograd::AccumulateGrad`` and the ops inside
  them.  ``AccumulateGrad`` is the node whose hook hands a full bucket to DDP, which launches its
  all-reduce there;
* **gradient compute**: the same nodes without ``AccumulateGrad`` — the work that can hide
  communication.  On a GPU both are every kernel that is not NCCL's.

Per rank, :func:`comm_overlap` reports how many collective intervals overlap the backward pass
(*the all-reduce ran while the frontend was still differentiating*), and the seconds of
communication (union of its intervals) that fell inside gradient compute (*hidden*) or outside it
(*exposed*).  These are facts about *when* things happened, read from the profiler, not timings of
a benchmark.

What an overlap does **not** prove on one CPU core: two intervals overlap in wall time when the
gloo thread was *waiting* (for the peer rank, for the core) while the main thread computed.  Real
parallel progress needs a spare core per busy thread (or a network card and a GPU doing the work);
the notebook says which one this run had.

numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace import Kind, Trace, TraceError, hta_times, hta_window_mask, rank_lanes, rank_metas
from ._intervals import intersection_seconds, intervals_union, overlap_counts

__all__ = ["RankComm", "comm_overlap", "comm_per_step", "step_windows", "is_backward_name"]


@dataclass(frozen=True)
class RankComm:
    """Communication of one rank and how much of it the backward pass hid.

    Attributes:
        rank: the rank.
        collectives: collective intervals (e.g. ``gloo:all_reduce``) on its communication lanes.
        overlapping: how many of them overlap at least one interval of the backward pass.
        comm_s: seconds covered by communication (union of its intervals).
        hidden_s: of those, seconds during which gradient compute also ran on the rank.
        backward_s: seconds covered by gradient compute.
    """

    rank: int
    collectives: int
    overlapping: int
    comm_s: float
    hidden_s: float
    backward_s: float

    @property
    def exposed_s(self) -> float:
        """Communication seconds with no backward compute beside it."""
        return max(self.comm_s - self.hidden_s, 0.0)

    @property
    def hidden_fraction(self) -> float:
        """hidden / communication (0 when there was no communication)."""
        return self.hidden_s / self.comm_s if self.comm_s > 0 else 0.0


def is_backward_name(names: np.ndarray, *, accumulate: bool = False) -> np.ndarray:
    """True for the autograd nodes that compute gradients (``...Backward0``); with ``accumulate``
    also for ``AccumulateGrad`` (the node whose hook launches DDP's all-reduce).

    Returns:
        A boolean array, one entry per name.
    """
    if not isinstance(accumulate, bool):
        raise TypeError(f"accumulate must be True or False, got {accumulate!r}")
    if isinstance(names, (str, bytes)) or not hasattr(names, "__len__"):
        raise TypeError(f"names must be a sequence of event names (str), got {type(names).__name__}")
    names = np.asarray(names, dtype=object)
    if names.ndim != 1 or not all(isinstance(n, str) for n in names.tolist()):
        raise TypeError("names must be a one-dimensional sequence of event names (str)")
    return np.fromiter((("Backward" in n and "AccumulateGrad" not in n) or (accumulate and "AccumulateGrad" in n)
                        for n in names.tolist()), dtype=bool, count=len(names))


#: the windows :func:`comm_overlap` can measure over
WINDOWS = ("file", "hta")


def comm_overlap(trace: Trace, *, window: str = "file") -> tuple[RankComm, ...]:
    """Per rank: collectives, how many overlap backward compute, hidden and exposed seconds.

    Args:
        trace: a merged multi-rank trace (:func:`d2l_async.trace.merge_ranks`,
            ``read_trace_dir``), or one rank's trace.
        window: which events count.  ``"file"`` (the default): every event of the recording,
            so the numbers describe the same events the timeline beside them draws.  ``"hta"``:
            the events HolisticTraceAnalysis 0.5.0 analyses by default, on its clock
            (:func:`d2l_async.trace.hta_window_mask`, :func:`d2l_async.trace.hta_times`): on a
            rank with two profiler steps or more, only work launched before its last
            ``ProfilerStep`` starts (that step may be cut short by the end of the recording), and
            device work that carries no correlation id when it starts before then; on a trace
            with nanosecond times every interval rounded inward to whole µs, as HTA reads it.
            On a GPU rank ``hidden_fraction`` then equals HTA's ``get_comm_comp_overlap`` (rank 3
            of an 8-GPU A100 NCCL job: 46.24 % over the whole file, 47.03 % in HTA's window, HTA
            47.03 %; a100_nccl_step: 14.31 %, HTA 14.31 %, and 14.76 % over the whole file on
            the file's own clock).

    Returns:
        One frozen :class:`RankComm` per rank, in :func:`~d2l_async.trace.rank_lanes` order: its collective count,
        how many of them overlap the backward pass, and the communication, hidden and backward seconds
        (``exposed_s`` and ``hidden_fraction`` derive from them). Backward compute is every kernel on a GPU rank,
        the ``...Backward`` ops on a CPU rank.

    Raises:
        TypeError: ``trace`` is not a Trace.
        ValueError: an unknown ``window``.
        TraceError: the trace has no ranks.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"comm_overlap expects a Trace, got {type(trace).__name__}")
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {WINDOWS}, got {window!r}")
    if window == "hta":
        keep = hta_window_mask(trace)
        _, start_us, end_us = hta_times(trace)
        trace = trace.filter(keep)
        # each rank on its own file's clock (µs less a whole constant): ranks are measured apart
        start, end = start_us[keep] / 1e6, end_us[keep] / 1e6
    else:
        start, end = trace["start"], trace["end"]
    lanes_of = rank_lanes(trace)
    lane_col, kind, name = trace["lane"], trace["kind"], trace["name"]
    out = []
    for rl in lanes_of:
        comm = np.isin(lane_col, list(rl.communication)) if rl.communication else np.zeros(len(trace), bool)
        own = np.isin(lane_col, list(rl.frontend + rl.compute))
        kernels = own & (kind == Kind.KERNEL.value)
        if kernels.any():  # a GPU rank: compute is every kernel on its compute streams
            compute = passes = kernels
        else:
            ops = own & (kind == Kind.OP.value)
            compute = ops & is_backward_name(name)
            passes = ops & is_backward_name(name, accumulate=True)
        cu = intervals_union(start[comm], end[comm])
        bu = intervals_union(start[compute], end[compute])
        pu = intervals_union(start[passes], end[passes])
        hidden = intersection_seconds(cu, bu)
        out.append(RankComm(int(rl.rank), int(comm.sum()), overlap_counts(start[comm], end[comm], pu),
                            float((cu[1] - cu[0]).sum()), hidden, float((bu[1] - bu[0]).sum())))
    if not out:
        raise TraceError("the trace has no ranks")
    return tuple(out)


def step_windows(trace: Trace, label: str) -> dict[int, list[tuple[float, float]]]:
    """Per rank, the ``(start, end)`` of every ``record_function(label)`` range it recorded, on the merged
    trace's clock, in order (the profiler keeps them in each rank's ``meta["annotations"]``).

    Returns:
        Rank (an unranked trace's ``-1`` as 0) -> the sorted ``(start, end)`` seconds of its ``label`` ranges;
        ``[]`` for a rank without one.
    """
    out: dict[int, list[tuple[float, float]]] = {}
    for rank, shift, meta in rank_metas(trace):
        spans = [(float(a["start"]) + shift, float(a["end"]) + shift) for a in meta.get("annotations") or ()
                 if isinstance(a, dict) and a.get("name") == label]
        out[max(rank, 0)] = sorted(spans)
    return out


def comm_per_step(trace: Trace, label: str) -> dict[int, tuple[RankComm, ...]]:
    """Per rank, :func:`comm_overlap` of each of its ``record_function(label)`` windows: one
    :class:`RankComm` per profiled step, so a claim about the time per step has one sample per step.

    Returns:
        Rank -> one :class:`RankComm` per ``label`` window of that rank, in time order (a window holding none of the
        rank's events gives an all-zero :class:`RankComm`); a rank that recorded no such window maps to ``()``.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"comm_per_step expects a Trace, got {type(trace).__name__}")
    start, end = trace["start"], trace["end"]
    out: dict[int, tuple[RankComm, ...]] = {}
    for rank, windows in step_windows(trace, label).items():
        per = []
        for lo, hi in windows:
            inside = (start >= lo) & (end <= hi)
            found = [c for c in comm_overlap(trace.filter(inside)) if c.rank == rank] if inside.any() else []
            per.append(found[0] if found else RankComm(rank, 0, 0, 0.0, 0.0, 0.0))
        out[rank] = tuple(per)
    return out
