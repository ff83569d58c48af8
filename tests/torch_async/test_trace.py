"""A plain-torch run records what the engine records, so the package's figures and analyses read it."""

from __future__ import annotations

import torch

from d2l_async import analysis, viz
from d2l_async.torch_async import asynchronous, synchronize


def _run(workers: int = 1):
    with asynchronous(workers=workers) as rt:
        x = torch.ones(200, 200)
        y = x @ x
        z = y.sum()
        print_value = z.item()  # a blocker
        for _ in range(5):
            y = y * 0.5
        synchronize()
    return rt, print_value


def test_trace_has_pushes_ops_and_blocks_with_the_users_lines():
    rt, value = _run()
    assert value == 200.0 * 200 * 200
    df = rt.trace().to_frame()
    ops = df[df["lane"].str.startswith("cpu:0 worker")]
    assert {"ones", "mm", "sum", "_local_scalar_dense", "mul"} <= set(ops["name"])
    pushes = df[df["name"].str.startswith("push ")]
    assert len(pushes) == len(ops)
    assert (ops["end"] >= ops["start"]).all() and (ops["start"] >= ops["issue"] - 1e-9).all()
    blocks = df[df["kind"] == "block"]
    assert "item" in set(blocks["reason"])
    item = blocks[blocks["reason"] == "item"].iloc[0]
    assert "test_trace.py" in item["source"] and "z.item()" in item["source"]
    mm = ops[ops["name"] == "mm"].iloc[0]
    assert "x @ x" in mm["source"]  # the user's line, not torch's
    assert rt.trace().meta["frontend"] == "plain PyTorch" and rt.trace().meta["virtual"] is True


def test_dependencies_follow_the_data():
    rt, _ = _run(workers=2)
    df = rt.trace().to_frame()
    ops = df[df["lane"].str.startswith("cpu:0 worker")].set_index("id")
    mm_id = ops.index[ops["name"] == "mm"][0]
    ones_id = ops.index[ops["name"] == "ones"][0]
    assert ones_id in ops.loc[mm_id, "deps"]
    sum_id = ops.index[ops["name"] == "sum"][0]
    assert mm_id in ops.loc[sum_id, "deps"]


def test_figures_and_analyses_accept_the_trace():
    rt, _ = _run()
    trace = rt.trace()
    fig = viz.plot_timeline(trace)
    assert len(fig.data) > 0
    q = viz.plot_queue_length(trace)
    assert len(q.data) > 0
    blocked = analysis.blocked_time(trace)
    assert len(blocked) > 0
    assert len(viz.plot_blocked_time(trace).data) > 0
