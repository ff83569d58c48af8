"""Experiment 1: an asynchronous collective — ``all_reduce(async_op=True)`` and ``work.wait()``.

Notebook 3 waited for one variable (``wait_to_read``) instead of everything (``waitall``).  Between
processes the same idea is a collective issued with ``async_op=True``: the call hands the reduction
to the communication backend (gloo's worker thread, NCCL's stream) and returns a ``Work`` handle at
once — the frontend races ahead — and ``work.wait()`` is the barrier for that one tensor::

    frontend  [all_reduce(x, async_op=True)] [ b = a @ a  (independent) ] [work.wait()]  use x
    gloo                 [=============== all_reduce of x ===============]

:func:`run_collective` measures, on every rank, the blocking call, the async call's return, the
independent matmul and the wait, and profiles one async round; :func:`checks` turns the result into
lesson checks (facts read from the trace, timings only where the claim is about time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import config, lesson
from ..verdict import compare, compare_paired, overruled
from .._words import fmt_time
from ..trace import Trace, rank_lanes
from .._args import having
from ..distributed import OnRanks, Where, check_backend, run_and_load, where
from ..distributed.ranks import DEFAULT_NUMEL, DEFAULT_SIZE, collective_rank

__all__ = ["CollectiveResult", "run_collective", "checks", "slow_peer_check", "returned_early"]


@dataclass(frozen=True)
class CollectiveResult(OnRanks):
    """All ranks' view of one ``all_reduce`` of ``numel`` floats.

    Attributes:
        ranks: how many ranks took part.
        numel: floats reduced.
        return_s, done_s, blocking_s, compute_s: per rank, the median seconds of the async call's
            return, of the call-to-wait-done, of the blocking call, and of the independent matmul.
        completed_at_return: per rank, how many repeats were already complete when the call returned.
        repeats: timed repeats per rank.
        correct: every rank held the right sum afterwards.
        trace: one profiled async round, all ranks merged (one lane group per rank).
        where: the machine (see :class:`~d2l_async.distributed.Where`).
        seconds: wall time of the whole run, process start-up included.
        peer_delay_s: a slower peer: rank ``slow_rank`` slept this long before each of its collectives
            (0: none).
        slow_rank: that rank (-1: none).
        blocking_runs, done_runs, compute_runs: per rank, the same times for every repeat (the samples
            a time claim is decided from).
    """

    ranks: int
    numel: int
    return_s: tuple[float, ...]
    done_s: tuple[float, ...]
    blocking_s: tuple[float, ...]
    compute_s: tuple[float, ...]
    completed_at_return: tuple[int, ...]
    repeats: int
    correct: bool
    trace: Trace
    where: Where
    seconds: float
    peer_delay_s: float = 0.0
    slow_rank: int = -1
    blocking_runs: tuple[tuple[float, ...], ...] = ()
    done_runs: tuple[tuple[float, ...], ...] = ()
    compute_runs: tuple[tuple[float, ...], ...] = ()

    def waiting_ranks(self) -> tuple[int, ...]:
        """The ranks that wait for the slower peer (every rank when there is none)."""
        return tuple(k for k in range(self.ranks) if k != self.slow_rank)


def run_collective(*, ranks: int = 2, numel: int | None = None, size: int | None = None, repeats: int | None = None,
                   backend: str = "auto", timeout: float = 120.0, peer_delay_ms: float = 0.0) -> CollectiveResult:
    """``all_reduce`` blocking vs ``async_op=True`` on ``ranks`` local ranks.

    Args:
        ranks: processes (2-8).
        numel: floats reduced; default ``1 << 20`` = 1,048,576 (4 MiB; quick mode ``1 << 18``).
        size: side of the independent matmul done while the collective is in flight; default 640
            (quick mode 512): sized so the product takes at least as long as the reduction (
            with 4M floats and a 512 product, a 3 ms product was set against a 27 ms all-reduce,
            so overlap could never save time).
        repeats: timed repeats; default 5 (quick 2).
        backend: ``"auto"`` (NCCL when every rank has a GPU, else gloo), ``"gloo"`` or ``"nccl"``.
        timeout: seconds before every rank is ended.
        peer_delay_ms: make the last rank a slower peer: it sleeps this long before each of its
            collectives (its data came late).  The other ranks' blocking call then waits for it, idle,
            while their asynchronous call lets them compute the matmul during that wait -- a saving that
            needs no spare core, since the peer sleeps.

    Returns:
        The frozen :class:`CollectiveResult`: per rank the median (and per-repeat) seconds of the async call's
        return, its completion, the blocking call and the matmul, how many repeats were complete at return, whether
        every sum was right, the merged trace of one profiled async round, the
        :class:`~d2l_async.distributed.Where`, the wall time and the slow peer's delay and rank (-1: none).

    Raises:
        ValueError: bad sizes or backend.  RankError / RankTimeout: see :func:`launch`.
    """
    ranks = _int("ranks", ranks, 2, 8)
    numel = _int("numel", numel if numel is not None else config.scale(*DEFAULT_NUMEL), 1, 1 << 28)
    size = _int("size", size if size is not None else config.scale(*DEFAULT_SIZE), 1, 8192)
    repeats = _int("repeats", repeats if repeats is not None else config.scale(5, 2), 1, 1000)
    if isinstance(peer_delay_ms, bool) or not isinstance(peer_delay_ms, (int, float)) or not 0 <= peer_delay_ms <= 10_000:
        raise ValueError(f"peer_delay_ms must be milliseconds in [0, 10000], got {peer_delay_ms!r}")
    backend = check_backend(backend, ranks)
    at = where(backend, ranks)
    late = float(peer_delay_ms) / 1e3
    res, traces = run_and_load(collective_rank, ranks, backend=backend, labels=("collective",), timeout=timeout,
                               options={"numel": numel, "size": size, "repeats": repeats, "peer_delay_s": late,
                                        "slow_rank": ranks - 1})
    v = res.values
    trace = traces["collective"].with_meta(device=at.device, experiment="collective")
    return CollectiveResult(ranks, numel, tuple(r["return_s"] for r in v), tuple(r["done_s"] for r in v),
                            tuple(r["blocking_s"] for r in v), tuple(r["compute_s"] for r in v),
                            tuple(int(r["completed_at_return"]) for r in v), repeats, all(r["correct"] for r in v),
                            trace, at, res.seconds, late, ranks - 1 if late > 0 else -1,
                            tuple(tuple(r["blocking_runs"]) for r in v), tuple(tuple(r["done_runs"]) for r in v),
                            tuple(tuple(r["compute_runs"]) for r in v))


def _int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer between {lo} and {hi}, got {value!r}")
    return int(value)


def returned_early(trace: Trace) -> dict[int, dict[str, bool]]:
    """Per rank, read from the trace: did the frontend's ``c10d::allreduce_`` call end before the
    collective did (``returned``), and did the independent matmul begin before it ended
    (``overlapped``: the frontend went on while the reduction was in flight)?"""
    out: dict[int, dict[str, bool]] = {}
    lane, name, start, end = trace["lane"], trace["name"], trace["start"], trace["end"]
    for rl in rank_lanes(trace):
        front = np.isin(lane, list(rl.frontend))
        comm = np.isin(lane, list(rl.communication)) if rl.communication else np.zeros(len(trace), bool)
        call = front & np.array([n.startswith("c10d::allreduce") for n in name.tolist()], dtype=bool)
        mm = front & np.isin(name, ["aten::mm", "aten::matmul"])
        if not comm.any() or not call.any():
            out[rl.rank] = {"returned": False, "overlapped": False}
            continue
        returned = bool(end[call].min() < end[comm].max())
        # the frontend went on with independent work before the reduction was done
        overlapped = bool(mm.any()) and bool(start[mm].min() < end[comm].max())
        out[rl.rank] = {"returned": returned, "overlapped": overlapped}
    return out


def checks(r: CollectiveResult) -> list[Any]:
    """The notebook's lesson checks for this result (not displayed: ``lesson.show`` them).

    Three facts read from the trace and the sums; then the time claim.  Without a slower peer it is
    the speed-up of running the reduction beside the matmul, credited only where the machine has a
    spare core per busy thread (``role="speed-up"``, gated); with one (:attr:`CollectiveResult.peer_delay_s`)
    it is :func:`slow_peer_check`, which needs no spare core.
    """
    having("r", r, ("trace", "ranks"), what="a CollectiveResult")
    facts = returned_early(r.trace)
    why_cpu = r.where.cpu_sentence(r.ranks)
    ret, done = max(r.return_s), min(r.done_s)
    block, comp = float(np.median(r.blocking_s)), float(np.median(r.compute_s))
    # One rank is proof enough (a blocking call can never end before its reduction); on a time-shared
    # core a rank may be descheduled *inside* the microsecond enqueue until its reduction is over.
    returned = any(f["returned"] for f in facts.values())
    overlapped = any(f["overlapped"] for f in facts.values())
    preempted = (f"{why_cpu}: a rank's frontend was descheduled inside the call (a microsecond enqueue) until its "
                 "reduction had ended" if r.where.threads_per_cpu(r.ranks) > 1 else "")
    out = [
        lesson.check(
            "all_reduce(async_op=True) returns before the reduction is done",
            returned,
            shown=f"in the trace, on {sum(f['returned'] for f in facts.values())} of {r.ranks} ranks the call ended "
                  f"before the gloo/NCCL interval; timed: returned after {fmt_time(ret)} (slowest rank), "
                  f"done after {fmt_time(done)} (fastest rank)",
            otherwise=preempted or "the profiler recorded no collective interval (a torch without c10d's "
                      "profiling labels?), or the call itself waited; look at the timeline below"),
        lesson.check(
            "the result is the same, correct sum on every rank",
            r.correct, shown=f"{r.numel:,} floats, sum over {r.ranks} ranks checked on each",
            otherwise="a rank held a wrong sum: a bug, please report it with this notebook's output"),
        lesson.check(
            "the frontend started independent work before the reduction was done",
            overlapped,
            shown=f"on {sum(f['overlapped'] for f in facts.values())} of {r.ranks} ranks the matmul began before the "
                  "collective's interval ended",
            otherwise=preempted or "the reduction finished before the matmul began (a very small numel, or "
                      "the peer was already waiting): raise numel"),
    ]
    if r.peer_delay_s > 0:
        return out + [slow_peer_check(r)]
    # Decided against the spread across ranks (each rank's median is one sample), and credited only
    # where the machine can run the gloo thread beside the matmul (the machine gates a speed-up).
    gated = r.where.threads_per_cpu(r.ranks) > 1
    saved = compare(r.done_s, [b + c for b, c in zip(r.blocking_s, r.compute_s)],
                    names=("async call to wait", "blocking call + matmul"))
    if gated:
        saved = overruled(saved, None, "machine gate (no spare core per busy thread)")
    return out + [lesson.check(
        "with a core for each busy thread (or a GPU), overlapping them saves time: call-to-wait is shorter than "
        "blocking call + matmul",
        saved,
        shown=f"{fmt_time(float(np.median(r.done_s)))} vs {fmt_time(block)} + {fmt_time(comp)} (medians over ranks)",
        otherwise=(f"{why_cpu or 'NCCL'}: enough cores, but the reduction ({fmt_time(block)} blocking) and the "
                   f"matmul ({fmt_time(comp)}) are too unequal or too short to gain from overlap: raise numel "
                   "and size together"),
        unclear=(f"{why_cpu}: the gloo thread and the matmul took turns on the cores instead of running "
                 "side by side, so the times cannot show a saving either way. Run on a machine with a spare core "
                 "per busy thread, or on GPUs with NCCL" if gated else
                 "the per-rank times overlap within their spread: more repeats decide it"),
        role="speed-up")]


def slow_peer_check(r: CollectiveResult) -> Any:
    """"Overlapping the wait for a slower peer with independent work saves time", decided from every
    repeat of the waiting ranks: call-to-wait of the asynchronous call against the blocking call plus
    the matmul of the same repeat (:func:`d2l_async.verdict.compare_paired`: a load that slows both
    calls of a repeat alike does not widen the interval).

    Not a ``"speed-up"`` claim in the sense of the machine verdict: the saving is the matmul done while
    the ranks would otherwise sit idle waiting for a peer that sleeps, which needs no second core.
    """
    having("r", r, ("waiting_ranks", "ranks"), what="a CollectiveResult")
    ranks = r.waiting_ranks()
    overlapped = [t for k in ranks for t in r.done_runs[k]]
    sequential = [b + c for k in ranks for b, c in zip(r.blocking_runs[k], r.compute_runs[k])]
    block = float(np.median([t for k in ranks for t in r.blocking_runs[k]]))
    comp = float(np.median([t for k in ranks for t in r.compute_runs[k]]))
    # paired: the blocking and the asynchronous call of one repeat ran moments apart, under the same load
    v = compare_paired(overlapped, sequential, names=("async call to wait", "blocking call + matmul"))
    best = min(r.peer_delay_s, comp)
    return lesson.check(
        f"waiting for a slower peer: computing during the wait saves time (rank {r.slow_rank} sleeps "
        f"{fmt_time(r.peer_delay_s)} before each collective)",
        v,
        shown=(f"call-to-wait {fmt_time(float(np.median(overlapped)))} vs blocking {fmt_time(block)} + matmul "
               f"{fmt_time(comp)} on rank(s) {', '.join(map(str, ranks))} (medians of {len(overlapped)} repeats); "
               f"the most it can save is the shorter of the wait and the matmul, {fmt_time(best)}"),
        otherwise=(f"the matmul ({fmt_time(comp)}) did not fit in the {fmt_time(r.peer_delay_s)} wait on "
                   f"{r.where.cpu_sentence(r.ranks) or r.device}: the frontend itself waited for a core; rerun, "
                   "or lower size"),
        unclear=(f"{r.where.cpu_sentence(r.ranks) or r.device}: more repeats, or a longer peer_delay_ms, decide it"))
