"""An MLP trained with autograd and SGD(momentum) inside ``asynchronous()`` equals eager torch, bitwise."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from d2l_async.torch_async import AsyncTensor, asynchronous, make_async, synchronize

from .helpers import outcome, train_steps


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(64, 20, generator=g), torch.randint(0, 10, (64,), generator=g)


def _model():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 10))


def _train(net, X, y, steps=5):
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(2)
    return outcome(train_steps(net, opt, X, y, steps), net)


@pytest.mark.parametrize("workers", [1, 2])
def test_mlp_training_equals_eager(workers):
    X, y = _data()
    expected = _train(_model(), X, y)
    with asynchronous(workers=workers) as rt:
        net = make_async(_model())
        assert all(type(p) is AsyncTensor and isinstance(p, nn.Parameter) for p in net.parameters())
        got = _train(net, X, y)
    assert got == expected
    assert rt.statistics().failed == 0


def test_from_scratch_sgd_equals_eager():
    """D2L's from-scratch style: parameters made with torch.normal inside the block, a manual sgd."""
    def run():
        torch.manual_seed(3)
        W = torch.normal(0, 0.01, size=(20, 10), requires_grad=True)
        b = torch.zeros(10, requires_grad=True)
        X, y = _data()
        for _ in range(4):
            loss = nn.functional.cross_entropy(X @ W + b, y)
            loss.backward()
            with torch.no_grad():
                for p in (W, b):
                    p -= 0.5 * p.grad
                    p.grad.zero_()
        return W.detach().numpy().tobytes(), b.detach().numpy().tobytes(), float(loss)

    expected = run()
    with asynchronous():
        got = run()
    assert got == expected


def test_backward_is_queued_too():
    """loss.backward() returns before the gradients are computed; the barrier waits for them."""
    with asynchronous() as rt:
        net = make_async(_model())
        X, y = _data()
        loss = nn.functional.cross_entropy(net(X), y)
        loss.backward()
        grad = net[0].weight.grad
        assert type(grad) is AsyncTensor
        synchronize(timeout=30)
        assert grad._real is not None and torch.isfinite(grad._real).all()
    ops = [n for n in rt.trace().to_frame()["name"] if not n.startswith("push ")]
    assert "addmm" in ops and "threshold_backward" in ops, ops[:20]


def test_model_conversion_after_make_async_is_explicit():
    """Module._apply (model.double()) on an asynchronous model swaps tensors explicitly: no crash."""
    with asynchronous():
        net = make_async(_model())
        net.double()
        assert all(p.dtype is torch.float64 and type(p) is AsyncTensor for p in net.parameters())
        out = net(torch.ones(2, 20, dtype=torch.float64))
        assert out.shape == (2, 10) and out.dtype is torch.float64


@pytest.mark.parametrize("workers", [1, 2])
def test_batchnorm_and_adam_equal_eager(workers):
    """BatchNorm's running statistics are written by native_batch_norm without a ``(a!)`` in its
    schema: the runtime knows, so two workers still order them."""
    def run(wrap):
        torch.manual_seed(0)
        net = wrap(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1)))
        opt = torch.optim.Adam(net.parameters(), 0.01)
        X = torch.randn(16, 4)
        for _ in range(3):
            opt.zero_grad()
            net(X).pow(2).mean().backward()
            opt.step()
        net.eval()
        return net(X).tolist(), net[1].running_var.tolist(), int(net[1].num_batches_tracked)

    expected = run(lambda m: m)
    with asynchronous(workers=workers):
        got = run(make_async)
    assert got == expected
