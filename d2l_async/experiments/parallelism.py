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

Device names are the real ones (``cpu:1``/``cpu:2`` for the engine's virtual devices, ``cuda:0``/
``cuda:1`` for GPUs); the book's figure labels them inconsistently (gpu0/gpu1) and skips a batch
index — the trace here is what actually ran.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from d2l_async import config

from ._common import Setup, positive_int, resolve_backend, stable_matrix

__all__ = ["TwoDeviceResult", "MLPResult", "run_two_devices", "run_mlp_parallel", "compute_comm_overlap"]


@dataclass(frozen=True)
class TwoDeviceResult:
    """Two devices, the same work, with and without a barrier between them.

    Attributes:
        concurrent_seconds: both devices' chains issued together, one barrier at the end.
        serialized_seconds: device A's chain, a barrier, then device B's chain.
        trace_concurrent, trace_serialized: the two traces.
        devices: the two devices used.
        ops: matrix products per device.
        size: their side.
        backend, device, virtual: where it ran.
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

    @property
    def speedup(self) -> float:
        """serialized / concurrent: up to 2 when the two devices really run at once."""
        return self.serialized_seconds / self.concurrent_seconds


def run_two_devices(
    *, ops: int | None = None, size: int | None = None, repeat: int | None = None, backend: str = "auto"
) -> TwoDeviceResult:
    """Run ``ops`` products of ``size``×``size`` on each of two devices, concurrently and serialized.

    Args:
        ops: products per device; default 10 (quick mode 4).
        size: matrix side; default 800 (quick mode 500).
        repeat: runs of each variant (medians reported, last traces kept); default 3 (quick mode 2).
        backend: ``"auto"``, ``"engine"`` (two virtual devices) or ``"cuda"`` (needs two GPUs).

    Raises:
        ValueError: bad counts or an unavailable backend.
    """
    ops = positive_int("ops", ops if ops is not None else config.scale(10, 4), maximum=100_000)
    size = positive_int("size", size if size is not None else config.scale(800, 500), maximum=8192)
    repeat = positive_int("repeat", repeat if repeat is not None else config.scale(3, 2), maximum=1000)
    setup = resolve_backend(backend, n_devices=2, min_gpus=2)
    import torch

    if setup.backend == "cuda":
        from d2l_async.capture import capture

        devs = ("cuda:0", "cuda:1")
        mats = {d: stable_matrix(size).to(d) for d in devs}
        concurrent, serialized = _two_device_programs(mats, devs, ops, barrier=torch.cuda.synchronize)

        concurrent()
        t_c = statistics.median(_timed(concurrent) for _ in range(repeat))
        t_s = statistics.median(_timed(serialized) for _ in range(repeat))
        tr_c, tr_s = capture(concurrent, device="cuda"), capture(serialized, device="cuda")
    else:
        from d2l_async.engine import ThreadedEngine

        devs = ("cpu:0", "cpu:1")
        with ThreadedEngine(workers=1, devices=devs) as eng:
            mats = {d: eng.array(stable_matrix(size), device=d, name=f"m{d[-1]}") for d in devs}

            def barrier(d: str) -> None:
                eng.waitall()  # MXNet's barrier (a second call in a row returns at once)

            concurrent, serialized = _two_device_programs(mats, devs, ops, barrier=barrier)

            concurrent()  # warm-up
            times: dict[str, list[float]] = {"c": [], "s": []}
            for _ in range(repeat):
                eng.reset_trace()
                times["c"].append(_timed(concurrent))
                tr_c = eng.trace()
                eng.reset_trace()
                times["s"].append(_timed(serialized))
                tr_s = eng.trace()
            t_c, t_s = statistics.median(times["c"]), statistics.median(times["s"])
    meta = dict(device=setup.device, virtual=setup.virtual, experiment="two_devices")
    return TwoDeviceResult(t_c, t_s, tr_c.with_meta(**meta, mode="concurrent"),
                           tr_s.with_meta(**meta, mode="serialized"), devs, ops, size, setup.backend,
                           setup.device, setup.virtual)


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


def compute_comm_overlap(trace: Any):
    """Seconds during which compute (ops, kernels) and communication (copies) ran at once.

    Every backend event is put on one of two synthetic lanes, ``compute`` or ``communication``,
    and :func:`d2l_async.analysis.overlap` compares them.

    Returns:
        :class:`d2l_async.analysis.Overlap` with ``lane_a="compute"``, ``lane_b="communication"``.
    """
    from d2l_async.analysis import overlap
    from d2l_async.trace import BACKEND_KINDS, Lane, LaneRole, Trace

    work = trace.where(kind=BACKEND_KINDS, lane=[l.name for l in trace.backend_lanes]) if trace.backend_lanes \
        else trace.where(kind=BACKEND_KINDS)
    lanes = np.where(work["kind"] == "copy", "communication", "compute").astype(object)
    cols = {k: v for k, v in work.columns.items()}
    cols["lane"] = lanes
    cols["deps"] = [()] * len(work)  # ids refer to the full trace; drop the edges here
    split = Trace.from_columns(cols, [Lane("compute", LaneRole.BACKEND), Lane("communication", LaneRole.BACKEND)],
                               trace.meta)
    return overlap(split, "compute", "communication")


@dataclass(frozen=True)
class MLPResult:
    """A two-layer MLP trained data-parallel over a host and two devices.

    Attributes:
        losses: the loss of each minibatch (averaged over the two devices).
        seconds: wall time of the training loop, including the final barrier.
        overlap: :func:`compute_comm_overlap` of the trace.
        trace: the trace of the loop.
        roles: device -> its role (``"host: makes minibatches"``, ``"device 1 (virtual)"``, ...).
        batches, batch_size, hidden: the workload.
        backend, device, virtual: where it ran.
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

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(self.roles)


def run_mlp_parallel(
    *, batches: int | None = None, batch_size: int | None = None, hidden: int | None = None,
    features: int = 64, lr: float = 0.01, backend: str = "auto", seed: int = 0,
) -> MLPResult:
    """Train a two-layer MLP on a host and two devices; every step is scheduled by the engine.

    Args:
        batches: minibatches; default 20 (quick mode 6).
        batch_size: rows per minibatch (split in two halves); default 512 (quick mode 256).
        hidden: hidden units; default 512 (quick mode 256).
        features: input features (the target is a fixed random linear map of the input).
        lr: learning rate.
        backend: ``"auto"``, ``"engine"`` (host ``cpu:0`` and virtual devices ``cpu:1``, ``cpu:2``)
            or ``"cuda"`` (host CPU and ``cuda:0``, ``cuda:1``; needs two GPUs).
        seed: seed of the weights and data.

    Raises:
        ValueError: bad sizes or an unavailable backend.
    """
    batches = positive_int("batches", batches if batches is not None else config.scale(20, 6), maximum=100_000)
    batch_size = positive_int("batch_size", batch_size if batch_size is not None else config.scale(512, 256),
                              minimum=2, maximum=1 << 16)
    hidden = positive_int("hidden", hidden if hidden is not None else config.scale(512, 256), maximum=1 << 14)
    features = positive_int("features", features, maximum=1 << 14)
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not 0 < lr < 10:
        raise ValueError(f"lr must be a number in (0, 10), got {lr!r}")
    setup = resolve_backend(backend, n_devices=3, min_gpus=2)
    if setup.backend == "cuda":
        return _mlp_cuda(batches, batch_size, hidden, features, float(lr), seed, setup)
    return _mlp_engine(batches, batch_size, hidden, features, float(lr), seed, setup)


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
                setup: Setup) -> MLPResult:
    import torch

    from d2l_async.engine import ThreadedEngine

    host, devs = "cpu:0", ("cpu:1", "cpu:2")
    w1_0, w2_0, target = _init(features, hidden, seed)
    half = batch_size // 2

    def make_batch(i: int):
        def fill(x: Any, y: Any) -> None:
            g = torch.Generator().manual_seed(seed * 100_003 + i)
            x.copy_(torch.randn(x.shape, generator=g))
            y.copy_(x @ target)
        return fill

    def forward(x: Any, w1: Any, w2: Any, h_pre: Any, out: Any) -> None:
        torch.matmul(x, w1, out=h_pre)
        torch.matmul(h_pre.relu(), w2, out=out)

    def backward_w2(h_pre: Any, out: Any, y: Any, d_out: Any, g2: Any, loss: Any) -> None:
        err = out - y
        loss.fill_((err * err).mean())
        d_out.copy_(2 * err / out.shape[0])
        torch.matmul(h_pre.relu().T, d_out, out=g2)

    def backward_w1(x: Any, h_pre: Any, d_out: Any, w2: Any, g1: Any) -> None:
        torch.matmul(x.T, (d_out @ w2.T) * (h_pre > 0), out=g1)

    def sgd(g: Any, w: Any) -> None:
        w.sub_(0.5 * lr * g)  # g is the sum of the two devices' gradients: average it

    losses_arrays = []
    with ThreadedEngine(workers=1, devices=(host, *devs)) as eng:
        params = {d: (eng.array(w1_0.clone(), device=d, name=f"W1@{d}"),
                      eng.array(w2_0.clone(), device=d, name=f"W2@{d}")) for d in devs}
        eng.waitall()
        eng.reset_trace()
        t0 = time.perf_counter()
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
                total = grads[a][j] + grads[b][j].to(a, name=f"{g}{i}({b})@{a}")
                summed[j] = {a: total, b: total.to(b, name=f"sum {g}{i}@{b}")}
            for d in devs:
                for j in (0, 1):
                    eng.push(sgd, reads=(summed[j][d],), writes=(params[d][j],), name=f"update W{j + 1}")
            losses_arrays.append(batch_losses)
        eng.waitall()
        seconds = time.perf_counter() - t0
        trace = eng.trace()
        losses = tuple(float(np.mean([l.item() for l in pair])) for pair in losses_arrays)
    label = "CPU engine: host cpu:0 and 2 virtual devices cpu:1, cpu:2 (threads)"
    roles = {host: "host: makes minibatches (virtual device)", devs[0]: "device 1 (virtual)",
             devs[1]: "device 2 (virtual)"}
    trace = trace.with_meta(device=label, virtual=True, experiment="mlp_parallel")
    return MLPResult(losses, seconds, compute_comm_overlap(trace), trace, roles, batches, batch_size, hidden,
                     "engine", label, True)


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

    t0 = time.perf_counter()
    train()
    seconds = time.perf_counter() - t0
    loss_list.clear()  # the traced run starts again from the initial weights
    params.update({d: [w1_0.to(d), w2_0.to(d)] for d in devs})
    trace = capture(train, device="cuda").with_meta(device=setup.device, virtual=False, experiment="mlp_parallel")
    losses = tuple(float(np.mean([l.item() for l in pair])) for pair in loss_list)
    roles = {"cpu": "host: makes minibatches", devs[0]: "GPU 0", devs[1]: "GPU 1"}
    return MLPResult(losses, seconds, compute_comm_overlap(trace), trace, roles, batches, batch_size, hidden,
                     "cuda", setup.device, False)
