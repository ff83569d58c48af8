"""Parameters become asynchronous in place: whoever holds one keeps the object that trains.

An optimizer made before a lazy model's first forward (``d2l.Trainer.fit``'s order), a weight tied
between two modules (every transformers LM), an optimizer made before ``make_async``, a reader's
``w = net.weight``: each holds the ``Parameter`` object, so the object itself must become the
asynchronous one -- a new object would train while the holder's stays at its initial values.
"""

from __future__ import annotations

import warnings
import weakref

import pytest
import torch
from torch import nn

from d2l_async.torch_async import AsyncTensor, StaleParameterError, asynchronous, make_async

from .helpers import run_isolated

BUILDS = ("inside", "outside", "make_async")


def _lazy_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(1))


def _train(net, opt, steps=3):
    g = torch.Generator().manual_seed(1)
    X, y = torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((net(X) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def _facts(net, opt, losses) -> tuple:
    held = opt.param_groups[0]["params"]
    return ([float(v) for v in losses], len(opt.state), [p.detach().numpy().tobytes() for p in net.parameters()],
            all(a is b for a, b in zip(held, net.parameters())) and len(held) == len(list(net.parameters())))


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("build", BUILDS)
def test_an_optimizer_made_before_the_first_forward_trains_the_lazy_layers(build, workers):
    """The optimizer holds the uninitialized parameters; the first forward materializes them, and
    those objects -- not new ones -- become asynchronous and train."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lazy modules' "under development" warning
        net = _lazy_mlp()
        opt = torch.optim.Adam(net.parameters(), lr=0.1)
        expected = _facts(net, opt, _train(net, opt))
        net = _lazy_mlp() if build != "inside" else None
        opt = torch.optim.Adam(net.parameters(), lr=0.1) if build != "inside" else None
        with asynchronous(workers=workers) as rt:
            if build == "inside":
                net = _lazy_mlp()
                opt = torch.optim.Adam(net.parameters(), lr=0.1)
            elif build == "make_async":
                make_async(net)
            got = _facts(net, opt, _train(net, opt))
            kinds = {type(p) for p in net.parameters()}
    assert got[3], "the optimizer holds other objects than the module's parameters"
    assert got[1] == expected[1] == 4, f"optimizer state for {got[1]} parameters, eager {expected[1]}"
    assert got[0] == expected[0], f"losses {got[0]} vs eager {expected[0]}"
    assert got[2] == expected[2], "parameters differ"
    assert kinds == {AsyncTensor}
    assert rt.statistics().failed == 0


def _tied() -> nn.Module:
    class LM(nn.Module):  # GPT-2's lm_head.weight = wte.weight, in small
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(10, 6)
            self.head = nn.Linear(6, 10, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, x):
            return self.head(self.emb(x))
    torch.manual_seed(0)
    return LM()


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW", "Adafactor"])
@pytest.mark.parametrize("workers", [1, 2])
def test_make_async_keeps_tied_weights_tied(opt_name, workers):
    def run(wrap):
        net = wrap(_tied())
        opt = getattr(torch.optim, opt_name)(net.parameters(), lr=0.1)
        X = torch.arange(8) % 10
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(X), (X + 1) % 10)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return ([float(v) for v in losses], [n for n, _ in net.named_parameters()], len(opt.state),
                net.head.weight is net.emb.weight, net.emb.weight.detach().numpy().tobytes())
    expected = run(lambda m: m)
    with asynchronous(workers=workers):
        got = run(make_async)
    assert got[3], "the tie is gone: two parameter objects"
    assert got[1] == expected[1] == ["emb.weight"] and got[2] == expected[2] == 1
    assert got[0] == expected[0] and got[4] == expected[4]


def test_an_optimizer_made_before_make_async_keeps_training_the_model():
    torch.manual_seed(0)
    net = nn.Linear(4, 1)
    w = net.weight  # the reader's own reference
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(0)
    ref = nn.Linear(4, 1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    expected = [float(v) for v in _train(ref, ref_opt)]
    with asynchronous():
        make_async(net)
        assert net.weight is w and type(w) is AsyncTensor and isinstance(w, nn.Parameter)
        got = [float(v) for v in _train(net, opt)]
        assert w.tolist() == ref.weight.tolist()
    assert got == expected


def test_a_parameter_torch_cannot_swap_is_replaced_and_its_optimizer_step_raises():
    """A weak reference to a parameter makes ``torch.utils.swap_tensors`` refuse: the module gets a
    new parameter, and an optimizer over the old object fails at its step, saying what to do --
    never trains a tensor nobody reads."""
    torch.manual_seed(0)
    net = nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    old = net.weight
    ref = weakref.ref(old)  # noqa: F841 - what blocks the swap
    with asynchronous():
        make_async(net)
        assert net.weight is not old and type(net.weight) is AsyncTensor
        net(torch.ones(2, 4)).sum().backward()
        with pytest.raises(StaleParameterError) as err:
            opt.step()
        assert err.value.parameter == "Linear.weight" and "weakref" in err.value.reason
        fresh = torch.optim.SGD(net.parameters(), lr=0.1)  # made after make_async: works
        fresh.step()
        assert net.weight.grad is not None


def test_double_on_a_model_made_outside_the_block_converts_it_in_place():
    """``Module._apply`` assigns ``param.data`` -- a plain tensor given an asynchronous one crashed
    the interpreter (so this runs in a fresh one): now it takes the data once it is there, and
    keeps its identity."""
    out = run_isolated("""
        import torch
        from torch import nn
        from d2l_async.torch_async import asynchronous
        torch.manual_seed(0)
        net = nn.Linear(3, 4)
        w = net.weight
        expected = nn.Linear(3, 4).double()
        expected.load_state_dict({k: v.double() for k, v in net.state_dict().items()})
        with asynchronous():
            net.double()
            out = net(torch.ones(2, 3, dtype=torch.float64))
            same = net.weight is w and w.dtype is torch.float64
            got = out.tolist()
        print(same, got == expected(torch.ones(2, 3, dtype=torch.float64)).tolist())
    """)
    assert out.split() == ["True", "True"]


def test_double_after_the_block_on_a_model_made_asynchronous_inside():
    with asynchronous():
        torch.manual_seed(0)
        net = nn.Linear(3, 4)
        w = net.weight
    net.double()  # the block is over: Module._apply assigns .data of a finished asynchronous tensor
    assert net.weight is w and w.dtype is torch.float64
    torch.manual_seed(0)
    expected = nn.Linear(3, 4).double()
    x = torch.ones(1, 3, dtype=torch.float64)
    assert net(x).tolist() == expected(x).tolist()
