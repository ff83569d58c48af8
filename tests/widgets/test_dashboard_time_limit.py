"""A dashboard run that passes its time limit is stopped while it runs, with a clear message."""

from __future__ import annotations

import time

import plotly.graph_objects as go
import pytest

from d2l_async.experiments._common import checkpoint
from d2l_async.widgets import Dashboard, int_slider
from d2l_async.widgets._dashboard import DEFAULT_TIME_LIMIT_S


def spin(*, n: int):
    """``n`` steps of ~10 ms of real work, with a checkpoint between them (like an experiment)."""
    for i in range(n):
        t = time.perf_counter()
        while time.perf_counter() - t < 0.01:
            pass
        checkpoint(i + 1, n)
    return n


def figure(n: int) -> go.Figure:
    return go.Figure(go.Bar(x=["n"], y=[n]))


def test_a_run_past_its_limit_is_stopped_and_the_last_good_run_stays():
    d = Dashboard(spin, {"n": int_slider("n", 3, 1, 100_000)}, {"f": figure}, mode="figurewidget",
                  time_limit_s=0.5)
    assert d.runs == 1 and d.result == 3 and d.time_limit_s == 0.5
    shown = d.figure_widgets["f"]
    t0 = time.perf_counter()
    d.controls["n"].value = 100_000  # ~1000 s of work
    took = time.perf_counter() - t0
    assert d.runs == 2 and d.stops == 1 and d.errors == 0
    assert took < 10.0  # stopped while it ran, not after 1000 s
    assert 'data-kind="refused"' in d.status.value and "Stopped" in d.status.value
    assert "limit" in d.status.value
    assert d.result == 3 and d.controls["n"].value == 3  # the last good run and its values stay
    assert d.figure_widgets["f"] is shown and d.figure_widgets["f"].data[0].y == (3,)
    d.controls["n"].value = 4  # and the next change works
    assert d.result == 4 and 'data-kind="ok"' in d.status.value


def test_no_limit_and_bad_limits():
    d = Dashboard(spin, {"n": int_slider("n", 2, 1, 10)}, {"f": figure}, time_limit_s=None, mode="figurewidget")
    assert d.result == 2 and d.time_limit_s is None
    assert Dashboard(spin, {"n": int_slider("n", 1, 1, 10)}, {"f": figure}, autorun=False).time_limit_s \
        == DEFAULT_TIME_LIMIT_S
    for bad in (0, -1, "5", True):
        with pytest.raises(ValueError, match="time_limit_s"):
            Dashboard(spin, {"n": int_slider("n", 1, 1, 10)}, {"f": figure}, time_limit_s=bad, autorun=False)


def test_ready_made_dashboard_stops_a_slow_setting(monkeypatch):
    """The asynchrony dashboard with a tiny limit: a real experiment is stopped mid-run."""
    from d2l_async.widgets import dashboards as D

    d = D.asynchrony_dashboard(mode="figurewidget", autorun=False)
    d.time_limit_s = 0.3
    d.controls["matmuls"].value = 50
    d.controls["size"].value = 512  # ~100 GFLOP: seconds here, allowed by the 30 s guard
    assert d.stops >= 1 and "Stopped" in d.status.value, d.status.value
