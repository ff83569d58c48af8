"""The book's five engine lessons (D2L §13.2), each a test on the one-file engine (``engine/minimal.py``).

1. ``z = x * y + 2`` computes bitwise what eager torch computes;
2. a push loop returns before its work is done;
3. synchronous (a wait after every op) is slower than asynchronous (one wait at the end), decided by
   :func:`d2l_async.verdict.compare` over repeated runs, never by one timing;
4. a write waits for the reads pushed before it (write after read);
5. an op's error is deferred: raised at the blocker that reads its output, and once at ``waitall``.

Lessons 2 and 4 hold an op at a gate (a ``threading.Event`` it waits on) so that what the engine did
*while the frontend went on* is a state to assert, not a race to win.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from d2l_async.engine.minimal import Engine
from d2l_async.verdict import compare

WAIT = 20.0  # seconds any single wait may take before the test fails instead of hanging


@pytest.fixture
def eng():
    engine = Engine(devices=("cpu:0", "cpu:1"), workers=2)
    try:
        yield engine
    finally:
        engine.close(timeout=WAIT)


def test_z_is_x_times_y_plus_2_bitwise_as_eager_torch(eng):
    g = torch.Generator().manual_seed(0)
    x0, y0 = torch.randn(300, 300, generator=g), torch.randn(300, 300, generator=g)
    x, y = eng.array(x0), eng.array(y0)
    z = x * y + 2
    assert z.asnumpy().tobytes() == (x0 * y0 + 2).numpy().tobytes()
    w = (x.to("cpu:1") @ y.to("cpu:1")).sum()  # another device, a reduction
    assert w.asnumpy().tobytes() == (x0 @ y0).sum().numpy().tobytes()


def test_a_reduction_on_a_worker_splits_as_the_frontends_would():
    # another thread's set_num_threads changes the count a new thread starts with (the rest of a
    # test session does this); the workers still sum as the frontend does
    frontend = torch.get_num_threads()
    other = threading.Thread(target=torch.set_num_threads, args=(1 if frontend > 1 else 2,))
    other.start()
    other.join(WAIT)
    g = torch.Generator().manual_seed(1)
    x0, y0 = torch.randn(300, 300, generator=g), torch.randn(300, 300, generator=g)
    engine = Engine(devices=("cpu:0", "cpu:1"), workers=2)
    try:
        w = (engine.array(x0, device="cpu:1") @ engine.array(y0, device="cpu:1")).sum()
        assert w.asnumpy().tobytes() == (x0 @ y0).sum().numpy().tobytes()
    finally:
        engine.close(timeout=WAIT)


def test_a_push_loop_returns_before_its_work_is_done(eng):
    gate = threading.Event()
    x = eng.array(torch.zeros(3))
    eng.push(lambda t: gate.wait(WAIT), writes=(x,))  # the first op: holds x until the gate opens
    ys = [x + i for i in range(100)]                  # 100 pushes of ops that read x
    # the loop has returned; none of its ops has run: each is pushed, pending, without a value
    assert eng.pending == 101
    assert all(y.value is None for y in ys)
    gate.set()
    eng.waitall(timeout=WAIT)
    assert eng.pending == 0
    assert [float(y.asnumpy()[0]) for y in ys] == [float(i) for i in range(100)]


def _seconds(eng, n: int, *, sync: bool) -> float:
    x = eng.array(torch.ones(100, 100))
    t0 = time.perf_counter()
    for _ in range(n):
        y = x + 1
        if sync:
            y.wait_to_read(timeout=WAIT)
    eng.waitall(timeout=WAIT)
    return time.perf_counter() - t0


def test_synchronous_is_slower_than_asynchronous():
    with Engine(workers=1) as eng:
        _seconds(eng, 50, sync=True), _seconds(eng, 50, sync=False)  # warm-up
        sync, async_ = [], []
        for _ in range(7):  # interleaved, so a burst of load hits both sides
            sync.append(_seconds(eng, 200, sync=True))
            async_.append(_seconds(eng, 200, sync=False))
    v = compare(async_, sync, less=True, names=("pushed, one waitall", "a wait after every op"))
    assert v.holds is True, v.spread


def test_a_write_waits_for_the_reads_pushed_before_it(eng):
    gate, reading = threading.Event(), threading.Event()
    seen = []
    x = eng.array(torch.ones(3))

    def slow_read(t):
        reading.set()
        gate.wait(WAIT)
        seen.append(t.clone())

    eng.push(slow_read, reads=(x,))
    x += 1                                       # a write of x, pushed after the read
    assert reading.wait(WAIT)                    # the read runs (and waits at the gate) ...
    write = x.var.writer
    assert write is not None and write.wait == 1  # ... and the write waits for it, not granted
    assert not write.done
    gate.set()
    eng.waitall(timeout=WAIT)
    assert seen[0].tolist() == [1.0, 1.0, 1.0]   # the read saw x before the write
    assert x.asnumpy().tolist() == [2.0, 2.0, 2.0]
    y = x * 1                                    # the book's form: a read, then an in-place write
    x += 1
    assert y.asnumpy().tolist() == [2.0, 2.0, 2.0] and x.asnumpy().tolist() == [3.0, 3.0, 3.0]


def test_an_ops_error_is_deferred_to_the_blocker_that_reads_its_output(eng):
    y = eng.array(torch.zeros(3))

    def broken(t):
        raise ValueError("a bad op")

    eng.push(broken, writes=(y,))   # returns: the op has not even run
    z = y + 1                       # returns too: z is computed from y later
    with pytest.raises(ValueError, match="a bad op"):
        z.wait_to_read(timeout=WAIT)  # raised here, at the blocker of an array computed from y
    with pytest.raises(ValueError, match="a bad op"):
        y.asnumpy()
    with pytest.raises(ValueError, match="a bad op"):
        eng.waitall(timeout=WAIT)     # once at the barrier ...
    eng.waitall(timeout=WAIT)         # ... and not again
    assert (eng.array(np.ones(2)) + 1).asnumpy().tolist() == [2.0, 2.0]  # the engine goes on
