"""A ``cudaMemcpyAsync`` into pageable host memory is a wait when a trace file is read.

CUDA cannot copy asynchronously into memory it has not pinned: the call returns only when every earlier
kernel on the stream and the copy itself are done.  The reader files such a call (its ``gpu_memcpy`` ends
in ``(Device -> Pageable)``) as a ``block`` whose reason names the copy, and the queue analysis still
counts it as the launch call it is (HTA 0.5.0 does; its parity tests are ``tests/analysis/test_queue.py``
and ``tests/trace/test_hta_round_trip.py``).  Before, the reader filed those calls as launches: on the
shipped A100 training step 758 ms of waiting were hidden against the 161 ms reported.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from d2l_async import data
from d2l_async.analysis import blocked_time, queue_length_summary
from d2l_async.trace import (BLOCKING_COPY_REASON, launch_calls, queued_mask, read_chrome_trace,
                             write_chrome_trace)

from .. import _cuda_traces as C

A100_RANK3 = Path(__file__).parent / "data" / "public" / "a100_rank3_of_8.json.gz"


def copy_calls_from_the_file(path: Path) -> tuple[int, float]:
    """The oracle, from the raw JSON: how many ``cudaMemcpyAsync`` calls made a device -> pageable copy,
    and their CPU time in seconds (a call and its copy share ``args.correlation``)."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    pageable = {e["args"]["correlation"] for e in events if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy"
                and e["name"].endswith("(Device -> Pageable)")}
    calls = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"
             and e["name"] == "cudaMemcpyAsync" and e["args"].get("correlation") in pageable]
    return len(calls), sum(float(e["dur"]) for e in calls) / 1e6


def test_a100_training_step_shows_the_wait_in_its_copies():
    trace = data.load_sample("a100_training_step")
    by = blocked_time(trace).set_index("reason")
    count, seconds = copy_calls_from_the_file(data.sample_path("a100_training_step"))
    assert count == 30
    assert int(by.loc[BLOCKING_COPY_REASON, "count"]) == 30
    assert by.loc[BLOCKING_COPY_REASON, "total"] == pytest.approx(seconds, rel=1e-9)
    assert by.loc[BLOCKING_COPY_REASON, "total"] == pytest.approx(0.758, abs=0.001)
    # the waits the file names as such are what they were: 161 ms
    syncs = by.loc[["cudaDeviceSynchronize", "cudaStreamSynchronize"]]
    assert int(syncs["count"].sum()) == 76 and syncs["total"].sum() == pytest.approx(0.161, abs=0.001)
    assert by.index[0] == BLOCKING_COPY_REASON  # the largest cause of waiting in the step
    held = trace["reason"] == BLOCKING_COPY_REASON
    assert set(trace["name"][held]) == {"cudaMemcpyAsync"} and set(trace["kind"][held]) == {"block"}
    assert (trace["flow"][held] >= 0).all()


def test_the_copies_they_issued_still_count_in_the_launch_queue():
    trace = data.load_sample("a100_training_step")
    c = trace.columns
    held = np.flatnonzero(c["reason"] == BLOCKING_COPY_REASON)
    assert launch_calls(trace)[held].all()  # a wait that is a launch call
    copies = np.flatnonzero(np.isin(c["flow"], c["flow"][held]) & (c["kind"] == "copy"))
    assert len(copies) == 30 and queued_mask(trace)[copies].all()
    # HTA 0.5.0's numbers for this stream (tests/analysis/test_queue.py checks every stream against HTA)
    s = queue_length_summary(trace).set_index("stream")
    assert (int(s.loc[27, "count"]), int(s.loc[27, "max"])) == (592, 17)


def test_the_export_keeps_the_waits_and_hta_reads_them_as_launches(tmp_path):
    trace = read_chrome_trace(A100_RANK3)
    assert (trace["reason"] == BLOCKING_COPY_REASON).sum() == copy_calls_from_the_file(A100_RANK3)[0] == 60
    back = read_chrome_trace(write_chrome_trace(trace, tmp_path / "a100.json.gz"))
    for col in ("kind", "reason", "name", "flow"):
        assert list(back[col]) == list(trace[col])
    assert blocked_time(back).equals(blocked_time(trace))
    # what HTA sees in the export: the same calls under cuda_runtime, named as the launch calls they are
    events = json.loads(gzip.decompress((tmp_path / "a100.json.gz").read_bytes()))["traceEvents"]
    held = [e for e in events if e.get("ph") == "X" and e["args"].get("d2l", {}).get("reason") == BLOCKING_COPY_REASON]
    assert len(held) == 60 and {(e["cat"], e["name"]) for e in held} == {("cuda_runtime", "cudaMemcpyAsync")}


def test_only_a_copy_into_pageable_memory_holds_the_cpu(tmp_path):
    f = C.KinetoFile()
    f.kernel(0, 5, 10, 100)
    f.memcpy(6, 120, 110, 5, what="DtoH (Device -> Pageable)")  # returns after the copy: a wait
    f.memcpy(130, 4, 140, 5, what="DtoH (Device -> Pinned)")  # returns at once
    f.memcpy(136, 30, 150, 5, what="HtoD (Pageable -> Device)")  # staged, not a wait for the GPU
    f.memcpy(170, 80, 180, 60, what="DtoH (Device -> Pageable)", call="cudaMemcpy")  # a synchronous copy
    t = f.trace(tmp_path)
    calls = t.where(lane=[lane.name for lane in t.frontend_lanes])
    assert list(zip(calls["name"], calls["kind"], calls["reason"])) == [
        ("cudaLaunchKernel", "launch", ""), ("cudaMemcpyAsync", "block", BLOCKING_COPY_REASON),
        ("cudaMemcpyAsync", "launch", ""), ("cudaMemcpyAsync", "launch", ""), ("cudaMemcpy", "block", "cudaMemcpy")]
    assert blocked_time(t).set_index("reason").loc[BLOCKING_COPY_REASON, "total"] == pytest.approx(120e-6)
    # the launch queue holds the kernel and the three cudaMemcpyAsync copies; HTA leaves out cudaMemcpy's
    q = queued_mask(t)
    assert sorted(t["name"][q]) == sorted([C.MATMUL] + ["Memcpy DtoH (Device -> Pageable)",
                                           "Memcpy DtoH (Device -> Pinned)", "Memcpy HtoD (Pageable -> Device)"])
    assert int(queue_length_summary(t)["max"].max()) == 2  # the kernel and the first copy, both queued
