"""The torch functions that change while a block is open, and why (:func:`patch_torch`, :func:`unpatch_torch`).

* torch's global RNG functions (``torch.manual_seed``, ``seed``, ``get_rng_state``,
  ``set_rng_state``, and their ``torch.random`` twins) first wait for the random ops already
  queued: their state is shared with the workers;
* process-wide settings (``set_default_dtype``, ...: ``._state.GLOBAL_SETTERS``) are a barrier;
* ``plain.data = t`` of a tensor made outside the block waits for ``t``'s data (``Module._apply``:
  ``model.double()``);
* ``copy.deepcopy`` of a plain tensor makes an asynchronous copy;
* C++ that reads host tensors from memory gets plain ones: ``torch.ctc_loss``'s lengths,
  ``pad_packed_sequence``'s lengths;
* lazy modules' uninitialized parameters are made plain and made asynchronous once initialized
  (``._module.lazy_patches``);
* ``torch.compile`` and ``torch.export.export`` raise :class:`UnsupportedTorchError` (they cannot
  trace storage-less tensors).

The first block to open installs them, the last to close restores torch's own.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import threading
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import _disable_current_modes

from ..engine.core import hold_gc_freeze, release_gc_freeze
from ._compat import UnsupportedTorchError
from ._mode import current_runtime
from ._module import lazy_patches
from ._runtime import CACHE, live_runtimes
from ._schema import func_info
from ._state import GLOBAL_SETTERS
from ._tensor import AsyncTensor

__all__ = ["patch_torch", "unpatch_torch"]

_RNG_FUNCS = ("manual_seed", "seed", "get_rng_state", "set_rng_state")
_patch_lock = threading.Lock()
_patched: dict[tuple[Any, str], Callable] = {}
_open_blocks = [0]


def _rng_guard(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        for rt in live_runtimes():
            rt.wait_rng(f"RNG state ({fn.__name__})")
        return fn(*args, **kwargs)
    guarded.__wrapped_by_d2l_async__ = True
    return guarded


def _setting_guard(fn: Callable) -> Callable:
    """A process-wide setting (``set_default_dtype``, ...): every queued op runs under the old
    value first (see ._state); cached metadata made under the old default dtype is dropped."""
    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        for rt in live_runtimes():
            rt.drain(f"torch.{fn.__name__}")
        try:
            return fn(*args, **kwargs)
        finally:
            CACHE.check_default_dtype()
    guarded.__wrapped_by_d2l_async__ = True
    return guarded


_DATA = torch._C.TensorBase.data  # the C descriptor behind Tensor.data


def _get_data(self: torch.Tensor) -> torch.Tensor:
    return _DATA.__get__(self)


def _set_data(self: torch.Tensor, value: torch.Tensor) -> None:
    """``plain.data = t`` while a block is open: a plain tensor cannot take a storage-less one
    (C++ copies the wrapper's missing storage: the interpreter crashed on ``model.double()`` of a
    model made outside, whose ``Module._apply`` assigns ``param.data``), so it takes ``t``'s data,
    once that is there (a blocking point).  The tensor keeps its identity, as in eager torch."""
    if type(value) is AsyncTensor and type(self) is not AsyncTensor:
        value = value._rt.value(value, "assign .data of a tensor made outside the block")
    _DATA.__set__(self, value)


_PLAIN_DATA = property(_get_data, _set_data, doc=_DATA.__doc__)


def _host_lengths(lengths: Any) -> Any:
    """Lengths as a plain CPU int64 tensor: lists, and tensors made in the block (waited for)."""
    if type(lengths) is AsyncTensor:
        lengths = lengths._rt.value(lengths, "ctc_loss lengths")
    elif not isinstance(lengths, (list, tuple)):
        return lengths
    with _disable_current_modes():
        return torch.as_tensor(lengths, dtype=torch.long)


def _ctc_guard(fn: Callable) -> Callable:
    """``torch.ctc_loss`` (``nn.CTCLoss``) reads its lengths in C++ before any op is dispatched: a
    tensor's data, and for list lengths a tensor it fills from them itself (the "mean" reduction):
    neither can be a storage-less wrapper.  It gets plain int64 tensors, the values eager's."""
    @functools.wraps(fn)
    def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, *args: Any,
                 **kwargs: Any) -> Any:
        if current_runtime() is None:
            return fn(log_probs, targets, input_lengths, target_lengths, *args, **kwargs)
        return fn(log_probs, targets, _host_lengths(input_lengths), _host_lengths(target_lengths), *args, **kwargs)
    ctc_loss.__wrapped_by_d2l_async__ = True
    return ctc_loss


_EMPTY = torch.ops.aten.empty.memory_format
_host_lock = threading.Lock()
_host_depth = [0]


@contextlib.contextmanager
def _host_allocations() -> Iterator[None]:
    """Inside, ``aten.empty`` makes plain tensors at once: for C++ that allocates a tensor and
    fills it through its pointer, before any op is dispatched.  (The op's facts change for the
    while -- nothing on the hot path checks a flag; another thread's ``torch.empty`` then gets a
    plain tensor too, which is correct, only not queued.)"""
    with _host_lock:
        if _host_depth[0] == 0:
            _EMPTY._d2l_async_info = dataclasses.replace(func_info(_EMPTY), here=True)
        _host_depth[0] += 1
    try:
        yield
    finally:
        with _host_lock:
            _host_depth[0] -= 1
            if _host_depth[0] == 0:
                _EMPTY._d2l_async_info = func_info(_EMPTY)


def _pad_packed_guard(fn: Callable) -> Callable:
    """``pad_packed_sequence``'s kernel fills its ``lengths`` output through a pointer: a host tensor."""
    @functools.wraps(fn)
    def _pad_packed_sequence(*args: Any, **kwargs: Any) -> Any:
        if current_runtime() is None:
            return fn(*args, **kwargs)
        with _host_allocations():
            return fn(*args, **kwargs)
    _pad_packed_sequence.__wrapped_by_d2l_async__ = True
    return _pad_packed_sequence


def _deepcopy_guard(fn: Callable) -> Callable:
    """``copy.deepcopy`` of a plain tensor while a block is open: torch's own copies the storage, then
    makes the new tensor with ``new_empty`` -- an asynchronous tensor, refused ("works for subclass
    types that implement new_empty()").  A copy made inside the block is asynchronous, as
    ``Parameter.__deepcopy__``'s ``self.data.clone()`` makes it: one queued copy of the whole storage
    per ``deepcopy`` call (views of one storage stay views of one copy, as in eager torch), the
    tensor a view of it, its attributes and grad deep-copied as torch does."""
    @functools.wraps(fn)
    def __deepcopy__(self: torch.Tensor, memo: dict) -> torch.Tensor:
        if type(self) is not torch.Tensor or current_runtime() is None or not self.is_leaf or \
                self.layout is not torch.strided or self.device.type != "cpu" or id(self) in memo:
            return fn(self, memo)  # subclasses, non-leaves (eager's error), sparse, CUDA: torch's own
        with _disable_current_modes():
            storage = self.untyped_storage()
            whole = torch.empty(0, dtype=torch.uint8).set_(storage)
        key = ("d2l_async storage", storage.data_ptr(), storage.nbytes())
        copied = memo.get(key)
        if copied is None:
            copied = memo[key] = whole.clone()  # queued: it reads the storage after earlier writes
        with torch.no_grad():
            new = copied.view(self.dtype).as_strided(self.size(), self.stride(), self.storage_offset())
        if self.requires_grad:
            new.requires_grad_()
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        memo[id(self)] = new
        return new
    __deepcopy__.__wrapped_by_d2l_async__ = True
    return __deepcopy__


def _no_compile(*args: Any, **kwargs: Any) -> Any:
    raise UnsupportedTorchError(
        "torch.compile is not supported inside `with d2l_async.asynchronous():` (its tensors have no "
        "storage to trace); compile outside the block, or leave the block for the compiled part")


def _no_export(*args: Any, **kwargs: Any) -> Any:
    raise UnsupportedTorchError(
        "torch.export.export is not supported inside `with d2l_async.asynchronous():` (its tensors have no "
        "storage to trace); export outside the block a model whose tensors were made outside every block")


def patch_torch() -> None:
    with _patch_lock:
        _open_blocks[0] += 1
        if _open_blocks[0] > 1:
            return
        hold_gc_freeze()  # queued ops outlive young collections: see engine.core
        for mod in (torch, torch.random):
            for name in _RNG_FUNCS:
                fn = getattr(mod, name, None)
                if fn is not None and not getattr(fn, "__wrapped_by_d2l_async__", False):
                    _patched[(mod, name)] = fn
                    setattr(mod, name, _rng_guard(fn))
        for name in GLOBAL_SETTERS:
            fn = getattr(torch, name, None)
            if fn is not None and not getattr(fn, "__wrapped_by_d2l_async__", False):
                _patched[(torch, name)] = fn
                setattr(torch, name, _setting_guard(fn))
        for owner, name, new in lazy_patches():
            _patched[(owner, name)] = owner.__dict__[name]
            setattr(owner, name, new)
        _patched[(torch, "compile")] = torch.compile
        torch.compile = _no_compile
        _patched[(torch.export, "export")] = torch.export.export
        torch.export.export = _no_export
        _patched[(torch, "ctc_loss")] = torch.ctc_loss
        torch.ctc_loss = _ctc_guard(torch.ctc_loss)
        _patched[(torch._VF, "_pad_packed_sequence")] = torch._VF._pad_packed_sequence
        torch._VF._pad_packed_sequence = _pad_packed_guard(torch._VF._pad_packed_sequence)
        torch.Tensor.data = _PLAIN_DATA  # AsyncTensor's own .data property comes first for it
        _patched[(torch.Tensor, "__deepcopy__")] = torch.Tensor.__deepcopy__
        torch.Tensor.__deepcopy__ = _deepcopy_guard(torch.Tensor.__deepcopy__)


def unpatch_torch() -> None:
    with _patch_lock:
        _open_blocks[0] -= 1
        if _open_blocks[0] > 0:
            return
        for (mod, name), fn in _patched.items():
            setattr(mod, name, fn)
        _patched.clear()
        del torch.Tensor.data  # TensorBase's descriptor again
        release_gc_freeze()
