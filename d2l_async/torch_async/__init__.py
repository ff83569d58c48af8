"""Plain PyTorch, asynchronous on a CPU: ``with d2l_async.asynchronous():``.

On a CPU, PyTorch runs every op before it returns, which is why D2L's PyTorch version of the
section on asynchronous computation (§13.2) stops after two cells.  Inside this block the same
unmodified torch code runs the way it does on CUDA: ops are queued and return at once,
``.item()``/``print``/``.numpy()``/``bool()`` block, errors surface at the next blocking point,
and :func:`synchronize` is the barrier::

    import torch, d2l_async
    with d2l_async.asynchronous() as rt:
        x = torch.randn(1000, 1000)
        for _ in range(20):
            y = x @ x                    # returns in microseconds; a worker thread multiplies
        d2l_async.synchronize()          # ... and this waits for it
    rt.trace()                           # the run, for every figure of d2l_async.viz

How it works, module by module (read in this order):

* :mod:`._tensor` -- ``AsyncTensor``: metadata now, data later (a storage-less wrapper subclass);
* :mod:`._schema` -- what each aten op's schema says: writes, randomness, blocking;
* :mod:`._meta` -- output metadata from meta kernels, cached per op and input metadata;
* :mod:`._state` -- the frontend's state (grad mode, key sets, default dtype) travels with the op;
* :mod:`._runtime` -- the dispatch: each op becomes an op of the engine's scheduler, with one
  dependency variable per storage and one for the RNG; what runs synchronously and why;
* :mod:`._sync` -- what runs synchronously (blocking points) and what happens after the block;
* :mod:`._openmp` -- the frontend's idle OpenMP threads, freed while a block is open (on an idle machine);
* :mod:`._mode` -- the ``TorchDispatchMode``, and which blocks are open on a thread;
* :mod:`._guards` -- the torch functions that change while a block is open, and why;
* :mod:`._fork` -- ``os.fork`` (DataLoader workers) while a block is open;
* :mod:`._context` -- the ``with`` block;
* :mod:`._interrupt` -- an exception that ends a block: the queued ops run first, a second Ctrl-C
  abandons them (:class:`NotComputedError`);
* :mod:`._module` -- :func:`make_async`: an ``nn.Module``'s parameters made asynchronous in place.

It uses private torch APIs (checked by :mod:`._compat` when this package is imported, before any
of them is touched): torch >= ``MIN_VERSION``; an older or changed torch gets
:class:`UnsupportedTorchError`, which names the versions that work.
"""

from __future__ import annotations

from ._compat import MIN_VERSION, TESTED_VERSIONS, UnsupportedTorchError, check_torch

check_torch()  # before any module below touches a private torch API

from ._context import asynchronous, current_runtime, synchronize
from ._interrupt import NotComputedError
from ._module import StaleParameterError, make_async
from ._runtime import AsyncRuntime
from ._tensor import AsyncTensor

__all__ = ["AsyncRuntime", "AsyncTensor", "MIN_VERSION", "NotComputedError", "StaleParameterError",
           "TESTED_VERSIONS", "UnsupportedTorchError", "asynchronous", "check_torch", "current_runtime", "make_async",
           "synchronize"]
