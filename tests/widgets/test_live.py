"""Live mode: the queue view ticks at >= 5 Hz while a run goes on, then stops; no thread leaks."""

from __future__ import annotations

import threading
import time

import plotly.graph_objects as go
import pytest

from d2l_async.widgets import Dashboard, EngineWatcher, Live, Poller, Sample, int_slider, live_columns

class FakeStats:
    """A frozen-enough stand-in for ``eng.statistics()``."""

    def __init__(self, pending: int, running: int, done: int, bytes_pending: int) -> None:
        self.pending, self.running, self.done, self.bytes_pending = pending, running, done, bytes_pending


class FakeEngine:
    """Counts like an engine: the experiment moves ops from pending to done."""

    def __init__(self) -> None:
        self.pending = 0
        self.done = 0
        self.closed = False
        self.calls = 0
        self._lock = threading.Lock()

    def push(self, n: int = 1) -> None:
        with self._lock:
            self.pending += n

    def finish(self, n: int = 1) -> None:
        with self._lock:
            self.pending -= n
            self.done += n

    def statistics(self) -> FakeStats:
        with self._lock:
            self.calls += 1
            return FakeStats(self.pending, min(self.pending, 1), self.done, self.pending * 4096)

    def shutdown(self) -> None:
        self.closed = True


RUN_S = 1.2  # a bounded run: long enough to count ticks, short enough for the suite


def busy_experiment(*, n_ops: int, engine: FakeEngine, fail_at: int = -1):
    """Pushes ``n_ops`` ops over about RUN_S seconds, finishing them as it goes."""
    t0 = time.perf_counter()
    for i in range(n_ops):
        engine.push(1)
        if i % 2:  # the queue grows: one op in two finishes while the loop runs
            engine.finish(1)
        if i == fail_at:
            raise KeyboardInterrupt
        # spread the work over RUN_S: a wait with a timeout, never an unbounded one
        threading.Event().wait(max(0.0, t0 + RUN_S * (i + 1) / n_ops - time.perf_counter()))
    engine.finish(engine.pending)
    return {"ops": n_ops, "elapsed": time.perf_counter() - t0}


def summary(r):
    return go.Figure(go.Bar(x=["ops"], y=[r["ops"]]))


def make(mode="figurewidget", **live_kw):
    engines: list[FakeEngine] = []

    def new_engine(values):
        engines.append(FakeEngine())
        return engines[-1]

    live = Live(engine=new_engine, total="n_ops", **live_kw)
    d = Dashboard(busy_experiment, {"n_ops": int_slider("ops", 40, 1, 1000)}, {"summary": summary},
                  live=live, run_button=True, autorun=False, mode=mode)
    return d, engines


def test_live_view_ticks_at_5_hz_or_more_and_stops():
    d, engines = make()
    assert d.rerun(), d.status.value
    elapsed = d.result["elapsed"]
    assert elapsed >= RUN_S * 0.9
    draws = d.live_view.draws
    assert draws / elapsed >= 5, f"{draws} draws in {elapsed:.2f} s"
    assert not d.poller.alive
    assert engines[-1].closed  # the dashboard closes the engine it made
    fw = d.live_view.figure
    # the final sample shows the drained queue; time runs forward
    assert fw.data[0].y[-1] == 0 and list(fw.data[0].x) == sorted(fw.data[0].x)
    assert d.progress.value == d.progress.max == 40 and d.progress.bar_style == "success"
    assert list(d.figure_widgets["summary"].data[0].y) == [40]


def test_an_interrupted_live_run_stops_the_poller_and_shows_it():
    d, engines = make()
    d.fixed["fail_at"] = 5
    with pytest.raises(KeyboardInterrupt):  # shown, then raised on
        d.rerun()
    assert "KeyboardInterrupt" in d.status.value
    assert not d.poller.alive and engines[-1].closed
    assert d.progress.bar_style == "success"  # the poller itself stopped cleanly


@pytest.mark.parametrize("fail_from", [1, 3])  # at the first sample (main thread) or later (poller thread)
def test_a_failing_statistics_call_is_reported(fail_from):
    d, engines = make()

    class Broken(FakeEngine):
        def statistics(self):
            self.calls += 1
            if self.calls >= fail_from:
                raise RuntimeError("no statistics")
            return FakeStats(0, 0, 0, 0)

    made = []
    d.live = Live(engine=lambda v: made.append(Broken()) or made[-1], total="n_ops")
    assert not d.rerun()
    assert "no statistics" in d.status.value and not d.poller.alive
    assert made[-1].closed and d.progress.bar_style == "danger"


def test_live_output_mode_shows_numbers():
    d, _ = make(mode="output")
    assert d.rerun(), d.status.value
    assert "pending=0" in d.live_view.widget.value and d.live_view.draws >= 2


def test_live_columns_are_exact():
    cols = live_columns([Sample(0.0, 3, 1, 0, 2**20), Sample(0.1, 1, 1, 2, 0)])
    assert list(cols["t"]) == [0.0, 0.1]
    assert list(cols["pending"]) == [3, 1] and list(cols["done"]) == [0, 2]
    assert list(cols["mib"]) == [1.0, 0.0]
    assert all(len(c) == 0 for c in live_columns([]).values())


def test_poller_stops_without_starting_and_rejects_bad_rates():
    seen = []
    p = Poller(lambda: FakeStats(1, 0, 0, 0), seen.append, hz=10)
    assert p.stop(timeout=1.0) and p.ticks == 1  # the final reading only
    with pytest.raises(ValueError, match="hz"):
        Poller(lambda: None, seen.append, hz=0)
    with pytest.raises(ValueError, match="hz"):
        Live(engine=lambda v: None, hz=1000)
    with pytest.raises(TypeError, match="callable"):
        Live(engine=3)


def test_engine_watcher_counts_only_new_engines_and_keeps_done():
    old, new1, new2 = FakeEngine(), FakeEngine(), FakeEngine()
    old.push(5)
    open_engines = [old]
    w = EngineWatcher(lambda: list(open_engines))
    assert w.statistics().pending == 0
    open_engines += [new1, new2]
    new1.push(3)
    new1.finish(2)
    new2.push(4)
    s = w.statistics()
    assert (s.pending, s.done, s.bytes_pending) == (5, 2, 5 * 4096) and w.engines_seen == 2
    open_engines.remove(new1)  # closed after finishing its last op: still counted
    new1.finish(1)
    assert w.statistics().done == 3 and w.statistics().pending == 4 + 0


def test_live_without_an_engine_factory_watches_engines_the_run_creates():
    open_engines: list[FakeEngine] = []

    def experiment(*, n_ops: int):
        eng = FakeEngine()
        open_engines.append(eng)
        try:
            return busy_experiment(n_ops=n_ops, engine=eng)
        finally:
            open_engines.remove(eng)

    import d2l_async.widgets._live as live_mod

    d = Dashboard(experiment, {"n_ops": int_slider("ops", 30, 1, 1000)}, {"summary": summary},
                  live=Live(total="n_ops"), run_button=True, autorun=False, mode="figurewidget")
    original = live_mod._live_engines
    live_mod._live_engines = lambda: list(open_engines)
    try:
        assert d.rerun(), d.status.value
    finally:
        live_mod._live_engines = original
    assert d.live_view.draws / d.result["elapsed"] >= 5
    assert d.poller.samples[-1].done == 30 and d.progress.value == 30
    assert max(s.pending for s in d.poller.samples) > 0


def test_progress_only_live_mode_shows_the_bar_for_long_runs(monkeypatch):
    import d2l_async.widgets._live as live_mod

    engines: list[FakeEngine] = []
    live = Live(engine=lambda v: engines.append(FakeEngine()) or engines[-1], figure=False)
    d = Dashboard(busy_experiment, {"n_ops": int_slider("ops", 20, 1, 1000)}, {"summary": summary},
                  live=live, mode="figurewidget", autorun=False)
    assert d.live_view is None and d.progress.layout.visibility == "hidden"
    monkeypatch.setattr(live_mod, "PROGRESS_AFTER_S", 0.3)  # RUN_S is longer than that
    assert d.rerun(), d.status.value
    assert d.progress.layout.visibility == "visible"
    assert d.progress.value == d.progress.max == 20  # no total given: done / (done + pending)
    assert engines[-1].closed and not d.poller.alive
