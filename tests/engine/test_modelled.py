"""Modelled-time devices: the cost model (pure), and the schedule facts read from traces.

Schedule tests read the trace: each op's recorded (held) duration is at least its modelled one
(the worker sleeps until then), ops of one device never overlap, two devices' ops do, a barrier
keeps them apart.  Spans are compared with the model's op time with a tolerance for wake-up
latency, never with another wall-clock measurement.
"""

from __future__ import annotations

import math
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from d2l_async.engine import DeviceModel, NaiveEngine, ThreadedEngine, with_flops
from d2l_async.engine import MODELLED_LABEL
from d2l_async.engine._modelled import ModelledDevice, OpCost, op_cost, resolve_models

N = 64  # a 64x64 product is ~0.1 ms of real work: far below its modelled time
MODEL = DeviceModel(flops_per_s=2e9 * 64 ** 3 / 256 ** 3, launch_s=0.0)  # 64x64 product: ~16.8 ms
T = MODEL.matmul_seconds(N, N, N)
TIMEOUT = 30


def _ops(trace, device=None):
    ops = trace.where(kind="op")
    rows = [(str(ops["device"][i]), float(ops["start"][i]), float(ops["end"][i])) for i in range(len(ops))]
    rows = [r for r in rows if device is None or r[0] == device]
    return sorted(rows, key=lambda r: r[1])


def _span(rows):
    return max(r[2] for r in rows) - min(r[1] for r in rows)


def _late_s(n: int) -> float:
    """How much later than ``n * T`` a chain of ``n`` sleeps of ``T`` ends on a fresh thread now: the machine's
    scheduling noise, measured beside the run it bounds (a loaded machine wakes threads late)."""
    out = []

    def sleeps():
        t0 = time.perf_counter()
        for _ in range(n):
            time.sleep(T)
        out.append(time.perf_counter() - t0 - n * T)

    thread = threading.Thread(target=sleeps, name="sleep-noise")
    thread.start()
    thread.join(timeout=TIMEOUT)
    return max(0.0, out[0])


def _chain(eng, device, n, start):
    a = eng.array(start, device=device, name=f"c@{device}")
    m = eng.array(torch.eye(N) * 0.5 + 0.01, device=device, name=f"m@{device}")
    for _ in range(n):
        a = a @ m
    return a


# -- the cost model: pure -----------------------------------------------------------------------
def test_seconds_is_launch_plus_roofline():
    m = DeviceModel(flops_per_s=1e9, bytes_per_s=1e8, link_bytes_per_s=1e7, launch_s=1e-5)
    assert m.seconds(OpCost(2e9, 1e6)) == pytest.approx(1e-5 + 2.0)       # compute-bound
    assert m.seconds(OpCost(1e3, 1e8)) == pytest.approx(1e-5 + 1.0)       # memory-bound
    assert m.seconds(OpCost(0, 1e7, copy=True)) == pytest.approx(1e-5 + 1.0)  # the link
    assert m.matmul_seconds(10, 20, 30) == pytest.approx(1e-5 + max(2 * 10 * 20 * 30 / 1e9,
                                                                    4 * (200 + 600 + 300) / 1e8))


@pytest.mark.parametrize("bad", [dict(flops_per_s=0), dict(bytes_per_s=-1), dict(link_bytes_per_s=math.inf),
                                 dict(launch_s=-1e-6), dict(launch_s=True), dict(name="")])
def test_device_model_rejects_bad_speeds(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        DeviceModel(**bad)


def _var(*shape, dtype=torch.float32):
    return SimpleNamespace(_shape=torch.Size(shape), _dtype=dtype)


def _op(name, reads=(), writes=(), out=None, kind="op", fn=None, nbytes=0):
    return SimpleNamespace(name=name, reads=tuple(reads), writes=tuple(writes), out=out, kind=kind, fn=fn,
                           nbytes=nbytes, error=None, device=SimpleNamespace(stopping=False))


def test_op_cost_of_matmul_elementwise_copy_and_custom():
    a, b, c = _var(8, 16), _var(16, 4), _var(8, 4)
    assert op_cost(_op("matmul", (a, b), out=c)) == OpCost(2 * 8 * 16 * 4, 4 * (128 + 64 + 32))
    x, y = _var(10, 10), _var(10, 10)
    assert op_cost(_op("add", (x,), out=y)) == OpCost(100, 800)  # x + 1: one flop per element
    assert op_cost(_op("copy", (x,), out=y, kind="copy", nbytes=400)) == OpCost(0, 400, copy=True)

    @with_flops(lambda xs, ws, outs: 2 * xs[0] * xs[1] * ws[1])
    def forward(x, w, out):  # pragma: no cover - never run here
        pass

    w, o = _var(10, 3), _var(10, 3)
    assert op_cost(_op("forward", (x, w), (o,), fn=forward)) == OpCost(2 * 10 * 10 * 3, 4 * (100 + 30 + 30))
    assert op_cost(_op("other", (x, w), (o,), fn=lambda *t: None)).flops == 100  # undeclared: per element


def test_hold_sleeps_to_the_modelled_time_and_counts_overruns():
    dev = ModelledDevice(DeviceModel(flops_per_s=1e6, bytes_per_s=1e12, launch_s=0.0))
    op = _op("add", (_var(10_000),), out=_var(10_000))  # 10,000 flops at 1 MFLOP/s: 10 ms
    t0 = time.perf_counter()
    dev.hold(op, t0)
    assert time.perf_counter() - t0 >= 0.010
    assert (dev.ops, dev.overruns) == (1, 0)
    dev.hold(op, t0 - 1.0)  # "began" 1 s ago: the real work took longer than modelled
    assert (dev.ops, dev.overruns) == (2, 1) and dev.worst_overrun >= 1.0 / 0.010 * 0.9
    failed = _op("add", (_var(10_000),), out=_var(10_000))
    failed.error = RuntimeError("boom")
    t1 = time.perf_counter()
    dev.hold(failed, t1)
    assert time.perf_counter() - t1 < 0.010 and dev.ops == 2  # a failed op is not held


def test_hold_lets_a_stopping_engine_go():
    dev = ModelledDevice(DeviceModel(flops_per_s=1.0, launch_s=0.0))  # an op would take hours
    op = _op("add", (_var(10_000),), out=_var(10_000))
    op.device.stopping = True
    t0 = time.perf_counter()
    dev.hold(op, t0)
    assert time.perf_counter() - t0 < 1.0


def test_resolve_models_forms_and_errors():
    assert resolve_models(None, ("cpu:0",)) == {}
    assert set(resolve_models(MODEL, ("cpu:0", "cpu:1"))) == {"cpu:0", "cpu:1"}
    assert set(resolve_models({"cpu:1": MODEL}, ("cpu:0", "cpu:1"))) == {"cpu:1"}
    with pytest.raises(ValueError, match="cpu:7"):
        ThreadedEngine(devices=("cpu:0",), model={"cpu:7": MODEL})
    with pytest.raises(TypeError, match="DeviceModel"):
        ThreadedEngine(devices=("cpu:0",), model="fast")


# -- schedules, read from traces ------------------------------------------------------------------
def test_dependent_chain_takes_n_times_the_op_time():
    n = 6
    with ThreadedEngine(workers=2, devices=("cpu:0",), model=MODEL) as eng:
        _chain(eng, "cpu:0", 1, torch.eye(N)).wait_to_read(timeout=TIMEOUT)  # warm-up
        eng.reset_trace()
        _chain(eng, "cpu:0", n, torch.eye(N))
        eng.waitall(timeout=TIMEOUT)
        trace = eng.trace()
    rows = [r for r in _ops(trace) if r[2] - r[1] > T / 2]  # the products (not the tiny array inits)
    assert len(rows) == n
    for (_, s0, e0), (_, s1, _) in zip(rows, rows[1:]):
        assert s1 >= e0  # each product waited for the one before: a second worker cannot help
    assert all(e - s >= T * 0.999 for _, s, e in rows)  # held at least the modelled time
    assert n * T <= _span(rows) <= n * T * 1.25 + 0.02 + _late_s(n)
    assert trace.meta["modelled_label"] == MODELLED_LABEL and MODELLED_LABEL in trace.meta["device"]
    assert trace.meta["modelled"]["cpu:0"]["ops"] >= n


def _two_chains(barrier: bool, n: int):
    with ThreadedEngine(devices=("cpu:0", "cpu:1"), model=MODEL) as eng:
        for d in ("cpu:0", "cpu:1"):
            _chain(eng, d, 1, torch.eye(N))
        eng.waitall(timeout=TIMEOUT)
        eng.reset_trace()
        ends = []
        for d in ("cpu:0", "cpu:1"):
            ends.append(_chain(eng, d, n, torch.eye(N)))
            if barrier:
                eng.waitall(timeout=TIMEOUT)
        eng.waitall(timeout=TIMEOUT)
        return eng.trace(), [e.asnumpy() for e in ends]


def test_two_devices_take_half_and_a_barrier_serializes():
    n = 5
    together, values = _two_chains(False, n)
    apart, _ = _two_chains(True, n)
    a = [r for r in _ops(together) if r[2] - r[1] > T / 2]
    b = [r for r in _ops(apart) if r[2] - r[1] > T / 2]
    assert len(a) == len(b) == 2 * n
    # side by side: ops of the two devices overlap in time
    a0, a1 = [r for r in a if r[0] == "cpu:0"], [r for r in a if r[0] == "cpu:1"]
    assert any(s0 < e1 and s1 < e0 for _, s0, e0 in a0 for _, s1, e1 in a1)
    # ~1/2 of the 2n ops one after the other (plus the lateness plain sleeps show now)
    assert n * T <= _span(a) <= n * T * 1.25 + 0.02 + _late_s(n)
    # with the barrier: no op of cpu:1 starts before the last of cpu:0 ended
    b0, b1 = [r for r in b if r[0] == "cpu:0"], [r for r in b if r[0] == "cpu:1"]
    assert min(s for _, s, _ in b1) >= max(e for _, _, e in b0)
    assert _span(b) >= 2 * n * T  # ~1x: the sum of both chains
    assert _span(b) / _span(a) >= 1.6
    expected = torch.linalg.matrix_power(torch.eye(N) * 0.5 + 0.01, n)
    for v in values:
        torch.testing.assert_close(torch.from_numpy(v), expected)


def test_values_equal_eager_torch_bitwise():
    x, y = torch.rand(32, 32), torch.rand(32, 32)
    eager = ((x @ y) * y + 2).exp().sum()
    with ThreadedEngine(devices=("cpu:0", "cpu:1"), model=MODEL) as eng:
        ex, ey = eng.array(x, device="cpu:1"), eng.array(y, device="cpu:1")
        got = ((ex @ ey) * ey + 2).exp().sum().to("cpu:0").item()
    assert got == eager.item()


def test_modelled_devices_sleep_and_do_not_spin():
    n = 6
    cpu0, wall0 = time.process_time(), time.perf_counter()
    together, _ = _two_chains(False, n)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    assert wall >= n * T
    assert cpu < 0.5 * wall, f"the process used {cpu:.3f} s of CPU in {wall:.3f} s: the holds spin"


def test_only_the_named_devices_are_modelled():
    with ThreadedEngine(devices=("cpu:0", "cpu:1"), model={"cpu:1": MODEL}) as eng:
        a = eng.array(torch.eye(N), device="cpu:0") @ eng.array(torch.eye(N), device="cpu:0")
        b = eng.array(torch.eye(N), device="cpu:1") @ eng.array(torch.eye(N), device="cpu:1")
        eng.waitall(timeout=TIMEOUT)
        trace = eng.trace()
        del a, b
    assert set(trace.meta["modelled"]) == {"cpu:1"}
    assert "cpu:0: threads on this CPU (measured)" in trace.meta["device"]
    held = [e - s for d, s, e in _ops(trace, "cpu:1")]
    real = [e - s for d, s, e in _ops(trace, "cpu:0")]
    assert max(held) >= T * 0.999 and max(real) < T


def test_a_custom_op_declares_its_flops():
    calls = []

    @with_flops(lambda a, out: 2e9 * MODEL.flops_per_s / 2e9 * 0.02)  # 20 ms worth, whatever the shapes
    def scale(a, out):
        calls.append(1)
        out.copy_(a * 2)

    with ThreadedEngine(devices=("cpu:0",), model=MODEL) as eng:
        a = eng.array(torch.ones(4), name="a")
        out = eng.array(torch.zeros(4), name="out")
        eng.push(scale, reads=(a,), writes=(out,))
        assert out.asnumpy().tolist() == [2.0] * 4
        trace = eng.trace()
    d = [e - s for _, s, e in _ops(trace)]
    assert max(d) >= 0.02 * 0.999 and calls == [1]


def test_a_raising_flops_function_fails_the_op_not_the_worker():
    @with_flops(lambda a, out: 1 / 0)
    def noop(a, out):
        pass

    with ThreadedEngine(devices=("cpu:0",), model=MODEL) as eng:
        a, out = eng.array(torch.ones(2)), eng.array(torch.zeros(2))
        eng.push(noop, reads=(a,), writes=(out,))
        with pytest.raises(ZeroDivisionError):
            out.wait_to_read(timeout=TIMEOUT)
        assert (eng.array(torch.ones(2)) + 1).asnumpy().tolist() == [2.0, 2.0]  # still works
        eng.waitall(timeout=TIMEOUT)  # raised at the blocker already: not again (defect 10)


def test_naive_engine_holds_inline():
    with NaiveEngine(devices=("cpu:0",), model=MODEL) as eng:
        a = eng.array(torch.eye(N))
        t0 = time.perf_counter()
        b = a @ a  # runs (and holds) at push time: the synchronous twin
        assert time.perf_counter() - t0 >= T * 0.999
        assert b.asnumpy().tolist() == torch.eye(N).tolist()
        assert eng.trace().meta["modelled"]["cpu:0"]["ops"] == 1


def test_ctrl_c_during_an_inline_hold_reaches_the_caller_and_leaves_the_engine_usable():
    import _thread
    import threading

    import warnings

    slow = DeviceModel(flops_per_s=1e3, launch_s=0.0)  # a 64x64 product: minutes
    with warnings.catch_warnings(record=True) as caught, NaiveEngine(devices=("cpu:0",), model={"cpu:0": slow}) as eng:
        warnings.simplefilter("always")
        a = eng.array(torch.eye(N))
        timer = threading.Timer(0.2, _thread.interrupt_main)
        timer.start()
        t0 = time.perf_counter()
        try:
            with pytest.raises(KeyboardInterrupt):
                a @ a
        finally:
            timer.cancel()
            timer.join(timeout=5)
        assert time.perf_counter() - t0 < 2.0
        assert eng.statistics().pending == 0
        assert (eng.array(torch.ones(2)) + 1).asnumpy().tolist() == [2.0, 2.0]
    assert not [w for w in caught if "observer raised" in str(w.message)]  # the op was recorded whole
