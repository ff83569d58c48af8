"""Asynchrony: the frontend returns at once, the backend does the work (D2L §13.2.1).

The book times ten 1000×1000 matrix products in NumPy and in the framework.  NumPy is synchronous:
the time is the work.  The framework's loop returns as soon as the ten products are *queued*, so a
naive timer (the book's ``Benchmark`` without a barrier) measures only the frontend; a synchronized
timer (``Benchmark`` with ``waitall()`` / ``torch.cuda.synchronize(device)``) measures the work.

On CPU the framework side runs on the dependency engine (one virtual device); on a GPU it runs on the
default CUDA stream and the trace comes from ``torch.profiler`` (:mod:`d2l_async.capture`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from d2l_async import config

from ._common import Setup, make_measurement, positive_int, resolve_backend, time_runs

__all__ = ["AsynchronyResult", "run_asynchrony"]


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
        size: matrix side; default 1000 (quick mode 400).
        matmuls: products per timed run; default 10 (quick mode 5).
        repeat: timed runs per variant (after one warm-up); default 5 (quick mode 2).
        backend: ``"auto"``, ``"engine"`` or ``"cuda"``.

    Raises:
        ValueError: a non-positive size/count, or an unavailable backend.
    """
    size = positive_int("size", size if size is not None else config.scale(1000, 400), maximum=8192)
    matmuls = positive_int("matmuls", matmuls if matmuls is not None else config.scale(10, 5), maximum=10_000)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(5, 2), maximum=1000)
    setup = resolve_backend(backend, n_devices=1)

    import numpy as np

    rng = np.random.default_rng(0)

    def numpy_run() -> None:
        for _ in range(matmuls):
            a = rng.standard_normal((size, size), dtype=np.float32)  # float32 like torch
            a @ a

    numpy_m = make_measurement("numpy", time_runs(numpy_run, warmup=1, repeat=repeat), device="CPU (NumPy)")
    runner = _cuda if setup.backend == "cuda" else _engine
    naive, synced, trace = runner(size, matmuls, repeat, setup)
    return AsynchronyResult(numpy_m, naive, synced, trace, size, matmuls, setup.backend, setup.device, setup.virtual)


def _engine(size: int, matmuls: int, repeat: int, setup: Setup):
    import torch

    from d2l_async.engine import ThreadedEngine

    with ThreadedEngine(workers=1, devices=("cpu:0",)) as eng:

        def queue_work() -> None:
            for _ in range(matmuls):
                a = eng.array(torch.empty(size, size), name="a")
                eng.push(lambda t: t.normal_(), writes=(a,), name="normal")  # random init is an op too
                a @ a

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

    def queue_work() -> None:
        for _ in range(matmuls):
            a = torch.randn(size, size, device=dev)
            a @ a

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
