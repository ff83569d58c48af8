"""Time limits: a run that passes its deadline is stopped at a checkpoint, while it runs."""

from __future__ import annotations

import time

import pytest

from d2l_async.experiments._common import time_runs
from d2l_async.experiments.deadline import Deadline, RunStopped, checkpoint, deadline


def test_no_deadline_checkpoint_is_a_no_op():
    checkpoint()
    checkpoint(1, 10**9)


def test_passed_deadline_stops_at_the_next_checkpoint():
    d = Deadline(limit_s=1.0, started=time.perf_counter() - 2.0)
    with pytest.raises(RunStopped, match="passed its 1 s limit") as info:
        d.check()
    assert info.value.elapsed >= 2.0 and info.value.limit == 1.0 and info.value.projected is None


def test_first_steps_project_the_whole_run():
    now = time.perf_counter()
    d = Deadline(limit_s=30.0, started=now - 2.0, min_progress_s=1.0)
    d.check(10, 100)  # 2 s for 10 of 100 steps: ~20 s, within 30 s
    with pytest.raises(RunStopped, match="would take about 40 s") as info:
        d.check(5, 100)  # 2 s for 5 of 100 steps: ~40 s
    assert info.value.projected == pytest.approx(40.0, rel=0.05)
    # too little progress to trust a projection yet
    Deadline(limit_s=30.0, started=now - 0.1, min_progress_s=1.0).check(1, 10**6)
    # a later phase is projected from its own start, on top of what the run already took
    d = Deadline(limit_s=30.0, started=now - 20.0)
    d.check(5, 10, since=now - 2.0)  # 20 s so far + 2 s more: fine
    with pytest.raises(RunStopped):
        d.check(1, 10, since=now - 2.0)  # 20 s + 9 x 2 s = 38 s


def test_deadline_context_sets_and_restores():
    with deadline(1e6) as d:
        assert isinstance(d, Deadline) and d.limit_s == 1e6
        with deadline(None) as inner:
            assert inner is None
            checkpoint()
        checkpoint()
    checkpoint()


@pytest.mark.parametrize("bad", [0, -1, True, "5"])
def test_deadline_rejects_bad_limits(bad):
    with pytest.raises(ValueError, match="limit_s"):
        with deadline(bad):
            pass


def test_a_loop_with_checkpoints_is_stopped_while_it_runs():
    t0 = time.perf_counter()
    spins = 0
    with pytest.raises(RunStopped):
        with deadline(0.2):
            while True:  # would never end on its own
                sum(range(1000))
                spins += 1
                checkpoint()
    assert spins > 0 and time.perf_counter() - t0 < 5.0


def test_time_runs_stops_a_run_projected_past_its_limit():
    calls = []

    def step():
        calls.append(1)
        t = time.perf_counter()
        while time.perf_counter() - t < 0.05:  # 50 ms of real work per call
            pass

    with pytest.raises(RunStopped, match="would take about"):
        with deadline(2.0, min_progress_s=0.1):
            time_runs(step, warmup=1, repeat=1000)  # ~50 s
    assert len(calls) < 40  # stopped after its first steps, long before 1001 calls


def test_an_engine_experiment_is_stopped_and_its_queue_cancelled():
    from d2l_async.experiments import run_blockers

    t0 = time.perf_counter()
    with pytest.raises(RunStopped):
        with deadline(0.5, min_progress_s=0.2):
            run_blockers(steps=1_000_000, size=64, repeat=1000, backend="engine")
    assert time.perf_counter() - t0 < 30.0  # minutes of work otherwise
