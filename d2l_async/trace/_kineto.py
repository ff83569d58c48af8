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

Runtime calls are refined by name: :data:`LAUNCH_CALLS` put work on a device queue (one table,
:data:`LAUNCHES`, of kernel and graph launches, asynchronous copies and memsets in CUDA's, HIP's and
MTIA's spellings; HTA 0.5.0 counts only some of them: :data:`NOT_HTA_LAUNCH_CALLS`),
:data:`SYNC_CALLS` make the CPU thread wait.  A launch call whose copy
lands in pageable host memory (:data:`BLOCKING_COPIES`) does both: CUDA returns from that
``cudaMemcpyAsync`` only when the copy is done, so the reader files it as a wait
(:func:`blocking_copy_calls`) and the queue analysis still counts it as a launch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._model import Kind

__all__ = ["CATEGORIES", "COLLECTIVE_PREFIXES", "SKIPPED_CATEGORIES", "LAUNCHES", "LAUNCH_CALLS", "HTA_LAUNCH_CALLS",
           "NOT_HTA_LAUNCH_CALLS", "SYNC_CALLS", "BLOCKING_COPIES", "BLOCKING_COPY_REASON",
           "COLLECTIVE_CATEGORY", "NameConflict", "UnplacedDeviceEvents", "blocking_copy_calls", "category", "device_prefix",
           "device_names", "metadata", "unplaced"]

FRONT, BACK = 0, 1
#: the pseudo-category of a ``user_annotation`` that is a collective (``gloo:all_reduce``)
COLLECTIVE_CATEGORY = "collective"
#: Event-name prefixes of collective-communication work (c10d's record_function labels on the
#: gloo/NCCL threads, NCCL's kernels on a GPU stream).  A backend lane whose events start with one
#: of these, or whose thread name mentions gloo/nccl, is a communication lane.
COLLECTIVE_PREFIXES = ("gloo:", "nccl:", "ucc:", "mpi:", "ncclKernel", "ncclDevKernel", "ncclAllReduce",
                       "record_param_comms")

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

#: Calls that put work on a device's launch queue, by what they do, in each vendor's spelling: a launch
#: is a launch whichever API made it.  CUDA's runtime and driver, ROCm's HIP (which Kineto files under
#: ``cuda_runtime`` too; Triton and aiter launch through ``hipModuleLaunchKernel`` or, on ROCm 7,
#: ``hipDrvLaunchKernelEx``, the driver-style calls, as Triton does through ``cuLaunchKernel(Ex)`` on
#: CUDA), and MTIA.  A graph launch queues every
#: kernel of the graph at its call; a synchronous copy (``cudaMemcpy``) is a wait (:data:`SYNC_CALLS`).
LAUNCHES: dict[str, dict[str, tuple[str, ...]]] = {
    "kernel": {
        "CUDA": ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
                 "cudaLaunchCooperativeKernelMultiDevice", "cuLaunchKernel", "cuLaunchKernelEx",
                 "cuLaunchCooperativeKernel"),
        "HIP": ("hipLaunchKernel", "hipLaunchKernelExC", "hipExtLaunchKernel", "hipLaunchCooperativeKernel",
                "hipLaunchCooperativeKernelMultiDevice", "hipExtLaunchMultiKernelMultiDevice", "hipModuleLaunchKernel",
                "hipDrvLaunchKernelEx", "hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel",
                "hipModuleLaunchCooperativeKernel", "hipModuleLaunchCooperativeKernelMultiDevice"),
        "MTIA": ("runFunction - job_prep_and_submit_for_execution",),
    },
    "graph": {
        "CUDA": ("cudaGraphLaunch", "cuGraphLaunch"),
        "HIP": ("hipGraphLaunch",),
    },
    "copy": {
        "CUDA": ("cudaMemcpyAsync", "cudaMemcpy2DAsync", "cudaMemcpy3DAsync", "cudaMemcpyPeerAsync",
                 "cudaMemcpyToSymbolAsync", "cudaMemcpyFromSymbolAsync", "cuMemcpyAsync", "cuMemcpyHtoDAsync",
                 "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemcpyPeerAsync"),
        "HIP": ("hipMemcpyAsync", "hipMemcpyWithStream", "hipMemcpy2DAsync", "hipMemcpy3DAsync", "hipMemcpyPeerAsync",
                "hipMemcpyToSymbolAsync", "hipMemcpyFromSymbolAsync", "hipMemcpyHtoDAsync", "hipMemcpyDtoHAsync",
                "hipMemcpyDtoDAsync"),
    },
    "memset": {
        "CUDA": ("cudaMemsetAsync", "cudaMemset2DAsync", "cudaMemset3DAsync", "cuMemsetD8Async", "cuMemsetD16Async",
                 "cuMemsetD32Async"),
        "HIP": ("hipMemsetAsync", "hipMemset2DAsync", "hipMemset3DAsync", "hipMemsetD8Async", "hipMemsetD16Async",
                "hipMemsetD32Async"),
    },
}
#: Every name of :data:`LAUNCHES`: the reader files these runtime calls as ``launch``.
LAUNCH_CALLS = frozenset(n for vendors in LAUNCHES.values() for names in vendors.values() for n in names)
#: The launch calls HTA 0.5.0 counts (``TraceSymbolTable.get_runtime_launch_events_query``).
HTA_LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
    "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream",
    "runFunction - job_prep_and_submit_for_execution",
})
#: Launch calls HTA 0.5.0 does not count: among them CUDA 12's ``cuLaunchKernelEx`` (Triton and cuBLASLt:
#: 220 of the 929 launches of a B200 training step), ROCm's ``hipModuleLaunchKernel`` (Triton and aiter:
#: 2,317 of the 8,066 device ops of an xDiT SD3.5 trace on an MI300X) and graph launches.  They do put
#: work on the queue, so they count here, and HTA's queue on such a trace is lower: by one queued op
#: (two change points, ``count``) per such launch in its window.  The reader says how many a trace has
#: (``meta["launches_not_in_hta"]``); ``tests/trace/test_hta_oracle.py`` and
#: ``tests/trace/test_vendor_launches.py`` check the difference.
NOT_HTA_LAUNCH_CALLS = LAUNCH_CALLS - HTA_LAUNCH_CALLS
#: Calls that make the CPU thread wait for the device: the frontend is blocked while they run.
SYNC_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
    "cudaMemcpy2D", "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol", "cudaMemset",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpyDtoH", "cuMemcpyHtoD",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
})
#: Ends of ``gpu_memcpy`` names whose ``cudaMemcpyAsync`` holds the CPU until the copy is done: CUDA cannot
#: copy asynchronously into unpinned (pageable) host memory.
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


def blocking_copy_calls(is_copy: np.ndarray, is_launch: np.ndarray, name: Any, flow: np.ndarray,
                        back: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The launch calls whose device work is a copy into pageable host memory (they held the CPU), and
    the reason of each wait: the call and where its copy went (``"cudaMemcpyAsync (Device -> Pageable)"``).

    ``is_copy`` and ``is_launch`` mark the reader's copies and launch calls, ``name[i]`` is row i's
    name, ``flow`` its flow id and ``back`` marks the device rows; a call and its copy share a flow
    id.  The reader files these calls as waits (``block``); the queue analysis still counts them as
    the launch calls they are (HTA selects launches by name, ``_queue.py``).
    """
    copies = np.flatnonzero(back & is_copy & (flow >= 0))
    ends: dict[int, str] = {}
    for i in copies.tolist():
        end = next((e for e in BLOCKING_COPIES if str(name[i]).endswith(e)), None)
        if end is not None:
            ends[int(flow[i])] = end
    if not ends:
        return np.zeros(0, dtype=np.int64), []
    calls = np.flatnonzero(~back & is_launch & (flow >= 0))
    calls = calls[np.fromiter((f in ends for f in flow[calls].tolist()), dtype=bool, count=len(calls))]
    return calls, [f"{name[i]} {ends[int(flow[i])]}" for i in calls.tolist()]


def is_mtia_copy(name: str) -> bool:
    return name.startswith(_MTIA_COPY_PREFIX)


def device_prefix(cats: set[str]) -> str:
    """How the trace's device lanes are named: ``"mtia"`` for MTIA traces, else ``"cuda"``
    (ROCm builds of PyTorch call their GPUs ``cuda`` too)."""
    return "mtia" if "mtia_ccp_events" in cats else "cuda"


class NameConflict(UserWarning):
    """A trace file names one process twice, differently (the message says which)."""


def metadata(f: Any) -> tuple[dict[tuple[Any, Any], str], set[Any], list[str]]:
    """Thread names by (pid, tid), the pids whose process is a device (``GPU 0``, ``MTIA 9``), and
    the names that conflict: a pid with two different ``process_name``s, one sentence each."""
    names: dict[tuple[Any, Any], str] = {}
    device_pids: set[Any] = set()
    processes: dict[Any, str] = {}
    conflicts: list[str] = []
    m = f.ph.code_of("M")
    rows = np.flatnonzero(f.ph.codes == m).tolist() if m >= 0 else []
    arg_name, arg_labels = f.args["name"], f.args["labels"]
    for i in rows:
        what = f.name[i]
        if what == "thread_name":
            tname, key = arg_name.get(i), (f.pid[i], f.tid[i])
            if not tname:
                continue
            # Kineto names a thread twice as a rule: by the process's name when it saw the thread
            # first, then by the name the thread gave itself (pt_gloo_runloop, pt_autograd_0):
            # the latter is kept, and a rename is no conflict
            if not (key in names and str(tname).endswith("(python)")):
                names[key] = str(tname)
        elif what in ("process_labels", "process_name"):
            label = arg_labels.get(i) if what == "process_labels" else arg_name.get(i)
            if isinstance(label, str) and label.startswith(_DEVICE_PROCESS):
                device_pids.add(f.pid[i])
            if what == "process_name" and isinstance(label, str) and label:
                old = processes.setdefault(f.pid[i], label)
                if old != label:
                    conflicts.append(f"process {f.pid[i]} is named both {old!r} and {label!r} (process_name): "
                                     "two processes' events under one pid, or a file edited by hand")
    return names, device_pids, conflicts


def unplaced(f: Any, x_idx: np.ndarray, canon: dict[int, Any], device_pids: set[Any]) -> list[str]:
    """Unknown categories whose slices sit on a device (``args.stream`` or a ``GPU n`` process);
    ``canon``: cat code -> its :data:`CATEGORIES` key or None."""
    cats = f.cat.categories
    unknown = [k for k, c in canon.items()
               if c is None and isinstance(cats[k], str) and cats[k] not in SKIPPED_CATEGORIES]
    if not unknown:
        return []
    codes = f.cat.codes[x_idx]
    rows = x_idx[np.isin(codes, unknown)]
    if not len(rows):
        return []
    streams = np.asarray(f.args["stream"])[rows]
    on_device = np.fromiter((s is not None and s != -1 for s in streams.tolist()), dtype=bool, count=len(rows))
    if device_pids:
        pid_codes = [k for k, p in enumerate(f.pid.categories.tolist()) if _hashable(p) and p in device_pids]
        on_device |= np.isin(f.pid.codes[rows], pid_codes)
    return sorted({str(cats[k]) for k in f.cat.codes[rows[on_device]].tolist()})


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def device_names(top: dict[str, Any]) -> str:
    props = top.get("deviceProperties") or []
    if not isinstance(props, list):
        return ""
    return ", ".join(dict.fromkeys(str(p.get("name", "?")) for p in props if isinstance(p, dict)))
