"""Workloads sized to the GPU they run on: each CUDA lesson's kernels take a stated multiple of a launch.

The engine's workloads are sized for a CPU.  On a GPU the same kernels are short: a 1000×1000 float32
product is some 2 GFLOP, 30 µs at an H200's 67 TFLOP/s of float32 (less with TF32), and adding 1 to a
million floats moves 8 MB, under 2 µs at its 4.8 TB/s -- about what the CPU spends launching one (5-15 µs
of Python, the dispatcher and ``cudaLaunchKernel``).  Every lesson about a backend that falls behind then
fails for its size, not its reason; on a T4 (8 TFLOP/s float32, 320 GB/s) the same sizes hold, narrowly.
So each CUDA experiment sizes its workload to the GPU it runs on, in two steps:

1. **measure** (:func:`measure_device`, the only part that needs a GPU): the CPU's time to launch one
   ``y = x + 1`` and one ``a @ a``, the round trip of a synchronize after a launch, and the GPU's own time
   for a product at a few sides and for an addition at a few sizes -- each timed with CUDA events around
   launches queued behind a spinning kernel (``torch.cuda._sleep``), so the launches are not what is timed;
   it stops probing once a kernel outlasts the largest target below;
2. **pick** (:func:`size_for_device`, a pure function of those numbers: unit-tested without a GPU): for each
   lesson the smallest size whose kernel takes the stated multiple of what the lesson compares it with,
   the kernel's time between the probes read off a log-log line (beyond the largest probe: a product
   grows with the side cubed, an addition with its size):

   * 01 asynchrony (``"asynchrony"``): 10 × the CPU's launch of a product, so the naive timer sees about a
     tenth of the synchronized time (the claim draws a half; one hand-timed run decides beyond a factor 2);
   * 03 barriers (``"barriers"``): 10 × the launch of a product, so the chain outlasts its launches and the
     wait for ``z`` (a launch latency, and a product it may queue behind);
   * 04 blockers (``"blockers"``): 20 × a conversion, a launch and a round trip (the claim draws a fifth, and
     one number each decides beyond a factor 2);
   * 05's long queue (``"sync_async_queue"``): 5 × the launch of an addition, so the GPU is the slower side
     beyond the factor 2 one traced run decides, and the queue fills;
   * 05's sweep (``"sync_async_sweep first"`` and ``"last"``): the book's one element, then from 3 × a launch
     (past where the ratio peaks: below a launch it rises with the size) to 10 × a launch and a round trip
     (``t2`` then some 90% of an op's synchronous cost), the sizes between evenly spaced in log.

   A size is never past the experiment's maximum (a side of 8192, 2**28 elements) nor past a sixth of the
   GPU's free memory per tensor; where that stops it short, its :class:`SizeChoice` says so (``reached``).

:func:`device_sizes` measures once per process and GPU and keeps the answer; :func:`workload` gives an
experiment's keyword arguments for a backend: the engine's own defaults on the CPU, these on CUDA.  The
experiments size themselves this way when no size is given, and the report does the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from d2l_async._args import instance, number
from d2l_async._words import fmt_time

from . import _gpu_probe

__all__ = ["RULES", "WORKLOADS", "DeviceSizes", "DeviceTimes", "SizeChoice", "device_sizes", "kernel_time",
           "measure_device", "size_for_device", "workload"]

#: What each lesson's kernel is measured against, and the multiple it must reach (see the module docstring).
RULES: dict[str, tuple[str, float]] = {
    "asynchrony": ("the launch of a product", 10.0),
    "barriers": ("the launch of a product", 10.0),
    "blockers": ("a conversion, a launch and a round trip", 20.0),
    "sync_async_queue": ("the launch of an addition", 5.0),
    "sync_async_sweep first": ("the launch of an addition", 3.0),
    "sync_async_sweep last": ("the launch of an addition and a round trip", 10.0),
}
#: The experiments' keyword arguments on the CPU engine, per workload key (empty: the experiment's defaults).
WORKLOADS: dict[str, dict[str, Any]] = {
    "asynchrony": {}, "barriers": {}, "blockers": {}, "sync_async_sweep": {},
    "sync_async_queue": {"numel": 100_000},  # notebook 05's long queue on the engine
}
#: Matrix sides the products are picked from (the experiments accept up to 8192).
SIDES = (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)
#: Tensor sizes the additions are picked from: 1-2-5 steps up to 2·10^8 (the experiments accept 2**28).
NUMELS = tuple(m * 10**e for e in range(3, 9) for m in (1, 2, 5))[:-1]
#: Sides and sizes :func:`measure_device` times, smallest first, until one reaches the largest target.
SIDE_PROBES = (256, 512, 1024, 2048, 4096, 8192)
NUMEL_PROBES = (10**4, 10**5, 10**6, 10**7, 10**8)
#: Sweep points on the GPU: the book's one element and six sizes (quick mode: four), as on the engine.
SWEEP_POINTS, SWEEP_POINTS_QUICK = 7, 5
_FLOAT_BYTES = _gpu_probe.FLOAT_BYTES  # float32
_TENSORS = 6  # a sixth of the free memory per tensor: inputs, outputs and the allocator's spares


def _probes(name: str, value: Any) -> tuple[tuple[int, float], ...]:
    """``{size: seconds}`` or ``((size, seconds), ...)`` as a sorted tuple of pairs, checked."""
    items = value.items() if isinstance(value, Mapping) else value
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise TypeError(f"{name} must map sizes to seconds ({{1024: 4e-5}}), got {type(value).__name__} {value!r}")
    out = []
    for pair in items:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{name} must map sizes to seconds ({{1024: 4e-5}}), got the item {pair!r}")
        size, seconds = pair
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"{name}: each size must be a positive integer, got {size!r}")
        out.append((size, number(f"{name}[{size}]", seconds, above=0.0)))
    if not out:
        raise ValueError(f"{name} must hold at least one measured size, got an empty {type(value).__name__}")
    if len({s for s, _ in out}) != len(out):
        raise ValueError(f"{name} names a size twice: {sorted(s for s, _ in out)}")
    return tuple(sorted(out))


@dataclass(frozen=True)
class DeviceTimes:
    """What the sizing reads: the CPU's launch costs and the GPU's kernel times, measured on one GPU
    (:func:`measure_device`) or given (a test's, or another GPU's numbers).

    Attributes:
        device: the GPU, in words.
        launch_s: the CPU's seconds to launch one ``y = x + 1`` (Python, the dispatcher, the launch call).
        matmul_launch_s: the CPU's seconds to launch one ``a @ a``.
        round_trip_s: seconds a synchronize right after a launch holds the CPU: the launch latency, the
            (tiny) kernel and the return to the CPU.
        matmul_s: ``((side, seconds), ...)``: one float32 ``side``×``side`` product on the GPU.
        add_s: ``((numel, seconds), ...)``: one ``x + 1`` over ``numel`` float32 elements on the GPU.
        free_bytes: the GPU's free memory when measured (None: unknown; no memory limit is applied).
        how: how the numbers were read.
    """

    device: str
    launch_s: float
    matmul_launch_s: float
    round_trip_s: float
    matmul_s: Any
    add_s: Any
    free_bytes: int | None = None
    how: str = "given"

    def __post_init__(self) -> None:
        instance("device", self.device, str, what="str naming the GPU")
        for name in ("launch_s", "matmul_launch_s"):
            number(name, getattr(self, name), above=0.0)
        number("round_trip_s", self.round_trip_s, minimum=0.0)
        object.__setattr__(self, "matmul_s", _probes("matmul_s", self.matmul_s))
        object.__setattr__(self, "add_s", _probes("add_s", self.add_s))
        if self.free_bytes is not None and (isinstance(self.free_bytes, bool) or not isinstance(self.free_bytes, int)
                                            or self.free_bytes < 1):
            raise ValueError(f"free_bytes must be a positive integer or None, got {self.free_bytes!r}")
        instance("how", self.how, str)

    @property
    def conversion_s(self) -> float:
        """What one conversion to a Python value costs the CPU: a launch and a round trip."""
        return self.launch_s + self.round_trip_s

    def to_dict(self) -> dict[str, Any]:
        """The numbers as plain JSON values (sizes as strings: JSON keys)."""
        return {"device": self.device, "launch_s": self.launch_s, "matmul_launch_s": self.matmul_launch_s,
                "round_trip_s": self.round_trip_s, "matmul_s": {str(n): s for n, s in self.matmul_s},
                "add_s": {str(n): s for n, s in self.add_s}, "free_bytes": self.free_bytes, "how": self.how}


@dataclass(frozen=True)
class SizeChoice:
    """One lesson's size and the numbers that chose it.

    Attributes:
        key: the rule (:data:`RULES`).
        size: the side of a product, or the elements of an addition.
        kernel_s: the kernel's time at that size (measured, or read off the probes' line).
        needed_s: the time the rule asks for: ``multiple`` × ``against_s``.
        against_s: what the kernel is compared with (a launch, a conversion, ...), in seconds.
        multiple: the rule's multiple.
        reached: False when the experiment's maximum or the GPU's memory stopped the size short of it.
    """

    key: str
    size: int
    kernel_s: float
    needed_s: float
    against_s: float
    multiple: float
    reached: bool

    def sentence(self) -> str:
        """``"2048: 310 µs a kernel, 39× the launch of a product (8 µs; the rule asks 10×)"``."""
        what, _ = RULES[self.key]
        short = "" if self.reached else ", short of it: the largest size allowed"
        return (f"{self.size:,}: {fmt_time(self.kernel_s)} a kernel, {self.kernel_s / self.against_s:.0f}× {what} "
                f"({fmt_time(self.against_s)}; the rule asks {self.multiple:g}×{short})")


@dataclass(frozen=True)
class DeviceSizes:
    """The workloads of the CUDA lessons on one GPU, with the numbers that chose them.

    Attributes:
        asynchrony, barriers, blockers: the products' side in experiments 01, 03 and 04.
        queue_numel: the elements of notebook 05's long queue.
        sweep_numels, sweep_numels_quick: the sizes of notebook 05's sweep (default and quick mode).
        times: the :class:`DeviceTimes` they were picked from.
        choices: one :class:`SizeChoice` per rule (the sweep's first and last size each have one).
    """

    asynchrony: int
    barriers: int
    blockers: int
    queue_numel: int
    sweep_numels: tuple[int, ...]
    sweep_numels_quick: tuple[int, ...]
    times: DeviceTimes
    choices: tuple[SizeChoice, ...] = field(default=())

    def kwargs(self, key: str, *, quick: bool = False) -> dict[str, Any]:
        """The keyword arguments that size experiment ``key`` (:data:`WORKLOADS`'s keys) on this GPU."""
        _workload_key(key)
        if key == "sync_async_sweep":
            return {"numels": self.sweep_numels_quick if quick else self.sweep_numels}
        if key == "sync_async_queue":
            return {"numel": self.queue_numel}
        return {"size": getattr(self, key)}

    @property
    def reached(self) -> bool:
        """Every rule's multiple was reached."""
        return all(c.reached for c in self.choices)

    def sentence(self) -> str:
        """One line: the GPU, its launch and round trip, and each lesson's size with its kernel time."""
        t = self.times
        return (f"sized for {t.device} (launch {fmt_time(t.launch_s)}, a product's launch "
                f"{fmt_time(t.matmul_launch_s)}, round trip {fmt_time(t.round_trip_s)}): "
                + "; ".join(f"{c.key} {c.sentence()}" for c in self.choices))

    def to_dict(self) -> dict[str, Any]:
        """Sizes, rules and measured times as plain JSON values (for the report and gpu_numbers.json)."""
        return {"asynchrony": self.asynchrony, "barriers": self.barriers, "blockers": self.blockers,
                "queue_numel": self.queue_numel, "sweep_numels": list(self.sweep_numels),
                "sweep_numels_quick": list(self.sweep_numels_quick), "times": self.times.to_dict(),
                "choices": [{"key": c.key, "size": c.size, "kernel_s": c.kernel_s, "needed_s": c.needed_s,
                             "against_s": c.against_s, "multiple": c.multiple, "reached": c.reached}
                            for c in self.choices]}


def kernel_time(probes: Any, size: int, *, power: float) -> float:
    """A kernel's seconds at ``size``, read off measured ``(size, seconds)`` probes.

    Between two probes: the straight line through them on log-log axes.  Below the smallest: the
    smallest's time (a kernel never gets shorter than the GPU's fixed cost of starting one).  Beyond
    the largest: its time grown as ``(size / largest) ** power`` (3 for a product's side, 1 for an
    elementwise op's elements), never less than the line's own slope would give.

    Returns:
        The estimated seconds.

    Raises:
        ValueError: no probes, a non-positive size or power.
    """
    pts = _probes("probes", probes)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive integer, got {size!r}")
    power = number("power", power, above=0.0)
    if size <= pts[0][0]:
        return pts[0][1]
    for (n0, t0), (n1, t1) in zip(pts, pts[1:]):
        if size <= n1:
            slope = math.log(t1 / t0) / math.log(n1 / n0)
            return t0 * (size / n0) ** slope
    n_last, t_last = pts[-1]
    return t_last * (size / n_last) ** power


def _smallest(key: str, candidates: tuple[int, ...], probes: Any, power: float, against_s: float,
              limit: int) -> SizeChoice:
    """The smallest candidate up to ``limit`` whose kernel reaches the rule, else the largest allowed."""
    _, multiple = RULES[key]
    needed = multiple * against_s
    allowed = [n for n in candidates if n <= limit] or [min(candidates)]
    for n in allowed:
        k = kernel_time(probes, n, power=power)
        if k >= needed:
            return SizeChoice(key, n, k, needed, against_s, multiple, True)
    n = allowed[-1]
    return SizeChoice(key, n, kernel_time(probes, n, power=power), needed, against_s, multiple, False)


def _round2(x: float) -> int:
    """``x`` rounded to two significant digits (``1234567 -> 1200000``)."""
    digits = max(0, int(math.floor(math.log10(x))) - 1)
    return int(round(x / 10**digits) * 10**digits)


def _sweep(first: int, last: int, points: int) -> tuple[int, ...]:
    """The book's one element, then ``points - 1`` sizes from ``first`` to ``last``, evenly spaced in log."""
    steps = points - 1
    if last <= first:
        first = max(1, last // 100)
    sizes = [_round2(first * (last / first) ** (i / (steps - 1))) for i in range(steps)]
    sizes[-1] = last
    out = [1]
    for s in sizes:
        out.append(max(s, out[-1] + 1))
    return tuple(out)


def size_for_device(times: DeviceTimes) -> DeviceSizes:
    """Each CUDA lesson's workload for the GPU ``times`` describes (the rules: :data:`RULES`).

    A pure function of the measured numbers: no torch, no GPU.

    Returns:
        The frozen :class:`DeviceSizes`: a side per product lesson, notebook 05's queue size and sweep, the
        ``times`` they came from and one :class:`SizeChoice` per rule (its size, kernel time, target, and
        whether the experiment's maximum or the GPU's memory stopped it short).

    Raises:
        TypeError: ``times`` is not a :class:`DeviceTimes`.
    """
    instance("times", times, DeviceTimes, hint="measure one with measure_device() or make one with DeviceTimes(...)")
    free = times.free_bytes
    side_limit = min(8192, int(math.isqrt(free // (_TENSORS * _FLOAT_BYTES)))) if free else 8192
    numel_limit = min(1 << 28, free // (_TENSORS * _FLOAT_BYTES)) if free else 1 << 28
    mm, add = times.matmul_s, times.add_s
    choices = [
        _smallest("asynchrony", SIDES, mm, 3, times.matmul_launch_s, side_limit),
        _smallest("barriers", SIDES, mm, 3, times.matmul_launch_s, side_limit),
        _smallest("blockers", SIDES, mm, 3, times.conversion_s, side_limit),
        _smallest("sync_async_queue", NUMELS, add, 1, times.launch_s, numel_limit),
        _smallest("sync_async_sweep first", NUMELS, add, 1, times.launch_s, numel_limit),
        _smallest("sync_async_sweep last", NUMELS, add, 1, times.launch_s + times.round_trip_s, numel_limit),
    ]
    first, last = choices[4].size, choices[5].size
    return DeviceSizes(choices[0].size, choices[1].size, choices[2].size, choices[3].size,
                       _sweep(first, last, SWEEP_POINTS), _sweep(first, last, SWEEP_POINTS_QUICK), times,
                       tuple(choices))


# -- the measuring part: the only one that needs a GPU (its mechanics: _gpu_probe) ----------------------------
def measure_device(*, device: Any = "cuda:0") -> DeviceTimes:
    """Measure what :func:`size_for_device` reads, on one GPU (about a second).

    The CPU's launch costs are the time per call of 50 queued ``y = x + 1`` (one element) and ``a @ a``
    (256×256, a short kernel): median of five rounds.  The round trip is the median of 20
    ``y = x + 1; torch.cuda.synchronize()``, less the launch.  Each kernel time is CUDA events around
    2-10 launches queued behind ``torch.cuda._sleep`` (the GPU spins while the CPU launches, then runs
    them back to back), at :data:`SIDE_PROBES` and :data:`NUMEL_PROBES` in turn until one reaches the
    largest target of :data:`RULES` or the next would not fit in a quarter of the free memory.

    Returns:
        The frozen :class:`DeviceTimes` of this GPU.

    Raises:
        ValueError: ``device`` is not a CUDA device of this machine.
    """
    import torch

    dev = _gpu_probe.cuda_device(device)
    with torch.cuda.device(dev):  # events and spins on this GPU's current stream, whichever GPU is current
        m = _gpu_probe.measure(dev, side_probes=SIDE_PROBES, numel_probes=NUMEL_PROBES, targets=_targets)
    how = ("CUDA events around launches queued behind torch.cuda._sleep" if m["spins"] else
           "CUDA events around back-to-back launches (no torch.cuda._sleep here: a short kernel reads as its launch)")
    return DeviceTimes(m["device"], m["launch_s"], m["matmul_launch_s"], m["round_trip_s"], m["matmul_s"], m["add_s"],
                       m["free_bytes"], f"measured by d2l_async.experiments.sizing.measure_device: {how}")


def _targets(launch_s: float, matmul_launch_s: float, round_trip_s: float) -> tuple[float, float]:
    """The longest kernel any rule asks of a product and of an addition: probing stops once it is reached."""
    product = max(RULES["asynchrony"][1] * matmul_launch_s, RULES["barriers"][1] * matmul_launch_s,
                  RULES["blockers"][1] * (launch_s + round_trip_s))
    addition = max(RULES["sync_async_queue"][1] * launch_s,
                   RULES["sync_async_sweep last"][1] * (launch_s + round_trip_s))
    return product, addition


_MEASURED: dict[int, DeviceSizes] = {}


def device_sizes(*, device: Any = "cuda:0", refresh: bool = False) -> DeviceSizes:
    """This GPU's :class:`DeviceSizes`: measured (:func:`measure_device`) the first time a process asks for
    ``device``, then kept (``refresh=True`` measures again).

    Returns:
        The frozen :class:`DeviceSizes` of that GPU.

    Raises:
        ValueError: ``device`` is not a CUDA device of this machine.
    """
    from d2l_async._args import flag

    flag("refresh", refresh)
    dev = _gpu_probe.cuda_device(device)
    if refresh or dev.index not in _MEASURED:
        _MEASURED[dev.index] = size_for_device(measure_device(device=dev))
    return _MEASURED[dev.index]


def _workload_key(key: Any) -> str:
    if not isinstance(key, str) or key not in WORKLOADS:
        raise ValueError(f"key={key!r}: use one of {tuple(WORKLOADS)}")
    return key


def workload(key: str, *, backend: str = "auto", quick: bool | None = None) -> dict[str, Any]:
    """The keyword arguments that size experiment ``key`` on ``backend``.

    Args:
        key: ``"asynchrony"``, ``"barriers"``, ``"blockers"``, ``"sync_async_sweep"`` or ``"sync_async_queue"``.
        backend: ``"auto"`` (CUDA when present), ``"engine"`` or ``"cuda"``.
        quick: quick mode's sweep (fewer sizes) on CUDA; ``None``: :func:`d2l_async.config.quick_mode`.

    Returns:
        On the engine :data:`WORKLOADS`'s entry (mostly empty: the experiment's own defaults); on CUDA this
        GPU's sizes (:func:`device_sizes`), e.g. ``{"size": 2048}`` or ``{"numels": (1, ..., 10**8)}``.

    Raises:
        ValueError: an unknown key or backend, or ``"cuda"`` without a GPU.
    """
    from d2l_async import config
    from d2l_async._args import flag

    from ._common import resolve_backend

    _workload_key(key)
    if quick is not None:
        flag("quick", quick)
    setup = resolve_backend(backend, n_devices=1)
    if setup.backend != "cuda":
        return dict(WORKLOADS[key])
    if quick is None:
        quick = config.quick_mode()
    return device_sizes().kwargs(key, quick=quick)
