"""What the engine records: lanes, kinds, times, dependencies, blocks and their source lines."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
import torch

from d2l_async.engine import EngineError, NaiveEngine, ThreadedEngine
from d2l_async.trace import Kind, LaneRole, Trace

WAIT = 10.0


def slow_write(gate):
    def hold(t):
        assert gate.wait(WAIT)
    return hold


@pytest.fixture
def recorded():
    gate = threading.Event()
    with ThreadedEngine(workers=2, devices=("cpu:0", "cpu:1")) as eng:
        x = eng.array(torch.ones(2, 2), name="x")
        y = eng.array(torch.ones(2, 2), name="y")
        eng.push(slow_write(gate), writes=(x,), name="hold")
        z = x * y + 2
        x += 1
        v = z.to("cpu:1")
        threading.Timer(0.1, gate.set).start()
        print(z)  # a blocker: z waits for "hold"
        s = v.sum()
        s.item()
        eng.waitall(timeout=WAIT)
        tr = eng.trace()
    return tr


def test_lanes_are_frontend_and_virtual_workers(recorded):
    tr = recorded
    names = [l.name for l in tr.lanes]
    assert names == ["frontend", "cpu:0 worker 0", "cpu:0 worker 1", "cpu:1 worker 0", "cpu:1 worker 1"]
    assert tr.lanes[0].role is LaneRole.FRONTEND
    for lane in tr.backend_lanes:
        assert lane.virtual and lane.device in ("cpu:0", "cpu:1") and lane.stream in (0, 1)
    assert tr.is_virtual
    assert tr.meta["source"] == "engine" and tr.meta["virtual"] is True
    assert tr.meta["engine"] == "threaded" and tr.meta["workers"] == 2
    assert "virtual" in tr.meta["device"] and "cpu:0" in tr.meta["device"]


def test_ops_have_names_kinds_times_and_labels(recorded):
    tr = recorded
    ops = tr.where(kind=["op", "copy"])
    names = list(ops["name"])
    assert names.count("hold") == 1 and "mul" in names and "add" in names and "add_" in names
    assert list(tr.where(kind="copy")["name"]) == ["copy"]
    assert np.all(ops["issue"] <= ops["start"]) and np.all(ops["start"] <= ops["end"])
    i = names.index("mul")
    assert ops["reads"][i] == ("x", "y") and ops["device"][i] == "cpu:0"
    j = names.index("add_")
    assert ops["reads"][j] == () and ops["writes"][j] == ("x",)
    assert ops["nbytes"][i] == 16
    assert all(str(s).startswith("test_trace.py:") for s in ops["source"])


def test_dependency_edges(recorded):
    tr = recorded
    by_name = {tr["name"][k]: k for k in range(len(tr)) if tr["kind"][k] in ("op", "copy")}
    ids = {n: int(tr["id"][k]) for n, k in by_name.items()}
    deps = {n: tr["deps"][k] for n, k in by_name.items()}
    assert ids["hold"] in deps["mul"]  # read after write
    assert ids["mul"] in deps["add"]
    assert set(deps["add_"]) >= {ids["hold"], ids["mul"]}  # write after write and after read
    assert ids["add"] in deps["copy"]
    start = {n: tr["start"][k] for n, k in by_name.items()}
    end = {n: tr["end"][k] for n, k in by_name.items()}
    assert start["mul"] >= end["hold"] and start["add_"] >= end["mul"]


def test_launches_link_to_their_ops(recorded):
    tr = recorded
    launches = tr.where(kind="launch")
    ops = tr.where(kind=["op", "copy"])
    assert len(launches) == len(ops)
    assert set(launches["flow"]) == set(ops["id"]) == set(ops["flow"])
    assert set(launches["lane"]) == {"frontend"}
    assert all(n.startswith("push ") for n in launches["name"])
    assert len(set(tr["id"])) == len(tr)


def test_blocks_have_reasons_and_the_user_source_line(recorded):
    tr = recorded
    blocks = tr.where(kind="block")
    reasons = list(blocks["reason"])
    assert "print" in reasons
    k = reasons.index("print")
    assert blocks["lane"][k] == "frontend"
    assert blocks["source"][k].startswith("test_trace.py:") and ": print(z)" in blocks["source"][k]
    assert blocks["end"][k] - blocks["start"][k] >= 0.05
    assert math.isnan(blocks["issue"][k])
    assert len(blocks["deps"][k]) == 1


@pytest.mark.parametrize("reason, call", [
    ("wait_to_read", lambda a: a.wait_to_read(timeout=WAIT)), ("item", lambda a: a.item()),
    ("asnumpy", lambda a: a.asnumpy()), ("numpy", lambda a: a.numpy()), ("float", float),
    ("bool", bool), ("print", str), ("print", repr),
])
def test_every_blocker_records_its_reason(reason, call):
    gate = threading.Event()
    with ThreadedEngine() as eng:
        x = eng.array([1.0])
        eng.push(slow_write(gate), writes=(x,))
        threading.Timer(0.05, gate.set).start()
        call(x)
        tr = eng.trace()
    assert list(tr.where(kind="block")["reason"]) == [reason]


def test_waitall_block_and_reset_trace():
    with ThreadedEngine() as eng:
        x = eng.array([1.0])
        eng.push(lambda t: time.sleep(0.05), writes=(x,))
        eng.waitall(timeout=WAIT)
        first = eng.trace()
        assert "waitall" in list(first.where(kind="block")["reason"])
        eng.reset_trace()
        assert len(eng.trace()) == 0
        y = x + 1
        y.wait_to_read(timeout=WAIT)
        second = eng.trace()
    assert isinstance(second, Trace)
    assert list(second.where(kind="op")["name"]) == ["add"]
    assert second["start"].min() >= 0


def test_naive_engine_trace_and_record_off():
    with NaiveEngine(devices=("cpu:0", "cpu:1")) as eng:
        x = eng.array([1.0], name="x")
        y = (x + 1).to("cpu:1")
        y.item()
        tr = eng.trace()
    assert tr.meta["engine"] == "naive" and tr.is_virtual
    assert [l.name for l in tr.backend_lanes] == ["cpu:0 worker 0", "cpu:1 worker 0"]
    assert list(tr.where(kind=["op", "copy"])["name"]) == ["add", "copy"]
    assert len(tr.where(kind="block")) == 0  # nothing to wait for: every op already ran
    with ThreadedEngine(record=False) as eng:
        (eng.array([1.0]) + 1).item()
        with pytest.raises(EngineError, match="record=True"):
            eng.trace()
        assert eng._observers == ()


def test_trace_converts_to_frame_and_events(recorded):
    df = recorded.to_frame()
    assert len(df) == len(recorded)
    kinds = {Kind(e.kind).value for e in recorded.events()}
    assert kinds == {"op", "copy", "launch", "block"}


def test_a_failing_observer_warns_and_the_engine_keeps_working():
    class Broken:
        hooks = frozenset({"on_finish"})

        def on_finish(self, op):
            raise RuntimeError("observer bug")

    seen = []

    class Counter:
        def on_push(self, op): seen.append("push")
        def on_ready(self, op): seen.append("ready")
        def on_start(self, op): seen.append("start")
        def on_finish(self, op): seen.append("finish")
        def on_block_begin(self, reason, t, source): seen.append(reason)
        def on_block_end(self, reason, t, deps): seen.append("end")

    with ThreadedEngine(record=False) as eng:
        eng.set_observers((Broken(), Counter()))
        with pytest.warns(RuntimeWarning, match="observer bug"):
            y = eng.array([1.0]) + 1
            assert y.wait_to_read(timeout=WAIT).item() == 2.0
            eng.waitall(timeout=WAIT)
    moments = [m for m in seen if m in ("push", "ready", "start", "finish")]
    assert moments == ["push", "ready", "start", "finish"]  # per op, in this order
    assert "wait_to_read" in seen and "end" in seen


# -- lean columns ------------------------------------------------------------------------
def test_an_engine_trace_is_lean_and_reads_as_before():
    import numpy as np

    from d2l_async.engine import ThreadedEngine
    from d2l_async.trace import Trace
    from d2l_async.trace._columns import Coded, LeanColumns, Ragged

    with ThreadedEngine(workers=2, devices=("cpu:0", "cpu:1")) as eng:
        x = eng.array([1.0], name="x")
        for _ in range(2_000):
            y = x + 1
            x += 1
        z = y.to("cpu:1")
        z.wait_to_read(timeout=10)
        eng.waitall(timeout=10)
        tr = eng.trace()
    cols = tr.columns
    assert isinstance(cols, LeanColumns)
    assert isinstance(cols.raw("lane"), Coded) and isinstance(cols.raw("deps"), Ragged)
    assert cols.nbytes / len(tr) <= 150  # the goal per row, as returned
    ops = tr.where(kind="op")  # filtering keeps it lean
    assert isinstance(ops.columns.raw("reads"), Ragged) and isinstance(ops.columns.raw("name"), Coded)
    # decoded, every column reads as the plain model holds it: a plain rebuild is equal row by row
    plain = Trace.from_columns({k: tr[k] for k in tr.columns}, tr.lanes, tr.meta)
    for k in tr.columns:
        a, b = tr[k], plain[k]
        if a.dtype == object:
            assert a.tolist() == b.tolist(), k
        else:
            assert np.array_equal(a, b, equal_nan=True), k
    incs = ops.filter(ops["name"] == "add_")
    assert all(r == () and w == ("x",) for r, w in zip(incs["reads"], incs["writes"]))  # x += 1
    deps = incs["deps"]
    assert all(d and isinstance(d[0], int) for d in deps[1:])  # each waited for the one before
    assert list(tr.where(kind="copy")["writes"]) == [(z.label,)]


def test_ragged_take_equals_taking_the_decoded_tuples():
    import numpy as np

    from d2l_async.trace._columns import Ragged

    rng = np.random.default_rng(21)
    counts = rng.integers(0, 4, 500).astype(np.int32)
    flat = rng.integers(-50, 50, int(counts.sum()))
    col = Ragged(counts, flat, lambda c: f"v{c}")
    decoded = col.decode()
    for index in (rng.permutation(500), np.nonzero(rng.random(500) < 0.3)[0], np.arange(0)):
        assert col.take(index).decode().tolist() == decoded[index].tolist()
