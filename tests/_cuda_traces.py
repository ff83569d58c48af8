"""Synthetic Kineto traces of CUDA runs, written as torch 2.11+'s profiler writes them.

No CUDA line of the package can run without a GPU, but every lesson check and analysis reads a
:class:`~d2l_async.trace.Trace`, and a CUDA capture is a Chrome-trace file read back with
:func:`~d2l_async.trace.read_chrome_trace`.  :class:`KinetoFile` writes such a file event by event,
with what Kineto puts in one (checked against the A100 traces in ``d2l_async/data`` and HTA's test
traces):

* the Python thread's ``cpu_op`` slices (``aten::mm``), its ``cuda_runtime`` calls
  (``cudaLaunchKernel``, ``cudaLaunchKernelExC``, ``cudaMemcpyAsync``, ``cudaStreamSynchronize``, ...)
  and ``cuda_driver`` calls (``cuLaunchKernel``, ``cuLaunchKernelEx``: Triton, cuBLASLt on CUDA 12);
* per device (pid = the device index, labelled ``GPU n``) one thread per stream with ``kernel``,
  ``gpu_memcpy`` (``Memcpy DtoH (Device -> Pinned)`` for ``.item()``, which copies into pinned memory and
  then calls ``cudaStreamSynchronize``; ``Memcpy DtoH (Device -> Pageable)`` for ``.cpu()``, with ``bytes``)
  and ``gpu_memset`` slices (Kineto's ``memcpyName``: ``Memcpy {kind} ({src} -> {dst})``);
* ``args.correlation`` joining a call and its device work, ``ac2g`` flow events (``s`` on the call,
  ``f`` on the device slice), ``External id`` linking both to the ``cpu_op``;
* ``cuda_sync`` markers on the device for synchronizing calls;
* times in fractional µs relative to ``baseTimeNanoseconds`` (as torch 2.13's CPU profiler writes them
  here), thread ``thread N (python)`` in process ``python``, ``deviceProperties`` naming the GPUs;
* the launch latency of a real GPU: the run generators start a kernel :data:`LAUNCH_LATENCY_US` after its
  launch call begins when nothing is in its way (a kernel never starts the moment its call returns).

Times given to the methods are µs from the start of the recording.  ``tests/capture/test_capture_real_file.py``
compares this generator with a real CUDA capture once one is committed under ``tests/data/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from d2l_async.trace import Trace, read_chrome_trace

PID, TID = 4242, 4242
BASE_NS = 1_790_857_026_000_000_000  # what torch 2.13 wrote on this machine (Dec 2026)
#: torch 2.13's ``ts`` of a recording's start: fractional µs on a clock relative to ``baseTimeNanoseconds``
TS0 = 5_285_495_519_366.633
MATMUL = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_nn_align4>(Params)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, ...)"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, ...)"
#: µs from a launch call's start to its kernel's start on an idle GPU: the median issue-to-start time of
#: the shipped ``a100_simple_add`` trace is 25.5 µs (a real H200 capture will calibrate it)
LAUNCH_LATENCY_US = 25.0


class KinetoFile:
    """A Kineto Chrome trace built call by call; :meth:`trace` reads it back as the package does."""

    def __init__(self, gpus: tuple[str, ...] = ("NVIDIA H200",)) -> None:
        self.gpus = gpus
        self.events: list[dict[str, Any]] = []
        self._corr = 100
        self._ext = 1
        self._streams: set[tuple[int, int]] = set()

    # -- the Python thread --------------------------------------------------------------------------
    def cpu_op(self, name: str, ts: float, dur: float) -> int:
        """An ATen op on the Python thread; returns its External id (for the calls inside it)."""
        self._ext += 1
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": dur,
                            "args": {"External id": self._ext, "Record function id": 0, "Ev Idx": self._ext}})
        return self._ext

    def runtime(self, name: str, ts: float, dur: float, *, cat: str | None = None) -> int:
        """A runtime/driver call with no device work (``cudaMalloc``, ``cudaEventRecord``, a sync)."""
        self._corr += 1
        cat = cat or ("cuda_driver" if name.startswith("cu") and not name.startswith("cuda") else "cuda_runtime")
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": dur,
                            "args": {"External id": self._ext, "cbid": 0, "correlation": self._corr}})
        return self._corr

    def sync(self, name: str, ts: float, dur: float, *, device: int = 0, stream: int = 7) -> int:
        """A synchronizing call (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
        ``cudaEventSynchronize``) and Kineto's ``cuda_sync`` marker on the device."""
        corr = self.runtime(name, ts, dur)
        kind = {"cudaDeviceSynchronize": "Context Sync", "cudaEventSynchronize": "Event Sync"}.get(name, "Stream Sync")
        # Kineto's CudaSyncActivity::metadataJson: an event sync also names the stream the event was recorded on
        waited = {"wait_on_stream": stream, "wait_on_cuda_event_id": 1} if kind == "Event Sync" else {}
        self.events.append({"ph": "X", "cat": "cuda_sync", "name": kind, "pid": device, "tid": stream,
                            "ts": ts + dur - 1, "dur": 1, "args": {"cuda_sync_kind": kind, **waited, "stream": stream,
                                                                    "correlation": corr, "device": device,
                                                                    "context": 1}})
        return corr

    # -- calls that put work on a device ---------------------------------------------------------------
    def _device_work(self, call: str, ts: float, dur: float, cat: str, name: str, start: float, length: float,
                     device: int, stream: int, extra: dict[str, Any]) -> int:
        corr = self.runtime(call, ts, dur)
        self._streams.add((device, stream))
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": start,
                            "dur": length, "args": {"External id": self._ext, "device": device, "context": 1,
                                                     "stream": stream, "correlation": corr, **extra}})
        self.events.append({"ph": "s", "id": corr, "pid": PID, "tid": TID, "ts": ts, "cat": "ac2g", "name": "ac2g"})
        self.events.append({"ph": "f", "id": corr, "pid": device, "tid": stream, "ts": start, "cat": "ac2g",
                            "name": "ac2g", "bp": "e"})
        return corr

    def kernel(self, ts: float, dur: float, start: float, length: float, *, name: str = MATMUL, device: int = 0,
               stream: int = 7, call: str = "cudaLaunchKernel") -> int:
        """A launch call at ``ts`` (``dur`` µs on the CPU) and its kernel at ``start`` on the device."""
        return self._device_work(call, ts, dur, "kernel", name, start, length, device, stream,
                                 {"queued": 0, "registers per thread": 32, "shared memory": 0, "blocks per SM": 0.01,
                                  "warps per SM": 0.03, "grid": [1, 1, 1], "block": [128, 1, 1],
                                  "est. achieved occupancy %": 0})

    def memcpy(self, ts: float, dur: float, start: float, length: float, *, what: str = "DtoH (Device -> Pageable)",
               nbytes: int = 4, device: int = 0, stream: int = 7, call: str = "cudaMemcpyAsync") -> int:
        """A copy call and its ``gpu_memcpy`` (``what``: ``"HtoD (Pinned -> Device)"``, ``"PtoP (Device ->
        Device)"``, ...)."""
        return self._device_work(call, ts, dur, "gpu_memcpy", f"Memcpy {what}", start, length, device, stream,
                                 {"bytes": nbytes, "memory bandwidth (GB/s)": nbytes / max(length, 1e-3) / 1e3})

    def memset(self, ts: float, dur: float, start: float, length: float, *, nbytes: int = 4096, device: int = 0,
               stream: int = 7) -> int:
        return self._device_work("cudaMemsetAsync", ts, dur, "gpu_memset", "Memset (Device)", start, length, device,
                                 stream, {"bytes": nbytes, "memory bandwidth (GB/s)": 1.0})

    # -- the file --------------------------------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        meta: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "ts": TS0, "pid": PID, "tid": 0, "args": {"name": "python"}},
            {"ph": "M", "name": "process_labels", "ts": TS0, "pid": PID, "tid": 0, "args": {"labels": "CPU"}},
            {"ph": "M", "name": "thread_name", "ts": TS0, "pid": PID, "tid": TID,
             "args": {"name": f"thread {TID} (python)"}},
        ]
        for d in sorted({d for d, _ in self._streams}):
            meta += [{"ph": "M", "name": "process_name", "ts": TS0, "pid": d, "tid": 0, "args": {"name": "python"}},
                     {"ph": "M", "name": "process_labels", "ts": TS0, "pid": d, "tid": 0, "args": {"labels": f"GPU {d}"}},
                     {"ph": "M", "name": "thread_name", "ts": TS0, "pid": d, "tid": -1, "args": {"name": f"Device {d}"}}]
        for d, s in sorted(self._streams):
            meta.append({"ph": "M", "name": "thread_name", "ts": TS0, "pid": d, "tid": s,
                         "args": {"name": f"stream {s} "}})
        props = [{"id": i, "name": g, "totalGlobalMem": 150_000_000_000, "computeMajor": 9, "computeMinor": 0,
                  "numSms": 132} for i, g in enumerate(self.gpus)]
        return {"schemaVersion": 1, "deviceProperties": props, "cupti_version": 24, "cuda_runtime_version": 12080,
                "with_flops": False, "record_shapes": False, "cuda_driver_version": 12080, "trace_id": "0",
                "displayTimeUnit": "ms", "baseTimeNanoseconds": BASE_NS, "traceName": "synthetic.json",
                "traceEvents": meta + [{**e, "ts": round(TS0 + e["ts"], 3)}
                                       for e in sorted(self.events, key=lambda e: (e["ts"], e["ph"] != "X"))]}

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.document()))
        return path

    def trace(self, tmp_path: Path, name: str = "cuda_run.json") -> Trace:
        """The file read back with :func:`read_chrome_trace`, as :func:`d2l_async.capture.capture` does."""
        return read_chrome_trace(self.write(Path(tmp_path) / name))


def as_capture(trace: Trace, device: str = "NVIDIA H200") -> Trace:
    """What :func:`d2l_async.capture.capture` adds to the file it reads (the same function)."""
    from d2l_async.capture import cuda_capture

    return cuda_capture(trace, device)


# -- runs of the chapter's CUDA experiments ------------------------------------------------------------
def two_gpu_products(tmp_path: Path, *, ops: int = 10, serialized: bool = False, call: str = "cudaLaunchKernel"
                     ) -> Trace:
    """``ops`` products launched on ``cuda:0`` and ``ops`` on ``cuda:1`` (notebook 07): side by side, or with
    a ``cudaDeviceSynchronize`` of ``cuda:0`` between the two chains (``serialized``)."""
    f = KinetoFile(("NVIDIA H200", "NVIDIA H200"))
    t, k0 = 10.0, 20.0
    for i in range(ops):  # chain on cuda:0: launches every 5 µs, kernels 100 µs each
        f.cpu_op("aten::mm", t, 4)
        f.kernel(t + 1, 3, k0 + 100 * i, 100, device=0, call=call)
        t += 5
    if serialized:
        f.sync("cudaDeviceSynchronize", t, k0 + 100 * ops - t + 2, device=0)
        t = k0 + 100 * ops + 5
    k1 = t + 10
    for i in range(ops):
        f.cpu_op("aten::mm", t, 4)
        f.kernel(t + 1, 3, k1 + 100 * i, 100, device=1, call=call)
        t += 5
    f.sync("cudaDeviceSynchronize", t, k1 + 100 * ops - t + 2, device=1)
    f.sync("cudaDeviceSynchronize", k1 + 100 * ops + 10, 2, device=0)  # the capture's own
    return as_capture(f.trace(tmp_path, f"two_gpus_{serialized}.json"))


def mlp_two_gpus(tmp_path: Path, *, batches: int = 3) -> Trace:
    """mlp_parallel's CUDA loop as captured: per minibatch each GPU gets its half (a pinned host-to-device
    copy), runs forward and backward (4 kernels of 50 µs), then the gradients cross between the GPUs
    (peer copies) while the other GPU still computes; the loop's synchronizes and the capture's last."""
    f = KinetoFile(("NVIDIA H200", "NVIDIA H200"))
    t = 10.0
    free = {0: 20.0, 1: 20.0}
    for _ in range(batches):
        for d in (0, 1):
            f.cpu_op("aten::to", t, 6)
            f.memcpy(t + 1, 4, free[d], 10, what="HtoD (Pinned -> Device)", nbytes=1 << 20, device=d)
            free[d] += 10
            t += 7
            for _k in range(4):
                f.cpu_op("aten::mm", t, 4)
                f.kernel(t + 1, 3, max(free[d], t + 4), 50, device=d)
                free[d] = max(free[d], t + 4) + 50
                t += 5
            if d == 0:
                free[1] = max(free[1], t)
        for d in (0, 1):  # the gradients to the other GPU: while that one still computes
            f.cpu_op("aten::to", t, 6)
            f.memcpy(t + 1, 4, free[d], 30, what="PtoP (Device -> Device)", nbytes=1 << 20, device=d)
            free[d] += 30
            t += 7
    end = max(free.values())
    f.sync("cudaDeviceSynchronize", t, end - t + 1, device=0)
    f.sync("cudaDeviceSynchronize", end + 2, 1, device=1)
    f.sync("cudaDeviceSynchronize", end + 10, 2)
    return as_capture(f.trace(tmp_path, "mlp_two_gpus.json"))


def barrier_run(tmp_path: Path, *, chain: int = 8, follow: int = 8, product_us: float = 200.0,
                z_after_chain: bool = False, z_behind: bool = False, launch_us: float = 8.0) -> Trace:
    """barriers' CUDA ``wait_to_read`` run as captured: the run's own first ``torch.cuda.synchronize``
    (nothing queued yet), a chain of ``product_us`` products on stream 13, ``z`` on stream 14 and its
    event, the event wait, ``float(z.mean())`` (a copy into pinned memory, then a stream sync), the
    follow-up on stream 14, the run's last synchronize and the capture's own.

    By default ``z`` runs beside the chain and the wait returns at once.  ``z_after_chain``: the CPU
    launches ``z`` only after the chain has ended (a short chain), so neither wait had a chain to skip.
    ``z_behind``: ``z``'s kernel starts only when a running product ends (the products hold every SM).
    ``launch_us``: the CPU's time per product launched (7 µs at least: the aten::mm slice holds its launch call).
    """
    f = KinetoFile()
    f.sync("cudaDeviceSynchronize", 5, 3)  # the run's first line: nothing is queued yet
    t = 20.0
    free = 0.0
    ends = []
    for _ in range(chain):  # products on the long stream
        f.cpu_op("aten::mm", t, launch_us - 2)
        start = max(t + 1 + LAUNCH_LATENCY_US, free)
        f.kernel(t + 1, 4, start, product_us, stream=13)
        free = start + product_us
        ends.append(free)
        t += launch_us
    chain_end = free
    if z_after_chain:
        t = max(t, chain_end + 20)
    f.cpu_op("aten::mul", t, 5)
    z_start = t + 1 + LAUNCH_LATENCY_US
    if z_behind:
        z_start = min((e for e in ends if e >= z_start), default=z_start) + 1
    f.kernel(t + 1, 3, z_start, 2, name=ADD, stream=14)
    z_end = z_start + 2
    t += 8
    f.runtime("cudaEventRecord", t, 2)
    t += 3
    f.sync("cudaEventSynchronize", t, max(z_end - t, 0) + 2, stream=14)  # returns when z is done
    t = max(t, z_end) + 4
    f.cpu_op("aten::item", t, 30)
    copy_at = t + 2 + LAUNCH_LATENCY_US
    f.memcpy(t + 2, 4, copy_at, 3, what="DtoH (Device -> Pinned)", stream=0)
    f.sync("cudaStreamSynchronize", t + 7, copy_at + 3 - (t + 7) + 1, stream=0)
    t = copy_at + 6
    free = t
    for _ in range(follow):  # the follow-up on z's stream, beside the chain
        f.cpu_op("aten::mm", t, launch_us - 2)
        start = max(t + 1 + LAUNCH_LATENCY_US, free)
        f.kernel(t + 1, 4, start, product_us, stream=14)
        free = start + product_us
        t += launch_us
    end = max(chain_end, free)
    f.sync("cudaDeviceSynchronize", t, end - t + 1)  # the run's own last synchronize
    f.sync("cudaDeviceSynchronize", end + 5, 2)  # the capture's
    return as_capture(f.trace(tmp_path, f"barrier_run_{chain}_{product_us}_{z_after_chain}_{z_behind}_{launch_us}.json"))


def increments(tmp_path: Path, *, ops: int = 50, launch_us: float = 5.0, kernel_us: float = 2.0,
               queue_cap: int | None = None, call_us: float | None = None,
               latency_us: float = LAUNCH_LATENCY_US, opening_sync: bool = True) -> Trace:
    """``ops`` ``x += 1`` launches (notebook 05's asynchronous run) between its two synchronizes.

    As ``sync_async``'s traced run does, it opens with ``torch.cuda.synchronize`` (nothing queued yet:
    it returns at once; ``opening_sync=False`` leaves it out) and ends with the run's own synchronize and
    the capture's.

    The CPU spends ``launch_us`` per op: Python and the dispatcher inside ``aten::add_``, then the
    ``cudaLaunchKernel`` call of ``call_us`` (default: the last 3 µs of it, all of it below 4 µs).  A
    kernel of ``kernel_us`` starts ``latency_us`` after its call began, or when the previous kernel ends
    if that is later; with ``kernel_us > launch_us`` the queue grows.  With ``queue_cap``, launch number
    ``queue_cap + 1`` and later wait inside ``cudaLaunchKernel`` until a slot frees (an earlier kernel
    starts: the launch queue's cap)."""
    call_us = min(3.0, launch_us - 1) if call_us is None else call_us
    f = KinetoFile()
    if opening_sync:
        f.sync("cudaDeviceSynchronize", 5, 3)  # the run's first line: nothing is queued yet
    t, free = 10.0, 10.0
    starts: list[float] = []
    for i in range(ops):
        call_at = t + launch_us - 0.5 - call_us  # the dispatcher's work comes first
        call = call_us
        if queue_cap is not None and i >= queue_cap:
            slot = starts[i - queue_cap]  # a slot frees when an earlier kernel starts
            call = max(call, slot - call_at + 1)
        f.cpu_op("aten::add_", t, call_at + call + 0.25 - t)
        start = max(call_at + latency_us, free)
        f.kernel(call_at, call, start, kernel_us, name=ADD)
        starts.append(start)
        free = start + kernel_us
        t = call_at + call + 0.5
    f.sync("cudaDeviceSynchronize", t, max(free - t, 1) + 1)
    f.sync("cudaDeviceSynchronize", max(free, t) + 5, 2)
    return as_capture(f.trace(tmp_path, f"increments_{ops}_{launch_us}_{kernel_us}_{queue_cap}_{call_us}_"
                                        f"{latency_us}_{opening_sync}.json"))


#: the demo's lines (blockers.BLOCKER_DEMO on CUDA), the ATen op that copies, and where the copy lands:
#: ``.item()``, ``float()`` and ``if`` copy into pinned memory (``_local_scalar_dense_cuda``) and then
#: synchronize the stream; ``.cpu()`` copies into pageable memory (the call itself waits), then synchronizes
#: too; ``print`` of a CUDA tensor reads values with such scalar copies (one here)
DEMO_COPIES = (("print", "aten::_local_scalar_dense", "Pinned"), ("item", "aten::item", "Pinned"),
               ("asnumpy", "aten::_to_copy", "Pageable"), ("numpy", "aten::_to_copy", "Pageable"),
               ("float", "aten::item", "Pinned"), ("bool", "aten::is_nonzero", "Pinned"))


def blocker_demo(tmp_path: Path) -> Trace:
    """blockers' CUDA demo as captured: ``b = b + 1`` then a blocker, six times (:data:`DEMO_COPIES`).

    A copy into pinned memory is a launch that returns at once and a ``cudaStreamSynchronize`` that
    waits for it; a copy into pageable memory holds the CPU inside ``cudaMemcpyAsync`` until it is done,
    and the stream synchronize after it returns at once.  The capture's own synchronize comes last."""
    f = KinetoFile()
    t = 10.0
    for _, op, where in DEMO_COPIES:
        f.cpu_op("aten::add", t, 6)
        f.kernel(t + 1, 4, t + 1 + LAUNCH_LATENCY_US, 3, name=ADD)
        done = t + 1 + LAUNCH_LATENCY_US + 3  # the add's end: the copy waits for it on the stream
        t += 8
        copy_at = max(t + 2 + LAUNCH_LATENCY_US, done)
        if where == "Pinned":
            f.cpu_op(op, t, copy_at + 2 - t + 4)
            f.memcpy(t + 2, 4, copy_at, 2, what="DtoH (Device -> Pinned)", stream=7)
            f.sync("cudaStreamSynchronize", t + 7, copy_at + 2 - (t + 7) + 1)
            t = copy_at + 5
        else:
            f.cpu_op(op, t, copy_at + 2 - t + 6)
            f.memcpy(t + 2, copy_at + 2 - (t + 2) + 1, copy_at, 2, what="DtoH (Device -> Pageable)", nbytes=8,
                     stream=7)
            f.sync("cudaStreamSynchronize", copy_at + 4, 2)
            t = copy_at + 8
        t += 2
    f.sync("cudaDeviceSynchronize", t + 5, 2)
    return as_capture(f.trace(tmp_path, "blocker_demo.json"))


def probe_capture(tmp_path: Path) -> Path:
    """The program ``../shared/gpu/probe.py`` captures on a GPU, written as this module writes traces (the
    file, not a Trace): 300 one-element adds, a synchronize, five 1000x1000 products, ``b.sum().item()``
    (a copy into pinned memory and a stream synchronize), ``big.cpu()`` (4 MiB into pageable memory), a
    product on a side stream, an event recorded there and waited for, the last synchronize.  The test of
    this generator against a real capture compares the two files."""
    f = KinetoFile()
    t, free = 10.0, 0.0
    for _ in range(300):
        f.cpu_op("aten::add", t, 6)
        start = max(t + 3 + LAUNCH_LATENCY_US, free)
        f.kernel(t + 3, 3, start, 1.5, name=ADD)
        free, t = start + 1.5, t + 8
    f.sync("cudaDeviceSynchronize", t, max(free - t, 0) + 2)
    t = max(t, free) + 5
    for _ in range(5):
        f.cpu_op("aten::mm", t, 12)
        start = max(t + 6 + LAUNCH_LATENCY_US, free)
        f.kernel(t + 6, 4, start, 60, name=MATMUL)
        free, t = start + 60, t + 15
    f.cpu_op("aten::sum", t, 8)
    start = max(t + 3 + LAUNCH_LATENCY_US, free)
    f.kernel(t + 3, 3, start, 4, name="void at::native::reduce_kernel<512, 1, ...>(...)")
    free, t = start + 4, t + 10
    f.cpu_op("aten::item", t, free + 10 - t)
    f.cpu_op("aten::_local_scalar_dense", t + 1, free + 8 - t)
    f.memcpy(t + 2, 4, max(t + 2 + LAUNCH_LATENCY_US, free), 2, what="DtoH (Device -> Pinned)", nbytes=4)
    free = max(t + 2 + LAUNCH_LATENCY_US, free) + 2
    f.sync("cudaStreamSynchronize", t + 7, free - (t + 7) + 1)
    t = free + 12
    f.cpu_op("aten::_to_copy", t, 360)
    f.memcpy(t + 4, 340, t + 4 + LAUNCH_LATENCY_US, 300, what="DtoH (Device -> Pageable)", nbytes=4 << 20)
    f.sync("cudaStreamSynchronize", t + 346, 2)
    t += 365
    f.cpu_op("aten::mul", t, 6)
    f.kernel(t + 2, 3, t + 2 + LAUNCH_LATENCY_US, 5, name=ADD, stream=13)
    f.cpu_op("aten::sum", t + 8, 6)
    f.kernel(t + 10, 3, t + 10 + LAUNCH_LATENCY_US + 5, 4, name="void at::native::reduce_kernel<512, 1, ...>(...)",
             stream=13)
    side_end = t + 10 + LAUNCH_LATENCY_US + 9
    t += 16
    f.runtime("cudaEventRecord", t, 2)
    f.sync("cudaEventSynchronize", t + 3, max(side_end - (t + 3), 0) + 1, stream=13)
    t = max(t + 4, side_end + 2)
    f.sync("cudaDeviceSynchronize", t, 2)
    return f.write(Path(tmp_path) / "probe_capture.json")
