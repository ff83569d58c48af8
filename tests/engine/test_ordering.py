"""Ordering: ops that sleep and stamp their own start and end show what ran when.

Sleeping releases the GIL, so overlapping intervals mean the ops really ran at the same time.
"""

from __future__ import annotations

import time

import torch

from d2l_async.engine import ThreadedEngine

NAP = 0.08
WAIT = 10.0


def stamper(log, key, seconds=NAP):
    def op(*tensors):
        t0 = time.perf_counter()
        time.sleep(seconds)
        log[key] = (t0, time.perf_counter())
    op.__name__ = key
    return op


def overlap(a, b):
    return a[0] < b[1] and b[0] < a[1]


def test_write_waits_for_earlier_reads():
    log = {}
    with ThreadedEngine(workers=3) as eng:
        x, y1, y2 = eng.array([1.0]), eng.array([0.0]), eng.array([0.0])
        eng.push(stamper(log, "r1"), reads=(x,), writes=(y1,))
        eng.push(stamper(log, "r2"), reads=(x,), writes=(y2,))
        eng.push(stamper(log, "w"), writes=(x,))
        eng.waitall(timeout=WAIT)
    assert log["w"][0] >= max(log["r1"][1], log["r2"][1])


def test_reads_of_one_array_overlap():
    log = {}
    with ThreadedEngine(workers=2) as eng:
        x, y1, y2 = eng.array([1.0]), eng.array([0.0]), eng.array([0.0])
        eng.push(stamper(log, "r1"), reads=(x,), writes=(y1,))
        eng.push(stamper(log, "r2"), reads=(x,), writes=(y2,))
        eng.waitall(timeout=WAIT)
    assert overlap(log["r1"], log["r2"])


def test_read_after_write_waits_and_sees_the_value():
    log = {}
    with ThreadedEngine(workers=2) as eng:
        x = eng.array([1.0])

        def write(t):
            stamper(log, "w")(t)
            t.fill_(5.0)

        eng.push(write, writes=(x,))
        y = x * 2
        eng.push(stamper(log, "r"), reads=(x,), writes=(eng.array([0.0]),))
        assert y.wait_to_read(timeout=WAIT).item() == 10.0
        eng.waitall(timeout=WAIT)
    assert log["r"][0] >= log["w"][1]


def test_devices_overlap():
    log = {}
    with ThreadedEngine(workers=1, devices=("cpu:0", "cpu:1")) as eng:
        a = eng.array([0.0], device="cpu:0")
        b = eng.array([0.0], device="cpu:1")
        eng.push(stamper(log, "dev0"), writes=(a,))
        eng.push(stamper(log, "dev1"), writes=(b,))
        eng.waitall(timeout=WAIT)
    assert overlap(log["dev0"], log["dev1"])


def test_one_worker_per_device_serializes_that_device():
    log = {}
    with ThreadedEngine(workers=1) as eng:
        a, b = eng.array([0.0]), eng.array([0.0])
        eng.push(stamper(log, "a"), writes=(a,))
        eng.push(stamper(log, "b"), writes=(b,))
        eng.waitall(timeout=WAIT)
    assert not overlap(log["a"], log["b"])


def test_barrier_between_devices_serializes():
    log = {}
    with ThreadedEngine(workers=1, devices=("cpu:0", "cpu:1")) as eng:
        a = eng.array([0.0], device="cpu:0")
        b = eng.array([0.0], device="cpu:1")
        eng.push(stamper(log, "dev0"), writes=(a,))
        eng.waitall(timeout=WAIT)
        eng.push(stamper(log, "dev1"), writes=(b,))
        eng.waitall(timeout=WAIT)
    assert log["dev1"][0] >= log["dev0"][1]


def test_copy_waits_for_its_source_and_runs_on_the_destination():
    with ThreadedEngine(workers=1, devices=("cpu:0", "cpu:1")) as eng:
        x = eng.array(torch.zeros(3), device="cpu:0", name="x")

        def slow_fill(t):
            time.sleep(NAP)
            t.fill_(7.0)

        eng.push(slow_fill, writes=(x,))
        y = x.to("cpu:1", name="y")
        x += 1  # must not be seen by the copy (write after read)
        assert y.device == "cpu:1"
        assert y.wait_to_read(timeout=WAIT).asnumpy().tolist() == [7.0, 7.0, 7.0]
        assert x.asnumpy().tolist() == [8.0, 8.0, 8.0]
        tr = eng.trace()
    copy = tr.where(kind="copy")
    assert len(copy) == 1 and copy["lane"][0] == "cpu:1 worker 0"


def test_frontend_returns_before_the_op_runs():
    with ThreadedEngine(workers=1) as eng:
        x = eng.array([1.0])
        t0 = time.perf_counter()
        eng.push(lambda t: time.sleep(0.3), writes=(x,))
        y = x + 1
        pushed = time.perf_counter() - t0
        assert pushed < 0.2, "push must not wait for the op"
        assert eng.statistics().pending == 2
        assert y.item() == 2.0
