"""``EngineArray``: a handle to a tensor that an engine will compute (MXNet's ``NDArray``).

Arithmetic on an array does not compute anything: it builds an op, pushes it to the engine and
returns a new array at once.  Its shape and dtype are known right away -- inferred by running the
real CPU kernel once on zero-strided stand-ins (one element each, whatever the shape; not torch's
``meta`` device, see ``_infer``), once per combination of op, shapes and dtypes, then cached -- so a
shape error surfaces at the line that caused it, with eager PyTorch's own message.  Its value exists only once a worker ran
the op; the calls that need the value -- ``wait_to_read``, ``item``, ``asnumpy``, ``numpy``,
``float``, ``bool``, ``int``, ``print`` -- are *blockers* and wait for it.

Each op calls the very function eager PyTorch calls (``torch.Tensor.__add__``,
``torch.Tensor.__rtruediv__``, ...), so an engine program computes bitwise what the same program
computes eagerly.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, NamedTuple

import numpy as np
import torch

from ._op import Device, EngineOp, EngineVar

__all__ = ["EngineArray"]

_T = torch.Tensor
_SCALARS = (int, float, bool, complex)
#: NumPy scalars are scalars, as in torch (``x + np.float64(2)``); not numpy's str, bytes, dates
_NP_SCALARS = (np.number, np.bool_)


def _negative(s: Any) -> bool:
    """``s < 0`` for the cache key of ``pow`` (``int ** -1`` is an error in torch); complex: False."""
    try:
        return bool(s < 0)
    except TypeError:  # a complex number has no order (`x ** 1j` failed on this)
        return False


class _Info(NamedTuple):
    shape: torch.Size
    dtype: torch.dtype
    nbytes: int


#: (fn, shapes, dtypes or scalar types) -> what the op makes.  Filled on first use.
_INFER: dict[tuple, _Info] = {}
#: What ``_INFER`` holds for an op torch declines (its dunder returned NotImplemented).
_DECLINED = _Info(torch.Size(), torch.float32, -1)


def _infer(key: tuple, fn: Callable, *args: Any, inplace: bool = False) -> _Info:
    """What ``fn`` makes from these arguments, cached under ``key``; raises what eager torch raises.

    The op runs once on stand-ins: zeros of the same dtypes, broadcast (stride 0) to the same
    shapes, so they hold one element whatever the shape (an in-place target must own its memory).
    Running the real kernel, not torch's ``meta`` device, matters twice: meta kernels skip some
    checks (``int ** -1``, ``bool - True``), and the first meta op of a process costs seconds.
    """
    stand_ins = []
    for i, a in enumerate(args):
        if isinstance(a, EngineArray):
            if inplace and i == 0:
                a = torch.zeros(a._shape, dtype=a._dtype)
            else:
                a = torch.zeros((), dtype=a._dtype).expand(a._shape)
        elif isinstance(a, np.ndarray):  # what torch makes of it depends on its dtype and shape only
            a = np.zeros(a.shape, dtype=a.dtype)
        stand_ins.append(a)
    out = fn(*stand_ins)
    if isinstance(out, np.ndarray):  # an ndarray operand (_run_nd makes it a tensor the same way)
        out = torch.as_tensor(out)
    if out is NotImplemented:  # torch declines (``x @ 2``): so do we, and Python raises its TypeError
        _INFER[key] = _DECLINED
        return _DECLINED
    if not isinstance(out, torch.Tensor):  # torch 2.3 with numpy 2.4: ``tensor == ndarray`` is a bool
        raise TypeError(f"{getattr(fn, '__name__', 'this op')} with these operands gives a {type(out).__name__}, "
                        f"not a tensor, in torch {torch.__version__}; convert the ndarray with "
                        "torch.as_tensor(...) first")
    info = _Info(out.shape, out.dtype, out.numel() * out.element_size())
    _INFER[key] = info
    return info


# -- what a worker runs: one tiny function per op shape (cheaper than a closure per op) ---------
def _run_aa(op: EngineOp) -> None:
    op.out._data = op.fn(op.reads[0]._data, op.arg._data)  # arg: the second array


def _run_as(op: EngineOp) -> None:
    op.out._data = op.fn(op.reads[0]._data, op.arg)  # arg: the scalar


def _run_nd(op: EngineOp) -> None:
    r = op.fn(op.reads[0]._data, op.arg)  # arg: the ndarray
    op.out._data = r if isinstance(r, torch.Tensor) else torch.as_tensor(r)


#: torch.Tensor dunder -> the Python operator it implements (an ndarray operand goes through Python's
#: whole binary-op protocol, as ``tensor + ndarray`` does in eager torch)
_PY_OPS: dict[Callable, Callable] = {}


def _python_op(fn: Callable) -> Callable:
    op = _PY_OPS.get(fn)
    if op is None:
        name = fn.__name__.strip("_")
        if name.startswith("r") and hasattr(operator, name[1:]) and name not in ("rshift",):
            base = getattr(operator, name[1:])
            op = lambda t, a, base=base: base(a, t)  # noqa: E731 - reflected: `a <op> t`
        else:
            op = getattr(operator, name)
        _PY_OPS[fn] = op
    return op


def _run_unary(op: EngineOp) -> None:
    op.out._data = op.fn(op.reads[0]._data)


def _run_inplace_a(op: EngineOp) -> None:
    op.fn(op.writes[0]._data, op.arg._data)


def _run_inplace_s(op: EngineOp) -> None:
    op.fn(op.writes[0]._data, op.arg)


def _run_copy(op: EngineOp) -> None:
    op.out._data = op.reads[0]._data.clone()  # virtual devices share memory: a copy must copy


class EngineArray(EngineVar):
    """A tensor on a virtual device of an engine, computed asynchronously.

    Made by ``engine.array(...)`` and by arithmetic on arrays; not constructed directly.
    ``shape``, ``dtype``, ``device`` and ``name`` are known at once; the value is read with a
    blocker.
    """

    __slots__ = ("_engine", "_data", "_shape", "_dtype", "_dev", "_alone", "_name")

    def __init__(self, engine: Any, data: torch.Tensor | None, shape: torch.Size, dtype: torch.dtype,
                 dev: Device, label: str | None) -> None:
        # EngineVar/Var fields, set here rather than by super().__init__: this runs once per op
        self.readers = 0
        self.writer = None
        self.waiting = None
        self.producer = None
        self.error = None
        self.last_write = -1
        self.read_ids = None
        try:  # free when it holds (Python 3.11's zero-cost try); this runs once per op
            n = engine._arrays
        except AttributeError:
            raise TypeError(f"engine must be a ThreadedEngine or NaiveEngine, got {type(engine).__name__}; "
                            "make arrays with eng.array(data)") from None
        engine._arrays = n + 1
        if label is None:  # "a{n}", made when someone reads it (see ``label``): no string per op
            self.num = n
        else:
            self.num = -1
            self._name = label
        self._engine = engine
        self._data = data
        self._shape = shape
        self._dtype = dtype
        self._dev = dev
        self._alone: tuple | None = None  # ``(self,)`` once an op reads or updates it: see _one

    def _one(self) -> tuple:
        """``(self,)``, made once and shared by every op that reads or updates this array.

        Every object a pending op keeps alive is work for Python's garbage collector, which runs a
        full collection of the whole heap (torch's included) every few tens of thousands of them;
        an op's fresh output therefore needs no tuple at all (``EngineOp.out``).
        """
        if self._alone is None:
            self._alone = (self,)
        return self._alone

    # -- known at once ---------------------------------------------------------------------
    @property
    def shape(self) -> torch.Size:
        """The shape, known at push time (no wait)."""
        return self._shape

    @property
    def dtype(self) -> torch.dtype:
        """The torch dtype, known at push time (no wait)."""
        return self._dtype

    @property
    def device(self) -> str:
        """The virtual device name (``"cpu:1"``): a thread on this CPU, not hardware."""
        return self._dev.name

    @property
    def label(self) -> str:  # type: ignore[override]
        """The name in traces and graphs: the one given, else ``"a{n}"`` (n-th array of its engine)."""
        n = self.num
        return f"a{n}" if n >= 0 else self._name

    @property
    def name(self) -> str:
        """The name traces use (``name=`` given, or the engine's ``"a17"``); same as ``label``."""
        return self.label

    @property
    def ndim(self) -> int:
        """The number of dimensions (no wait)."""
        return len(self._shape)

    def numel(self) -> int:
        """Returns the number of elements (no wait: the shape is known at push time)."""
        return self._shape.numel()

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d array")
        return self._shape[0]

    # -- pushing ops -----------------------------------------------------------------------
    def _other(self, other: Any) -> Any:
        if other._engine is not self._engine:
            raise ValueError(f"arrays {self.label!r} and {other.label!r} belong to different engines; "
                             "compute with arrays of one engine")
        if other._dev is not self._dev:
            raise ValueError(f"array {self.label!r} is on {self._dev.name} and {other.label!r} on "
                             f"{other._dev.name}; copy one first, e.g. {other.label}.to({self._dev.name!r})")
        return other

    def _binary(self, other: Any, name: str, fn: Callable) -> "EngineArray":
        if other.__class__ is EngineArray:
            self._other(other)
            key = (fn, self._shape, self._dtype, other._shape, other._dtype)
            run = _run_aa
        elif other.__class__ in _SCALARS or isinstance(other, _NP_SCALARS):
            key = (fn, self._shape, self._dtype, other.__class__, name == "pow" and _negative(other))
            run = _run_as
        elif isinstance(other, np.ndarray):  # as torch: ``t + ndarray`` is a tensor (it waited
            # for x through __array__ and returned an ndarray); the op gets a copy, made now
            other = np.array(other)
            fn = _python_op(fn)  # what `t + a` does in torch: its dunder declines, numpy computes and wraps
            key = (fn, self._shape, self._dtype, np.ndarray, other.shape, other.dtype.str)
            run = _run_nd
        else:
            return _unsupported(self, other, name)
        info = _INFER.get(key) or _infer(key, fn, self, other)
        if info is _DECLINED:
            return NotImplemented
        out = EngineArray(self._engine, None, info.shape, info.dtype, self._dev, None)
        reads = (self, other) if run is _run_aa and other is not self else (self._alone or self._one())
        op = EngineOp(name, "op", run, fn, other, reads, (), self._dev, info.nbytes, out)
        self._engine.submit(op, 3)
        return out

    def _inplace(self, other: Any, name: str, fn: Callable) -> "EngineArray":
        if other.__class__ is EngineArray:
            self._other(other)
            key = (fn, self._shape, self._dtype, other._shape, other._dtype)
            if (_INFER.get(key) or _infer(key, fn, self, other, inplace=True)) is _DECLINED:
                return NotImplemented
            op = EngineOp(name, "op", _run_inplace_a, fn, other,
                          (other._alone or other._one()) if other is not self else (),
                          self._alone or self._one(), self._dev, 0)
        elif other.__class__ in _SCALARS or isinstance(other, _NP_SCALARS):
            key = (fn, self._shape, self._dtype, other.__class__, name == "pow_" and _negative(other))
            if (_INFER.get(key) or _infer(key, fn, self, other, inplace=True)) is _DECLINED:
                return NotImplemented
            op = EngineOp(name, "op", _run_inplace_s, fn, other, (), self._alone or self._one(), self._dev, 0)
        else:
            return _unsupported(self, other, name)
        self._engine.submit(op, 3)
        return self

    def _unary(self, name: str, fn: Callable) -> "EngineArray":
        key = (fn, self._shape, self._dtype)
        info = _INFER.get(key) or _infer(key, fn, self)
        out = EngineArray(self._engine, None, info.shape, info.dtype, self._dev, None)
        self._engine.submit(EngineOp(name, "op", _run_unary, fn, None, self._alone or self._one(), (),
                                      self._dev, info.nbytes, out), 3)
        return out

    def __add__(self, o): return self._binary(o, "add", _T.__add__)
    def __radd__(self, o): return self._binary(o, "add", _T.__radd__)
    def __sub__(self, o): return self._binary(o, "sub", _T.__sub__)
    def __rsub__(self, o): return self._binary(o, "sub", _T.__rsub__)
    def __mul__(self, o): return self._binary(o, "mul", _T.__mul__)
    def __rmul__(self, o): return self._binary(o, "mul", _T.__rmul__)
    def __truediv__(self, o): return self._binary(o, "div", _T.__truediv__)
    def __rtruediv__(self, o): return self._binary(o, "div", _T.__rtruediv__)
    def __matmul__(self, o): return self._binary(o, "matmul", _T.__matmul__)
    def __rmatmul__(self, o): return self._binary(o, "matmul", _T.__rmatmul__)
    def __pow__(self, o): return self._binary(o, "pow", _T.__pow__)
    def __rpow__(self, o): return self._binary(o, "pow", _T.__rpow__)
    def __iadd__(self, o): return self._inplace(o, "add_", _T.__iadd__)
    def __isub__(self, o): return self._inplace(o, "sub_", _T.__isub__)
    def __imul__(self, o): return self._inplace(o, "mul_", _T.__imul__)
    def __itruediv__(self, o): return self._inplace(o, "div_", _T.__itruediv__)
    def __ipow__(self, o): return self._inplace(o, "pow_", _T.__ipow__)
    def __neg__(self): return self._unary("neg", _T.__neg__)
    # comparisons are elementwise ops, as in torch (``x == y`` compared identity)
    def __eq__(self, o): return self._binary(o, "eq", _T.__eq__)  # type: ignore[override]
    def __ne__(self, o): return self._binary(o, "ne", _T.__ne__)  # type: ignore[override]
    def __lt__(self, o): return self._binary(o, "lt", _T.__lt__)
    def __le__(self, o): return self._binary(o, "le", _T.__le__)
    def __gt__(self, o): return self._binary(o, "gt", _T.__gt__)
    def __ge__(self, o): return self._binary(o, "ge", _T.__ge__)
    __hash__ = EngineVar.__hash__  # by identity, like a tensor (defining __eq__ would drop it)
    #: NumPy defers to our reflected ops (``np.float64(2) + x`` is ``x.__radd__``), as it does for
    #: torch (the same value as ``torch.Tensor``): without it, numpy converted ``x`` through
    #: ``__array__``, a hidden blocker.  ``np.exp(x)`` still converts, as it does a tensor.
    __array_priority__ = 1000

    def sum(self) -> "EngineArray":
        """Sum of all elements (a 0-d array)."""
        return self._unary("sum", _T.sum)

    def mean(self) -> "EngineArray":
        """Mean of all elements (a 0-d array; floating dtypes, as in torch)."""
        return self._unary("mean", _T.mean)

    def exp(self) -> "EngineArray":
        """Returns a new array, ``exp`` of each element (an op pushed: no wait)."""
        return self._unary("exp", _T.exp)

    def relu(self) -> "EngineArray":
        """Returns a new array, ``max(x, 0)`` of each element (an op pushed: no wait)."""
        return self._unary("relu", _T.relu)

    def to(self, device: str, *, name: str | None = None) -> "EngineArray":
        """Copy to another virtual device (a ``"copy"`` op that runs on the destination's queue).

        Always copies, even to the same device: virtual devices share this CPU's memory, and an
        alias would let an in-place op on one device change the other's array.

        Returns:
            The new array on ``device`` (at once: the copy is pushed, not waited for).
        """
        dev = self._engine.device_record(device)
        out = EngineArray(self._engine, None, self._shape, self._dtype, dev, name)
        self._engine.submit(EngineOp("copy", "copy", _run_copy, None, None, self._alone or self._one(), (),
                                      dev, self._shape.numel() * self._dtype.itemsize, out), 2)
        return out

    # -- copies and pickling ----------------------------------------------------------
    def __copy__(self) -> "EngineArray":
        """``copy.copy(x)``: a new array holding a copy of x's value -- a ``"copy"`` op pushed like
        ``x.to(x.device)``, so it does not wait for x (the copy is made after x's last write)."""
        if self._engine.closed:
            raise TypeError(f"cannot copy array {self.label!r}: its engine is shut down, so it can make no new "
                            "array; copy its value instead: x.asnumpy() or torch.tensor(x.asnumpy())")
        return self.to(self._dev.name)

    def __deepcopy__(self, memo: dict) -> "EngineArray":
        """``copy.deepcopy(x)``: as :meth:`__copy__` (an array of the same engine: the engine and its
        threads are not copied)."""
        return self.__copy__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(f"an EngineArray ({self.label!r}) cannot be pickled: it is a handle to a value that "
                        "this process's engine threads compute. Pickle its value instead: x.asnumpy() (a numpy "
                        "array) or torch.from_numpy(x.asnumpy())")

    # -- blockers: they wait for the value ---------------------------------------------------
    def wait_to_read(self, *, timeout: float | None = None) -> "EngineArray":
        """Block until the value is computed (raise the error of the op that failed to compute it).

        Args:
            timeout: seconds before :class:`TimeoutError` (for tests; the book's API has none).

        Returns:
            This array (so ``x.wait_to_read().asnumpy()`` reads as one line).
        """
        self._engine._wait_var(self, "wait_to_read", timeout)
        return self

    def item(self) -> Any:
        """A blocker: returns the value of a one-element array as a Python number."""
        self._engine._wait_var(self, "item")
        return self._data.item()

    def asnumpy(self) -> Any:
        """The value as a new numpy array (a copy: later in-place ops do not change it)."""
        self._engine._wait_var(self, "asnumpy")
        return self._data.numpy().copy()

    def numpy(self) -> Any:
        """Same as :meth:`asnumpy` (torch's name)."""
        self._engine._wait_var(self, "numpy")
        return self._data.numpy().copy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        self._engine._wait_var(self, "asnumpy")
        a = self._data.numpy().copy()
        return a if dtype is None else a.astype(dtype)

    def __float__(self) -> float:
        self._engine._wait_var(self, "float")
        return float(self._data)

    def __int__(self) -> int:
        self._engine._wait_var(self, "item")
        return int(self._data)

    def __bool__(self) -> bool:
        self._engine._wait_var(self, "bool")
        return bool(self._data)

    def __str__(self) -> str:
        self._engine._wait_var(self, "print")
        return str(self._data)

    def __repr__(self) -> str:
        self._engine._wait_var(self, "print")
        value = repr(self._data).replace("\n", "\n" + " " * 12)
        return f"EngineArray({value}, name={self.label!r}, device={self._dev.name!r} (virtual))"

    def __format__(self, spec: str) -> str:
        self._engine._wait_var(self, "print")
        return format(self._data, spec)  # torch's rule: a 0-d tensor formats as its number


def _unsupported(a: EngineArray, other: Any, name: str) -> Any:
    if isinstance(other, torch.Tensor):
        raise TypeError(f"cannot {name} an EngineArray and a torch.Tensor; wrap the tensor first: "
                        f"eng.array(tensor)")
    return NotImplemented
