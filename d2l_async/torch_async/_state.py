"""The frontend's state travels with the op: what changes what an op does, besides its arguments.

An eager op runs on the thread that calls it, under that thread's state.  A queued op runs later,
on a worker thread, whose state is its own -- so the state is part of the op:

* **thread-local** state is captured at push (:func:`capture`) and re-established on the worker
  around the op (:func:`enter`): the dispatcher's local include/exclude key sets as the frontend's
  dispatch handler sees them (autograd, ``ADInplaceOrView`` and autocast are *behind* the op
  already: the worker must not run them again; the conjugate/negative/zero-tensor fallbacks are
  the exception, see :data:`_MATH_BITS`) and grad mode (a few kernels read it).  Without it, a worker ran ``param.add_(...)`` of ``optimizer.step()``
  through autograd again, with grad mode on, and a plain parameter failed with "a leaf Variable
  that requires grad is being used in an in-place operation";
* **process-global** settings (``torch.set_default_dtype``, ``use_deterministic_algorithms``, ...)
  cannot be set per thread: while a block is open their setters are a barrier (:data:`GLOBAL_SETTERS`,
  patched by :mod:`._context`) -- every queued op runs under the old value first -- and the
  metadata cache, whose entries assumed the old default dtype, is cleared.  Before that,
  ``torch.ones(3)`` queued before ``set_default_dtype(torch.float64)`` made float64 data under a
  float32 tensor (item 7).

Cost: three C calls at push (about 0.2 us), one guard on the worker (about 0.5 us).
"""

from __future__ import annotations

import threading
from typing import Any

import torch

__all__ = ["capture", "enter", "GLOBAL_SETTERS"]

_C = torch._C
_incl = _C._dispatch_tls_local_include_set
_excl = _C._dispatch_tls_local_exclude_set
_grad = _C.is_grad_enabled
_set_grad = _C._set_grad_enabled
_Force = _C._ForceDispatchKeyGuard

#: torch functions that change a process-wide setting some ops read: a barrier inside a block.
GLOBAL_SETTERS = ("set_default_dtype", "set_default_tensor_type", "use_deterministic_algorithms",
                  "set_deterministic_debug_mode", "set_flush_denormal", "set_float32_matmul_precision")


def capture() -> tuple:
    """The frontend's thread-local state, on the frontend inside the dispatch handler."""
    return (_incl(), _excl(), _grad())


#: Keys the worker must *not* skip: the wrappers carry no conjugate/negative/zero bits, their
#: data does, so these fallbacks act on the worker, on the data (skipping them made
#: ``z.conj() * 1`` compute ``z * 1``).
_K = _C.DispatchKey
_MATH_BITS = _C.DispatchKeySet(_K.Conjugate) | _C.DispatchKeySet(_K.Negative) | _C.DispatchKeySet(_K.ZeroTensor)
_tls = threading.local()  # .guards: this worker's reusable guards
_RAW = hasattr(_C.DispatchKeySet, "raw_repr")


def enter(state: tuple) -> Any:
    """On the worker: set grad mode and return the guard that sets the key sets (``with enter(s):``)."""
    inc, exc, grad = state
    if _grad() is not grad:
        _set_grad(grad)
    if _RAW:  # one guard object per key sets and worker thread, reused (a new one costs 3x more);
        # never entered twice at once: a worker runs one op at a time, and an op never runs another
        key = (inc.raw_repr(), exc.raw_repr())
        try:
            guards = _tls.guards
        except AttributeError:
            guards = _tls.guards = {}
        g = guards.get(key)
        if g is None:
            g = guards[key] = _Force(inc, exc - _MATH_BITS)
        return g
    return _Force(inc, exc - _MATH_BITS)  # torch < 2.4 has no raw_repr to cache by
