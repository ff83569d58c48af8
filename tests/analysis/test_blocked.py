"""Blocked time by reason and by source line."""

from __future__ import annotations

import pytest

from d2l_async.analysis import blocked_time
from d2l_async.data import load_sample
from d2l_async.trace import Event, Lane, LaneRole, Trace

from ._traces import three_launches


def engine_blocks() -> Trace:
    ev = [
        Event("frontend", "launch", "push", 0.0, 1.0),
        Event("frontend", "block", "print", 1.0, 3.0, reason="print", source="cell 2, line 4: print(z)"),
        Event("frontend", "block", "asnumpy", 3.0, 3.5, reason="asnumpy", source="cell 2, line 5: z.asnumpy()"),
        Event("frontend", "block", "print", 4.0, 7.0, reason="print", source="cell 2, line 4: print(z)"),
        Event("frontend", "block", "wait", 7.0, 7.5),
        Event("w", "op", "mul", 0.0, 10.0),
    ]
    return Trace.from_events(ev, [Lane("frontend", LaneRole.FRONTEND), Lane("w", LaneRole.BACKEND)])


def test_by_reason():
    b = blocked_time(engine_blocks())
    assert list(b.columns) == ["reason", "count", "total", "mean", "max", "fraction"]
    assert b["reason"].tolist() == ["print", "asnumpy", "(unknown)"] or b["reason"].tolist() == ["print", "(unknown)", "asnumpy"]
    r = b.set_index("reason")
    assert r.loc["print", "count"] == 2
    assert r.loc["print", "total"] == pytest.approx(5.0)
    assert r.loc["print", "mean"] == pytest.approx(2.5)
    assert r.loc["print", "max"] == pytest.approx(3.0)
    assert r.loc["print", "fraction"] == pytest.approx(0.5)  # of the 10 s trace
    assert r.loc["asnumpy", "total"] == pytest.approx(0.5)
    assert b["total"].is_monotonic_decreasing


def test_by_source_line():
    b = blocked_time(engine_blocks(), by="source").set_index("source")
    assert b.loc["cell 2, line 4: print(z)", "total"] == pytest.approx(5.0)
    assert b.loc["cell 2, line 5: z.asnumpy()", "count"] == 1
    assert b.loc["(unknown)", "total"] == pytest.approx(0.5)


def test_profiler_trace_blocks_are_sync_calls():
    b = blocked_time(load_sample("a100_simple_add")).set_index("reason")
    assert set(b.index) == {"cudaStreamSynchronize", "cudaDeviceSynchronize"}
    assert b.loc["cudaStreamSynchronize", "count"] == 16 and b.loc["cudaDeviceSynchronize", "count"] == 5


def test_nothing_blocked():
    b = blocked_time(load_sample("cpu_only"))
    assert b.empty and list(b.columns) == ["reason", "count", "total", "mean", "max", "fraction"]


def test_hand_trace_and_bad_by():
    b = blocked_time(three_launches())
    assert b["total"].tolist() == [pytest.approx(7.5)]
    with pytest.raises(ValueError, match="by="):
        blocked_time(three_launches(), by="colour")
    with pytest.raises(TypeError):
        blocked_time(None)
