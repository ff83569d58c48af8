"""Timing a GPU's launches, round trip and kernels: the measuring half of :mod:`~d2l_async.experiments.sizing`.

Three numbers come from the CPU's clock and one kind from the GPU's:

* **a launch**: the CPU's time per call of 50 queued calls of an op with a short kernel (nothing waits, and
  50 stay far under CUDA's cap of about 1024 pending launches), the median of five rounds;
* **a round trip**: a launch then ``torch.cuda.synchronize``, timed whole, less the launch: the launch latency,
  the tiny kernel and the return to the CPU;
* **a kernel**: CUDA events around 2-10 launches queued behind ``torch.cuda._sleep`` -- the GPU spins while the
  CPU queues them, then runs them back to back, so the events time the kernels, not the launches between
  them (without ``_sleep`` a kernel shorter than its launch would read as the launch).

:func:`probe` times one op at growing sizes and stops at the first that reaches a target, or before a size
that would not fit: a slow GPU is never asked for an 8192×8192 product it does not need.  Only this module
needs a GPU; every function takes the device and the ops from its caller.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

__all__ = ["FLOAT_BYTES", "Spinner", "cuda_device", "measure", "median_time", "probe"]

FLOAT_BYTES = 4


def cuda_device(device: Any) -> Any:
    """``device`` as a ``torch.device`` of a CUDA GPU this machine has, else a ValueError naming it."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"device must name a CUDA device ('cuda:0', 0), got {device!r}") from exc
    if dev.type != "cuda":
        raise ValueError(f"device must name a CUDA device ('cuda:0', 0), got {device!r}: sizing is for a GPU; "
                         "the CPU engine keeps its own workloads")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = dev.index if dev.index is not None else 0
    if index >= count:
        raise ValueError(f"device={device!r}: this machine has {count} CUDA device(s) (torch.cuda.device_count())")
    return torch.device("cuda", index)


def median_time(fn: Callable[[], Any], sync: Callable[[], None], *, calls: int, rounds: int = 5) -> float:
    """Median over ``rounds`` of the CPU's seconds per call of ``fn``, ``calls`` calls per round, each round
    started on an idle GPU."""
    per = []
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per.append((time.perf_counter() - t0) / calls)
    sync()
    return statistics.median(per)


class Spinner:
    """Keeps the current GPU busy for a while (``torch.cuda._sleep``), so the launches after it queue up.

    ``spins`` is False where this torch has no ``_sleep``: calling it then does nothing.
    """

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.spins = callable(getattr(torch.cuda, "_sleep", None))
        self.per_s = 0.0
        if self.spins:  # clock cycles per second: time a million of them with events
            cycles = 1_000_000
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(1000)
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            self.per_s = cycles / max(start.elapsed_time(end) / 1e3, 1e-6)

    def __call__(self, seconds: float) -> None:
        if self.spins:
            self.torch.cuda._sleep(max(1000, int(self.per_s * seconds)))


def probe(make: Callable[[int], Callable[[], Any]], sizes: tuple[int, ...], nbytes: Callable[[int], int],
          target: float, free: int, spin: Any, sync: Callable[[], None], launch: float) -> dict[int, float]:
    """Kernel seconds of ``make(n)()`` at each size ``n`` in turn, until one reaches ``target`` seconds or the
    next size's ``nbytes`` (twice over) would not fit in half of ``free``.

    ``spin(seconds)`` keeps the GPU busy while the CPU queues the launches (each ``launch`` seconds).

    Raises:
        ValueError: not even the smallest size fits.
    """
    import torch

    out: dict[int, float] = {}
    guess = 0.0
    for n in sizes:
        if nbytes(n) * 2 > free // 2:
            break
        op = make(n)
        op()  # warm-up at this size (kernel selection, the allocator)
        k = max(2, min(10, int(20e-3 / guess))) if guess > 0 else 10
        sync()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        spin(3 * k * launch + 1e-3)  # the GPU spins while the CPU queues the k launches
        start.record()
        for _ in range(k):
            op()
        end.record()
        end.synchronize()
        out[n] = start.elapsed_time(end) / 1e3 / k
        del op
        if out[n] >= target:
            break
        guess = out[n] * 8  # the next size's kernel: at most 8× longer (a side doubled, cubed)
    if not out:
        raise ValueError(f"not even the smallest probe ({sizes[0]:,}) fits in the GPU's free memory ({free:,} bytes)")
    return out


def measure(dev: Any, *, side_probes: tuple[int, ...], numel_probes: tuple[int, ...],
            targets: Callable[[float, float, float], tuple[float, float]]) -> dict[str, Any]:
    """A GPU's launches, round trip and kernels (float32 ``a @ a`` and ``v + 1``), each probe series stopped at
    the kernel time ``targets(launch_s, matmul_launch_s, round_trip_s)`` asks of a product and an addition.

    Returns:
        ``device`` (its name), ``launch_s``, ``matmul_launch_s``, ``round_trip_s``, ``matmul_s`` and ``add_s``
        (``{size: seconds}``), ``free_bytes`` and ``spins`` (whether the kernels were queued behind a spin).
    """
    import torch

    sync = lambda: torch.cuda.synchronize(dev)  # noqa: E731
    x = torch.ones(1, device=dev)
    small = torch.ones(256, 256, device=dev)
    for _ in range(3):  # warm-up: the context, kernel selection, cuBLAS's handle, the allocator
        x + 1
        small @ small
    sync()
    launch = median_time(lambda: x + 1, sync, calls=50)
    mm_launch = median_time(lambda: small @ small, sync, calls=50)

    def trip() -> None:
        x + 1
        sync()

    round_trip = max(0.0, median_time(trip, sync, calls=1, rounds=20) - launch)
    spin = Spinner()
    free, _ = torch.cuda.mem_get_info(dev)
    mm_target, add_target = targets(launch, mm_launch, round_trip)

    def product(n: int) -> Callable[[], Any]:
        a = torch.randn(n, n, device=dev)
        return lambda: a @ a

    def addition(n: int) -> Callable[[], Any]:
        v = torch.ones(n, device=dev)
        return lambda: v + 1

    most = max(launch, mm_launch)
    return {"device": torch.cuda.get_device_name(dev), "launch_s": launch, "matmul_launch_s": mm_launch,
            "round_trip_s": round_trip, "free_bytes": int(free), "spins": spin.spins,
            "matmul_s": probe(product, side_probes, lambda n: 3 * n * n * FLOAT_BYTES, mm_target, free, spin, sync, most),
            "add_s": probe(addition, numel_probes, lambda n: 2 * n * FLOAT_BYTES, add_target, free, spin, sync, most)}
