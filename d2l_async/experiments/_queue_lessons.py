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

from typing import Any

from d2l_async import claims, lesson
from d2l_async.verdict import compare, compare_paired

from ._why import fmt_time
from d2l_async._args import having

__all__ = ["BACKEND_BOUND", "COSTS_LITTLE", "queue_checks", "time_check", "backpressure_check", "launch_cap_check",
           "BOUND", "MEMORY", "FRONTEND_WORK", "BACKPRESSURE", "LAUNCH_CAP"]

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


BOUND = claims.claim(
    "06.bound", notebooks=("06_queue_memory",),
    sentence="synchronizing every k minibatches keeps the queue within k × ops per minibatch",
    book="MXNet editions, Improving Memory Footprint: synchronize every minibatch to bound the queue",
    quantity="the longest queue of each synchronized run against k × ops per minibatch (the trace)",
    rule="fact: within the bound for every k", says="{within}; never synchronized: {never} ops")
MEMORY = claims.claim(
    "06.memory", notebooks=("06_queue_memory",),
    sentence="never synchronizing holds more memory in pending work",
    book="MXNet editions: without synchronization intermediate results pile up in memory",
    quantity="the peak bytes held by issued-but-unfinished ops, never vs the smallest k (the trace)",
    rule="fact: more never synchronized", says="peak {never} never vs {synced} every {k}")
FRONTEND_WORK = claims.claim(
    "06.sync-costs-time", notebooks=("06_queue_memory",),
    sentence="with frontend work per minibatch, synchronizing {every} costs time",
    book="MXNet editions: synchronize 'to balance computational efficiency and memory footprint'",
    quantity="every k / never, wall time of the whole loop, paired runs",
    rule="compare: the interval wholly above 1")
BACKPRESSURE = claims.claim(
    "06.backpressure", notebooks=("06_queue_memory",), headline=False,
    sentence="max_pending={bound} bounds the queue",
    book="a bounded queue makes push block while it is full", quantity="the longest queue (the trace)",
    rule="fact: at most max_pending", says="longest queue {queue} ops; the frontend waited {waited}")
LAUNCH_CAP = claims.claim(
    "06.launch-cap", notebooks=("06_queue_memory",), headline=False,
    sentence="the recorded {gpu} trace launches mostly at the launch-queue cap",
    book="CUDA's launch queue holds about 1024 kernels; a launch beyond it waits for a slot",
    quantity="launch time spent while the queue was at its maximum, as a share of all launch time (a recorded trace)",
    rule="fact: a maximum of 1000 or more, and at least half", says="{share} of {launch} at a queue of {queue}")


def queue_checks(runs: Any) -> list[Any]:
    """The memory side of the trade over :func:`~d2l_async.experiments.compare_sync_every`'s runs.

    Returns:
        The checks of :data:`BOUND` and :data:`MEMORY` (one ✘ naming the missing run when a run is missing).
    """
    never, synced = _split(runs)
    if never is None or not synced:
        missing = "a run that never synchronizes (k=None)" if never is None else "a synchronized run (k >= 1)"
        return [BOUND.check(False, cause=lesson.Cause.MISSING, facts={
            "missing": f"compare needs {missing}: compare_sync_every(ks=(None, 1, 4, 16))", "within": "no run",
            "never": "n/a"})]
    over = [r for r in synced if r.max_queue > r.queue_bound]
    bound = BOUND.check(not over, cause=lesson.Cause.BUG, facts={
        "within": ", ".join(f"k={r.sync_every}: {r.max_queue} ≤ {r.queue_bound}" for r in synced),
        "never": never.max_queue,
        "bug": ", ".join(f"k={r.sync_every} reached {r.max_queue} > {r.queue_bound}" for r in over) or "none"},
        numbers={"over": len(over), "never_queue": never.max_queue,
                 **{f"queue k={r.sync_every}": r.max_queue for r in synced},
                 **{f"bound k={r.sync_every}": r.queue_bound for r in synced}})
    k = synced[0]
    if never.trace is not None and never.trace.meta.get("engine") == "naive":
        cause, facts = lesson.Cause.NO_WORKER_THREAD, {}
    else:
        cause, facts = lesson.Cause.TOO_SMALL, {"small": "each minibatch's issuing", "took": fmt_time(
            never.seconds / max(never.batches, 1)), "beside": f"the backend's work: the queue reached {never.max_queue}"}
    memory = MEMORY.check(bool(never.peak_pending_bytes > k.peak_pending_bytes), cause=cause, facts={
        **facts, "never": _mib(never.peak_pending_bytes), "synced": _mib(k.peak_pending_bytes),
        "k": f"{k.sync_every} minibatch" + ("es" if k.sync_every > 1 else "")},
        numbers={"never_bytes": never.peak_pending_bytes, "synced_bytes": k.peak_pending_bytes, "k": k.sync_every})
    return [bound, memory]


def time_check(runs: Any) -> Any:
    """The time side of the trade, never synchronizing against the smallest ``k``, decided from the runs'
    interleaved repeats (:attr:`~d2l_async.experiments.QueueMemoryResult.runs`).

    The claim is :data:`FRONTEND_WORK`: with frontend work per minibatch (``frontend_work_s``) that work
    no longer overlaps the backend's when the frontend waits, so syncing costs time.  Without frontend
    work the claim does not apply (the check says so).

    Returns:
        The check of the claim that applies.
    """
    never, synced = _split(runs)
    if never is None or not synced:
        return queue_checks(runs)[0]
    k = synced[0]
    every = f"every {k.sync_every} minibatch" + ("es" if k.sync_every > 1 else "")
    names = (every, "never")
    paired = len(k.runs) == len(never.runs) >= 2
    work = float(getattr(never, "frontend_work_s", 0.0) or 0.0)
    if work <= 0 or never.seconds <= 0 or k.seconds <= 0:
        missing = ("no frontend work per minibatch: pass frontend_work_s to compare_sync_every" if work <= 0
                   else "a run took no time")
        return FRONTEND_WORK.check(False, cause=lesson.Cause.MISSING, shown="not measured",
                                   facts={"every": every, "missing": missing})
    decide = compare_paired if paired else compare
    runs_words = f"{len(k.runs)} paired runs" if paired else f"{len(k.runs)} vs {len(never.runs)} runs"
    v = decide(k.runs, never.runs, names=names, less=False)
    if v.holds is None:
        cause, facts = lesson.Cause.SPREAD, {"runs": runs_words}
    else:  # not slower: the frontend's work was far from the backend's, little was left to overlap
        cause, facts = lesson.Cause.TOO_SMALL, {
            "small": "the frontend's work", "took": fmt_time(work * never.batches),
            "beside": f"the backend's {fmt_time(never.backend_busy_seconds)}: little to overlap"}
    return FRONTEND_WORK.check(v, cause=cause, facts={**facts, "every": every},
                               detail=f"medians {fmt_time(k.seconds)} vs {fmt_time(never.seconds)}",
                               numbers={"frontend_work_s": work * never.batches,
                                        "backend_busy_s": float(never.backend_busy_seconds)})


def backpressure_check(result: Any) -> Any:
    """``max_pending`` bounds the queue; the frontend waits only when it is full.

    Returns:
        The check of :data:`BACKPRESSURE`.
    """
    if getattr(result, "max_pending", None) is None:
        return BACKPRESSURE.check(False, cause=lesson.Cause.MISSING, shown="no max_pending in this run",
                                  facts={"bound": "None", "missing": "run_queue_memory(max_pending=8) sets the bound"})
    return BACKPRESSURE.check(bool(result.max_queue <= result.max_pending), cause=lesson.Cause.BUG, facts={
        "bound": result.max_pending, "queue": result.max_queue, "waited": fmt_time(result.blocked_seconds),
        "bug": f"the queue reached {result.max_queue} ops: push did not block"})


def launch_cap_check(summary: Any) -> Any:
    """In a recorded GPU trace, most launch time is spent at CUDA's launch-queue cap.

    Returns:
        The check of :data:`LAUNCH_CAP`.
    """
    having("summary", summary, ("launch_seconds",), what="a SampleQueueSummary")
    share = summary.launch_seconds_at_cap / summary.launch_seconds if summary.launch_seconds > 0 else 0.0
    return LAUNCH_CAP.check(bool(summary.max_queue >= 1000 and share >= 0.5), cause=lesson.Cause.TRACE, facts={
        "gpu": summary.gpu, "share": f"{share:.0%}", "launch": fmt_time(summary.launch_seconds),
        "queue": summary.max_queue,
        "seen": f"{summary.name}'s queue peaks at {summary.max_queue} kernels"},
        numbers={"share": share, "max_queue": summary.max_queue})
