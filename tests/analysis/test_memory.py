"""Bytes held by issued-but-unfinished work."""

from __future__ import annotations

import pytest

from d2l_async.analysis import pending_memory_series
from d2l_async.data import load_sample
from d2l_async.trace import Event, Lane, LaneRole, Trace


def trace() -> Trace:
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("w0", LaneRole.BACKEND), Lane("w1", LaneRole.BACKEND)]
    ev = [
        Event("w0", "op", "a", 2.0, 4.0, issue=0.0, nbytes=100),
        Event("w0", "op", "b", 4.0, 5.0, issue=1.0, nbytes=50),
        Event("w1", "op", "c", 1.0, 3.0, nbytes=10),  # no issue time: held from its start
        Event("w1", "op", "d", 3.0, 6.0, issue=3.0, nbytes=0),  # no bytes: not in the series
    ]
    return Trace.from_events(ev, lanes)


def test_series_by_hand():
    s = pending_memory_series(trace())
    assert list(s.columns) == ["time", "lane", "id", "delta", "pending_bytes"]
    assert s["time"].tolist() == [0.0, 1.0, 1.0, 3.0, 4.0, 5.0]
    assert s["pending_bytes"].tolist() == [100, 110, 160, 150, 50, 0]  # ties: by delta


def test_one_lane():
    s = pending_memory_series(trace(), "w1")
    assert s["pending_bytes"].tolist() == [10, 0] and set(s["lane"]) == {"w1"}


def test_release_before_allocation_at_the_same_time():
    lanes = [Lane("w", LaneRole.BACKEND)]
    ev = [Event("w", "op", "a", 0.0, 1.0, issue=0.0, nbytes=8), Event("w", "op", "b", 1.0, 2.0, issue=1.0, nbytes=8)]
    assert pending_memory_series(Trace.from_events(ev, lanes))["pending_bytes"].max() == 8


def test_profiler_copies_count_their_bytes():
    t = load_sample("a100_training_step")
    s = pending_memory_series(t)
    assert s["pending_bytes"].iloc[-1] == 0 and s["pending_bytes"].min() >= 0
    assert s["pending_bytes"].max() > 0


def test_empty():
    s = pending_memory_series(load_sample("cpu_only"))
    assert s.empty and list(s.columns) == ["time", "lane", "id", "delta", "pending_bytes"]
    with pytest.raises(ValueError, match="frontend"):
        pending_memory_series(trace(), "frontend")
