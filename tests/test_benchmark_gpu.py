"""``Benchmark``'s CUDA synchronization, without a GPU: a stand-in torch.cuda (low item)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from d2l_async.benchmark import Benchmark, wait_all  # noqa: E402


@pytest.fixture
def two_gpus(monkeypatch):
    """Two visible GPUs; the process has a CUDA context on cuda:1 only. Records each synchronize."""
    synced: list = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(str(device)))
    monkeypatch.setattr(torch._C, "_cuda_hasPrimaryContext", lambda i: i == 1, raising=False)
    return synced


def test_benchmark_synchronizes_only_the_gpus_in_use(two_gpus):
    with Benchmark("x", file=None):
        pass
    assert two_gpus == ["cuda:1", "cuda:1"]  # entry and exit; no context is created on cuda:0


def test_no_cuda_work_yet_no_synchronize(two_gpus, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    wait_all()
    assert two_gpus == []


def test_a_named_device_is_synchronized_whatever_else(two_gpus):
    wait_all("cuda:0")
    assert two_gpus == ["cuda:0"]
