"""The figure rules can fail: a long title, overlapping labels, a multi-role timeline without legend."""

from __future__ import annotations

import plotly.graph_objects as go

from d2l_async import viz

from figure_rules import missing_legend, overlapping_labels, problems, title_overflow

LONG = ("CPU profile of a training step: every op ran on the Python thread, no backend queue, "
        "recorded with torch.profiler on 1 usable CPU, load average 3.5, quick mode, 336 events, 3 steps")


def test_an_unwrapped_long_title_overflows_and_a_wrapped_one_fits():
    raw = go.Figure(layout={"title": {"text": LONG}})
    assert title_overflow(raw.to_plotly_json())
    assert not title_overflow(viz.fit_title(go.Figure(layout={"title": {"text": LONG}})).to_plotly_json())


def test_overlapping_annotations_are_found():
    fig = go.Figure(go.Scatter(x=[0, 10], y=[0, 1]))
    fig.add_annotation(x=5, y=0.5, text="waited 12.3 ms at print(z)", showarrow=False)
    fig.add_annotation(x=5.1, y=0.5, text="waited 11.0 ms at z.item()", showarrow=False)
    assert overlapping_labels(fig.to_plotly_json())
    apart = go.Figure(go.Scatter(x=[0, 10], y=[0, 1]))
    apart.add_annotation(x=1, y=0.5, text="a", showarrow=False)
    apart.add_annotation(x=9, y=0.5, text="b", showarrow=False)
    assert not overlapping_labels(apart.to_plotly_json())


def test_scatter_text_labels_that_collide_are_found():
    fig = go.Figure(go.Scatter(x=[0, 0.05, 5], y=[0, 0, 0], mode="markers+text",
                               text=["sum gW20@cpu:1", "W1@cpu:1 (v2)", "far"]))
    assert len(overlapping_labels(fig.to_plotly_json())) == 1


def test_a_multi_role_timeline_without_legend_is_found():
    fig = go.Figure([go.Bar(orientation="h", x=[1], y=[0], name="backward"),
                     go.Bar(orientation="h", x=[1], y=[1], name="all-reduce")])
    assert not missing_legend(fig.to_plotly_json())
    fig.update_layout(showlegend=False)
    assert missing_legend(fig.to_plotly_json())
    assert problems(fig)  # the bundle reports it too
