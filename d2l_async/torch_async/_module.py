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

Lazy modules (``nn.LazyLinear``, ``nn.LazyConv2d``: LeNet, the book's ResNet and RNN models)
hold *uninitialized* parameters until their first forward.  While a block is open
(:func:`lazy_patches`, installed by :mod:`._context`) such a parameter is made and materialized as
a plain tensor -- ``torch.Tensor._make_subclass`` refuses a storage-less tensor -- and once the
module's ``initialize_parameters`` has run (its random init: blocking points, in program order)
the module's parameters are swapped for asynchronous ones, before the forward that uses them.
:func:`make_async` leaves uninitialized parameters alone: the same swap happens when they are
initialized inside a block.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.nn.parameter import UninitializedTensorMixin
from torch.utils._python_dispatch import _disable_current_modes

from ._context import current_runtime
from ._runtime import AsyncRuntime
from ._tensor import AsyncTensor

__all__ = ["make_async", "lazy_patches"]


def _swap(module: nn.Module, convert: Callable[[torch.Tensor], torch.Tensor]) -> None:
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is None or isinstance(p, UninitializedTensorMixin):  # swapped once initialized
                continue
            new = nn.Parameter(convert(p.detach()), requires_grad=p.requires_grad)
            if p.grad is not None:
                new.grad = convert(p.grad.detach())
            m._parameters[name] = new
        for name, b in list(m._buffers.items()):
            if b is not None and not isinstance(b, UninitializedTensorMixin):
                m._buffers[name] = convert(b)
        m._apply = _safe_apply(m)


def _safe_apply(module: nn.Module) -> Callable:
    def _apply(fn: Callable, recurse: bool = True) -> nn.Module:  # noqa: ARG001 - Module._apply's signature
        _swap(module, lambda t: fn(t))
        return module
    return _apply


def _adopter(rt: AsyncRuntime) -> Callable[[torch.Tensor], torch.Tensor]:
    def adopt(t: torch.Tensor) -> torch.Tensor:
        if type(t) is AsyncTensor:
            return t if t._rt is rt else rt.adopt(t._rt.value(t, "make_async"))
        if t.device.type != "cpu":
            raise ValueError(f"make_async: a tensor on {t.device}; asynchronous() runs CPU tensors "
                             "(CUDA is asynchronous already)")
        return rt.adopt(t)
    return adopt


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

    _swap(module, _adopter(rt))
    return module


# -- lazy modules while a block is open ----------------------------------------------------------
def _without_modes(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def plain(*args: Any, **kwargs: Any) -> Any:
        if current_runtime() is None:
            return fn(*args, **kwargs)
        with _disable_current_modes():  # a plain tensor: _make_subclass refuses a storage-less one
            return fn(*args, **kwargs)
    return plain


def _then_swap(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def initialize_parameters(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        out = fn(self, *args, **kwargs)
        rt = current_runtime()
        if rt is not None and not rt.closed and not getattr(self, "has_uninitialized_params", lambda: False)():
            _swap(self, _adopter(rt))  # before the forward that reads them (autograd holds the objects)
        return out
    return initialize_parameters


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def lazy_patches() -> list[tuple[Any, str, Any]]:
    """``(owner, name, replacement)`` for lazy modules inside a block (installed by ._context)."""
    from torch.nn.modules.lazy import LazyModuleMixin
    from torch.nn.parameter import UninitializedBuffer, UninitializedParameter
    patches: list[tuple[Any, str, Any]] = []
    for cls in (UninitializedParameter, UninitializedBuffer):
        new = cls.__dict__["__new__"]
        patches.append((cls, "__new__", staticmethod(_without_modes(new.__func__))))
    patches.append((UninitializedTensorMixin, "materialize",
                    _without_modes(UninitializedTensorMixin.__dict__["materialize"])))
    for cls in {LazyModuleMixin, *_subclasses(LazyModuleMixin)}:
        fn = cls.__dict__.get("initialize_parameters")
        if fn is not None and callable(fn):
            patches.append((cls, "initialize_parameters", _then_swap(fn)))
    return patches
