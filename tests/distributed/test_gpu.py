"""NCCL on GPUs, one GPU per rank (run by ``make gpu-check``; skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

from d2l_async.distributed import launch
from d2l_async.experiments import run_collective, run_overlap
from d2l_async.experiments.collective import returned_early
from d2l_async.experiments.ddp import overlap_checks
from d2l_async.trace import rank_lanes

from . import _fns

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600),
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2 if torch.cuda.is_available() else True,
                              reason="NCCL with one GPU per rank needs two GPUs")


def test_one_nccl_rank_on_one_gpu(pids):
    res = launch(_fns.rank_info, 1, backend="nccl", profile=False, timeout=300, on_start=pids.extend)
    assert res.values[0]["world"] == 1 and res.backend == "nccl"


@two_gpus
def test_nccl_async_all_reduce_returns_before_the_kernel_ends():
    r = run_collective(ranks=2, backend="nccl")
    assert r.correct and r.where.backend == "nccl" and "NCCL" in r.device
    facts = returned_early(r.trace)
    assert all(f["returned"] for f in facts.values()), facts
    for rl in rank_lanes(r.trace):
        assert rl.communication, f"rank {rl.rank}: no NCCL stream found among {r.trace.lanes}"


@two_gpus
def test_nccl_bucketed_overlaps_backward_kernels_and_after_backward_does_not():
    r = run_overlap(ranks=2, backend="nccl")
    assert r.where.backend == "nccl" and all(r.same_params.values())
    assert all(c.overlapping >= 1 for c in r.comm["bucketed"]), r.comm["bucketed"]
    assert all(c.overlapping == 0 for c in r.comm["after_backward"]), r.comm["after_backward"]
    assert all(c.explained for c in overlap_checks(r))
