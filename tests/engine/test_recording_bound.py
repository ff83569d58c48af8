"""Recording is column-wise and bounded (issue 11, item 8): a loop of any length cannot exhaust
memory through the recorder, and the trace says where recording stopped."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from d2l_async.engine import NaiveEngine, ThreadedEngine
from d2l_async.engine._observer import RECORD_LIMIT

WAIT = 10.0


@pytest.mark.parametrize("kind", ["threaded", "naive"])
def test_recording_stops_at_the_limit_and_the_trace_says_so(kind):
    eng = ThreadedEngine(record=50) if kind == "threaded" else NaiveEngine(record=50)
    with eng:
        x = eng.array(torch.zeros(1), name="x")
        for _ in range(200):
            x += 1
        assert x.item() == 200.0  # the work is all done; only the recording stopped
        eng.waitall(timeout=WAIT)
        tr = eng.trace()
        assert eng._observers == ()  # past the limit ops are not even stamped
    rec = tr.meta["recording"]
    assert rec["limit"] == 50 and rec["recorded"] == 50 and rec["stopped"] and rec["dropped"] >= 150
    assert "recording stopped at 50 events" in tr.meta["recording_stopped"]
    assert len(tr.where(kind=["op", "block"])) == 50
    marker = tr.where(kind="runtime")
    assert list(marker["name"]) == ["recording stopped at 50 events"] and list(marker["lane"]) == ["frontend"]
    assert marker["start"][0] >= tr.where(kind="op")["end"].max() - 1e-9


def test_figures_still_build_from_a_stopped_recording():
    from d2l_async import viz

    with ThreadedEngine(record=30) as eng:
        x = eng.array(torch.zeros(1), name="x")
        for _ in range(100):
            x += 1
        x.wait_to_read(timeout=WAIT)
        tr = eng.trace()
    assert viz.plot_timeline(tr).data and viz.plot_queue_length(tr).data


def test_reset_trace_records_again_after_the_limit():
    with ThreadedEngine(record=10) as eng:
        x = eng.array(torch.zeros(1), name="x")
        for _ in range(20):
            x += 1
        eng.waitall(timeout=WAIT)
        eng.reset_trace()
        y = x + 1
        y.wait_to_read(timeout=WAIT)
        tr = eng.trace()
    assert list(tr.where(kind="op")["name"]) == ["add"] and not tr.meta["recording"]["stopped"]


def test_a_recorded_op_costs_under_100_bytes_of_columns():
    n = 2000
    with ThreadedEngine() as eng:
        x = eng.array(torch.zeros(1), name="x")
        for _ in range(n // 2):
            x += 1  # one write
            y = x * 2  # a read and a fresh output
        eng.waitall(timeout=WAIT)
        per_op = eng._recorder.nbytes() / n
        tr = eng.trace()
    assert per_op <= 100, f"{per_op:.0f} bytes per recorded op"
    ops = tr.where(kind="op")
    assert len(ops) == n
    muls = ops.filter(ops["name"] == "mul")
    assert set(muls["reads"]) == {("x",)} and all(w[0].startswith("a") for w in muls["writes"])
    assert len(set(muls["writes"])) == n // 2  # each fresh output keeps its own label
    assert (y.label,) in set(muls["writes"])


def test_engine_labels_are_made_on_demand_and_match_the_trace():
    with ThreadedEngine() as eng:
        a = eng.array([1.0])
        b = a + 1
        named = eng.array([2.0], name="w")
        c = b * named
        c.wait_to_read(timeout=WAIT)
        tr = eng.trace()
    assert (a.label, b.label, named.label, c.label) == ("a0", "a1", "w", "a3")
    ops = tr.where(kind="op")
    assert list(ops["reads"]) == [("a0",), ("a1", "w")] and list(ops["writes"]) == [("a1",), ("a3",)]


@pytest.mark.parametrize("bad", [0, -5, "many", 2.5])
def test_record_must_be_a_bool_or_a_positive_count(bad):
    with pytest.raises(ValueError, match="record="):
        NaiveEngine(record=bad)


def test_the_default_limit_is_a_million_events():
    assert RECORD_LIMIT == 1_000_000
    with NaiveEngine() as eng:
        assert eng._recorder.limit == RECORD_LIMIT
        assert np.isnan(eng._recorder.stopped_at)
