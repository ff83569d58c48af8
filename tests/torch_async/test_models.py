"""Models as people build them: lazy layers inside a block and through
``make_async``; a model built outside and used as is -- optimizers, ``nn.init``,
``load_state_dict``, ``torch.save``/``torch.load`` -- bitwise eager's."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from d2l_async.torch_async import AsyncTensor, asynchronous, make_async

from .helpers import outcome, train_steps


def lenet() -> nn.Module:
    return nn.Sequential(nn.LazyConv2d(6, 5, padding=2), nn.Sigmoid(), nn.AvgPool2d(2, 2),
                         nn.LazyConv2d(16, 5), nn.Sigmoid(), nn.AvgPool2d(2, 2), nn.Flatten(),
                         nn.LazyLinear(32), nn.Sigmoid(), nn.LazyLinear(10))


def _train(net, X, y, steps=2):
    net(X)  # the book's dry run: initializes the lazy layers
    opt = torch.optim.SGD(net.parameters(), lr=0.9)
    return outcome(train_steps(net, opt, X, y, steps), net)


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 1, 28, 28, generator=g), torch.randint(0, 10, (4,), generator=g)


@pytest.mark.parametrize("how", ["inside", "make_async", "outside"])
def test_lenet_with_lazy_layers(how):
    X, y = _data()
    torch.manual_seed(0)
    expected = _train(lenet(), X, y)
    torch.manual_seed(0)
    net = lenet() if how != "inside" else None
    with asynchronous() as rt:
        if how == "inside":
            net = lenet()
        elif how == "make_async":
            net = make_async(net)  # uninitialized: swapped once initialized, inside the block
        got = _train(net, X, y)
        kinds = {type(p) for p in net.parameters()}
    assert got == expected
    assert kinds == {AsyncTensor}  # initialized inside the block: swapped before the first forward
    assert rt.statistics().failed == 0


def test_a_lazy_layer_initialized_outside_a_block_stays_plain():
    torch.manual_seed(0)
    net = nn.LazyLinear(3)
    with asynchronous():
        pass
    net(torch.ones(2, 4))
    assert type(net.weight) is nn.Parameter and net.weight.shape == (3, 4)


def test_load_state_dict_save_and_load_on_a_model_built_outside():
    torch.manual_seed(0)
    src, dst = nn.Linear(4, 3), nn.Linear(4, 3)
    buf = io.BytesIO()
    with asynchronous():
        dst.load_state_dict({k: v * 2 for k, v in src.state_dict().items()})
        torch.save(dst.state_dict(), buf)
        buf.seek(0)
        loaded = torch.load(buf)
        out = dst(torch.ones(1, 4))
        got = out.tolist(), {k: v.tolist() for k, v in loaded.items()}
    assert got[1] == {k: (v * 2).tolist() for k, v in src.state_dict().items()}
    assert got[0] == nn.functional.linear(torch.ones(1, 4), src.weight * 2, src.bias * 2).tolist()


def test_a_model_built_inside_saved_and_loaded_outside():
    buf = io.BytesIO()
    with asynchronous():
        torch.manual_seed(0)
        net = nn.Linear(4, 3)
        torch.save(net.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf)
    torch.manual_seed(0)
    assert all(torch.equal(state[k], v) for k, v in nn.Linear(4, 3).state_dict().items())
