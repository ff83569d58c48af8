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
stay usable after it, as ordinary tensors whose ops run at once.  An exception that leaves the
block (a Ctrl-C) lets the queued ops run first, and a second Ctrl-C abandons them (:mod:`._interrupt`);
a Ctrl-C that arrives while the runtime queues an op is raised after it (registered at the end of
this module).

While a block is open a few torch functions behave differently (:mod:`._guards`: the RNG
functions wait for queued random ops, ``torch.compile`` is refused, ...), and a fork first runs
what was queued (:mod:`._fork`: DataLoader workers).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import torch

from .._args import workers as check_workers
from ..engine.core import add_internal_dir, expose, shield, shield_ctrl_c
from . import _fork  # noqa: F401 - registers the fork hooks
from ._compat import check_torch
from ._guards import patch_torch, unpatch_torch
from ._interrupt import finish_after, opening_line, run_queued
from ._meta import warm
from ._mode import _AsyncMode, _local, current_runtime
from ._module import _convert_all
from ._openmp import AUTO
from ._order import OrderedReady
from ._runtime import CACHE, WORKER_NICE, AsyncRuntime, check_flag, check_team, check_worker_nice, live_runtimes
from ._sync import SyncPaths, wait_exposed
from ._tensor import AsyncTensor

__all__ = ["asynchronous", "synchronize", "current_runtime"]

# the user's line is the first frame outside this package and outside torch (nn.Module.__call__,
# optimizers, autograd's Python): where the reader called torch, not where torch called us
add_internal_dir(os.path.dirname(__file__))
add_internal_dir(os.path.dirname(torch.__file__))


# -- the public functions --------------------------------------------------------------------
@contextlib.contextmanager
def _block(workers: int, record: bool, torch_threads: int | None, worker_nice: int,
           free_frontend_team: bool | str) -> Iterator[AsyncRuntime]:
    check_torch()
    warm()  # the first block only: meta kernels' imports, paid before the first op (see ._meta.warm)
    CACHE.check_default_dtype()  # set outside a block since the cache was filled
    shield_ctrl_c()  # a Ctrl-C in the runtime's bookkeeping waits until it has left it (registered below)
    opened_at = opening_line()
    rt = AsyncRuntime(workers=workers, record=record, torch_threads=torch_threads, worker_nice=worker_nice,
                      free_frontend_team=free_frontend_team)
    rt.opened_at = opened_at
    mode = _AsyncMode(rt)
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(rt)
    patch_torch()
    try:
        try:
            with mode:
                yield rt
            rt.synchronize()  # the end of the block is a barrier; raises deferred errors
        except BaseException as exc:
            finish_after(rt, exc)  # the queued ops run first (a second Ctrl-C abandons them): ._interrupt
            raise
        rt.shutdown(wait=True, timeout=30.0)
    finally:
        try:
            unpatch_torch()
        finally:
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

    An exception that leaves the block (a Ctrl-C, any error) first lets every queued op run, as a
    CUDA stream runs its queue, so each tensor holds its value at the line that raised; a second
    Ctrl-C while they run abandons them, and a tensor one of them would have written raises
    :class:`NotComputedError` when read.
    """

    def __init__(self, workers: int = 1, *, record: bool = True, torch_threads: int | None = None,
                 worker_nice: int = WORKER_NICE, free_frontend_team: bool | str = AUTO) -> None:
        check_workers("workers", workers)  # as many as this machine can start (d2l_async._args.max_workers)
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


# Ctrl-C (see ._interrupt): one that arrives while the frontend runs these is raised after them -- an
# aten op is queued whole, as eager's C++ ops run whole, and a block opens and closes whole -- ...
shield(asynchronous.__enter__, asynchronous.__exit__, AsyncRuntime.dispatch, SyncPaths.run_sync,
       SyncPaths.try_here, SyncPaths.rebind, OrderedReady.submit, AsyncTensor.data.fset, _convert_all)
# ... and one that arrives in a wait inside them is raised there: the waited-for op is queued, so it
# still runs in program order (the first block's warm-up runs before anything is changed)
expose(warm, wait_exposed, SyncPaths.value, SyncPaths.escape, SyncPaths.wait_rng, SyncPaths.drain,
       SyncPaths.synchronize, run_queued)
