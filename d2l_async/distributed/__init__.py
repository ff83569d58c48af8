"""Beyond one process: asynchronous communication with ``torch.distributed`` (gloo on CPU, NCCL on GPUs).

The chapter's frontend hands work to a backend and races ahead; a barrier waits for one variable or
for all.  Data-parallel training does the same between processes::

    rank 0  frontend  [fwd][bwd L4][bwd L3][bwd L2][bwd L1][wait][step]
            gloo               [ all-reduce L4 ][ all-reduce L3 ] ...      <- issued with async_op=True
    rank 1  frontend  [fwd][bwd L4][bwd L3][bwd L2][bwd L1][wait][step]
            gloo               [ all-reduce L4 ][ all-reduce L3 ] ...

* a collective issued with ``async_op=True`` returns a ``Work`` handle at once; ``work.wait()`` is
  the per-variable barrier (notebook 3's ``wait_to_read``);
* ``DistributedDataParallel`` all-reduces gradient *buckets* while the backward pass goes on;
* a collective is also a barrier between ranks: one slow rank makes every other rank wait.

The pieces, each a module:

* :func:`launch` (``_launch``) — run a module-level function on N local ranks: spawned processes, a
  free port per run, a deadline on every wait, no orphans on error or Ctrl-C, a rank's exception
  raised in the caller with its traceback (:class:`RankError`).
* :mod:`~d2l_async.distributed.ranks` — what each rank runs, and :func:`profiled`, which records a
  section with ``torch.profiler`` into ``<trace_dir>/<label>/rank<r>.json``.  The traces come back
  as one :class:`~d2l_async.trace.Trace` with a lane group per rank
  (:func:`~d2l_async.trace.read_trace_dir`).
* :func:`run_and_load` — a launch whose ranks record traces, read back as one trace per label.

Notebook 10's experiments (``all_reduce`` blocking vs async, DDP after backward vs bucketed, one
slow rank, a modelled link) and their lesson checks are in :mod:`d2l_async.experiments`
(``collective``, ``ddp``, ``modelled_link``); :func:`d2l_async.analysis.comm_overlap` reads their
traces.

The same rank functions run under ``torchrun`` on real machines: ``python -m d2l_async.distributed
--help``.  On one CPU core, two gloo ranks time-share the core: the traces still show *when* things
happened (a call returning before its reduction, buckets reduced during backward), but not a
speed-up; the lesson checks say which this run could show, from :func:`d2l_async.devices.machine`.
"""

from __future__ import annotations

from ._common import OnRanks, Where, check_backend, run_and_load, where
from ._launch import (BACKENDS, DistributedError, LaunchResult, RankContext, RankDied, RankError, RankTimeout,
                      free_port, is_alive, launch)
from .ranks import MODES, profiled

__all__ = [
    "BACKENDS", "DistributedError", "LaunchResult", "MODES", "OnRanks", "RankContext", "RankDied", "RankError",
    "RankTimeout", "Where", "check_backend", "free_port", "is_alive", "launch", "profiled", "run_and_load", "where",
]
