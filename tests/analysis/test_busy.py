"""Backend busy/idle time and overlap between lanes."""

from __future__ import annotations

import pytest

from d2l_async.analysis import BUSY_COLUMNS, Overlap, busy_idle, overlap
from d2l_async.data import load_sample
from d2l_async.trace import Event, Trace, TraceError

from ._traces import three_launches


def test_busy_idle_by_hand():
    b = busy_idle(three_launches())
    assert list(b.columns) == list(BUSY_COLUMNS)
    r = b.set_index("lane")
    # kernels cover [3,10] of a trace spanning [0,10]
    assert r.loc["cuda:0 stream 1", "busy"] == pytest.approx(7.0)
    assert r.loc["cuda:0 stream 1", "idle"] == pytest.approx(3.0)
    assert r.loc["cuda:0 stream 1", "utilization"] == pytest.approx(0.7)
    assert r.loc["cuda:0 stream 1", "count"] == 3
    assert r.loc["cuda:0 stream 2", "busy"] == 0.0 and r.loc["cuda:0 stream 2", "idle"] == pytest.approx(10.0)


def test_overlap_by_hand():
    o = overlap(three_launches(), "frontend", "cuda:0 stream 1")
    assert isinstance(o, Overlap)
    # frontend works [0,.5], [1,1.5], [2,2.5] and blocks [2.5,10]; the stream works [3,10]
    assert o.both == pytest.approx(0.0)
    assert o.only_a == pytest.approx(1.5)
    assert o.only_b == pytest.approx(7.0)
    assert o.neither == pytest.approx(1.5)
    assert o.span == pytest.approx(10.0)
    assert o.fraction_of_a == 0.0


def test_nested_events_count_once_and_overlap_is_symmetric():
    t = load_sample("a100_cuda_event_sync")
    front = t.frontend_lanes[0].name
    a = overlap(t, front, "cuda:0 stream 7")
    b = overlap(t, "cuda:0 stream 7", front)
    assert (a.both, a.only_a, a.only_b) == pytest.approx((b.both, b.only_b, b.only_a))
    assert a.both + a.only_a + a.only_b + a.neither == pytest.approx(a.span)
    gpu_busy = busy_idle(t).set_index("lane").loc["cuda:0 stream 7", "busy"]
    assert a.busy_b == pytest.approx(gpu_busy)


def test_real_trace_busy_is_at_most_the_sum_of_durations():
    t = load_sample("a100_training_step")
    b = busy_idle(t)
    for _, r in b.iterrows():
        ev = t.where(lane=r["lane"])
        assert 0 < r["busy"] <= (ev["end"] - ev["start"]).sum() + 1e-12
        assert r["busy"] + r["idle"] == pytest.approx(r["span"])


def test_errors_and_empty():
    t = three_launches()
    with pytest.raises(TraceError, match="no lane"):
        overlap(t, "frontend", "gpu")
    with pytest.raises(ValueError, match="two different lanes"):
        overlap(t, "frontend", "frontend")
    front_only = Trace.from_events([Event("frontend", "op", "mul", 0.0, 1.0)])
    b = busy_idle(front_only)
    assert b.empty and list(b.columns) == list(BUSY_COLUMNS)
    # the CPU-only sample's backend lanes are gloo's communication threads, busy part of the time
    b = busy_idle(load_sample("cpu_only"))
    assert list(b["device"]) == ["cpu", "cpu"] and b["utilization"].between(0.5, 1.0).all()
