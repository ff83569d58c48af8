"""Make an ``nn.Module``'s parameters asynchronous, without ``Module._apply``.

Parameters made outside an ``asynchronous()`` block are plain tensors; every optimizer step writes
into them, and a write into a plain tensor runs synchronously (other code may read its memory
directly), so a training loop would block at every step.  :func:`make_async` swaps each parameter
and buffer for an asynchronous one holding the same data (no copy), so the loop runs queued.

It swaps them explicitly, module by module (``module._parameters[name] = ...``), because
``Module._apply`` -- behind ``.to()``, ``.double()``, ``.cpu()`` -- assigns ``param.data``, which
on a storage-less tensor crashed the interpreter in the feasibility prototype (issue 14).  For the
same reason an asynchronous model's ``_apply`` is replaced by one that converts each tensor with
an ordinary (queued) op and swaps it in the same explicit way.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from ._context import current_runtime
from ._runtime import AsyncRuntime
from ._tensor import AsyncTensor

__all__ = ["make_async"]


def _swap(module: nn.Module, convert: Callable[[torch.Tensor], torch.Tensor]) -> None:
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is None:
                continue
            new = nn.Parameter(convert(p.detach()), requires_grad=p.requires_grad)
            if p.grad is not None:
                new.grad = convert(p.grad.detach())
            m._parameters[name] = new
        for name, b in list(m._buffers.items()):
            if b is not None:
                m._buffers[name] = convert(b)
        m._apply = _safe_apply(m)


def _safe_apply(module: nn.Module) -> Callable:
    def _apply(fn: Callable, recurse: bool = True) -> nn.Module:  # noqa: ARG001 - Module._apply's signature
        _swap(module, lambda t: fn(t))
        return module
    return _apply


def make_async(module: nn.Module, runtime: AsyncRuntime | None = None) -> nn.Module:
    """Swap ``module``'s parameters and buffers for asynchronous ones (same data, no copy); returns it.

    Call it inside the ``asynchronous()`` block that will train the model (or pass its runtime).
    Optimizers must be created *after* it: they hold the parameter objects.

    Raises:
        RuntimeError: outside any block and without ``runtime``.
        TypeError: ``module`` is not an ``nn.Module``.
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"make_async expects an nn.Module, got {type(module).__name__}")
    rt = runtime if runtime is not None else current_runtime()
    if rt is None or rt.closed:
        raise RuntimeError("make_async(model) needs an open block: call it inside "
                           "`with d2l_async.asynchronous():`, or pass runtime=")

    def adopt(t: torch.Tensor) -> torch.Tensor:
        if type(t) is AsyncTensor:
            return t if t._rt is rt else rt.adopt(t._rt.value(t, "make_async"))
        if t.device.type != "cpu":
            raise ValueError(f"make_async: a tensor on {t.device}; asynchronous() runs CPU tensors "
                             "(CUDA is asynchronous already)")
        return rt.adopt(t)
    _swap(module, adopt)
    return module
