"""Writing Chrome Trace Event JSON that Perfetto opens, and reading it back unchanged."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pandas as pd
import pytest

from d2l_async.analysis import blocked_time, busy_idle, queue_length_series, queue_length_summary
from d2l_async.data import load_sample
from d2l_async.trace import Event, Lane, LaneRole, Trace, TraceError, read_chrome_trace, write_chrome_trace


def engine_like_trace() -> Trace:
    """What an engine recording looks like: virtual device lanes, deps, reads/writes, blocks."""
    lanes = [Lane("frontend", LaneRole.FRONTEND),
             Lane("cpu:1 worker 0", LaneRole.BACKEND, device="cpu:1", virtual=True, stream=0),
             Lane("cpu:1 worker 1", LaneRole.BACKEND, device="cpu:1", virtual=True, stream=1)]
    ev = [
        Event("frontend", "launch", "push a", 0.0, 0.001, device="cpu:1", flow=1, source="cell 1, line 2: a = x + 1"),
        Event("cpu:1 worker 0", "op", "add", 0.002, 0.010, issue=0.0, device="cpu:1", flow=1,
              writes=("a",), reads=("x",), nbytes=4096),
        Event("frontend", "launch", "push b", 0.001, 0.002, device="cpu:1", flow=2),
        Event("cpu:1 worker 1", "op", "mul", 0.010, 0.015, issue=0.001, device="cpu:1", flow=2, deps=(1,),
              reads=("a",), writes=("b",), nbytes=8192),
        Event("frontend", "block", "print", 0.002, 0.015, reason="print", source="cell 1, line 3: print(b)"),
        Event("cpu:1 worker 0", "op", "noissue", 0.016, 0.017),
    ]
    return Trace.from_events(ev, lanes, meta={"source": "engine", "virtual": True, "device": "virtual cpu:1"})


def assert_same(a: Trace, b: Trace) -> None:
    assert a.lanes == b.lanes
    fa, fb = a.to_frame(), b.to_frame()
    assert list(fa.columns) == list(fb.columns)
    for col in fa.columns:
        if fa[col].dtype.kind == "f":
            # the file holds whole nanoseconds (no 977.9999999999999 float noise)
            np.testing.assert_allclose(fa[col].to_numpy(), fb[col].to_numpy(), rtol=0, atol=0.5e-9)
        else:
            assert fa[col].tolist() == fb[col].tolist(), col
    pd.testing.assert_frame_equal(queue_length_summary(a), queue_length_summary(b))
    pd.testing.assert_frame_equal(busy_idle(a), busy_idle(b))
    pd.testing.assert_frame_equal(blocked_time(a), blocked_time(b))


@pytest.mark.parametrize("name", ["a100_simple_add", "a100_cuda_event_sync", "cpu_only"])
def test_round_trip_profiler_traces(tmp_path, name):
    trace = load_sample(name)
    back = read_chrome_trace(write_chrome_trace(trace, tmp_path / "out.json.gz"))
    assert_same(trace, back)
    assert back.meta["unmatched_launches"] == trace.meta["unmatched_launches"]


def test_round_trip_engine_trace(tmp_path):
    trace = engine_like_trace()
    back = read_chrome_trace(write_chrome_trace(trace, tmp_path / "engine.json"))
    assert_same(trace, back)
    assert back.is_virtual and back.meta["source"] == "engine"
    assert back.event(3).deps == (1,) and back.event(3).reads == ("a",)
    assert back.event(4).source == "cell 1, line 3: print(b)"


def test_round_trip_large_trace_keeps_the_queue_summary(tmp_path):
    trace = load_sample("v100_training_step")
    back = read_chrome_trace(write_chrome_trace(trace, tmp_path / "v.json.gz"))
    pd.testing.assert_frame_equal(queue_length_summary(trace), queue_length_summary(back))


def load_doc(path):
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


def test_perfetto_structure(tmp_path):
    trace = engine_like_trace()
    path = write_chrome_trace(trace, tmp_path / "p.json")
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text  # strict JSON, as Perfetto wants
    doc = json.loads(text)
    events = doc["traceEvents"]
    assert all(isinstance(e.get("ph"), str) for e in events)
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == len(trace)
    for e in slices:
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["name"], str) and e["dur"] >= 0 and isinstance(e["ts"], (int, float))
    # every lane is a named thread; every pid a named process; the virtual device says so
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(names.values()) == sorted(l.name for l in trace.lanes)
    procs = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert "cpu:1 (virtual)" in procs
    for e in slices:
        assert names[(e["pid"], e["tid"])] == e["args"]["d2l"]["lane"]
    # flows: one s/f pair per backend event with an issue, s on the frontend at the issue time
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == finishes.keys() and len(starts) == 2
    for fid, s in starts.items():
        f = finishes[fid]
        assert f["bp"] == "e" and s["ts"] <= f["ts"]
        assert names[(s["pid"], s["tid"])] == "frontend"
        assert names[(f["pid"], f["tid"])].startswith("cpu:1 worker")
    assert sorted(s["ts"] for s in starts.values()) == pytest.approx([0.0, 1000.0])
    # counters: queue length of each backend lane with queued work, matching the analysis
    counters = [e for e in events if e["ph"] == "C"]
    assert {c["name"] for c in counters} == {"queue cpu:1 worker 0", "queue cpu:1 worker 1"}
    series = queue_length_series(trace, "cpu:1 worker 0")
    got = [(c["ts"], c["args"]["queue_length"]) for c in counters if c["name"] == "queue cpu:1 worker 0"]
    assert got == [(pytest.approx(t * 1e6), q) for t, q in zip(series["time"], series["queue_length"])]


def test_profiler_trace_flows_start_at_the_launch(tmp_path):
    trace = load_sample("a100_cuda_event_sync")
    doc = load_doc(write_chrome_trace(trace, tmp_path / "e.json.gz"))
    events = doc["traceEvents"]
    # the calls that issued them: four launches and a cudaMemcpyAsync into pageable memory (a wait)
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events
                 if e["ph"] == "X" and e["args"].get("d2l", {}).get("kind") in ("launch", "block")
                 and "correlation" in e["args"]}
    finishes = {e["id"]: e for e in events if e["ph"] == "f"}
    starts = [e for e in events if e["ph"] == "s"]
    assert len(starts) == 5  # 4 kernels and one copy on stream 7
    gpu_by_ts = {(e["pid"], e["tid"], e["ts"]): e for e in events if e["ph"] == "X"}
    for s in starts:
        f = finishes[s["id"]]
        gpu = gpu_by_ts[(f["pid"], f["tid"], f["ts"])]
        assert s["ts"] == pytest.approx(launch_ts[gpu["args"]["correlation"]])


def test_categories_are_kineto_only_for_profiler_traces(tmp_path):
    doc = load_doc(write_chrome_trace(engine_like_trace(), tmp_path / "e.json"))
    assert {e["cat"] for e in doc["traceEvents"] if e["ph"] == "X"} == {"launch", "op", "block"}
    doc = load_doc(write_chrome_trace(load_sample("a100_cuda_event_sync"), tmp_path / "p.json"))
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in slices if "d2l" in e["args"]} == {"cpu_op", "cuda_runtime", "kernel", "gpu_memcpy"}
    assert {e["cat"] for e in slices if "d2l" not in e["args"]} <= {"user_annotation"}  # steps, annotations


def test_write_rejects_non_trace(tmp_path):
    with pytest.raises(TypeError, match="expects a Trace"):
        write_chrome_trace({"traceEvents": []}, tmp_path / "x.json")


def test_write_to_missing_folder_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match="cannot write"):
        write_chrome_trace(engine_like_trace(), tmp_path / "no" / "such" / "x.json")


def test_edited_file_missing_our_record(tmp_path):
    path = write_chrome_trace(engine_like_trace(), tmp_path / "x.json")
    doc = json.loads(path.read_text())
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            del e["args"]["d2l"]
            break
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError, match="args.d2l"):
        read_chrome_trace(path)


def test_nan_issue_survives(tmp_path):
    back = read_chrome_trace(write_chrome_trace(engine_like_trace(), tmp_path / "x.json"))
    assert math.isnan(back.event(5).issue)


def test_times_are_written_in_whole_nanoseconds_and_touching_slices_still_touch(tmp_path):
    trace = load_sample("v100_training_step")
    doc = json.loads(gzip.decompress(write_chrome_trace(trace, tmp_path / "v.json.gz").read_bytes()))
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    for key in ("ts", "dur"):
        vals = np.array([e[key] for e in slices])
        assert np.all(np.abs(vals * 1000 - np.round(vals * 1000)) < 1e-6), key
    # no two slices of one lane overlap in the file unless they overlapped in the trace
    for lane in {l.name for l in trace.backend_lanes}:
        sub = trace.where(lane=lane)
        order = np.argsort(sub["start"], kind="stable")
        gap_trace = sub["start"][order][1:] - sub["end"][order][:-1]
        mine = sorted((e["ts"], e["ts"] + e["dur"]) for e in slices if e["args"].get("d2l", {}).get("lane") == lane)
        gap_file = np.array([b[0] - a[1] for a, b in zip(mine, mine[1:])])
        assert ((gap_file < 0) <= (gap_trace < -1e-9)).all()


def test_infinite_times_are_a_clear_error(tmp_path):
    bad = Trace.from_events([Event("frontend", "op", "x", 0.0, math.inf)])
    with pytest.raises(TraceError, match="cannot write event 'x' on lane 'frontend'"):
        write_chrome_trace(bad, tmp_path / "x.json")
