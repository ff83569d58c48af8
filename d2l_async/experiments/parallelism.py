"""Automatic parallelism: independent work on two devices overlaps; a barrier serializes it (D2L §13.3).

:func:`run_two_devices` runs the same chains of matrix products on two devices, once issued
together (the engine runs them at the same time) and once with a barrier between them (one device
idles while the other works).

:func:`run_mlp_parallel` trains a two-layer MLP data-parallel over a host and two devices: the host
makes each minibatch, copies one half to each device, each device runs forward and backward on its
replica, the gradients are summed across devices (copies — the chapter's "communication") and each
replica applies the update.  Every step is an engine op, so the engine schedules the graph: the
copy of a gradient overlaps the other layer's backward, and the next batch's copies overlap the
current batch's compute.  The overlap of compute and communication is measured from the trace.

Both run on three backends: ``"cuda"`` (two GPUs), ``"engine"`` (virtual devices: threads of this
CPU, which overlap only where the machine has a spare core for each) and ``"modelled"`` (virtual
devices whose ops compute real values but hold the device for a modelled duration, see
:mod:`d2l_async.engine._modelled`: they overlap even on one shared core; every label says
"modelled device: durations from a cost model, not measured").  Which to show on this machine is
:func:`d2l_async.experiments.parallel_lessons.plan_devices`'s call; what the runs must show is
checked there too.

Device names are the real ones (``cpu:0``/``cpu:1`` for the engine's virtual devices, ``cuda:0``/
``cuda:1`` for GPUs): the trace is what actually ran.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from d2l_async import config

from ._common import Setup, positive_int, resolve_backend, stable_matrix
from ._show import Displayed
from ._why import fmt_time
from .parallel_lessons import RunFacts, run_facts

__all__ = ["TwoDeviceResult", "run_two_devices", "DEVICE_BACKENDS", "device_setup"]

#: Backends of the device experiments: the usual three, and modelled-time devices.
DEVICE_BACKENDS = ("auto", "engine", "modelled", "cuda")


def device_setup(backend: str, model: Any, *, n_devices: int, min_gpus: int = 2) -> tuple[Setup, Any]:
    """Where a device experiment runs, and the :class:`~d2l_async.engine.DeviceModel` it uses
    (None unless ``backend="modelled"``; a ``model`` given with another backend is an error)."""
    if not isinstance(backend, str) or backend not in DEVICE_BACKENDS:
        raise ValueError(f"backend={backend!r}: use one of {DEVICE_BACKENDS}")
    if backend != "modelled":
        if model is not None:
            raise ValueError(f"model= is for backend='modelled' (got backend={backend!r}); drop it or pass "
                             "backend='modelled'")
        return resolve_backend(backend, n_devices=n_devices, min_gpus=min_gpus), None
    from d2l_async.engine import MODELLED_LABEL, DeviceModel

    model = DeviceModel() if model is None else model
    if not isinstance(model, DeviceModel):
        raise ValueError(f"model={model!r}: pass a d2l_async.engine.DeviceModel")
    label = (f"CPU engine, {n_devices} modelled virtual devices ({MODELLED_LABEL}; {model.flops_per_s / 1e9:g} GFLOP/s, "
             f"{model.bytes_per_s / 1e9:g} GB/s, link {model.link_bytes_per_s / 1e9:g} GB/s)")
    return Setup("modelled", label, True), model


@dataclass(frozen=True)
class TwoDeviceResult(Displayed):
    """Two devices, the same work, with and without a barrier between them.

    Attributes:
        concurrent_seconds: both devices' chains issued together, one barrier at the end.
        serialized_seconds: device A's chain, a barrier, then device B's chain.
        trace_concurrent, trace_serialized: the two traces.
        devices: the two devices used.
        ops: matrix products per device.
        size: their side.
        backend, device, virtual: where it ran (``backend="modelled"``: modelled-time devices).
        facts: usable and busy CPUs and the load when it ran (the reasons a lesson check gives).
        modelled: device -> the model's speed and overruns (``trace.meta["modelled"]``), or None.
        concurrent_cpu_seconds: this process's CPU time during the concurrent run (median; NaN on
            GPUs): about twice the wall time when two thread-devices really ran side by side.
        concurrent_runs, serialized_runs: every timed run (the medians' samples).
    """

    concurrent_seconds: float
    serialized_seconds: float
    trace_concurrent: Any
    trace_serialized: Any
    devices: tuple[str, str]
    ops: int
    size: int
    backend: str
    device: str
    virtual: bool
    facts: RunFacts | None = None
    modelled: Mapping[str, Any] | None = None
    concurrent_cpu_seconds: float = float("nan")
    concurrent_runs: tuple[float, ...] = ()
    serialized_runs: tuple[float, ...] = ()

    @property
    def speedup(self) -> float:
        """serialized / concurrent: up to 2 when the two devices really run at once."""
        return self.serialized_seconds / self.concurrent_seconds

    def checks(self) -> list[Any]:
        """The checks of notebook 07's two-device claims."""
        from .parallel_lessons import two_device_checks

        return two_device_checks(self)

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        return (f"Ran on: {self.device}; {self.ops} products of {self.size}×{self.size} on each of "
                f"{self.devices[0]} and {self.devices[1]}, medians of {len(self.concurrent_runs) or 1} runs",
                [("concurrent", fmt_time(self.concurrent_seconds)),
                 ("with a barrier between", fmt_time(self.serialized_seconds))])


def run_two_devices(
    *, ops: int | None = None, size: int | None = None, repeat: int | None = None, backend: str = "auto",
    model: Any = None,
) -> TwoDeviceResult:
    """Run ``ops`` products of ``size``×``size`` on each of two devices, concurrently and serialized.

    Args:
        ops: products per device; default 10 (quick mode 4).
        size: matrix side; default 800 (quick mode 500); with ``backend="modelled"`` 320 (quick 256),
            so that this CPU's real work stays a small share of each modelled op.
        repeat: runs of each variant (medians reported, last traces kept), in rounds; default 5 (quick mode 2).
        backend: ``"auto"``, ``"engine"`` (two virtual devices), ``"modelled"`` (two modelled-time
            devices) or ``"cuda"`` (needs two GPUs).
        model: the :class:`~d2l_async.engine.DeviceModel` of ``backend="modelled"`` (default: its defaults).

    Returns:
        The frozen :class:`TwoDeviceResult`: the median concurrent and serialized seconds (and every run's), the
        last run's trace of each, the devices, the sizes, where it ran, the machine's facts, the modelled record
        (``None`` unless modelled) and the concurrent runs' CPU seconds (NaN on CUDA).

    Raises:
        ValueError: bad counts or an unavailable backend.
    """
    setup, model = device_setup(backend, model, n_devices=2)
    ops = positive_int("ops", ops if ops is not None else config.scale(10, 4), maximum=100_000)
    default_size = config.scale(320, 256) if model is not None else config.scale(800, 500)
    size = positive_int("size", size if size is not None else default_size, maximum=8192)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(5, 2), maximum=1000)
    facts = run_facts()
    import torch

    if setup.backend == "cuda":
        from d2l_async.capture import capture

        devs = ("cuda:0", "cuda:1")
        mats = {d: stable_matrix(size).to(d) for d in devs}
        concurrent, serialized = _two_device_programs(mats, devs, ops, barrier=torch.cuda.synchronize)

        concurrent()
        times = {"c": [], "s": []}
        for _ in range(repeat):  # in rounds, as on the engine below
            times["c"].append(_timed(concurrent))
            times["s"].append(_timed(serialized))
        t_c, t_s = statistics.median(times["c"]), statistics.median(times["s"])
        tr_c, tr_s = capture(concurrent, device="cuda"), capture(serialized, device="cuda")
    else:
        from d2l_async.engine import make_engine

        devs = ("cpu:0", "cpu:1")
        with make_engine(workers=1, devices=devs, model=model) as eng:
            mats = {d: eng.array(stable_matrix(size), device=d, name=f"m{d[-1]}") for d in devs}

            def barrier(d: str) -> None:
                eng.waitall()  # MXNet's barrier (a second call in a row returns at once)

            concurrent, serialized = _two_device_programs(mats, devs, ops, barrier=barrier)

            concurrent()  # warm-up
            times: dict[str, list[float]] = {"c": [], "s": []}
            cpu: list[float] = []
            for _ in range(repeat):
                eng.reset_trace()
                c0 = time.process_time()
                times["c"].append(_timed(concurrent))
                cpu.append(time.process_time() - c0)
                tr_c = eng.trace()
                eng.reset_trace()
                times["s"].append(_timed(serialized))
                tr_s = eng.trace()
            t_c, t_s = statistics.median(times["c"]), statistics.median(times["s"])
            cpu_c = statistics.median(cpu)
    meta = dict(device=setup.device, virtual=setup.virtual, experiment="two_devices")
    return TwoDeviceResult(t_c, t_s, tr_c.with_meta(**meta, mode="concurrent"),
                           tr_s.with_meta(**meta, mode="serialized"), devs, ops, size, setup.backend,
                           setup.device, setup.virtual, facts, tr_c.meta.get("modelled"),
                           cpu_c if setup.backend != "cuda" else float("nan"), tuple(times["c"]), tuple(times["s"]))


def _two_device_programs(
    mats: dict[str, Any], devs: tuple[str, str], ops: int, *, barrier: Callable[[str], Any]
) -> tuple[Callable[[], None], Callable[[], None]]:
    """The experiment's two programs over any backend: ``ops`` products on each device, with the
    barrier after both devices' work was issued (concurrent) or after each device's (serialized)."""

    def chain(d: str) -> None:
        a = mats[d]
        for _ in range(ops):
            a = a @ mats[d]

    def concurrent() -> None:
        for d in devs:
            chain(d)
        for d in devs:
            barrier(d)

    def serialized() -> None:
        for d in devs:
            chain(d)
            barrier(d)  # the barrier: the next device's work is issued only now

    return concurrent, serialized


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ---------------------------------------------------------------- what makes 07's claims false
def _two(concurrent: float, serialized: float, *, facts: Any = None, gap: float = 0.001) -> TwoDeviceResult:
    """A synthetic result with these median seconds (three equal runs each) and a serialized gap."""
    from .parallel_lessons import _lanes_trace

    conc = _lanes_trace([("cpu:1", 0.0, 0.01), ("cpu:2", 0.0, 0.01)])
    ser = _lanes_trace([("cpu:1", 0.0, 0.01), ("cpu:2", 0.01 + gap, 0.02 + gap)])
    return TwoDeviceResult(concurrent, serialized, conc, ser, ("cpu:1", "cpu:2"), 4, 64, "engine", "example", True,
                           facts or RunFacts(4.0, 0.0, 0.0, "4 usable CPUs"), None, float("nan"),
                           (concurrent,) * 3, (serialized,) * 3)


def _register() -> None:
    from d2l_async import claims
    from d2l_async.lesson import Cause

    from .parallel_lessons import BARRIER, TWO_DEVICES, two_device_checks

    busy = RunFacts(1.0, 1.0, 2.0, "1 usable CPU, 1.0 busy with other work")
    claims.falsifier(TWO_DEVICES, "concurrent as slow as with the barrier",
                     lambda: two_device_checks(_two(0.02, 0.02))[0])
    claims.counterfactual(TWO_DEVICES, "one usable CPU, busy", Cause.NO_SPARE_CPU,
                          lambda: two_device_checks(_two(0.011, 0.02, facts=busy))[0])
    claims.counterfactual(TWO_DEVICES, "four spare CPUs, no gain", Cause.INTERPRETER_LOCK,
                          lambda: two_device_checks(_two(0.02, 0.0201))[0])
    claims.falsifier(BARRIER, "the second device starts before the first ends",
                     lambda: two_device_checks(_two(0.011, 0.02, gap=-0.005))[1])
    claims.counterfactual(BARRIER, "the second device starts before the first ends", Cause.BUG,
                          lambda: two_device_checks(_two(0.011, 0.02, gap=-0.005))[1])


_register()
