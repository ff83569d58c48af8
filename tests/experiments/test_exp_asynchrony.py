from __future__ import annotations

import numpy as np
import pytest

from d2l_async.experiments import run_asynchrony
from d2l_async.trace import BACKEND_KINDS


@pytest.fixture(scope="module")
def result():
    import os

    os.environ["D2L_ASYNC_QUICK"] = "1"
    try:
        return run_asynchrony(size=200, matmuls=4, repeat=2, backend="engine")
    finally:
        os.environ.pop("D2L_ASYNC_QUICK", None)


def test_one_backend_op_per_push(result):
    t = result.trace
    launches = t.where(kind="launch")
    work = t.where(kind=BACKEND_KINDS)
    # one push per product: the input is made before the timed loop, not in it
    assert len(launches) == len(work) == result.matmuls
    assert set(work["name"]) == {"matmul"} or len(set(work["name"])) == 1
    # every op started after the frontend issued it
    assert np.all(work["start"] >= work["issue"])


def test_measurements_are_labelled_and_honest(result):
    assert result.naive.synchronized is False and result.synced.synchronized is True
    assert len(result.numpy.raw) == len(result.synced.raw) == 2
    assert list(result.measurements) == ["numpy", result.naive.label, result.synced.label]
    assert result.virtual and "virtual" in result.device
    assert result.trace.is_virtual


def test_naive_timer_misses_the_work(result):
    # the naive timer stops before the queue drains; the synchronized one waits for it
    assert result.naive.median < result.synced.median
    assert 0 < result.hidden_fraction <= 1


@pytest.mark.parametrize("kwargs", [{"size": 0}, {"matmuls": -1}, {"repeat": 0}, {"size": 2.5},
                                    {"backend": "gpu"}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        run_asynchrony(**kwargs)


def test_keyword_only():
    with pytest.raises(TypeError):
        run_asynchrony(100)  # noqa


# ---------------------------------------------------------------- lesson checks on synthetic results
from d2l_async._machine import Machine  # noqa: E402
from d2l_async.experiments import asynchrony as A  # noqa: E402
from d2l_async.experiments._common import make_measurement  # noqa: E402
from d2l_async.trace import Event, Lane, LaneRole, Trace  # noqa: E402

ONE_BUSY_CPU = Machine(1.0, 1, None, 2, 2.0, 2**30, None, (), busy_cpus=1.0)


def pushes_then_work(push_ends, work):
    """A trace: pushes ending at ``push_ends`` (s) on the frontend, ops ``(start, end)`` on cpu:0."""
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, "cpu:0", True, 0)]
    events = [Event("frontend", "launch", "push", e - 1e-6, e) for e in push_ends]
    events += [Event("cpu:0 worker 0", "op", "matmul", s, e, issue=0.0, device="cpu:0") for s, e in work]
    return Trace.from_events(events, lanes)


def fake_result(naive_s, synced_s, trace):
    m = lambda label, t, sync=True: make_measurement(label, [t, t], synchronized=sync)  # noqa: E731
    return A.AsynchronyResult(m("numpy", 0.1), m("naive", naive_s, False), m("synced", synced_s), trace, 100, 3,
                              "engine", "CPU engine", True, ONE_BUSY_CPU)


def test_issue_and_finish_reads_the_trace():
    t = pushes_then_work([0.001, 0.002, 0.003], [(0.0, 0.010), (0.010, 0.020), (0.020, 0.030)])
    a = A.issue_and_finish(t)
    assert (a.issued, a.finished) == pytest.approx((0.003, 0.030))
    assert a.busy == pytest.approx(0.030) and a.busy_before == pytest.approx(0.003)
    assert a.share_before == pytest.approx(0.1)
    with pytest.raises(ValueError, match="pushes"):
        A.issue_and_finish(pushes_then_work([], [(0, 1)]))


def test_a_naive_engine_s_frontend_is_done_when_its_last_op_is():
    """Its ops run inside their pushes: a slow last op (a 4 ms stall was seen) is frontend time too, and
    the naive run must not read as a frontend that raced ahead."""
    ops = [(0.0000, 0.0001), (0.0001, 0.0002), (0.0002, 0.0003), (0.00031, 0.0045)]
    pushes = [s - 1e-6 for s, _ in ops]  # each push's bookkeeping ends just before its op runs
    naive = pushes_then_work(pushes, ops).with_meta(engine="naive")
    a = A.issue_and_finish(naive)
    assert a.issued == pytest.approx(a.finished) and a.finished > 0.0044
    check = A.ran_ahead_check(naive, ONE_BUSY_CPU)
    assert check.holds is False and check.cause == "no-worker-thread"
    threaded = pushes_then_work(pushes, ops)  # the same times from a worker thread: it did race ahead
    assert A.ran_ahead_check(threaded, ONE_BUSY_CPU).holds is True


def test_checks_hold_when_the_frontend_runs_ahead():
    t = pushes_then_work([0.001, 0.002, 0.003], [(0.0, 0.010), (0.010, 0.020), (0.020, 0.030)])
    c = A.checks(fake_result(0.003, 0.030, t))
    assert [x.holds for x in c] == [True, True]
    assert [x.claim for x in c] == ["01.naive-misses", "00.ran-ahead"]
    assert c[0].number("ratio") == pytest.approx(0.1) and "3 ms" in c[1].shown and "30 ms" in c[1].shown


def test_checks_explain_a_frontend_that_took_turns_with_the_worker():
    # each push waited for the previous op: the naive timer saw nearly everything
    t = pushes_then_work([0.010, 0.020, 0.029], [(0.0, 0.010), (0.010, 0.020), (0.020, 0.030)])
    missed, ahead = A.checks(fake_result(0.029, 0.030, t))
    assert not missed.holds and not ahead.holds
    assert missed.explained and ahead.explained
    # the reason is the run's machine (one busy CPU), as a field
    assert missed.cause == ahead.cause == "no-spare-cpu"


def test_timer_check_alone():
    ok = A.timer_check(0.001, 0.1)
    assert ok.holds and ok.number("ratio") == pytest.approx(0.01)
    one_each = A.timer_check(0.09, 0.1, ONE_BUSY_CPU)  # one run each: decided only beyond a factor 2
    assert one_each.holds is None and one_each.explained and one_each.cause == "spread"
    bad = A.timer_check([0.09, 0.091, 0.089], [0.1, 0.101, 0.099], ONE_BUSY_CPU)
    assert bad.holds is False and bad.explained and bad.cause == "no-spare-cpu"
    with pytest.raises(ValueError, match="seconds"):
        A.timer_check(0.1, 0.0)
