"""The CUDA variants (``make gpu-check``): skipped where torch.cuda.is_available() is False."""

from __future__ import annotations

import pytest

import d2l_async.experiments as E
from d2l_async.trace import BACKEND_KINDS

from .conftest import cuda_available

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not cuda_available(), reason="needs CUDA")]


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


def _is_gpu(result) -> None:
    import torch

    assert result.virtual is False
    assert torch.cuda.get_device_name(0) in result.device


def test_asynchrony_cuda():
    r = E.run_asynchrony(size=512, matmuls=4, repeat=2, backend="cuda")
    _is_gpu(r)
    assert len(r.trace.where(kind="kernel")) >= 4
    assert r.naive.median < r.synced.median
    assert all(c.explained for c in E.asynchrony.checks(r))  # the checks read a CUDA trace too


def test_barriers_cuda():
    r = E.run_barriers(long_ops=8, size=2048, follow_ops=10, repeat=1, backend="cuda")
    _is_gpu(r)
    assert r.wait_to_read_wait < r.waitall_wait
    assert r.wait_to_read_next < r.waitall_next  # the frontend reaches its next statement sooner
    assert all(c.explained for c in E.barriers.checks(r))


def test_blockers_cuda_report_from_sync_debug_mode():
    r = E.run_blockers(steps=20, size=256, repeat=1, backend="cuda")
    _is_gpu(r)
    assert [e.reason for e in r.report] == list(E.BLOCKERS)
    assert sum("synchroniz" in e.source.lower() for e in r.report) >= 3  # torch's warnings


def test_sync_async_cuda():
    r = E.run_sync_async(ops=500, repeat=1, backend="cuda")
    _is_gpu(r)
    assert len(r.trace_async.where(kind=BACKEND_KINDS)) >= 500
    assert r.ratio > 1


def test_profiling_cuda_sees_the_launch_queue():
    r = E.run_profiling(steps=2, backend="cuda")
    _is_gpu(r)
    assert r.backend_events > 0 and r.max_queue >= 1
    assert [c.holds for c in E.profiling.checks(r)] == [True]


@pytest.mark.skipif(_gpu_count() < 2 if cuda_available() else True, reason="needs two GPUs")
def test_parallelism_two_gpus():
    r = E.run_two_devices(ops=4, size=1024, repeat=1, backend="cuda")
    assert r.devices == ("cuda:0", "cuda:1") and not r.virtual
    m = E.run_mlp_parallel(batches=3, backend="cuda")
    assert not m.virtual and len(m.losses) == 3
