"""Captures on a real GPU (``make gpu-check``; skipped without CUDA): the facts the capture adds."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from d2l_async.analysis import blocked_time  # noqa: E402
from d2l_async.capture import BLOCKING_COPY_REASON, Capture, capture  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_a_copy_to_the_host_is_a_wait_named_after_its_op():
    x = torch.randn(2048, 2048, device="cuda")
    torch.cuda.synchronize()

    def step():
        y = x @ x  # milliseconds of GPU work the copy must wait for
        return y.cpu(), (y.sum()).item()

    t = capture(step)
    blocks = t.where(kind="block")
    assert BLOCKING_COPY_REASON in set(blocks["reason"]) or "cudaMemcpy" in set(blocks["reason"]), set(blocks["reason"])
    sources = set(blocks["source"])
    assert any(s.startswith("aten::") for s in sources), sources  # not one "(unknown)" bar
    by = blocked_time(t)
    assert by["total"].sum() > 0


@pytest.mark.skipif(torch.cuda.device_count() < 2 if torch.cuda.is_available() else True, reason="needs two GPUs")
def test_capture_on_the_second_gpu_records_every_kernel():
    with Capture(device="cuda:1") as cap:
        a = torch.randn(4096, 4096, device="cuda:1")
        for _ in range(20):
            a = a @ a / 4096
    kernels = cap.trace.where(kind="kernel")
    assert len(kernels) >= 20 and set(kernels["device"]) == {"cuda:1"}
