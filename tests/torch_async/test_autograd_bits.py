"""Autograd and metadata bit-equal: conjugate/negative bits, meta kernels that
disagree with the CPU kernel (batch norm in eval, ``addbmm_``), and the one documented
difference (``prod``'s backward, see ``test_opinfo.DIFFERENCES``)."""

from __future__ import annotations

import torch
from torch import nn

from d2l_async.torch_async import asynchronous


def test_conjugate_and_negative_views_of_queued_tensors():
    torch.manual_seed(0)
    z = torch.randn(4, dtype=torch.cfloat)
    expected = [(z.conj() * 2), (z.conj().neg() + z), torch.fft.hfft(z), torch.view_as_real(z.conj().resolve_conj())]
    with asynchronous():
        torch.manual_seed(0)
        z = torch.randn(4, dtype=torch.cfloat)
        got = [(z.conj() * 2), (z.conj().neg() + z), torch.fft.hfft(z), torch.view_as_real(z.conj().resolve_conj())]
        got = [g.clone() for g in got]
    assert all(torch.equal(a, b) for a, b in zip(got, expected))


def test_complex_backward_equals_eager():
    def f(z):
        return (z * z.conj()).real.sum() + torch.view_as_real(z.conj() * z).sum()
    z = torch.randn(5, dtype=torch.cfloat, requires_grad=True)
    f(z).backward()
    expected = z.grad.clone()
    z.grad = None
    with asynchronous():
        w = z.detach().clone().requires_grad_()
        f(w).backward()
        got = w.grad.clone()
    assert torch.equal(got, expected)


def test_batch_norm_in_eval_mode_saves_empty_statistics_as_the_cpu_kernel_does():
    x, w, b, rm, rv = torch.randn(4, 3), torch.randn(3), torch.randn(3), torch.zeros(3), torch.ones(3)
    expected = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)
    with asynchronous():
        out = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)
        shapes = [tuple(t.shape) for t in out]
        data = [tuple(t.numpy().shape) for t in out]
    assert shapes == data == [tuple(t.shape) for t in expected]


def test_resnet_style_batch_norm_eval_forward_equals_eager():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU()).eval()
    X = torch.randn(2, 3, 6, 6)
    expected = net(X)
    with asynchronous():
        got = net(X).detach().clone()
    assert torch.equal(got, expected.detach())


def test_an_inplace_op_that_resizes_its_input_keeps_the_wrapper_in_step():
    """``x.addbmm_`` on a (1,) tensor: eager's CPU kernel resizes x to (5, 10), the meta kernel
    refuses; the op runs synchronously and the wrapper takes its data's shape."""
    g = torch.Generator().manual_seed(0)
    b1, b2 = torch.randn(3, 5, 4, generator=g), torch.randn(3, 4, 10, generator=g)
    x = torch.ones(1)
    x.addbmm_(b1, b2)
    with asynchronous():
        y = torch.ones(1)
        y.addbmm_(b1, b2)
        shape, data = tuple(y.shape), y.numpy().copy()
    assert shape == tuple(x.shape) == (5, 10)
    assert (data == x.numpy()).all()


def test_prod_backward_is_within_an_ulp_of_eager():
    """The documented difference: torch picks prod's backward formula by whether the input is a
    tensor subclass (``isTensorSubclassLike``); the wrapper is one, so it takes the zero-safe
    branch, which rounds differently in the last bit.  Close, not bitwise."""
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(6, generator=g) + 0.5).requires_grad_()
    x.prod().backward()
    expected = x.grad.clone()
    with asynchronous():
        w = x.detach().clone().requires_grad_()
        w.prod().backward()
        got = w.grad.clone()
    torch.testing.assert_close(got, expected, rtol=2e-7, atol=0)
