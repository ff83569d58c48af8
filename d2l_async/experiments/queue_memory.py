"""Queue memory: a frontend that outruns the backend, and minibatch synchronization (D2L §13.2.3).

Each minibatch issues a few ops (load a batch, a matrix product, the loss, the update).  When the
frontend issues faster than the backend computes, the queue grows without bound, and every queued
op holds the memory of its batch until it runs.  Three fixes, all measured here:

* **sync every k minibatches** — wait for the parameters after every k-th update: the queue never
  holds more than ``k × ops_per_batch`` ops (the book's advice, whose MXNet experiment D2L deleted);
* **back-pressure** — ``ThreadedEngine(max_pending=N)`` makes ``push`` block at N pending ops;
* **the hardware does it for you** — a real V100 training step (:func:`sample_queue_summary`):
  the CUDA launch queue sits at its cap (~1022 entries) and ``cudaLaunchKernel`` blocks the CPU.

The book's remedy is a trade: less memory held by pending work, for a frontend that now waits.  What
the wait costs in total time depends on who is the bottleneck.  When the backend is (it is here: one
worker thread doing every product), the total is the backend's work either way and the waits mostly
fill time the frontend would have spent idle at the final barrier; the backend's work itself may even
take longer with hundreds of minibatches' arrays alive.  Each result therefore keeps the backend's
busy time beside the wall time, and :func:`queue_checks` says which way this run went, with numbers.
The advice comes from the MXNet versions of the book: d2l-ai/d2l-en,
``chapter_computational-performance/async-computation.md``, subsection "Improving Memory Footprint",
removed by commit 6b4cdca ("async comp done", 14 April 2021; last present at its parent 7815147).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from d2l_async import config

from ._common import engine_label, positive_int
from ._show import Displayed, DisplayedTuple, ran_on
from ._why import fmt_time
from .deadline import checkpoint
from ._queue_lessons import backpressure_check, launch_cap_check, queue_checks, time_check

__all__ = ["OPS_PER_BATCH", "QueueMemoryResult", "SampleQueueSummary", "run_queue_memory",
           "compare_sync_every", "sample_queue_summary", "queue_checks", "time_check", "backpressure_check",
           "launch_cap_check"]

#: Ops one minibatch issues: load, product, loss, update.
OPS_PER_BATCH = 4


@dataclass(frozen=True)
class QueueMemoryResult(Displayed):
    """One training-like loop on the engine.

    Attributes:
        sync_every: the frontend waited for the parameters every this many minibatches (None: never).
        max_pending: the engine's back-pressure bound (None: unbounded).
        batches: minibatches issued.
        ops_per_batch: ops each minibatch issues (:data:`OPS_PER_BATCH`).
        max_queue: the longest launch queue of the backend lane (HTA's definition, from the trace).
        peak_pending_bytes: the most memory held by issued-but-unfinished ops (from the trace).
        blocked_seconds: time the frontend spent waiting (syncs and full-queue blocks).
        seconds: wall time of the loop including a final ``waitall``.
        trace: the engine's trace.
        device, virtual: where it ran.
        backend_busy_seconds: the worker's op time summed (from the trace): the backend's work.
        machine: :func:`d2l_async.devices.machine` when the run started.
        frontend_work_s: the frontend's own work per minibatch before it issues the minibatch's ops
            (a wait for the next batch, as a data loader reading from disk: no CPU); 0 for none.
        runs_s: wall seconds of every repeat of this loop (:func:`compare_sync_every` interleaves them
            across the ``k`` compared); ``seconds`` is their median.  One run: ``(seconds,)``.
    """

    sync_every: int | None
    max_pending: int | None
    batches: int
    ops_per_batch: int
    max_queue: int
    peak_pending_bytes: int
    blocked_seconds: float
    seconds: float
    trace: Any
    device: str
    virtual: bool
    backend_busy_seconds: float = float("nan")
    machine: Any = None
    frontend_work_s: float = 0.0
    runs_s: tuple[float, ...] = ()

    @property
    def runs(self) -> tuple[float, ...]:
        """Wall seconds of each repeat (``(seconds,)`` for a single run)."""
        return self.runs_s or (self.seconds,)

    @property
    def queue_bound(self) -> int | None:
        """The bound the synchronization promises: ``sync_every × ops_per_batch`` (or ``max_pending``)."""
        bounds = [b for b in (self.sync_every and self.sync_every * self.ops_per_batch, self.max_pending) if b]
        return min(bounds) if bounds else None

    def checks(self) -> list[Any]:
        """The back-pressure check of a ``max_pending`` run (none for another run)."""
        return [backpressure_check(self)] if self.max_pending is not None else []

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        how = ("never synchronized" if self.sync_every is None else f"synchronized every {self.sync_every}") + (
            f", max_pending={self.max_pending}" if self.max_pending is not None else "")
        return (f"{ran_on(self.device, self.virtual)}; {self.batches} minibatches × {self.ops_per_batch} ops, {how}",
                [("longest queue", f"{self.max_queue} ops"),
                 ("pending work at its peak", f"{self.peak_pending_bytes / 2**20:.2f} MiB"),
                 ("the frontend waited", fmt_time(self.blocked_seconds)), ("the whole loop", fmt_time(self.seconds))])


class SyncEvery(DisplayedTuple):
    """:func:`compare_sync_every`'s runs (one :class:`QueueMemoryResult` per ``k``); displayed, a table and the
    checks of notebook 06's claims: the bound and the memory, and with frontend work the time it costs."""

    def checks(self) -> list[Any]:
        """:func:`queue_checks`, and :func:`time_check` where the runs had frontend work."""
        work = any(getattr(r, "frontend_work_s", 0.0) for r in self)
        return [time_check(self)] if work else queue_checks(self)

    @property
    def backend_per_batch(self) -> float:
        """The backend's seconds per minibatch in the run synchronized every minibatch (its ops ran one
        minibatch at a time, none piling up): the frontend work that would match it."""
        one = next((r for r in self if r.sync_every == 1), None)
        if one is None:
            raise ValueError("backend_per_batch needs a run synchronized every minibatch: compare_sync_every(ks=(None, 1))")
        return one.backend_busy_seconds / one.batches

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        first = self[0]
        work = f", {fmt_time(first.frontend_work_s)} of frontend work per minibatch" if first.frontend_work_s else ""
        return (f"{ran_on(first.device, first.virtual)}; {first.batches} minibatches × {first.ops_per_batch} ops{work}; "
                f"medians of {len(first.runs)} interleaved runs",
                [(f"sync every {r.sync_every or 'never'}", f"queue {r.max_queue} ops (bound {r.queue_bound or 'none'}), "
                  f"pending {r.peak_pending_bytes / 2**10:.0f} KiB, loop {fmt_time(r.seconds)}") for r in self])

def run_queue_memory(
    *, batches: int | None = None, sync_every: int | None = None, max_pending: int | None = None,
    batch_size: int | None = None, features: int | None = None, frontend_work_s: float = 0.0,
) -> QueueMemoryResult:
    """Issue ``batches`` minibatches on the engine, syncing every ``sync_every`` (or never).

    Args:
        batches: minibatches; default 200 (quick mode 40).
        sync_every: wait for the parameters (``W.wait_to_read()``) after every k-th update;
            ``None`` never waits until the end.
        max_pending: engine back-pressure: ``push`` blocks while this many ops are pending.
        batch_size: rows per minibatch; default 256 (quick mode 128).
        features: columns of the data and side of the weight matrix; default 256 (quick mode 128).
        frontend_work_s: seconds the frontend spends on each minibatch before issuing it -- waiting for
            the next batch, as a data loader reading from disk does (a sleep: it needs no CPU, so it can
            overlap the backend's work even on one core).  Never synchronized, that wait overlaps the
            backend's work on earlier minibatches; synchronized every minibatch, it cannot.

    Returns:
        The frozen :class:`QueueMemoryResult`: the settings, the longest queue, the peak bytes held by pending ops,
        the seconds blocked, the loop's wall seconds (also the one entry of ``runs_s``), the trace, the device
        label, the backend's busy seconds and the :class:`~d2l_async.devices.Machine` read before it.

    Raises:
        ValueError: non-positive sizes (``sync_every``/``max_pending`` must be None or >= 1), or a
            ``frontend_work_s`` outside [0, 1].
    """
    batches = positive_int("batches", batches if batches is not None else config.scale(200, 40), maximum=100_000)
    if sync_every is not None:
        sync_every = positive_int("sync_every", sync_every, maximum=100_000)
    if max_pending is not None:
        max_pending = positive_int("max_pending", max_pending, maximum=10_000_000)
    batch_size = positive_int("batch_size", batch_size if batch_size is not None else config.scale(256, 128),
                              maximum=1 << 16)
    features = positive_int("features", features if features is not None else config.scale(256, 128),
                            maximum=1 << 14)
    if isinstance(frontend_work_s, bool) or not isinstance(frontend_work_s, (int, float)) \
            or not 0 <= frontend_work_s <= 1:
        raise ValueError(f"frontend_work_s must be seconds in [0, 1] per minibatch, got {frontend_work_s!r}")
    import torch

    from d2l_async.analysis import blocked_time, pending_memory_series, queue_length_summary
    from d2l_async.engine import make_engine

    from d2l_async.devices import machine

    here = machine()
    lr = 1e-3 / batch_size

    def update(x: Any, h: Any, loss: Any, w: Any) -> None:
        # the step reads the loss (as a logging or loss-scaled step would), so waiting for W after
        # it waits for the whole minibatch
        w.sub_(lr * (x.T @ h))

    with make_engine(workers=1, devices=("cpu:0",), max_pending=max_pending) as eng:
        w = eng.array(torch.eye(features), name="W")
        # a few source batches; each minibatch is *copied* from one (an op that holds its bytes,
        # like a host-to-device copy of the batch)
        sources = [eng.array(torch.randn(batch_size, features), name=f"data{j}") for j in range(4)]
        eng.waitall()
        eng.reset_trace()
        t0 = time.perf_counter()
        for i in range(batches):
            if frontend_work_s:
                time.sleep(frontend_work_s)  # the frontend's own work: waiting for the next batch to arrive
            x = sources[i % len(sources)].to("cpu:0", name=f"X{i}")  # load the batch
            h = x @ w
            loss = h.mean()
            eng.push(update, reads=(x, h, loss), writes=(w,), name="update")
            if sync_every is not None and (i + 1) % sync_every == 0:
                w.wait_to_read()  # minibatch synchronization
            checkpoint(i + 1, batches, since=t0)  # a dashboard's time limit stops the run here
        eng.waitall()
        seconds = time.perf_counter() - t0
        label = engine_label(1)
        trace = eng.trace().with_meta(device=label, virtual=True, experiment="queue_memory")
    give_back_memory()  # the freed pending tensors: glibc keeps them for reuse unless asked
    summary = queue_length_summary(trace)
    max_queue = int(summary["max"].max()) if len(summary) else 0
    mem = pending_memory_series(trace)
    peak = int(mem["pending_bytes"].max()) if len(mem) else 0
    blocked = float(blocked_time(trace)["total"].sum())
    from d2l_async.trace import BACKEND_KINDS

    work = trace.where(kind=BACKEND_KINDS)
    busy = float((work["end"] - work["start"]).sum()) if len(work) else 0.0
    return QueueMemoryResult(sync_every, max_pending, batches, OPS_PER_BATCH, max_queue, peak, blocked, seconds,
                             trace, label, True, busy, here, float(frontend_work_s), (seconds,))


def give_back_memory() -> bool:
    """Free the last run's minibatch tensors and hand the memory back to the operating system.

    Two things keep a finished run's pending tensors: the engine's reference cycles (its threads and
    callbacks) hold them until the garbage collector's next pass, and glibc keeps freed memory in its
    arenas for reuse.  Either way the kernel's resident memory stays at the run's peak and the next run's
    peak adds to it: 06's four loops of five runs each reached 1.1 GiB in default mode, beyond what a 2 GB
    Binder pod leaves a kernel beside a second one.  So a young-generation collection (milliseconds), then
    glibc's ``malloc_trim(0)``; where ``malloc_trim`` does not exist (macOS, musl) only the collection.

    Returns:
        True when memory was handed back (glibc), False where the call does not exist.
    """
    import ctypes
    import gc

    gc.collect(1)  # the engine's cycles: the tensors they hold are freed here, not at some later pass

    try:
        libc = ctypes.CDLL("libc.so.6")  # by name: ctypes.util.find_library would start a process
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return False
    return bool(trim(0))


def compare_sync_every(
    *, ks: tuple[int | None, ...] = (None, 1, 4, 16), batches: int | None = None, repeats: int | None = None,
    **kwargs: Any
) -> SyncEvery:
    """:func:`run_queue_memory` for each ``sync_every`` in ``ks`` (``None``: never sync), ``repeats`` times.

    The repeats are interleaved (every ``k`` once, then every ``k`` again, ...), so a change of the
    machine's load hits every ``k`` alike; each result is the repeat whose time is the median (its trace,
    queue and memory), with ``runs_s`` holding every repeat's wall time and ``seconds`` their median --
    the samples a time claim is decided from (:func:`d2l_async.verdict.compare`).

    Args:
        repeats: runs per ``k``; default 5 (quick mode 3: the bootstrap interval needs at least 3).

    Returns:
        One :class:`QueueMemoryResult` per entry of ``ks``, in that order: the median-time repeat's run (trace,
        queue, memory), with ``seconds`` the median wall time and ``runs_s`` every repeat's wall time -- as
        :class:`SyncEvery`, a tuple that displays its table and checks.
    """
    if isinstance(ks, (str, bytes)) or not hasattr(ks, "__iter__") or not len(tuple(ks)):
        raise ValueError(f"ks must be a non-empty sequence of ints or None, got {ks!r}")
    ks = tuple(ks)
    repeats = positive_int("repeats", repeats if repeats is not None else config.scale(5, 3), maximum=100)
    rounds = [[run_queue_memory(batches=batches, sync_every=k, **kwargs) for k in ks] for _ in range(repeats)]
    out = []
    for j in range(len(ks)):
        runs = tuple(rnd[j].seconds for rnd in rounds)
        mid = statistics.median(runs)
        middle = min((rnd[j] for rnd in rounds), key=lambda r: abs(r.seconds - mid))  # its trace, its queue
        out.append(dataclasses.replace(middle, seconds=mid, runs_s=runs))
    return SyncEvery(out)


@dataclass(frozen=True)
class SampleQueueSummary(Displayed):
    """The launch queue of a real GPU trace shipped with the package.

    Attributes:
        name: the sample's name (see :data:`d2l_async.data.SAMPLES`).
        gpu: the GPU that recorded it (from the trace).
        lane: the backend lane with the longest queue.
        max_queue: its longest queue (the CUDA launch queue caps near 1024).
        time_weighted_mean: its mean queue length weighted by time.
        fraction_at_max: share of the lane's span spent at the maximum.
        launches: kernel launches on the frontend.
        launch_seconds: frontend seconds inside launch calls.
        launch_seconds_at_cap: of those, seconds in launches issued while the queue was within 1 %
            of its maximum (the CPU blocking because the queue is full).
        blocked_seconds: frontend seconds waiting for the GPU: synchronizations and copies into
            pageable host memory (a ``cudaMemcpyAsync`` that returns when its copy is done).
        duration: the trace's duration.
        trace: the loaded trace.
    """

    name: str
    gpu: str
    lane: str
    max_queue: int
    time_weighted_mean: float
    fraction_at_max: float
    launches: int
    launch_seconds: float
    launch_seconds_at_cap: float
    blocked_seconds: float
    duration: float
    trace: Any

    @property
    def virtual(self) -> bool:
        return False

    def checks(self) -> list[Any]:
        """The launch-queue cap's check of this recorded trace."""
        return [launch_cap_check(self)]

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        return (f"Recorded on {self.gpu} (a real GPU; only its trace is read here): {self.name}",
                [(f"longest launch queue on {self.lane}", f"{self.max_queue} kernels, at it "
                  f"{self.fraction_at_max:.0%} of the time"),
                 ("launch calls", f"{self.launches:,} taking {fmt_time(self.launch_seconds)}, "
                                  f"{fmt_time(self.launch_seconds_at_cap)} of it at the cap"),
                 ("the step", fmt_time(self.duration))])

def sample_queue_summary(name: str = "v100_training_step") -> SampleQueueSummary:
    """Summarize the launch queue of a shipped GPU trace (default: the V100 training step).

    Returns:
        The frozen :class:`SampleQueueSummary` of the lane with the longest queue: the sample and GPU names, the
        lane, its longest and time-weighted mean queue, the share of time at the longest, the launch count and
        seconds (in all and while the queue was within 1 % of its longest), the seconds blocked, the trace's
        duration and the trace.

    Raises:
        ValueError: an unknown sample name (the message lists them) or a trace without GPU work.
    """
    from d2l_async import data
    from d2l_async.analysis import blocked_time, queue_length_series, queue_length_summary

    if name not in data.SAMPLES:
        raise ValueError(f"unknown sample {name!r}; choose one of {sorted(data.SAMPLES)}")
    trace = data.load_sample(name)
    summary = queue_length_summary(trace)
    if not len(summary):
        raise ValueError(f"sample {name!r} has no backend work with a launch queue; try 'v100_training_step'")
    row = summary.sort_values("max", kind="stable").iloc[-1]
    series = queue_length_series(trace, row["lane"])
    launches = trace.where(kind="launch")
    starts, durs = launches["start"], launches["end"] - launches["start"]
    t, q = series["time"].to_numpy(), series["queue_length"].to_numpy()
    idx = np.searchsorted(t, starts, side="right") - 1
    q_at = np.where(idx >= 0, q[np.clip(idx, 0, len(q) - 1)], 0) if len(q) else np.zeros(len(starts))
    at_cap = q_at >= 0.99 * int(row["max"])
    return SampleQueueSummary(
        name, str(trace.meta.get("device", "unknown GPU")), str(row["lane"]), int(row["max"]),
        float(row["time_weighted_mean"]), float(row["fraction_at_max"]), int(len(launches)),
        float(durs.sum()), float(durs[at_cap].sum()), float(blocked_time(trace)["total"].sum()),
        float(trace.duration), trace)


# ---------------------------------------------------------------- what makes each claim false
def _example(sync_every: int | None, seconds: float, *, queue: int = 4, pending: int = 1 << 20,
             work: float = 0.0, busy: float = 0.01, machine: Any = None, runs: tuple[float, ...] = ()
             ) -> QueueMemoryResult:
    """A synthetic loop of 40 minibatches: its median seconds, three runs 2% apart unless ``runs``."""
    runs = runs or (seconds, seconds * 1.02, seconds * 0.98)
    return QueueMemoryResult(sync_every, None, 40, 4, queue, pending, 0.001, seconds, None, "example", True, busy,
                             machine, work, runs)


def _register() -> None:
    from d2l_async import claims, lesson

    from ._queue_lessons import BACKPRESSURE, BOUND, FRONTEND_WORK, LAUNCH_CAP, MEMORY

    over = [_example(None, 0.02, queue=160), _example(1, 0.03, queue=9)]
    claims.falsifier(BOUND, "a run synchronized every minibatch with 9 ops queued (bound 4)",
                     lambda: queue_checks(over)[0])
    claims.counterfactual(BOUND, "a run over its bound", lesson.Cause.BUG, lambda: queue_checks(over)[0])
    claims.counterfactual(BOUND, "no never-synchronized run", lesson.Cause.MISSING,
                          lambda: queue_checks([_example(1, 0.03)])[0])
    same = [_example(None, 0.02, queue=4, pending=1 << 20), _example(1, 0.03, queue=4, pending=1 << 20)]
    claims.falsifier(MEMORY, "the backend kept up: the same pending memory", lambda: queue_checks(same)[1])
    claims.counterfactual(MEMORY, "the backend kept up", lesson.Cause.TOO_SMALL, lambda: queue_checks(same)[1])
    flat = [_example(None, 0.02, work=0.001), _example(1, 0.02, work=0.001)]
    claims.falsifier(FRONTEND_WORK, "synchronized as fast as never", lambda: time_check(flat))
    claims.counterfactual(FRONTEND_WORK, "the runs scatter across 1", lesson.Cause.SPREAD, lambda: time_check([
        _example(None, 0.02, work=0.001, runs=(0.02, 0.03, 0.02)), _example(1, 0.02, work=0.001, runs=(0.03, 0.02, 0.021))]))
    claims.counterfactual(FRONTEND_WORK, "synchronized faster, beyond the spread", lesson.Cause.TOO_SMALL,
                          lambda: time_check([_example(None, 0.03, work=0.001), _example(1, 0.02, work=0.001)]))
    bp = _example(None, 0.02, queue=20)
    bp = dataclasses.replace(bp, max_pending=8)
    claims.falsifier(BACKPRESSURE, "a queue of 20 under max_pending=8", lambda: backpressure_check(bp))
    claims.counterfactual(BACKPRESSURE, "a queue of 20 under max_pending=8", lesson.Cause.BUG,
                          lambda: backpressure_check(bp))
    claims.falsifier(LAUNCH_CAP, "the recorded A100 AlexNet trace (a shallow queue)",
                     lambda: launch_cap_check(sample_queue_summary("a100_alexnet")))
    claims.counterfactual(LAUNCH_CAP, "the recorded A100 AlexNet trace", lesson.Cause.TRACE,
                          lambda: launch_cap_check(sample_queue_summary("a100_alexnet")))


_register()
