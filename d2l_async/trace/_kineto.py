"""What each Kineto event category means: one table for every profiler generation seen in public
traces (2020–2026), CUDA, ROCm and MTIA.

A torch.profiler trace names the kind of each slice in its ``cat`` field.  The names changed over
the years and differ between accelerators; every one the reader maps lands in :data:`CATEGORIES`::

    generation / accelerator      frontend (CPU thread)                backend (device queue)
    2020–21 Kineto (tb_plugin)    Operator, Runtime, Driver            Kernel, Memcpy, Memset
    2021–26 Kineto, CUDA          cpu_op, cuda_runtime, cuda_driver    kernel, gpu_memcpy, gpu_memset
    ROCm (HIP)                    cpu_op, cuda_runtime (hip* names)    kernel, gpu_memcpy, gpu_memset
    MTIA                          cpu_op, mtia_runtime                 mtia_ccp_events
    Intel XPU                     cpu_op, xpu_runtime, xpu_driver      kernel, gpu_memcpy, gpu_memset
    gloo / NCCL collectives       user_annotation gloo:*, nccl:*  (work of the communication threads)

A category is matched exactly, then case-insensitively (a future capitalisation still loads).
Categories that are not work on a lane are skipped and counted (:data:`SKIPPED_CATEGORIES`).  A
category not in either table whose slices sit on a device (they carry ``args.stream``, or their
process is labelled ``GPU n``/``MTIA n``) cannot be placed: the reader warns with its name
(:class:`UnplacedDeviceEvents`) and the trace never calls itself "CPU only".

Runtime calls are refined by name: :data:`LAUNCH_CALLS` put work on a device queue (HTA 0.5.0's
list, CUDA, ROCm and MTIA), :data:`SYNC_CALLS` make the CPU thread wait.  A launch call whose copy
lands in pageable host memory (:data:`BLOCKING_COPIES`) does both: CUDA returns from that
``cudaMemcpyAsync`` only when the copy is done, so the reader files it as a wait
(:func:`blocking_copy_calls`) and the queue analysis still counts it as a launch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._model import Kind

__all__ = ["CATEGORIES", "SKIPPED_CATEGORIES", "LAUNCH_CALLS", "SYNC_CALLS", "BLOCKING_COPIES", "BLOCKING_COPY_REASON",
           "COLLECTIVE_CATEGORY", "UnplacedDeviceEvents", "blocking_copy_calls", "category", "device_prefix",
           "device_names", "metadata", "unplaced"]

FRONT, BACK = 0, 1
#: the pseudo-category of a ``user_annotation`` that is a collective (``gloo:all_reduce``)
COLLECTIVE_CATEGORY = "collective"

#: category -> (0 frontend / 1 backend, kind, generation it comes from)
CATEGORIES: dict[str, tuple[int, str, str]] = {
    # 2021-2026 Kineto
    "cpu_op": (FRONT, Kind.OP.value, "Kineto 2021+"),
    "cuda_runtime": (FRONT, Kind.RUNTIME.value, "Kineto 2021+ (CUDA, ROCm)"),
    "cuda_driver": (FRONT, Kind.RUNTIME.value, "Kineto 2022+"),
    "kernel": (BACK, Kind.KERNEL.value, "Kineto 2021+"),
    "gpu_memcpy": (BACK, Kind.COPY.value, "Kineto 2021+"),
    "gpu_memset": (BACK, Kind.MEMSET.value, "Kineto 2021+"),
    # 2020-2021 Kineto (pytorch/kineto tb_plugin samples)
    "Operator": (FRONT, Kind.OP.value, "Kineto 2020-21"),
    "Runtime": (FRONT, Kind.RUNTIME.value, "Kineto 2020-21"),
    "Driver": (FRONT, Kind.RUNTIME.value, "Kineto 2020-21"),
    "Kernel": (BACK, Kind.KERNEL.value, "Kineto 2020-21"),
    "Memcpy": (BACK, Kind.COPY.value, "Kineto 2020-21"),
    "Memset": (BACK, Kind.MEMSET.value, "Kineto 2020-21"),
    # other accelerators
    "mtia_runtime": (FRONT, Kind.RUNTIME.value, "MTIA"),
    "mtia_ccp_events": (BACK, Kind.KERNEL.value, "MTIA"),
    "xpu_runtime": (FRONT, Kind.RUNTIME.value, "Intel XPU"),
    "xpu_driver": (FRONT, Kind.RUNTIME.value, "Intel XPU"),
    "hip_runtime": (FRONT, Kind.RUNTIME.value, "ROCm (roctracer)"),
    # gloo:all_reduce & co. (user_annotation ranges of c10d on the communication threads)
    COLLECTIVE_CATEGORY: (FRONT, Kind.OP.value, "c10d collectives"),
}
_LOWER = {k.lower(): k for k in CATEGORIES}

#: categories that are not work on a lane (labels, markers, the profiler's own spans)
SKIPPED_CATEGORIES = frozenset({
    "user_annotation", "gpu_user_annotation", "python_function", "cuda_sync", "Trace", "ac2g",
    "async", "fwdbwd", "cpu_instant_event", "overhead", "cuda_profiler_range", "python", "Python",
    "mtia_user_annotation", "mtia_ccp_events_annotation", "gpu_mem_user_annotation", "privateuse1_runtime",
})

#: Runtime/driver calls that put work on a device's launch queue.  HTA 0.5.0 counts exactly these
#: (``TraceSymbolTable.get_runtime_launch_events_query``), so queue lengths agree with it.
LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
    # the driver's extended launch: Triton and cuBLASLt kernels on CUDA 12 (issue 18; not in HTA 0.5.0's list)
    "cuLaunchKernelEx",
    # ROCm builds of PyTorch
    "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream",
    # MTIA
    "runFunction - job_prep_and_submit_for_execution",
})
#: Calls that make the CPU thread wait for the device: the frontend is blocked while they run.
SYNC_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
    "cudaMemcpy2D", "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol", "cudaMemset",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpyDtoH", "cuMemcpyHtoD",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
})
#: Ends of ``gpu_memcpy`` names whose ``cudaMemcpyAsync`` holds the CPU until the copy is done: CUDA cannot
#: copy asynchronously into unpinned (pageable) host memory (issue 18, finding 8).
BLOCKING_COPIES = ("(Device -> Pageable)",)
#: the ``reason`` of a launch call that held the CPU until its copy into pageable host memory was done
BLOCKING_COPY_REASON = "cudaMemcpyAsync (Device -> Pageable)"
#: process labels of device processes (``GPU 0``, ``MTIA 9``)
_DEVICE_PROCESS = ("GPU", "MTIA", "XPU", "HPU")
#: MTIA's device events that move data (the rest are kernels)
_MTIA_COPY_PREFIX = "dma_"


class UnplacedDeviceEvents(UserWarning):
    """A trace has device events in categories no table entry places (the message names them)."""


def category(cat: object) -> str | None:
    """The :data:`CATEGORIES` key for a file's ``cat`` (exact, then case-insensitive), or None."""
    if cat in CATEGORIES:
        return cat  # type: ignore[return-value]
    if isinstance(cat, str):
        return _LOWER.get(cat.lower())
    return None


def blocking_copy_calls(kind: np.ndarray, name: np.ndarray, flow: np.ndarray,
                        back: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The launch calls whose device work is a copy into pageable host memory (they held the CPU), and
    the reason of each wait: the call and where its copy went (``"cudaMemcpyAsync (Device -> Pageable)"``).

    ``kind``, ``name``, ``flow`` are the reader's columns and ``back`` marks the device rows; a call and its
    copy share a flow id.  The reader files these calls as waits (``block``); the queue analysis still
    counts them as the launch calls they are (HTA selects launches by name, ``_queue.py``).
    """
    copies = np.flatnonzero(back & (kind == Kind.COPY.value) & (flow >= 0))
    ends: dict[int, str] = {}
    for i in copies.tolist():
        end = next((e for e in BLOCKING_COPIES if str(name[i]).endswith(e)), None)
        if end is not None:
            ends[int(flow[i])] = end
    if not ends:
        return np.zeros(0, dtype=np.int64), []
    calls = np.flatnonzero(~back & (kind == Kind.LAUNCH.value) & (flow >= 0))
    calls = calls[np.fromiter((f in ends for f in flow[calls].tolist()), dtype=bool, count=len(calls))]
    return calls, [f"{name[i]} {ends[int(flow[i])]}" for i in calls.tolist()]


def is_mtia_copy(name: str) -> bool:
    return name.startswith(_MTIA_COPY_PREFIX)


def device_prefix(cats: set[str]) -> str:
    """How the trace's device lanes are named: ``"mtia"`` for MTIA traces, else ``"cuda"``
    (ROCm builds of PyTorch call their GPUs ``cuda`` too)."""
    return "mtia" if "mtia_ccp_events" in cats else "cuda"


def metadata(f: Any) -> tuple[dict[tuple[Any, Any], str], set[Any]]:
    """Thread names by (pid, tid) and the pids whose process is a device (``GPU 0``, ``MTIA 9``)."""
    names: dict[tuple[Any, Any], str] = {}
    device_pids: set[Any] = set()
    for i, p in enumerate(f.ph):
        if p != "M":
            continue
        what = f.name[i]
        if what == "thread_name":
            tname, key = f.args["name"][i], (f.pid[i], f.tid[i])
            # Kineto may name a thread twice: by the process's name when it saw the thread
            # first, then by the name the thread gave itself (pt_gloo_runloop): keep the latter
            if tname and not (key in names and str(tname).endswith("(python)")):
                names[key] = str(tname)
        elif what in ("process_labels", "process_name"):
            label = f.args["labels"][i] if what == "process_labels" else f.args["name"][i]
            if isinstance(label, str) and label.startswith(_DEVICE_PROCESS):
                device_pids.add(f.pid[i])
    return names, device_pids


def unplaced(f: Any, x_idx: list[int], cat_x: list[Any], canon: dict[Any, Any], device_pids: set[Any]) -> list[str]:
    """Unknown categories whose slices sit on a device (``args.stream`` or a ``GPU n`` process)."""
    unknown = {c for c, k in canon.items()
               if isinstance(c, str) and k is None and c not in SKIPPED_CATEGORIES and c != "python_function"}
    if not unknown:
        return []
    out = set()
    streams, pids = f.args["stream"], f.pid
    for i, c in zip(x_idx, cat_x):
        if c in unknown and (streams[i] is not None and streams[i] != -1 or pids[i] in device_pids):
            out.add(str(c))
    return sorted(out)


def device_names(top: dict[str, Any]) -> str:
    props = top.get("deviceProperties") or []
    if not isinstance(props, list):
        return ""
    return ", ".join(dict.fromkeys(str(p.get("name", "?")) for p in props if isinstance(p, dict)))
