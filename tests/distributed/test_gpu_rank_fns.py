"""The NCCL tests' rank functions, checked without a GPU."""

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


def test_the_nccl_matmul_is_timed_on_its_own_stream(monkeypatch):
    """Finding 5: a device-wide synchronize after the matmul also waits for the collective in flight."""
    from d2l_async.distributed import ranks

    log: list[str] = []

    class Work:
        def is_completed(self):
            return False

        def wait(self):
            log.append("wait")

    class Stream:
        def synchronize(self):
            log.append("stream sync")

    def all_reduce(x, async_op=False):
        log.append("async all_reduce" if async_op else "all_reduce")
        return Work() if async_op else None

    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    monkeypatch.setattr(dist, "barrier", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: log.append("device sync"))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: Stream())
    ctx = RankContext(rank=0, world_size=1, backend="nccl", device="cpu", trace_dir=None,
                      options={"numel": 16, "size": 8, "repeats": 2})
    ranks.collective_rank(ctx)
    after = [log[i + 1] for i, e in enumerate(log[:-1]) if e == "async all_reduce"]
    assert after[:2] == ["stream sync", "stream sync"], log  # the timed repeats: the matmul alone, then wait()
    assert "device sync" in log  # the blocking call is still timed to the end of everything


def test_ddp_gets_the_ranks_gpu_on_nccl_and_nothing_on_gloo():
    from d2l_async.distributed.ranks import _ddp_options

    nccl = RankContext(rank=1, world_size=2, backend="nccl", device="cuda:1", trace_dir=None)
    gloo = RankContext(rank=1, world_size=2, backend="gloo", device="cpu", trace_dir=None)
    assert _ddp_options(nccl) == {"device_ids": [1], "output_device": 1}
    assert _ddp_options(gloo) == {}


def test_an_nccl_rank_binds_its_process_group_to_its_gpu(monkeypatch):
    """NCCL init names the rank's GPU (``device_id``); gloo does not."""
    from d2l_async.distributed._rank import run_rank

    calls: list[dict] = []
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: None)
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **kw: calls.append(kw))
    monkeypatch.setattr(dist, "destroy_process_group", lambda: None)
    threads = torch.get_num_threads()
    try:
        for backend, device in (("nccl", "cuda:1"), ("gloo", "cpu")):
            ctx = RankContext(rank=1, world_size=2, backend=backend, device=device, trace_dir=None)
            assert run_rank(lambda c: c.rank, ctx) == 1
    finally:
        torch.set_num_threads(threads)
    assert calls[0]["device_id"] == torch.device("cuda:1")
    assert "device_id" not in calls[1]
