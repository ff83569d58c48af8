"""The CUDA variants (``make gpu-check``): skipped where torch.cuda.is_available() is False.

Where a lesson must hold on a GPU, these tests assert that it holds, not only that a ✘
comes with its reason: on a GPU the backend needs no CPU, so the CPU engine's excuses (a busy core,
threads taking turns) do not apply, and the workloads below are sized so each effect is far beyond
run-to-run noise (milliseconds of GPU work against microseconds of launches).
"""

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


def _holds(checks, names=None) -> None:
    """Every check (or those whose name contains one of ``names``) held; the message shows why not."""
    picked = [c for c in checks if names is None or any(n in c.name for n in names)]
    assert picked, [c.name for c in checks]
    bad = [f"{c.name}: {c.shown} / {c.otherwise}" for c in picked if c.holds is not True]
    assert not bad, bad


def test_asynchrony_cuda():
    r = E.run_asynchrony(size=2048, matmuls=20, repeat=3, backend="cuda")
    _is_gpu(r)
    assert len(r.trace.where(kind="kernel")) >= 20
    assert r.naive.median < r.synced.median
    # 20 products of 2048² (milliseconds of GPU work) against microseconds of launches: the naive timer
    # misses most of it, and the CPU is done launching long before the GPU is done
    _holds(E.asynchrony.checks(r))


def test_barriers_cuda():
    r = E.run_barriers(long_ops=20, size=4096, follow_ops=10, repeat=3, backend="cuda")
    _is_gpu(r)
    assert r.wait_to_read_wait < r.waitall_wait
    assert r.wait_to_read_next < r.waitall_next  # the frontend reaches its next statement sooner
    checks = E.barriers.checks(r)
    assert len(checks) == 2, [c.name for c in checks]  # the overlap lesson is not dropped (finding 4)
    _holds(checks, ["goes on sooner", "go on sooner"])
    assert all(c.explained for c in checks)


def test_blockers_cuda_report_and_once_at_the_end():
    r = E.run_blockers(steps=400, size=1000, repeat=3, backend="cuda")
    _is_gpu(r)
    assert [e.reason for e in r.report] == list(E.BLOCKERS)
    assert sum("synchroniz" in e.source.lower() for e in r.report) >= 3  # torch's warnings
    # 100 synchronizing copies (one per step) against one at the end (finding 9)
    _holds(E.blockers.checks(r), ["once at the end"])
    assert all(c.explained for c in E.blockers.checks(r))


def test_sync_async_cuda():
    r = E.run_sync_async(ops=500, repeat=3, backend="cuda")
    _is_gpu(r)
    device_work = r.trace_async.where(kind=BACKEND_KINDS, lane=[lane.name for lane in r.trace_async.backend_lanes])
    assert len(device_work) >= min(500, r.model.n)  # kernels on the GPU, not the frontend's cpu_ops
    assert r.ratio > 1
    _holds(r.lessons(), ["beats waiting"])  # a round trip per op costs more than a launch


def test_the_lessons_hold_at_the_sizes_measured_on_this_gpu():
    """The sizing on a real GPU: every rule reached, and the lessons it sizes hold at its sizes."""
    s = E.device_sizes(refresh=True)
    assert s.reached, s.sentence()
    r = E.run_asynchrony(repeat=3, backend="cuda")  # no size given: this GPU's
    assert r.size == s.asynchrony
    _holds(E.asynchrony.checks(r))
    big = E.run_sync_async(ops=1000, repeat=3, backend="cuda", **E.workload("sync_async_queue", backend="cuda"))
    assert big.numel == s.queue_numel and big.slower_side()[0] == "backend", big.costs.sentence()
    _holds([big.queue_lesson()])
    sweep = E.sweep_sync_async(ops=(200,), numels=s.sweep_numels_quick, backend="cuda")  # 10 captures, not 28
    _holds(sweep.lessons())


def test_profiling_cuda_sees_the_launch_queue():
    r = E.run_profiling(steps=2, backend="cuda")
    _is_gpu(r)
    assert r.backend_events > 0 and r.max_queue >= 1
    assert [c.holds for c in E.profiling.checks(r)] == [True]


def test_the_launch_queue_cap_is_read_from_a_capture():
    """The notebooks' "about 1024 launches": behind a long kernel, launches queue up to CUDA's cap, then
    each launch waits for a slot; the capture's queue length and the CUDA reasons see it."""
    import torch

    from d2l_async.capture import capture
    from d2l_async.experiments._cuda_why import cuda_facts

    if not hasattr(torch.cuda, "_sleep"):
        pytest.skip("torch.cuda._sleep is not in this torch")
    x = torch.zeros(1, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()

    def fill():
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time on any recent GPU
        for _ in range(3000):
            x.add_(1)

    facts = cuda_facts(capture(fill))
    assert 256 <= facts.max_queue <= 4096, facts  # capped, not 3000
    assert facts.slow_launches > 0, facts  # launches past the cap waited for a slot


@pytest.mark.skipif(_gpu_count() < 2 if cuda_available() else True, reason="needs two GPUs")
def test_parallelism_two_gpus():
    r = E.run_two_devices(ops=8, size=4096, repeat=3, backend="cuda")
    assert r.devices == ("cuda:0", "cuda:1") and not r.virtual
    _holds(E.parallel_lessons.two_device_checks(r))  # two GPUs side by side; the barrier serializes them
    m = E.run_mlp_parallel(batches=3, backend="cuda")
    assert not m.virtual and len(m.losses) == 3
    _holds(E.parallel_lessons.mlp_checks(m), ["communication overlaps"])
