"""Reading torch.profiler Chrome traces: lanes, kinds, correlation pairing, times, meta."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from d2l_async.data import SAMPLES, sample_path
from d2l_async.trace import LAUNCH_CALLS, Kind, LaneRole, Trace, read_chrome_trace


def raw_events(name: str) -> list[dict]:
    return json.loads(gzip.decompress(sample_path(name).read_bytes()))["traceEvents"]


def write_json(tmp_path: Path, events, **top) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return path


@pytest.mark.parametrize("name", SAMPLES)
def test_every_sample_loads_with_times_from_zero(name):
    trace = read_chrome_trace(sample_path(name))
    assert isinstance(trace, Trace) and len(trace) > 0
    assert trace["start"].min() == 0.0
    assert np.all(trace["end"] >= trace["start"])
    assert trace.meta["source"] == "chrome"
    assert trace.meta["path"].endswith(f"{name}.json.gz")


def test_lanes_and_kinds_of_the_event_sync_trace():
    trace = read_chrome_trace(sample_path("a100_cuda_event_sync"))
    (gpu,) = trace.backend_lanes
    assert (gpu.name, gpu.device, gpu.stream, gpu.role) == ("cuda:0 stream 7", "cuda:0", 7, LaneRole.BACKEND)
    (cpu,) = trace.frontend_lanes
    assert cpu.name == "thread 948300 (python3.10)"  # from the thread_name metadata
    kinds = dict(zip(trace["name"], trace["kind"]))
    assert kinds["cudaLaunchKernel"] == Kind.LAUNCH.value
    # its copy lands in pageable memory ("Memcpy DtoH (Device -> Pageable)"): the call held the CPU until
    # the copy was done, a wait
    assert kinds["cudaMemcpyAsync"] == Kind.BLOCK.value
    assert kinds["cudaEventQuery"] == Kind.RUNTIME.value
    assert kinds["cudaEventRecord"] == Kind.RUNTIME.value
    blocks = trace.where(kind="block")
    assert sorted(zip(blocks["reason"], blocks["name"])) == [
        ("cudaDeviceSynchronize", "cudaDeviceSynchronize"), ("cudaEventSynchronize", "cudaEventSynchronize"),
        ("cudaMemcpyAsync (Device -> Pageable)", "cudaMemcpyAsync"),
        ("cudaStreamSynchronize", "cudaStreamSynchronize")]
    copy = trace.where(kind="copy")
    assert len(copy) == 1 and copy["nbytes"][0] == 1 and copy["name"][0].startswith("Memcpy DtoH")
    assert sorted(Counter(trace.where(lane="cuda:0 stream 7")["kind"]).items()) == [("copy", 1), ("kernel", 4)]
    # cuda_sync slices on the GPU and the profiler's own span are not work on a lane
    assert trace.meta["skipped"] == {"cuda_sync": 4, "Trace": 1, "user_annotation": 1}
    assert trace.meta["device"] == "NVIDIA A100-PG509-200"


@pytest.mark.parametrize("name", ["a100_simple_add", "a100_cuda_event_sync", "v100_training_step"])
def test_gpu_issue_is_the_start_of_the_correlated_runtime_call(name):
    events = raw_events(name)
    xs = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver",
                                                                        "kernel", "gpu_memcpy", "gpu_memset")]
    t0 = min(e["ts"] for e in xs)
    call_ts = {e["args"]["correlation"]: e["ts"] for e in xs if e["cat"] == "cuda_runtime" and "correlation" in e.get("args", {})}
    gpu = [e for e in xs if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    trace = read_chrome_trace(sample_path(name))
    back = np.isin(trace["lane"], [l.name for l in trace.backend_lanes])
    assert back.sum() == len(gpu)
    got = dict(zip(trace["flow"][back].tolist(), trace["issue"][back].tolist()))
    for e in gpu:
        corr = e["args"]["correlation"]
        if corr in call_ts:
            assert got[corr] == pytest.approx((call_ts[corr] - t0) / 1e6, abs=1e-9)
        else:
            assert np.isnan(got[corr])
    # launches and their GPU op share the flow id; the launch names the GPU it targets
    launches = trace.where(kind="launch")
    paired = np.isin(launches["flow"], trace["flow"][back])
    assert set(launches["device"][paired]) == {"cuda:0"}


def test_unmatched_correlations_are_counted_not_fatal():
    events = raw_events("a100_simple_add")
    gpu_corr = {e["args"]["correlation"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    launches = [e for e in events if e.get("cat") == "cuda_runtime" and e["name"] in LAUNCH_CALLS]
    expected = sum(e["args"]["correlation"] not in gpu_corr for e in launches)
    trace = read_chrome_trace(sample_path("a100_simple_add"))
    assert expected == 2  # two cudaMemsetAsync calls whose memset fell outside the window
    assert trace.meta["unmatched_launches"] == expected
    assert trace.meta["unmatched_gpu_ops"] == 0


def test_gpu_op_without_its_launch(tmp_path):
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 100, "dur": 5,
         "args": {"correlation": 10}},
        {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 110, "dur": 4,
         "args": {"correlation": 10, "stream": 7, "device": 0}},
        {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 120, "dur": 4,
         "args": {"correlation": 99, "stream": 7, "device": 0}},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 1, "tid": 1, "ts": 130, "dur": 1,
         "args": {"correlation": 11}},
    ]
    trace = read_chrome_trace(write_json(tmp_path, events))
    assert trace.meta["unmatched_gpu_ops"] == 1
    assert trace.meta["unmatched_launches"] == 1  # cuLaunchKernel (driver API) is a launch too
    assert list(trace["kind"]) == ["launch", "kernel", "kernel", "launch"]
    np.testing.assert_allclose(trace["issue"], [np.nan, 0.0, np.nan, np.nan])
    np.testing.assert_allclose(trace["start"], [0.0, 10e-6, 20e-6, 30e-6])
    assert trace.lane("thread 1").role is LaneRole.FRONTEND  # no thread_name metadata
    assert trace.meta["device"] == "GPU"


def test_ts_relative_to_base_time(tmp_path):
    trace = read_chrome_trace(sample_path("a100_nccl_step"))
    assert trace.meta["base_time_ns"] == 1711964646000000000
    events = raw_events("a100_nccl_step")
    ts = [e["ts"] for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    first_op = trace.where(kind="op")["start"].min()
    assert first_op == pytest.approx((min(ts) - trace.meta["origin_us"]) / 1e6, abs=1e-9)
    assert 0.5 < trace.duration < 1.0


def test_profiler_steps_are_kept_in_meta():
    events = raw_events("a100_nccl_step")
    steps = sorted((e["ts"], e["name"]) for e in events if str(e.get("name")).startswith("ProfilerStep"))
    trace = read_chrome_trace(sample_path("a100_nccl_step"))
    assert [s["name"] for s in trace.meta["steps"]] == [n for _, n in steps] == ["ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"]
    origin = trace.meta["origin_us"]
    assert [s["start"] for s in trace.meta["steps"]] == pytest.approx([(t - origin) / 1e6 for t, _ in steps])
    assert "steps" not in read_chrome_trace(sample_path("a100_simple_add")).meta


def test_nanosecond_decimals_are_kept():
    trace = read_chrome_trace(sample_path("v100_training_step"))
    us = trace["start"] * 1e6
    assert np.any(np.abs(us - np.round(us)) > 0.1)  # V100 trace has fractional microseconds


def test_cpu_only_trace_has_no_gpu_lanes_only_gloo_communication_threads():
    trace = read_chrome_trace(sample_path("cpu_only"))
    # the 10 gloo:all_reduce ranges are the work of gloo's two communication threads: CPU backend
    # lanes; no GPU lane
    assert [l.device for l in trace.backend_lanes] == ["cpu", "cpu"]
    comm = trace.where(lane=[l.name for l in trace.backend_lanes])
    assert len(comm) == 10 and set(comm["name"]) == {"gloo:all_reduce"}
    assert set(trace["kind"]) == {"op"}
    assert trace.meta["device"] == "CPU only"
    assert trace.meta["skipped"]["user_annotation"] == 1  # the ProfilerStep range


def test_json_array_form_and_plain_file(tmp_path):
    path = tmp_path / "arr.json"
    path.write_text(json.dumps([{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 5, "dur": 1}]))
    trace = read_chrome_trace(path)
    assert len(trace) == 1 and trace["end"][0] == pytest.approx(1e-6)


def test_gzip_detected_from_content_not_suffix(tmp_path):
    path = tmp_path / "no_suffix"
    path.write_bytes(sample_path("cpu_only").read_bytes())
    assert len(read_chrome_trace(path)) == len(read_chrome_trace(sample_path("cpu_only")))


def test_classmethod_entry_point():
    kept = {"cpu_op", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset"}
    expected = sum(e.get("ph") == "X" and e.get("cat") in kept for e in raw_events("a100_cuda_event_sync"))
    assert len(read_chrome_trace(sample_path("a100_cuda_event_sync"))) == expected
