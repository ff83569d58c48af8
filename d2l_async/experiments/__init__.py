"""The chapter's experiments: run one, get a frozen result back (no plotting, no printing).

One module per topic of D2L §13.2–13.3, in the order of the notebooks::

    asynchrony    run_asynchrony                  NumPy vs framework, naive vs synchronized timer
    dependency    run_expression,                 z = x * y + 2 and friends on named engine arrays;
                  run_independent_vs_dependent    independent vs dependent chains on 1 and 2 workers
    barriers      run_barriers                    waitall() vs wait_to_read() with unrelated work queued
    blockers      run_blockers                    print/item/asnumpy/numpy/float/bool, every step vs once
    sync_async    run_sync_async,                 10,000 × y = x + 1, the t1/t2/t3 cost model,
                  sweep_sync_async                where the advantage disappears
    queue_memory  run_queue_memory,               queue and memory growth, sync every k, max_pending,
                  compare_sync_every,
                  sample_queue_summary            the real V100 trace at the CUDA launch-queue cap
    parallelism   run_two_devices,                two devices concurrent vs a barrier between them;
    mlp_parallel  run_mlp_parallel                a data-parallel MLP on a host and two devices
    parallel_lessons  plan_devices, *_checks      threads or modelled devices here; 02/07's lesson checks
    scheduling    run_scheduling                  per-op scheduling cost, 1 → 16 worker threads
    profiling     run_profiling, sample_summaries, export_perfetto
    collective    run_collective                  all_reduce blocking vs async_op=True on local ranks (10)
    ddp           run_overlap, run_straggler      DDP after backward vs bucketed; one slow rank (10)
    modelled_link run_modelled_overlap            the measured backward pass beside a modelled link (10)
    in_jax        run_asynchrony_jax, ...         01, 03, 04 and 05 in JAX (optional), the same results and checks
    sizing        workload, device_sizes,         each CUDA lesson's workload sized to the GPU it runs on
                  size_for_device, measure_device (its kernels a stated multiple of a launch)

The lesson checks of a topic live in its module (``collective.checks``, ``ddp.overlap_checks``, ...):
pure functions of a frozen result, each the check of a claim declared in :mod:`d2l_async.claims` with what
would make it false.  A result displays itself in a notebook (where it ran, its numbers, its checks), so a
cell calls the experiment and shows the result; the few check functions a cell calls on its own
(:func:`ran_ahead_check`, :func:`frontend_wait_check`, :func:`report_check`, :func:`book_loop_check`,
:func:`hta_check`) are exported here.  Notebook 10's experiments start their ranks with
:func:`d2l_async.distributed.launch`.

Conventions shared by every function:

* arguments are keyword-only and checked at the call (a ``ValueError`` that names the fix);
* every default workload size goes through :func:`d2l_async.config.scale` (quick mode shrinks it);
* the device experiments (02, 07) also take ``backend="modelled"``: engine devices whose ops hold a
  modelled duration (durations from a cost model, not measured; :mod:`d2l_async.engine._modelled`);
* ``backend="engine"`` (the CPU dependency engine, virtual devices) always works; ``"cuda"`` uses real
  streams, ``torch.cuda.synchronize(device)`` and :mod:`d2l_async.capture`; ``"auto"`` picks CUDA when
  present.  Every result has ``device`` (a sentence) and ``virtual`` (True for engine threads);
* results are frozen dataclasses holding :class:`~d2l_async.benchmark.Measurement` objects (raw runs
  kept) and :class:`~d2l_async.trace.Trace` objects for the figures of :mod:`d2l_async.viz`;
* the book's numbers live in :data:`BOOK` only, each with its source, always shown as the book's.
"""

from __future__ import annotations

from ._common import BACKENDS, Setup, resolve_backend
from .asynchrony import AsynchronyResult, ran_ahead_check, run_asynchrony
from .barriers import BarrierResult, run_barriers
from .blockers import BLOCKER_DEMO, BLOCKERS, BlockersResult, BlockEvent, report_check, run_blockers
from .book import BOOK, BookNumber, book_number
from .collective import RankFailure, run_collective, run_rank_failure
from .ddp import run_overlap, run_straggler
from .dependency import (EXPRESSIONS, DependencyResult, IndependenceResult, check_expression, run_expression,
                         run_independent_vs_dependent)
from .in_jax import run_asynchrony_jax, run_barriers_jax, run_blockers_jax, run_sync_async_jax
from .mlp_parallel import MLPResult, compute_comm_overlap, run_mlp_parallel
from .modelled_link import run_modelled_overlap
from .parallel_lessons import frontend_wait_check, plan_devices
from .parallelism import TwoDeviceResult, run_two_devices
from .profiling import PROFILE_SAMPLES, ProfilingResult, export_perfetto, hta_check, run_profiling, sample_summaries
from .queue_memory import (OPS_PER_BATCH, QueueMemoryResult, SampleQueueSummary, compare_sync_every,
                           run_queue_memory, sample_queue_summary)
from .scheduling import SchedulingResult, run_scheduling
from .sizing import DeviceSizes, DeviceTimes, device_sizes, measure_device, size_for_device, workload
from .sync_async import (CostModel, SweepPoint, SyncAsyncResult, SyncAsyncSweep, book_loop_check, run_sync_async,
                         sweep_sync_async)

__all__ = [
    "AsynchronyResult", "BACKENDS", "BLOCKER_DEMO", "BLOCKERS", "BOOK", "BarrierResult", "BlockEvent", "BlockersResult",
    "BookNumber", "CostModel", "DependencyResult", "DeviceSizes", "DeviceTimes", "EXPRESSIONS", "IndependenceResult", "MLPResult",
    "OPS_PER_BATCH", "PROFILE_SAMPLES", "ProfilingResult", "QueueMemoryResult", "SampleQueueSummary",
    "SchedulingResult", "Setup", "SweepPoint", "SyncAsyncResult", "SyncAsyncSweep", "TwoDeviceResult",
    "book_number", "check_expression", "compare_sync_every", "compute_comm_overlap", "device_sizes",
    "export_perfetto", "measure_device",
    "resolve_backend", "run_asynchrony", "run_barriers", "run_blockers", "run_collective", "run_expression",
    "run_independent_vs_dependent", "run_asynchrony_jax", "run_barriers_jax", "run_blockers_jax", "run_mlp_parallel", "run_modelled_overlap", "run_overlap", "run_profiling",
    "run_queue_memory", "run_scheduling", "run_straggler", "run_sync_async", "run_sync_async_jax", "run_two_devices", "sample_queue_summary", "sample_summaries", "size_for_device", "sweep_sync_async", "workload",
    "RankFailure", "book_loop_check", "frontend_wait_check", "hta_check", "plan_devices", "ran_ahead_check",
    "report_check", "run_rank_failure",
]
