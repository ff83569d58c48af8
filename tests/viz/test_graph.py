from __future__ import annotations

import pytest
from viz_traces import engine_like

from d2l_async.trace import Event, Lane, LaneRole, Trace
from d2l_async.viz import (dependency_graph, expression_graph, frontend_status, node_states,
                           plot_dependency_graph)
from d2l_async.viz.style import STATE_COLORS


def _node_trace(fig):
    return next(i for i, t in enumerate(fig.data) if t.customdata is not None and t.mode == "markers+text")


def test_expression_graph_of_the_books_example():
    g = expression_graph("z = x * y + 2")
    n = g.nodes.set_index("key")
    assert sorted(n.loc[n["type"] == "op", "label"]) == ["add", "mul"]
    assert set(n.loc[n["type"] == "array", "label"]) == {"x", "y", "x * y", "z"}
    assert list(n.loc[n["type"] == "const", "label"]) == ["2"]
    edges = {(n.loc[s, "label"], n.loc[d, "label"]) for s, d in zip(g.edges["src"], g.edges["dst"])}
    assert edges == {("x", "mul"), ("y", "mul"), ("mul", "x * y"), ("x * y", "add"), ("2", "add"), ("add", "z")}
    depth = dict(zip(n["label"], n["depth"]))
    assert depth["x"] < depth["mul"] < depth["x * y"] < depth["add"] < depth["z"]
    assert g.schematic


@pytest.mark.parametrize("bad", ["z = ", "for i in x: pass", "z = x[0]", "x"])
def test_expression_graph_rejects_what_it_cannot_draw(bad):
    with pytest.raises(ValueError):
        expression_graph(bad)


def test_dependency_graph_from_an_engine_recording():
    g = dependency_graph(engine_like(3))
    ops = g.nodes[g.nodes["type"] == "op"]
    assert list(ops["label"]) == ["op0", "op1", "op2"]
    # each op reads a and writes its own array: a -> op_i -> a_i
    n = g.nodes.set_index("key")
    edges = {(n.loc[s, "label"], n.loc[d, "label"]) for s, d in zip(g.edges["src"], g.edges["dst"])}
    assert {("a", "op0"), ("op0", "a0"), ("a", "op2"), ("op2", "a2")} <= edges
    assert (ops["ready"] >= ops["issue"]).all() and (ops["ready"] <= ops["start"]).all()


def test_node_states_follow_event_times():
    tr = engine_like(2)
    g = dependency_graph(tr)
    op0 = g.nodes[g.nodes["label"] == "op0"].index[0]
    e = g.nodes.loc[op0]
    assert node_states(g, e["issue"] - 1e-9)[op0] == "not issued"
    assert node_states(g, e["start"] - 1e-9)[op0] == "ready"  # inputs exist from the start
    assert node_states(g, (e["start"] + e["end"]) / 2)[op0] == "running"
    assert node_states(g, e["end"])[op0] == "done"


def test_queued_state_while_inputs_are_pending():
    lanes = [Lane("frontend", LaneRole.FRONTEND), Lane("w", LaneRole.BACKEND, virtual=True)]
    ev = [Event("w", "op", "mul", 1.0, 3.0, issue=0.0, reads=("x",), writes=("t",)),
          Event("w", "op", "add", 4.0, 5.0, issue=0.5, reads=("t",), writes=("z",))]
    g = dependency_graph(Trace.from_events(ev, lanes=lanes))
    add = g.nodes.index[g.nodes["label"] == "add"][0]
    assert g.nodes.loc[add, "ready"] == 3.0
    assert [node_states(g, t)[add] for t in (0.4, 1.0, 3.5, 4.5, 5.0)] == ["not issued", "queued", "ready",
                                                                          "running", "done"]


def test_frames_match_node_states_and_stay_under_the_cap():
    tr = engine_like(60)
    g = dependency_graph(tr, max_ops=50)
    fig = plot_dependency_graph(g, max_frames=40)
    assert 2 <= len(fig.frames) <= 40
    idx = _node_trace(fig)
    for frame in fig.frames:
        t = float(frame.name)
        i = list(frame.traces).index(idx)
        states = list(frame.data[i].customdata)
        assert states == list(node_states(g, t))
        assert list(frame.data[i].marker.color) == [STATE_COLORS[s] for s in states]
    last = fig.frames[-1].data[list(fig.frames[-1].traces).index(idx)].customdata
    assert set(last) == {"done"}
    assert fig.layout.updatemenus[0].buttons[0].method == "animate"
    assert len(fig.layout.sliders[0].steps) == len(fig.frames)


def test_default_frames_are_at_most_150_and_the_frontend_caption_shows_the_block():
    tr = engine_like(200)
    fig = plot_dependency_graph(tr)
    assert len(fig.frames) <= 150
    g = dependency_graph(tr)
    blk = tr.where(kind="block")
    mid = (blk["start"][0] + blk["end"][0]) / 2
    assert frontend_status(g, mid) == ("blocked: print(z) — line 12", True)
    text, blocked = frontend_status(g, tr["start"][0])
    assert text == "cell 1, line 1: a0 = a + 1" and not blocked
    captions = [f.data[-1].text[0] for f in fig.frames]
    assert any("blocked: print(z) — line 12" in c for c in captions)


def test_expression_animation_is_labelled_schematic():
    fig = plot_dependency_graph("z = x * y + 2")
    assert "schematic" in fig.layout.title.text
    assert fig.frames and len(fig.frames) <= 150


def test_bad_input(empty_trace):
    with pytest.raises(TypeError, match="Trace"):
        plot_dependency_graph(42)
    fig = plot_dependency_graph(empty_trace)
    assert any("no events" in a.text for a in fig.layout.annotations)
    with pytest.raises(ValueError, match="max_ops"):
        dependency_graph(engine_like(2), max_ops=0)
