"""The NCCL tests' rank functions, checked without a GPU (issue 18, finding 1)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from d2l_async.distributed import RankContext  # noqa: E402

from . import _fns  # noqa: E402


class _Reduced(Exception):
    pass


def test_rank_info_all_reduces_a_tensor_on_the_ranks_device(monkeypatch):
    """NCCL serves only CUDA tensors: the rank function must put its tensor on ``ctx.device``.
    ("meta" stands in for "cuda:0": a device that is not the CPU, available everywhere.)"""
    seen = []

    def fake_all_reduce(x, *args, **kwargs):
        seen.append(x.device)
        raise _Reduced

    monkeypatch.setattr(dist, "all_reduce", fake_all_reduce)
    with pytest.raises(_Reduced):
        _fns.rank_info(RankContext(rank=0, world_size=1, backend="nccl", device="meta", trace_dir=None))
    assert seen == [torch.device("meta")]
