"""Test traces generated here (never committed), each standing for a public trace that showed a
difference from HTA 0.5.0.  Standard library only: ``data/record_hta_oracle.py`` writes them in an
environment that has HTA and pandas 2.3.3 but not this package.  Every number is deterministic.

``rocm_steps`` -- a ROCm training trace with several profiler steps, spelled as ROCm 6.2's Kineto
writes it (``public/rocm62_mi250_minitoy.json.gz`` is the model): HIP runtime calls
(``hipLaunchKernel``, ``hipMemcpyAsync``) in ``cuda_runtime`` with ``args.stream`` a hex string,
kernels and copies on the GPU's process (``pid`` = the device, ``tid`` = the stream) with
``args.device``, ``args.stream`` and ``args.correlation``, absolute ``ts`` in µs with ns decimals
and ``baseTimeNanoseconds``; and, as ROCm does and CUDA does not, a ``gpu_user_annotation`` copy
of every ``ProfilerStep#N`` on the GPU, written *without* a stream or a correlation id.  The GPU
runs behind (each step launches more work than the GPU finishes in the step's time), so the
GPU's copy of the last step starts well after the CPU's.  HTA takes the GPU's copies for steps
too (they are no kernels to it: no stream, no correlation), so its default analysis
(``include_last_profiler_step=False``) keeps the launches made before the *GPU's* last step
began.  On a public MI300X ResNet trace of this shape HTA gave count/max 5346/1840 where a reader
that dropped the GPU's copies gave 3564/1590.

``small_ids`` -- few launches (correlation ids below 128) among many CPU ops: HTA 0.5.0 stores its
correlation-to-index column in the ids' smallest integer type, and pandas 3 refuses to put a row
index above 127 in it (``transform_correlation_to_index``: "Invalid value ... for dtype 'int8'").

``tie_ranks`` -- an 8-rank job whose launches and kernel starts often fall on the same
microsecond: HTA orders equal times by numpy's unstable sort of each rank's rows, so its max and
mean there depend on the CPU's sort kernel; read as one folder, each rank must give the numbers it
gives alone.

``launch_ex`` -- kernels launched with the driver's ``cuLaunchKernelEx`` (Triton and cuBLASLt on
CUDA 12, as on B200 traces) beside ``cudaLaunchKernel``: HTA 0.5.0 does not count them as launches.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

#: the clock of the model trace (µs, ROCm's), and its base
T0_US = 4_203_669_603_000.0
BASE_NS = 1_735_632_360_000_000_000
CPU_PID, CPU_TID, GPU = 597913, 597913, 2


def rocm_steps_doc(steps: int = 4, launches: int = 60, launch_gap_us: float = 15.0, kernel_us: float = 19.0,
                   step_us: float = 1000.0) -> dict:
    """The ROCm trace (see the module docstring)."""
    ev: list[dict] = [
        {"name": "process_name", "ph": "M", "ts": T0_US, "pid": CPU_PID, "tid": 0, "args": {"name": "python3"}},
        {"name": "process_labels", "ph": "M", "ts": T0_US, "pid": CPU_PID, "tid": 0, "args": {"labels": "CPU"}},
        {"name": "thread_name", "ph": "M", "ts": T0_US, "pid": CPU_PID, "tid": CPU_TID,
         "args": {"name": f"thread {CPU_TID} (python3)"}},
        {"name": "process_name", "ph": "M", "ts": T0_US, "pid": GPU, "tid": 0, "args": {"name": "python3"}},
        {"name": "process_labels", "ph": "M", "ts": T0_US, "pid": GPU, "tid": 0, "args": {"labels": f"GPU {GPU}"}},
        {"name": "thread_name", "ph": "M", "ts": T0_US, "pid": GPU, "tid": 0, "args": {"name": "stream 0 "}},
    ]
    corr, ext = 100, 1
    gpu_free = T0_US
    for k in range(steps):
        t_step = T0_US + 20.0 + k * step_us
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": CPU_PID, "tid": CPU_TID,
                   "ts": round(t_step, 3), "dur": step_us - 1.0, "args": {"External id": ext, "Ev Idx": k}})
        step_ext = ext
        ext += 1
        first_start = None
        for j in range(launches):
            t = t_step + 10.0 + j * launch_gap_us + 0.137
            copy = j % 20 == 19  # now and then a host-to-device copy instead of a kernel
            name = "hipMemcpyAsync" if copy else "hipLaunchKernel"
            op = {"ph": "X", "cat": "cpu_op", "name": "aten::copy_" if copy else "aten::add", "pid": CPU_PID,
                  "tid": CPU_TID, "ts": round(t - 2.0, 3), "dur": 9.5, "args": {"External id": ext}}
            rt = {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": CPU_PID, "tid": CPU_TID, "ts": round(t, 3),
                  "dur": 6.25, "args": {"External id": ext, "stream": "0x0", "cid": 153 if copy else 7,
                                        "correlation": corr}}
            start = max(gpu_free, t + 5.0) + 0.5
            dur = kernel_us / 2 if copy else kernel_us
            dev = {"ph": "X", "cat": "gpu_memcpy" if copy else "kernel",
                   "name": "Memcpy HtoD (Host -> Device)" if copy else "void at::native::vectorized_elementwise_kernel<4>",
                   "pid": GPU, "tid": 0, "ts": round(start, 3), "dur": dur,
                   "args": {"External id": ext, "device": GPU, "stream": 0, "correlation": corr,
                            **({"kind": "HtoD"} if copy else {"grid": [1024, 1, 1], "block": [256, 1, 1]})}}
            ev += [op, rt, dev]
            gpu_free = start + dur
            first_start = start if first_start is None else first_start
            corr += 1
            ext += 1
        # the GPU's copy of the step: from its first work to its last, no stream, no correlation
        ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": f"ProfilerStep#{k}", "pid": GPU, "tid": 0,
                   "ts": round(first_start, 3), "dur": round(gpu_free - first_start, 3),
                   "args": {"External id": step_ext}})
    return {"schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992,
                                  "computeMajor": 9, "computeMinor": 4, "warpSize": 64, "numSms": 304}],
            "record_shapes": 1, "traceEvents": ev, "traceName": "rocm_steps (generated)", "displayTimeUnit": "ms",
            "baseTimeNanoseconds": BASE_NS}


def _cuda_pair(ev: list, corr: int, launch_us: float, start_us: float, dur_us: float, *, name: str = "cudaLaunchKernel",
               stream: int = 7, pid: int = 1, tid: int = 1) -> None:
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid, "ts": launch_us, "dur": 1,
               "args": {"correlation": corr}})
    ev.append({"ph": "X", "cat": "kernel", "name": f"kernel_{corr % 7}", "pid": 0, "tid": stream, "ts": start_us,
               "dur": dur_us, "args": {"correlation": corr, "stream": stream, "device": 0}})


def _steps(ev: list, starts: list[float], dur: float, pid: int = 1, tid: int = 1) -> None:
    for k, t in enumerate(starts):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": pid, "tid": tid,
                   "ts": t, "dur": dur, "args": {}})


def small_ids_doc() -> dict:
    """300 CPU ops and 20 launches with correlation ids 1..20 (see the module docstring)."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1000 + 10 * i, "dur": 5}
          for i in range(300)]
    for j in range(20):
        _cuda_pair(ev, j + 1, 1001 + 10 * j, 1004 + 10 * j + (j % 3), 3)
    return {"traceEvents": ev, "distributedInfo": {"rank": 0, "world_size": 1}}


def tie_ranks_docs(ranks: int = 8, launches: int = 400, seed: int = 5) -> dict[int, dict]:
    """rank -> its trace: whole-µs times, launches every 1-3 µs, kernels of 1-4 µs that start the
    moment they may, so launches and starts share microseconds all the time; three profiler steps."""
    rng = random.Random(seed)
    base = 1_700_000_000_000_000  # absolute µs, as Kineto writes CUDA traces
    out = {}
    for r in range(ranks):
        ev: list = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thread 1 (python)"}}]
        t, gpu = base + 17 * r, base + 17 * r
        corr = 1000 * (r + 1)
        for j in range(launches):
            t += rng.choice((1, 1, 2, 3))
            start = max(gpu, t + rng.choice((0, 0, 1)))
            d = rng.choice((1, 2, 3, 4))
            _cuda_pair(ev, corr + j, t, start, d)
            gpu = start + d
        span = t - (base + 17 * r) + 10
        _steps(ev, [base + 17 * r - 1 + k * span // 3 for k in range(3)], span // 3 - 1)
        out[r] = {"traceEvents": ev, "distributedInfo": {"rank": r, "world_size": ranks, "backend": "nccl"},
                  "baseTimeNanoseconds": 0}
    return out


def launch_ex_doc() -> dict:
    """40 kernels, every fourth launched with ``cuLaunchKernelEx``, two profiler steps."""
    ev: list = []
    gpu = 0
    for j in range(40):
        t = 100 + 10 * j
        start = max(gpu, t + 3)
        _cuda_pair(ev, 500 + j, t, start, 14, name="cuLaunchKernelEx" if j % 4 == 3 else "cudaLaunchKernel")
        gpu = start + 14
    _steps(ev, [90, 290], 199)
    return {"traceEvents": ev, "distributedInfo": {"rank": 0, "world_size": 1}}


#: case -> rank -> document; a case is a folder of one file per rank, as HTA reads it
CASES = {
    "rocm_steps": lambda: {0: rocm_steps_doc()},
    "small_ids": lambda: {0: small_ids_doc()},
    "tie_ranks": tie_ranks_docs,
    "launch_ex": lambda: {0: launch_ex_doc()},
}


def write_case(name: str, folder: Path) -> Path:
    """Write the case ``name`` into ``folder`` (created), one ``rank<R>.json`` per rank."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for r, doc in CASES[name]().items():
        (folder / f"rank{r}.json").write_text(json.dumps(doc))
    return folder
