"""Barriers: ``waitall()`` drains everything, ``wait_to_read()`` waits for one array (D2L §13.2.2).

The set-up: long, unrelated work runs on one device while a small result ``z`` is computed on
another.  The frontend needs ``z``'s value to issue its next piece of work (as much again, on
``z``'s device).  ``waitall()`` makes it wait for *all* queued work first, so the two pieces run one
after the other; ``z.wait_to_read()`` returns as soon as ``z`` is ready, the follow-up runs while the
long work keeps going, and the whole program ends sooner — the timeline shows it.

On CUDA the same two barriers are ``torch.cuda.synchronize(device)`` and waiting on one CUDA event
recorded after ``z`` on its own stream (``event.synchronize()``).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from d2l_async import config

from ._common import Setup, positive_int, resolve_backend, stable_matrix

__all__ = ["BarrierResult", "run_barriers"]


@dataclass(frozen=True)
class BarrierResult:
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

    @property
    def saved(self) -> float:
        """Seconds of frontend time ``wait_to_read`` saved over ``waitall``."""
        return self.waitall_wait - self.wait_to_read_wait


def run_barriers(
    *, long_ops: int | None = None, size: int | None = None, follow_ops: int | None = None,
    repeat: int | None = None, backend: str = "auto",
) -> BarrierResult:
    """Queue long unrelated work, compute a small ``z``, wait with each barrier, then use ``z``.

    Args:
        long_ops: unrelated matrix products; default 10 (quick mode 6).
        size: their matrix side; default 800 (quick mode 400).
        follow_ops: follow-up products of the same size, issued after the barrier on ``z``'s
            device; default ``long_ops``.
        repeat: runs of each variant; the medians are reported, the last run's traces kept;
            default 3 (quick mode 2).
        backend: ``"auto"``, ``"engine"`` (two virtual devices) or ``"cuda"`` (two streams).

    Raises:
        ValueError: bad counts or an unavailable backend.
    """
    long_ops = positive_int("long_ops", long_ops if long_ops is not None else config.scale(10, 6), maximum=10_000)
    size = positive_int("size", size if size is not None else config.scale(800, 400), maximum=8192)
    follow_ops = positive_int("follow_ops", follow_ops if follow_ops is not None else long_ops, maximum=10_000)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(3, 2), maximum=1000)
    setup = resolve_backend(backend, n_devices=2)
    if setup.backend == "cuda":
        return _cuda(long_ops, size, follow_ops, repeat, setup)
    return _engine(long_ops, size, follow_ops, repeat, setup)


def _medians(runs: list[tuple[float, float, Any]]) -> tuple[float, float, Any]:
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[-1][2])


def _engine(long_ops: int, size: int, follow_ops: int, repeat: int, setup: Setup) -> BarrierResult:
    import torch

    from d2l_async.engine import ThreadedEngine

    def run(eng: Any, barrier: str) -> tuple[float, float, Any]:
        eng.reset_trace()
        t_start = time.perf_counter()
        a = eng.array(torch.ones(size, size), device="cpu:1", name="a")
        for _ in range(long_ops):  # unrelated work on the other device
            a = a @ m
        x = eng.array(torch.ones(2, 2), device="cpu:0", name="x")
        z = x * 2 + 1
        t0 = time.perf_counter()
        if barrier == "waitall":
            eng.waitall()
        else:
            z.wait_to_read()
        waited = time.perf_counter() - t0
        c = eng.array(torch.full((size, size), float(z.asnumpy().mean())), device="cpu:0", name="c")
        for _ in range(follow_ops):  # follow-up work that needed z's value
            c = c @ m0
        eng.waitall()
        total = time.perf_counter() - t_start
        return waited, total, eng.trace()

    with ThreadedEngine(workers=1, devices=("cpu:0", "cpu:1")) as eng:
        m = eng.array(stable_matrix(size), device="cpu:1", name="m")
        m0 = eng.array(stable_matrix(size, seed=1), device="cpu:0", name="m0")
        run(eng, "waitall")  # warm-up
        runs: dict[str, list] = {"waitall": [], "wait_to_read": []}
        for _ in range(repeat):  # interleaved, so load on the machine hits both alike
            for barrier in runs:
                runs[barrier].append(run(eng, barrier))
        w_all, tot_all, t_all = _medians(runs["waitall"])
        w_one, tot_one, t_one = _medians(runs["wait_to_read"])
    meta = dict(device=setup.device, virtual=True, experiment="barriers")
    return BarrierResult(w_all, w_one, tot_all, tot_one, t_all.with_meta(**meta, barrier="waitall"),
                         t_one.with_meta(**meta, barrier="wait_to_read"), long_ops, size, follow_ops, "engine",
                         setup.device, True, ("waitall()", "z.wait_to_read()"))


def _cuda(long_ops: int, size: int, follow_ops: int, repeat: int, setup: Setup) -> BarrierResult:
    import torch

    from d2l_async.capture import capture

    dev = torch.device("cuda:0")
    long_stream, small_stream = torch.cuda.Stream(dev), torch.cuda.Stream(dev)
    out: dict[str, tuple[float, float]] = {}
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
        with torch.cuda.stream(small_stream):
            c = torch.full((size, size), float(z.mean()), device=dev)  # needs z's value (ready)
            for _ in range(follow_ops):
                c = c @ m
        torch.cuda.synchronize(dev)
        out[barrier] = (waited, time.perf_counter() - t_start)

    run("waitall")  # warm-up
    t_all = capture(run, "waitall", device="cuda")
    t_one = capture(run, "wait_to_read", device="cuda")
    runs: dict[str, list] = {"waitall": [], "wait_to_read": []}
    for _ in range(repeat):  # timed outside the profiler, so its overhead does not inflate the numbers
        for barrier in runs:
            run(barrier)
            runs[barrier].append((*out[barrier], None))
    w_all, tot_all, _ = _medians(runs["waitall"])
    w_one, tot_one, _ = _medians(runs["wait_to_read"])
    meta = dict(device=setup.device, virtual=False, experiment="barriers")
    return BarrierResult(w_all, w_one, tot_all, tot_one, t_all.with_meta(**meta, barrier="synchronize"),
                         t_one.with_meta(**meta, barrier="event"), long_ops, size, follow_ops, "cuda",
                         setup.device, False, ("torch.cuda.synchronize(device)", "event.synchronize() after z"))
