"""The figures on a real recording of the engine: the book's ``z = x * y + 2``."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
engine = pytest.importorskip("d2l_async.engine")

from d2l_async import viz  # noqa: E402


@pytest.fixture(scope="module")
def z_trace():
    with engine.ThreadedEngine(workers=1) as eng:
        x = eng.array(torch.ones(4), name="x")
        y = eng.array(torch.full((4,), 2.0), name="y")
        z = x * y + 2
        assert z.asnumpy().tolist() == [4.0] * 4  # a blocker, recorded as a block event
        eng.waitall(timeout=30)
        return eng.trace()


@pytest.mark.timeout(120)
def test_engine_timeline_labels_virtual_lanes_and_draws_each_op(z_trace):
    fig = viz.plot_timeline(z_trace)
    labels = list(fig.layout.yaxis.ticktext)
    assert labels[0] == "frontend" and all("(virtual)" in l for l in labels[1:])
    ops = [t for t in fig.data if t.type == "bar" and t.name == "op"]
    assert len(ops[0].x) == 2  # both ops drawn; each named inside its bar only where the name fits
    assert set(ops[0].text) <= {"add", "mul", ""} and sorted(h.split("</b>")[0][3:] for h in ops[0].hovertext) == ["add", "mul"]


@pytest.mark.timeout(120)
def test_engine_dependency_graph_follows_the_recording(z_trace):
    g = viz.dependency_graph(z_trace)
    labels = set(g.nodes["label"])
    assert {"x", "y", "mul", "add"} <= labels
    mul, add = (g.nodes.index[g.nodes["label"] == n][0] for n in ("mul", "add"))
    assert g.nodes.loc[add, "depth"] > g.nodes.loc[mul, "depth"]
    # add cannot be ready before mul has finished: its input is mul's output
    assert g.nodes.loc[add, "start"] >= g.nodes.loc[mul, "end"]
    assert g.nodes.loc[mul, "end"] <= g.nodes.loc[add, "ready"] <= g.nodes.loc[add, "start"]
    fig = viz.plot_dependency_graph(z_trace)
    assert 2 <= len(fig.frames) <= 150
    t_end = max(float(f.name) for f in fig.frames)
    assert set(viz.node_states(g, t_end)) == {"done"}
    assert np.isfinite(g.nodes.loc[mul, "start"])
