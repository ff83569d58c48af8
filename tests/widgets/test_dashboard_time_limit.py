"""A dashboard run that passes its time limit is stopped while it runs, with a clear message."""

from __future__ import annotations

import time

import plotly.graph_objects as go
import pytest

from d2l_async.experiments.deadline import checkpoint
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
    from d2l_async.widgets import _guards
    from d2l_async.widgets import dashboards as D

    # The time guard prices 400 products of 512 x 512 (~107 GFLOP) with the matrix-product rate it
    # measures now; on a loaded machine that rate fell so low the guard refused matmuls=50 (over 30 s)
    # and the run that followed was too short to stop. Fix the rate (20 GFLOP/s: ~5 s, allowed), so
    # this test is about the time limit, not the machine's load.
    monkeypatch.setattr(_guards, "matmul_rate", lambda size=256, *, repeat=3: 20e9)
    d = D.asynchrony_dashboard(mode="figurewidget", autorun=False)
    d.time_limit_s = 0.3
    # every status shown: on a loaded machine the first setting (50 products of 128) is the one
    # stopped, and the next setting's shorter run then writes its own status
    shown: list[str] = []
    d.status.observe(lambda change: shown.append(change["new"]), names="value")
    d.controls["matmuls"].value = 50
    d.controls["size"].value = 512  # ~100 GFLOP: seconds here, allowed by the 30 s guard
    assert d.stops >= 1 and any("Stopped" in v for v in shown), shown


def queue_then_wait(*, n: int, naive: int = 0):
    """Queue ~n x 1 s of engine work, then wait for it all: the wait is where the time goes."""
    import threading

    from d2l_async.engine import NaiveEngine, ThreadedEngine

    gate = threading.Event()
    eng = ThreadedEngine() if not naive else NaiveEngine()
    try:
        x = eng.array([0.0])
        if naive:  # another thread runs the naive engine's op: this one waits to take its turn
            started = threading.Event()

            def gated(t):
                started.set()
                gate.wait(n)

            helper = threading.Thread(target=lambda: eng.push(gated, writes=(x,)))
            helper.start()
            assert started.wait(10)
        else:
            for _ in range(n):
                eng.push(lambda t: gate.wait(1.0), writes=(x,))
        eng.waitall()  # no timeout of its own: the run's limit must reach inside it
        return n
    finally:
        gate.set()
        if naive:
            helper.join(10)
        eng.shutdown(wait=False, timeout=10)


@pytest.mark.parametrize("naive", [0, 1])
def test_the_limit_reaches_inside_a_blocking_wait(naive):
    """a 1 s limit stopped the barrier dashboard at 4.3 s (8 s: at 52.5 s under load): the
    limit was checked only between pushes, never inside the waitall that drained the queue."""
    d = Dashboard(queue_then_wait, {"n": int_slider("n", 1, 1, 100)}, {"f": figure}, mode="figurewidget",
                  time_limit_s=1.0, fixed={"naive": naive}, autorun=False)
    t0 = time.perf_counter()
    d.controls["n"].value = 30  # 30 s of queued work behind one waitall
    took = time.perf_counter() - t0
    assert d.stops == 1 and d.errors == 0, d.status.value
    assert "Stopped" in d.status.value and "in a wait" in d.status.value
    assert took < 1.0 + 5.0, took  # the limit, plus start-up and shutdown; never the 30 s queue
