from __future__ import annotations

import dataclasses

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


def _longer_until(result, decided, what: str, runs: int = 5):
    """The first of ``result`` and up to ``runs - 1`` runs with a chain twice as long each time for
    which ``decided(run)`` holds, or a failure saying ``what``.  A chain of 4 products takes about 3 ms,
    and a frontend descheduled for that long (seen once in CI on a quiet machine) can't tell; a
    longer chain lengthens what waitall waits for and leaves what wait_to_read waits for alone."""
    r, long_ops = result, result.long_ops
    for i in range(runs):
        if i:
            long_ops *= 2
            r = run_barriers(long_ops=long_ops, size=500, follow_ops=result.follow_ops, repeat=1, backend="engine")
        if decided(r):
            return r
    pytest.fail(f"{what} in none of {runs} runs (up to {long_ops} products; last run: wait_to_read "
                f"{r.wait_to_read_wait * 1e3:.2f} ms, waitall {r.waitall_wait * 1e3:.2f} ms)")


def test_wait_to_read_waits_less_than_waitall(result):
    r = _longer_until(result, lambda r: r.wait_to_read_wait < r.waitall_wait / 2,
                      "wait_to_read did not wait under half of waitall's wait")
    assert r.saved > 0


def test_wait_to_read_returns_while_the_long_work_runs(result):
    _longer_until(result, lambda r: _block(r.trace_wait_to_read, "wait_to_read")[1] < _long_end(r.trace_wait_to_read),
                  "wait_to_read did not return before the long work ended")


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


def _first_follow_up_push(trace, follow_ops):
    w = trace.where(kind="launch", lane="frontend")
    return float(np.sort(w["issue"][w["name"] == "push matmul"])[-follow_ops])  # the follow-up's come last


def test_after_wait_to_read_the_follow_up_overlaps_the_long_work(result):
    from d2l_async.analysis import overlap

    # a run decides only if the frontend pushed the follow-up while the long work still ran (a
    # descheduled frontend on a loaded machine can come back after it: can't tell, run a longer chain)
    pushed_in_time = lambda r: (_first_follow_up_push(r.trace_wait_to_read, r.follow_ops)  # noqa: E731
                                < _long_end(r.trace_wait_to_read))
    r = _longer_until(result, pushed_in_time,
                      "the frontend pushed the follow-up after the long work ended (can't tell on this machine)", runs=3)
    trace = r.trace_wait_to_read
    start, _ = _follow_up(trace)
    assert start.min() < _long_end(trace)
    assert overlap(trace, "cpu:0 worker 0", "cpu:1 worker 0").both > 0


def test_labels(result):
    assert result.virtual and result.barrier_names == ("waitall()", "z.wait_to_read()")
    assert result.trace_waitall.meta["barrier"] == "waitall"


@pytest.mark.parametrize("kwargs", [{"long_ops": 0}, {"size": -3}, {"follow_ops": 0}, {"repeat": 0},
                                    {"backend": "x"}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        run_barriers(**kwargs)


# ---------------------------------------------------------------- lesson checks
from d2l_async._machine import Machine  # noqa: E402
from d2l_async.experiments import barriers as B  # noqa: E402
from d2l_async.trace import Event, Lane, LaneRole, Trace  # noqa: E402


def test_the_run_measures_the_time_to_the_next_statement(result):
    assert result.wait_to_read_next >= result.wait_to_read_wait
    assert result.waitall_next >= result.waitall_wait
    assert result.machine is not None and result.machine.usable_cpus > 0
    assert all(c.explained for c in B.checks(result))


def barrier_trace(chain, z, follow, wait_end):
    """chain ops on cpu:1, z on cpu:0 (issued at 0), a wait ending at ``wait_end``, follow-up ops
    on cpu:0 issued at ``wait_end``."""
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, "cpu:0", True, 0),
             Lane("cpu:1 worker 0", LaneRole.BACKEND, "cpu:1", True, 0)]
    ev = [Event("frontend", "block", "wait", 0.001, wait_end, reason="wait_to_read")]
    ev += [Event("cpu:1 worker 0", "op", "matmul", s, e, issue=0.0) for s, e in chain]
    ev += [Event("cpu:0 worker 0", "op", "mul", s, e, issue=0.0) for s, e in z]
    ev += [Event("cpu:0 worker 0", "op", "matmul", s, e, issue=wait_end) for s, e in follow]
    return Trace.from_events(ev, lanes)


def fake(next_all, next_one, trace):
    m = Machine(1.0, 1, None, 2, 2.0, 2**30, None, (), busy_cpus=1.0)
    return B.BarrierResult(next_all, next_one, 1.0, 1.0, trace, trace, 6, 400, 6, "engine", "CPU engine", True,
                           ("waitall()", "z.wait_to_read()"), next_all, next_one, m)


def test_overlap_reads_the_follow_up_work_before_the_chain_ended():
    t = barrier_trace([(0.0, 0.1), (0.1, 0.2)], [(0.0, 0.001)], [(0.01, 0.05), (0.15, 0.25)], wait_end=0.002)
    assert B.overlap_seconds(t) == pytest.approx((0.04 + 0.05, 0.04 + 0.1))
    no_wait = Trace.from_events([e for e in t.events() if e.kind != "block"], t.lanes)
    assert np.isnan(B.overlap_seconds(no_wait)[0])


def test_checks_hold_when_the_narrow_wait_returns_at_once():
    t = barrier_trace([(0.0, 0.1), (0.1, 0.2)], [(0.0, 0.001)], [(0.01, 0.05)], wait_end=0.002)
    sooner, beside = B.checks(fake(0.2, 0.002, t))
    assert sooner.holds and beside.holds
    assert sooner.number("ratio") == pytest.approx(0.01)  # one number: narrow / full, in the direction decided
    assert (sooner.number("a"), sooner.number("b")) == ("z.wait_to_read()", "waitall()")


def test_checks_explain_a_narrow_wait_that_bought_nothing():
    # z waited behind the chain for a CPU; the follow-up began after the chain had ended
    t = barrier_trace([(0.0, 0.1), (0.1, 0.2)], [(0.19, 0.2)], [(0.21, 0.3)], wait_end=0.2)
    sooner, beside = B.checks(fake(0.2, 0.2, t))
    assert sooner.holds is None and beside.holds is False  # one run each: decided only beyond a factor 2
    assert sooner.explained and beside.explained
    # the chain ended before the follow-up started
    assert (sooner.cause, beside.cause) == ("spread", "too-small")
    runs = dataclasses.replace(fake(0.2, 0.2, t), waitall_next_runs=(0.2, 0.21, 0.19),
                               wait_to_read_next_runs=(0.2, 0.21, 0.19))
    assert B.checks(runs)[0].holds is False and B.checks(runs)[0].cause == "no-spare-cpu"  # z behind the chain
