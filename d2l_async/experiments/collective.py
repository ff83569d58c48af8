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

from .. import claims, config, lesson
from ..verdict import compare_paired, overruled
from .._words import fmt_time
from ..trace import Trace, rank_lanes
from .._args import TRACE_HINT, having, instance
from ..distributed import OnRanks, Where, check_backend, run_and_load, where
from ..distributed.ranks import DEFAULT_NUMEL, DEFAULT_SIZE, collective_rank
from ._show import Displayed

__all__ = ["CollectiveResult", "run_collective", "checks", "slow_peer_check", "returned_early", "RankFailure",
           "run_rank_failure", "RETURNS_EARLY", "CORRECT", "LATE_PEER", "RANK_ERROR", "CAP_SLACK"]


@dataclass(frozen=True)
class CollectiveResult(OnRanks, Displayed):
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

    def checks(self) -> list[Any]:
        """The checks of this run's claims: :func:`checks`, or for a run with a late peer only its claim
        (:func:`slow_peer_check`: the collective's facts are the plain run's)."""
        return [slow_peer_check(self)] if self.peer_delay_s > 0 else checks(self)

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        med = lambda xs: fmt_time(float(np.median(xs)))  # noqa: E731
        late = (f"; rank {self.slow_rank} sleeps {fmt_time(self.peer_delay_s)} before each collective"
                if self.peer_delay_s > 0 else "")
        return (f"Ran on: {self.device}; {self.numel:,} floats per rank, medians over ranks and {self.repeats} "
                f"repeats{late}",
                [("blocking all_reduce", med(self.blocking_s)), ("async call returned after", med(self.return_s)),
                 ("matmul meanwhile", med(self.compute_s)), ("async call to wait() done", med(self.done_s))])


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
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
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


RETURNS_EARLY = claims.claim(
    "10.returns-early", notebooks=("10_async_communication",),
    sentence="all_reduce(async_op=True) returns before the reduction is done",
    book="torch.distributed: async_op=True returns a Work handle at once; work.wait() is the barrier",
    quantity="ranks whose call ended before their reduction's interval ended (the trace)",
    rule="fact: on at least one rank (a blocking call never can)", says="on {ranks_early} of {ranks} ranks")
CORRECT = claims.claim(
    "10.correct-sum", notebooks=("10_async_communication",), headline=False,
    sentence="every rank holds the same, correct sum", book="all_reduce sums a tensor over every rank",
    quantity="each rank's result against the expected sum", rule="fact: equal on every rank",
    says="{numel} floats summed over {ranks} ranks")
LATE_PEER = claims.claim(
    "10.late-peer", notebooks=("10_async_communication",),
    sentence="computing while waiting for a late peer saves time",
    book="§13.5: the slowest rank sets every rank's step; async_op lets the others compute meanwhile",
    quantity="call-to-wait / blocking call + matmul on the waiting ranks, paired repeats; the saving against the "
             "peer's delay",
    rule="compare_paired: the interval wholly below 1, and the median saving at most the delay (what the wait "
         "can explain) + 25%")
RANK_ERROR = claims.claim(
    "10.rank-error", notebooks=("10_async_communication",), headline=False,
    sentence="a rank's error reaches the notebook within {limit}, no rank left behind",
    book="a collective waits forever for a rank that died; launch() must not",
    quantity="seconds from the rank's raise to the exception here; ranks alive after the call",
    rule="fact: under the limit, none alive", says="after {latency}, {alive} rank(s) alive")
#: The late peer's saving may exceed its delay by this share (timing noise) before it is not the wait's.
CAP_SLACK = 0.25


def _cpu_words(at: Where) -> str:
    n = at.usable_cpus
    return f"{n:g} usable CPU{'' if n == 1 else 's'}, {at.spare_cpus:.1f} spare"


def _facts(r: CollectiveResult) -> tuple[bool, int]:
    facts = returned_early(r.trace)
    # One rank is proof enough (a blocking call can never end before its reduction); on a time-shared
    # core a rank may be descheduled *inside* the microsecond enqueue until its reduction is over.
    return any(f["returned"] for f in facts.values()), sum(f["returned"] for f in facts.values())


def checks(r: CollectiveResult) -> list[Any]:
    """The notebook's lesson checks for this result (not displayed: ``lesson.show`` them).

    Returns:
        The checks of :data:`RETURNS_EARLY` and :data:`CORRECT`, then, with a late peer
        (:attr:`CollectiveResult.peer_delay_s`), :func:`slow_peer_check`.
    """
    having("r", r, ("trace", "ranks"), what="a CollectiveResult")
    returned, n_early = _facts(r)
    if r.where.threads_per_cpu(r.ranks) > 1:
        cause, facts = lesson.Cause.NO_SPARE_CPU, {"cpus": _cpu_words(r.where),
                                                   "threads": "each rank's frontend and its reduction"}
    else:
        cause, facts = lesson.Cause.TRACE, {"seen": "no collective interval (c10d's profiling labels?)"}
    out = [RETURNS_EARLY.check(returned, cause=cause, facts={**facts, "ranks_early": n_early, "ranks": r.ranks},
                               detail=f"timed: returned after {fmt_time(max(r.return_s))} (slowest rank), done after "
                                      f"{fmt_time(min(r.done_s))} (fastest rank)"),
           CORRECT.check(r.correct, cause=lesson.Cause.BUG, facts={
               "numel": f"{r.numel:,}", "ranks": r.ranks, "bug": "a rank held a wrong sum"})]
    if r.peer_delay_s > 0:
        out.append(slow_peer_check(r))
    return out


def slow_peer_check(r: CollectiveResult) -> Any:
    """:data:`LATE_PEER`, decided from every repeat of the waiting ranks: call-to-wait of the asynchronous
    call against the blocking call plus the matmul of the same repeat (:func:`d2l_async.verdict.compare_paired`:
    a load that slows both calls of a repeat alike does not widen the interval).  The saving is the matmul
    done while the ranks would sit idle waiting for a peer that sleeps, so it can be no larger than the
    shorter of the wait and the matmul: a larger one (beyond :data:`CAP_SLACK`) has another cause and is not
    credited to the wait (can't tell, ``EXCEEDS_CAUSE``).

    Returns:
        The :class:`~d2l_async.lesson.Check` (not displayed).
    """
    having("r", r, ("waiting_ranks", "ranks"), what="a CollectiveResult")
    ranks = r.waiting_ranks()
    overlapped = [t for k in ranks for t in r.done_runs[k]]
    sequential = [b + c for k in ranks for b, c in zip(r.blocking_runs[k], r.compute_runs[k])]
    comp = float(np.median([t for k in ranks for t in r.compute_runs[k]]))
    v = compare_paired(overlapped, sequential, names=("call to wait", "blocking + matmul"))
    cap = min(r.peer_delay_s, comp)
    saved = float(np.median([s - o for s, o in zip(sequential, overlapped)]))
    detail = f"median saving {fmt_time(saved)}; the wait and the matmul: {fmt_time(r.peer_delay_s)}, {fmt_time(comp)}"
    if v.holds is True and saved > cap * (1 + CAP_SLACK):
        v = overruled(v, None, f"capped: saving > {1 + CAP_SLACK:g} x the peer's delay")
        return LATE_PEER.check(v, cause=lesson.Cause.EXCEEDS_CAUSE, detail=detail, facts={
            "gain": "the saving", "amount": fmt_time(saved), "cap": fmt_time(cap), "source": "the peer's wait"})
    if v.holds is None:
        cause, facts = lesson.Cause.SPREAD, {"runs": f"{len(overlapped)} paired repeats"}
    elif r.where.threads_per_cpu(r.ranks) > 1:
        cause, facts = lesson.Cause.NO_SPARE_CPU, {"cpus": _cpu_words(r.where),
                                                   "threads": "the matmul and the ranks' threads"}
    else:
        cause, facts = lesson.Cause.OTHER_WAY, {"runs": f"{len(overlapped)} paired repeats"}
    return LATE_PEER.check(v, cause=cause, facts=facts, detail=detail)


@dataclass(frozen=True)
class RankFailure(Displayed):
    """What :func:`run_rank_failure` saw: a rank raised while the others waited for it in a barrier.

    Attributes:
        message: the first line of the error raised here.
        traceback_tail: the last lines of the failing rank's traceback.
        latency_s: seconds from the rank's ``raise`` to the error here.
        seconds: the whole call, the processes' start-up included.
        started, alive: the ranks' process ids, and those still alive after the call.
        limit_s: the latency the claim allows.
        machine: :func:`d2l_async.devices.machine` before the call (the reason of a late error).
    """

    message: str
    traceback_tail: str
    latency_s: float
    seconds: float
    started: tuple[int, ...]
    alive: tuple[int, ...]
    limit_s: float = 10.0
    machine: Any = None

    def checks(self) -> list[Any]:
        """The check of :data:`RANK_ERROR`."""
        ok = self.latency_s < self.limit_s and not self.alive
        if self.alive:
            cause, facts = lesson.Cause.BUG, {"bug": f"ranks {list(self.alive)} outlived the call"}
        else:
            from ._why import cpu_cause

            cause, facts = cpu_cause(self.machine, "the ranks' start-up and the error's delivery")
        return [RANK_ERROR.check(ok, cause=cause, facts={**facts, "limit": f"{self.limit_s:g} s",
                                                         "latency": fmt_time(self.latency_s),
                                                         "alive": len(self.alive)},
                                 detail=f"{fmt_time(self.seconds)} with the processes' start-up")]

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        return self.message, [("rank 1's traceback ends", self.traceback_tail)]


def run_rank_failure(*, ranks: int = 2, fail_rank: int = 1, timeout: float = 60.0) -> RankFailure:
    """Start ``ranks`` processes where rank ``fail_rank`` raises while the others wait in a barrier.

    Returns:
        The frozen :class:`RankFailure`: the error's first line and the rank's traceback tail, how long the error
        took to arrive, the call's seconds, and the processes started and still alive after it.

    Every way the launch can end is a result, never an exception in the notebook: the ranks' own error (the
    lesson), or another of the launcher's errors (the ranks did not start within ``timeout`` on a busy machine,
    a rank died silently), whose first line becomes the message with an infinite latency: its check is ✘ and
    names the machine.

    Raises:
        ValueError: bad counts.
    """
    import time

    from ..distributed import DistributedError, RankError, is_alive, launch
    from ..distributed.ranks import raising_rank

    from ..devices import machine

    ranks = _int("ranks", ranks, 2, 8)
    fail_rank = _int("fail_rank", fail_rank, 0, ranks - 1)
    here = machine()
    started: list[int] = []
    t0 = time.perf_counter()
    try:
        launch(raising_rank, ranks, profile=False, timeout=timeout, options={"fail_rank": fail_rank},
               on_start=started.extend)
    except RankError as err:
        message, tail, latency = str(err).splitlines()[0], " | ".join(
            err.remote_traceback.strip().splitlines()[-2:]), err.latency_s
    except DistributedError as err:  # the ranks did not start in time, or one died: no error arrived to time
        message, tail, latency = f"{type(err).__name__}: {str(err).splitlines()[0]}", "", float("inf")
    else:  # pragma: no cover - raising_rank always raises
        raise RuntimeError("the failing rank did not raise")
    seconds = time.perf_counter() - t0
    return RankFailure(message, tail, float(latency), seconds, tuple(started),
                       tuple(pid for pid in started if is_alive(pid)), machine=here)


# ---------------------------------------------------------------- what makes each claim false
def _example(done: float, blocking: float, compute: float, *, delay: float, repeats: int = 5,
             cpus: float = 4.0, spare: float = 4.0, returned: bool = True) -> CollectiveResult:
    """A synthetic two-rank result: rank 0 waits for rank 1 (``delay``); per repeat the call-to-wait, the
    blocking call and the matmul, 1% apart; a trace whose call ends before (or after) the reduction."""
    from ..trace import Event, Lane, LaneRole

    lanes = [Lane("rank 0 python", LaneRole.FRONTEND, rank=0), Lane("rank 0 pt_gloo_runloop", LaneRole.BACKEND, rank=0)]
    end = 0.002 if returned else 0.02
    ev = [Event("rank 0 python", "op", "c10d::allreduce_", 0.0, end),
          Event("rank 0 pt_gloo_runloop", "op", "gloo:all_reduce", 0.001, 0.01)]
    trace = Trace.from_events(ev, lanes, {"device": "example"})
    spread = [1.0 + 0.01 * (k - repeats // 2) for k in range(repeats)]
    at = Where("example", "gloo", cpus, spare, 0.0, ())
    return CollectiveResult(2, 1024, (0.001, 0.001), (done, done), (blocking, blocking), (compute, compute), (0, 0),
                            repeats, True, trace, at, 1.0, delay, 1 if delay > 0 else -1,
                            (tuple(blocking * f for f in spread), ()), (tuple(done * f for f in spread), ()),
                            (tuple(compute * f for f in spread), ()))


def _late_peer_run(delay_ms: float) -> Any:
    return slow_peer_check(run_collective(peer_delay_ms=delay_ms, size=256, repeats=5))


def _register() -> None:
    claims.falsifier(RETURNS_EARLY, "a call that ended after its reduction",
                     lambda: checks(_example(0.02, 0.02, 0.01, delay=0.0, returned=False))[0])
    claims.counterfactual(RETURNS_EARLY, "the same on one CPU for four busy threads", lesson.Cause.NO_SPARE_CPU,
                          lambda: checks(_example(0.02, 0.02, 0.01, delay=0.0, returned=False, cpus=1, spare=0))[0])
    claims.counterfactual(RETURNS_EARLY, "the same with four spare CPUs", lesson.Cause.TRACE,
                          lambda: checks(_example(0.02, 0.02, 0.01, delay=0.0, returned=False))[0])
    import dataclasses

    wrong = lambda: checks(dataclasses.replace(_example(0.02, 0.02, 0.01, delay=0.0), correct=False))[1]  # noqa: E731
    claims.falsifier(CORRECT, "a rank with a wrong sum", wrong)
    claims.counterfactual(CORRECT, "a rank with a wrong sum", lesson.Cause.BUG, wrong)
    # the late peer: a saving of 15 ms credited to a 1 ms wait (what the issue measured), and a real run
    claims.falsifier(LATE_PEER, "peer_delay_ms=1 with a 15 ms saving (more than the wait explains)",
                     lambda: slow_peer_check(_example(0.035, 0.030, 0.020, delay=0.001)))
    # a real run with no late peer: no wait to compute through, so no saving can be credited to one (a 1 ms
    # peer is no falsifier: a 0.5 ms matmul really is done while waiting for it)
    claims.falsifier(LATE_PEER, "peer_delay_ms=0, run", lambda: _late_peer_run(0), process=True)
    claims.falsifier(LATE_PEER, "no saving", lambda: slow_peer_check(_example(0.050, 0.030, 0.020, delay=0.04)))
    claims.counterfactual(LATE_PEER, "a saving larger than the delay", lesson.Cause.EXCEEDS_CAUSE,
                          lambda: slow_peer_check(_example(0.035, 0.030, 0.020, delay=0.001)))
    claims.counterfactual(LATE_PEER, "no saving, one CPU for four busy threads", lesson.Cause.NO_SPARE_CPU,
                          lambda: slow_peer_check(_example(0.055, 0.030, 0.020, delay=0.04, cpus=1, spare=0)))
    claims.counterfactual(LATE_PEER, "no saving, four spare CPUs", lesson.Cause.OTHER_WAY,
                          lambda: slow_peer_check(_example(0.055, 0.030, 0.020, delay=0.04)))
    claims.falsifier(RANK_ERROR, "a rank left alive", lambda: RankFailure("x", "", 0.5, 3.0, (1, 2), (2,)).checks()[0])
    from ._why import example_machine

    claims.counterfactual(RANK_ERROR, "the error 12 s late on one busy CPU", lesson.Cause.NO_SPARE_CPU,
                          lambda: RankFailure("x", "", 12.0, 15.0, (1, 2), (), machine=example_machine(1, 0)).checks()[0])
    claims.counterfactual(RANK_ERROR, "a rank left alive", lesson.Cause.BUG,
                          lambda: RankFailure("x", "", 0.5, 3.0, (1, 2), (2,)).checks()[0])


_register()
