"""The two-device dashboard starts on the device kind that can show the lesson on this machine."""

from __future__ import annotations

import pytest

from d2l_async.experiments import parallel_lessons as pl
from d2l_async.widgets import dashboards as D


@pytest.mark.parametrize("threads, kind", [(False, "modelled"), (True, "engine")])
def test_default_device_kind_follows_the_plan(monkeypatch, threads, kind):
    monkeypatch.setattr(pl, "plan_devices", lambda *a, **k: pl.DevicePlan(threads, "test", 2.0 if threads else 0.0))
    d = D.parallelism_dashboard(mode="figurewidget", autorun=False)
    assert d.controls["backend"].value == kind


def test_modelled_run_is_labelled_and_guarded(monkeypatch):
    monkeypatch.setattr(pl, "plan_devices", lambda *a, **k: pl.DevicePlan(False, "test", 0.0))
    d = D.parallelism_dashboard(mode="figurewidget", autorun=False)
    d.controls["size"].value = 64
    assert d.runs == 1 and 'data-kind="ok"' in d.status.value, d.status.value
    assert "not measured" in d.status.value and d.result.backend == "modelled"
    assert "cost model" in d.figures["times"].layout.title.text
    d.controls["size"].value = 2048  # 4 x 4 products of 2048³ at the model's 2 GFLOP/s: minutes
    assert "Refused" in d.status.value and d.result.size == 64 and d.runs == 1
