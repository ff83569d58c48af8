"""Notebook 10's dashboard: runs real ranks, the first slider (ranks) reruns and the figures change in
place; the guard refuses rank counts that would not fit in memory."""

from __future__ import annotations

import numpy as np
import pytest

from d2l_async.widgets.distributed import RANK_BYTES, distributed_dashboard, ranks_guard

pytestmark = pytest.mark.timeout(300)


def _data(figure):
    return [(tuple(np.asarray(t.x).ravel().tolist()) if t.x is not None else None,
             tuple(np.asarray(t.y).ravel().tolist()) if t.y is not None else None) for t in figure.data]


def test_ranks_slider_reruns_and_draws_new_figures_in_the_old_ones_place():
    d = distributed_dashboard(mode="figurewidget", backend="gloo")
    assert d.result is not None and d.result.ranks == 2, d.status.value
    assert "gloo ranks" in d.status.value and "no GPU used" in d.status.value  # says where it ran
    assert set(d.figures) == {"timeline", "communication"}
    assert list(d.controls) == ["ranks", "bucket_cap_mb", "delay_ms"]
    widgets_before = dict(d.figure_widgets)
    before = {k: _data(f) for k, f in d.figures.items()}
    d.controls["ranks"].value = 3
    assert d.runs == 2 and d.result.ranks == 3 and 'data-kind="ok"' in d.status.value, d.status.value
    for k, w in widgets_before.items():  # a new FigureWidget per drawing, the old one closed (widgets' tests)
        assert d.figure_widgets[k] is not w and w.comm is None
    assert all(_data(d.figures[k]) != before[k] for k in before)
    bars = d.figures["communication"]
    assert len(set(bars.data[0].x)) == 2 * 3  # two settings x three ranks


def test_guard_refuses_ranks_that_do_not_fit():
    assert ranks_guard({"ranks": 2}, available=100 * RANK_BYTES) is None
    msg = ranks_guard({"ranks": 4}, available=2 * RANK_BYTES)
    assert msg is not None and "ranks=4" in msg and "choose a smaller value" in msg
