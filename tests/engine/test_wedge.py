"""An engine a student cannot wedge: one regression test per defect, each failing on the
engine before the fix (it hung, wedged the engine or raised a raw error), and every wait bounded.

The Ctrl-C matrix is in ``test_interrupts.py``.
"""

from __future__ import annotations

import _thread
import contextlib
import gc
import threading
import time
import warnings
import weakref

import pytest
import torch

from d2l_async.benchmark import Benchmark
from d2l_async.engine import EngineError, NaiveEngine, ThreadedEngine, live_engines

WAIT = 10.0


def make(kind, **kw):
    return ThreadedEngine(**kw) if kind == "threaded" else NaiveEngine(**kw)


def no_ctrl_c(read):
    """``read()``, failing the test (not the session) if it raises a KeyboardInterrupt again."""
    try:
        return read()
    except KeyboardInterrupt:
        pytest.fail("a KeyboardInterrupt was kept as the array's error and raised again")


def d2l_threads():
    return [t for t in threading.enumerate() if t.name.startswith("d2l_async ") and t.is_alive()]


# -- 1. Ctrl-C inside `with` -----------------------------------------------------------------
def test_ctrl_c_inside_a_with_block_cancels_the_queue_and_reaches_the_caller_at_once():
    gate = threading.Event()
    stamps = {}

    def interrupt():
        stamps["sent"] = time.perf_counter()
        _thread.interrupt_main()

    timer = threading.Timer(0.2, interrupt)
    with pytest.raises(KeyboardInterrupt) as info:
        with ThreadedEngine() as eng:
            x = eng.array([0.0])
            eng.push(lambda t: gate.wait(WAIT), writes=(x,))  # runs now
            for _ in range(400):  # queued: 40 s of work
                eng.push(lambda t: time.sleep(0.1), writes=(x,))
            y = x + 1
            timer.start()
            eng.waitall(timeout=WAIT)
    caught = time.perf_counter()
    timer.join(WAIT)
    assert caught - stamps["sent"] < 0.5  # not after the queue (40 s), and not an EngineError
    assert type(info.value) is KeyboardInterrupt
    assert any("401 queued op(s) were cancelled" in n for n in info.value.__notes__)
    assert eng.closed
    with pytest.raises(EngineError, match="cancelled"):
        y.wait_to_read(timeout=WAIT)
    gate.set()  # the running op ends; its worker exits (the thread-leak fixture checks)
    for t in [t for d in eng._devices.values() for t in d.threads]:
        t.join(WAIT)
        assert not t.is_alive()


def test_ctrl_c_while_a_with_block_drains_at_its_end_cancels_the_rest():
    gate = threading.Event()
    timer = threading.Timer(0.2, _thread.interrupt_main)
    with pytest.raises(KeyboardInterrupt):
        with ThreadedEngine() as eng:
            x = eng.array([0.0])
            eng.push(lambda t: gate.wait(WAIT), writes=(x,))
            for _ in range(100):
                eng.push(lambda t: time.sleep(0.1), writes=(x,))
            timer.start()
            t0 = time.perf_counter()
    assert time.perf_counter() - t0 < 0.2 + 0.5
    timer.join(WAIT)
    assert eng.closed and eng.statistics().pending <= 1  # only the running op is left
    gate.set()


# -- 2. waiting from inside an op ---------------------------------------------------------------
WAITS_INSIDE = {
    "waitall": lambda eng, x, out: eng.waitall(timeout=WAIT),
    "wait_to_read own output": lambda eng, x, out: out.wait_to_read(timeout=WAIT),
    "print own output": lambda eng, x, out: str(out),
    "Benchmark": lambda eng, x, out: Benchmark(file=None).__enter__(),
}


@pytest.mark.parametrize("kind", ["threaded", "naive"])
@pytest.mark.parametrize("what", list(WAITS_INSIDE))
def test_a_wait_inside_an_op_raises_instead_of_hanging(kind, what):
    with make(kind) as eng:
        x = eng.array([1.0])
        out = eng.array([0.0])
        cell = {}

        def op(t, o):
            cell["out"] = out
            WAITS_INSIDE[what](eng, x, out)

        eng.push(op, reads=(x,), writes=(out,))
        with pytest.raises(EngineError, match="inside an op of the same engine") as info:
            out.wait_to_read(timeout=WAIT)
        assert "MXNet forbids" in str(info.value) and "reads=(...)" in str(info.value)
        assert ((x + 1).wait_to_read(timeout=WAIT)).item() == 2.0  # the engine is not wedged


def test_a_wait_inside_an_op_on_a_ready_value_is_fine():
    with ThreadedEngine() as eng:
        x = eng.array([3.0])
        x.wait_to_read(timeout=WAIT)
        out = eng.array([0.0])
        eng.push(lambda o: o.fill_(x.item()), writes=(out,))  # x is already computed: no wait
        assert out.wait_to_read(timeout=WAIT).item() == 3.0


# -- 3. push from inside an op with max_pending ---------------------------------------------------
def test_a_push_from_inside_an_op_never_waits_on_back_pressure():
    with ThreadedEngine(max_pending=1) as eng:
        x = eng.array([0.0])

        def outer(t):
            t.add_(1)
            eng.push(lambda t: t.mul_(10), writes=(x,))  # pending is 1 (this op): must not wait

        eng.push(outer, writes=(x,))
        assert x.wait_to_read(timeout=WAIT) is x
        eng.waitall(timeout=WAIT)
        assert x.item() == 10.0


# -- 4. NaiveEngine re-entrancy -------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["threaded", "naive"])
def test_a_push_from_inside_an_op_runs_after_it_on_both_engines(kind):
    with make(kind) as eng:
        x = eng.array([1.0])

        def outer(t):
            eng.push(lambda t: t.mul_(2), writes=(x,))  # pushed now, runs after outer
            t.add_(99)

        eng.push(outer, writes=(x,))
        assert x.wait_to_read(timeout=WAIT).item() == 200.0  # (1 + 99) * 2, not 1 * 2 + 99
        eng.waitall(timeout=WAIT)
        assert eng.statistics().pending == 0


# -- 5. NaiveEngine from two threads --------------------------------------------------------------
def test_naive_engine_serializes_pushes_from_two_threads():
    with NaiveEngine() as eng:
        x = eng.array([0.0])
        got = {}

        def slow_write(t):  # thread A's op: writes x only once thread B's push is waiting
            deadline = time.monotonic() + WAIT
            while not eng._inbox and time.monotonic() < deadline:
                time.sleep(0.001)
            t.fill_(10.0)

        def thread_b():
            while not started.is_set():
                time.sleep(0.001)
            got["y"] = x + 1

        started = threading.Event()
        b = threading.Thread(target=thread_b, name="test thread B")
        b.start()

        def a_op(t):
            started.set()
            slow_write(t)

        eng.push(a_op, writes=(x,))
        b.join(WAIT)
        assert not b.is_alive()
        assert got["y"].item() == 11.0  # eager: 11; running B's op at once read x = 0


# -- 6. NaiveEngine and a Ctrl-C inside an op ------------------------------------------------------
def test_naive_engine_does_not_keep_a_ctrl_c_as_the_arrays_error():
    with NaiveEngine() as eng:
        x = eng.array([1.0])

        def long_op(t):
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:  # Python: the interrupt lands here
                time.sleep(0.005)

        timer = threading.Timer(0.1, _thread.interrupt_main)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            eng.push(long_op, writes=(x,))
        timer.join(WAIT)
        assert no_ctrl_c(x.item) == 1.0
        assert no_ctrl_c(lambda: (x * 2).item()) == 2.0

        def increment():
            nonlocal x
            x += 1
            return x.wait_to_read(timeout=WAIT).item()

        assert no_ctrl_c(increment) == 2.0
        no_ctrl_c(lambda: eng.waitall(timeout=WAIT))


def test_naive_engine_says_an_interrupted_output_was_not_computed():
    class CtrlCAtStart:  # a Ctrl-C that lands just as the op starts (after its push was booked)
        hooks = frozenset({"on_start"})
        armed = True

        def on_start(self, op):
            if self.armed:
                self.armed = False
                raise KeyboardInterrupt

    with NaiveEngine(record=False) as eng:
        x = eng.array([1.0])
        eng.set_observers((CtrlCAtStart(),))
        with pytest.raises(KeyboardInterrupt):
            x + 1
        y = x + 1  # the same op again runs fine
        assert no_ctrl_c(y.item) == 2.0 and no_ctrl_c(x.item) == 1.0
        no_ctrl_c(lambda: eng.waitall(timeout=WAIT))


def test_naive_engine_keeps_the_value_a_ctrl_c_interrupted_custom_op_wrote():
    with NaiveEngine() as eng:
        x = eng.array([1.0])
        y = eng.array([0.0])

        def interrupted(a, b):
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            eng.push(interrupted, reads=(x,), writes=(y,))
        assert no_ctrl_c(y.item) == 0.0  # its value is kept (a custom op may have half-written it)
        no_ctrl_c(lambda: eng.waitall(timeout=WAIT))


# -- 7. dropped engines ---------------------------------------------------------------------------
def test_dropped_engines_stop_their_workers_and_warn():
    before = len(d2l_threads())
    refs = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(20):
            eng = ThreadedEngine(workers=2, devices=("cpu:0", "cpu:1"))
            (eng.array([1.0]) + 1).wait_to_read(timeout=WAIT)
            refs.append(weakref.ref(eng))
            del eng
        gc.collect()
    assert all(r() is None for r in refs)  # no thread keeps a dropped engine alive
    deadline = time.monotonic() + WAIT
    while len(d2l_threads()) > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(d2l_threads()) == before
    assert not [e for e in live_engines() if any(e is r() for r in refs)]
    warned = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert len(warned) == 20 and "without shutdown()" in str(warned[0].message)


def test_an_engine_with_queued_work_stays_alive_until_it_is_done():
    gate = threading.Event()
    eng = ThreadedEngine()
    x = eng.array([0.0])
    eng.push(lambda t: gate.wait(WAIT), writes=(x,))
    y = x + 1
    ref = weakref.ref(eng)
    del eng
    gc.collect()
    assert ref() is not None  # its arrays refer to it: still usable
    gate.set()
    assert y.wait_to_read(timeout=WAIT).item() == 1.0
    ref().shutdown()


# -- 10. waitall does not raise an error a blocker delivered ---------------------------------------
@pytest.mark.parametrize("kind", ["threaded", "naive"])
def test_waitall_does_not_raise_an_error_already_raised_at_a_blocker(kind):
    def broken(t):
        raise ValueError("bad")

    with make(kind) as eng:
        x, z = eng.array([1.0]), eng.array([1.0])
        eng.push(broken, writes=(x,))
        with pytest.raises(ValueError):
            (x + 1).wait_to_read(timeout=WAIT)  # derived from x: the same error, delivered
        eng.waitall(timeout=WAIT)
        eng.push(broken, writes=(z,))
        with pytest.raises(ValueError):  # one nobody waited for is still raised, once
            eng.waitall(timeout=WAIT)
        eng.waitall(timeout=WAIT)


# -- minor ------------------------------------------------------------------------------------------
def test_array_dtype_must_be_a_torch_dtype():
    with NaiveEngine() as eng:
        with pytest.raises(TypeError, match="torch.float32"):
            eng.array([1.0], dtype="float32")
        assert eng.array([1], dtype=torch.float32).dtype == torch.float32


@pytest.mark.parametrize("name", ["cpu:00", "cpu:01", "cpu:-1", "cuda:0"])
def test_device_names_are_canonical(name):
    with pytest.raises(ValueError, match="cpu:0"):
        NaiveEngine(devices=(name,))


def test_a_closed_naive_engine_refuses_pushes():
    eng = NaiveEngine()
    x = eng.array([1.0])
    eng.shutdown()
    with pytest.raises(EngineError, match="shut down"):
        x + 1
    with contextlib.suppress(EngineError):
        eng.waitall(timeout=WAIT)
