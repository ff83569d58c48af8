"""Notebook 02/07 figure fixes: the reader's names in the graph, whole op labels, an honest caption,
and an animated timeline without overprinted push labels or half-op queue ticks."""

from __future__ import annotations

import torch

from d2l_async import viz
from d2l_async.engine import ThreadedEngine
from d2l_async.viz._graph import dependency_graph, frontend_status, user_names
from d2l_async.viz._graph_figure import _wrap


def _z_trace():
    with ThreadedEngine(workers=1) as eng:
        x = eng.array(torch.ones(50, 50), name="x")
        y = eng.array(torch.ones(50, 50), name="y")
        z = x * y + 2
        z.wait_to_read(timeout=30)
        eng.waitall(timeout=30)
        return eng.trace()


def test_the_graph_uses_the_readers_variable_names():
    trace = _z_trace()
    labels = set(dependency_graph(trace).nodes["label"])
    assert "z" in labels  # not the engine's automatic a3
    assert {"x", "y"} <= labels
    assert not any(str(lbl) == "a3" for lbl in labels)
    ops = trace.where(kind="op")
    assert set(user_names(trace, list(range(len(trace))))) == {str(ops["writes"][len(ops) - 1][0])}


def test_a_push_from_the_library_is_named_by_its_op():
    from d2l_async.experiments import run_mlp_parallel

    r = run_mlp_parallel(batches=1, batch_size=8, hidden=8, features=4, backend="engine")
    g = dependency_graph(r.trace, max_ops=22)
    texts = list(g.frontend["text"])
    assert not any(".py:" in t for t in texts), texts[:5]
    assert any(t.startswith("push ") for t in texts)
    what, _ = frontend_status(g, float(g.frontend["start"].iloc[0]))
    assert "parallel" not in what


def test_op_labels_wrap_instead_of_being_cut():
    assert _wrap("backward W2", 10) == "backward<br>W2"
    assert _wrap("make minibatch", 10) == "make<br>minibatch"
    assert _wrap("add", 10) == "add"
    # a long name is wrapped whole, never cut with "…" (07's "X0.0@cp…" named nothing)
    long = _wrap("a very long name indeed for an op", 10)
    assert "…" not in long and long.replace("<br>", " ") == "a very long name indeed for an op"
    assert all(len(line) <= 10 for line in long.split("<br>"))
    assert _wrap("gW20(cpu:2)", 8) == "gW20<br>(cpu:2)"  # broken before "(", a word kept whole


def test_an_array_in_its_devices_lane_drops_the_device_from_its_name():
    from d2l_async.viz._graph_figure import _in_lane

    assert _in_lane("X0.0@cpu:1", "cpu:1") == "X0.0"
    assert _in_lane("X0.0@cpu:1", "cpu:2") == "X0.0@cpu:1"  # another lane: the name says where
    assert _in_lane("gW20(cpu:2)@cpu:1", "cpu:1") == "gW20(cpu:2)"
    assert _in_lane("x", "") == "x"
    assert _in_lane("W1@cpu:1 (v2)", "cpu:1") == "W1 (v2)"  # a later version of the same array


def test_the_mlp_graph_shows_whole_labels():
    from d2l_async.experiments import run_mlp_parallel

    r = run_mlp_parallel(batches=1, batch_size=8, hidden=8, features=4, backend="engine")
    fig = viz.plot_dependency_graph(r.trace, max_ops=22)
    texts = [t for tr in fig.data if tr.mode == "markers+text" for t in tr.text if t]
    assert any("backward" in t for t in texts) and not any(t.startswith("backwa…") for t in texts)
    assert any("minibatch" in t for t in texts)


def test_animated_timeline_has_no_push_labels_and_whole_queue_ticks():
    fig = viz.animate_timeline(_z_trace())
    launches = [tr for tr in fig.data if tr.type == "bar" and tr.name == "launch"]
    assert launches and all(tr.text is None for tr in launches)
    axis = fig.layout.yaxis2
    assert axis.dtick >= 1 and float(axis.dtick).is_integer() and axis.tick0 == 0


def test_every_figure_of_a_modelled_run_says_so():
    from d2l_async.engine import DeviceModel

    with ThreadedEngine(devices=("cpu:0", "cpu:1"), model=DeviceModel(flops_per_s=1e12)) as eng:
        x = eng.array(torch.ones(8, 8), name="x")
        z = x @ x
        z.wait_to_read(timeout=30)
        trace = eng.trace()
    label = "modelled device: durations from a cost model, not measured"
    for fig in (viz.plot_timeline(trace), viz.plot_timeline(trace, title="mine"),
                viz.plot_timeline(trace, title="mine<br><sup>details</sup>"),
                viz.animate_timeline(trace, title="mine"), viz.plot_dependency_graph(trace, title="mine")):
        assert label in fig.layout.title.text and fig.layout.title.text.count(label) == 1
    assert label not in viz.plot_timeline(_z_trace(), title="mine").layout.title.text


def test_modelled_lanes_are_labelled_modelled():
    from d2l_async.engine import DeviceModel
    from d2l_async.viz._timeline import timeline_data

    with ThreadedEngine(devices=("cpu:0", "cpu:1"), model={"cpu:1": DeviceModel(flops_per_s=1e12)}) as eng:
        a = eng.array(torch.ones(4, 4), device="cpu:1")
        (a @ a).wait_to_read(timeout=30)
        (eng.array(torch.ones(4, 4)) + 1).wait_to_read(timeout=30)
        labels = timeline_data(eng.trace()).labels
    assert "cpu:1 worker 0 (modelled)" in labels and "cpu:0 worker 0 (virtual)" in labels
