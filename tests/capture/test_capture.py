"""Live capture with torch.profiler: CPU everywhere, CUDA where there is a GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from d2l_async.analysis import queue_length_summary  # noqa: E402
from d2l_async.capture import CAPTURE_SYNC_SOURCE, Capture, capture, label_final_sync  # noqa: E402
from d2l_async.data import load_sample  # noqa: E402
from d2l_async.trace import Kind, Trace  # noqa: E402

gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def work(x, n=3):
    for _ in range(n):
        x = x @ x / x.shape[0]
    return x


def test_cpu_capture_records_ops_on_the_frontend():
    x = torch.randn(64, 64)
    trace = capture(work, x, n=4, device="cpu")
    assert isinstance(trace, Trace)
    assert trace.backend_lanes == () and len(trace.frontend_lanes) >= 1
    names = list(trace["name"])
    assert names.count("aten::matmul") == 4
    assert set(trace["kind"]) == {Kind.OP.value}
    assert trace.meta["source"] == "cpu" and "no GPU" in trace.meta["device"]
    assert trace.meta["virtual"] is False
    assert queue_length_summary(trace).empty


def test_context_manager_and_single_use():
    x = torch.ones(8)
    cap = Capture(device="cpu")
    with pytest.raises(RuntimeError, match="has not run"):
        cap.trace
    with cap:
        (x + 1).sum()
    assert "aten::add" in set(cap.trace["name"])
    with pytest.raises(RuntimeError, match="used once"):
        with cap:
            pass


def test_exception_in_the_body_propagates():
    cap = Capture(device="cpu")
    with pytest.raises(ZeroDivisionError):
        with cap:
            1 / 0
    with pytest.raises(RuntimeError):
        cap.trace


def test_the_capture_labels_its_own_final_sync():
    t = load_sample("a100_cuda_event_sync")
    labelled = label_final_sync(t)
    changed = [i for i in range(len(t)) if labelled["source"][i] != t["source"][i]]
    assert len(changed) == 1
    (i,) = changed
    assert labelled["name"][i] == "cudaDeviceSynchronize" and labelled["source"][i] == CAPTURE_SYNC_SOURCE
    assert labelled["start"][i] == t.where(kind="block")["start"].max()
    assert label_final_sync(load_sample("cpu_only")) is not None


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="'cuda' or 'cpu'"):
        capture(lambda: None, device="tpu")
    with pytest.raises(TypeError, match="callable"):
        capture(42, device="cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_cuda_without_gpu_says_what_to_do():
    with pytest.raises(RuntimeError, match="device='cpu'"):
        capture(lambda: None)


@gpu
@needs_cuda
def test_cuda_capture_pairs_launches_with_kernels():
    x = torch.randn(256, 256, device="cuda")
    torch.cuda.synchronize()
    trace = capture(work, x, n=5)
    assert trace.meta["source"] == "cuda"
    assert trace.meta["device"] == torch.cuda.get_device_name()
    kernels = trace.where(kind="kernel")
    assert len(kernels) >= 5
    assert all(l.name.startswith("cuda:") and " stream " in l.name for l in trace.backend_lanes)
    # every kernel we launched was paired with its launch through the correlation id
    import numpy as np

    assert np.isfinite(kernels["issue"]).all()
    assert (kernels["start"] >= kernels["issue"]).all()
    launches = trace.where(kind="launch")
    assert np.isin(kernels["flow"], launches["flow"]).all()
    summary = queue_length_summary(trace)
    assert len(summary) >= 1 and summary["max"].max() >= 1


@gpu
@needs_cuda
def test_cuda_capture_sees_a_blocking_sync():
    x = torch.randn(512, 512, device="cuda")

    def step():
        y = work(x, 10)
        return y.sum().item()  # .item() waits for the GPU

    trace = capture(step)
    blocks = trace.where(kind="block")
    users = set(blocks["reason"][blocks["source"] != CAPTURE_SYNC_SOURCE])
    assert users & {"cudaStreamSynchronize", "cudaMemcpy"}, users  # .item(), not the capture's own sync
