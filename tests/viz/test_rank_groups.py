"""Figures of several ranks (one above the other) and of a with_stack profile (call-stack lanes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from d2l_async.trace import is_python_lane, merge_ranks, read_chrome_trace, read_trace_dir
from d2l_async.viz import plot_queue_length, plot_timeline, plot_trace
from d2l_async.viz._timeline import PYTHON_STACK_AUTO, timeline_data

DATA = Path(__file__).parents[1] / "trace" / "data"


@pytest.fixture(scope="module")
def two_ranks():
    t = read_chrome_trace(DATA / "public" / "a100_rank3_of_8.json.gz")
    return merge_ranks({0: t, 1: t})


def test_timeline_rows_go_rank_by_rank_with_a_rule_between():
    t = read_trace_dir(DATA / "gloo_pair")
    fig = plot_timeline(t)
    labels = list(fig.layout.yaxis.ticktext)
    ranks = [int(label.split(" · ")[0].removeprefix("rank ")) for label in labels]
    assert ranks == sorted(ranks) and set(ranks) == {0, 1}
    rules = [s for s in fig.layout.shapes if s.type == "line" and s.y0 == s.y1]
    assert [r.y0 for r in rules] == [ranks.index(1) - 0.5]


def test_queue_figure_has_one_panel_per_rank(two_ranks):
    fig = plot_queue_length(two_ranks)
    assert [a.text for a in fig.layout.annotations if a.text.startswith("rank")] == ["rank 0", "rank 1"]
    axes = {tr.yaxis for tr in fig.data}
    assert axes == {"y", "y2"}
    for tr in fig.data:
        rank = int(tr.name.split(" · ")[0].removeprefix("rank "))
        assert tr.yaxis == ("y" if rank == 0 else "y2")
    peaks = [int(tr.name.rsplit("peak ", 1)[1].rstrip(")")) for tr in fig.data]
    assert max(peaks) == 287  # HTA's maximum on stream 7 of this trace, in both ranks


def test_plot_trace_stacks_timeline_and_rank_panels(two_ranks):
    fig = plot_trace(two_ranks, max_events=800)
    yaxes = {tr.yaxis for tr in fig.data}
    assert {"y", "y2", "y3"} <= yaxes


def test_python_stack_lanes_shown_for_small_traces_hidden_on_request():
    t = read_chrome_trace(DATA / "with_stack_cpu.json.gz")
    assert len(t) <= PYTHON_STACK_AUTO
    shown = timeline_data(t)
    assert sum(is_python_lane(l) for l in shown.lanes) > 3 and shown.hidden_python == 0
    hidden = timeline_data(t, python_stack=False)
    assert not any(is_python_lane(l) for l in hidden.lanes)
    assert hidden.hidden_python == int((t["kind"] == "python").sum())
    fig = plot_timeline(t, python_stack=False)
    assert "Python call stack (400 calls) hidden" in fig.layout.title.subtitle.text
    with pytest.raises(TypeError, match="python_stack"):
        timeline_data(t, python_stack="yes")


def test_python_stack_is_off_by_default_in_large_traces(monkeypatch):
    from d2l_async.viz import _timeline

    t = read_chrome_trace(DATA / "with_stack_cpu.json.gz")
    monkeypatch.setattr(_timeline, "PYTHON_STACK_AUTO", len(t) - 1)
    data = _timeline.timeline_data(t)
    assert data.hidden_python > 0 and not any(is_python_lane(l) for l in data.lanes)
    assert np.isin(data.bars["lane"], [l.name for l in data.lanes]).all()
    assert any(is_python_lane(l) for l in _timeline.timeline_data(t, python_stack=True).lanes)


def test_queue_figure_says_when_the_last_profiler_step_is_left_out():
    from d2l_async.analysis import queue_length_summary
    from d2l_async.data import load_sample

    multi = load_sample("a100_training_step")
    fig = plot_queue_length(multi)
    assert "last ProfilerStep is not counted" in fig.layout.title.subtitle.text
    peaks = {tr.name.rsplit(": queued", 1)[0]: int(tr.name.rsplit("peak ", 1)[1].rstrip(")")) for tr in fig.data if "peak" in tr.name}
    table = queue_length_summary(multi).set_index("lane")["max"].to_dict()
    assert peaks == table  # the figure's peaks are the table's (HTA's) maxima
    assert not plot_queue_length(load_sample("a100_simple_add")).layout.title.subtitle.text
