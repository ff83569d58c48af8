"""``D2L_ASYNC_ENGINE`` chooses the engine of every experiment and dashboard (engine.make_engine)."""

from __future__ import annotations

import pytest

from d2l_async import engine, experiments


def test_make_engine_follows_the_environment(monkeypatch):
    monkeypatch.setenv("D2L_ASYNC_ENGINE", "naive")
    with engine.make_engine(workers=2, devices=("cpu:0", "cpu:1")) as eng:
        assert type(eng).__name__ == "NaiveEngine" and eng.engine_kind == "naive" and eng.workers == 0
    monkeypatch.delenv("D2L_ASYNC_ENGINE")
    with engine.make_engine(workers=2) as eng:
        assert type(eng).__name__ == "ThreadedEngine" and eng.workers == 2
    with engine.make_engine(kind="naive") as eng:  # an explicit kind wins
        assert eng.engine_kind == "naive"


def test_an_unknown_engine_name_is_a_clear_value_error(monkeypatch):
    monkeypatch.setenv("D2L_ASYNC_ENGINE", "fast")
    with pytest.raises(ValueError, match=r"D2L_ASYNC_ENGINE='fast'.*'threaded' or 'naive'"):
        engine.make_engine()
    with pytest.raises(ValueError, match=r"D2L_ASYNC_ENGINE='fast'"):
        experiments.run_expression("x * y + 2", workers=2)
    monkeypatch.delenv("D2L_ASYNC_ENGINE")
    with pytest.raises(ValueError, match=r"kind='fast'"):
        engine.make_engine(kind="fast")


@pytest.mark.parametrize("kind", ["naive", "threaded"])
def test_an_experiment_runs_on_the_engine_the_environment_names(monkeypatch, kind):
    monkeypatch.setenv("D2L_ASYNC_ENGINE", kind)
    r = experiments.run_expression("x * y + 2", workers=2)
    assert r.matches
    assert r.trace.meta["engine"] == kind
    assert ("naive engine" in r.device) == (kind == "naive")  # the label says which engine ran it


def test_a_dashboard_runs_on_the_naive_engine(monkeypatch):
    from d2l_async.widgets import dashboards

    monkeypatch.setenv("D2L_ASYNC_ENGINE", "naive")
    d = dashboards.dependency_dashboard(mode="figurewidget")
    assert d.result is not None, d.status.value
    assert d.result.trace.meta["engine"] == "naive" and d.result.matches
    d.controls["expression"].value = "(x + y) * (x - y)"  # a rerun: still the naive engine
    assert d.runs == 2 and d.result.trace.meta["engine"] == "naive"


def test_the_parallel_chains_run_on_the_naive_engine_too(monkeypatch):
    monkeypatch.setenv("D2L_ASYNC_ENGINE", "naive")
    results = experiments.run_independent_vs_dependent(workers=(1, 2), ops=4, size=32, repeat=1)
    assert [r.workers for r in results] == [1, 2]
    for r in results:
        assert r.trace_independent.meta["engine"] == "naive" == r.trace_dependent.meta["engine"]
        assert "naive engine" in r.device
