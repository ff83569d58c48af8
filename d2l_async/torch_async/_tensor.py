"""``AsyncTensor``: a tensor whose value is being computed -- metadata now, data later.

What ``y = x + 1`` returns inside ``d2l_async.asynchronous()``.  It is a torch *wrapper subclass*
(``torch.Tensor._make_wrapper_subclass``): a real ``torch.Tensor`` as far as Python, autograd and
``nn.Module`` are concerned (shape, dtype, ``requires_grad``, ``grad_fn``), but with **no
storage**.  Its data lives in ``_real``, a plain tensor that a worker thread fills in when the op
that makes it has run.  Storage-less matters: code that reads raw memory cannot read unfinished
data by accident; it has to come through one of the methods below, which wait first.

Fields (set by the runtime, read by the worker)::

    _m     (shape, stride, storage_offset, dtype): the metadata the runtime reads; the wrapper's own
           C++ sizes and strides hold the same, so ``x.shape`` and ``x.stride()`` never reach
           Python (most of an op's calls were size queries); an in-place ``t_()`` or ``resize_()``
           changes both at once (:func:`set_meta`)
    _var   the engine variable of its *storage*: views share their base's, so a write through
           any view orders against reads of any other (the rules of d2l_async.engine.core)
    _own   a view's own variable, written by the op that makes the view: its readers wait for
           that op (None for a tensor with storage of its own: ``_var`` does that job)
    _op    the op that makes ``_real`` (None when it was made already)
    _real  the plain tensor, once ``_op`` has run
    _rt    the runtime (``asynchronous()`` block) that queued it

Blocking points -- the methods that need the data, and so wait for it, recorded as a *block*
with the user's line, as the engine's blockers are: ``print``/``repr`` ("print"), ``.numpy()``
and ``np.asarray`` ("numpy"; these and ``__dlpack__`` hand out the memory itself, so they also
wait for the queued ops that *read* it: a write through the array is never seen by them), ``.tolist()`` ("tolist"), pickling and ``torch.save`` ("pickle"),
``copy.deepcopy`` ("deepcopy"), ``np.from_dlpack`` ("dlpack"), and through the dispatcher
``.item()``, ``float()``, ``bool()``, ``if t:`` ("item"), and the elements of ``torch.tensor([...])``
("item": see ``__float__``).
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch

from ._meta import meta_of, set_bits

__all__ = ["AsyncTensor", "set_dispatch", "set_meta"]

_CPU = torch.device("cpu")
_DISPATCH: list[Callable] = []
_DATA = torch._C.TensorBase.data  # the C descriptor behind Tensor.data
#: the fields above: the wrapper's own state, never copied onto another tensor
_FIELDS = frozenset(("_m", "_var", "_own", "_op", "_real", "_rt", "_host"))
_BASE = torch._C.TensorBase
_PYTHON_KEY = torch._C.DispatchKey.Python
_excluded = torch._C._dispatch_tls_is_dispatch_key_excluded


def set_meta(t: "AsyncTensor", m: tuple) -> None:
    """Give ``t`` the metadata ``m`` (``t_()``, ``resize_()``, ``set_()``): in ``_m`` and in the
    wrapper's C++ sizes and strides, which ``Tensor.data``'s setter copies from a bare wrapper
    (the tensor keeps its identity, autograd state and version counter)."""
    if t._m != m:
        with torch._C._DisableTorchDispatch():  # its _has_compatible_shallow_copy_type check is C++'s
            _DATA.__set__(t, AsyncTensor.bare(m))
        t._m = m


def set_dispatch(fn: Callable) -> None:
    """Install the runtime's dispatch function (the runtime module imports this one)."""
    _DISPATCH[:] = [fn]


class AsyncTensor(torch.Tensor):
    """A pending tensor (see the module docstring).  Made only by the runtime."""

    _m: tuple
    _real: torch.Tensor | None = None  # class defaults: two attribute writes fewer per op
    _op: Any = None
    _own: Any = None  # a view's own var (see _runtime): None for a tensor with its own storage
    _host = False  # a host scalar: torch.tensor(number), 0-dim (see _sync.SyncPaths.try_here)

    @staticmethod
    def bare(m: tuple) -> "AsyncTensor":
        """A wrapper with metadata ``m`` and nothing else (:meth:`make` fills in the rest)."""
        t = torch.Tensor._make_wrapper_subclass(AsyncTensor, m[0], strides=m[1], storage_offset=m[2],
                                                dtype=m[3], device=_CPU, requires_grad=False)
        t._m = m
        if len(m) > 4:  # a conjugate or negative view: the wrapper carries the bit, as its data does
            set_bits(t, m[4])
        return t

    @staticmethod
    def make(rt: Any, m: tuple, var: Any, real: torch.Tensor | None = None, op: Any = None) -> "AsyncTensor":
        """Returns a wrapper of runtime ``rt`` with metadata ``m`` and storage variable ``var``;
        ``real`` is its data when it exists, ``op`` the queued op that will make it."""
        t = AsyncTensor.bare(m)
        t._var = var
        t._rt = rt
        if real is not None:
            t._real = real
        if op is not None:
            t._op = op
        return t

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # reached when no asynchronous() mode is active on this thread (after the block, or on
        # another thread): the tensor's own runtime queues it if still open, else it runs eagerly
        return _DISPATCH[0](func, args, kwargs or {})

    # -- the blocking points -----------------------------------------------------------------
    def _read(self, reason: str, fn: Callable[[torch.Tensor], Any], escapes: bool = False) -> Any:
        """``fn(data)`` once the data is there, with no dispatch mode active: torch's own
        ``numpy()``/``tolist()`` call ops (``detach``) that must not be queued.  ``escapes``: the
        memory itself is handed out, so queued readers are waited for too (``rt.escape``)."""
        real = self._rt.escape(self, reason) if escapes else self._rt.value(self, reason)
        from torch.utils._python_dispatch import _disable_current_modes
        with _disable_current_modes():
            out = fn(real)
        if escapes:
            self._rt.hold_escaped(self, out)
        return out

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        text = self._read("print", repr)
        if self.grad_fn is not None:
            text = f"{text[:-1]}, grad_fn=<{type(self.grad_fn).__name__}>)"
        elif self.requires_grad:
            text = f"{text[:-1]}, requires_grad=True)"
        return text

    def __format__(self, spec: str) -> str:
        if self.dim() == 0:
            return self.item().__format__(spec)
        return format(repr(self), spec)

    def numpy(self, *, force: bool = False):
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        return self._read("numpy", lambda r: r.numpy(force=force), escapes=True)

    def __array__(self, dtype: Any = None, copy: Any = None):
        arr = self._read("numpy", lambda r: r.detach().numpy(), escapes=True)
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def tolist(self):
        return self._read("tolist", lambda r: r.tolist())

    # Python numbers.  ``torch.tensor([loss0, loss1])`` (and ``as_tensor``, ``torch.Tensor(...)``)
    # builds its tensor in C++ with the dispatch to Python turned off, and asks each element for
    # its number there: torch's own ``__float__`` then ran the CPU kernel on the storage-less
    # wrapper ("data is not allocated yet").  There, the number is read from the data, once it is
    # there (a blocking point, recorded as ``item``); everywhere else these are torch's own.
    def __float__(self) -> float:
        if _excluded(_PYTHON_KEY):
            return float(self._rt.value(self, "item"))
        return _BASE.__float__(self)

    def __int__(self) -> int:
        if _excluded(_PYTHON_KEY):
            return int(self._rt.value(self, "item"))
        return _BASE.__int__(self)

    def __index__(self) -> int:
        if _excluded(_PYTHON_KEY):
            return self._rt.value(self, "item").__index__()
        return _BASE.__index__(self)

    def __complex__(self) -> complex:
        if _excluded(_PYTHON_KEY):
            return complex(self._rt.value(self, "item"))
        return _BASE.__complex__(self)

    def __dlpack__(self, *args: Any, **kwargs: Any):
        # numpy.from_dlpack and friends read the memory directly: hand them the data, once it is there
        return self._read("dlpack", lambda r: r.__dlpack__(*args, **kwargs), escapes=True)

    def __reduce_ex__(self, proto: int):
        # pickled (torch.save, multiprocessing) as the plain tensor it holds
        return self._read("pickle", lambda r: r.detach().__reduce_ex__(proto))

    def __deepcopy__(self, memo: dict) -> torch.Tensor:
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:  # torch.Tensor.__deepcopy__'s rule, and its words
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment.")
        real = self._read("deepcopy", lambda r: r.detach().clone())
        new = self._rt.adopt(real) if not self._rt.closed else real
        if self.requires_grad:
            new.requires_grad_(True)
        if getattr(self, "_is_param", False):
            new = torch.nn.Parameter(new, requires_grad=self.requires_grad)
        memo[id(self)] = new
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        new.__dict__.update(copy.deepcopy({k: v for k, v in self.__dict__.items() if k not in _FIELDS}, memo))
        return new

    @property
    def data(self) -> torch.Tensor:
        """``t.data``: returns ``t.detach()``, as torch does (a queued op, no wait)."""
        return self.detach()

    @data.setter
    def data(self, value: torch.Tensor) -> None:
        # ``param.data = new`` (Module._apply: .double(), .to()) changes the wrapper's dtype and
        # shape in C++; the data it stands for must follow, or the two disagree silently
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"data must be a tensor, not {type(value).__name__}")
        if self._rt.closed:  # after the block (model.double() then): the wrapper holds this data now
            if type(value) is AsyncTensor:
                value = value._rt.value(value, "assign .data")
            real = value.detach()
            set_meta(self, meta_of(real))
            self._real, self._op, self._own, self._var = real, None, None, self._rt._var_new()
            return
        if type(value) is not AsyncTensor:
            value = self._rt.adopt(value)
        _DATA.__set__(self, value)
        self._rt.rebind(self, value)

    def data_ptr(self) -> int:
        raise RuntimeError("this tensor is asynchronous (d2l_async.asynchronous): its data is not in "
                           "memory yet. Read it with .numpy() / .tolist() / .item(), which wait for it.")

    def untyped_storage(self):
        raise RuntimeError("this tensor is asynchronous (d2l_async.asynchronous) and has no storage; "
                           "wait for it with .numpy() or d2l_async.synchronize() and use that")
