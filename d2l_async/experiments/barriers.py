"""Barriers: ``waitall()`` drains everything, ``wait_to_read()`` waits for one array (D2L §13.2.2).

The set-up: long, unrelated work runs on one device while a small result ``z`` is computed on
another.  The frontend needs ``z``'s value to issue its next piece of work (as much again, on
``z``'s device).  ``waitall()`` makes it wait for *all* queued work first, so the two pieces run one
after the other; ``z.wait_to_read()`` returns as soon as ``z`` is ready and the follow-up is issued
while the long work keeps going.

What the narrow wait buys is measured where it happens: the frontend's time from the barrier to its
next useful statement (``z``'s value in hand, the follow-up about to be pushed).  Whether the whole
program also ends sooner depends on whether the two devices' work can really run at once — with a
spare core (or on a GPU) it does; on one shared core the two devices take turns and the total barely
moves (it measured 13–200 ms *longer* there).  So the totals are reported, and the timelines show
them, but no lesson is claimed from them; :func:`checks` states what held on this run.

On CUDA the same two barriers are ``torch.cuda.synchronize(device)`` and waiting on one CUDA event
recorded after ``z`` on its own stream (``event.synchronize()``).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass
from typing import Any

from d2l_async import claims, config, lesson

from d2l_async._args import TRACE_HINT, having, instance
from d2l_async.verdict import compare
from d2l_async._words import fmt_time
from d2l_async.trace import Trace

from ._common import Setup, backend_work, positive_int, resolve_backend, stable_matrix
from ._cuda_why import explain, why_chain_ended, why_streams, z_wait
from ._show import Displayed, ran_on
from ._why import cpu_cause
from .deadline import checkpoint
from .sizing import device_sizes

__all__ = ["BarrierResult", "run_barriers", "checks", "overlap_seconds", "NARROW_SOONER", "FOLLOW_UP"]


@dataclass(frozen=True)
class BarrierResult(Displayed):
    """How long the frontend waited at each barrier, with the same unrelated work queued.

    Attributes:
        waitall_wait: seconds the frontend spent in ``waitall()`` (``torch.cuda.synchronize``).
        wait_to_read_wait: seconds it spent in ``z.wait_to_read()`` (waiting on ``z``'s event).
        waitall_total: seconds from the first push to the end of everything, waitall run.
        wait_to_read_total: the same for the wait_to_read run (shorter: the follow-up overlapped).
        trace_waitall, trace_wait_to_read: the two runs' traces.
        long_ops: unrelated matrix products queued first.
        size: their matrix side.
        follow_ops: matrix products the frontend issues after the barrier, on ``z``'s device
            (they need only ``z``).
        backend, device, virtual: where it ran.
        barrier_names: what the two barriers are called on this backend.
        waitall_next: seconds from calling ``waitall()`` to the next useful statement (``z``'s
            value in hand, the follow-up about to be issued).
        wait_to_read_next: the same for ``z.wait_to_read()``.
        machine: :class:`d2l_async.devices.Machine` read just before the run (``None``: unknown).
        waitall_next_runs, wait_to_read_next_runs: every timed run's ``*_next`` (the medians' samples:
            the lesson check decides against their spread).
    """

    waitall_wait: float
    wait_to_read_wait: float
    waitall_total: float
    wait_to_read_total: float
    trace_waitall: Any
    trace_wait_to_read: Any
    long_ops: int
    size: int
    follow_ops: int
    backend: str
    device: str
    virtual: bool
    barrier_names: tuple[str, str]
    waitall_next: float = float("nan")
    wait_to_read_next: float = float("nan")
    machine: Any = None
    waitall_next_runs: tuple[float, ...] = ()
    wait_to_read_next_runs: tuple[float, ...] = ()

    @property
    def saved(self) -> float:
        """Seconds of frontend time ``wait_to_read`` saved over ``waitall``."""
        return self.waitall_wait - self.wait_to_read_wait

    def checks(self) -> list[lesson.Check]:
        """The checks of this run's claims (:func:`checks`)."""
        return checks(self)

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        full, narrow = self.barrier_names
        return (f"{ran_on(self.device, self.virtual)}; {self.long_ops} unrelated {self.size}×{self.size} products "
                f"queued, then z; medians of {len(self.waitall_next_runs) or 1} runs",
                [(f"{full}: next statement after", fmt_time(self.waitall_next)),
                 (f"{narrow}: next statement after", fmt_time(self.wait_to_read_next)),
                 (f"whole program, {full} / {narrow}",
                  f"{fmt_time(self.waitall_total)} / {fmt_time(self.wait_to_read_total)}")])


def run_barriers(
    *, long_ops: int | None = None, size: int | None = None, follow_ops: int | None = None,
    repeat: int | None = None, backend: str = "auto",
) -> BarrierResult:
    """Queue long unrelated work, compute a small ``z``, wait with each barrier, then use ``z``.

    Args:
        long_ops: unrelated matrix products; default 10 (quick mode 8).
        size: their matrix side; default 800 (quick mode 600), on CUDA this GPU's
            (:mod:`~d2l_async.experiments.sizing`).
        follow_ops: follow-up products of the same size, issued after the barrier on ``z``'s
            device; default ``long_ops``.
        repeat: runs of each variant; the medians are reported, the last run's traces kept;
            default 3 (quick mode 2).
        backend: ``"auto"``, ``"engine"`` (two virtual devices) or ``"cuda"`` (two streams).

    Returns:
        The frozen :class:`BarrierResult`: per barrier (``waitall`` vs ``wait_to_read``) the frontend's wait, the
        run's total and the time to the next useful statement (medians, and every run's ``*_next``), the last run's
        trace of each, the sizes, the barriers' names on this backend, where it ran and the
        :class:`~d2l_async.devices.Machine` read before it.

    Raises:
        ValueError: bad counts or an unavailable backend.
    """
    # quick mode keeps the chain well above a scheduler time slice (a few ms), or on one shared core
    # z's wake-up alone could outlast it
    long_ops = positive_int("long_ops", long_ops if long_ops is not None else config.scale(10, 8), maximum=10_000)
    sized = size is None
    size = positive_int("size", size if size is not None else config.scale(800, 600), maximum=8192)
    follow_ops = positive_int("follow_ops", follow_ops if follow_ops is not None else long_ops, maximum=10_000)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(3, 2), maximum=1000)
    setup = resolve_backend(backend, n_devices=2)
    if sized and setup.backend == "cuda":  # a CPU's size is launch-bound on a GPU: this GPU's
        size = device_sizes().barriers
    from d2l_async.devices import machine

    here = machine(sample_s=0.05)
    if setup.backend == "cuda":
        r = _cuda(long_ops, size, follow_ops, repeat, setup)
    else:
        r = _engine(long_ops, size, follow_ops, repeat, setup)
    return dataclasses.replace(r, machine=here)


def _medians(runs: list[tuple]) -> tuple:
    """Median of each numeric field over the runs; the last run's trace (the last field)."""
    return (*(statistics.median(r[i] for r in runs) for i in range(len(runs[0]) - 1)), runs[-1][-1])


def _nexts(runs: list[tuple]) -> tuple[float, ...]:
    """Every run's seconds to the next useful statement (field 2 of a run's tuple)."""
    return tuple(float(r[2]) for r in runs)


def _engine(long_ops: int, size: int, follow_ops: int, repeat: int, setup: Setup) -> BarrierResult:
    import torch

    from d2l_async.engine import make_engine

    def run(eng: Any, barrier: str) -> tuple[float, float, float, Any]:
        eng.reset_trace()
        t_start = time.perf_counter()
        a = eng.array(torch.ones(size, size), device="cpu:1", name="a")
        for _ in range(long_ops):  # unrelated work on the other device
            a = a @ m
            checkpoint()
        x = eng.array(torch.ones(2, 2), device="cpu:0", name="x")
        z = x * 2 + 1
        t0 = time.perf_counter()
        if barrier == "waitall":
            eng.waitall()
        else:
            z.wait_to_read()
        waited = time.perf_counter() - t0
        value = float(z.asnumpy().mean())
        useful = time.perf_counter() - t0  # z's value in hand: the next useful statement starts now
        c = eng.array(torch.full((size, size), value), device="cpu:0", name="c")
        for _ in range(follow_ops):  # follow-up work that needed z's value
            c = c @ m0
            checkpoint()
        eng.waitall()
        total = time.perf_counter() - t_start
        return waited, total, useful, eng.trace()

    with make_engine(workers=1, devices=("cpu:0", "cpu:1")) as eng:
        m = eng.array(stable_matrix(size), device="cpu:1", name="m")
        m0 = eng.array(stable_matrix(size, seed=1), device="cpu:0", name="m0")
        run(eng, "waitall")  # warm-up
        runs: dict[str, list] = {"waitall": [], "wait_to_read": []}
        for _ in range(repeat):  # interleaved, so load on the machine hits both alike
            for barrier in runs:
                runs[barrier].append(run(eng, barrier))
        w_all, tot_all, n_all, t_all = _medians(runs["waitall"])
        w_one, tot_one, n_one, t_one = _medians(runs["wait_to_read"])
    meta = dict(device=setup.device, virtual=True, experiment="barriers")
    return BarrierResult(w_all, w_one, tot_all, tot_one, t_all.with_meta(**meta, barrier="waitall"),
                         t_one.with_meta(**meta, barrier="wait_to_read"), long_ops, size, follow_ops, "engine",
                         setup.device, True, ("waitall()", "z.wait_to_read()"), n_all, n_one,
                         waitall_next_runs=_nexts(runs["waitall"]), wait_to_read_next_runs=_nexts(runs["wait_to_read"]))


def _cuda(long_ops: int, size: int, follow_ops: int, repeat: int, setup: Setup) -> BarrierResult:
    import torch

    from d2l_async.capture import capture

    dev = torch.device("cuda:0")
    long_stream, small_stream = torch.cuda.Stream(dev), torch.cuda.Stream(dev)
    out: dict[str, tuple[float, float, float]] = {}
    m = stable_matrix(size).to(dev)

    def run(barrier: str) -> None:
        torch.cuda.synchronize(dev)
        t_start = time.perf_counter()
        with torch.cuda.stream(long_stream):
            a = torch.ones(size, size, device=dev)
            for _ in range(long_ops):
                a = a @ m
        with torch.cuda.stream(small_stream):
            z = torch.ones(2, 2, device=dev) * 2 + 1
            done = torch.cuda.Event()
            done.record(small_stream)
        t0 = time.perf_counter()
        if barrier == "waitall":
            torch.cuda.synchronize(dev)
        else:
            done.synchronize()  # wait for z only: the long stream keeps running
        waited = time.perf_counter() - t0
        value = float(z.mean())  # needs z's value (ready)
        useful = time.perf_counter() - t0
        with torch.cuda.stream(small_stream):
            c = torch.full((size, size), value, device=dev)
            for _ in range(follow_ops):
                c = c @ m
                checkpoint()
        torch.cuda.synchronize(dev)
        out[barrier] = (waited, time.perf_counter() - t_start, useful)

    run("waitall")  # warm-up
    t_all = capture(run, "waitall", device="cuda")
    t_one = capture(run, "wait_to_read", device="cuda")
    runs: dict[str, list] = {"waitall": [], "wait_to_read": []}
    for _ in range(repeat):  # timed outside the profiler, so its overhead does not inflate the numbers
        for barrier in runs:
            run(barrier)
            runs[barrier].append((*out[barrier], None))
    w_all, tot_all, n_all, _ = _medians(runs["waitall"])
    w_one, tot_one, n_one, _ = _medians(runs["wait_to_read"])
    meta = dict(device=setup.device, virtual=False, experiment="barriers")
    return BarrierResult(w_all, w_one, tot_all, tot_one, t_all.with_meta(**meta, barrier="synchronize"),
                         t_one.with_meta(**meta, barrier="event"), long_ops, size, follow_ops, "cuda",
                         setup.device, False, ("torch.cuda.synchronize(device)", "event.synchronize() after z"),
                         n_all, n_one, waitall_next_runs=_nexts(runs["waitall"]),
                         wait_to_read_next_runs=_nexts(runs["wait_to_read"]))


# ---------------------------------------------------------------- did the lesson hold on this run?
def overlap_seconds(trace: Any) -> tuple[float, float]:
    """``(overlap, follow-up busy)``: seconds of follow-up work (ops issued after the frontend's
    first wait) done before the last op issued before that wait ended, and all follow-up seconds.

    The first wait is the first one with work queued before it: a wait before any work was issued
    (the CUDA run's opening ``torch.cuda.synchronize``) waits for nothing and is not the barrier
    (split there, the lesson was silently dropped).

    NaN, NaN when the trace has no wait or no work after it.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    import numpy as np

    blocks = trace.where(kind="block")
    work = backend_work(trace)
    if not len(blocks) or not len(work):
        return float("nan"), float("nan")
    issued = np.where(np.isfinite(work["issue"]), work["issue"], work["start"])
    after_work = blocks["start"] >= float(issued.min())
    if not after_work.any():
        return float("nan"), float("nan")
    first_wait = int(np.argmin(np.where(after_work, blocks["start"], np.inf)))
    wait_end = float(blocks["end"][first_wait])
    before, after = issued < wait_end, issued >= wait_end
    if not before.any() or not after.any():
        return float("nan"), float("nan")
    chain_end = float(work["end"][before].max())
    starts, ends = work["start"][after], work["end"][after]
    overlap = float(np.sum(np.clip(np.minimum(ends, chain_end) - starts, 0, None)))
    return overlap, float(np.sum(np.clip(ends - starts, 0, None)))


NARROW_SOONER = claims.claim(
    "03.narrow-sooner", notebooks=("03_barriers",),
    sentence="the narrow wait lets the frontend go on sooner",
    book="§13.2.2: wait_to_read() waits for one variable, waitall() for every queued op",
    quantity="seconds from the barrier to the next useful statement, narrow wait / waitall, every run",
    rule="compare: the interval wholly below 0.5 (at least twice as soon)")
FOLLOW_UP = claims.claim(
    "03.follow-up-beside", notebooks=("03_barriers",),
    sentence="after {narrow}, follow-up work runs beside the unrelated chain",
    book="§13.2.2: only the narrow wait lets the frontend issue more work while the queue drains",
    quantity="seconds of follow-up work done before the chain's end (the traced run)",
    rule="fact: more than zero", says="{overlap} of its {follow} ran before the chain ended")


def _why_not_sooner(r: BarrierResult, v: Any) -> tuple[Any, dict[str, Any]]:
    """Why the narrow wait was not sooner, read from the traced ``wait_to_read`` run: no worker (a naive
    engine), the chain done before z was pushed, z's ops waiting behind the chain for a CPU or the lock."""
    if v.holds is None:
        return lesson.Cause.SPREAD, {"runs": f"{v.n_a} vs {v.n_b} runs"}
    if r.trace_wait_to_read.meta.get("engine") == "naive":
        return lesson.Cause.NO_WORKER_THREAD, {}
    w = z_wait(r.trace_wait_to_read)
    if w is None:
        return lesson.Cause.MISSING, {"missing": "the traced run has no wait after work on two devices"}
    if w.chain_done_first:
        return lesson.Cause.TOO_SMALL, {"small": f"the chain of {w.chain_ops} products",
                                        "took": fmt_time(w.chain_end - w.wait_start + (w.wait_end - w.wait_start)),
                                        "beside": "pushing z: it ended first"}
    return cpu_cause(r.machine, "z's ops and the chain")


def checks(r: BarrierResult) -> list[lesson.Check]:
    """Whether the notebook's lessons held on this run, from its numbers only.

    The whole-program totals are not judged here: whether they differ depends on spare cores,
    and the notebook shows them beside the timelines.

    Returns:
        The checks of :data:`NARROW_SOONER` and (when the trace has a wait to split it at) :data:`FOLLOW_UP`.
    """
    having("r", r, ("barrier_names",), what="a BarrierResult")
    full, narrow = r.barrier_names
    if r.waitall_next > 0 and r.wait_to_read_next >= 0:
        v = compare(r.wait_to_read_next_runs or r.wait_to_read_next, r.waitall_next_runs or r.waitall_next, by=0.5,
                    names=(narrow, full))
        cause, facts = _why_not_sooner(r, v)
    else:
        v, cause, facts = False, lesson.Cause.MISSING, {"missing": "no time was measured after the barrier"}
    sooner = NARROW_SOONER.check(v, cause=cause, facts=facts,
                                 detail=f"medians {fmt_time(r.wait_to_read_next)} vs {fmt_time(r.waitall_next)}")
    overlap, follow = overlap_seconds(r.trace_wait_to_read)
    if r.backend == "cuda":  # a GPU's reasons: streams share the SMs, not CPUs
        sooner = explain([sooner], why_streams(r))[0]
    if overlap != overlap:  # NaN: the trace has no wait to split it at
        return [sooner]
    if r.trace_wait_to_read.meta.get("engine") == "naive":
        b_cause, b_facts = lesson.Cause.NO_WORKER_THREAD, {}
    else:
        w = z_wait(r.trace_wait_to_read)
        chain = fmt_time(w.chain_end - w.z_issue) if w is not None else "n/a"
        b_cause, b_facts = lesson.Cause.TOO_SMALL, {"small": f"the chain of {r.long_ops} products", "took": chain,
                                                    "beside": f"the wait for z ({fmt_time(r.wait_to_read_next)})"}
    beside = FOLLOW_UP.check(overlap > 0, cause=b_cause,
                             facts={**b_facts, "narrow": narrow, "overlap": fmt_time(overlap),
                                    "follow": fmt_time(follow)})
    if r.backend == "cuda":
        beside = explain([beside], why_chain_ended(r))[0]
    return [sooner, beside]


# ---------------------------------------------------------------- what makes each claim false
def _example(narrow_next: float, full_next: float, *, chain_end: float = 0.05, engine: str = "threaded",
             machine: Any = None) -> BarrierResult:
    """A synthetic run: the chain of four products on cpu:1 until ``chain_end``, z on cpu:0 pushed at 1 ms,
    the wait, and the follow-up on cpu:0 (seconds)."""
    from d2l_async.trace import Event, Lane, LaneRole

    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, "cpu:0", True, 0),
             Lane("cpu:1 worker 0", LaneRole.BACKEND, "cpu:1", True, 0)]
    step = chain_end / 4
    ev = [Event("cpu:1 worker 0", "op", "matmul", k * step, (k + 1) * step, issue=0.0, device="cpu:1")
          for k in range(4)]
    ev += [Event("frontend", "launch", "push", 0.0009, 0.001),
           Event("cpu:0 worker 0", "op", "mul", 0.001, 0.0012, issue=0.001, device="cpu:0"),
           Event("frontend", "block", "wait_to_read", 0.0011, 0.0011 + narrow_next, reason="wait_to_read"),
           Event("cpu:0 worker 0", "op", "matmul", 0.0012 + narrow_next, 0.0112 + narrow_next,
                 issue=0.0011 + narrow_next, device="cpu:0")]
    trace = Trace.from_events(ev, lanes).with_meta(engine=engine)
    runs = lambda x: (x, x * 1.02, x * 0.98)  # noqa: E731
    return BarrierResult(full_next, narrow_next, 0.1, 0.1, trace, trace, 4, 64, 4, "engine", "example", True,
                         ("waitall()", "z.wait_to_read()"), full_next, narrow_next, machine,
                         runs(full_next), runs(narrow_next))


def _register() -> None:
    from ._why import example_machine

    busy, spare = example_machine(1, 0), example_machine(4, 4)
    claims.falsifier(NARROW_SOONER, "the narrow wait as long as waitall()",
                     lambda: checks(_example(0.05, 0.05, machine=spare))[0])
    claims.counterfactual(NARROW_SOONER, "z's ops behind the chain on one busy CPU", lesson.Cause.NO_SPARE_CPU,
                          lambda: checks(_example(0.05, 0.05, machine=busy))[0])
    claims.counterfactual(NARROW_SOONER, "z's ops behind the chain with four spare CPUs",
                          lesson.Cause.INTERPRETER_LOCK, lambda: checks(_example(0.05, 0.05, machine=spare))[0])
    claims.counterfactual(NARROW_SOONER, "a naive engine (no worker thread)", lesson.Cause.NO_WORKER_THREAD,
                          lambda: checks(_example(0.05, 0.05, engine="naive", machine=spare))[0])
    claims.falsifier(FOLLOW_UP, "the chain ends before the follow-up starts",
                     lambda: checks(_example(0.002, 0.05, chain_end=0.002, machine=spare))[1])
    claims.counterfactual(FOLLOW_UP, "the chain ends before the follow-up starts", lesson.Cause.TOO_SMALL,
                          lambda: checks(_example(0.002, 0.05, chain_end=0.002, machine=spare))[1])
    claims.counterfactual(FOLLOW_UP, "a naive engine (no worker thread)", lesson.Cause.NO_WORKER_THREAD,
                          lambda: checks(_example(0.002, 0.05, chain_end=0.002, engine="naive", machine=spare))[1])


_register()
