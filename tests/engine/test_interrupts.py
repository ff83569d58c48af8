"""The Ctrl-C matrix: ``_thread.interrupt_main()`` 0.2 s into every way the frontend waits.

Over ``waitall``, ``wait_to_read``, each blocker, a push into a full queue (``max_pending``), inside
and outside a ``with`` block, on ``ThreadedEngine`` and ``NaiveEngine``: the KeyboardInterrupt
reaches the caller within 0.5 s every time; afterwards the engine is usable (outside ``with``) or
cleanly closed (inside), and no worker thread is left behind (the suite's thread-leak fixture, and
an explicit join here).

How the frontend comes to wait: a gated op writes ``x`` -- on a worker of the threaded engine, or,
on the naive engine, inline on a helper thread (the naive engine runs one thread's ops at a time, so
the main thread's wait, or its push, waits for it).
"""

from __future__ import annotations

import _thread
import threading
import time

import numpy as np
import pytest

from d2l_async.engine import NaiveEngine, ThreadedEngine

pytestmark = pytest.mark.usefixtures("no_foreign_gc_callbacks")  # see tests/conftest.py

WAIT = 10.0
AFTER = 0.2  # the interrupt, seconds after the wait began
WITHIN = 0.5  # the KeyboardInterrupt must reach the caller this soon after it

WAITS = {
    "waitall": lambda eng, x: eng.waitall(timeout=WAIT),
    "wait_to_read": lambda eng, x: x.wait_to_read(timeout=WAIT),
    "item": lambda eng, x: x.item(),
    "asnumpy": lambda eng, x: x.asnumpy(),
    "numpy": lambda eng, x: x.numpy(),
    "float": lambda eng, x: float(x),
    "int": lambda eng, x: int(x),
    "bool": lambda eng, x: bool(x),
    "print": lambda eng, x: str(x),
    "repr": lambda eng, x: repr(x),
    "format": lambda eng, x: f"{x:.1f}",
    "np.asarray": lambda eng, x: np.asarray(x),
    "push into a full queue": lambda eng, x: x + 1,
    "push behind another thread's op": lambda eng, x: x + 1,
}


def _setup(kind: str, wait: str, gate: threading.Event):
    """An engine, an array ``x`` whose producer runs until ``gate`` is set, and helper threads."""
    helpers = []
    if kind == "threaded":
        eng = ThreadedEngine(max_pending=2 if wait == "push into a full queue" else None)
        x = eng.array([1.0])
        eng.push(lambda t: gate.wait(WAIT), writes=(x,))  # on the worker, until the gate opens
        if wait == "push into a full queue":
            x + 1  # pending: the gated op and this one, so the next push waits for space
        return eng, x, helpers
    eng = NaiveEngine()
    x = eng.array([1.0])
    started = threading.Event()

    def gated(t):
        started.set()
        gate.wait(WAIT)

    helper = threading.Thread(target=lambda: eng.push(gated, writes=(x,)), name="test helper pushing")
    helper.start()
    helpers.append(helper)
    assert started.wait(WAIT)
    return eng, x, helpers


def _cases():
    for kind in ("threaded", "naive"):
        for wait in WAITS:
            if kind == "naive" and wait == "push into a full queue":
                continue  # the naive engine has no queue to fill
            if kind == "threaded" and wait == "push behind another thread's op":
                continue  # a threaded push never waits for another thread's op
            for inside in (False, True):
                yield pytest.param(kind, wait, inside, id=f"{kind}-{wait}-{'inside' if inside else 'outside'} with")


@pytest.mark.parametrize("kind, wait, inside", list(_cases()))
def test_ctrl_c_reaches_the_caller_at_once(kind, wait, inside):
    gate = threading.Event()
    sent = {}

    def interrupt():
        sent["t"] = time.perf_counter()
        _thread.interrupt_main()

    eng, x, helpers = _setup(kind, wait, gate)
    timer = threading.Timer(AFTER, interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            timer.start()
            if inside:
                with eng:
                    WAITS[wait](eng, x)
            else:
                WAITS[wait](eng, x)
        caught = time.perf_counter()
        timer.join(WAIT)
        assert caught - sent["t"] < WITHIN, f"the KeyboardInterrupt took {caught - sent['t']:.2f} s"
        if inside:
            assert eng.closed  # cleanly closed: the with block cancelled what was queued
        else:
            assert not eng.closed
        gate.set()
        for h in helpers:
            h.join(WAIT)
        if not inside:  # usable: the interrupted wait left nothing wedged
            assert x.wait_to_read(timeout=WAIT).item() == 1.0
            assert (x + 1).wait_to_read(timeout=WAIT).item() == 2.0
            eng.waitall(timeout=WAIT)
            assert eng.statistics().pending == 0
    finally:
        gate.set()
        timer.cancel()
        for h in helpers:
            h.join(WAIT)
        eng.shutdown(wait=False, timeout=WAIT)
    workers = [t for d in eng._devices.values() for t in d.threads]
    assert not [t for t in workers if t.is_alive()]



def _interrupt_at_line(wait_code, k: int, fired: list):
    """A trace function: ``_thread.interrupt_main()`` at the ``k``-th line the main thread runs
    inside calls of ``wait_code`` (the frontend's condition wait, and what it calls)."""
    depth, count = [0], [0]

    def local(frame, event, arg):
        if event == "line":
            count[0] += 1
            if count[0] == k and not fired:
                fired.append(time.perf_counter())
                _thread.interrupt_main()
        elif event == "return" and frame.f_code is wait_code:
            depth[0] -= 1
        return local

    def tracer(frame, event, arg):
        if frame.f_code is wait_code:
            depth[0] += 1
        elif depth[0] == 0:
            return None
        return local
    return tracer


@pytest.mark.parametrize("k", range(1, 31))
def test_a_ctrl_c_at_any_line_of_a_wait_reaches_the_caller_with_the_engine_sound(k):
    """The frontend's condition wait gives the engine's lock up while it sleeps and takes it back:
    a Ctrl-C at each line it runs (here the ``k``-th) must reach the caller, and leave the lock as
    it was.  Raised as ``threading.Condition`` takes the lock back in Python, it left the waiting
    ``with self._lock`` to release a lock it did not hold -- a worker's (the worker died, the engine
    hung), or here, with none holding it, "release unlocked lock" instead of the KeyboardInterrupt."""
    import sys

    from d2l_async.engine import _shield

    _shield.shield_ctrl_c()  # the engine's handler, as a block or a naive drain puts it in place
    assert _shield.handler_installed()
    gate = threading.Event()
    died, fired = [], []
    hook, threading.excepthook = threading.excepthook, lambda args: died.append(args)
    eng = ThreadedEngine()
    try:
        x = eng.array([1.0])
        eng.push(lambda t: gate.wait(WAIT), writes=(x,))
        sys.settrace(_interrupt_at_line(type(eng._front).wait.__code__, k, fired))
        try:
            with pytest.raises(KeyboardInterrupt):
                x.wait_to_read(timeout=WAIT)
        finally:
            sys.settrace(None)
        assert fired and time.perf_counter() - fired[0] < WITHIN
        gate.set()
        assert (x + 1).wait_to_read(timeout=WAIT).item() == 2.0  # the worker lives; the lock is sound
        eng.waitall(timeout=WAIT)
    finally:
        gate.set()
        eng.shutdown()
        threading.excepthook = hook
    assert not died, [str(a.exc_value) for a in died]


def test_a_wait_inside_shielded_code_is_not_cut_short_and_the_ctrl_c_follows_it():
    """A Ctrl-C in a wait's sleep is judged by whoever waits: a shielded function (a runtime's
    bookkeeping that must see its op finish) gets its wait whole, and the Ctrl-C right after it."""
    from d2l_async.engine import _shield

    _shield.shield_ctrl_c()
    gate = threading.Event()
    eng = ThreadedEngine()
    done = []

    def bookkeeping(x):  # shielded below: it must not stop half-way
        x.wait_to_read(timeout=WAIT)
        done.append(time.perf_counter())

    _shield.shield(bookkeeping)
    try:
        x = eng.array([1.0])
        eng.push(lambda t: gate.wait(WAIT), writes=(x,))
        threading.Timer(AFTER, _thread.interrupt_main).start()  # while it waits
        threading.Timer(2 * AFTER, gate.set).start()  # the op finishes after the Ctrl-C
        with pytest.raises(KeyboardInterrupt):
            bookkeeping(x)
            for _ in range(10_000_000):  # the postponed Ctrl-C lands here, after the wait
                pass
        assert len(done) == 1 and time.perf_counter() - done[0] < WITHIN
    finally:
        gate.set()
        eng.shutdown()
