"""Interactive dashboards: move a slider, the experiment reruns, the figures update in place.

The last step of the package's pipeline (experiment -> engine -> trace -> analysis -> viz ->
**widgets**); the only sub-package that imports ipywidgets.

* :class:`Dashboard` binds controls to any experiment function and to figure functions; on a change
  it reruns and replaces the data of the existing ``FigureWidget`` (or, in Colab, redraws a plain
  figure).  Guards refuse workloads that would not fit; errors show in the dashboard.
* :class:`Live` adds a live queue/memory view polled from ``eng.statistics()`` while a run goes on.
* The control helpers (:func:`int_slider`, :func:`log_slider`, :func:`backend_dropdown`, ...) and the
  guard estimators (:func:`workload_bytes`, :func:`memory_guard`, ...).
* Ready-made dashboards for the notebooks, one line each, live in :mod:`d2l_async.widgets.dashboards`
  (``sync_async_dashboard()``, ``queue_dashboard()``, ``trace_explorer(trace)``, ...).
"""

from __future__ import annotations

import importlib
from typing import Any

from ._controls import (
    backend_dropdown,
    backends,
    blocker_dropdown,
    dropdown,
    expression_dropdown,
    float_slider,
    int_slider,
    log_slider,
    toggle,
)
from ._dashboard import Dashboard
from ._guards import (
    all_guards,
    available_memory,
    check_bytes,
    memory_guard,
    ops_bytes,
    ops_guard,
    tensor_bytes,
    workload_bytes,
)
from ._live import EngineWatcher, Live, LiveFigure, LiveRun, Poller, Sample, live_columns, live_figure
from ._views import FigureView, OutputView, apply_figure, resolve_mode

#: Ready-made dashboards, loaded on first use (they import the experiments).
_DASHBOARDS = (
    "sync_async_dashboard", "queue_dashboard", "dependency_dashboard", "barrier_dashboard",
    "blocker_dashboard", "parallelism_dashboard", "scheduling_dashboard", "asynchrony_dashboard",
    "trace_explorer", "window_trace",
)

#: the dashboards, and what a lecturer needs to build one of their own (:class:`Dashboard`, the controls,
#: the memory guard); the live view's poller, the figure views and the byte arithmetic are importable
#: from here but internal
__all__ = sorted([
    "Dashboard", "backend_dropdown", "backends", "blocker_dropdown", "dropdown", "expression_dropdown",
    "float_slider", "int_slider", "live_figure", "log_slider", "memory_guard", "toggle", *_DASHBOARDS,
])


def __getattr__(name: str) -> Any:
    if name in _DASHBOARDS:
        value = getattr(importlib.import_module("d2l_async.widgets.dashboards"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'd2l_async.widgets' has no attribute {name!r}")
