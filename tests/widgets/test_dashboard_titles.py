"""Figure titles built per run fit a FigureWidget (~650 px): a short first line, details below."""

from __future__ import annotations

import pytest

from d2l_async.widgets import dashboards as D


@pytest.mark.parametrize("name", ["sync_async_dashboard", "queue_dashboard"])
def test_first_line_is_short(name):
    kwargs = {"live": False} if name == "queue_dashboard" else {}
    d = getattr(D, name)(mode="figurewidget", **kwargs)
    assert d.result is not None, d.status.value
    for key, fig in d.figures.items():
        head, _, details = (fig.layout.title.text or "").partition("<br>")
        assert head and len(head) <= 60, (key, head)
        assert "<br>" not in details, (key, details)  # one second line at most


def test_sync_async_title_names_the_bottleneck_below_the_times():
    d = D.sync_async_dashboard(mode="figurewidget")
    r = d.result
    head, _, details = d.figures["timings"].layout.title.text.partition("<br>")
    assert "synchronous" in head.lower() and f"({r.ratio:.1f}x)" in head
    assert details.startswith("<sup>") and f"bottleneck: {r.model.bottleneck}" in details
    assert r.model.t2_source in details
