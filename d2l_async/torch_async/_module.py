"""Make an ``nn.Module``'s parameters asynchronous *in place*: every holder keeps working.

Parameters made outside an ``asynchronous()`` block are plain tensors; every optimizer step writes
into them, and a write into a plain tensor runs synchronously (other code may read its memory
directly), so a training loop would block at every step.  :func:`make_async` turns each parameter
and buffer into an asynchronous one holding the same data (no copy), so the loop runs queued.

In place, because a parameter is held by more than its module: the optimizer made before it
(``d2l.Trainer.fit`` calls ``configure_optimizers()`` before the first batch), a second module
that shares it (tied weights: GPT-2's ``lm_head``/``wte``, BERT's decoder, T5's ``shared``), the
reader's own ``w = net.weight``.  ``torch.utils.swap_tensors`` -- what
``torch.__future__.set_swap_module_params_on_conversion(True)`` uses -- swaps the *contents* of
two tensor objects, so the ``Parameter`` object stays the same and becomes asynchronous; a
parameter reached twice is swapped once, so ``parameters()`` and the optimizer's state stay
eager's.  Where torch refuses the swap (a weak reference to the parameter, or more references to
its data than an autograd graph's one), the module gets a new parameter instead and the old object
is marked: an optimizer step that would update it raises :class:`StaleParameterError`, saying
what to do, instead of training a tensor nobody reads.

Lazy modules (``nn.LazyLinear``, ``nn.LazyConv2d``: the book's concise models, LeNet, ResNet blocks)
hold *uninitialized* parameters until their first forward.  While a block is open
(:func:`lazy_patches`, installed by :mod:`._context`) such a parameter is made and materialized as
a plain tensor -- ``torch.Tensor._make_subclass`` refuses a storage-less tensor -- and once the
module's ``initialize_parameters`` has run (its random init: blocking points, in program order)
each parameter is made asynchronous in place, before the forward that uses them.
:func:`make_async` leaves uninitialized parameters alone: that happens when they are initialized
inside a block.

Conversions (``model.double()``, ``.to(dtype)``) go through torch's own ``Module._apply``: it
assigns ``param.data``, which an asynchronous tensor follows with a queued op
(``AsyncTensor.data``), and a plain tensor follows by waiting for the new data (see ._context).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterator

import torch
from torch import nn
from torch.nn.parameter import UninitializedTensorMixin
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.utils._python_dispatch import _disable_current_modes

from ._mode import current_runtime
from ._meta import meta_of
from ._runtime import AsyncRuntime
from ._tensor import _FIELDS, AsyncTensor
from .._args import instance

__all__ = ["make_async", "lazy_patches", "StaleParameterError"]

#: marks a parameter object that was replaced rather than swapped in place (its reason)
_STALE = "_d2l_async_replaced"


class StaleParameterError(RuntimeError):
    """An optimizer would update a parameter that ``make_async`` had to replace, not swap in place.

    Attributes:
        parameter: where it was (``"Linear.weight"``).
        reason: why torch refused to swap it in place.
    """

    def __init__(self, message: str, parameter: str, reason: str) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.reason = reason


def _adopter(rt: AsyncRuntime) -> Callable[[torch.Tensor], torch.Tensor]:
    """Plain tensor -> a finished asynchronous tensor over the same memory (no op to wait for).

    One variable per storage (the runtime's plain variable): two parameters that are views of
    one buffer, or a tensor the block already read as plain, stay ordered against each other."""
    def adopt(t: torch.Tensor) -> torch.Tensor:
        if type(t) is AsyncTensor:
            if t._rt is rt:
                return t
            t = t._rt.value(t, "make_async")  # another block's tensor: its data
        elif t.device.type != "cpu":
            raise ValueError(f"make_async: a tensor on {t.device}; asynchronous() runs CPU tensors "
                             "(CUDA is asynchronous already)")
        with _disable_current_modes():
            real = t.detach()
        return AsyncTensor.make(rt, meta_of(real), rt._plain_var(real), real)
    return adopt


#: a tensor's hooks that live on its Python object while autograd calls them through a C++ hook
#: on the tensor underneath: ``register_hook`` (gradient), ``register_post_accumulate_grad_hook``
_HOOK_DICTS = ("_backward_hooks", "_post_accumulate_grad_hooks")


def _keep_hooks(holder: torch.Tensor, hooks: dict) -> None:
    """Give ``holder``'s tensor the hooks ``hooks`` (attribute -> the dict ``torch`` keeps them in).

    Assigning the dict registers the C++ hook that calls it on the tensor ``holder`` holds now
    (torch's setter).  ``swap_tensors`` swaps that tensor and leaves the dicts on the Python
    object, so without this a gradient mask registered before ``make_async`` stopped masking and a
    post-accumulate hook never ran.  The same dict, so a handle's ``remove()`` still removes it."""
    for name, d in hooks.items():
        setattr(holder, name, d)


def _hooks(t: torch.Tensor) -> dict:
    return {name: d for name in _HOOK_DICTS if (d := getattr(t, name, None))}


def _swap_in_place(old: torch.Tensor, new: torch.Tensor) -> str:
    """Make the object ``old`` hold ``new``'s tensor (identity kept, hooks kept); "" or why torch refused.

    ``new`` must have no queued op that fills it (its worker would fill the other object)."""
    for k, v in old.__dict__.items():  # the reader's attributes (and Buffer's persistent) stay
        if k not in _FIELDS and k not in new.__dict__:  # AsyncTensor's fields are new's
            new.__dict__[k] = v
    hooks = _hooks(old)
    try:
        torch.utils.swap_tensors(old, new)
    except RuntimeError as exc:
        _keep_hooks(new, hooks)  # the replacement trains: it runs the hooks
        return str(exc).splitlines()[0]
    _keep_hooks(old, hooks)
    return ""


def _make_param(t: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    if type(t) is AsyncTensor:  # nn.Parameter(t) would queue a detach: its output is pending
        t.requires_grad_(requires_grad)
        t._is_param = True
        return t
    return nn.Parameter(t, requires_grad=requires_grad)


def _convert_all(module: nn.Module, convert: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Every parameter (and its grad) and buffer of ``module``, converted in place; each once."""
    done: dict[int, torch.Tensor] = {}  # id(original) -> what its holders must hold now
    rnns = [m for m in module.modules() if isinstance(m, nn.RNNBase)]
    for m in rnns:  # an RNN keeps weak references to its weights; RNNBase._apply drops them too
        m._flat_weight_refs = []
    for m in module.modules():
        for table, is_param in ((m._parameters, True), (m._buffers, False)):
            for name, old in list(table.items()):
                if old is None or isinstance(old, UninitializedTensorMixin):  # converted once initialized
                    continue
                now = done.get(id(old))
                if now is None:
                    now = done[id(old)] = _convert_one(old, convert, is_param, f"{type(m).__name__}.{name}")
                if now is not old:
                    table[name] = now  # the fallback: a replacement, the same one for every holder
    for m in rnns:
        m._init_flat_weights()


def _convert_one(old: torch.Tensor, convert: Callable, is_param: bool, where: str) -> torch.Tensor:
    with torch.no_grad():
        data = convert(old)
    if data is old:
        return old
    if is_param:
        new = _make_param(data, old.requires_grad)
    else:
        new = data.requires_grad_(old.requires_grad)  # a buffer in autograd (its hooks need it) stays in it
    if old.grad is not None:
        new.grad = convert(old.grad)
    why = _swap_in_place(old, new)
    if not why:
        return old
    old.__dict__[_STALE] = (where, why)
    _guard_optimizers()
    return new


_GUARD: list = []


def _guard_optimizers() -> None:
    """From the first replacement on: an optimizer step over a replaced parameter raises."""
    if not _GUARD:
        _GUARD.append(register_optimizer_step_pre_hook(_check_step))


def _check_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    for group in optimizer.param_groups:
        for p in group["params"]:
            stale = p.__dict__.get(_STALE)
            if stale is not None:
                where, why = stale
                raise StaleParameterError(
                    f"{type(optimizer).__name__}.step() would update {where}, which make_async could not make "
                    f"asynchronous in place ({why}), so the module holds a new parameter: this one would train "
                    "nothing. Make the optimizer after make_async(model), or drop what holds the parameter "
                    "(a weak reference, the output of an earlier forward) before make_async", where, why)


def make_async(module: nn.Module, runtime: AsyncRuntime | None = None) -> nn.Module:
    """Make ``module``'s parameters and buffers asynchronous, in place (same objects, same data); returns it.

    Call it inside the ``asynchronous()`` block that will train the model (or pass its runtime).
    Optimizers made before it keep working (they hold the same parameter objects), and tied
    weights stay tied.

    Returns:
        ``module`` itself, its parameters and buffers now asynchronous.

    Raises:
        RuntimeError: outside any block and without ``runtime``, or the runtime's block is closed.
        TypeError: ``module`` is not an ``nn.Module``.
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"make_async expects an nn.Module, got {type(module).__name__}")
    if runtime is not None:
        instance("runtime", runtime, AsyncRuntime, what="d2l_async.torch_async.AsyncRuntime or None")
    rt = runtime if runtime is not None else current_runtime()
    if rt is None or rt.closed:
        raise RuntimeError("make_async(model) needs an open block: call it inside "
                           "`with d2l_async.asynchronous():`, or pass runtime=")
    _convert_all(module, _adopter(rt))
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


def _then_make_async(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def initialize_parameters(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        out = fn(self, *args, **kwargs)
        rt = current_runtime()
        if rt is not None and not rt.closed and not getattr(self, "has_uninitialized_params", lambda: False)():
            _convert_all(self, _adopter(rt))  # in place, before the forward that reads them
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
            patches.append((cls, "initialize_parameters", _then_make_async(fn)))
    return patches
