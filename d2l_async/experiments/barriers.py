"""Barriers: ``waitall()`` drains everything, ``wait_to_read()`` waits for one array (D2L §13.2.2).

The set-up: long, unrelated work runs on one device while a small result ``z`` is computed on
another.  ``waitall()`` makes the frontend wait for *all* of it; ``z.wait_to_read()`` returns as soon
as ``z`` is ready, and the long work keeps running behind the frontend — the timeline shows it.

On CUDA the same two barriers are ``torch.cuda.synchronize(device)`` and waiting on one CUDA event
recorded after ``z`` on its own stream (``event.synchronize()``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from d2l_async import config

from ._common import Setup, positive_int, resolve_backend

__all__ = ["BarrierResult", "run_barriers"]


@dataclass(frozen=True)
class BarrierResult:
    """How long the frontend waited at each barrier, with the same unrelated work queued.

    Attributes:
        waitall_wait: seconds the frontend spent in ``waitall()`` (``torch.cuda.synchronize``).
        wait_to_read_wait: seconds it spent in ``z.wait_to_read()`` (waiting on ``z``'s event).
        long_work_seconds: how long the unrelated work took after it was queued (waitall run).
        trace_waitall, trace_wait_to_read: the two runs' traces.
        long_ops: unrelated matrix products queued first.
        size: their matrix side.
        backend, device, virtual: where it ran.
        barrier_names: what the two barriers are called on this backend.
    """

    waitall_wait: float
    wait_to_read_wait: float
    long_work_seconds: float
    trace_waitall: Any
    trace_wait_to_read: Any
    long_ops: int
    size: int
    backend: str
    device: str
    virtual: bool
    barrier_names: tuple[str, str]

    @property
    def saved(self) -> float:
        """Seconds of frontend time ``wait_to_read`` saved over ``waitall``."""
        return self.waitall_wait - self.wait_to_read_wait


def run_barriers(*, long_ops: int | None = None, size: int | None = None, backend: str = "auto") -> BarrierResult:
    """Queue long unrelated work, compute a small ``z``, then wait with each barrier.

    Args:
        long_ops: unrelated matrix products; default 10 (quick mode 4).
        size: their matrix side; default 800 (quick mode 300).
        backend: ``"auto"``, ``"engine"`` (two virtual devices) or ``"cuda"`` (two streams).

    Raises:
        ValueError: bad counts or an unavailable backend.
    """
    long_ops = positive_int("long_ops", long_ops if long_ops is not None else config.scale(10, 4), maximum=10_000)
    size = positive_int("size", size if size is not None else config.scale(800, 300), maximum=8192)
    setup = resolve_backend(backend, n_devices=2)
    if setup.backend == "cuda":
        return _cuda(long_ops, size, setup)
    return _engine(long_ops, size, setup)


def _engine(long_ops: int, size: int, setup: Setup) -> BarrierResult:
    import torch

    from d2l_async.engine import ThreadedEngine

    def run(eng: Any, barrier: str) -> tuple[float, float, Any]:
        eng.reset_trace()
        t_start = time.perf_counter()
        a = eng.array(torch.rand(size, size) / size, device="cpu:1", name="a")
        for _ in range(long_ops):  # unrelated work on the other device
            a = a @ a + 1
        x = eng.array(torch.ones(2, 2), device="cpu:0", name="x")
        z = x * 2 + 1
        t0 = time.perf_counter()
        if barrier == "waitall":
            eng.waitall()
        else:
            z.wait_to_read()
        waited = time.perf_counter() - t0
        eng.waitall()  # untimed: let the unrelated work finish so both traces show all of it
        total = time.perf_counter() - t_start
        return waited, total, eng.trace()

    with ThreadedEngine(workers=1, devices=("cpu:0", "cpu:1")) as eng:
        run(eng, "waitall")  # warm-up
        w_all, total, t_all = run(eng, "waitall")
        w_one, _, t_one = run(eng, "wait_to_read")
    meta = dict(device=setup.device, virtual=True, experiment="barriers")
    return BarrierResult(w_all, w_one, total, t_all.with_meta(**meta, barrier="waitall"),
                         t_one.with_meta(**meta, barrier="wait_to_read"), long_ops, size, "engine",
                         setup.device, True, ("waitall()", "z.wait_to_read()"))


def _cuda(long_ops: int, size: int, setup: Setup) -> BarrierResult:
    import torch

    from d2l_async.capture import capture

    dev = torch.device("cuda:0")
    long_stream, small_stream = torch.cuda.Stream(dev), torch.cuda.Stream(dev)
    waits: dict[str, float] = {}

    def run(barrier: str) -> None:
        torch.cuda.synchronize(dev)
        with torch.cuda.stream(long_stream):
            a = torch.rand(size, size, device=dev) / size
            for _ in range(long_ops):
                a = a @ a + 1
        with torch.cuda.stream(small_stream):
            z = torch.ones(2, 2, device=dev) * 2 + 1
            done = torch.cuda.Event()
            done.record(small_stream)
        t0 = time.perf_counter()
        if barrier == "waitall":
            torch.cuda.synchronize(dev)
        else:
            done.synchronize()  # wait for z only: the long stream keeps running
        waits[barrier] = time.perf_counter() - t0
        torch.cuda.synchronize(dev)
        del z

    run("waitall")  # warm-up
    t_all = capture(run, "waitall", device="cuda")
    w_all = waits["waitall"]
    t_one = capture(run, "wait_to_read", device="cuda")
    w_one = waits["wait_to_read"]
    # timed outside the profiler too, so its overhead does not inflate the numbers
    run("waitall")
    w_all = waits["waitall"]
    run("wait_to_read")
    w_one = waits["wait_to_read"]
    t0 = time.perf_counter()
    run("waitall")
    total = time.perf_counter() - t0
    meta = dict(device=setup.device, virtual=False, experiment="barriers")
    return BarrierResult(w_all, w_one, total, t_all.with_meta(**meta, barrier="synchronize"),
                         t_one.with_meta(**meta, barrier="event"), long_ops, size, "cuda", setup.device, False,
                         ("torch.cuda.synchronize(device)", "event.synchronize() after z"))
