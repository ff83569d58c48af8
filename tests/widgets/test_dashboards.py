"""The ready-made dashboards: each builds, runs its default workload, and its first control reruns it."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest

from d2l_async.trace import Event, Lane, LaneRole, Trace
from d2l_async.widgets import dashboards as D

ALL = ["asynchrony_dashboard", "sync_async_dashboard", "queue_dashboard", "dependency_dashboard",
       "barrier_dashboard", "blocker_dashboard", "parallelism_dashboard", "scheduling_dashboard"]

# first control -> a second valid value (a cheap one: the suite runs on 2 shared cores)
NEXT = {"size": 64, "ops": 1000, "sync_every": 4, "expression": "(x + y) * (x - y)", "long_ops": 2,
        "steps": 20, "max_workers": 2}


def _data(figure):
    return [(tuple(np.asarray(t.x).ravel().tolist()) if t.x is not None else None,
             tuple(np.asarray(t.y).ravel().tolist()) if t.y is not None else None) for t in figure.data]


@pytest.mark.parametrize("name", ALL)
def test_default_workload_runs_and_first_control_reruns(name):
    d = getattr(D, name)(mode="figurewidget")
    assert d.result is not None, d.status.value
    assert "virtual" in d.status.value  # an honest label: the engine's devices are threads
    widgets_before = dict(d.figure_widgets)
    data_before = {k: _data(f) for k, f in d.figures.items()}
    key, control = next(iter(d.controls.items()))
    control.value = NEXT[key]
    assert d.runs == 2 and 'data-kind="ok"' in d.status.value, d.status.value
    for k, w in widgets_before.items():  # a new FigureWidget per drawing, the old one closed; an Output cleared
        assert (d.figure_widgets[k] is not w and w.comm is None) if isinstance(w, go.FigureWidget) else \
            d.figure_widgets[k] is w
    assert any(_data(d.figures[k]) != data_before[k] for k in data_before), "no figure changed"


def test_queue_dashboard_passes_the_controls_to_the_experiment(monkeypatch):
    from d2l_async import experiments

    calls = []
    real = experiments.run_queue_memory

    def spy(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(experiments, "run_queue_memory", spy)
    d = D.queue_dashboard(mode="figurewidget", live=False)
    assert calls[-1]["sync_every"] is None and calls[-1]["max_pending"] is None  # 0 means never / no bound
    queue = d.figure_widgets["queue"]
    d.controls["sync_every"].value = 1
    assert calls[-1]["sync_every"] == 1 and d.figure_widgets["queue"] is not queue and queue.comm is None
    d.controls["max_pending"].value = 16
    assert calls[-1]["max_pending"] == 16 and len(calls) == 3
    assert d.result.max_queue <= d.result.queue_bound


def test_queue_dashboard_refuses_what_does_not_fit(monkeypatch):
    import d2l_async.widgets._guards as guards

    monkeypatch.setattr(guards, "available_memory", lambda: 1_000_000)
    d = D.queue_dashboard(mode="figurewidget", live=False, autorun=False)
    d.controls["batches"].value = 5000
    assert d.runs == 0 and "Refused" in d.status.value and d.controls["batches"].value == 40


def test_queue_dashboard_live_view_follows_the_real_engine(monkeypatch):
    """The live view shows the queue while it is full, then drained, in time order.

    A slow device is staged so the check does not depend on who gets the GIL: after the first
    minibatch a gate op holds the only worker, and the last minibatch's checkpoint waits (at most
    10 s) until the view has drawn a sample with work pending before it opens the gate.
    """
    import threading

    import d2l_async.experiments.queue_memory as qm
    from d2l_async.engine import live_engines

    d = D.queue_dashboard(mode="figurewidget", autorun=False)
    gate, seen_full = threading.Event(), threading.Event()
    draw = d.live_view.draw

    def watching_draw(samples):
        draw(samples)
        if samples and samples[-1].pending > 0 and gate_pushed:
            seen_full.set()

    gate_pushed = False
    real_checkpoint = qm.checkpoint

    def gated_checkpoint(i, n, **kw):
        nonlocal gate_pushed
        if i == 1:  # a slow op on the run's engine: what follows queues behind it
            live_engines()[-1].push(lambda: gate.wait(10.0), name="slow device")
            gate_pushed = True
        if i == n:
            seen_full.wait(10.0)
            gate.set()
        return real_checkpoint(i, n, **kw)

    monkeypatch.setattr(d.live_view, "draw", watching_draw)
    monkeypatch.setattr(qm, "checkpoint", gated_checkpoint)
    d.controls["batches"].value = 50
    assert d.runs == 1 and 'data-kind="ok"' in d.status.value, d.status.value
    assert seen_full.is_set(), "the live view never drew the queue while the gate held the worker"
    samples = d.poller.samples
    assert max(s.pending for s in samples) > 0  # the queue was seen while it was full
    assert samples[-1].pending == 0 and samples[-1].running == 0 and not d.poller.alive
    ops = len(d.result.trace.where(lane=[ln.name for ln in d.result.trace.lanes if ln.role.name == "BACKEND"]))
    assert samples[-1].done >= ops > 0  # the final sample counts every op the engine ran
    assert [s.done for s in samples] == sorted(s.done for s in samples)
    assert d.live_view.draws == len(samples) >= 2
    assert [s.t for s in samples] == sorted(s.t for s in samples)
    # the >= 5 Hz rate is asserted in test_live.py with a controlled workload; here the machine's
    # other tenants decide how often the poller gets the GIL


def test_blocker_view_control_redraws_without_rerunning():
    d = D.blocker_dashboard(mode="figurewidget")
    cost = d.figure_widgets["cost"]
    names_before = [t.name for t in cost.data]
    d.view_controls["blocker"].value = "item"
    assert d.runs == 1 and d.redraws == 1
    cost = d.figure_widgets["cost"]
    assert [t.name for t in cost.data] != names_before and "item" in [t.name for t in cost.data]


# -- trace explorer ----------------------------------------------------------------------------------
def _trace():
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("dev", LaneRole.BACKEND, device="cpu:0", virtual=True)]
    ev = [
        Event("frontend", "launch", "push a", 0.0, 0.1),
        Event("dev", "op", "a", 0.5, 2.0, issue=0.1),   # queued 0.1 .. 0.5
        Event("dev", "op", "b", 2.0, 3.0, issue=0.2),   # queued 0.2 .. 2.0
        Event("dev", "op", "c", 8.0, 9.0, issue=7.0),   # outside [1, 3]
    ]
    return Trace.from_events(ev, lanes, {"source": "engine", "virtual": True})


def test_window_trace_keeps_what_touches_the_window_and_clips_it():
    part = D.window_trace(_trace(), window=(1.0, 3.0))
    assert list(part["name"]) == ["a", "b"]
    assert list(part["start"]) == [1.0, 2.0] and list(part["end"]) == [2.0, 3.0]
    assert list(part["issue"]) == [1.0, 1.0]  # b is still queued at t=1: kept, issue clipped
    assert part.meta["window"] == (1.0, 3.0) and part.meta["clipped"] == 1
    only_dev = D.window_trace(_trace(), window=(0, 10), lanes=("dev",))
    assert [l.name for l in only_dev.lanes] == ["dev"] and len(only_dev) == 3
    nan_issue = D.window_trace(_trace(), window=(0, 0.05))
    assert len(nan_issue) == 1 and math.isnan(nan_issue["issue"][0])


@pytest.mark.parametrize("kw,err", [({"window": (2, 1)}, ValueError), ({"window": (0, 1), "lanes": ("gpu",)}, ValueError)])
def test_window_trace_rejects_bad_input(kw, err):
    with pytest.raises(err):
        D.window_trace(_trace(), **kw)
    with pytest.raises(TypeError, match="Trace"):
        D.window_trace("trace", window=(0, 1))


def test_trace_explorer_moves_its_window():
    d = D.trace_explorer(_trace(), mode="figurewidget")
    assert d.result is not None, d.status.value
    d.controls["window"].value = (6.0, 9.0)
    assert list(d.result["name"]) == ["c"] and 'data-kind="ok"' in d.status.value
    d.controls["lanes"].value = ()
    assert "select at least one lane" in d.status.value
    with pytest.raises(TypeError, match="Trace"):
        D.trace_explorer(42)
