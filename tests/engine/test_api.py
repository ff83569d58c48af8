"""The array API: what is known at once, operators, copies, custom ops, and clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from d2l_async.engine import EngineArray, EngineError, ThreadedEngine, measure_scheduling_overhead

WAIT = 10.0


def test_metadata_is_known_without_waiting(engine):
    gate_open = []
    x = engine.array(torch.ones(2, 3), name="x")
    engine.push(lambda t: gate_open.append(1), writes=(x,))
    y = (x @ engine.array(torch.ones(3, 4)))
    assert (y.shape, y.dtype, y.device) == (torch.Size([2, 4]), torch.float32, "cpu:0")
    assert x.name == "x" and y.name.startswith("a")
    assert y.ndim == 2 and len(y) == 2 and y.numel() == 8
    assert isinstance(y, EngineArray)


def test_default_names_count_up(engine):
    a, b = engine.array([1.0]), engine.array([2.0])
    c = a + b
    assert (a.name, b.name, c.name) == ("a0", "a1", "a2")


def test_operators_with_scalars_on_both_sides(engine):
    x = engine.array(torch.tensor([1.0, 2.0, 4.0]))
    t = torch.tensor([1.0, 2.0, 4.0])
    cases = [(x + 1, t + 1), (1 + x, 1 + t), (x - 1, t - 1), (1 - x, 1 - t), (x * 3, t * 3),
             (3 * x, 3 * t), (x / 2, t / 2), (2 / x, 2 / t), (x ** 2, t ** 2), (2 ** x, 2 ** t),
             (-x, -t), (x @ x, t @ t), (x.sum(), t.sum()), (x.mean(), t.mean()), (x.exp(), t.exp()),
             ((x - 2).relu(), (t - 2).relu())]
    for got, want in cases:
        assert np.array_equal(got.asnumpy(), want.numpy())


def test_in_place_ops_write_the_same_array(engine):
    x = engine.array([1.0, 2.0], name="x")
    before = x
    x += 1
    x *= 3
    x -= 1
    x /= 2
    x **= 2
    assert x is before and x.name == "x"
    assert x.asnumpy().tolist() == [(((1 + 1) * 3 - 1) / 2) ** 2, (((2 + 1) * 3 - 1) / 2) ** 2]


def test_blocker_results(engine):
    x = engine.array(torch.tensor(2.5))
    assert x.item() == 2.5 and float(x) == 2.5 and int(x) == 2 and bool(x)
    assert str(x) == str(torch.tensor(2.5))
    assert "virtual" in repr(x) and "2.5" in repr(x)
    a = engine.array([1.0, 2.0])
    n = a.asnumpy()
    a += 1
    assert n.tolist() == [1.0, 2.0]  # asnumpy copied: later writes do not change it
    assert np.asarray(a).tolist() == [2.0, 3.0]


def test_array_copies_its_input_and_to_always_copies(engine):
    t = torch.zeros(2)
    x = engine.array(t)
    t += 5
    assert x.asnumpy().tolist() == [0.0, 0.0]
    y = x.to("cpu:0")
    y += 1
    assert x.asnumpy().tolist() == [0.0, 0.0] and y.asnumpy().tolist() == [1.0, 1.0]


def test_push_calls_fn_with_read_then_write_tensors_and_extra_args(engine):
    a, b = engine.array([1.0, 2.0]), engine.array([10.0, 20.0])
    out = engine.array([0.0, 0.0], name="out")

    def axpy(x, y, o, alpha):
        torch.add(x * alpha, y, out=o)

    op_id = engine.push(axpy, 3.0, reads=(a, b), writes=(out,), name="axpy")
    assert isinstance(op_id, int)
    assert out.asnumpy().tolist() == [13.0, 26.0]
    names = list(engine.trace().where(kind="op")["name"])
    assert names == ["axpy"]


def test_a_custom_op_may_span_devices_and_runs_where_it_writes(engine):
    x = engine.array(torch.ones(2, 2), name="x")
    w = engine.array(torch.ones(2, 2), device="cpu:1", name="w")
    engine.push(lambda src, dst: dst.add_(src), reads=(x,), writes=(w,), name="my_op")
    assert w.asnumpy().tolist() == [[2.0, 2.0], [2.0, 2.0]]
    engine.push(lambda src: None, reads=(w,), name="peek", device="cpu:0")
    engine.waitall(timeout=WAIT)
    ops = engine.trace().where(kind="op")
    lanes = dict(zip(ops["name"], ops["device"]))
    assert lanes == {"my_op": "cpu:1", "peek": "cpu:0"}


@pytest.mark.parametrize("kwargs, match", [
    (dict(devices=("gpu:7",)), "gpu:7"),
    (dict(devices=("cpu:0", "cpu:0")), "more than once"),
    (dict(devices=()), "at least one"),
    (dict(workers=0), "workers"),
    (dict(workers=1.5), "workers"),
    (dict(max_pending=0), "max_pending"),
    (dict(torch_threads=0), "torch_threads"),
])
def test_bad_engine_arguments_fail_clearly(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ThreadedEngine(**kwargs)


def test_bad_use_fails_clearly(engine):
    a = engine.array([1.0], device="cpu:0")
    b = engine.array([1.0], device="cpu:1")
    with pytest.raises(ValueError, match=r"\.to\("):
        a + b
    with pytest.raises(ValueError, match="not one of this engine"):
        a.to("cpu:5")
    with pytest.raises(ValueError, match="not one of this engine"):
        engine.array([1.0], device="cuda:0")
    with pytest.raises(TypeError, match="eng.array"):
        a + torch.ones(1)
    with pytest.raises(TypeError):
        a + "text"
    with pytest.raises(TypeError, match="callable"):
        engine.push(42, reads=(a,))
    with pytest.raises(TypeError, match="tuple"):
        engine.push(print, reads=a)
    with ThreadedEngine() as other:
        c = other.array([1.0])
        with pytest.raises(ValueError, match="different engines"):
            a + c
        with pytest.raises(TypeError, match="this engine"):
            engine.push(print, reads=(c,))


def test_measure_scheduling_overhead_returns_frozen_records():
    rows = measure_scheduling_overhead(workers=(1, 2), ops=200, repeats=2)
    assert [r.workers for r in rows] == [1, 2]
    for r in rows:
        assert r.per_op_us > 0 and len(r.runs) == 2 and r.ops == 200 and r.spread_us >= 0
        with pytest.raises(Exception):
            r.workers = 3
    with pytest.raises(ValueError, match="positive"):
        measure_scheduling_overhead(workers=(0,))


def test_shutdown_engine_error_type():
    eng = ThreadedEngine()
    eng.shutdown()
    with pytest.raises(EngineError):
        eng.push(print)
