"""``with d2l_async.asynchronous():`` -- plain torch code, asynchronous on a CPU.

::

    with d2l_async.asynchronous() as rt:      # one worker thread: eager torch's order exactly
        x = torch.ones(1000, 1000)             # queued, returns at once
        y = x @ x                              # queued
        print(y.sum().item())                  # a blocker: waits for y, then for sum
        d2l_async.synchronize()                # the barrier (torch.cuda.synchronize's twin)
    fig = d2l_async.viz.plot_timeline(rt.trace())

It pushes a ``TorchDispatchMode`` that sends every op of this thread to the block's
:class:`~._runtime.AsyncRuntime`.  The end of the block waits for every queued op and raises the
first error none of them raised yet (as the engine's ``with`` block does); tensors made inside
stay usable after it, as ordinary tensors whose ops run at once.

While a block is open, torch's global RNG functions (``torch.manual_seed``, ``seed``,
``get_rng_state``, ``set_rng_state``, and their ``torch.random`` twins) first wait for the random
ops already queued -- their state is shared with the workers -- ``torch.compile`` raises
:class:`UnsupportedTorchError` (it cannot trace storage-less tensors), and ``plain.data = t`` of a
tensor made outside the block waits for ``t``'s data (``Module._apply``: ``model.double()``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import os
import threading
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes, _pop_mode, _push_mode

from ..engine import _gcfreeze as gc_freeze
from ..engine._source import add_internal_dir
from ._compat import UnsupportedTorchError, check_torch
from ._meta import warm
from ._openmp import AUTO
from ._runtime import CACHE, WORKER_NICE, AsyncRuntime, check_flag, check_team, check_worker_nice, live_runtimes
from ._schema import func_info
from ._state import GLOBAL_SETTERS
from ._tensor import AsyncTensor

__all__ = ["asynchronous", "synchronize", "current_runtime"]

# the user's line is the first frame outside this package and outside torch (nn.Module.__call__,
# optimizers, autograd's Python): where the reader called torch, not where torch called us
add_internal_dir(os.path.dirname(__file__))
add_internal_dir(os.path.dirname(torch.__file__))

_local = threading.local()  # .stack: this thread's open runtimes, innermost last


class _AsyncMode(TorchDispatchMode):
    """Every op of this thread goes to ``rt.dispatch``."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # torch wraps handlers in a dynamo guard: 9 us per op
        return False

    def __init__(self, rt: AsyncRuntime) -> None:
        super().__init__()
        self.rt = rt

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.rt.dispatch(func, args, kwargs or {})


# -- the RNG functions and torch.compile, while a block is open ---------------------------------
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


def _patch() -> None:
    with _patch_lock:
        _open_blocks[0] += 1
        if _open_blocks[0] > 1:
            return
        gc_freeze.hold()  # queued ops outlive young collections: see engine._gcfreeze
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
        from ._module import lazy_patches  # ._module imports this module
        for owner, name, new in lazy_patches():
            _patched[(owner, name)] = owner.__dict__[name]
            setattr(owner, name, new)
        _patched[(torch, "compile")] = torch.compile
        torch.compile = _no_compile
        _patched[(torch, "ctc_loss")] = torch.ctc_loss
        torch.ctc_loss = _ctc_guard(torch.ctc_loss)
        _patched[(torch._VF, "_pad_packed_sequence")] = torch._VF._pad_packed_sequence
        torch._VF._pad_packed_sequence = _pad_packed_guard(torch._VF._pad_packed_sequence)
        torch.Tensor.data = _PLAIN_DATA  # AsyncTensor's own .data property comes first for it
        _patched[(torch.Tensor, "__deepcopy__")] = torch.Tensor.__deepcopy__
        torch.Tensor.__deepcopy__ = _deepcopy_guard(torch.Tensor.__deepcopy__)


def _unpatch() -> None:
    with _patch_lock:
        _open_blocks[0] -= 1
        if _open_blocks[0] > 0:
            return
        for (mod, name), fn in _patched.items():
            setattr(mod, name, fn)
        _patched.clear()
        del torch.Tensor.data  # TensorBase's descriptor again
        gc_freeze.release()


# -- fork (DataLoader workers) ----------------------------------------------------------------
def _before_fork() -> None:
    """In the parent, before ``os.fork`` (``DataLoader(num_workers=N)``'s workers): every queued op
    runs first.  The child then finds the workers idle (no lock of theirs held across the fork) and
    every asynchronous tensor computed -- a dataset made inside the block is readable there."""
    for rt in live_runtimes():
        if not rt.closed:
            rt.drain("fork (DataLoader workers)")


def _after_fork_in_child() -> None:
    """In the child: no worker thread came along, so no block can run an op.  Its blocks are closed
    (ops on their tensors run eagerly, on the data the parent computed) and this thread's dispatch
    modes of ours are removed -- before, every op of a DataLoader worker was queued for a thread
    that did not exist: no batch ever came, and the worker outlived its parent.  Nothing here takes
    a lock: a parent's thread may have held one at the fork."""
    for rt in live_runtimes():
        rt.closed = True
    _local.__dict__.pop("stack", None)
    kept = []
    while torch._C._len_torch_dispatch_stack() > 0:
        mode = _pop_mode()
        if not isinstance(mode, _AsyncMode):
            kept.append(mode)
    for mode in reversed(kept):
        _push_mode(mode)


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


# -- the public functions --------------------------------------------------------------------
def current_runtime() -> AsyncRuntime | None:
    """The innermost open ``asynchronous()`` block of this thread (None outside one)."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def _block(workers: int, record: bool, torch_threads: int | None, worker_nice: int,
           free_frontend_team: bool | str) -> Iterator[AsyncRuntime]:
    check_torch()
    warm()  # the first block only: meta kernels' imports, paid before the first op (see ._meta.warm)
    CACHE.check_default_dtype()  # set outside a block since the cache was filled
    rt = AsyncRuntime(workers=workers, record=record, torch_threads=torch_threads, worker_nice=worker_nice,
                      free_frontend_team=free_frontend_team)
    mode = _AsyncMode(rt)
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(rt)
    _patch()
    ok = False
    try:
        with mode:
            yield rt
        ok = True
    finally:
        try:
            try:
                if ok:
                    rt.synchronize()  # the end of the block is a barrier; raises deferred errors
            finally:
                rt.shutdown(wait=ok, timeout=30.0)
        finally:
            _unpatch()
            stack.remove(rt)


class asynchronous(contextlib.ContextDecorator):  # noqa: N801 - reads as a statement: `with asynchronous():`
    """Run plain torch code asynchronously on this CPU: ops are queued and return at once.

    A context manager (``with d2l_async.asynchronous() as rt:``) and a decorator
    (``@d2l_async.asynchronous()``).  ``rt`` is the block's runtime: ``rt.trace()`` (after or
    during the block) is the run as a :class:`~d2l_async.trace.Trace`, ``rt.statistics()`` the
    engine's counters.

    Args:
        workers: worker threads.  1 (default): ops run in program order, eager torch's semantics
            exactly (one CUDA stream's).  More: ops run as soon as their inputs are ready, under
            the engine's dependency rules per storage and one RNG variable.
        record: record a trace (push / start / end of every op, every block with its line).
        torch_threads: torch intra-op threads in each worker (default: the frontend's, so
            results are bitwise eager's).
        worker_nice: steps of OS priority the workers and their torch threads give up to your
            Python (default 5; 0: none).  A GPU never takes the frontend's CPU; a worker thread on
            the same cores would, as often as not, and the loop would not run ahead.  Linux only
            (elsewhere the workers keep the frontend's priority); ``rt.worker_nice`` says what the
            OS granted.
        free_frontend_team: free your thread's torch (OpenMP) threads while the block is open:
            they idle, as every op is queued, and on an idle machine would make the worker's own
            sleep between parallel kernels (a small kernel then costs 10x more); on a busy one
            the freed worker team spins against the other processes (a small kernel then costs
            20-100x more).  ``"auto"`` (default): freed only when no other process wants the
            CPUs as the block opens; True/False force it.  torch starts them again at your next
            parallel op after the block; results are unchanged.  GNU libgomp only (Linux
            wheels); ``rt.frontend_team_freed`` says whether it was done.

    Blocking points (the frontend waits, recorded with your line): ``print``, ``.item()``,
    ``float()``/``bool()``/``if t:``, ``.numpy()``, ``.tolist()``, data-dependent shapes
    (``nonzero``, masks), writes into tensors made outside the block, RNG state functions, and
    :func:`synchronize`.  Errors of queued ops surface at the next blocking point, like CUDA's.
    """

    def __init__(self, workers: int = 1, *, record: bool = True, torch_threads: int | None = None,
                 worker_nice: int = WORKER_NICE, free_frontend_team: bool | str = AUTO) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers={workers!r}: pass a positive int (worker threads)")
        check_flag("record", record)
        check_team(free_frontend_team)
        check_worker_nice(worker_nice)  # at once, as for workers and record: a decorator fails where it is made
        self.workers = workers
        self.record = record
        self.torch_threads = torch_threads
        self.worker_nice = worker_nice
        self.free_frontend_team = free_frontend_team
        self._cms: list = []

    def __enter__(self) -> AsyncRuntime:
        cm = _block(self.workers, self.record, self.torch_threads, self.worker_nice, self.free_frontend_team)
        rt = cm.__enter__()
        self._cms.append(cm)
        return rt

    def __exit__(self, *exc: Any) -> bool:
        return bool(self._cms.pop().__exit__(*exc))

    def _recreate_cm(self) -> "asynchronous":  # a decorator: each call gets its own block
        return asynchronous(self.workers, record=self.record, torch_threads=self.torch_threads,
                            worker_nice=self.worker_nice, free_frontend_team=self.free_frontend_team)


def synchronize(*, timeout: float | None = None) -> None:
    """The barrier: wait until every op queued by an open ``asynchronous()`` block has run.

    Raises the first error of those ops not raised yet (``torch.cuda.synchronize`` reports a
    device-side error the same way).  Outside any block it waits for every open block (of any
    thread), and does nothing when there is none.

    Args:
        timeout: seconds before :class:`TimeoutError` (for tests).
    """
    rt = current_runtime()
    runtimes = [rt] if rt is not None else live_runtimes()
    for r in runtimes:
        r.synchronize(timeout=timeout)
