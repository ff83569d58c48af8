"""The widget state an executed notebook keeps: what nbviewer and a static page draw a dashboard from.

nbclient executes a notebook up to its dashboard with ``store_widget_state=True``, as the site build and
``jupyter nbconvert --execute`` do; the notebook's ``widgets`` metadata then holds every widget model's last
synced state.  Each plotly figure model there must carry the traces of the dashboard's run, with points.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.browser._lab import notebook_up_to_dashboard

pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]

ROOT = Path(__file__).parents[2]


def _figure_models(nb: dict) -> list[dict]:
    state = nb["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return [m["state"] for m in state.values() if "_widget_data" in m["state"] or "_data" in m["state"]]


def _points(trace: dict) -> int:
    sizes = [np.size(trace[k]) if not isinstance(trace[k], dict) else int(np.prod(trace[k].get("shape", [0])))
             for k in ("x", "y", "z", "values", "base") if trace.get(k) is not None]
    return max(sizes, default=0)


@pytest.mark.parametrize("name", ["05_sync_vs_async.ipynb"])
def test_an_executed_notebook_keeps_its_dashboard_figures_in_the_widget_state(tmp_path, monkeypatch, name):
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    monkeypatch.setenv("D2L_ASYNC_QUICK", "1")
    copy = tmp_path / name
    notebook_up_to_dashboard(ROOT / "notebooks" / name, copy)
    nb = nbformat.read(copy, as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    figures = _figure_models(json.loads(nbformat.writes(nb)))
    assert len(figures) >= 2, f"{name}: {len(figures)} figure models in the saved widget state"
    for state in figures:
        data = state.get("_widget_data", state.get("_data")) or []
        assert data and sum(_points(t) for t in data) > 0, (
            f"{name}: a figure saved with {len(data)} traces and no points: a page drawn from it shows empty axes")
