"""Timelines coloured by role with a legend, and names only where they fit."""

from __future__ import annotations

from d2l_async import viz
from d2l_async.trace import Lane, LaneRole, Trace


def _trace(rows, lanes):
    cols = {k: [r[k] for r in rows] for k in ("lane", "kind", "name", "start", "end")}
    cols["id"] = list(range(len(rows)))
    return Trace.from_columns(cols, lanes, {})


def _row(lane, kind, name, start, end):
    return {"lane": lane, "kind": kind, "name": name, "start": start, "end": end}


def test_a_ddp_trace_tells_forward_backward_and_all_reduce_apart():
    lanes = [Lane("python", LaneRole.FRONTEND), Lane("pt_gloo_runloop", LaneRole.BACKEND, device="cpu")]
    rows = [_row("python", "op", "aten::addmm", 0.000, 0.004),
            _row("python", "op", "autograd::engine::evaluate_function: AddmmBackward0", 0.005, 0.012),
            _row("pt_gloo_runloop", "op", "gloo:all_reduce", 0.008, 0.015),
            _row("python", "op", "Optimizer.step#SGD.step", 0.016, 0.017)]
    fig = viz.plot_timeline(_trace(rows, lanes))
    names = [t.name for t in fig.data if t.type == "bar"]
    assert names[:4] == ["forward / other", "backward", "all-reduce", "optimizer step"]
    assert len({t.marker.color for t in fig.data if t.type == "bar"}) == 4
    assert all(t.showlegend for t in fig.data if t.type == "bar")


def test_ops_on_two_devices_get_a_colour_each():
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, device="cpu:0"),
             Lane("cpu:1 worker 0", LaneRole.BACKEND, device="cpu:1")]
    rows = [_row("cpu:1 worker 0", "op", "matmul", 0.0, 0.01), _row("cpu:0 worker 0", "op", "matmul", 0.002, 0.004)]
    names = {t.name for t in viz.plot_timeline(_trace(rows, lanes)).data if t.type == "bar"}
    assert names == {"ops on cpu:0", "ops on cpu:1"}


def test_names_are_written_only_inside_bars_wide_enough():
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, device="cpu:0")]
    rows = [_row("frontend", "launch", "push", i * 1e-5, i * 1e-5 + 5e-6) for i in range(20)]
    rows.append(_row("cpu:0 worker 0", "op", "a long matmul", 0.0, 0.2))
    fig = viz.plot_timeline(_trace(rows, lanes))
    push = next(t for t in fig.data if t.name == "launch")
    op = next(t for t in fig.data if t.name == "op")
    assert set(push.text) == {""}  # twenty pushes 10 µs apart on a 200 ms axis: no overprinted labels
    assert list(op.text) == ["a long matmul"]


def test_nested_events_are_named_once():
    """10's collective timeline printed 'aten::matmul' over 'aten::mm' (one inside the other)."""
    lanes = [Lane("python", LaneRole.FRONTEND)]
    rows = [_row("python", "op", "aten::matmul", 0.0, 0.1), _row("python", "op", "aten::mm", 0.001, 0.099)]
    fig = viz.plot_timeline(_trace(rows, lanes))
    texts = [t for tr in fig.data if tr.type == "bar" for t in (tr.text or ()) if t]
    assert texts == ["aten::matmul"]


def test_wait_labels_near_the_right_edge_do_not_overprint():
    """04: two waits near the end, each label anchored to its block's right edge, overlapped."""
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("cpu:0 worker 0", LaneRole.BACKEND, device="cpu:0")]
    rows = [_row("cpu:0 worker 0", "op", "matmul", 0.0, 1.0)]
    for s, e, why in ((0.90, 0.94, "item"), (0.95, 0.99, "numpy")):
        rows.append({"lane": "frontend", "kind": "block", "name": why, "start": s, "end": e})
    cols = {k: [r[k] for r in rows] for k in ("lane", "kind", "name", "start", "end")}
    cols["id"] = list(range(len(rows)))
    cols["reason"] = ["", "item", "numpy"]
    cols["source"] = ["", "In[12] line 3: b = a @ a; b.sum().item()", "In[12] line 4: b = a @ a; b.numpy()"]
    fig = viz.plot_timeline(Trace.from_columns(cols, lanes, {}))
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from figure_rules import overlapping_labels

    assert len(fig.layout.annotations) >= 1 and not overlapping_labels(fig.to_plotly_json())
