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

from d2l_async import config, lesson

from d2l_async._args import TRACE_HINT, having, instance
from d2l_async.trace import Trace

from ._common import Setup, backend_work, choice, launches, make_measurement, positive_int, resolve_backend, time_runs
from ._cuda_why import why_timer_saw_work
from ._why import few_cpus, fmt_time, machine_words
from .deadline import checkpoint
from .sizing import device_sizes

__all__ = ["AsynchronyResult", "Ahead", "run_asynchrony", "checks", "issue_and_finish", "ran_ahead_check",
           "timer_check", "machine_words"]


@dataclass(frozen=True)
class AsynchronyResult:
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
    busy = float(np.sum(np.clip(work["end"] - work["start"], 0, None)))
    before = float(np.sum(np.clip(np.minimum(work["end"], last_push) - work["start"], 0, None)))
    return Ahead(last_push - t0, float(work["end"].max()) - t0, busy, before)


def ran_ahead_check(trace: Any, machine: Any = None, *, share: float = 0.5) -> lesson.Check:
    """Check that the frontend finished issuing before ``share`` of the backend's time had passed."""
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    a = issue_and_finish(trace)
    pushes = len(launches(trace))
    shown = (f"last push at {fmt_time(a.issued)}, backend finished at {fmt_time(a.finished)} "
             f"({a.issued / a.finished:.0%} of the way)") if a.finished > 0 else "the backend took no time"
    return lesson.check(
        "the frontend is done issuing long before the backend is done",
        a.finished > 0 and a.issued < share * a.finished,
        shown=shown,
        otherwise=(f"the backend had already done {a.share_before:.0%} of its work when the frontend pushed its "
                   f"last op, {fmt_time(a.issued / max(pushes, 1))} per push ({machine_words(machine)}): "
                   + _turns(machine) + ". Make each op larger (the size slider) or run where a core is spare (or on "
                   "a GPU)."))


def _turns(machine: Any) -> str:
    """Why pushing waited for computing, from the CPUs the run had."""
    if machine is None:
        return "pushing waited for computing, and the machine was not recorded to say why"
    if few_cpus(machine, 2):
        return "the worker thread and the frontend had no CPU each and took turns, so pushing waited for computing"
    return ("the CPUs were there, so the pushes waited for the interpreter lock the worker takes between products "
            "(or for other processes)")


def timer_check(naive_s: Any, synced_s: Any, machine: Any = None, *, share_before: float | None = None,
                name: str = "the naive timer misses most of the work", backend: str = "engine") -> lesson.Check:
    """Check that a naive (unsynchronized) timer saw less than half of the synchronized time.

    ``naive_s`` and ``synced_s`` are seconds, one run or every run of each (a sequence): decided
    against their spread by :func:`d2l_async.verdict.compare` (one run each: only beyond a factor 2
    of the half, i.e. the naive timer saw under a quarter, or over all of it).  ``backend`` is where the
    loop ran (``"engine"`` or ``"cuda"``): a CUDA loop's ✘ gives the GPU's reasons, not the CPU's.
    """
    if machine is not None:
        having("machine", machine, ("usable_cpus",), what="a d2l_async.devices.machine() snapshot or None")
    choice("backend", backend, ("engine", "cuda"))
    from d2l_async.verdict import compare

    naive = tuple(naive_s) if isinstance(naive_s, (tuple, list)) else (naive_s,)
    synced = tuple(synced_s) if isinstance(synced_s, (tuple, list)) else (synced_s,)
    if not naive or not synced or min(naive) < 0 or min(synced) <= 0:
        raise ValueError(f"timings must be seconds >= 0 (synchronized > 0), got {naive_s!r}, {synced_s!r}")
    naive_m, synced_m = statistics.median(naive), statistics.median(synced)
    missed = max(0.0, 1.0 - naive_m / synced_m)
    before = (f"in the traced run the backend did {share_before:.0%} of its work before the last push; "
              if share_before is not None else "")
    cuda = backend == "cuda"  # the GPU's reasons (launches, the queue's cap), not worker threads'
    return lesson.check(
        name, compare(naive, synced, by=0.5, names=("naive", "synchronized")),
        shown=(f"naive {fmt_time(naive_m)} vs synchronized {fmt_time(synced_m)} (naive / synchronized = "
               f"{naive_m / synced_m:.2f}): it missed {missed:.0%}"),
        otherwise=why_timer_saw_work(naive_m, synced_m) if cuda else (
                   f"the naive timer saw {1 - missed:.0%} of the synchronized time: the frontend's pushes were "
                   f"slowed by the work itself; {before}{machine_words(machine)}: {_turns(machine)}. Use larger "
                   "matrices (fewer, longer ops), or a machine with a spare core, or a GPU."),
        unclear=why_timer_saw_work(naive_m, synced_m, unclear=True) if cuda else (
                 f"the naive timer saw {1 - missed:.0%} of the synchronized time over {len(naive)} and "
                 f"{len(synced)} run(s), and their spread covers the half the claim draws: {before}"
                 f"{machine_words(machine)}. Larger matrices (fewer, longer ops) or a spare core make it clear"))


def checks(r: AsynchronyResult) -> list[lesson.Check]:
    """Whether the notebook's lessons held on this run, from its numbers only."""
    having("r", r, ("trace", "size"), what="an AsynchronyResult")
    a = issue_and_finish(r.trace)
    out = [timer_check(r.naive.raw, r.synced.raw, r.machine, share_before=a.share_before),
           ran_ahead_check(r.trace, r.machine)]
    if r.backend == "cuda":  # the GPU's reasons (launch latency, the queue's cap), not worker threads'
        from ._cuda_why import cuda_facts, explain, why_not_ahead

        return explain(out, why_not_ahead(cuda_facts(r.trace)))
    return out
