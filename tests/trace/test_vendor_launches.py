"""A launch is a launch whichever vendor's API made it: ROCm's HIP calls queue work as CUDA's do,
and HTA 0.5.0's difference (it counts fewer of them) is exactly the one the reader reports."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest

from d2l_async.analysis import queue_length_summary
from d2l_async.trace import LAUNCH_CALLS, Kind, queued_mask, read_chrome_trace
from d2l_async.trace._kineto import HTA_LAUNCH_CALLS, LAUNCHES, NOT_HTA_LAUNCH_CALLS

#: one step of a model: (HIP call, its CUDA twin, the device work it queues: (category, name) per op)
STEP = [
    ("hipLaunchKernel", "cudaLaunchKernel", [("kernel", "elementwise_kernel")]),
    ("hipModuleLaunchKernel", "cuLaunchKernel", [("kernel", "triton_poi_fused_add_0")]),  # Triton, aiter
    ("hipExtModuleLaunchKernel", "cuLaunchKernel", [("kernel", "Cijk_Ailk_Bljk_gemm")]),  # hipBLASLt
    ("hipDrvLaunchKernelEx", "cuLaunchKernelEx", [("kernel", "triton_red_fused_1")]),  # Triton on ROCm 7
    ("hipGraphLaunch", "cudaGraphLaunch", [("kernel", "graph_k0"), ("kernel", "graph_k1")]),
    ("hipMemcpyAsync", "cudaMemcpyAsync", [("gpu_memcpy", "Memcpy HtoD (Host -> Device)")]),
    ("hipMemsetAsync", "cudaMemsetAsync", [("gpu_memset", "Memset (Device)")]),
]


def trace_doc(vendor: str, steps: int = 3) -> dict:
    """``steps`` repetitions of :data:`STEP`, the calls spelled as ``vendor`` ("HIP" or "CUDA") writes
    them; the GPU runs behind, so work queues up.  ROCm 6.2's Kineto files HIP calls under
    ``cuda_runtime`` with the stream as a string of hex (``"0x0"``), its device work on stream 0."""
    ev: list[dict] = [{"name": "process_labels", "ph": "M", "pid": 2, "tid": 0, "args": {"labels": "GPU 2"}}]
    t_cpu, t_gpu, corr = 0.0, 5.0, 100
    for _ in range(steps):
        for hip, cuda, work in STEP:
            call = hip if vendor == "HIP" else cuda
            corr += 1
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": call, "pid": 1, "tid": 1, "ts": t_cpu, "dur": 3.0,
                       "args": {"correlation": corr, **({"stream": "0x0"} if vendor == "HIP" else {})}})
            for cat, name in work:
                t_gpu = max(t_gpu, t_cpu + 4.0)
                stream = 0 if vendor == "HIP" else 7
                ev.append({"ph": "X", "cat": cat, "name": name, "pid": 2, "tid": 7, "ts": t_gpu, "dur": 9.0,
                           "args": {"correlation": corr, "stream": stream, "device": 2}})
                t_gpu += 10.0
            t_cpu += 5.0
    return {"traceEvents": ev}


def write(tmp_path: Path, vendor: str) -> Path:
    p = tmp_path / f"{vendor.lower()}.json"
    p.write_text(json.dumps(trace_doc(vendor)))
    return p


def device_ops(trace) -> np.ndarray:
    return np.isin(trace["lane"], [l.name for l in trace.backend_lanes])


def test_every_hip_launch_call_queues_its_work(tmp_path):
    t = read_chrome_trace(write(tmp_path, "HIP"))
    calls = t["kind"][np.isin(t["name"], [hip for hip, _, _ in STEP])]
    assert calls.tolist() == [Kind.LAUNCH.value] * (3 * len(STEP))
    on_device = device_ops(t)
    assert on_device.sum() == 3 * sum(len(w) for _, _, w in STEP)
    assert (queued_mask(t) == on_device).all()  # every device op, none left out


def test_a_rocm_trace_queues_as_its_cuda_twin(tmp_path):
    hip = queue_length_summary(read_chrome_trace(write(tmp_path, "HIP")))
    cuda = queue_length_summary(read_chrome_trace(write(tmp_path, "CUDA")))
    cols = ["count", "max", "mean", "time_weighted_mean", "hta_ties"]
    assert hip[cols].to_dict("records") == cuda[cols].to_dict("records")
    assert hip["count"].tolist() == [2 * 3 * sum(len(w) for _, _, w in STEP)]


def test_the_table_spells_each_kind_of_launch_for_each_vendor():
    assert set(LAUNCHES) == {"kernel", "graph", "copy", "memset"}
    for what, vendors in LAUNCHES.items():
        assert vendors["CUDA"] and vendors["HIP"], what
    assert {hip for hip, _, _ in STEP} | {cuda for _, cuda, _ in STEP} <= LAUNCH_CALLS


def test_the_reader_counts_the_launches_hta_leaves_out(tmp_path):
    t = read_chrome_trace(write(tmp_path, "HIP"))
    assert t.meta["launches_not_in_hta"] == {"hipModuleLaunchKernel": 3, "hipDrvLaunchKernelEx": 3,
                                             "hipGraphLaunch": 3}


def test_hta_s_own_list_is_the_one_written_here():
    """HTA's launch query, asked about every name of the table: it selects exactly HTA_LAUNCH_CALLS
    (so NOT_HTA_LAUNCH_CALLS is what it leaves out), and names no launch call the table lacks."""
    pytest.importorskip("hta", reason="HolisticTraceAnalysis (the oracle) is not installed")
    from hta.common.trace_symbol_table import TraceSymbolTable

    table = TraceSymbolTable()
    table.add_symbols(sorted(LAUNCH_CALLS))
    query = table.get_runtime_launch_events_query()
    ids = [int(i) for i in re.findall(r"name == (-?\d+)", query)]
    selected = {name for name, i in table.get_sym_id_map().items() if i in ids}
    assert selected == HTA_LAUNCH_CALLS and len(ids) == len(HTA_LAUNCH_CALLS)
    assert NOT_HTA_LAUNCH_CALLS == LAUNCH_CALLS - selected


@pytest.mark.slow  # runs HTA itself (the oracle): make test
def test_hta_counts_two_change_points_fewer_per_op_of_a_launch_it_leaves_out(tmp_path):
    hta = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis (the oracle) is not installed")
    logging.getLogger("hta").setLevel(logging.ERROR)
    write(tmp_path, "HIP")
    ta = hta.TraceAnalysis(trace_dir=str(tmp_path))
    (theirs,) = ta.get_queue_length_summary(ranks=[0]).droplevel(0, axis=1)["count"].tolist()
    (ours,) = queue_length_summary(read_chrome_trace(tmp_path / "hip.json"))["count"].tolist()
    left_out = 3 * sum(len(w) for hip, _, w in STEP if hip in NOT_HTA_LAUNCH_CALLS)
    assert left_out == 12 and ours - theirs == 2 * left_out
