"""In-place figure updates and the display-mode choice."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from d2l_async.widgets import _views as v
from d2l_async.widgets import apply_figure, resolve_mode


def test_apply_figure_keeps_the_widget_and_replaces_data():
    fw = go.FigureWidget(go.Figure(go.Scatter(x=[1, 2], y=[3, 4], marker=dict(color=["red", "blue"]))))
    first = fw.data[0]
    apply_figure(fw, go.Figure(go.Scatter(x=[0, 1, 2], y=[5, 6, 7])))
    assert fw.data[0] is first  # same trace object: updated, not replaced
    assert list(fw.data[0].x) == [0, 1, 2] and list(fw.data[0].y) == [5, 6, 7]
    assert fw.data[0].marker.color is None  # the stale colour array is gone


def test_apply_figure_handles_more_fewer_and_retyped_traces():
    fw = go.FigureWidget(go.Figure(go.Scatter(y=[1])))
    apply_figure(fw, go.Figure([go.Scatter(y=[1, 2]), go.Bar(y=[3]), go.Scatter(y=[4])]))
    assert [t.type for t in fw.data] == ["scatter", "bar", "scatter"]
    assert list(fw.data[1].y) == [3]
    apply_figure(fw, go.Figure([go.Bar(y=[9, 9])]))
    assert [t.type for t in fw.data] == ["bar"] and list(fw.data[0].y) == [9, 9]
    apply_figure(fw, go.Figure())
    assert fw.data == ()


def test_apply_figure_replaces_the_layout():
    fw = go.FigureWidget(go.Figure(layout=dict(title="old", xaxis=dict(range=[0, 5]))))
    apply_figure(fw, go.Figure(layout=dict(yaxis=dict(title=dict(text="ops")))))
    assert fw.layout.title.text is None
    assert fw.layout.xaxis.range is None
    assert fw.layout.yaxis.title.text == "ops"


def test_apply_figure_rejects_non_figures():
    with pytest.raises(TypeError, match="go.Figure"):
        apply_figure(go.FigureWidget(), {"data": []})


def test_same_compares_arrays_and_nesting():
    assert v._same({"a": np.arange(3)}, {"a": [0, 1, 2]})
    assert not v._same({"a": np.arange(3)}, {"a": np.arange(4)})
    assert not v._same([1, {"b": 2}], [1, {"b": 3}])


def test_resolve_mode(monkeypatch):
    assert resolve_mode("output") == "output"
    assert resolve_mode("figurewidget") == "figurewidget"
    assert resolve_mode("auto") == "figurewidget"  # anywidget is installed here
    with pytest.raises(ValueError, match="figurewidget"):
        resolve_mode("widget")


def test_auto_falls_back_in_colab(monkeypatch):
    import d2l_async.config

    monkeypatch.setattr(d2l_async.config, "in_colab", lambda: True)
    assert resolve_mode("auto") == "output"


def test_auto_falls_back_when_figurewidget_cannot_be_made(monkeypatch):
    import sys

    # what go.FigureWidget imports (anywidget on plotly >= 6) is missing: importing it fails
    monkeypatch.setitem(sys.modules, "plotly.basewidget", None)
    assert resolve_mode("auto") == "output"


def test_choosing_the_mode_makes_no_widget():
    """a FigureWidget made to test the stack opened a model in the front end and stayed in the saved state"""
    import ipywidgets

    before = set(ipywidgets.Widget.widgets) if hasattr(ipywidgets.Widget, "widgets") else None
    assert resolve_mode("auto") == "figurewidget"
    if before is not None:
        assert set(ipywidgets.Widget.widgets) == before


def test_the_mode_can_be_set_for_a_whole_class(monkeypatch):
    monkeypatch.setenv("D2L_ASYNC_FIGURES", "output")
    assert resolve_mode("auto") == "output"
    monkeypatch.setenv("D2L_ASYNC_FIGURES", "sideways")
    with pytest.raises(ValueError, match="D2L_ASYNC_FIGURES"):
        resolve_mode("auto")


def test_output_view_keeps_the_last_figure():
    view = v.make_view("output")
    fig = go.Figure(go.Scatter(y=[1]))
    view.show(fig)
    assert view.figure is fig and view.updates == 1
    with pytest.raises(TypeError):
        view.show("not a figure")
    with pytest.raises(ValueError, match="resolve"):
        v.make_view("auto")


def _spec(fig):
    """A figure's traces and layout as plain JSON, without the uids plotly assigns."""
    import json

    import plotly.io as pio

    def prune(x):  # an emptied compound property ({}) means the same as an absent one
        if isinstance(x, dict):
            return {k: prune(v) for k, v in x.items() if v != {} and prune(v) != {}}
        return x

    doc = json.loads(pio.to_json(fig, validate=False))
    for t in doc["data"]:
        t.pop("uid", None)
    doc["layout"].pop("template", None)
    return [prune(t) for t in doc["data"]], prune(doc["layout"])


def test_apply_figure_reaches_any_target_from_any_start():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    trace = st.builds(
        lambda kind, ys, colour: {"scatter": go.Scatter, "bar": go.Bar}[kind](
            y=ys, **({"marker": {"color": colour}} if colour else {})),
        st.sampled_from(["scatter", "bar"]),
        st.lists(st.integers(-5, 5), max_size=4),
        st.sampled_from([None, "red", "blue"]),
    )
    figure = st.builds(
        lambda traces, title: go.Figure(traces, layout={"title": {"text": title}} if title else {}),
        st.lists(trace, max_size=4), st.sampled_from([None, "a", "b"]),
    )

    @settings(max_examples=30, deadline=None)
    @given(st.lists(figure, min_size=1, max_size=4))
    def check(figures):
        fw = go.FigureWidget(figures[0])
        for fig in figures[1:]:
            apply_figure(fw, fig)
            assert _spec(fw) == _spec(fig)

    check()
