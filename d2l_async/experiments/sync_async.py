"""Synchronous vs asynchronous issue, and the book's cost model (D2L §13.2.3).

The book runs ``y = x + 1`` 10,000 times, waiting after each op (synchronous) or once at the end
(asynchronous), and explains the gap with three costs per op:

* ``t1`` — the frontend issues the op (Python, argument checks, the push);
* ``t2`` — the backend computes it (and, per op, does its own bookkeeping);
* ``t3`` — the result/notification travels back and the frontend wakes up.

Synchronous: ``n·(t1 + t2 + t3)``.  Asynchronous: ``t1 + n·t2 + t3`` — *if* the backend is the
bottleneck (``t2 ≥ t1``).  When the frontend is the bottleneck (tiny ops, Python frontend) the
pipeline runs at the frontend's pace instead: ``n·max(t1, t2) + min(t1, t2) + t3``.

How we estimate them (:class:`CostModel`):

* ``t2`` is the backend's **pace**, not the duration of the addition.  Between two ops the backend
  also takes the next op off its queue, checks its dependencies, records it and wakes whoever
  waits; that bookkeeping is part of what each op costs it.  So ``t2`` is the median interval
  between the starts of consecutive ops on a backend lane, counted only where the backend was
  *backlogged* (the next op had been issued before the previous one ended, so the backend went
  straight from one to the next and the interval is all backend work, no idle wait).  Only when the
  trace has fewer than :data:`MIN_BACKLOGGED_PAIRS` such pairs (the backend was rarely behind: the
  frontend is the bottleneck) does ``t2`` fall back to the median op duration — there the backend
  idles between ops and its pace is not observable.  :attr:`CostModel.t2_source` says which
  (``"backend pace"`` or ``"op duration"``).  On a GPU the same gap separates a kernel's duration
  from the interval between two back-to-back kernels; there a kernel counts as backlogged when it
  started right at the previous one's end, not merely when it was launched before that end (a
  kernel starts some 25 µs after its launch call even on an idle GPU).
* ``t1`` is the frontend's time to issue the whole async loop divided by ``n`` (measured before the
  final barrier).
* ``t3`` is what the synchronous run spends per op beyond ``t1 + t2``.

The synchronous model therefore fits by construction; the asynchronous models are *predictions*
checked against the measured asynchronous time.  :attr:`CostModel.bottleneck` compares ``t1`` with
this ``t2``: when the queue of issued-but-unstarted ops fills up in the trace, the backend's pace is
the slower one and the bottleneck reads ``"backend"``.

Both asynchronous models assume that issuing and computing *overlap*.  Whether they did is
measured, not assumed: every timed loop also records the CPU time of the frontend thread and of the
engine's workers (:class:`~d2l_async.experiments._cpu.CpuTimes`).  When their CPU times add up to the
wall time (concurrency ≈ 1) the two took turns — on Python's interpreter lock, or on one usable CPU —
and the serial model ``n·(t1 + t2) + t3`` is the one that fits.  :meth:`SyncAsyncResult.lessons`
states which, with the numbers.

As ops grow (more elements per op), ``t2`` takes a growing share of an op's synchronous cost and
the ratio falls toward 1: less is left for asynchrony to hide.  :func:`sweep_sync_async` measures
where, and :meth:`SyncAsyncSweep.lessons` says whether this run showed it.  Its default sizes
(:data:`SWEEP_NUMELS`) start at the book's one element and then sample where ``t2`` starts to grow:
on a CPU, adding 1 to up to some 10,000 elements costs a few µs beside some 10 µs of the engine's
bookkeeping per op, so the ratio is flat there and a rank test over those sizes is noise (the sweep
measured 7.8×, 8.6×, 8.2× at 1, 100 and 10,000 elements); from 10⁵ elements on ``t2`` grows with the
tensor and the ratio falls.  Above 10⁶ elements each op allocates megabytes, the wake-up ``t3``
grows with it, and the ratio levels off near 1.5 rather than falling further, so the sweep stops there.
On a GPU the same sizes are all launch-bound (adding 1 to 10⁶ floats takes an H200 under 2 µs), so there the
sweep's sizes come from :mod:`~d2l_async.experiments.sizing`, measured on that GPU.
The sweep times every size once per round, ``repeat`` rounds interleaved, and keeps every round's point
(:attr:`SyncAsyncSweep.runs`): one size's time per op varies by 2-4× from one run to the next (the same
800 KB op took 60 µs or 410 µs synchronously), and a trend over every round's point survives that.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from d2l_async import config

from ._common import Setup, make_measurement, positive_int, positive_ints, resolve_backend, time_runs
from ._cost_model import MIN_BACKLOGGED_PAIRS, CostModel, SideCosts, backend_pace, side_costs, t2_share
from ._cpu import CpuClock, CpuTimes, total
from ._show import Displayed, ran_on
from ._sync_async_lessons import FASTER, QUEUE, SHRINKS, book_loop_check, queue_check, run_checks, sweep_checks
from ._why import fmt_time
from .sizing import device_sizes

__all__ = ["MIN_BACKLOGGED_PAIRS", "SWEEP_NUMELS", "SWEEP_NUMELS_QUICK", "CostModel", "CpuTimes", "SweepPoint",
           "SyncAsyncResult", "SyncAsyncSweep", "backend_pace", "book_loop_check", "run_sync_async",
           "sweep_sync_async", "FASTER", "QUEUE", "SHRINKS"]

#: Tensor sizes :func:`sweep_sync_async` sweeps by default: the book's one element, then six sizes where
#: ``t2`` grows with the tensor, so the trend over every point (Spearman's rho, 7 points) survives a few
#: neighbours swapped by noise (three swapped pairs leave rho -0.89, one-sided p = 0.006).
SWEEP_NUMELS = (1, 30_000, 100_000, 200_000, 400_000, 700_000, 1_000_000)
#: The same in quick mode: five sizes, the fewest whose trend can survive one swapped pair.
SWEEP_NUMELS_QUICK = (1, 100_000, 200_000, 500_000, 1_000_000)


@dataclass(frozen=True)
class SyncAsyncResult(Displayed):
    """One synchronous and one asynchronous run of ``n`` × ``y = x + 1``.

    Attributes:
        sync: Measurement of the synchronous runs (a barrier after every op).
        async_: Measurement of the asynchronous runs (one barrier at the end).
        model: the estimated :class:`CostModel`.
        trace_sync, trace_async: traces of one run each (at most ``trace_ops`` ops).
        ops: ``n``.
        numel: elements of ``x``.
        backend, device, virtual: where it ran.
        eager: the same loop in plain eager PyTorch on the CPU (no engine, no barrier): context for
            the engine's per-op cost.  PyTorch runs CPU ops synchronously on the calling thread, so
            this is neither "sync" nor "async" in the book's sense.  ``None`` on the CUDA backend.
        cpu_sync, cpu_async: CPU time of the frontend and of the workers, and the wall time, summed
            over the timed runs (``None`` when not measured).
        machine: :func:`d2l_async.devices.machine` when the run started (usable CPUs, load).
    """

    sync: Any
    async_: Any
    model: CostModel
    trace_sync: Any
    trace_async: Any
    ops: int
    numel: int
    backend: str
    device: str
    virtual: bool
    eager: Any = None
    cpu_sync: CpuTimes | None = None
    cpu_async: CpuTimes | None = None
    machine: Any = None

    @property
    def ratio(self) -> float:
        """sync / async median time (the book's 3.16 s / 0.93 s = 3.4×)."""
        return self.sync.median / self.async_.median

    @property
    def model_gap(self) -> float:
        """Measured async time minus :attr:`CostModel.async_pipeline` (seconds).

        Positive means issuing and computing did not overlap as the model assumes; ``cpu_async``
        measures how much they did (see :meth:`lessons`).
        """
        return self.async_.median - self.model.async_pipeline

    def lessons(self) -> list[Any]:
        """The run's lesson check (not displayed): asynchrony wins (:data:`FASTER`); the queue's is
        :meth:`queue_lesson`."""
        return run_checks(self)

    def checks(self) -> list[Any]:
        """What the result shows under its table: none (the cost model is numbers, not a claim: its terms
        come from these very runs); :meth:`lessons` and :meth:`queue_lesson` hold the claims."""
        return []

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        m = self.model
        return (f"{ran_on(self.device, self.virtual)}; {self.ops:,} × y = x + 1 on {self.numel:,} element(s), "
                f"medians of {len(self.sync.raw)} runs",
                [("t1, the frontend issues an op", fmt_time(m.t1)),
                 (f"t2, the backend's time per op ({m.t2_source})", fmt_time(m.t2)),
                 ("t3, the wake-up after a wait", fmt_time(m.t3)),
                 ("synchronous, measured", fmt_time(self.sync.median)),
                 ("asynchronous, measured", fmt_time(self.async_.median)),
                 ("asynchronous, the book's t1 + n·t2 + t3", fmt_time(m.async_book)),
                 ("asynchronous, pipeline n·max(t1, t2) + min(t1, t2) + t3", fmt_time(m.async_pipeline)),
                 ("asynchronous, taking turns n·(t1 + t2) + t3", fmt_time(m.async_serial))])

    @property
    def costs(self) -> SideCosts:
        """Each side's cost per op on this backend's own clock (:func:`~d2l_async.experiments._cost_model.side_costs`):
        the CPU clock's frontend thread and workers on the engine, the traced run's launch intervals and
        kernels on CUDA; ``costs.sentence()`` prints them with their names."""
        return side_costs(self)

    def slower_side(self) -> tuple[str | None, float, float]:
        """``(side, frontend_s, backend_s)``: which side did more work per op (``"frontend"``, ``"backend"``
        or None when within a factor 2) and each side's seconds per op, read from the backend's own clock
        (:attr:`costs`): CPU time on the engine, not the wall-time model's ``t1`` vs ``t2``; the launch
        intervals and the kernels on CUDA, whose work no CPU clock sees."""
        c = self.costs
        return c.slower, c.frontend_s, c.backend_s

    def queue_lesson(self) -> Any:
        """Lesson check (not displayed): the traced run's queue agrees with the model's bottleneck."""
        return queue_check(self)

    @property
    def per_op_async(self) -> float:
        return self.async_.median / self.ops

    @property
    def per_op_sync(self) -> float:
        return self.sync.median / self.ops


def run_sync_async(
    *, ops: int | None = None, numel: int = 1, repeat: int | None = None, trace_ops: int | None = None,
    backend: str = "auto",
) -> SyncAsyncResult:
    """Time ``ops`` × ``y = x + 1`` synchronously and asynchronously, and fit the cost model.

    Args:
        ops: op count; default 10,000 like the book (quick mode 1,000).
        numel: elements of ``x`` (1 reproduces the book; large values show the advantage vanish).
        repeat: timed runs of each variant (median reported); default 3 (quick mode 1).
        trace_ops: ops in the recorded traces; default ``min(ops, 2000)``.
        backend: ``"auto"``, ``"engine"`` or ``"cuda"``.

    Returns:
        The frozen :class:`SyncAsyncResult`: the synchronous and asynchronous :class:`Measurement`, the fitted
        :class:`CostModel` (``t1`` issue, ``t2`` backend, ``t3`` synchronization seconds per op), a trace of each
        mode, the sizes, where it ran, eager PyTorch's :class:`Measurement` (engine backend only, else ``None``),
        the CPU times of both modes and the :class:`~d2l_async.devices.Machine`.

    Raises:
        ValueError: bad counts or an unavailable backend.
    """
    ops = positive_int("ops", ops if ops is not None else config.scale(10_000, 1_000), maximum=1_000_000)
    numel = positive_int("numel", numel, maximum=1 << 28)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(3, 1), maximum=1000)
    trace_ops = positive_int("trace_ops", trace_ops if trace_ops is not None else min(ops, 2000), maximum=ops)
    setup = resolve_backend(backend, n_devices=1)
    from d2l_async.devices import machine

    here = machine()
    with _Runner(setup, numel) as run:
        run.sync(min(ops, 100))  # warm-up
        run.asynchronous(min(ops, 100))
        sync_raw, async_raw, issue_raw, sync_cpu, async_cpu = [], [], [], [], []
        for _ in range(repeat):
            with CpuClock() as c:
                sync_raw.append(run.sync(ops))
            sync_cpu.append(c.times)
            with CpuClock() as c:
                seconds, issue = run.asynchronous(ops)
            async_cpu.append(c.times)
            async_raw.append(seconds)
            issue_raw.append(issue)
        trace_sync = run.traced(run.sync, trace_ops)
        trace_async = run.traced(run.asynchronous, trace_ops)
    eager = None
    if setup.backend == "engine":
        import torch

        x = torch.ones(numel)

        def eager_loop() -> None:
            for _ in range(ops):
                y = x + 1  # noqa: F841

        eager = make_measurement("eager PyTorch on the CPU (no engine)",
                                 time_runs(eager_loop, warmup=1, repeat=repeat), device="CPU (PyTorch eager)")
    t2, t2_source = backend_pace(trace_async)
    t1 = statistics.median(issue_raw) / ops
    t3 = max(0.0, statistics.median(sync_raw) / ops - t1 - t2)
    meta = dict(device=setup.device, virtual=setup.virtual, experiment="sync_async")
    return SyncAsyncResult(
        make_measurement("synchronous", sync_raw, device=setup.device),
        make_measurement("asynchronous", async_raw, device=setup.device),
        CostModel(ops, t1, t2, t3, t2_source), trace_sync.with_meta(**meta, mode="sync"),
        trace_async.with_meta(**meta, mode="async"), ops, numel, setup.backend, setup.device, setup.virtual, eager,
        total(sync_cpu), total(async_cpu), here)


class _Runner:
    """Runs the two loops on the engine or on CUDA; traced runs go through the trace source."""

    def __init__(self, setup: Setup, numel: int) -> None:
        self.setup, self.numel = setup, numel

    def __enter__(self) -> "_Runner":
        import torch

        if self.setup.backend == "cuda":
            self.dev = torch.device("cuda:0")
            self.x = torch.ones(self.numel, device=self.dev)
            self.barrier = lambda: torch.cuda.synchronize(self.dev)
            self.wait_one = self.barrier
            self.eng = None
        else:
            from d2l_async.engine import make_engine

            self.eng = make_engine(workers=1, devices=("cpu:0",))
            self.eng.__enter__()
            self.x = self.eng.array(torch.ones(self.numel), name="x")
            self.barrier = self.eng.waitall
            self.wait_one = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.eng is not None:
            self.eng.__exit__(*exc)

    def sync(self, n: int) -> float:
        x = self.x
        self.barrier()
        t0 = time.perf_counter()
        if self.eng is None:
            for _ in range(n):
                y = x + 1
                self.barrier()
        else:
            for _ in range(n):
                y = x + 1
                y.wait_to_read()
        return time.perf_counter() - t0

    def asynchronous(self, n: int) -> tuple[float, float]:
        x = self.x
        self.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            y = x + 1
        issued = time.perf_counter() - t0
        self.barrier()
        return time.perf_counter() - t0, issued

    def traced(self, fn: Callable[[int], Any], n: int) -> Any:
        if self.eng is None:
            from d2l_async.capture import capture

            return capture(fn, n, device="cuda")
        self.eng.reset_trace()
        fn(n)
        return self.eng.trace()


@dataclass(frozen=True)
class SweepPoint:
    """One cell of the sweep.

    Attributes:
        ops: op count.
        numel: elements per op.
        sync_seconds, async_seconds: median times.
        model: the cost model fitted at this point.
        cpu_sync, cpu_async: CPU and wall seconds of the timed runs (``None`` when not measured).
    """

    ops: int
    numel: int
    sync_seconds: float
    async_seconds: float
    model: CostModel
    cpu_sync: CpuTimes | None = None
    cpu_async: CpuTimes | None = None

    @property
    def ratio(self) -> float:
        return self.sync_seconds / self.async_seconds


@dataclass(frozen=True)
class SyncAsyncSweep(Displayed):
    """Sync vs async over op counts and tensor sizes.

    Attributes:
        points: one :class:`SweepPoint` per (ops, numel), ops varying fastest: the medians over the rounds.
        backend, device, virtual: where it ran.
        machine: :func:`d2l_async.devices.machine` when the sweep started.
        runs: every round's point, in the order measured (each round visits every size once, so a burst of
            other work, or the allocator's state at one moment, hits one round of every size rather than
            every run of one size); the lesson checks decide their trends over all of them.  Empty for a
            sweep built from medians only.
    """

    points: tuple[SweepPoint, ...]
    backend: str
    device: str
    virtual: bool
    machine: Any = None
    runs: tuple[SweepPoint, ...] = ()

    def lessons(self) -> list[Any]:
        """The sweep's lesson check (not displayed): does the advantage shrink as ops grow (:data:`SHRINKS`),
        at the largest op count swept."""
        return sweep_checks(self)

    def checks(self) -> list[Any]:
        """The checks of this sweep's claims (:meth:`lessons`)."""
        return self.lessons()

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        most = max(p.ops for p in self.points)
        rows = [(f"{p.numel:,} element(s)", f"synchronous / asynchronous = {p.ratio:.2f}")
                for p in sorted(self.points, key=lambda p: p.numel) if p.ops == most]
        rounds = len(self.runs) // max(len(self.points), 1) if self.runs else 1
        return f"{ran_on(self.device, self.virtual)}; {most:,} ops per point, medians of {rounds} rounds", rows

    def t2_shares(self) -> tuple[tuple[float, str], ...]:
        """``(t2's share of an op's synchronous cost, how it was read)`` at every point, in order, on this
        backend's own clock (:func:`~d2l_async.experiments._cost_model.t2_share`): the CPU clock of the
        synchronous runs on the engine, the GPU's time per kernel from the trace on CUDA."""
        return tuple(t2_share(p, self.backend) for p in self.points)

    def ratios(self, *, numel: int) -> tuple[tuple[int, float], ...]:
        """``(ops, ratio)`` pairs for one tensor size."""
        rows = tuple((p.ops, p.ratio) for p in self.points if p.numel == numel)
        if not rows:
            raise ValueError(f"numel={numel} was not swept; swept: {sorted({p.numel for p in self.points})}")
        return rows


def sweep_sync_async(
    *, ops: tuple[int, ...] | None = None, numels: tuple[int, ...] | None = None, repeat: int = 1,
    backend: str = "auto",
) -> SyncAsyncSweep:
    """Run :func:`run_sync_async` over a grid of op counts and tensor sizes.

    Args:
        ops: op counts; default (100, 1000, 10000) (quick mode (100, 400)).
        numels: elements per op; default :data:`SWEEP_NUMELS` (quick mode :data:`SWEEP_NUMELS_QUICK`): the
            book's one element, then the sizes where ``t2`` grows with the tensor; on CUDA this GPU's
            (:mod:`~d2l_async.experiments.sizing`: from 3 launches' worth of kernel to 10 launches and round trips).
        repeat: rounds: each round times every point once (one synchronous and one asynchronous run), the
            rounds interleaved across sizes; each point reports the medians over the rounds.
        backend: ``"auto"``, ``"engine"`` or ``"cuda"``.

    Returns:
        The frozen :class:`SyncAsyncSweep`: one point per ``(numel, ops)`` (numels outer, ops inner) holding the
        medians over the rounds, where it ran, the :class:`~d2l_async.devices.Machine` and every round's raw point.

    Raises:
        ValueError: bad values or an unavailable backend.
    """
    quick = config.quick_mode()
    ops = positive_ints("ops", ops if ops is not None else ((100, 400) if quick else (100, 1000, 10_000)),
                        maximum=1_000_000)
    # a trend is decided over every point: three points never decide one, five survive one swapped pair
    sized = numels is None
    numels = positive_ints("numels", numels if numels is not None else
                           (SWEEP_NUMELS_QUICK if quick else SWEEP_NUMELS), maximum=1 << 28)
    repeat = positive_int("repeat", repeat, maximum=100)
    setup = resolve_backend(backend, n_devices=1)
    if sized and setup.backend == "cuda":  # a CPU's sizes are launch-bound on a GPU: this GPU's
        numels = device_sizes().kwargs("sync_async_sweep", quick=quick)["numels"]
    from d2l_async.devices import machine

    here = machine()
    runs: list[SweepPoint] = []
    for _ in range(repeat):  # rounds, each over every size: interleaved, so a change of load hits all alike
        for numel in numels:
            for n in ops:
                r = run_sync_async(ops=n, numel=numel, repeat=1, trace_ops=min(n, 200), backend=setup.backend)
                runs.append(SweepPoint(n, numel, r.sync.median, r.async_.median, r.model, r.cpu_sync, r.cpu_async))
    points = tuple(_median_point([p for p in runs if (p.numel, p.ops) == (numel, n)]) for numel in numels for n in ops)
    return SyncAsyncSweep(points, setup.backend, setup.device, setup.virtual, here, tuple(runs))


def _median_point(rounds: list[SweepPoint]) -> SweepPoint:
    """One size's point over its rounds: the median times, the median of each cost-model term, the CPU
    clocks summed (their ratios are what the checks read)."""
    first = rounds[0]
    model = CostModel(first.ops, *(statistics.median(getattr(p.model, t) for p in rounds) for t in ("t1", "t2", "t3")),
                      statistics.mode(p.model.t2_source for p in rounds))
    cpus = [p.cpu_sync for p in rounds if p.cpu_sync is not None], [p.cpu_async for p in rounds if p.cpu_async is not None]
    return SweepPoint(first.ops, first.numel, statistics.median(p.sync_seconds for p in rounds),
                      statistics.median(p.async_seconds for p in rounds), model,
                      total(cpus[0]) if len(cpus[0]) == len(rounds) else None,
                      total(cpus[1]) if len(cpus[1]) == len(rounds) else None)


# ---------------------------------------------------------------- what makes each claim false
def _queue_trace(n: int, *, issue_every: float, start_every: float, duration: float, engine: str = "threaded") -> Any:
    """``n`` ops issued every ``issue_every`` s on the frontend, run back to back on one worker lane."""
    from d2l_async.trace import Event, Lane, LaneRole, Trace

    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, "cpu:0", True, 0)]
    events, t = [], 0.0
    for i in range(n):
        issue = i * issue_every
        t = max(t, issue)  # an op cannot start before it was issued
        events.append(Event("frontend", "launch", "push", issue, issue + issue_every / 2))
        events.append(Event("cpu:0 worker 0", "op", "add", t, t + duration, issue=issue, device="cpu:0"))
        t += start_every
    return Trace.from_events(events, lanes, {"virtual": True, "engine": engine})


def _example(sync: float, asynchronous: float, *, front_us: float = 5.0, back_us: float = 20.0,
             queue_fills: bool = True, machine: Any = None, engine: str = "threaded", n: int = 100) -> SyncAsyncResult:
    """A synthetic run: three runs of each loop 1% apart, the CPU clock's per-op costs, and a traced run
    whose queue fills (ops issued every µs, run every 10 µs) or stays empty."""
    trace = (_queue_trace(n, issue_every=1e-6, start_every=10e-6, duration=9e-6, engine=engine) if queue_fills else
             _queue_trace(n, issue_every=20e-6, start_every=5e-6, duration=4e-6, engine=engine))
    m = lambda label, x: make_measurement(label, [x, x * 1.01, x * 0.99])  # noqa: E731
    cpu = CpuTimes(wall=asynchronous * 3, frontend=3 * n * front_us * 1e-6, process=3 * n * (front_us + back_us) * 1e-6)
    return SyncAsyncResult(m("synchronous", sync), m("asynchronous", asynchronous), CostModel(n, 5e-6, 10e-6, 15e-6),
                           trace, trace, n, 1, "engine", "example", True, None, cpu, cpu, machine)


def _example_sweep(ratios: list[float]) -> SyncAsyncSweep:
    model = CostModel(300, 5e-6, 10e-6, 15e-6)
    sizes = (1, 100_000, 200_000, 400_000, 700_000, 1_000_000, 2_000_000)[:len(ratios)]
    pts = tuple(SweepPoint(300, k, r * 0.01, 0.01, model) for k, r in zip(sizes, ratios))
    return SyncAsyncSweep(pts, "engine", "example", True)


def _register() -> None:
    from d2l_async import claims, lesson

    from ._why import example_machine

    busy, spare = example_machine(1, 0), example_machine(4, 4)
    claims.falsifier(FASTER, "asynchronous as slow as synchronous",
                     lambda: book_loop_check([1.0, 1.01, 0.99], [1.0, 0.99, 1.01], ops=1000, machine=spare))
    claims.falsifier(FASTER, "synchronous faster", lambda: run_checks(_example(0.5, 1.0, machine=spare))[0])
    claims.counterfactual(FASTER, "a naive engine (no worker thread)", lesson.Cause.NO_WORKER_THREAD,
                          lambda: book_loop_check([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], ops=1000, engine="naive"))
    claims.counterfactual(FASTER, "one usable CPU, busy", lesson.Cause.NO_SPARE_CPU,
                          lambda: run_checks(_example(0.5, 1.0, machine=busy))[0])
    claims.counterfactual(FASTER, "runs that scatter across 1", lesson.Cause.SPREAD,
                          lambda: book_loop_check([1.0, 1.3, 0.8], [1.1, 0.9, 1.2], ops=1000, machine=busy))
    claims.falsifier(QUEUE, "the backend slower but the queue empty",
                     lambda: queue_check(_example(2.0, 1.0, queue_fills=False, machine=spare)))
    claims.falsifier(QUEUE, "the frontend slower but the queue full",
                     lambda: queue_check(_example(2.0, 1.0, front_us=40, back_us=5, machine=busy)))
    claims.counterfactual(QUEUE, "the two sides within a factor 2", lesson.Cause.SIDES_CLOSE,
                          lambda: queue_check(_example(2.0, 1.0, front_us=10, back_us=12, machine=spare)))
    claims.counterfactual(QUEUE, "the frontend slower, the queue full, one busy CPU", lesson.Cause.NO_SPARE_CPU,
                          lambda: queue_check(_example(2.0, 1.0, front_us=40, back_us=5, machine=busy)))
    claims.counterfactual(QUEUE, "the same, four spare CPUs", lesson.Cause.INTERPRETER_LOCK,
                          lambda: queue_check(_example(2.0, 1.0, front_us=40, back_us=5, machine=spare)))
    claims.falsifier(SHRINKS, "a ratio that rises with the size",
                     lambda: sweep_checks(_example_sweep([1.2, 1.5, 1.9, 2.4, 3.0, 3.6]))[0])
    claims.falsifier(SHRINKS, "a ratio that goes up and down as much as it falls",
                     lambda: sweep_checks(_example_sweep([5.8, 2.6, 5.3, 1.0, 5.6, 1.7, 4.9]))[0])
    claims.counterfactual(SHRINKS, "a ratio that goes up and down", lesson.Cause.SPREAD,
                          lambda: sweep_checks(_example_sweep([5.8, 2.6, 5.3, 1.0, 5.6, 1.7, 4.9]))[0])
    claims.counterfactual(SHRINKS, "three sizes swept", lesson.Cause.MISSING,
                          lambda: sweep_checks(_example_sweep([5.8, 2.6, 1.0]))[0])
    claims.counterfactual(SHRINKS, "a ratio that rises with the size", lesson.Cause.OTHER_WAY,
                          lambda: sweep_checks(_example_sweep([1.2, 1.5, 1.9, 2.4, 3.0, 3.6]))[0])


_register()
