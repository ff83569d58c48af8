from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from d2l_async.trace import Event, Lane, LaneRole, Trace
from d2l_async.viz import plot_timeline, timeline_data

from viz_traces import engine_like


def _bars(fig):
    return [t for t in fig.data if isinstance(t, go.Bar)]


def test_lanes_in_order_frontend_first_and_virtual_labelled():
    tr = engine_like(4, workers=2)
    fig = plot_timeline(tr)
    assert list(fig.layout.yaxis.ticktext) == ["frontend", "cpu:0 worker 0 (virtual)", "cpu:0 worker 1 (virtual)"]
    assert list(fig.layout.yaxis.tickvals) == [0, 1, 2]
    # the frontend is on top: the y axis runs downwards
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]


def test_bars_sit_at_the_event_times_on_their_lanes(small_trace):
    fig = plot_timeline(small_trace)
    factor = 1e6  # a 20 µs trace is drawn in µs
    assert "(µs)" in fig.layout.xaxis.title.text
    ops = next(b for b in _bars(fig) if b.name == "op")
    tr = small_trace.where(kind="op")
    np.testing.assert_allclose(sorted(ops.base), sorted(tr["start"] * factor))
    np.testing.assert_allclose(sorted(np.asarray(ops.base) + np.asarray(ops.x)), sorted(tr["end"] * factor))
    assert set(ops.y) == {1}
    launches = next(b for b in _bars(fig) if b.name == "launch")
    assert set(launches.y) == {0} and len(launches.base) == 3
    # ops drawn before launches, so launches stay visible on top of frontend ops
    names = [b.name for b in _bars(fig)]
    assert names.index("op") < names.index("launch")


def test_hover_shows_name_reads_writes_and_times(small_trace):
    ops = next(b for b in _bars(plot_timeline(small_trace)) if b.name == "op")
    text = ops.hovertext[0]
    assert "op0" in text and "reads: a" in text and "writes: a0" in text
    assert "issue 0 µs" in text and "start 3" in text and "end 8" in text


def test_connectors_run_from_issue_on_frontend_to_start_on_backend(small_trace):
    fig = plot_timeline(small_trace)
    conn = next(t for t in fig.data if t.name and t.name.startswith("queued"))
    x = np.asarray(conn.x, dtype=float).reshape(-1, 3)
    y = np.asarray(conn.y, dtype=float).reshape(-1, 3)
    ops = small_trace.where(kind="op")
    np.testing.assert_allclose(x[:, 0], ops["issue"] * 1e6)
    np.testing.assert_allclose(x[:, 1], ops["start"] * 1e6)
    assert np.all(y[:, 0] < 0.5) and np.all(y[:, 1] > 0.5)  # frontend row 0 -> backend row 1


def test_blocked_interval_is_shaded_and_labelled_with_its_cause(small_trace):
    fig = plot_timeline(small_trace)
    shade = next(t for t in fig.data if t.name == "frontend blocked")
    blk = small_trace.where(kind="block")
    xs = np.asarray(shade.x, dtype=float)
    assert np.nanmin(xs) == pytest.approx(blk["start"][0] * 1e6)
    assert np.nanmax(xs) == pytest.approx(blk["end"][0] * 1e6)
    assert shade.fill == "toself"
    labels = [a.text for a in fig.layout.annotations]
    assert "print(z) — line 12" in labels


def test_multiple_frontend_threads_connect_through_flow_ids():
    lanes = [Lane("thread 1", LaneRole.FRONTEND), Lane("thread 2", LaneRole.FRONTEND),
             Lane("cuda:0 stream 7", LaneRole.BACKEND, device="cuda:0", stream=7)]
    ev = [Event("thread 2", "launch", "cudaLaunchKernel", 0.0, 1e-6, flow=42),
          Event("cuda:0 stream 7", "kernel", "gemm", 5e-6, 9e-6, issue=0.0, flow=42)]
    data = timeline_data(Trace.from_events(ev, lanes=lanes, meta={"source": "chrome"}))
    assert list(data.connectors["from_row"]) == [1]
    assert list(data.connectors["to_row"]) == [2]


def test_large_trace_merges_bars_and_caps_connectors():
    tr = engine_like(6000)
    data = timeline_data(tr, max_events=500, max_connectors=100)
    assert data.merged and len(data.bars) <= 500
    assert len(data.connectors) == 100 and data.n_connectors == 6000
    assert data.bars["count"].sum() == data.n_events  # every event is in exactly one bar
    for (lane, kind), grp in data.bars.groupby(["lane", "kind"]):
        sel = (tr["lane"] == lane) & (tr["kind"] == kind)
        assert grp["start"].min() == pytest.approx(tr["start"][sel].min())
        assert grp["end"].max() == pytest.approx(tr["end"][sel].max())
    fig = plot_timeline(tr, max_events=500, max_connectors=100)
    assert "merged" in fig.layout.title.subtitle.text and "100 of 6,000" in fig.layout.title.subtitle.text


def test_empty_trace_says_no_events(empty_trace):
    fig = plot_timeline(empty_trace)
    assert any("no events" in a.text for a in fig.layout.annotations)
    assert not fig.data


def test_wrong_type_names_the_expected_type():
    with pytest.raises(TypeError, match="d2l_async.trace.Trace"):
        plot_timeline([1, 2, 3])
    with pytest.raises(ValueError, match="max_events"):
        plot_timeline(engine_like(2), max_events=0)


def _random_trace(draw_events):
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("a", LaneRole.BACKEND), Lane("b", LaneRole.BACKEND)]
    ev = [Event(lane, kind, "x", s, s + d) for lane, kind, s, d in draw_events]
    return Trace.from_events(ev, lanes=lanes)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_events = st.lists(st.tuples(st.sampled_from(["a", "b", "frontend"]), st.sampled_from(["op", "kernel", "launch"]),
                             st.floats(0, 1, allow_nan=False), st.floats(0, 0.05, allow_nan=False)),
                   min_size=1, max_size=300)


@settings(max_examples=60, deadline=None)
@given(_events, st.integers(1, 20))
def test_merged_bars_cover_every_event_of_their_lane_and_kind(events, max_events):
    tr = _random_trace(events)
    data = timeline_data(tr, max_events=max_events, max_connectors=0)
    assert data.bars["count"].sum() == len(tr)
    groups = len(set(zip(tr["lane"], tr["kind"])))
    if len(tr) > max_events:
        assert len(data.bars) <= max(max_events, groups)
    for i in range(len(tr)):
        bars = data.bars[(data.bars["lane"] == tr["lane"][i]) & (data.bars["kind"] == tr["kind"][i])]
        inside = (bars["start"] <= tr["start"][i]) & (bars["end"] >= tr["end"][i])
        assert inside.any(), i
    # bars of one lane and kind never overlap each other
    for _, grp in data.bars.groupby(["lane", "kind"]):
        grp = grp.sort_values("start")
        assert (grp["start"].to_numpy()[1:] >= grp["end"].to_numpy()[:-1]).all() or len(tr) <= max_events
