"""Guard rails: predict what a workload costs before running it, and refuse what would not fit.

A reader can drag a slider to a 16384 x 16384 matrix or to ten million ops.  On a laptop that is a
long wait; on Binder (2 GB of RAM) it kills the kernel and the whole notebook with it.  A dashboard
therefore asks a *guard* first.  A guard is any ``callable(values) -> str | None`` over the
controls' values: ``None`` lets the run go ahead, a string is the refusal the dashboard shows
.

The estimates are deliberately simple and pessimistic, and they are pure functions so tests can
check them with exact numbers:

* a float32 ``n x n`` matrix holds ``n**2 * 4`` bytes; ``k`` of them alive at once hold ``k`` times
  that (:func:`tensor_bytes`, :func:`workload_bytes`);
* every engine op leaves a record (the op, its trace row, Python objects) of about
  :data:`BYTES_PER_OP` bytes (:func:`ops_bytes`);
* a workload may use at most ``fraction`` of the memory that is free now *to this process*
  (:func:`available_memory`: the container's cgroup limit minus its usage where there is one, as
  :func:`d2l_async.devices.machine` reads it; a Binder pod's 2 GB, not the host's 200);
* ``k`` products of ``n x n`` matrices cost ``2 k n**3`` floating-point operations; the rate is that
  of the same kernel (a torch float32 product) at the requested size, measured now
  (:func:`matmul_rate`; sizes above :data:`CALIBRATION_MAX` are timed at that size and scaled by
  ``n**3``), so a slider cannot start a run predicted to take minutes (:func:`time_guard`).

An estimate up front can only be a first filter: load changes while a run goes.  The dashboard
therefore also gives every run a deadline that stops it *while it runs*
(:func:`d2l_async.experiments.deadline.checkpoint`).

This module imports neither ipywidgets nor plotly.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from typing import Any, Callable, Mapping

from .._args import number

__all__ = [
    "BYTES_PER_OP",
    "DEFAULT_FRACTION",
    "Guard",
    "available_memory",
    "tensor_bytes",
    "workload_bytes",
    "ops_bytes",
    "check_bytes",
    "memory_guard",
    "ops_guard",
    "all_guards",
    "format_bytes",
    "matmul_flops",
    "cpu_flops",
    "matmul_rate",
    "matmul_seconds",
    "time_guard",
    "CALIBRATION_MAX",
]

#: Guard type: control values -> refusal message, or ``None`` to allow the run.
Guard = Callable[[Mapping[str, Any]], "str | None"]

#: Pessimistic bytes kept per engine op (op record + trace row + Python objects).
BYTES_PER_OP = 2_000
#: Share of the free memory a dashboard workload may use.
DEFAULT_FRACTION = 0.5


def available_memory() -> int | None:
    """Bytes of memory this process can still get: the container's limit minus its usage where
    there is one, else ``MemAvailable`` (:func:`d2l_async._machine.mem_available`).

    Returns ``None`` where nothing is readable (not Linux); guards then allow the run.
    """
    from d2l_async._machine import mem_available

    free, _ = mem_available("/")
    return free or None


def _memory_words(available: int) -> str:
    from d2l_async._machine import mem_available

    _, limit = mem_available("/")
    where = f" (container limit {format_bytes(limit)})" if limit else ""
    return f"{format_bytes(available)} of memory free now{where}"


def _positive_int(name: str, value: Any) -> int:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value != int(value) or value < 0):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def tensor_bytes(size: int, *, dtype_bytes: int = 4) -> int:
    """Bytes of one ``size x size`` matrix (float32 by default)."""
    size = _positive_int("size", size)
    return size * size * _positive_int("dtype_bytes", dtype_bytes)


def workload_bytes(size: int, live_tensors: int, *, dtype_bytes: int = 4) -> int:
    """Bytes of ``live_tensors`` matrices of ``size x size`` alive at the same time."""
    return tensor_bytes(size, dtype_bytes=dtype_bytes) * _positive_int("live_tensors", live_tensors)


def ops_bytes(n_ops: int, *, per_op: int = BYTES_PER_OP) -> int:
    """Bytes the bookkeeping of ``n_ops`` recorded engine ops takes (see :data:`BYTES_PER_OP`)."""
    return _positive_int("n_ops", n_ops) * _positive_int("per_op", per_op)


def format_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_bytes(
    need: int, *, what: str, available: int | None = None, fraction: float = DEFAULT_FRACTION
) -> str | None:
    """A refusal message when ``need`` bytes exceed ``fraction`` of ``available``, else ``None``.

    Args:
        need: predicted bytes.
        what: the workload in words, for the message (``"size=8192 x 3 live tensors"``).
        available: free bytes; ``None`` reads :func:`available_memory` now.
        fraction: the share of the free memory the workload may take.
    """
    number("need", need, minimum=0)
    number("fraction", fraction, above=0, maximum=1)
    if available is None:
        available = available_memory()
    else:
        number("available", available, minimum=0)
    if available is None:  # unknown machine: do not refuse on a guess
        return None
    budget = int(available * fraction)
    if need > budget:
        return (
            f"{what} needs about {format_bytes(need)}, more than {fraction:.0%} of the "
            f"{_memory_words(available)}; choose a smaller value."
        )
    return None


def memory_guard(
    *,
    size: str = "size",
    live_tensors: int | str = 3,
    dtype_bytes: int = 4,
    fraction: float = DEFAULT_FRACTION,
    available: Callable[[], int | None] = available_memory,
) -> Guard:
    """A guard refusing ``size x size`` float matrices that would not fit in the free memory.

    Args:
        size: the control (keyword) that holds the matrix side.
        live_tensors: how many such matrices are alive at once: a number, or the name of a control
            that holds it.
        dtype_bytes: bytes per element (4: float32).
        fraction: share of the free memory allowed.
        available: where the free memory is read (tests pass a constant).

    Returns:
        A :data:`Guard`: ``values -> None`` when the matrices fit (or the control is absent, or the free memory is
        unknown), else the refusal message of :func:`check_bytes`.
    """

    def guard(values: Mapping[str, Any]) -> str | None:
        if size not in values:
            return None
        live = values.get(live_tensors, 1) if isinstance(live_tensors, str) else live_tensors
        need = workload_bytes(values[size], live, dtype_bytes=dtype_bytes)
        free = available()
        if free is None:  # unknown machine: do not refuse on a guess
            return None
        what = f"{size}={values[size]} ({values[size]}\u00b2 x {dtype_bytes} B x {live} live tensors)"
        return check_bytes(need, what=what, available=free, fraction=fraction)

    return guard


def ops_guard(
    *,
    n_ops: str = "n_ops",
    per_op: int = BYTES_PER_OP,
    fraction: float = DEFAULT_FRACTION,
    available: Callable[[], int | None] = available_memory,
) -> Guard:
    """A guard refusing op counts whose bookkeeping would not fit (10**7 ops on a 2 GB Binder)."""

    def guard(values: Mapping[str, Any]) -> str | None:
        if n_ops not in values:
            return None
        need = ops_bytes(values[n_ops], per_op=per_op)
        free = available()
        if free is None:
            return None
        return check_bytes(need, what=f"{n_ops}={values[n_ops]:,}", available=free, fraction=fraction)

    return guard


def all_guards(*guards: Guard) -> Guard:
    """One guard that asks each in turn and returns the first refusal."""

    def guard(values: Mapping[str, Any]) -> str | None:
        for g in guards:
            message = g(values)
            if message:
                return message
        return None

    return guard


def matmul_flops(size: int, count: int = 1) -> int:
    """Floating-point operations of ``count`` products of two ``size x size`` matrices."""
    size = _positive_int("size", size)
    return 2 * size**3 * _positive_int("count", count)


#: Largest matrix side timed by :func:`matmul_rate`; larger sizes are scaled from it by ``n**3``.
CALIBRATION_MAX = 512
#: How long a measured rate is reused (seconds): the load on the machine changes.
CALIBRATION_TTL_S = 20.0
_rates: dict[int, tuple[float, float]] = {}
_rates_lock = threading.Lock()


def matmul_rate(size: int = 256, *, repeat: int = 3) -> float:
    """FLOP/s of the kernel the experiments run — a torch float32 ``size x size`` product, on this
    machine under its current load — timed now at ``min(size, CALIBRATION_MAX)`` (median of
    ``repeat`` after a warm-up) and reused for :data:`CALIBRATION_TTL_S` seconds.
    """
    n = max(8, min(_positive_int("size", size), CALIBRATION_MAX))
    with _rates_lock:
        hit = _rates.get(n)
        if hit is not None and time.monotonic() - hit[1] < CALIBRATION_TTL_S:
            return hit[0]
    import torch

    a = torch.rand(n, n)
    a @ a  # warm-up: allocator, BLAS threads
    times = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        a @ a
        times.append(time.perf_counter() - t0)
    rate = matmul_flops(n) / max(statistics.median(times), 1e-9)
    with _rates_lock:
        hit = _rates.get(n)
        if hit is not None and time.monotonic() - hit[1] < CALIBRATION_TTL_S:
            return hit[0]  # another caller measured meanwhile: one answer per window
        _rates[n] = (rate, time.monotonic())
    return rate


def matmul_seconds(size: int, count: int = 1) -> float:
    """Predicted seconds of ``count`` torch float32 products of ``size x size`` here, now."""
    return matmul_flops(size, count) / matmul_rate(size)


def cpu_flops() -> float:
    """This machine's float32 matrix-product rate (FLOP/s) at 256 x 256 (:func:`matmul_rate`)."""
    return matmul_rate(256)


def time_guard(estimate: Callable[[Mapping[str, Any]], float], *, limit_s: float = 30.0) -> Guard:
    """A guard refusing values whose predicted run time (``estimate(values)`` seconds) exceeds ``limit_s``."""
    if limit_s <= 0:
        raise ValueError(f"limit_s must be positive, got {limit_s!r}")

    def guard(values: Mapping[str, Any]) -> str | None:
        seconds = float(estimate(values))
        if seconds > limit_s:
            return (f"this workload would take about {seconds:.0f} s here (more than {limit_s:.0f} s); "
                    "choose smaller values.")
        return None

    return guard
