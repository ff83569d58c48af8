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
* the experiments: :func:`run_collective` (``all_reduce`` blocking vs async), :func:`run_overlap`
  (after-backward vs bucketed), :func:`run_straggler` (one slow rank); frozen results, and lesson
  checks as pure functions of them (:func:`collective_checks`, :func:`overlap_checks`,
  :func:`straggler_checks`).
* :func:`d2l_async.analysis.comm_overlap` reads the traces: per rank, collectives overlapping the
  backward pass, hidden and exposed communication seconds.

The same rank functions run under ``torchrun`` on real machines: ``python -m d2l_async.distributed
--help``.  On one CPU core, two gloo ranks time-share the core: the traces still show *when* things
happened (a call returning before its reduction, buckets reduced during backward), but not a
speed-up; the lesson checks say which this run could show, from :func:`d2l_async.devices.machine`.
"""

from __future__ import annotations

from ._common import Where
from ._launch import (BACKENDS, DistributedError, LaunchResult, RankContext, RankDied, RankError, RankTimeout,
                      free_port, is_alive, launch)
from .collective import CollectiveResult, run_collective
from .collective import checks as collective_checks
from .ranks import MODES, profiled
from .training import TrainingResult, machine_check, overlap_checks, run_overlap, run_straggler, straggler_checks

__all__ = [
    "BACKENDS", "CollectiveResult", "DistributedError", "LaunchResult", "MODES", "RankContext",
    "RankDied", "RankError", "RankTimeout", "TrainingResult", "Where", "collective_checks", "free_port",
    "is_alive", "launch", "machine_check", "overlap_checks", "profiled", "run_collective", "run_overlap", "run_straggler", "straggler_checks",
]
