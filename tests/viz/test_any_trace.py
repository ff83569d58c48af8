"""Every figure builds for any valid trace: zero-length spans, missing issue times, lone events."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from d2l_async import viz
from d2l_async.trace import Event, Lane, LaneRole, Trace

LANES = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, "cpu:0", True, 0),
         Lane("cuda:0 stream 7", LaneRole.BACKEND, "cuda:0", False, 7)]

_event = st.builds(
    lambda lane, kind, s, d, q, nb, r, w: Event(
        lane, kind if lane != "frontend" else ("block" if kind == "op" else "launch"), "e", s, s + d,
        issue=math.nan if q is None or lane == "frontend" else max(0.0, s - q), nbytes=nb,
        reads=r, writes=w, reason="print" if lane == "frontend" else "", source="line 1: print(z)"),
    st.sampled_from([l.name for l in LANES]), st.sampled_from(["op", "kernel", "copy"]),
    st.floats(0, 1e-3, allow_nan=False), st.floats(0, 1e-4, allow_nan=False),
    st.one_of(st.none(), st.floats(0, 1e-4, allow_nan=False)), st.integers(0, 4096),
    st.lists(st.sampled_from("abc"), max_size=2).map(tuple), st.lists(st.sampled_from("abc"), max_size=1).map(tuple))


@settings(max_examples=25, deadline=None)
@given(st.lists(_event, min_size=1, max_size=40), st.sampled_from(["engine", "chrome"]))
def test_every_figure_builds(events, source):
    tr = Trace.from_events(events, lanes=LANES, meta={"source": source})
    figs = [viz.plot_timeline(tr), viz.plot_queue_length(tr, in_flight=True, memory=True), viz.plot_trace(tr),
            viz.plot_blocked_time(tr), viz.animate_timeline(tr, max_frames=10),
            viz.plot_dependency_graph(tr, max_frames=10)]
    for fig in figs:
        fig.to_json()
    assert len(figs[4].frames) <= 10 and len(figs[5].frames) <= 10
    for fig in (figs[0], figs[2]):
        for trace in fig.data:
            if trace.type == "bar":
                assert np.all(np.isfinite(np.asarray(trace.base, dtype=float)))
