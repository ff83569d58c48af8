"""Modelled-time devices: the schedule of real devices, on any CPU, even on one core.

The chapter's lessons on devices (D2L §13.2-13.3) -- independent work on two devices runs side by
side, a barrier serializes it, a dependent chain cannot be parallelized, communication overlaps
computation -- are about *devices*, which from the CPU's side are separate processors.  The
engine's virtual devices are threads: on a machine with one usable core (a Binder pod, a pinned
process, a busy laptop) two of them take turns on that core, and nothing overlaps.

A **modelled device** keeps everything of the engine real -- the frontend, the dependency rules,
the queues, the workers, barriers and blockers -- and models one thing only: how long an op holds
its device.  Its worker computes the op's real value on this CPU (so every result equals eager
PyTorch), then *sleeps* until the op's modelled duration has passed since it began.  A sleeping
thread needs no CPU, so several modelled devices overlap even on one core, and the frontend keeps
its core.  The trace records the held times: each op's bar is as long as the model says (or
longer, see "overruns" below).

The cost model (a roofline with a launch latency)::

    compute op:  seconds = launch_s + max(flops / flops_per_s,  bytes / bytes_per_s)
    copy:        seconds = launch_s + bytes / link_bytes_per_s

    flops   matmul of (.., M, K) @ (.., K, N): 2·M·K·N per product; an elementwise op or a
            reduction: one per element of its largest operand; a custom op (``eng.push``): what
            :func:`with_flops` declares for its function, else one per element
    bytes   every array the op reads plus every array it writes or makes (each once)

:class:`DeviceModel` states the device's speed.  Its defaults (2 GFLOP/s, 1 GB/s memory,
0.25 GB/s link, 20 µs launch) are deliberately slow, about 1/10,000 of a data-centre GPU's
arithmetic: the real values are still computed on this CPU, and a modelled duration shorter than
that computation cannot be honoured.  One core of a 2020s CPU does roughly 30-150 GFLOP/s of
matrix products, so at 2 GFLOP/s the real work stays a small share of each modelled op.  What the
lessons show does not depend on the absolute speed: scaling every duration by the same factor
scales the timeline and leaves every overlap, ratio and idle gap where it was.

What a modelled device *cannot* show, and the notebooks do not claim:

* any measured speed: its durations come from the formula above, not from hardware;
* contention: two modelled devices never slow each other down (real devices share a PCIe switch,
  memory bandwidth, a power budget); and each worker of a modelled device holds its own op, so
  ``workers=2`` models two independent execution units (two GPUs, or two streams with nothing to
  share), never two kernels competing for one GPU's cores;
* the CPU's own timing noise, in one direction: a worker wakes from its hold when the OS runs it,
  which on a busy core can be a few milliseconds late, so a modelled op lasts at least, never less
  than, its modelled time;
* caches, clock boosting, kernel-launch batching, the real launch path of CUDA;
* overruns: when this CPU takes longer to compute an op than its modelled duration (a busy core,
  a large op), the device is held for the real time instead; :attr:`ModelledDevice.overruns`
  counts them and the trace's ``meta["modelled"]`` reports them, so a lesson check can say so.

Measured on a 2-core machine pinned to one core beside a spinning process
(``benchmarks/bench_parallelism.py --cpu 0 --busy``, three runs at load averages 2-13): two
modelled devices 1.88-1.93× faster than one, 0.97-0.98× with a barrier between them; the engine's
thread-devices in the same runs 1.07-1.37× and 0.93-1.09× (on one core any gain of threads is a
larger share of the CPU against the busy neighbour, not parallelism).

Wiring (the engine stays the engine): ``ThreadedEngine(model=DeviceModel())`` or
``model={"cpu:1": m, "cpu:2": m}`` attaches a :class:`ModelledDevice` to each named virtual device
(``Device.model``); ``Scheduler._execute`` calls :meth:`ModelledDevice.hold` right after the op
ran.  Traces of such an engine carry ``meta["modelled"]`` (device -> stated speed and overruns)
and say "modelled device: durations from a cost model, not measured" in ``meta["device"]``.
Standard library only.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

__all__ = ["DeviceModel", "OpCost", "ModelledDevice", "MODELLED_LABEL", "op_cost", "with_flops", "resolve_models",
           "modelled_meta"]

#: What every figure, label and printout of a modelled device says.
MODELLED_LABEL = "modelled device: durations from a cost model, not measured"
#: Attribute a custom op's function carries to declare its FLOPs (see :func:`with_flops`).
FLOPS_ATTR = "__d2l_async_flops__"
#: A holding worker wakes at least this often to see whether its engine is shutting down.
_SLICE = 0.05

_perf = time.perf_counter


@dataclass(frozen=True)
class DeviceModel:
    """The stated speed of a modelled device (see the module docstring for the formula).

    Attributes:
        flops_per_s: peak arithmetic, floating-point operations per second.
        bytes_per_s: memory bandwidth, bytes per second (what an elementwise op is bound by).
        link_bytes_per_s: bandwidth of copies to this device (the interconnect: PCIe, NVLink).
        launch_s: fixed cost of every op (the kernel-launch latency).
        name: how labels call it.
    """

    flops_per_s: float = 2e9
    bytes_per_s: float = 1e9
    link_bytes_per_s: float = 0.25e9
    launch_s: float = 20e-6
    name: str = "modelled device"

    def __post_init__(self) -> None:
        for field in ("flops_per_s", "bytes_per_s", "link_bytes_per_s"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"DeviceModel({field}={v!r}): pass a positive, finite number")
        v = self.launch_s
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 10:
            raise ValueError(f"DeviceModel(launch_s={v!r}): pass seconds between 0 and 10")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"DeviceModel(name={self.name!r}): pass a non-empty str")

    def seconds(self, cost: "OpCost") -> float:
        """The modelled duration of an op of this ``cost``: launch + roofline (or link) time."""
        if cost.copy:
            return self.launch_s + cost.nbytes / self.link_bytes_per_s
        return self.launch_s + max(cost.flops / self.flops_per_s, cost.nbytes / self.bytes_per_s)

    def matmul_seconds(self, m: int, k: int, n: int, itemsize: int = 4) -> float:
        """The modelled duration of one ``(m, k) @ (k, n)`` product (to size workloads and tests)."""
        return self.seconds(OpCost(2.0 * m * k * n, float(itemsize * (m * k + k * n + m * n))))

    def describe(self) -> str:
        """One line: the stated speed, and that it is a model."""
        return (f"{self.name}: {self.flops_per_s / 1e9:g} GFLOP/s, {self.bytes_per_s / 1e9:g} GB/s memory, "
                f"{self.link_bytes_per_s / 1e9:g} GB/s link, {self.launch_s * 1e6:g} µs launch ({MODELLED_LABEL})")


@dataclass(frozen=True)
class OpCost:
    """What one op asks of a device: floating-point operations and bytes moved.

    Attributes:
        flops: floating-point operations.
        nbytes: bytes read plus bytes written.
        copy: True for a copy between devices (priced at the link's bandwidth).
    """

    flops: float
    nbytes: float
    copy: bool = False


def with_flops(flops: Callable[..., float]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the FLOPs of a custom op's function, for modelled devices.

    ``flops`` receives the shapes (``torch.Size``) of the op's read arrays, then of its write
    arrays, in the order ``eng.push`` was given them::

        @with_flops(lambda x, w, out: 2 * x[0] * x[1] * w[1])
        def forward(x, w, out):
            torch.matmul(x, w, out=out)

    Without it a custom op counts one FLOP per element of its largest array.

    Returns:
        A decorator that stores ``flops`` on the function and returns the same function.
    """
    if not callable(flops):
        raise TypeError(f"with_flops({flops!r}): pass a function of the arrays' shapes")

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, FLOPS_ATTR, flops)
        return fn

    return mark


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _nbytes(var: Any) -> int:
    shape = getattr(var, "_shape", None)
    dtype = getattr(var, "_dtype", None)
    if shape is None or dtype is None:
        return 0
    return _numel(shape) * int(getattr(dtype, "itemsize", 4))


def op_cost(op: Any) -> OpCost:
    """The :class:`OpCost` of an engine op, read from the shapes of the arrays it touches.

    Called after the op ran and before the engine releases its arrays, so ``op.reads``,
    ``op.writes`` and ``op.out`` are still there.
    """
    reads, writes, out = tuple(op.reads), tuple(op.writes), op.out
    if op.kind == "copy":
        return OpCost(0.0, float(op.nbytes or sum(_nbytes(v) for v in reads)), copy=True)
    # by identity: arrays may compare elementwise (==), so they are not dict keys
    touched = list({id(v): v for v in (*reads, *writes, *((out,) if out is not None else ()))}.values())
    nbytes = float(sum(_nbytes(v) for v in touched))
    largest = max((_numel(v._shape) for v in touched if getattr(v, "_shape", None) is not None), default=0)
    declared = getattr(op.fn, FLOPS_ATTR, None)
    if declared is not None:
        flops = float(declared(*(v._shape for v in (*reads, *writes))))
    elif op.name == "matmul" and reads:
        k = int(reads[0]._shape[-1]) if len(reads[0]._shape) else 1
        result = out if out is not None else (writes[0] if writes else None)
        flops = 2.0 * k * max(_numel(result._shape), 1) if result is not None else 0.0
    else:
        flops = float(largest)
    return OpCost(flops, nbytes)


class ModelledDevice:
    """A virtual device's model at run time: holds each op for its modelled duration, counts.

    Attributes:
        model: the stated speed.
        ops: ops held so far; modelled_seconds: their modelled durations, summed.
        overruns: ops whose real computation on this CPU took longer than their modelled
            duration (held for the real time instead); worst_overrun: the largest real/modelled
            ratio among them (0.0 when none).
        real_seconds: time this CPU spent computing the ops' real values.
    """

    def __init__(self, model: DeviceModel) -> None:
        if not isinstance(model, DeviceModel):
            raise TypeError(f"model={model!r}: pass a d2l_async.engine.DeviceModel")
        self.model = model
        self._lock = threading.Lock()  # several workers of one device update the counters
        self.ops = 0
        self.overruns = 0
        self.worst_overrun = 0.0
        self.modelled_seconds = 0.0
        self.real_seconds = 0.0

    def hold(self, op: Any, t_run: float) -> None:
        """Hold the device (sleep, no CPU) until ``op``'s modelled duration has passed since
        ``t_run``, the moment it began to compute.  A failed op is not held."""
        if op.error is not None:
            return
        try:
            seconds = self.model.seconds(op_cost(op))
        except Exception as exc:  # noqa: BLE001 - e.g. a with_flops function that raised: the op
            op.error = exc        # fails, and its blocker raises it (a worker must not die)
            return
        deadline = t_run + seconds
        now = _perf()
        real = now - t_run
        with self._lock:
            self.ops += 1
            self.modelled_seconds += seconds
            self.real_seconds += real
            if real > seconds:
                self.overruns += 1
                self.worst_overrun = max(self.worst_overrun, real / seconds if seconds > 0 else math.inf)
        dev = op.device
        while now < deadline:
            if getattr(dev, "stopping", False):  # the engine is shutting down: do not keep it waiting
                return
            time.sleep(min(deadline - now, _SLICE))
            now = _perf()

    def summary(self) -> dict[str, Any]:
        """The stated speed and the counters, as plain values (for ``trace.meta``)."""
        with self._lock:
            return {**asdict(self.model), "ops": self.ops, "overruns": self.overruns,
                    "worst_overrun": self.worst_overrun, "modelled_seconds": self.modelled_seconds,
                    "real_seconds": self.real_seconds}


def resolve_models(model: "DeviceModel | Mapping[str, DeviceModel] | None",
                   devices: Sequence[str]) -> dict[str, ModelledDevice]:
    """Which of ``devices`` are modelled: ``None`` (none), one :class:`DeviceModel` (all), or a
    mapping ``device name -> DeviceModel`` (those named; the others stay plain threads).

    Raises:
        ValueError: a mapping names a device the engine does not have.
        TypeError: anything else than the three forms above.
    """
    if model is None:
        return {}
    if isinstance(model, DeviceModel):
        return {d: ModelledDevice(model) for d in devices}
    if isinstance(model, Mapping):
        unknown = sorted(set(model) - set(devices))
        if unknown:
            raise ValueError(f"model names devices {unknown} that this engine does not have; its devices are "
                             f"{list(devices)}")
        return {d: ModelledDevice(m) for d, m in model.items()}
    raise TypeError(f"model={model!r}: pass a DeviceModel, a mapping device -> DeviceModel, or None")


def modelled_meta(devices: Mapping[str, Any]) -> dict[str, Any]:
    """``trace.meta`` entries of an engine whose ``devices`` (name -> ``Device``) may be modelled:
    empty when none is."""
    modelled = {n: d.model.summary() for n, d in devices.items() if getattr(d, "model", None) is not None}
    if not modelled:
        return {}
    names = ", ".join(modelled)
    plain = [n for n in devices if n not in modelled]
    rest = f"; {', '.join(plain)}: threads on this CPU (measured)" if plain else ""
    speed = next(iter(modelled.values()))
    return {"modelled": modelled, "modelled_label": MODELLED_LABEL,
            "device": (f"{names}: {MODELLED_LABEL} ({speed['flops_per_s'] / 1e9:g} GFLOP/s, "
                       f"{speed['bytes_per_s'] / 1e9:g} GB/s){rest}")}
