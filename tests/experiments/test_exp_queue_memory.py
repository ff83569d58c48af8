from __future__ import annotations

import pytest

from d2l_async.experiments import OPS_PER_BATCH, compare_sync_every, run_queue_memory, sample_queue_summary


@pytest.fixture(scope="module")
def runs():
    return {r.sync_every: r for r in compare_sync_every(ks=(None, 1, 2, 4), batches=24, batch_size=64, features=64)}


@pytest.mark.parametrize("k", [1, 2, 4])
def test_sync_every_k_bounds_the_queue(runs, k):
    r = runs[k]
    assert r.queue_bound == k * OPS_PER_BATCH
    assert 0 < r.max_queue <= k * OPS_PER_BATCH


def test_trace_has_every_op(runs):
    from d2l_async.trace import BACKEND_KINDS

    r = runs[None]
    assert len(r.trace.where(kind=BACKEND_KINDS)) == r.batches * OPS_PER_BATCH


def test_memory_held_by_pending_work_is_bounded_too(runs):
    assert runs[1].peak_pending_bytes > 0
    assert runs[1].peak_pending_bytes <= runs[4].peak_pending_bytes or runs[4].max_queue <= runs[1].max_queue


def test_max_pending_back_pressure():
    r = run_queue_memory(batches=20, max_pending=5, batch_size=64, features=64)
    assert r.max_queue <= 5 and r.queue_bound == 5
    assert r.virtual


def test_v100_sample_sits_at_the_launch_queue_cap():
    s = sample_queue_summary("v100_training_step")
    assert "V100" in s.gpu and not s.virtual
    assert 1000 <= s.max_queue <= 1024
    assert s.launch_seconds_at_cap <= s.launch_seconds
    assert s.launch_seconds_at_cap > 0.5 * s.launch_seconds  # most launch time is spent at the cap


@pytest.mark.parametrize("kwargs", [{"batches": 0}, {"sync_every": 0}, {"max_pending": 0}, {"batch_size": -1},
                                    {"features": 1.5}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        run_queue_memory(**kwargs)


def test_bad_samples_and_ks():
    with pytest.raises(ValueError, match="choose one of"):
        sample_queue_summary("v200")
    with pytest.raises(ValueError, match="no backend work"):
        sample_queue_summary("cpu_only")
    with pytest.raises(ValueError, match="non-empty"):
        compare_sync_every(ks=())
