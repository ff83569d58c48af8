"""Simulated GPUs for the sizing tests: what ``measure_device`` would read on them, and each CUDA lesson's
run at a given size, built from the synthetic captures of ``tests/_cuda_traces.py``.

A :class:`Gpu` is a handful of public numbers (the sources are on each model below):

* the CPU's launch of one ``y = x + 1`` and of one ``a @ a`` (Python, the dispatcher, ``cudaLaunchKernel``:
  3-6 µs for an elementwise op on a fast host, more for a cuBLAS product and on Colab's 2.2 GHz vCPUs);
* the round trip of a synchronize after a launch (the shipped ``a100_cuda_event_sync`` trace: two waits,
  35 µs, about 17 µs each);
* the GPU's effective float32 product rate and memory bandwidth (a share of the datasheet's peak), and the
  shortest kernel (a few µs: the fixed cost of starting one).

Each ``*_run`` function writes the capture the experiment's CUDA branch would take at that size (kernels
start a launch latency after their call, or when the previous one ends) and times it the way the
experiment does, then returns the frozen result the lesson checks read.  The checks themselves are the
package's, unchanged: these tests show what they conclude on a fast and a slow GPU at a given size.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from d2l_async.experiments._common import make_measurement as mm
from d2l_async.experiments.sizing import NUMEL_PROBES, SIDE_PROBES, DeviceTimes

from . import _cuda_traces as C

SPREAD = (0.99, 0.995, 1.0, 1.005, 1.01)  # the runs of one measurement: a GPU's steady timings, 1% apart


@dataclass(frozen=True)
class Gpu:
    name: str
    launch_us: float  # the CPU's launch of y = x + 1
    mm_launch_us: float  # the CPU's launch of a @ a
    round_trip_us: float  # a synchronize after a launch, the launch left out
    flops: float  # effective float32 FLOP/s of a product
    bandwidth: float  # effective bytes/s of an elementwise op (read 4 + write 4 per element)
    floor_us: float  # the shortest kernel
    pageable_bps: float  # a device-to-host copy into pageable memory
    free_bytes: int

    def matmul_us(self, side: int) -> float:
        return max(self.floor_us, 2 * side**3 / self.flops * 1e6)

    def add_us(self, numel: int) -> float:
        return max(self.floor_us, 8 * numel / self.bandwidth * 1e6)

    def times(self) -> DeviceTimes:
        """What ``measure_device`` reads on this GPU (every probe size: it stops early on a real one)."""
        return DeviceTimes(self.name, self.launch_us * 1e-6, self.mm_launch_us * 1e-6, self.round_trip_us * 1e-6,
                           {n: self.matmul_us(n) * 1e-6 for n in SIDE_PROBES},
                           {n: self.add_us(n) * 1e-6 for n in NUMEL_PROBES}, self.free_bytes, "simulated")


#: NVIDIA H200 SXM: 67 TFLOP/s float32, 989 TFLOP/s TF32 tensor cores (dense 494), 4.8 TB/s HBM3e, 141 GB
#: (nvidia.com/en-us/data-center/h200, datasheet).  "The fast GPU": a 1000x1000 product in 15 µs, as with TF32
#: (torch.set_float32_matmul_precision("high")), about a product's launch of 8 µs; 80% of the bandwidth.
H200 = Gpu("NVIDIA H200 (simulated, TF32 products)", 5.0, 8.0, 15.0, 133e12, 0.8 * 4.8e12, 2.0, 25e9, 140 * 10**9)
#: The same GPU with strict float32 products (torch's default): 70% of 67 TFLOP/s, a 1000x1000 product in 43 µs.
H200_FP32 = Gpu("NVIDIA H200 (simulated, float32 products)", 5.0, 8.0, 15.0, 0.7 * 67e12, 0.8 * 4.8e12, 2.0, 25e9,
                140 * 10**9)
#: NVIDIA T4: 8.1 TFLOP/s float32 (65 TFLOP/s only for FP16 tensor cores), 320 GB/s GDDR6, 16 GB
#: (nvidia.com/en-us/data-center/tesla-t4, datasheet); Colab's host: two 2.2 GHz vCPUs, so slower launches and
#: round trips; PCIe 3 x16 for the copies.
T4 = Gpu("Tesla T4 (simulated)", 8.0, 14.0, 30.0, 0.7 * 8.1e12, 0.8 * 320e9, 3.0, 6e9, 15 * 10**9)
GPUS = {"H200": H200, "H200 float32": H200_FP32, "T4": T4}


def _runs(seconds: float) -> list[float]:
    return [seconds * f for f in SPREAD]


# -- 01: asynchrony ----------------------------------------------------------------------------------------
def asynchrony_run(tmp_path: Path, gpu: Gpu, size: int, *, matmuls: int = 10) -> SimpleNamespace:
    """run_asynchrony's CUDA branch: ``matmuls`` products launched, then a synchronize (the captured run)."""
    trace = C.increments(tmp_path, ops=matmuls, launch_us=gpu.mm_launch_us, kernel_us=gpu.matmul_us(size),
                         opening_sync=False)
    work = trace.where(kind="kernel")
    first = float(trace.where(kind="launch")["start"].min())
    synced = float(work["end"].max()) - first + gpu.round_trip_us * 1e-6 - C.LAUNCH_LATENCY_US * 1e-6
    naive = matmuls * gpu.mm_launch_us * 1e-6
    return SimpleNamespace(naive=mm("naive", _runs(naive)), synced=mm("synced", _runs(max(synced, naive))),
                           trace=trace, backend="cuda", machine=None, size=size, matmuls=matmuls)


# -- 03: barriers ------------------------------------------------------------------------------------------
def barriers_run(tmp_path: Path, gpu: Gpu, size: int, *, long_ops: int = 10) -> object:
    """run_barriers' CUDA branch: the chain on one stream, ``z`` on another (waiting behind a running
    product: the worst case), each barrier's time to the next useful statement read from the capture."""
    from d2l_async.experiments import barriers
    from d2l_async.experiments._cuda_why import z_wait

    trace = C.barrier_run(tmp_path, chain=long_ops, follow=long_ops, product_us=gpu.matmul_us(size),
                          launch_us=gpu.mm_launch_us, z_behind=True)
    w = z_wait(trace)
    value = (gpu.launch_us + gpu.round_trip_us) * 1e-6  # float(z.mean()): a launch and a round trip
    narrow = w.wait_end - w.wait_start
    full = max(w.chain_end, w.z_end) - w.wait_start + 2e-6  # a synchronize returns when everything is done
    return barriers.BarrierResult(
        waitall_wait=full, wait_to_read_wait=narrow, waitall_total=2 * w.chain_end, wait_to_read_total=w.chain_end,
        trace_waitall=trace, trace_wait_to_read=trace, long_ops=long_ops, size=size, follow_ops=long_ops,
        backend="cuda", device=gpu.name, virtual=False,
        barrier_names=("torch.cuda.synchronize(device)", "event.synchronize() after z"),
        waitall_next=full + value, wait_to_read_next=narrow + value,
        waitall_next_runs=tuple(_runs(full + value)), wait_to_read_next_runs=tuple(_runs(narrow + value)))


# -- 04: blockers ------------------------------------------------------------------------------------------
def blockers_run(tmp_path: Path, gpu: Gpu, size: int, *, steps: int = 1000) -> object:
    """run_blockers' CUDA branch: the book's product then a conversion, and each conversion per step."""
    from d2l_async.experiments import blockers as B

    launch, trip = gpu.launch_us * 1e-6, gpu.round_trip_us * 1e-6
    conversion = launch + trip  # b.sum() launched, then a copy to the host and a stream synchronize
    product = gpu.matmul_us(size) * 1e-6
    base = mm("no blocker", _runs(launch))
    per = {k: mm(k, _runs(launch + conversion)) for k in B.BLOCKERS}
    book = {"asnumpy": mm("asnumpy", _runs(launch + product + conversion + 4 * size**2 / gpu.pageable_bps)),
            "item": mm("item", _runs(launch + product + launch + conversion))}
    loop = max(1, steps // 4)
    return B.BlockersResult(per, base, book, mm("every", _runs(loop * (2 * launch + conversion))),
                            mm("once", _runs(loop * 2 * launch + conversion)), (), C.blocker_demo(tmp_path), steps,
                            size, "cuda", gpu.name, False, None)


# -- 05: the cost model, the queue, the sweep ----------------------------------------------------------------
def sync_async_run(tmp_path: Path, gpu: Gpu, numel: int, *, ops: int) -> object:
    """run_sync_async's CUDA branch at ``numel`` elements: the traced asynchronous run (launches queue behind
    the GPU up to CUDA's cap) and timings from the book's model with the GPU's own costs."""
    from d2l_async.experiments._cost_model import CostModel, backend_pace
    from d2l_async.experiments._cpu import CpuTimes
    from d2l_async.experiments.sync_async import SyncAsyncResult

    kernel = gpu.add_us(numel)
    trace = C.increments(tmp_path, ops=ops, launch_us=gpu.launch_us, kernel_us=kernel, queue_cap=1024)
    t1, (t2, source) = gpu.launch_us * 1e-6, backend_pace(trace)
    sync = ops * (t1 + gpu.round_trip_us * 1e-6 + max(0.0, kernel - gpu.floor_us) * 1e-6)
    model = CostModel(ops, t1, t2, max(0.0, sync / ops - t1 - t2), source)
    asyn = model.async_pipeline
    cpu = lambda wall: CpuTimes(wall, 0.9 * wall, 0.9 * wall * 1.02)  # noqa: E731 - no worker computes on a GPU
    return SyncAsyncResult(mm("sync", _runs(sync)), mm("async", _runs(asyn)), model, trace, trace, ops, numel, "cuda",
                           gpu.name, False, cpu_sync=cpu(sync), cpu_async=cpu(asyn))


def sweep_run(tmp_path: Path, gpu: Gpu, numels: tuple[int, ...], *, ops: int = 300) -> object:
    from d2l_async.experiments.sync_async import SweepPoint, SyncAsyncSweep

    pts = []
    for n in numels:
        r = sync_async_run(tmp_path, gpu, n, ops=ops)
        pts.append(SweepPoint(ops, n, r.sync.median, r.async_.median, r.model, r.cpu_sync, r.cpu_async))
    return SyncAsyncSweep(tuple(pts), "cuda", gpu.name, False)
