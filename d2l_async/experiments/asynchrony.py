"""Asynchrony: the frontend returns at once, the backend does the work (D2L §13.2.1).

The book times ten 1000×1000 matrix products in NumPy and in the framework.  NumPy is synchronous:
the time is the work.  The framework's loop returns as soon as the ten products are *queued*, so a
naive timer (the book's ``Benchmark`` without a barrier) measures only the frontend; a synchronized
timer (``Benchmark`` with ``waitall()`` / ``torch.cuda.synchronize(device)``) measures the work.

On CPU the framework side runs on the dependency engine (one virtual device); on a GPU it runs on the
default CUDA stream and the trace comes from ``torch.profiler`` (:mod:`d2l_async.capture`).

Every timed loop does only what it names: the inputs are made *before* the timer starts, so the
naive timer times the pushes (a loop that also made a fresh 4 MB input per product had its naive
timer measure the copies).  Whether the lesson held on this run is :func:`checks`, a pure
function of the result: on one busy CPU the worker thread may take the frontend's core while it is
still pushing, and then the naive timer does see part of the work — the check says so, with the
share of the work that ran before the last push.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Mapping

from d2l_async import claims, config, lesson

from d2l_async._args import TRACE_HINT, having, instance, number, samples
from d2l_async.trace import Trace

from ._common import Setup, backend_work, choice, launches, make_measurement, positive_int, resolve_backend, time_runs
from ._cuda_why import why_timer_saw_work
from ._show import Displayed, ran_on
from ._why import cpu_cause, fmt_time, machine_words
from .deadline import checkpoint
from .sizing import device_sizes

__all__ = ["AsynchronyResult", "Ahead", "run_asynchrony", "checks", "issue_and_finish", "ran_ahead_check",
           "timer_check", "machine_words", "RAN_AHEAD", "NAIVE_MISSES"]


@dataclass(frozen=True)
class AsynchronyResult(Displayed):
    """NumPy vs the framework, timed naively and synchronized.

    Attributes:
        numpy: NumPy (synchronous by nature): the time of the work.
        naive: the framework timed without a final barrier: only the frontend's queueing.
        synced: the framework timed with a barrier at the end: the work.
        trace: one synchronized framework run (engine trace, or a CUDA profiler capture).
        size: matrix side (the book: 1000).
        matmuls: products per run (the book: 10).
        backend: ``"engine"`` or ``"cuda"``.
        device: where the framework side ran, in words.
        virtual: True for the CPU engine's virtual device.
        machine: :class:`d2l_async.devices.Machine` read just before the run (``None``: unknown).
    """

    numpy: Any
    naive: Any
    synced: Any
    trace: Any
    size: int
    matmuls: int
    backend: str
    device: str
    virtual: bool
    machine: Any = None

    @property
    def measurements(self) -> Mapping[str, Any]:
        """label -> Measurement, in display order (for ``viz.plot_measurements``)."""
        return {m.label: m for m in (self.numpy, self.naive, self.synced)}

    @property
    def hidden_fraction(self) -> float:
        """Share of the synchronized time the naive timer did not see (0..1)."""
        return max(0.0, 1.0 - self.naive.median / self.synced.median) if self.synced.median > 0 else 0.0

    def checks(self) -> list[lesson.Check]:
        """The checks of this run's claims (:func:`checks`)."""
        return checks(self)

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        return (f"{ran_on(self.device, self.virtual)}; {self.matmuls} products of {self.size}×{self.size}, "
                f"medians of {len(self.synced.raw)} runs",
                [(m.label, fmt_time(m.median)) for m in (self.numpy, self.naive, self.synced)])


def run_asynchrony(
    *, size: int | None = None, matmuls: int | None = None, repeat: int | None = None, backend: str = "auto"
) -> AsynchronyResult:
    """Time ``matmuls`` products of ``size``×``size`` random matrices three ways.

    Args:
        size: matrix side; default 1000 (quick mode 400), on CUDA this GPU's (:mod:`~d2l_async.experiments.sizing`).
        matmuls: products per timed run; default 10 (quick mode 5).
        repeat: timed runs per variant (after one warm-up); default 5 (quick mode 2).
        backend: ``"auto"``, ``"engine"`` or ``"cuda"``.

    Returns:
        The frozen :class:`AsynchronyResult`: the NumPy, naive (unsynchronized) and synchronized
        :class:`Measurement`, a trace of one synchronized framework run, the sizes, where it ran (``backend``,
        ``device``, ``virtual``) and the :class:`~d2l_async.devices.Machine` read before it.

    Raises:
        ValueError: a non-positive size/count, or an unavailable backend.
    """
    sized = size is None
    size = positive_int("size", size if size is not None else config.scale(1000, 400), maximum=8192)
    matmuls = positive_int("matmuls", matmuls if matmuls is not None else config.scale(10, 5), maximum=10_000)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(5, 2), maximum=1000)
    setup = resolve_backend(backend, n_devices=1)
    if sized and setup.backend == "cuda":  # a CPU's size is launch-bound on a GPU: this GPU's
        size = device_sizes().asynchrony

    import numpy as np

    from d2l_async.devices import machine

    here = machine(sample_s=0.05)
    a = np.random.default_rng(0).standard_normal((size, size), dtype=np.float32)  # float32 like torch

    def numpy_run() -> None:  # the input is made once, above: the loop times the products only
        for _ in range(matmuls):
            a @ a
            checkpoint()

    numpy_m = make_measurement("numpy", time_runs(numpy_run, warmup=1, repeat=repeat), device="CPU (NumPy)")
    runner = _cuda if setup.backend == "cuda" else _engine
    naive, synced, trace = runner(size, matmuls, repeat, setup)
    return AsynchronyResult(numpy_m, naive, synced, trace, size, matmuls, setup.backend, setup.device, setup.virtual,
                            here)


def _engine(size: int, matmuls: int, repeat: int, setup: Setup):
    import torch

    from d2l_async.engine import make_engine

    with make_engine(workers=1, devices=("cpu:0",)) as eng:
        a = eng.array(torch.randn(size, size, generator=torch.Generator().manual_seed(0)), name="a")

        def queue_work() -> None:  # pushes only: the input exists before the timer starts
            for _ in range(matmuls):
                a @ a
                checkpoint()

        def naive() -> None:  # the book's Benchmark without a barrier: the queue is drained untimed
            queue_work()

        def synced() -> None:
            queue_work()
            eng.waitall()

        naive_raw = []
        for _ in range(repeat + 1):  # first run is the warm-up
            naive_raw.append(time_runs(naive, warmup=0, repeat=1)[0])
            eng.waitall()
        synced_raw = time_runs(synced, warmup=1, repeat=repeat)
        eng.reset_trace()
        synced()
        trace = eng.trace().with_meta(device=setup.device, virtual=True, experiment="asynchrony")
    return (make_measurement("framework, naive timer (no barrier)", naive_raw[1:], device=setup.device,
                             synchronized=False),
            make_measurement("framework, synchronized", synced_raw, device=setup.device), trace)


def _cuda(size: int, matmuls: int, repeat: int, setup: Setup):
    import torch

    from d2l_async.capture import capture

    dev = torch.device("cuda:0")
    a = torch.randn(size, size, device=dev)  # made before the timer, as on the engine

    def queue_work() -> None:
        for _ in range(matmuls):
            a @ a
            checkpoint()

    def synced() -> None:
        queue_work()
        torch.cuda.synchronize(dev)

    naive_raw = []
    torch.cuda.synchronize(dev)
    for _ in range(repeat + 1):
        naive_raw.append(time_runs(queue_work, warmup=0, repeat=1)[0])
        torch.cuda.synchronize(dev)  # drained outside the timer, so the next run starts clean
    synced_raw = time_runs(synced, warmup=1, repeat=repeat)
    trace = capture(synced, device="cuda").with_meta(device=setup.device, virtual=False, experiment="asynchrony")
    return (make_measurement("framework, naive timer (no barrier)", naive_raw[1:], device=setup.device,
                             synchronized=False),
            make_measurement("framework, synchronized", synced_raw, device=setup.device), trace)


# ---------------------------------------------------------------- did the lesson hold on this run?
@dataclass(frozen=True)
class Ahead:
    """How far the frontend ran ahead in a trace (seconds from its first event).

    Attributes:
        issued: when the frontend's last push ended.
        finished: when the backend's last op ended.
        busy: seconds the backend lanes spent on ops.
        busy_before: of those, the seconds before the last push.
    """

    issued: float
    finished: float
    busy: float
    busy_before: float

    @property
    def share_before(self) -> float:
        """Share of the backend's work done while the frontend was still pushing (0..1)."""
        return self.busy_before / self.busy if self.busy > 0 else 0.0


def issue_and_finish(trace: Any) -> Ahead:
    """:class:`Ahead` read from a trace (pushes are the launch calls; work is on backend lanes).

    A naive engine's trace (``meta["engine"] == "naive"``) records each push's bookkeeping as its
    launch, but the op then runs inside the push, on the frontend's thread: its frontend is done
    issuing only when the last op it ran has ended (a slow last op once made a naive run look as
    if the frontend had raced ahead).

    Returns:
        The frozen :class:`Ahead`: when the last push ended and the backend's last op ended (seconds from
        the trace's first push or op), the backend's busy seconds and those before the last push.

    Raises:
        ValueError: the trace has no pushes or no backend work.
    """
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    import numpy as np

    front = launches(trace)  # a copy into pageable memory is a push too (a blocking one)
    work = backend_work(trace)
    if not len(front) or not len(work):
        raise ValueError("the trace needs pushes (launch events) and backend work to compare them")
    t0 = min(float(front["start"].min()), float(work["start"].min()))
    last_push = float(front["end"].max())
    if trace.meta.get("engine") == "naive":
        last_push = max(last_push, float(work["end"].max()))
    busy = float(np.sum(np.clip(work["end"] - work["start"], 0, None)))
    before = float(np.sum(np.clip(np.minimum(work["end"], last_push) - work["start"], 0, None)))
    return Ahead(last_push - t0, float(work["end"].max()) - t0, busy, before)


RAN_AHEAD = claims.claim(
    "00.ran-ahead", notebooks=("00_tour", "01_asynchrony"),
    sentence="the frontend finishes issuing long before the backend finishes",
    book="§13.2.1: the frontend returns at once and the backend works through the queue",
    quantity="when the last push ended, as a share of when the backend's last op ended (the trace)",
    rule="fact: under half", says="last push {issued}, backend done {finished}")
NAIVE_MISSES = claims.claim(
    "01.naive-misses", notebooks=("01_asynchrony",),
    sentence="the naive timer misses most of the work",
    book="§13.2.1: timed without a barrier, the framework's loop returns before the products are done",
    quantity="naive / synchronized wall time of the same loop, every timed run",
    rule="compare: the interval wholly below 0.5")


def _why_behind(trace: Any, machine: Any) -> tuple[Any, dict[str, Any]]:
    """Why the frontend's pushes kept pace with the backend: the run's engine first (a naive engine has no
    worker), then the CPUs it had."""
    if trace is not None and trace.meta.get("engine") == "naive":
        return lesson.Cause.NO_WORKER_THREAD, {}
    return cpu_cause(machine, "the frontend and the worker")


def ran_ahead_check(trace: Any, machine: Any = None, *, share: float = 0.5) -> lesson.Check:
    """The check of :data:`RAN_AHEAD`: the frontend finished issuing before ``share`` of the backend's time
    had passed, read from the trace.

    Returns:
        The :class:`~d2l_async.lesson.Check` (not displayed).
    """
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    share = number("share", share, above=0, maximum=1)
    a = issue_and_finish(trace)
    cause, facts = _why_behind(trace, machine)
    return RAN_AHEAD.check(a.finished > 0 and a.issued < share * a.finished, cause=cause,
                           facts={**facts, "issued": fmt_time(a.issued), "finished": fmt_time(a.finished)})


def timer_check(naive_s: Any, synced_s: Any, machine: Any = None, *, trace: Any = None,
                backend: str = "engine") -> lesson.Check:
    """The check of :data:`NAIVE_MISSES`: the naive (unsynchronized) timer saw under half of the
    synchronized time, decided against the spread of the runs (:func:`d2l_async.verdict.compare`).

    Args:
        naive_s, synced_s: seconds, one run or every run of each (a sequence).
        machine: the machine snapshot (for the reason).
        trace: a trace of the run (its engine kind is a reason before the machine's).
        backend: where the loop ran, ``"engine"`` or ``"cuda"``: a CUDA loop's ✘ or can't-tell gives the
            GPU's reasons (cause ``gpu``), not the CPU's.

    Returns:
        The :class:`~d2l_async.lesson.Check` (not displayed).

    Raises:
        ValueError: negative times, or a synchronized time of zero, or an unknown ``backend``.
    """
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    if trace is not None:
        instance("trace", trace, Trace, what="d2l_async.trace.Trace or None", hint=TRACE_HINT)
    choice("backend", backend, ("engine", "cuda"))
    from d2l_async.verdict import compare

    naive = tuple(samples("naive_s", naive_s, minimum=0, what="seconds"))
    synced = tuple(samples("synced_s", synced_s, above=0, what="seconds"))
    v = compare(naive, synced, by=0.5, names=("naive", "synchronized"))
    cause, facts = _why_behind(trace, machine)
    if v.holds is None and cause is not lesson.Cause.NO_WORKER_THREAD:
        cause, facts = lesson.Cause.SPREAD, {"runs": f"{len(naive)} vs {len(synced)} runs"}
    naive_m, synced_m = statistics.median(naive), statistics.median(synced)
    check = NAIVE_MISSES.check(v, cause=cause, facts=facts,
                               detail=f"medians {fmt_time(naive_m)} vs {fmt_time(synced_m)}")
    if backend == "cuda":  # the GPU's reasons (launches, a synchronizing call, the queue's cap), not the CPU's
        from ._cuda_why import explain

        return explain([check], why_timer_saw_work(naive_m, synced_m, unclear=check.holds is None))[0]
    return check


def checks(r: AsynchronyResult) -> list[lesson.Check]:
    """Whether the notebook's lessons held on this run, from its numbers only.

    Returns:
        The checks of :data:`NAIVE_MISSES` and :data:`RAN_AHEAD` (a GPU run's reasons in CUDA's terms).
    """
    having("r", r, ("trace", "size"), what="an AsynchronyResult")
    out = [timer_check(r.naive.raw, r.synced.raw, r.machine, trace=r.trace), ran_ahead_check(r.trace, r.machine)]
    if r.backend == "cuda":  # the GPU's reasons (launch latency, the queue's cap), not worker threads'
        from ._cuda_why import cuda_facts, explain, why_not_ahead

        return explain(out, why_not_ahead(cuda_facts(r.trace)))
    return out


# ---------------------------------------------------------------- what makes each claim false
def _example_trace(push_ends: list[float], work: list[tuple[float, float]], engine: str = "threaded") -> Trace:
    """A trace of pushes ending at ``push_ends`` and ops ``(start, end)`` on one worker (seconds)."""
    from d2l_async.trace import Event, Lane, LaneRole

    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, "cpu:0", True, 0)]
    events = [Event("frontend", "launch", "push", e - 1e-6, e) for e in push_ends]
    events += [Event("cpu:0 worker 0", "op", "matmul", s, e, issue=0.0, device="cpu:0") for s, e in work]
    return Trace.from_events(events, lanes).with_meta(engine=engine)


_WORK = [(0.0, 0.010), (0.010, 0.020), (0.020, 0.030)]
_KEPT_PACE = _example_trace([0.010, 0.020, 0.029], _WORK)  # each push waited for the op before it


def _naive_engine_run() -> AsynchronyResult:
    import os

    old = os.environ.get("D2L_ASYNC_ENGINE")
    os.environ["D2L_ASYNC_ENGINE"] = "naive"
    try:
        return run_asynchrony(size=256, matmuls=4, repeat=3, backend="engine")
    finally:
        os.environ.pop("D2L_ASYNC_ENGINE") if old is None else os.environ.__setitem__("D2L_ASYNC_ENGINE", old)


def _register() -> None:
    from ._why import example_machine

    busy, spare = example_machine(1, 0), example_machine(4, 4)
    claims.falsifier(RAN_AHEAD, "a trace whose pushes each waited for the op before them",
                     lambda: ran_ahead_check(_KEPT_PACE, spare))
    claims.counterfactual(RAN_AHEAD, "D2L_ASYNC_ENGINE=naive (no worker thread)", lesson.Cause.NO_WORKER_THREAD,
                          lambda: checks(_naive_engine_run())[1])
    claims.counterfactual(RAN_AHEAD, "one usable CPU, busy", lesson.Cause.NO_SPARE_CPU,
                          lambda: ran_ahead_check(_KEPT_PACE, busy))
    claims.counterfactual(RAN_AHEAD, "four spare CPUs", lesson.Cause.INTERPRETER_LOCK,
                          lambda: ran_ahead_check(_KEPT_PACE, spare))
    claims.falsifier(NAIVE_MISSES, "naive runs as long as the synchronized ones",
                     lambda: timer_check([0.029, 0.030, 0.031], [0.030, 0.030, 0.031], spare))
    claims.counterfactual(NAIVE_MISSES, "D2L_ASYNC_ENGINE=naive (no worker thread)", lesson.Cause.NO_WORKER_THREAD,
                          lambda: checks(_naive_engine_run())[0])
    claims.counterfactual(NAIVE_MISSES, "one usable CPU, busy", lesson.Cause.NO_SPARE_CPU,
                          lambda: timer_check([0.029, 0.030, 0.029], [0.030, 0.030, 0.031], busy))
    claims.counterfactual(NAIVE_MISSES, "runs that scatter across the half", lesson.Cause.SPREAD,
                          lambda: timer_check([0.010, 0.020, 0.012], [0.030, 0.021, 0.029], busy))


_register()
