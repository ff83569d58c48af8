"""What every experiment shares: choosing a backend, naming the device honestly, checking arguments.

An experiment runs either on the CPU dependency engine (``backend="engine"``: worker threads that
play the role of devices, always available) or on real CUDA streams (``backend="cuda"``, only where
``torch.cuda.is_available()``).  ``backend="auto"`` picks CUDA when present.  Every result carries
``device`` (a sentence a reader can trust) and ``virtual`` (True for engine threads), so a CPU
number is never shown as a GPU number.

A run's time limit is :mod:`d2l_async.experiments.deadline`'s: the loops here call its
:func:`~d2l_async.experiments.deadline.checkpoint` between pushes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .. import config
from .._args import integer
from ..benchmark import no_collector_pauses
from .deadline import checkpoint

__all__ = ["BACKENDS", "Setup", "resolve_backend", "positive_int", "choice", "time_runs", "time_interleaved", "make_measurement",
           "engine_label", "backend_work", "launches"]

#: The backends an experiment accepts (``"auto"`` resolves to one of the other two).
BACKENDS = ("auto", "engine", "cuda")


@dataclass(frozen=True)
class Setup:
    """Where an experiment runs.

    Attributes:
        backend: ``"engine"`` or ``"cuda"``.
        device: one line a reader can trust, e.g. ``"CPU engine, 2 virtual devices (threads)"`` or
            ``"NVIDIA H100 80GB HBM3 (cuda:0)"``.
        virtual: True when the devices are engine threads rather than hardware.
    """

    backend: str
    device: str
    virtual: bool


def engine_label(n_devices: int, workers: int = 1) -> str:
    """The honest description of an engine run with ``n_devices`` virtual devices, and how many CPUs
    their threads really had (:func:`d2l_async._machine.read_machine`: affinity and cgroup quota).

    Returns:
        A one-line label; it names the naive engine when ``D2L_ASYNC_ENGINE=naive``.
    """
    from d2l_async._machine import read_machine

    dev = "virtual device" if n_devices == 1 else "virtual devices"
    thr = "" if workers == 1 else f", {workers} workers each"
    usable = read_machine("/", sample_s=0).usable_cpus
    cpus = f"{usable:g} usable CPU{'' if usable == 1 else 's'}"
    if config.engine_kind() == "naive":  # engine.make_engine made a NaiveEngine: no threads at all
        return f"CPU naive engine (D2L_ASYNC_ENGINE=naive: each op runs at push time), {n_devices} {dev} on {cpus}"
    return f"CPU engine, {n_devices} {dev} (threads{thr}) on {cpus}"


def resolve_backend(backend: str, *, n_devices: int = 1, workers: int = 1, min_gpus: int = 1) -> Setup:
    """Check ``backend`` and describe where the experiment will run.

    Args:
        backend: ``"auto"``, ``"engine"`` or ``"cuda"``.
        n_devices: virtual devices the engine run will use (for the label).
        workers: worker threads per virtual device (for the label).
        min_gpus: GPUs the CUDA variant needs; ``"auto"`` falls back to the engine below that.

    Returns:
        The frozen :class:`Setup`: ``backend`` (``"cuda"`` or ``"engine"``, what ``"auto"`` resolved to), the
        ``device`` label (the GPU names and ``cuda:i`` used, or the engine's virtual-device label) and ``virtual``
        (``True`` for the engine).

    Raises:
        ValueError: unknown backend, or ``"cuda"`` without (enough) CUDA devices.
    """
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: use one of {BACKENDS}")
    gpus = _cuda_count()
    if backend == "cuda":
        if gpus == 0:
            raise ValueError("backend='cuda' but torch.cuda.is_available() is False; use backend='engine' "
                             "(the CPU engine) or 'auto'")
        if gpus < min_gpus:
            raise ValueError(f"backend='cuda' needs {min_gpus} GPUs for this experiment, found {gpus}; "
                             "use backend='engine' (virtual devices) or 'auto'")
    if backend == "cuda" or (backend == "auto" and gpus >= min_gpus):
        import torch

        names = sorted({torch.cuda.get_device_name(i) for i in range(min(gpus, max(min_gpus, 1)))})
        used = ", ".join(f"cuda:{i}" for i in range(max(min_gpus, 1)))
        return Setup("cuda", f"{' + '.join(names)} ({used})", False)
    return Setup("engine", engine_label(n_devices, workers), True)


def _cuda_count() -> int:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def positive_int(name: str, value: Any, *, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as an int ``>= minimum`` (and ``<= maximum``): :func:`d2l_async._args.integer` with a
    lower bound of 1 unless told otherwise."""
    return integer(name, value, minimum=minimum, maximum=maximum)


def positive_ints(name: str, values: Iterable[Any], *, minimum: int = 1, maximum: int | None = None) -> tuple[int, ...]:
    """A non-empty tuple of :func:`positive_int` values."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a sequence of integers, got {values!r}")
    out = tuple(positive_int(name, v, minimum=minimum, maximum=maximum) for v in values)
    if not out:
        raise ValueError(f"{name} must not be empty")
    return out


def choice(name: str, value: Any, options: Sequence[Any]) -> Any:
    """``value`` if it is one of ``options``, else a ValueError listing them."""
    if value not in options:
        raise ValueError(f"{name}={value!r}: use one of {tuple(options)}")
    return value


def time_runs(fn: Callable[[], Any], *, warmup: int, repeat: int) -> tuple[float, ...]:
    """Wall-clock seconds of ``repeat`` calls of ``fn`` after ``warmup`` untimed ones.

    ``fn`` decides what is synchronized: the experiments time naive (the book's ``Benchmark`` without
    a final barrier) and synchronized variants with the same clock, so the difference is the lesson.

    Each timed call runs with Python's garbage collector disabled during it
    (:func:`no_collector_pauses`): one full collection pauses every thread for 0.2-0.4 s once a
    notebook holds many objects, longer than a whole quick-mode loop.
    """
    since = time.perf_counter()
    for i in range(warmup):
        fn()
        checkpoint(i + 1, warmup + repeat, since=since)
    out = []
    for i in range(repeat):
        with no_collector_pauses():
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        checkpoint(warmup + i + 1, warmup + repeat, since=since)
    return tuple(out)


def time_interleaved(fns: Sequence[Callable[[], Any]], *, warmup: int, repeat: int) -> tuple[tuple[float, ...], ...]:
    """:func:`time_runs` of several functions in rounds (``fns[0]``, ``fns[1]``, ..., then again): the
    ``i``-th runs of all of them are moments apart, so a change of the machine's load hits every one
    alike and run ``i`` of one pairs with run ``i`` of another (:func:`d2l_async.verdict.compare_paired`).

    Returns:
        One tuple of ``repeat`` wall-clock seconds per function, in the order of ``fns``.
    """
    fns = list(fns)
    since = time.perf_counter()
    for i in range(warmup):
        for fn in fns:
            fn()
        checkpoint(i + 1, warmup + repeat, since=since)
    out: list[list[float]] = [[] for _ in fns]
    for i in range(repeat):
        for k, fn in enumerate(fns):
            with no_collector_pauses():
                t0 = time.perf_counter()
                fn()
                out[k].append(time.perf_counter() - t0)
        checkpoint(warmup + i + 1, warmup + repeat, since=since)
    return tuple(tuple(x) for x in out)


def make_measurement(label: str, raw: Sequence[float], *, device: str = "", synchronized: bool = True):
    """A :class:`d2l_async.benchmark.Measurement` holding ``raw`` seconds measured on ``device``."""
    from d2l_async.benchmark import Measurement

    return Measurement(tuple(float(r) for r in raw), label=label, device=device, synchronized=synchronized)


def stable_matrix(size: int, *, seed: int = 0):
    """A ``size``×``size`` torch matrix with positive entries and rows summing to 1.

    Long chains ``a = a @ m`` stay bounded and never reach denormal numbers (which are slow on
    CPUs and would distort every timing); the entries of ``a`` keep their scale.
    """
    import torch

    m = torch.rand(size, size, generator=torch.Generator().manual_seed(seed)) + 0.5
    return m / m.sum(dim=1, keepdim=True)


def backend_work(trace: Any) -> Any:
    """The work a trace's backend did: events of :data:`~d2l_async.trace.BACKEND_KINDS` (engine ops,
    kernels, copies, memsets) on its backend lanes (a frontend's ``cpu_op`` is not device work)."""
    from d2l_async.trace import BACKEND_KINDS

    return trace.where(kind=BACKEND_KINDS, lane=[lane.name for lane in trace.backend_lanes])


def launches(trace: Any) -> Any:
    """The frontend's pushes in a trace: every call that put work on a queue (:func:`~d2l_async.trace.launch_calls`),
    a copy into pageable memory included, which the reader files as a wait."""
    from d2l_async.trace import launch_calls

    return trace.filter(launch_calls(trace))
