from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
from viz_traces import engine_like

from d2l_async import analysis
from d2l_async.trace import Event, Lane, LaneRole, Trace
from d2l_async.viz import plot_queue_length, plot_trace, queue_data
from d2l_async.viz._queue import CUDA_QUEUE_CAP
from d2l_async.viz._common import decimate_steps


def _cuda_trace(n=5):
    lanes = [Lane("thread 1", LaneRole.FRONTEND), Lane("cuda:0 stream 7", LaneRole.BACKEND, device="cuda:0", stream=7)]
    ev = []
    for i in range(n):
        ev.append(Event("thread 1", "launch", "cudaLaunchKernel", i * 1e-6, i * 1e-6 + 5e-7, flow=i))
        ev.append(Event("cuda:0 stream 7", "kernel", "k", 10e-6 + i * 3e-6, 12e-6 + i * 3e-6, issue=i * 1e-6, flow=i,
                        device="cuda:0"))
    return Trace.from_events(ev, lanes=lanes, meta={"source": "chrome"})


def _hlines(fig):
    return [s for s in fig.layout.shapes if s.type == "line" and s.y0 == s.y1]


def test_step_series_matches_the_analysis(small_trace):
    fig = plot_queue_length(small_trace)
    (series,) = [t for t in fig.data if "queued" in (t.name or "")]
    assert series.line.shape == "hv"
    ref = analysis.queue_length_series(small_trace)
    x = np.asarray(series.x, dtype=float) / 1e6
    y = np.asarray(series.y, dtype=float)
    # at every change of the analysis series the figure shows the same value
    final = ref.groupby("time", sort=True)["queue_length"].last()  # rows sharing a time: the last holds
    for t, q in final.items():
        last = np.flatnonzero(x <= t * (1 + 1e-9))[-1]
        assert y[last] == q, t
    assert y.max() == ref["queue_length"].max() == 2  # pushes every 2 µs, ops take 5 µs
    assert "peak 2" in series.name


def test_in_flight_and_memory_are_optional(small_trace):
    plain = plot_queue_length(small_trace)
    full = plot_queue_length(small_trace, in_flight=True, memory=True)
    assert len(full.data) == len(plain.data) + 2
    mem = next(t for t in full.data if "memory" in t.name)
    assert mem.yaxis == "y2" and "(B)" in mem.name
    assert np.nanmax(np.asarray(mem.y, dtype=float)) == 3 * 8  # three ops of 8 bytes pending at once
    flight = next(t for t in full.data if "in flight" in t.name)
    assert flight.line.dash == "dot"


def test_cap_line_defaults_to_1024_for_cuda_profiles_only(small_trace):
    assert [s.y0 for s in _hlines(plot_queue_length(_cuda_trace()))] == [CUDA_QUEUE_CAP]
    assert _hlines(plot_queue_length(small_trace)) == []  # virtual engine devices have no such cap
    assert [s.y0 for s in _hlines(plot_queue_length(small_trace, cap=64))] == [64]
    assert _hlines(plot_queue_length(_cuda_trace(), cap=None)) == []
    with pytest.raises(ValueError, match="cap"):
        plot_queue_length(small_trace, cap=-1)


def test_decimation_keeps_maxima_and_minima():
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 1, 100_000))
    v = np.cumsum(rng.choice([-1, 1], size=t.size)).astype(float)
    td, vd = decimate_steps(t, v, 500)
    assert len(td) <= 4 * 500 and td[0] == t[0] and td[-1] == t[-1]
    assert vd.max() == v.max() and vd.min() == v.min()
    assert np.all(np.diff(td) >= 0)


def test_queue_data_peak_is_exact_after_decimation():
    tr = engine_like(5000)
    data = queue_data(tr, bins=100)
    lane = "cpu:0 worker 0"
    assert data.peak[lane] == analysis.queue_length_series(tr)["queue_length"].max()
    assert data.queued[lane][1].max() == data.peak[lane]
    assert len(data.queued[lane][0]) <= 4 * 100


def test_plot_trace_stacks_timeline_over_queue_on_one_time_axis(small_trace):
    fig = plot_trace(small_trace)
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    queue = [t for t in fig.data if "queued" in (t.name or "") and t.yaxis == "y2"]
    assert bars and all(b.xaxis == "x" for b in bars) and queue
    assert fig.layout.xaxis.matches == "x2" or fig.layout.xaxis2.matches == "x"
    assert list(fig.layout.yaxis.ticktext)[0] == "frontend"


def test_empty_and_wrong_input(empty_trace):
    assert any("no events" in a.text for a in plot_queue_length(empty_trace).layout.annotations)
    assert any("no events" in a.text for a in plot_trace(empty_trace).layout.annotations)
    with pytest.raises(TypeError, match="Trace"):
        plot_queue_length({"time": [1]})
