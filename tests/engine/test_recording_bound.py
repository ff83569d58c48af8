"""Recording is column-wise and bounded: a loop of any length cannot exhaust
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


@pytest.mark.parametrize("n", [16_384, 70_000])
def test_an_op_reading_tens_of_thousands_of_arrays_is_recorded_and_later_rows_stay_right(n):
    """the reads shared a packed field with the writes; 16,384 reads overflowed it, the
    row was dropped with a warning after its labels were kept, and every later row was wrong."""
    import warnings

    with NaiveEngine() as eng, warnings.catch_warnings():
        warnings.simplefilter("error")  # no "an observer raised" warning
        xs = [eng.array([1.0], name=f"x{i}") for i in range(n)]
        y = eng.array([0.0], name="y")
        eng.push(lambda *t: t[-1].fill_(float(len(t) - 1)), reads=tuple(xs), writes=(y,), name="gather")
        z = y + 1
        assert z.item() == n + 1
        tr = eng.trace()
    ops = tr.where(kind="op")
    by_name = {name: i for i, name in enumerate(ops["name"])}
    big, after = by_name["gather"], by_name["add"]
    assert len(ops["reads"][big]) == n and ops["reads"][big][:2] == ("x0", "x1")
    assert ops["writes"][big] == ("y",)
    assert ops["reads"][after] == ("y",) and ops["writes"][after] == (z.label,)


def test_a_row_the_recorder_cannot_hold_is_refused_whole_and_later_rows_stay_right():
    from types import SimpleNamespace

    from d2l_async.engine._observer import Recorder

    rec = Recorder(["cpu:0"], 1, "threaded", t0=0.0)
    dev = SimpleNamespace(index=0)

    def var(label):
        return SimpleNamespace(num=-1, label=label)

    def op(i, line, reads, writes):
        return SimpleNamespace(id=i, name="op", file="f.py", line=line, deps=(i - 1,) if i else (),
                               reads=tuple(map(var, reads)), writes=tuple(map(var, writes)), out=None,
                               nbytes=0, t_launch=0.0, t_issue=0.0, t_start=float(i), t_end=i + 0.5,
                               device=dev, worker=0, kind="op", error=None)

    rec.on_finish(op(0, 1, ["a"], ["b"]))
    with pytest.raises(Exception):  # a line no uint32 holds: refused before anything is kept
        rec.on_finish(op(1, -1, ["c", "d", "e"], ["f"]))
    rec.on_finish(op(2, 3, ["g"], ["h"]))
    assert rec.ops == 2 and rec.recorded == 2
    ops = rec.trace().where(kind="op")
    assert [tuple(r) for r in ops["reads"]] == [("a",), ("g",)]
    assert [tuple(w) for w in ops["writes"]] == [("b",), ("h",)]
    assert [tuple(d) for d in ops["deps"]] == [(), (1,)]
