"""The frontend's state travels with the op (items 1 and 7): grad mode, the dispatcher's
key sets, autocast and the process-wide default dtype are what the op saw when it was queued."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from d2l_async.torch_async import asynchronous, synchronize

from .helpers import WAIT, blocks, hold_until_blocked

OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1),
    "sgd-momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01),
    "adamw-foreach": lambda ps: torch.optim.AdamW(ps, lr=0.01, foreach=True),
    "adamw-loop": lambda ps: torch.optim.AdamW(ps, lr=0.01, foreach=False),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=0.01),
}


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


def _steps(net, opt, steps=3):
    X = torch.linspace(-1, 1, 30).reshape(5, 6)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = (net(X) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [float(v) for v in losses], [p.detach().numpy().tobytes() for p in net.parameters()]


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_model_built_outside_trains_inside_as_eager(name, workers):
    """Item 1: optimizer steps on parameters made outside the block (used as they are) ran through
    autograd again on the worker, with grad mode on: "a leaf Variable that requires grad is being
    used in an in-place operation"."""
    net = _model()
    expected = _steps(net, OPTIMIZERS[name](net.parameters()))
    net = _model()
    opt = OPTIMIZERS[name](net.parameters())
    with asynchronous(workers=workers) as rt:
        got = _steps(net, opt)
    assert got == expected
    assert rt.statistics().failed == 0


def test_nn_init_on_a_model_built_outside():
    net = _model()
    torch.manual_seed(5)
    for p in net.parameters():
        nn.init.normal_(p, std=0.1)
    expected = [p.detach().clone() for p in net.parameters()]
    net = _model()
    with asynchronous():
        torch.manual_seed(5)
        for p in net.parameters():
            nn.init.normal_(p, std=0.1)
    assert all(torch.equal(a, b) for a, b in zip(net.parameters(), expected))


def test_autocast_is_applied_once_on_the_frontend():
    x = torch.linspace(-2, 2, 64).reshape(8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = (x @ x).relu()
    with asynchronous():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = (x @ x).relu()
        got = y.clone()
    assert got.dtype == expected.dtype == torch.bfloat16
    assert torch.equal(got, expected)


@pytest.mark.parametrize("workers", [1, 2])
def test_set_default_dtype_after_a_queued_factory(workers):
    """Item 7: the factory queued before ``set_default_dtype`` makes float32 data, the one after
    it float64 -- and each tensor's dtype says what its data is."""
    old = torch.get_default_dtype()
    try:
        with asynchronous(workers=workers) as rt:
            hold_until_blocked(rt)
            a = torch.ones(3)                   # queued behind the gate
            torch.set_default_dtype(torch.float64)  # a barrier: the gate opens, a runs as float32
            b = torch.ones(3)
            c = torch.ones(2) * 0.5             # scalar promotion reads the default dtype too
            synchronize(timeout=WAIT)
            got = [(t.dtype, t._real.dtype) for t in (a, b, c)]
    finally:
        torch.set_default_dtype(old)
    assert got == [(torch.float32, torch.float32), (torch.float64, torch.float64),
                   (torch.float64, torch.float64)]
    assert any(r == "torch.set_default_dtype" for r, _ in blocks(rt))


def test_default_dtype_set_between_blocks_does_not_reuse_cached_metadata():
    old = torch.get_default_dtype()
    try:
        with asynchronous():
            a = torch.zeros(4)
        torch.set_default_dtype(torch.float64)
        with asynchronous():
            b = torch.zeros(4)
            real = b.numpy().dtype
    finally:
        torch.set_default_dtype(old)
    assert a.dtype == torch.float32 and b.dtype == torch.float64 and str(real) == "float64"
