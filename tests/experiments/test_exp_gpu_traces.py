"""The CUDA lesson checks on synthetic Kineto traces of CUDA runs (issue 18): no GPU needed.

Each test feeds a check the trace a CUDA run writes (tests/_cuda_traces.py: torch 2.13's categories,
launch calls and flows, one or two GPUs) and asserts what the check must conclude there.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from d2l_async.experiments import parallel_lessons as pl
from d2l_async.experiments.mlp_parallel import compute_comm_overlap

from .. import _cuda_traces as C


def _two(tc, ts, conc_ms=1.1, ser_ms=2.1):
    return SimpleNamespace(devices=("cuda:0", "cuda:1"), concurrent_seconds=conc_ms / 1e3,
                           serialized_seconds=ser_ms / 1e3, speedup=ser_ms / conc_ms, trace_concurrent=tc,
                           trace_serialized=ts, facts=None, modelled=None, virtual=False)


# -- finding 3: kernels are device work -------------------------------------------------------------------
def test_device_intervals_are_the_kernels_of_each_gpu(tmp_path):
    t = C.two_gpu_products(tmp_path, ops=10)
    for dev in ("cuda:0", "cuda:1"):
        iv = pl.device_intervals(t, dev)
        assert len(iv) == 10 and all(e - s == pytest.approx(100e-6) for s, e in iv)
    assert len(pl.device_intervals(t)) == 20  # the frontend's aten::mm slices are not device work
    assert pl.overlap_seconds(t, "cuda:0", "cuda:1") > 0


def test_two_gpu_checks_hold_on_kernels(tmp_path):
    side, apart = C.two_gpu_products(tmp_path, ops=10), C.two_gpu_products(tmp_path, ops=10, serialized=True)
    checks = pl.two_device_checks(_two(side, apart))
    assert [c.holds for c in checks] == [True, True], [c.shown for c in checks]
    assert "GPUs" in checks[0].name and "a bug" not in checks[1].otherwise or checks[1].holds


def test_two_gpu_checks_fail_with_a_cuda_reason_when_the_gpus_took_turns(tmp_path):
    apart = C.two_gpu_products(tmp_path, ops=10, serialized=True)
    first = pl.two_device_checks(_two(apart, apart, conc_ms=2.0, ser_ms=2.1))[0]
    assert not first.holds and first.explained
    assert "synchroniz" in first.otherwise and "CPU" not in first.otherwise


def test_mlp_checks_see_kernels_and_copies_on_two_gpus(tmp_path):
    t = C.mlp_two_gpus(tmp_path)
    r = SimpleNamespace(overlap=compute_comm_overlap(t), trace=t, roles={"cpu": "host: makes minibatches",
                        "cuda:0": "GPU 0", "cuda:1": "GPU 1"}, modelled=None, virtual=False, facts=None,
                        losses=(1.0, 0.5, 0.25), seconds=1e-3)
    side, hidden, loss = pl.mlp_checks(r)
    assert side.holds, side.shown
    assert hidden.holds, hidden.shown
    assert loss.holds


# -- finding 4: the run's opening synchronize is not the barrier ----------------------------------------
def test_barrier_overlap_splits_at_the_event_wait_not_the_opening_synchronize(tmp_path):
    from d2l_async.experiments import barriers

    t = C.barrier_run(tmp_path, chain=8, follow=8)
    overlap, follow = barriers.overlap_seconds(t)
    assert follow == pytest.approx(8 * 200e-6 + 3e-6, rel=1e-3)  # the follow-up and the copy of z
    assert overlap > 0.5 * follow  # the follow-up ran beside the chain on the other stream


def test_barrier_checks_keep_the_overlap_lesson_on_cuda(tmp_path):
    from d2l_async.experiments import barriers

    t = C.barrier_run(tmp_path)
    r = barriers.BarrierResult(
        waitall_wait=1.6e-3, wait_to_read_wait=14e-6, waitall_total=3.3e-3, wait_to_read_total=1.8e-3,
        trace_waitall=t, trace_wait_to_read=t, long_ops=8, size=2048, follow_ops=8, backend="cuda",
        device="NVIDIA H200", virtual=False, barrier_names=("torch.cuda.synchronize(device)", "event.synchronize() after z"),
        waitall_next=1.7e-3, wait_to_read_next=60e-6)
    checks = barriers.checks(r)
    assert [c.holds for c in checks] == [True, True], [c.shown for c in checks]
