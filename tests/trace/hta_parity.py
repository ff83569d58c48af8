"""Parity with HTA 0.5.0's queue length, for what HTA decides independently of the CPU it runs on.

HTA sorts its launch and start rows by whole microseconds with numpy's unstable quicksort, and numpy
picks that sort's SIMD kernel for the CPU (``d2l_async/trace/_queue.py``).  So per rank and stream:

* ``count`` and the queue length as a function of time (the value after the last row of each
  instant) are HTA's on every machine: they must equal ours exactly;
* ``max`` and ``mean`` (over change points) are order-free on a lane where no instant holds both a
  launch and a start (``hta_ties`` 0): equal to ours exactly there; elsewhere HTA's must lie between
  the values of the two extreme orders (``queue_steps(..., hta_order=...)``).

HTA counts fewer launch calls than this package (``cuLaunchKernelEx``, ``hipModuleLaunchKernel``, graph
launches: ``_kineto.NOT_HTA_LAUNCH_CALLS``): :func:`our_lanes` compares the trace without their device
work (``as_hta=True``); the tests of that difference compare the whole trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from d2l_async.analysis import queue_length_summary
from d2l_async.trace import Trace, hta_times, queue_steps, queued_mask
from d2l_async.trace._kineto import NOT_HTA_LAUNCH_CALLS


@dataclass(frozen=True)
class LaneFacts:
    """Our numbers for one HTA row, with the range HTA's tie order can move its max and mean in."""

    count: int
    max: int
    mean: float
    ties: int
    max_range: tuple[int, int]
    mean_range: tuple[float, float]
    steps: tuple[np.ndarray, np.ndarray]  # (distinct HTA µs, the queue length after each)


def hta_rank_of_file(trace: Trace) -> int:
    """HTA's rank for a single file: its ``distributedInfo.rank``, else 0."""
    info = (trace.meta.get("file") or {}).get("distributedInfo") or {}
    return int(info.get("rank", 0)) if isinstance(info, dict) else 0


def without_launches_hta_leaves_out(trace: Trace) -> Trace:
    """The trace without the device work of the launch calls HTA 0.5.0 does not count."""
    device = np.isin(trace["lane"], [l.name for l in trace.backend_lanes])
    flow = trace["flow"]
    calls = ~device & (flow >= 0) & np.isin(trace["name"], sorted(NOT_HTA_LAUNCH_CALLS))
    return trace.filter(~(device & np.isin(flow, flow[calls]))) if calls.any() else trace


def our_lanes(trace: Trace, include: bool, *, as_hta: bool = True) -> dict[tuple[int, int], LaneFacts]:
    """(HTA's rank, stream) -> our facts, for every device lane with queued work; ``as_hta``: without
    the device work of the launch calls HTA does not count."""
    if as_hta:
        trace = without_launches_hta_leaves_out(trace)
    s = queue_length_summary(trace, include_last_profiler_step=include)
    mask = queued_mask(trace, include_last_profiler_step=include)
    issue_us, start_us, _ = hta_times(trace)
    rank_of = {l.name: l.rank for l in trace.lanes}
    alone = hta_rank_of_file(trace)
    out = {}
    for _, r in s.iterrows():
        if r["device"] == "cpu":  # gloo's threads: HTA has no rows for them
            continue
        lo = queue_steps(trace, r["lane"], mask=mask, hta_order="starts first")[1]
        hi = queue_steps(trace, r["lane"], mask=mask, hta_order="launches first")[1]
        sel = mask & (trace["lane"] == r["lane"])
        keys = np.sort(np.concatenate([issue_us[sel], start_us[sel]]))
        last = np.r_[keys[1:] != keys[:-1], True]
        rank = rank_of[r["lane"]] if rank_of[r["lane"]] >= 0 else alone
        out[rank, int(r["stream"])] = LaneFacts(
            int(r["count"]), int(r["max"]), float(r["mean"]), int(r["hta_ties"]),
            (int(lo.max()), int(hi.max())), (float(lo.mean()), float(hi.mean())), (keys[last], hi[last]))
    return out


def hta_summary_rows(ta, ranks) -> list[list]:
    """HTA's ``get_queue_length_summary`` as rows ``[rank, stream, count, max, mean]``, sorted."""
    s = ta.get_queue_length_summary(ranks=ranks)
    if s is None or not len(s):
        return []
    s = s.droplevel(0, axis=1).reset_index()
    return sorted([int(r["rank"]), int(r["stream"]), int(r["count"]), int(r["max"]), float(r["mean"])]
                  for _, r in s.iterrows())


def assert_agrees(ours: dict[tuple[int, int], LaneFacts], theirs: list[list], skip: frozenset = frozenset()) -> None:
    """HTA's summary rows against ours: the same (rank, stream) rows and counts; max and mean equal
    where the lane has no ties, within the range of the two extreme orders where it has."""
    assert sorted(ours) == sorted((r[0], r[1]) for r in theirs)
    for rank, stream, count, qmax, mean in theirs:
        f = ours[rank, stream]
        assert f.count == count, (rank, stream)
        if f.ties == 0:
            assert (f.max, f.mean) == (qmax, pytest.approx(mean, rel=1e-12)), (rank, stream)
        else:
            assert f.max_range[0] <= qmax <= f.max_range[1], (rank, stream, f)
            assert f.mean_range[0] - 1e-12 <= mean <= f.mean_range[1] + 1e-12, (rank, stream, f)


def assert_same_step_function(ours: dict[tuple[int, int], LaneFacts], series: dict[int, object]) -> None:
    """HTA's ``get_queue_length_time_series`` (rank -> frame) against ours: per stream the same
    instants (up to HTA's shift of the clock) and the same queue length after each."""
    streams = {(rank, int(s)) for rank, df in series.items() for s in set(df["stream"])}
    assert streams == set(ours)
    for rank, df in series.items():
        for stream in sorted(set(df["stream"])):
            part = df[df["stream"] == stream]
            ts = part["ts"].to_numpy(dtype=np.int64)
            last = np.r_[ts[1:] != ts[:-1], True]
            keys, values = ours[rank, int(stream)].steps
            assert part["queue_length"].to_numpy()[last].tolist() == values.tolist(), (rank, stream)
            assert np.diff(ts[last]).tolist() == np.diff(keys).astype(np.int64).tolist(), (rank, stream)
