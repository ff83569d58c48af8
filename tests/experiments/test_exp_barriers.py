from __future__ import annotations

import numpy as np
import pytest

from d2l_async.experiments import run_barriers


@pytest.fixture(scope="module")
def result():
    return run_barriers(long_ops=4, size=500, follow_ops=4, repeat=1, backend="engine")


def _long_end(trace):
    w = trace.where(kind="op", lane="cpu:1 worker 0")
    return float(np.max(w["end"]))


def _block(trace, reason):
    b = trace.where(kind="block")
    sel = b["reason"] == reason
    assert sel.any(), f"no {reason} block in the trace"
    return float(b["start"][sel][0]), float(b["end"][sel][0])


def test_wait_to_read_waits_less_than_waitall(result):
    assert result.wait_to_read_wait < result.waitall_wait
    assert result.saved > 0


def test_wait_to_read_returns_while_the_long_work_runs(result):
    _, end = _block(result.trace_wait_to_read, "wait_to_read")
    assert end < _long_end(result.trace_wait_to_read)


def test_waitall_drains_the_long_work(result):
    _, end = _block(result.trace_waitall, "waitall")
    assert end >= _long_end(result.trace_waitall)


def _follow_up(trace):
    w = trace.where(kind="op", lane="cpu:0 worker 0")
    mm = w["name"] == "matmul"
    return w["start"][mm], w["end"][mm]


def test_after_waitall_the_follow_up_runs_alone(result):
    start, _ = _follow_up(result.trace_waitall)
    assert len(start) == result.follow_ops
    assert start.min() >= _long_end(result.trace_waitall)


def test_after_wait_to_read_the_follow_up_overlaps_the_long_work(result):
    from d2l_async.analysis import overlap

    start, _ = _follow_up(result.trace_wait_to_read)
    assert start.min() < _long_end(result.trace_wait_to_read)
    assert overlap(result.trace_wait_to_read, "cpu:0 worker 0", "cpu:1 worker 0").both > 0


def test_labels(result):
    assert result.virtual and result.barrier_names == ("waitall()", "z.wait_to_read()")
    assert result.trace_waitall.meta["barrier"] == "waitall"


@pytest.mark.parametrize("kwargs", [{"long_ops": 0}, {"size": -3}, {"follow_ops": 0}, {"repeat": 0},
                                    {"backend": "x"}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        run_barriers(**kwargs)
