"""Lesson checks of notebook 06, as pure functions of frozen results (D2L §13.2, MXNet editions).

* :func:`queue_checks` — over :func:`~d2l_async.experiments.compare_sync_every`'s runs: the bound
  ``k × ops per minibatch`` held; never synchronizing held more pending memory; and the time side
  (:func:`time_check`), the book's trade-off ("balance computational efficiency and memory
  footprint"), decided from interleaved repeats: with the backend as the bottleneck syncing costs
  little; with frontend work per minibatch it costs that work's overlap.
* :func:`backpressure_check` — a ``max_pending`` run stayed within its bound.
* :func:`launch_cap_check` — a recorded GPU trace's launch queue sat at CUDA's cap.
"""

from __future__ import annotations

import math
from typing import Any

from d2l_async import lesson
from d2l_async.verdict import compare, compare_paired

from ._why import cpus_clause, fmt_time
from d2l_async._args import having

__all__ = ["BACKEND_BOUND", "COSTS_LITTLE", "queue_checks", "time_check", "backpressure_check", "launch_cap_check"]

#: The backend is "the bottleneck" when its ops fill at least this share of the wall time.
BACKEND_BOUND = 0.8
#: "Costs little": synchronized, the loop takes less than this factor of never synchronizing.  Each wait
#: still costs a thread's wake-up and the frontend's issuing of the next minibatch while the backend
#: idles (about a fifth of this loop's minibatch on an idle 2-core machine), so the bound is not 1.
COSTS_LITTLE = 1.5


def _mib(b: float) -> str:
    return f"{b / 2**20:.2f} MiB"


def _split(runs: Any) -> tuple[Any, list[Any]]:
    if isinstance(runs, (str, bytes)) or not hasattr(runs, "__iter__"):
        raise TypeError(f"queue_checks() expects the runs of compare_sync_every(), got {type(runs).__name__}")
    runs = list(runs)
    if not runs or not all(hasattr(r, "sync_every") and hasattr(r, "peak_pending_bytes") for r in runs):
        raise ValueError("queue_checks() needs a non-empty sequence of QueueMemoryResult (compare_sync_every())")
    never = next((r for r in runs if r.sync_every is None and r.max_pending is None), None)
    synced = sorted((r for r in runs if r.sync_every is not None), key=lambda r: r.sync_every)
    return never, synced


def queue_checks(runs: Any) -> list[Any]:
    """Three checks (fewer when a run is missing: then one ✘ says which to add)."""
    never, synced = _split(runs)
    if never is None or not synced:
        missing = "a run that never synchronizes (k=None)" if never is None else "a synchronized run (k >= 1)"
        return [lesson.check("synchronizing every k minibatches bounds the queue and the memory", False,
                             shown=f"{len(list(runs))} run(s)", otherwise=f"compare needs {missing}: "
                             "compare_sync_every(ks=(None, 1, 4, 16))")]
    bound = lesson.check(
        "synchronizing every k minibatches keeps the queue within k × ops per minibatch",
        all(r.max_queue <= r.queue_bound for r in synced),
        shown=", ".join(f"k={r.sync_every}: {r.max_queue} ≤ {r.queue_bound}" for r in synced)
        + f" (never: {never.max_queue} ops)",
        otherwise="a run exceeded its bound: " + ", ".join(
            f"k={r.sync_every} reached {r.max_queue} > {r.queue_bound}" for r in synced if r.max_queue > r.queue_bound)
        + ". The wait must read the last update's output (W), or ops of earlier minibatches stay queued.",
    )
    k = synced[0]
    memory = lesson.check(
        "never synchronizing holds more memory in pending work",
        bool(never.peak_pending_bytes > k.peak_pending_bytes),
        shown=(f"peak pending {_mib(never.peak_pending_bytes)} never vs {_mib(k.peak_pending_bytes)} every "
               f"{k.sync_every} minibatch(es) ({never.peak_pending_bytes / max(k.peak_pending_bytes, 1):.0f}×)"),
        otherwise=(f"the backend kept up: never synchronized, the queue reached only {never.max_queue} ops, so "
                   f"little was pending ({cpus_clause(never.machine)}). More minibatches or a larger batch_size "
                   "make the frontend outrun it."),
    )
    return [bound, memory, time_check(runs)]


def time_check(runs: Any) -> Any:
    """The time side of the trade, never synchronizing against the smallest ``k``, decided from the runs'
    interleaved repeats (:attr:`~d2l_async.experiments.QueueMemoryResult.runs`).

    Which claim is tested depends on the loop: with no work of its own on the frontend the backend is
    the bottleneck and a wait only moves the frontend's idle time (plus a wake-up and the issuing of
    the next minibatch), so the claim is that syncing costs little (under :data:`COSTS_LITTLE` × never
    synchronizing); with frontend work per
    minibatch (``frontend_work_s``) that work no longer overlaps the backend's, and the claim is that
    syncing costs time.  Each outcome is explained from the runs' own numbers.
    """
    never, synced = _split(runs)
    if never is None or not synced:
        return queue_checks(runs)[0]
    k = synced[0]
    every = f"every {k.sync_every} minibatch" + ("es" if k.sync_every > 1 else "")
    bn, bk = never.backend_busy_seconds, k.backend_busy_seconds
    known = all(math.isfinite(v) for v in (bn, bk)) and never.seconds > 0 and k.seconds > 0
    fn, fk = (bn / never.seconds, bk / k.seconds) if known else (float("nan"), float("nan"))
    names = (every, "never")
    # the repeats ran in rounds (never, 1, 4, ..., never, 1, ...): run i of each k pairs with run i of never
    paired = len(k.runs) == len(never.runs) >= 2

    def decide(**kw: Any) -> Any:
        if never.seconds <= 0 or k.seconds <= 0:
            return False
        return (compare_paired if paired else compare)(k.runs, never.runs, names=names, **kw)

    ratio = k.seconds / never.seconds if never.seconds > 0 else float("inf")
    shown = (f"never {fmt_time(never.seconds)} vs {every} {fmt_time(k.seconds)} (medians of {len(never.runs)} "
             f"interleaved runs each; {every} / never = "
             + (f"{decide().ratio:.2f}, the median of the paired runs" if paired and ratio != float("inf")
                else f"{ratio:.2f}") + ")"
             f"; the frontend waited {fmt_time(never.blocked_seconds)} vs {fmt_time(k.blocked_seconds)}"
             + (f"; the backend was busy {fmt_time(bn)} ({fn:.0%}) vs {fmt_time(bk)} ({fk:.0%})" if known else ""))
    where = cpus_clause(never.machine)
    waits = max(1, never.batches // k.sync_every)
    per_wait = (k.seconds - never.seconds) / waits
    work = float(getattr(never, "frontend_work_s", 0.0) or 0.0)
    if work > 0:
        verdict = decide(less=False)
        busy_words = (f"the backend's ops took {fmt_time(bn)} never synchronized and {fmt_time(bk)} synchronized "
                      f"{every}" if known else "the backend's busy time was not recorded")
        return lesson.check(
            f"with {fmt_time(work)} of frontend work per minibatch, synchronizing {every} costs time "
            "(the work no longer overlaps the backend's)", verdict, shown=shown,
            otherwise=(f"synchronized {every}, the loop was not slower: {busy_words}, against {fmt_time(work)} x "
                       f"{never.batches} = {fmt_time(work * never.batches)} of frontend work ({where}); with the "
                       "frontend's work much longer or much shorter than the backend's, little is left to overlap. "
                       "Set frontend_work_s near the backend's time per minibatch."),
            unclear=(f"{busy_words}; {where}: more repeats (repeats=) or more minibatches decide it"))
    premise = (f"the backend was busy only {fn:.0%} of the never-synchronized loop: it was not the bottleneck here, "
               "so the frontend's pushes and wake-ups are part of every minibatch's time"
               if known and fn < BACKEND_BOUND else
               f"the backend was busy {fn:.0%} and {fk:.0%} of the two loops" if known else
               "the runs did not record the backend's busy time; rerun with run_queue_memory()")
    verdict = decide(by=COSTS_LITTLE)
    return lesson.check(
        f"with the backend as the bottleneck, synchronizing {every} costs little (under "
        f"{COSTS_LITTLE:g}× never synchronizing)", verdict, shown=shown,
        otherwise=(f"each of the {waits} waits cost {fmt_time(per_wait)} on average: {premise} ({where}). A wait "
                   "hands the CPU over, and getting it back takes a thread's wake-up and, on a busy machine, a turn "
                   "on the CPU; larger minibatches make each wait a smaller share."),
        unclear=(f"{premise} ({where}): more repeats (repeats=) or more minibatches decide it"))


def backpressure_check(result: Any) -> Any:
    """``max_pending`` bounds the queue; the frontend waits only when it is full."""
    if getattr(result, "max_pending", None) is None:
        return lesson.check("max_pending bounds the queue", False, shown="no max_pending in this run",
                            otherwise="run_queue_memory(max_pending=8) sets the bound")
    return lesson.check(
        f"max_pending={result.max_pending} bounds the queue",
        bool(result.max_queue <= result.max_pending),
        shown=(f"longest queue {result.max_queue} ops; pending memory peaked at {_mib(result.peak_pending_bytes)}; "
               f"the frontend waited {fmt_time(result.blocked_seconds)}"),
        otherwise=f"the queue reached {result.max_queue} ops: the engine's push did not block (a bug: report it)",
    )


def launch_cap_check(summary: Any) -> Any:
    """In a recorded GPU trace, most launch time is spent at CUDA's launch-queue cap."""
    having("summary", summary, ("launch_seconds",), what="a SampleQueueSummary")
    share = summary.launch_seconds_at_cap / summary.launch_seconds if summary.launch_seconds > 0 else 0.0
    return lesson.check(
        f"the recorded {summary.gpu} trace spends most of its launch time at the launch-queue cap",
        bool(summary.max_queue >= 1000 and share >= 0.5),
        shown=(f"longest queue {summary.max_queue} kernels; {fmt_time(summary.launch_seconds_at_cap)} of "
               f"{fmt_time(summary.launch_seconds)} in launches made at the cap ({share:.0%}) — a recorded "
               "trace, not this machine"),
        otherwise=(f"{summary.name} peaked at {summary.max_queue} queued kernels: its launches rarely waited for "
                   "a slot; the 'v100_training_step' sample is the one that reaches the cap"),
    )
