"""Bounded queue (back-pressure) and the statistics snapshot."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
import torch

from d2l_async.engine import EngineStatistics, ThreadedEngine

WAIT = 10.0


def gate_op(gate: threading.Event):
    def gated(*tensors):
        assert gate.wait(WAIT), "test gate never opened"
    return gated


def test_push_blocks_while_max_pending_ops_are_pending_and_records_it():
    gate = threading.Event()
    with ThreadedEngine(workers=1, max_pending=2) as eng:
        x = eng.array([0.0])
        eng.push(gate_op(gate), writes=(x,), name="held")
        y = x + 1  # second pending op: the queue is full now
        assert eng.statistics().pending == 2
        timer = threading.Timer(0.3, gate.set)
        timer.start()
        t0 = time.perf_counter()
        z = y + 1  # must wait until the gate opens and an op finishes
        waited = time.perf_counter() - t0
        timer.join(WAIT)
        assert waited >= 0.2
        assert z.item() == 2.0
        stats = eng.statistics()
        tr = eng.trace()
    assert stats.blocked_seconds >= 0.2
    blocks = tr.where(kind="block")
    full = [i for i in range(len(blocks)) if blocks["reason"][i] == "full queue"]
    assert len(full) == 1
    i = full[0]
    assert blocks["end"][i] - blocks["start"][i] >= 0.2
    assert "z = y + 1" in blocks["source"][i]


def test_pending_never_exceeds_max_pending():
    seen = []
    with ThreadedEngine(workers=2, max_pending=3, record=False) as eng:
        x = eng.array(torch.ones(10))
        for _ in range(200):
            x = x + 1
            seen.append(eng.statistics().pending)
        assert x.asnumpy()[0] == 201.0
    assert max(seen) <= 3


def test_statistics_is_a_frozen_snapshot_with_running_and_bytes_pending():
    gate = threading.Event()
    with ThreadedEngine(workers=1, devices=("cpu:0", "cpu:1")) as eng:
        x = eng.array(torch.zeros(1000), name="x")  # float32: 4000 bytes
        eng.push(gate_op(gate), writes=(x,))
        y = x + 1  # waits for x; its output will hold 4000 bytes
        deadline = time.monotonic() + WAIT
        while eng.statistics().running != 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        s = eng.statistics()
        assert isinstance(s, EngineStatistics)
        assert (s.pending, s.running, s.done, s.failed) == (2, 1, 0, 0)
        assert s.device_pending == {"cpu:0": 2, "cpu:1": 0}
        assert s.bytes_pending == 4000
        assert s.elapsed > 0
        with pytest.raises(dataclasses.FrozenInstanceError):
            s.pending = 0
        gate.set()
        y.wait_to_read(timeout=WAIT)
        eng.waitall(timeout=WAIT)
        after = eng.statistics()
    assert (after.pending, after.running, after.done, after.bytes_pending) == (0, 0, 2, 0)
    assert s.pending == 2  # the old snapshot did not change


def test_waitall_timeout_raises_timeout_error_and_leaves_the_engine_working():
    gate = threading.Event()
    with ThreadedEngine() as eng:
        x = eng.array([0.0])
        eng.push(gate_op(gate), writes=(x,))
        with pytest.raises(TimeoutError):
            eng.waitall(timeout=0.1)
        with pytest.raises(TimeoutError):
            x.wait_to_read(timeout=0.1)
        gate.set()
        eng.waitall(timeout=WAIT)
        assert (x + 1).item() == 1.0


def test_every_wait_keeps_a_wait_limit_set_above_the_engine():
    """a run's time limit reaches inside waitall, a blocker and a full queue's push."""
    import threading
    import time

    from d2l_async.engine import ThreadedEngine, wait_limit

    class Limit(Exception):
        pass

    gate = threading.Event()
    with ThreadedEngine(max_pending=2) as eng:
        try:
            x = eng.array([0.0])
            eng.push(lambda t: gate.wait(30), writes=(x,))
            y = x + 1
            waits = {"waitall": eng.waitall, "blocker": y.wait_to_read, "full queue": lambda: x + 2}
            for name, wait in waits.items():
                t0 = time.perf_counter()
                with pytest.raises(Limit), wait_limit(time.perf_counter() + 0.2, Limit):
                    wait()
                assert time.perf_counter() - t0 < 5.0, name  # the limit, not the 30 s op
        finally:
            gate.set()
    with pytest.raises(ValueError, match="what to raise"):
        with wait_limit(1.0):
            pass
