"""A two-layer MLP trained data-parallel over a host and two devices (D2L §13.3's figure).

:func:`run_mlp_parallel`: the host makes each minibatch, copies one half to each device, each device
runs forward and backward on its replica, the gradients are summed across devices (copies — the
chapter's "communication") and each replica applies the update.  Every step is an engine op, so
the engine schedules the graph: the copy of a gradient overlaps the other layer's backward, and the
next batch's copies overlap the current batch's compute.  :func:`compute_comm_overlap` measures that
overlap from the trace.  Backends as in :mod:`.parallelism` (threads, modelled-time devices, GPUs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from d2l_async import config

from ._common import Setup, backend_work, positive_int
from ._show import Displayed
from .parallel_lessons import RunFacts, run_facts
from .parallelism import device_setup
from d2l_async._args import TRACE_HINT, function, instance

__all__ = ["MLPResult", "run_mlp_parallel", "compute_comm_overlap", "timed_after_warmup"]


def compute_comm_overlap(trace: Any):
    """Seconds during which compute (ops, kernels) and communication (copies) ran at once.

    Every backend event is put on one of two synthetic lanes, ``compute`` or ``communication``,
    and :func:`d2l_async.analysis.overlap` compares them.

    Returns:
        :class:`d2l_async.analysis.Overlap` with ``lane_a="compute"``, ``lane_b="communication"``.
    """
    from d2l_async.analysis import overlap
    from d2l_async.trace import BACKEND_KINDS, Lane, LaneRole, Trace

    instance("trace", trace, Trace, what="d2l_async.trace.Trace", hint=TRACE_HINT)
    work = backend_work(trace) if trace.backend_lanes else trace.where(kind=BACKEND_KINDS)
    lanes = np.where(work["kind"] == "copy", "communication", "compute").astype(object)
    cols = {k: v for k, v in work.columns.items()}
    cols["lane"] = lanes
    cols["deps"] = [()] * len(work)  # ids refer to the full trace; drop the edges here
    split = Trace.from_columns(cols, [Lane("compute", LaneRole.BACKEND), Lane("communication", LaneRole.BACKEND)],
                               trace.meta)
    return overlap(split, "compute", "communication")


@dataclass(frozen=True)
class MLPResult(Displayed):
    """A two-layer MLP trained data-parallel over a host and two devices.

    Attributes:
        losses: the loss of each minibatch (averaged over the two devices).
        seconds: wall time of the training loop, including the final barrier.
        overlap: :func:`compute_comm_overlap` of the trace.
        trace: the trace of the loop.
        roles: device -> its role (``"host: makes minibatches"``, ``"device 1 (virtual)"``, ...).
        batches, batch_size, hidden: the workload.
        backend, device, virtual: where it ran (``backend="modelled"``: the two devices are
            modelled-time devices, the host stays this CPU's threads).
        facts: usable and busy CPUs and the load when it ran.
        modelled: device -> the model's speed and overruns, or None.
        cpu_seconds: this process's CPU time during the loop (NaN on GPUs).
    """

    losses: tuple[float, ...]
    seconds: float
    overlap: Any
    trace: Any
    roles: Mapping[str, str]
    batches: int
    batch_size: int
    hidden: int
    backend: str
    device: str
    virtual: bool
    facts: RunFacts | None = None
    modelled: Mapping[str, Any] | None = None
    cpu_seconds: float = float("nan")

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(self.roles)

    def checks(self) -> list[Any]:
        """The check of notebook 07's communication claim."""
        from .parallel_lessons import mlp_checks

        return mlp_checks(self)

    def _summary(self) -> tuple[str, list[tuple[str, str]]]:
        from ._why import fmt_time

        o = self.overlap
        return (f"Ran on: {self.device}; {self.batches} minibatches of {self.batch_size}, loss "
                f"{self.losses[0]:.3f} → {self.losses[-1]:.3f}",
                [*((d, role) for d, role in self.roles.items()),
                 ("compute / copies / both at once", f"{fmt_time(o.both + o.only_a)} / {fmt_time(o.both + o.only_b)} / "
                                                     f"{fmt_time(o.both)}")])


def run_mlp_parallel(
    *, batches: int | None = None, batch_size: int | None = None, hidden: int | None = None,
    features: int = 64, lr: float = 0.01, backend: str = "auto", seed: int = 0, model: Any = None,
) -> MLPResult:
    """Train a two-layer MLP on a host and two devices; every step is scheduled by the engine.

    Args:
        batches: minibatches; default 20 (quick mode 6).
        batch_size: rows per minibatch (split in two halves); default 512 (quick mode 256).
        hidden: hidden units; default 512 (quick mode 256).
        features: input features (the target is a fixed random linear map of the input).
        lr: learning rate.
        backend: ``"auto"``, ``"engine"`` (host ``cpu:0`` and virtual devices ``cpu:1``, ``cpu:2``),
            ``"modelled"`` (the same, with ``cpu:1`` and ``cpu:2`` modelled-time devices; the host
            stays threads) or ``"cuda"`` (host CPU and ``cuda:0``, ``cuda:1``; needs two GPUs).
        seed: seed of the weights and data.
        model: the :class:`~d2l_async.engine.DeviceModel` of ``backend="modelled"``.

    Returns:
        The frozen :class:`MLPResult`: the loss of each minibatch, the wall seconds, the compute/communication
        overlap and the trace, each lane's role, the sizes, where it ran, the machine's facts, the modelled record
        (``None`` unless modelled) and the loop's CPU seconds (NaN on GPUs).

    Raises:
        ValueError: bad sizes or an unavailable backend.
    """
    batches = positive_int("batches", batches if batches is not None else config.scale(20, 6), maximum=100_000)
    batch_size = positive_int("batch_size", batch_size if batch_size is not None else config.scale(512, 256),
                              minimum=2, maximum=1 << 16)
    hidden = positive_int("hidden", hidden if hidden is not None else config.scale(512, 256), maximum=1 << 14)
    features = positive_int("features", features, maximum=1 << 14)
    seed = positive_int("seed", seed, minimum=0, maximum=2**63 - 1)  # torch.manual_seed's range
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not 0 < lr < 10:
        raise ValueError(f"lr must be a number in (0, 10), got {lr!r}")

    setup, model = device_setup(backend, model, n_devices=2)
    if setup.backend == "cuda":
        return _mlp_cuda(batches, batch_size, hidden, features, float(lr), seed, setup)
    return _mlp_engine(batches, batch_size, hidden, features, float(lr), seed, setup, model)


def _init(features: int, hidden: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(features, hidden, generator=g) / features ** 0.5
    w2 = torch.randn(hidden, 1, generator=g) / hidden ** 0.5
    target = torch.randn(features, 1, generator=g) / features ** 0.5
    return w1, w2, target


def _forward_backward(x: Any, y: Any, w1: Any, w2: Any):
    """Plain torch: loss and gradients of mean((relu(x w1) w2 - y)^2)."""
    h_pre = x @ w1
    h = h_pre.relu()
    out = h @ w2
    err = out - y
    loss = (err * err).mean()
    d_out = 2 * err / x.shape[0]
    g2 = h.T @ d_out
    d_h = (d_out @ w2.T) * (h_pre > 0)
    g1 = x.T @ d_h
    return loss, g1, g2


def _mlp_engine(batches: int, batch_size: int, hidden: int, features: int, lr: float, seed: int,
                setup: Setup, model: Any = None) -> MLPResult:
    import torch

    from d2l_async.engine import make_engine, with_flops

    facts = run_facts()
    host, devs = "cpu:0", ("cpu:1", "cpu:2")
    w1_0, w2_0, target = _init(features, hidden, seed)
    half = batch_size // 2

    def make_batch(i: int):
        def fill(x: Any, y: Any) -> None:
            g = torch.Generator().manual_seed(seed * 100_003 + i)
            x.copy_(torch.randn(x.shape, generator=g))
            y.copy_(x @ target)
        return fill

    # FLOPs of the custom ops, for modelled devices (shapes of reads, then writes)
    @with_flops(lambda x, w1, w2, h, o: 2 * x[0] * x[1] * w1[1] + 3 * x[0] * w1[1])
    def forward(x: Any, w1: Any, w2: Any, h_pre: Any, out: Any) -> None:
        torch.matmul(x, w1, out=h_pre)
        torch.matmul(h_pre.relu(), w2, out=out)

    @with_flops(lambda h, o, y, d, g2, loss: 3 * h[0] * h[1] + 4 * o[0])
    def backward_w2(h_pre: Any, out: Any, y: Any, d_out: Any, g2: Any, loss: Any) -> None:
        err = out - y
        loss.fill_((err * err).mean())
        d_out.copy_(2 * err / out.shape[0])
        torch.matmul(h_pre.relu().T, d_out, out=g2)

    @with_flops(lambda x, h, d, w2, g1: 2 * x[0] * x[1] * h[1] + 4 * h[0] * h[1])
    def backward_w1(x: Any, h_pre: Any, d_out: Any, w2: Any, g1: Any) -> None:
        torch.matmul(x.T, (d_out @ w2.T) * (h_pre > 0), out=g1)

    def add_into(x: Any, y: Any, out: Any) -> None:
        torch.add(x, y, out=out)

    def sgd(g: Any, w: Any) -> None:
        w.sub_(0.5 * lr * g)  # g is the sum of the two devices' gradients: average it

    losses_arrays = []
    with make_engine(workers=1, devices=(host, *devs), model={d: model for d in devs} if model else None) as eng:
        params = {d: (eng.array(w1_0.clone(), device=d, name=f"W1@{d}"),
                      eng.array(w2_0.clone(), device=d, name=f"W2@{d}")) for d in devs}
        eng.waitall()
        eng.reset_trace()
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(batches):
            grads = {}
            batch_losses = []
            for k, d in enumerate(devs):
                xh = eng.array(torch.empty(half, features), device=host, name=f"X{i}.{k}")
                yh = eng.array(torch.empty(half, 1), device=host, name=f"y{i}.{k}")
                eng.push(make_batch(2 * i + k), writes=(xh, yh), name="make minibatch")
                x, y = xh.to(d, name=f"X{i}.{k}@{d}"), yh.to(d, name=f"y{i}.{k}@{d}")  # host -> device copies
                w1, w2 = params[d]
                h_pre = eng.array(torch.empty(half, hidden), device=d, name=f"H{i}@{d}")
                out = eng.array(torch.empty(half, 1), device=d, name=f"out{i}@{d}")
                eng.push(forward, reads=(x, w1, w2), writes=(h_pre, out), name="forward")
                d_out = eng.array(torch.empty(half, 1), device=d, name=f"dout{i}@{d}")
                g2 = eng.array(torch.empty(hidden, 1), device=d, name=f"gW2@{d}")
                loss = eng.array(torch.empty(()), device=d, name=f"loss{i}@{d}")
                eng.push(backward_w2, reads=(h_pre, out, y), writes=(d_out, g2, loss), name="backward W2")
                g1 = eng.array(torch.empty(features, hidden), device=d, name=f"gW1@{d}")
                eng.push(backward_w1, reads=(x, h_pre, d_out, w2), writes=(g1,), name="backward W1")
                grads[d] = (g1, g2)
                batch_losses.append(loss)
            # all-reduce: sum each gradient on one device, copy the sum back (communication)
            a, b = devs
            summed = {}
            for j in (1, 0):  # W2's gradient is ready first: its copy overlaps W1's backward
                g = f"gW{j + 1}"
                other = grads[b][j].to(a, name=f"{g}{i}({b})@{a}")
                total = eng.array(torch.empty(other.shape), device=a, name=f"sum {g}{i}@{a}")  # named in the graph
                eng.push(add_into, reads=(grads[a][j], other), writes=(total,), name="add")
                summed[j] = {a: total, b: total.to(b, name=f"sum {g}{i}@{b}")}
            for d in devs:
                for j in (0, 1):
                    eng.push(sgd, reads=(summed[j][d],), writes=(params[d][j],), name=f"update W{j + 1}")
            losses_arrays.append(batch_losses)
        eng.waitall()
        seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        trace = eng.trace()
        losses = tuple(float(np.mean([l.item() for l in pair])) for pair in losses_arrays)
    if model is None:
        label = "CPU engine: host cpu:0 and 2 virtual devices cpu:1, cpu:2 (threads)"
        kind = "virtual"
    else:
        label = f"CPU engine: host cpu:0 (threads, measured) and {setup.device.replace('CPU engine, 2', '2')}"
        kind = "modelled"
    roles = {host: "host: makes minibatches (virtual device)" if model is None else
             "host: makes minibatches (threads, measured)", devs[0]: f"device 1 ({kind})", devs[1]: f"device 2 ({kind})"}
    modelled = trace.meta.get("modelled")
    trace = trace.with_meta(device=label, virtual=True, experiment="mlp_parallel")
    return MLPResult(losses, seconds, compute_comm_overlap(trace), trace, roles, batches, batch_size, hidden,
                     setup.backend, label, True, facts, modelled, cpu_seconds)


def timed_after_warmup(run: Callable[[], None], reset: Callable[[], None],
                       clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds of ``run()``'s second call: the first, untimed, pays CUDA's one-time costs (cuBLAS
    handles, pinned host memory, peer access between the GPUs, kernel loading), which are not the
    training loop's; ``reset()`` runs before each call."""
    function("run", run, what="a function of no arguments (one training loop)")
    function("reset", reset, what="a function of no arguments (resets the weights)")
    function("clock", clock, what="a function of no arguments returning seconds (time.perf_counter)")
    reset()
    run()
    reset()
    t0 = clock()
    run()
    return clock() - t0


def _mlp_cuda(batches: int, batch_size: int, hidden: int, features: int, lr: float, seed: int,
              setup: Setup) -> MLPResult:
    import torch

    from d2l_async.capture import capture

    devs = ("cuda:0", "cuda:1")
    w1_0, w2_0, target = _init(features, hidden, seed)
    params = {d: [w1_0.to(d), w2_0.to(d)] for d in devs}
    half = batch_size // 2
    loss_list: list[list[Any]] = []

    def train() -> None:
        for i in range(batches):
            grads, batch_losses = {}, []
            for k, d in enumerate(devs):
                g = torch.Generator().manual_seed(seed * 100_003 + 2 * i + k)
                x_host = torch.randn(half, features, generator=g).pin_memory()
                y_host = (x_host @ target).pin_memory()
                x, y = x_host.to(d, non_blocking=True), y_host.to(d, non_blocking=True)
                loss, g1, g2 = _forward_backward(x, y, *params[d])
                grads[d] = (g1, g2)
                batch_losses.append(loss)
            a, b = devs
            for j in (1, 0):
                total = grads[a][j] + grads[b][j].to(a, non_blocking=True)
                for d, t in ((a, total), (b, total.to(b, non_blocking=True))):
                    params[d][j] = params[d][j] - 0.5 * lr * t
            loss_list.append(batch_losses)
        for d in devs:
            torch.cuda.synchronize(d)

    def reset() -> None:  # every run starts again from the initial weights
        loss_list.clear()
        params.update({d: [w1_0.to(d), w2_0.to(d)] for d in devs})

    seconds = timed_after_warmup(train, reset)
    reset()  # the traced run too
    trace = capture(train, device="cuda").with_meta(device=setup.device, virtual=False, experiment="mlp_parallel")
    losses = tuple(float(np.mean([l.item() for l in pair])) for pair in loss_list)
    roles = {"cpu": "host: makes minibatches", devs[0]: "GPU 0", devs[1]: "GPU 1"}
    return MLPResult(losses, seconds, compute_comm_overlap(trace), trace, roles, batches, batch_size, hidden,
                     "cuda", setup.device, False)


# ---------------------------------------------------------------- what makes 07's MLP claim false
def _example(both: float, copies: float, *, cpu: float = float("nan"), seconds: float = 0.1) -> MLPResult:
    """A synthetic run of thread-devices whose copies ran ``copies`` seconds, ``both`` of them beside compute."""
    from d2l_async.analysis import Overlap

    from .parallel_lessons import RunFacts, _lanes_trace

    trace = _lanes_trace([("cpu:1", 0.0, 0.01), ("cpu:2", 0.0, 0.01)])
    return MLPResult((1.0, 0.5), seconds, Overlap("compute", "communication", both, 0.05, copies - both, 0.0, seconds),
                     trace, {"cpu:0": "host", "cpu:1": "device 1", "cpu:2": "device 2"}, 4, 8, 8, "engine", "example",
                     True, RunFacts(4.0, 0.0, 0.0, "4 usable CPUs"), None, cpu)


def _register() -> None:
    from d2l_async import claims
    from d2l_async.lesson import Cause

    from .parallel_lessons import COMM, mlp_checks

    claims.falsifier(COMM, "copies that never ran beside compute", lambda: mlp_checks(_example(0.0, 0.01))[0])
    claims.counterfactual(COMM, "copies that never ran beside compute", Cause.TOO_SMALL,
                          lambda: mlp_checks(_example(0.0, 0.01))[0])
    claims.counterfactual(COMM, "overlapped copies, but 1.0 CPU used at once", Cause.NO_SPARE_CPU,
                          lambda: mlp_checks(_example(0.008, 0.01, cpu=0.1, seconds=0.1))[0])


_register()
