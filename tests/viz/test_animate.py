from __future__ import annotations

import numpy as np
import pytest
from viz_traces import engine_like

from d2l_async.viz import animate_timeline, queue_at


def test_frames_reveal_the_trace_up_to_their_time():
    tr = engine_like(30)
    fig = animate_timeline(tr, max_frames=25)
    assert len(fig.frames) == 25
    t0 = min(np.nanmin(tr["issue"]), tr["start"].min())
    times = np.array([float(f.name) for f in fig.frames])
    assert np.all(np.diff(times) > 0)
    counts = queue_at(tr, times)["cpu:0 worker 0"]
    for k, frame in enumerate(fig.frames):
        curtain, _, now, counter = frame.data
        x_now = (times[k] - t0) * 1e6  # a 100 µs trace is drawn in µs
        assert curtain.x[0] == pytest.approx(x_now)  # everything right of "now" is hidden
        assert now.x[0] == pytest.approx(x_now)
        assert counter.y[0] == counts[k]
        assert f"{int(counts[k])} queued" in counter.text[0]


def test_queue_at_counts_issued_but_not_started():
    tr = engine_like(3)  # issues at 0, 2, 4 µs; starts at 3, 8, 13 µs
    q = queue_at(tr, np.array([-1.0, 1e-6, 2.5e-6, 5e-6, 20e-6]))["cpu:0 worker 0"]
    assert list(q) == [0, 1, 2, 2, 0]


def test_at_most_150_frames_by_default_and_bad_input(empty_trace):
    assert len(animate_timeline(engine_like(400)).frames) <= 150
    assert any("no events" in a.text for a in animate_timeline(empty_trace).layout.annotations)
    with pytest.raises(TypeError, match="Trace"):
        animate_timeline("trace.json")
    with pytest.raises(ValueError, match="max_frames"):
        animate_timeline(engine_like(2), max_frames=1)


def test_the_legend_sits_under_the_animation_not_beside_it(small_trace):
    """At the side, the legend's long names took about 40 % of the width from the timeline; under the
    slider, across the figure, the plots keep the whole width."""
    fig = animate_timeline(small_trace)
    legend = fig.layout.legend
    assert legend.orientation == "h" and legend.y < 0 and legend.x == 0
    # below the play button and the slider (they sit just under the plots, at y -0.02)
    assert legend.y < min(m.y for m in fig.layout.updatemenus) - 0.1
