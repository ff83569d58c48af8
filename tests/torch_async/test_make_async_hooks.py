"""``make_async`` keeps every hook registered on a parameter or buffer before it, bitwise eager's.

The hook matrix: each kind of hook, registered on a model made outside the block, then the model
made asynchronous and trained three SGD steps (1 and 2 workers), against the same eagerly: the
parameters, their gradients, and what the hooks saw (how often they ran and the values they got),
all bitwise.  ``make_async`` swaps each parameter's tensor in place (``torch.utils.swap_tensors``),
and a tensor's hooks are called through C++ hooks on the tensor underneath: without care, a
gradient mask stopped masking and a post-accumulate hook never ran.
"""

from __future__ import annotations

import weakref

import pytest
import torch
from torch import nn

from d2l_async.torch_async import asynchronous, make_async, synchronize

from .helpers import WAIT


class _Net(nn.Module):
    """Two linear layers and a buffer, which takes part in autograd when ``grad_buffer`` (a scale
    learned elsewhere)."""

    def __init__(self, grad_buffer: bool) -> None:
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.b = nn.Linear(3, 2)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 3).requires_grad_(grad_buffer))

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)) * self.scale)


def _grab(t: torch.Tensor) -> bytes:
    return t.detach().clone().numpy().tobytes()


# each: (net, seen) -> None, registering hooks that record into ``seen`` (a dict of lists)
def _gradient_mask(net, seen):
    mask = torch.tensor([[1.0], [0.0], [1.0]])  # row 1 of a.weight must not train
    net.a.weight.register_hook(lambda g: g * mask)


def _gradient_seen(net, seen):
    net.b.weight.register_hook(lambda g: seen.setdefault("b.weight grads", []).append(g.detach().clone()))


def _post_accumulate_counts(net, seen):
    net.a.bias.register_post_accumulate_grad_hook(lambda p: seen.setdefault("a.bias", []).append(1))


def _post_accumulate_scales(net, seen):
    def halve(p):
        with torch.no_grad():
            p.grad.mul_(0.5)
    net.b.bias.register_post_accumulate_grad_hook(halve)


def _removed_after(net, seen):
    handle = net.a.weight.register_hook(lambda g: g * 0)
    seen["handles"] = [handle]  # removed inside the block, after make_async: it must stop


def _buffer_gradient(net, seen):
    net.scale.register_hook(lambda g: g * 10)


def _several_in_order(net, seen):
    net.a.weight.register_hook(lambda g: g + 1)
    net.a.weight.register_hook(lambda g: g * 3)  # (g + 1) * 3, as eager composes them
    net.a.weight.register_post_accumulate_grad_hook(lambda p: seen.setdefault("order", []).append(p.grad.sum()))


def _state_dict_hooks(net, seen):
    net.register_state_dict_pre_hook(lambda m, prefix, keep_vars: seen.setdefault("sd pre", []).append(1))

    def post(m, state_dict, prefix, local_metadata):
        seen.setdefault("sd post", []).append(sorted(state_dict))
    net._register_state_dict_hook(post)

    def load_pre(state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        seen.setdefault("load pre", []).append(sorted(state_dict))
    net._register_load_state_dict_pre_hook(load_pre)
    net.register_load_state_dict_post_hook(lambda m, keys: seen.setdefault("load post", []).append(1))
    seen["state_dict round trip"] = []


HOOKS = {"gradient mask (register_hook)": _gradient_mask, "gradient seen": _gradient_seen,
         "post-accumulate count": _post_accumulate_counts, "post-accumulate scaling": _post_accumulate_scales,
         "removed after make_async": _removed_after, "buffer gradient": _buffer_gradient,
         "several, in order": _several_in_order, "state-dict hooks": _state_dict_hooks}


def _run(kind: str, workers: int | None, keep_weakref: bool = False) -> tuple:
    """Three SGD steps of the hooked model; eagerly for ``workers=None``, else make_async'ed."""
    torch.manual_seed(0)
    net = _Net(grad_buffer=kind == "buffer gradient")
    seen: dict[str, list] = {}
    HOOKS[kind](net, seen)
    ref = weakref.ref(net.a.weight) if keep_weakref else None  # torch then refuses the swap: a replacement
    X = torch.randn(5, 4)

    def train():
        opt = torch.optim.SGD([*net.parameters(), *([net.scale] if net.scale.requires_grad else [])], lr=0.1)
        for handle in seen.pop("handles", []):
            handle.remove()
        for _ in range(3):
            opt.zero_grad()
            net(X).square().sum().backward()
            opt.step()
        if "state_dict round trip" in seen:
            net.load_state_dict(net.state_dict())

    if workers is None:
        train()
    else:
        with asynchronous(workers=workers):
            make_async(net)
            train()
            synchronize(timeout=WAIT)
    tensors = [*net.parameters(), net.scale, *(p.grad for p in net.parameters())]
    if net.scale.requires_grad:
        tensors.append(net.scale.grad)
    record = {k: [_grab(v) if isinstance(v, torch.Tensor) else v for v in vs] for k, vs in seen.items()}
    del ref
    return [_grab(t) for t in tensors], record


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("kind", list(HOOKS))
def test_make_async_keeps_each_hook_bitwise(kind, workers):
    assert _run(kind, workers) == _run(kind, None)


@pytest.mark.parametrize("kind", ["gradient mask (register_hook)", "post-accumulate count"])
def test_a_replaced_parameter_keeps_its_hooks(kind):
    """Where torch refuses the swap (a weak reference), the module's new parameter runs the hooks."""
    assert _run(kind, 1, keep_weakref=True) == _run(kind, None)


def test_the_hooks_did_change_the_training():
    """The matrix compares runs whose hooks matter: without them the parameters differ."""
    def plain(net, seen):
        pass
    HOOKS["none"] = plain
    try:
        unhooked = _run("none", None)[0]
    finally:
        del HOOKS["none"]
    for kind in ("gradient mask (register_hook)", "post-accumulate scaling", "buffer gradient", "several, in order"):
        assert _run(kind, None)[0] != unhooked, kind
    assert len(_run("post-accumulate count", None)[1]["a.bias"]) == 3
