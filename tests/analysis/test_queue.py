"""Launch-queue length: HTA 0.5.0's numbers on real traces, and hand-checked small cases."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pandas as pd
import pytest

from d2l_async.analysis import SUMMARY_COLUMNS, queue_length_series, queue_length_summary
from d2l_async.data import load_sample, sample_path
from d2l_async.trace import Event, Lane, LaneRole, Trace, TraceError

from ..trace.hta_parity import assert_agrees, assert_same_step_function, hta_summary_rows, our_lanes
from ._traces import FRONT, S1, three_launches

GPU_SAMPLES = ["a100_simple_add", "a100_alexnet", "a100_cuda_event_sync", "a100_nccl_step",
               "a100_training_step", "v100_training_step"]


def row(summary: pd.DataFrame, stream: int) -> pd.Series:
    (i,) = np.flatnonzero(summary["stream"].to_numpy() == stream)
    return summary.iloc[i]


# -- the reference numbers in shared/traces/README.md (HTA 0.5.0 get_queue_length_summary) --------
@pytest.mark.parametrize("name,stream,count,mean,qmax", [
    ("a100_simple_add", 7, 182, 0.9176, 5),
    ("a100_simple_add", 20, 14, 0.5, 1),
    ("a100_alexnet", 7, 182, 3.3462, 18),
    ("a100_alexnet", 20, 14, 0.6429, 2),
])
def test_hta_reference_numbers(name, stream, count, mean, qmax):
    """The README's HTA numbers: count and max always; the mean exactly where HTA's tie order cannot
    move it, within the two extreme orders' means where it can (a100_simple_add's stream 7)."""
    f = our_lanes(load_sample(name), False)[0, stream]
    assert (f.count, f.max) == (count, qmax)
    if f.ties:
        assert round(f.mean_range[0], 4) <= mean <= round(f.mean_range[1], 4)
    else:
        assert round(f.mean, 4) == mean


@pytest.mark.parametrize("name,qmax", [("a100_training_step", 946), ("v100_training_step", 1022)])
def test_deep_queue_maxima(name, qmax):
    """HTA's maxima (the README's); the A100 step's cudaGraphLaunch calls queue kernels that HTA
    does not count, so its whole queue runs deeper here."""
    t = load_sample(name)
    assert our_lanes(t, False)[0, 7].max == qmax
    whole = row(queue_length_summary(t), 7)["max"]
    assert whole > qmax if t.meta.get("launches_not_in_hta") else whole == qmax


# -- HTA itself as the oracle (test-only dependency) ----------------------------------------------
@pytest.fixture(scope="module")
def hta_summaries(tmp_path_factory):
    hta = pytest.importorskip("hta.trace_analysis", reason="holistictraceanalysis is not installed")
    logging.getLogger("hta").setLevel(logging.ERROR)
    out = {}
    for name in GPU_SAMPLES:
        d = tmp_path_factory.mktemp(name)
        shutil.copy(sample_path(name), d)
        ta = hta.TraceAnalysis(trace_dir=str(d))
        s = ta.get_queue_length_summary(ranks=[0])
        s = s.droplevel(0, axis=1).reset_index()
        out[name] = s
        out[name, "rows"] = hta_summary_rows(ta, [0])
        out[name, "series"] = ta.get_queue_length_time_series(ranks=[0])
    return out


@pytest.mark.slow  # runs HTA itself on the trace (the oracle): make test
@pytest.mark.parametrize("name", GPU_SAMPLES)
def test_max_per_stream_equals_hta(hta_summaries, name):
    ours = our_lanes(load_sample(name), False)  # without the launches HTA does not count
    theirs = hta_summaries[name]
    assert sorted(s for _, s in ours) == sorted(int(s) for s in theirs["stream"])
    for _, r in theirs.iterrows():
        assert ours[0, int(r["stream"])].max == int(r["max"]), (name, r["stream"])


@pytest.mark.parametrize("name", GPU_SAMPLES)
def test_the_step_function_equals_htas(hta_summaries, name):
    """The queue length after each instant of HTA's clock, HTA's on any machine: equal to ours."""
    assert_same_step_function(our_lanes(load_sample(name), False), hta_summaries[name, "series"])


@pytest.mark.parametrize("name", GPU_SAMPLES)
def test_count_mean_max_agree_with_hta_with_its_defaults(hta_summaries, name):
    """HTA's defaults (the last ProfilerStep left out) are ours: on every sample count agrees, and
    max and mean as far as HTA's tie order lets them (``tests/trace/hta_parity.py``)."""
    assert_agrees(our_lanes(load_sample(name), False), hta_summaries[name, "rows"])


@pytest.mark.parametrize("name", ["a100_training_step", "v100_training_step", "a100_nccl_step"])
def test_the_last_profiler_step_is_left_out_by_default(name):
    """What include_last_profiler_step=False does: the same as dropping, by hand, the backend
    work issued at or after the last ProfilerStep's start."""
    trace = load_sample(name)
    last = trace.meta["steps"][-1]["start"]
    assert len(trace.meta["steps"]) >= 2
    backend = np.isin(trace["lane"], [l.name for l in trace.backend_lanes])
    trimmed = trace.filter(~(backend & (trace["issue"] >= last)))
    whole = queue_length_summary(trace, include_last_profiler_step=True)
    by_hand = queue_length_summary(trimmed, include_last_profiler_step=True)
    default = queue_length_summary(trace)
    pd.testing.assert_frame_equal(default, by_hand)
    assert (whole["count"].to_numpy() > default["count"].to_numpy()).any()
    with pytest.raises(TypeError, match="True or False"):
        queue_length_summary(trace, include_last_profiler_step="no")


# -- definitions on a trace worked out by hand -----------------------------------------------------
def test_series_by_hand():
    s = queue_length_series(three_launches())
    assert list(s.columns) == ["time", "lane", "stream", "queue_length"]
    assert s["time"].tolist() == [0, 1, 2, 3, 5, 6]
    assert s["queue_length"].tolist() == [1, 2, 3, 2, 1, 0]
    assert set(s["lane"]) == {"cuda:0 stream 1"} and set(s["stream"]) == {1}


def test_in_flight_counts_until_the_end():
    s = queue_length_series(three_launches(), "cuda:0 stream 1", in_flight=True)
    # -1 at ends 5, 6, 10; at t=5 and 6 nothing else happens
    assert s["time"].tolist() == [0, 1, 2, 5, 6, 10]
    assert s["queue_length"].tolist() == [1, 2, 3, 2, 1, 0]


def test_summary_by_hand():
    s = queue_length_summary(three_launches())
    assert list(s.columns) == list(SUMMARY_COLUMNS)
    assert len(s) == 1  # stream 2 had no work
    r = s.iloc[0]
    assert (r["lane"], r["device"], r["stream"], r["count"], r["max"]) == ("cuda:0 stream 1", "cuda:0", 1, 6, 3)
    assert r["mean"] == pytest.approx(9 / 6)
    # levels: 1 on [0,1), 2 on [1,2), 3 on [2,3), 2 on [3,5), 1 on [5,6) -> area 1+2+3+4+1 = 11 over 6 s
    assert r["time_weighted_mean"] == pytest.approx(11 / 6)
    assert r["time_at_max"] == pytest.approx(1.0)
    assert r["span"] == pytest.approx(6.0)
    assert r["fraction_at_max"] == pytest.approx(1 / 6)


def test_a_launch_at_the_same_instant_as_a_start_counts_first():
    """Traces without a profiler clock (engine recordings, hand-made): a launch before a start."""
    ev = [
        Event("frontend", "launch", "cudaLaunchKernel", 0.0, 0.1, flow=1),
        Event("frontend", "launch", "cudaLaunchKernel", 1.0, 1.1, flow=2),
        Event("cuda:0 stream 1", "kernel", "a", 1.0, 2.0, issue=0.0, flow=1),
        Event("cuda:0 stream 1", "kernel", "b", 2.0, 3.0, issue=1.0, flow=2),
    ]
    s = queue_length_series(Trace.from_events(ev, [FRONT, S1]))
    assert s["queue_length"].tolist() == [1, 2, 1, 0]  # b arrived as a left: 2 for an instant
    assert queue_length_summary(Trace.from_events(ev, [FRONT, S1]))["max"].tolist() == [2]


def test_only_launch_calls_fill_the_queue():
    """Work linked to a runtime call that is not a launch, or to a synchronous cudaMemcpy, is not
    counted (as in HTA).  (The reader files every launch call of any vendor as a launch; a graph
    launch is one: ``tests/trace/test_vendor_launches.py``.)"""
    ev = [
        Event("frontend", "launch", "cudaLaunchKernel", 0.0, 0.1, flow=1),
        Event("frontend", "runtime", "cudaStreamWaitEvent", 0.2, 0.3, flow=2),
        Event("frontend", "block", "cudaMemcpy", 0.4, 3.0, flow=3, reason="cudaMemcpy"),
        Event("cuda:0 stream 1", "kernel", "a", 1.0, 2.0, issue=0.0, flow=1),
        Event("cuda:0 stream 1", "kernel", "graph", 2.0, 2.5, issue=0.2, flow=2),
        Event("cuda:0 stream 1", "copy", "Memcpy DtoH", 2.5, 3.0, issue=0.4, flow=3),
    ]
    s = queue_length_summary(Trace.from_events(ev, [FRONT, S1]))
    assert s["count"].tolist() == [2] and s["max"].tolist() == [1]


def test_engine_work_without_flows_counts():
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:1 worker 0", LaneRole.BACKEND, "cpu:1", True, 0)]
    ev = [Event("cpu:1 worker 0", "op", f"op{i}", 10.0 + i, 11.0 + i, issue=float(i)) for i in range(4)]
    s = queue_length_summary(Trace.from_events(ev, lanes))
    assert s["max"].tolist() == [4] and s["count"].tolist() == [8]


def test_cpu_only_trace_gives_an_empty_summary_with_the_columns():
    s = queue_length_summary(load_sample("cpu_only"))
    assert s.empty and list(s.columns) == list(SUMMARY_COLUMNS)
    series = queue_length_series(load_sample("cpu_only"))
    assert series.empty and list(series.columns) == ["time", "lane", "stream", "queue_length"]


def test_lane_argument_is_checked():
    t = three_launches()
    with pytest.raises(TraceError, match="no lane"):
        queue_length_series(t, "cuda:9 stream 9")
    with pytest.raises(ValueError, match="frontend lane"):
        queue_length_series(t, "frontend")
    with pytest.raises(TypeError, match="lane name"):
        queue_length_series(t, 7)
    with pytest.raises(TypeError, match="Trace"):
        queue_length_summary("a100_simple_add")
    assert queue_length_series(t, "cuda:0 stream 2").empty


def test_series_and_summary_agree_on_a_real_trace():
    t = load_sample("a100_alexnet")
    s = queue_length_series(t)
    summ = queue_length_summary(t)
    g = s.groupby("lane")["queue_length"].agg(["count", "mean", "max"])
    for _, r in summ.iterrows():
        assert (g.loc[r["lane"], "count"], g.loc[r["lane"], "max"]) == (r["count"], r["max"])
        assert g.loc[r["lane"], "mean"] == pytest.approx(r["mean"])
    # each lane's series ends empty: everything issued started
    assert (s.groupby("lane")["queue_length"].last() == 0).all()
