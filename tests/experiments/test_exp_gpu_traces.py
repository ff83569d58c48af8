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
