"""Every Kineto generation and accelerator in public traces loads onto lanes."""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from d2l_async.trace import (BLOCKING_COPIES, CATEGORIES, LAUNCH_CALLS, TraceError, UnplacedDeviceEvents,
                             is_python_lane, launch_calls, read_chrome_trace)

DATA = Path(__file__).parent / "data"
PUBLIC = DATA / "public"


def load(name: str):
    return read_chrome_trace(PUBLIC / f"{name}.json.gz")


def raw(name: str) -> dict:
    import gzip

    return json.loads(gzip.decompress((PUBLIC / f"{name}.json.gz").read_bytes()))


# file -> (backend lanes, device label contains, generation)
EXPECTED = {
    "kineto2021_resnet50_workers4": (["cuda:0 stream 7"], "V100", "Kineto 2020-21"),
    "rocm62_mi250_minitoy": (["cuda:2 stream 0"], "AMD", "Kineto 2021+ (CUDA, ROCm)"),
    "mtia_single_rank": (["mtia:9 (no stream)", "mtia:9 stream 1", "mtia:9 stream 102"], "MTIA", "MTIA"),
    "a100_rank3_of_8": (["cuda:3 stream 7", "cuda:3 stream 20", "cuda:3 stream 21", "cuda:3 stream 22"],
                        "A100", "Kineto 2021+"),
    "triton_example": (["cuda:0 stream 7"], "A100", "Kineto 2022+"),
    "backward_thread": (["cuda:0 stream 7"], "GPU", "Kineto 2021+"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_public_trace_lanes_and_event_counts(name):
    lanes, device, generation = EXPECTED[name]
    t = load(name)
    doc = raw(name)
    events = doc["traceEvents"]
    gpu_lanes = [l.name for l in t.backend_lanes if l.device != "cpu"]
    assert gpu_lanes == lanes
    assert device in t.meta["device"] and "CPU only" not in t.meta["device"]
    assert generation in t.meta["generations"]
    # every slice of a known work category is an event, except the ProfilerStep ranges
    work = [e for e in events if e.get("ph") == "X" and e.get("cat") in CATEGORIES
            and not str(e.get("name", "")).startswith("ProfilerStep#")]
    collectives = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                   and str(e.get("name", "")).startswith(("gloo:", "nccl:"))]
    assert len(t) == len(work) + len(collectives)
    device_cats = {c for c, (role, _, _) in CATEGORIES.items() if role == 1}
    on_device = sum(e.get("cat") in device_cats for e in work)
    assert sum(np.isin(t["lane"], lanes)) == on_device
    launches = sum(e.get("cat") in CATEGORIES and e.get("name") in LAUNCH_CALLS for e in work)
    # a cudaMemcpyAsync into pageable memory is a wait (it held the CPU) that the queue counts as a launch
    held = (t["kind"] == "block") & np.char.endswith(t["reason"].astype(str), BLOCKING_COPIES)
    assert (t["kind"] == "launch").sum() + held.sum() == launches > 0
    assert launch_calls(t).sum() == launches


def test_2021_capitalised_categories_pair_launches_with_kernels():
    t = load("kineto2021_resnet50_workers4")
    kinds = Counter(t["kind"])
    assert kinds["kernel"] == 8868 and kinds["memset"] == 378 and kinds["copy"] == 12
    assert t.meta["unmatched_gpu_ops"] == 0
    assert np.isfinite(t.where(kind="kernel")["issue"]).all()
    # the ProfilerStep ranges (category Operator in 2021) are steps, not ops
    assert len(t.meta["steps"]) == 6 and not any(str(n).startswith("ProfilerStep") for n in t["name"])


def test_mtia_dma_requests_are_copies_and_launches_are_runfunction():
    t = load("mtia_single_rank")
    s1 = t.where(lane="mtia:9 stream 1")
    assert set(s1["kind"]) <= {"kernel", "copy"} and (s1["kind"] == "copy").sum() > 0
    assert all(n.startswith("dma_") for n in s1["name"][s1["kind"] == "copy"])
    launch = t.where(kind="launch")
    assert set(launch["name"]) == {"runFunction - job_prep_and_submit_for_execution"}
    assert len(launch) == 3453 and t.meta["unmatched_launches"] == 0


def test_rocm_hip_calls_launch():
    t = load("rocm62_mi250_minitoy")
    assert set(t.where(kind="launch")["name"]) >= {"hipLaunchKernel", "hipExtModuleLaunchKernel"}
    assert "hipDeviceSynchronize" in set(t.where(kind="block")["name"])


def write(tmp_path, events, **top) -> Path:
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events, **top}))
    return p


def test_a_capitalisation_never_seen_still_loads(tmp_path):
    ev = [{"ph": "X", "cat": "CUDA_RUNTIME", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0, "dur": 1,
           "args": {"correlation": 5}},
          {"ph": "X", "cat": "KERNEL", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 1,
           "args": {"correlation": 5, "stream": 7, "device": 0}}]
    t = read_chrome_trace(write(tmp_path, ev))
    assert [l.name for l in t.backend_lanes] == ["cuda:0 stream 7"] and t["issue"][1] == 0.0


def test_unknown_device_categories_warn_and_are_never_cpu_only(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
          {"ph": "X", "cat": "npu_kernel", "name": "MatMul", "pid": 3, "tid": 2, "ts": 1, "dur": 2,
           "args": {"stream": 2}},
          {"ph": "X", "cat": "hpu_op", "name": "x", "pid": 9, "tid": 1, "ts": 1, "dur": 2},
          {"ph": "M", "name": "process_labels", "pid": 9, "args": {"labels": "HPU 0"}}]
    with pytest.warns(UnplacedDeviceEvents, match=r"\['hpu_op', 'npu_kernel'\]"):
        t = read_chrome_trace(write(tmp_path, ev))
    assert "CPU only" not in t.meta["device"] and "npu_kernel" in t.meta["device"]
    assert t.meta["unplaced_device_events"] == ["hpu_op", "npu_kernel"]
    # an unknown category on a CPU thread is only skipped, silently
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = read_chrome_trace(write(tmp_path, ev[:1] + [{**ev[1], "args": {}, "pid": 1}]))
    assert t.meta["device"] == "CPU only" and t.meta["skipped"] == {"npu_kernel": 1}


def test_same_named_threads_get_distinct_lanes(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": t, "ts": t, "dur": 1} for t in (10, 11, 12)]
    ev += [{"ph": "M", "name": "thread_name", "pid": 1, "tid": t, "args": {"name": "CrBrowserMain"}} for t in (10, 11, 12)]
    t = read_chrome_trace(write(tmp_path, ev))
    assert [l.name for l in t.lanes] == ["CrBrowserMain", "CrBrowserMain (11)", "CrBrowserMain (12)"]


def test_python_call_stack_lanes_of_a_with_stack_trace():
    path = DATA / "with_stack_cpu.json.gz"
    t = read_chrome_trace(path)
    doc = json.loads(__import__("gzip").decompress(path.read_bytes()))
    n_py = sum(e.get("cat") == "python_function" for e in doc["traceEvents"])
    py_lanes = [l for l in t.lanes if is_python_lane(l)]
    assert len(t.where(kind="python")) == n_py > 0
    assert set(t.where(kind="python")["lane"]) == {l.name for l in py_lanes}
    # shown right under the thread they belong to, outermost call first
    names = [l.name for l in t.lanes]
    main = names[0]
    assert names[1:1 + len(py_lanes)] == [f"{main} · py {d}" for d in range(len(py_lanes))]
    top = t.where(lane=f"{main} · py 0")
    assert len(top) == 1 and top["name"][0].endswith("<module>")
    # depth d + 1 lies inside some depth-d call
    for d in range(len(py_lanes) - 1):
        outer, inner = t.where(lane=f"{main} · py {d}"), t.where(lane=f"{main} · py {d + 1}")
        for s, e in zip(inner["start"], inner["end"]):
            assert ((outer["start"] <= s + 1e-9) & (outer["end"] >= e - 1e-9)).any()  # 1 ns of float noise
    # a Python line launched the ops: the step function is on the stack above aten::mm
    assert any("step" in n for n in t.where(lane=f"{main} · py 2")["name"])
    assert len(read_chrome_trace(path, python_stack=False)) == len(t) - n_py


@pytest.mark.parametrize("ts, dur", [(1e308, 1.0), (-1e308, 1.0), (0.0, 1e308)])
def test_huge_times_are_a_clear_error(tmp_path, ts, dur):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1.0},
          {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": ts, "dur": dur}]
    with pytest.raises(TraceError, match=r"t\.json: event '[ab]' has 'ts'/'dur' out of range"):
        read_chrome_trace(write(tmp_path, ev))


@pytest.mark.parametrize("fast", [True, False])
def test_absurdly_deep_json_is_a_clear_error(tmp_path, fast, monkeypatch):
    from d2l_async.trace import _json

    if not fast:
        monkeypatch.setattr(_json, "HAVE_MSGSPEC", False)
    p = tmp_path / "deep.json"
    p.write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    with pytest.raises(TraceError, match="deep.json"):
        read_chrome_trace(p)


def test_fast_and_stdlib_readers_agree(monkeypatch):
    from d2l_async.trace import _json

    if not _json.HAVE_MSGSPEC:
        pytest.skip("msgspec is not installed: only the stdlib reader exists here")
    fast = load("a100_rank3_of_8")
    monkeypatch.setattr(_json, "HAVE_MSGSPEC", False)
    slow = load("a100_rank3_of_8")
    assert fast.lanes == slow.lanes
    for col in fast.columns:
        a, b = fast[col], slow[col]
        assert (np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else a.tolist() == b.tolist()), col


def test_chunked_decoding_gives_the_same_trace(monkeypatch):
    from d2l_async.trace import _json

    if not _json.HAVE_MSGSPEC:
        pytest.skip("msgspec is not installed")
    whole = load("rocm62_mi250_minitoy")
    monkeypatch.setattr(_json, "CHUNK_BYTES", 300)  # slices of a few events, cut between events
    chunked = load("rocm62_mi250_minitoy")
    assert chunked.lanes == whole.lanes and chunked.meta["steps"] == whole.meta["steps"]
    for col in whole.columns:
        a, b = whole[col], chunked[col]
        assert (np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else a.tolist() == b.tolist()), col
