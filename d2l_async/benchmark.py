"""Timing that tells the truth about asynchronous work.

``Benchmark`` is a drop-in for D2L's ``d2l.Benchmark``::

    with Benchmark("numpy"):
        ...                      # prints "numpy: 0.1234 sec" on exit, like the book

The book's version reads the clock on entry and exit and nothing else.  With asynchronous backends
that measures how long the *frontend* took to queue work, not how long the work took: queued work
from an earlier cell is billed to this block, and work queued here finishes after the print.  Ours
synchronizes on entry **and** exit — every CUDA device in use (``torch.cuda.synchronize(device)``)
and every live engine of :mod:`d2l_async.engine` (``waitall``) — so the block is billed for exactly
its own work.  ``Benchmark(..., sync=False)`` keeps the book's naive timing for the lesson.

``measure`` repeats a function in the spirit of ``torch.utils.benchmark``: warm-up runs first (first
calls pay for allocation, kernel selection, thread start-up), then ``repeat`` timed runs, each
synchronized at both ends.  The :class:`Measurement` keeps every raw run; median and IQR are derived
from them, since a median resists the outliers a shared machine produces.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ._args import integer

__all__ = ["Benchmark", "Measurement", "measure", "no_collector_pauses", "wait_all"]

#: The most runs (warm-up or timed) one :func:`measure` call makes.
MAX_RUNS = 1_000_000


@contextlib.contextmanager
def no_collector_pauses() -> Iterator[None]:
    """Keep Python's garbage collector off inside the block, restore it after.

    A timed loop must not pay for garbage made before it: a full collection stops every thread
    (the frontend and the engine's workers) for as long as it walks the heap.  No collection
    first: that alone can take seconds in a notebook on a busy core, and is not needed to keep
    pauses out of the block.

    Yields:
        ``None``: the block runs with the collector disabled; on exit it is enabled again only if it was enabled on
        entry.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Stdout:
    """The sentinel :data:`STDOUT`."""

    def __repr__(self) -> str:
        return "sys.stdout"


#: ``Benchmark``'s default ``file``: whatever ``sys.stdout`` is when the block ends, so
#: ``contextlib.redirect_stdout`` and IPython's ``%%capture`` see the line (binding
#: ``sys.stdout`` at import printed past them).
STDOUT = _Stdout()


def _cuda_devices(device: Any) -> list[Any]:
    """The CUDA devices to synchronize: the given one, or every one this process has used; [] without CUDA.

    A GPU the process never touched has nothing queued, and synchronizing it would create a CUDA
    context there (hundreds of MB of its memory, on every visible GPU), so it is skipped.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return []
    if device is None:
        if not torch.cuda.is_initialized():  # no CUDA work yet in this process: nothing to wait for
            return []
        has_context = getattr(torch._C, "_cuda_hasPrimaryContext", None)
        return [torch.device(f"cuda:{i}") for i in range(torch.cuda.device_count())
                if has_context is None or has_context(i)]
    dev = torch.device(device)
    return [dev] if dev.type == "cuda" else []


def _check_device(device: Any) -> None:
    """Fail early, with the fix, on a device this machine does not have."""
    if device is None:
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"unknown device {device!r}: use 'cpu', 'cuda' or 'cuda:N'") from exc
    if dev.type == "cpu":
        return
    if dev.type != "cuda":
        raise ValueError(f"unsupported device {device!r}: use 'cpu', 'cuda' or 'cuda:N'")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if (dev.index or 0) >= count:
        raise ValueError(
            f"device {device!r} is not available: this machine has {count} CUDA device(s); "
            "use d2l_async.try_gpu() to fall back to the CPU"
        )


def wait_all(device: Any = None) -> None:
    """Wait for all queued work: CUDA devices (all, or ``device``) and every live engine, the blocks
    of ``d2l_async.asynchronous()`` included.  (:func:`d2l_async.synchronize` waits for those blocks
    only; ``torch.cuda.synchronize()`` for one device only.)"""
    torch = sys.modules.get("torch")
    for dev in _cuda_devices(device):
        torch.cuda.synchronize(dev)
    engine = sys.modules.get("d2l_async.engine")  # only if the reader already uses the engine
    if engine is not None:
        engine.waitall_all()


class Benchmark:
    """Time a ``with`` block and print ``"{description}: {seconds:.4f} sec"`` on exit.

    Args:
        description: the label printed before the time (the book's default is ``"Done"``).
        sync: synchronize CUDA devices and engines on entry and exit (default). ``False``
            reproduces the book's naive timing, which only measures the frontend.
        device: synchronize only this device (``"cuda:0"``, a ``torch.device``); default: all.
        file: where to print (default: ``sys.stdout`` as it is when the block ends, so a redirect or
            ``%%capture`` captures it); ``None`` prints nothing.

    Attributes:
        elapsed: seconds measured, set on exit (``None`` before).
    """

    def __init__(self, description: str = "Done", *, sync: bool = True, device: Any = None, file: Any = STDOUT) -> None:
        if not isinstance(description, str):
            raise TypeError(f"description must be a str, got {type(description).__name__}")
        _check_device(device)
        if file is not STDOUT and file is not None and not callable(getattr(file, "write", None)):
            raise TypeError(f"file must be a writable text stream (with .write), such as sys.stdout, got "
                            f"{type(file).__name__} {file!r}")
        self.description = description
        self.sync = bool(sync)
        self.device = device
        self.file = file
        self.elapsed: float | None = None
        self._start = 0.0

    def __enter__(self) -> "Benchmark":
        if self.sync:
            wait_all(self.device)
        # Keep the collector off while timing: one full collection pauses every thread for
        # 0.2-0.4 s in a notebook holding many objects, longer than a quick-mode loop.
        self._paused = contextlib.ExitStack()
        self._paused.enter_context(no_collector_pauses())
        self._start = time.perf_counter()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if self.sync and exc_type is None:
                wait_all(self.device)
            self.elapsed = time.perf_counter() - self._start
        finally:
            paused = getattr(self, "_paused", None)
            if paused is not None:
                paused.close()
        if self.file is not None and exc_type is None:
            out = sys.stdout if self.file is STDOUT else self.file
            print(f"{self.description}: {self.elapsed:.4f} sec", file=out)

    def __repr__(self) -> str:
        t = "not run" if self.elapsed is None else f"{self.elapsed:.4f} sec"
        return f"Benchmark({self.description!r}, sync={self.sync}): {t}"


@dataclass(frozen=True)
class Measurement:
    """Raw timings of repeated runs; summaries are derived.

    Attributes:
        raw: seconds of each timed run, in order.
        label: what was measured.
        device: where it ran (a description; a CPU number is never a GPU number).
        synchronized: whether each run was synchronized at both ends.
    """

    raw: tuple[float, ...]
    label: str = ""
    device: str = ""
    synchronized: bool = True

    def __post_init__(self) -> None:
        if not self.raw:
            raise ValueError("a Measurement needs at least one run")

    @property
    def times(self) -> tuple[float, ...]:
        return self.raw

    @property
    def median(self) -> float:
        return statistics.median(self.raw)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.raw)

    @property
    def iqr(self) -> float:
        """Interquartile range (0 for fewer than two runs)."""
        if len(self.raw) < 2:
            return 0.0
        q = statistics.quantiles(self.raw, n=4, method="inclusive")
        return q[2] - q[0]

    @property
    def min(self) -> float:
        return min(self.raw)

    def __repr__(self) -> str:
        med = self.median
        unit, scale = (("ms", 1e3) if med >= 1e-3 else ("us", 1e6)) if med < 1 else ("s", 1.0)
        label = f"{self.label}: " if self.label else ""
        return (
            f"<Measurement {label}median {med * scale:.3f} {unit}, IQR {self.iqr * scale:.3f} {unit}, "
            f"{len(self.raw)} runs{'' if self.synchronized else ', unsynchronized'}>"
        )


def measure(
    fn: Callable[[], Any],
    *,
    warmup: int = 1,
    repeat: int = 5,
    device: Any = None,
    sync: bool = True,
    label: str = "",
) -> Measurement:
    """Run ``fn`` ``warmup`` times untimed, then ``repeat`` times timed.

    Each timed run is synchronized on entry and exit (unless ``sync=False``), like
    ``torch.utils.benchmark.Timer``, so queued asynchronous work is billed to the run that queued it.

    Returns:
        The frozen :class:`Measurement`: the ``repeat`` timed runs' seconds in order (warm-up runs not included),
        the label (``label`` or ``fn``'s name), this machine's :func:`~d2l_async.devices.describe_machine` line and
        whether the runs were synchronized.

    Raises:
        ValueError: a negative ``warmup``, ``repeat`` < 1, or an unknown device.
        TypeError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"measure(fn): fn must be callable, got {type(fn).__name__}")
    # every timed run is kept (Measurement.raw): a million of them is already ~30 MB of floats
    warmup = integer("warmup", warmup, minimum=0, maximum=MAX_RUNS)
    repeat = integer("repeat", repeat, minimum=1, maximum=MAX_RUNS)
    _check_device(device)
    for _ in range(warmup):
        fn()
    if sync:
        wait_all(device)
    raw = []
    for _ in range(repeat):
        if sync:
            wait_all(device)
        t0 = time.perf_counter()
        fn()
        if sync:
            wait_all(device)
        raw.append(time.perf_counter() - t0)
    from .devices import describe_machine

    return Measurement(tuple(raw), label=label or getattr(fn, "__name__", ""), device=describe_machine(), synchronized=sync)
