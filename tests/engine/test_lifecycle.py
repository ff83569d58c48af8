"""Shutdown, thread hygiene, KeyboardInterrupt while waiting, interpreter exit, default engine."""

from __future__ import annotations

import _thread
import subprocess
import sys
import threading
import time

import pytest
import torch

import d2l_async.engine as engine_mod
from d2l_async.engine import EngineError, NaiveEngine, ThreadedEngine, get_engine, waitall_all

WAIT = 10.0


def workers_of(eng):
    return [t for t in threading.enumerate() if t.name.startswith("d2l_async ")
            and any(t in d.threads for d in eng._devices.values())]


def test_with_block_stops_and_joins_every_worker():
    with ThreadedEngine(workers=3, devices=("cpu:0", "cpu:1")) as eng:
        assert len(workers_of(eng)) == 6
        y = eng.array([1.0]) + 1
    assert workers_of(eng) == []
    assert eng.closed
    assert y.item() == 2.0  # values computed before shutdown stay readable


def test_shutdown_is_idempotent_and_a_closed_engine_refuses_work():
    eng = ThreadedEngine()
    x = eng.array([1.0])
    eng.shutdown()
    eng.shutdown()
    with pytest.raises(EngineError, match="shut down"):
        x + 1
    with pytest.raises(EngineError, match="shut down"):
        eng.array([1.0])


def test_shutdown_waits_for_queued_ops():
    done = []
    eng = ThreadedEngine(workers=1)
    x = eng.array([0.0])
    eng.push(lambda t: (time.sleep(0.1), done.append(1)), writes=(x,))
    eng.shutdown(wait=True, timeout=WAIT)
    assert done == [1]


def test_keyboard_interrupt_while_waiting_returns_control_and_engine_recovers():
    gate = threading.Event()
    with ThreadedEngine() as eng:
        x = eng.array([1.0])
        eng.push(lambda t: gate.wait(WAIT), writes=(x,))
        y = x + 1
        timer = threading.Timer(0.2, _thread.interrupt_main)
        timer.start()
        t0 = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            y.wait_to_read(timeout=WAIT)
        assert time.perf_counter() - t0 < WAIT / 2
        timer.join(WAIT)
        gate.set()
        assert y.wait_to_read(timeout=WAIT).item() == 2.0
        eng.waitall(timeout=WAIT)
        blocks = eng.trace().where(kind="block")
    assert "wait_to_read" in list(blocks["reason"])


def test_keyboard_interrupt_during_waitall():
    gate = threading.Event()
    with ThreadedEngine() as eng:
        x = eng.array([1.0])
        eng.push(lambda t: gate.wait(WAIT), writes=(x,))
        timer = threading.Timer(0.2, _thread.interrupt_main)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            eng.waitall(timeout=WAIT)
        timer.join(WAIT)
        gate.set()
        eng.waitall(timeout=WAIT)
        assert eng.statistics().pending == 0


def test_interpreter_exits_with_an_engine_left_running():
    code = ("import torch, time\n"
            "from d2l_async.engine import ThreadedEngine\n"
            "eng = ThreadedEngine(workers=2, devices=('cpu:0', 'cpu:1'))\n"
            "x = eng.array(torch.ones(10))\n"
            "eng.push(lambda t: time.sleep(0.2), writes=(x,))\n"
            "y = x + 1\n"
            "print('pushed')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pushed" in out.stdout


def test_default_engine_and_waitall_all(monkeypatch):
    monkeypatch.setattr(engine_mod._default, "_default", None)
    monkeypatch.setenv("D2L_ASYNC_ENGINE", "threaded")
    eng = get_engine()
    try:
        assert isinstance(eng, ThreadedEngine)
        assert get_engine() is eng
        y = eng.array([1.0]) + 1
        waitall_all(timeout=WAIT)
        assert eng.statistics().pending == 0 and y.item() == 2.0
        eng.shutdown()
        fresh = get_engine()
        assert fresh is not eng
        fresh.shutdown()
    finally:
        eng.shutdown(wait=False)
    monkeypatch.setattr(engine_mod._default, "_default", None)
    monkeypatch.setenv("D2L_ASYNC_ENGINE", "naive")
    naive = get_engine()
    try:
        assert isinstance(naive, NaiveEngine)
    finally:
        naive.shutdown()
        monkeypatch.setattr(engine_mod._default, "_default", None)


def test_workers_set_torch_threads_inside_each_worker():
    seen = []
    with ThreadedEngine(workers=2, torch_threads=1) as eng:
        a, b = eng.array([0.0]), eng.array([0.0])
        eng.push(lambda t: seen.append(torch.get_num_threads()), writes=(a,))
        eng.push(lambda t: seen.append(torch.get_num_threads()), writes=(b,))
        eng.waitall(timeout=WAIT)
    assert seen == [1, 1]


def test_naive_engine_runs_at_push_time_on_the_calling_thread():
    threads = []
    with NaiveEngine() as eng:
        x = eng.array([1.0])
        eng.push(lambda t: threads.append(threading.current_thread()), writes=(x,))
        assert threads == [threading.current_thread()]  # already ran, before any blocker
        assert eng.statistics().pending == 0


def test_waiting_on_an_op_a_shut_down_engine_never_ran_raises():
    gate = threading.Event()
    eng = ThreadedEngine(workers=1)
    x = eng.array([1.0])
    eng.push(lambda t: gate.wait(WAIT), writes=(x,))
    y = x + 1  # queued behind the gated op
    threading.Timer(0.1, gate.set).start()
    eng.shutdown(wait=False, timeout=WAIT)  # drops the queue after the running op
    with pytest.raises(EngineError, match="shut down"):
        y.wait_to_read(timeout=WAIT)


@pytest.mark.usefixtures("no_foreign_gc_callbacks")
def test_keyboard_interrupt_in_a_push_loop_leaves_the_engine_consistent():
    with ThreadedEngine(workers=1, record=False) as eng:
        x = eng.array(torch.zeros(1))
        timer = threading.Timer(0.05, _thread.interrupt_main)
        timer.start()
        pushed = 0
        with pytest.raises(KeyboardInterrupt):
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                x += 1
                pushed += 1
        timer.join(WAIT)
        eng.waitall(timeout=WAIT)
        value = x.item()
    # the interrupted statement either was pushed whole or not at all
    assert value in (float(pushed), float(pushed + 1))


def test_naive_engine_lets_a_keyboard_interrupt_inside_an_op_through_at_once():
    def interrupted(t):
        raise KeyboardInterrupt

    with NaiveEngine() as eng:
        x = eng.array([1.0])
        with pytest.raises(KeyboardInterrupt):
            eng.push(interrupted, writes=(x,))
        eng.waitall(timeout=WAIT)  # already raised: not raised again
        assert (eng.array([1.0]) + 1).item() == 2.0


def test_a_stopped_engine_leaves_the_collector_no_python_code_to_run():
    """a stopped engine's worker threads stayed in a reference cycle; when the collector
    freed them during the reader's next loop, threading's WeakSet callback ran there, and a Ctrl-C
    that landed in it was swallowed ("Exception ignored").  Now shutdown joins and releases them."""
    import gc

    gc.collect()
    gc.disable()
    try:
        for make in (lambda: ThreadedEngine(workers=2, devices=("cpu:0", "cpu:1")), NaiveEngine):
            eng = make()
            x = eng.array([1.0])
            y = (x + 1).to(eng.devices[-1]) if len(eng.devices) > 1 else x + 1
            assert y.wait_to_read(timeout=WAIT).item() == 2.0
            eng.shutdown(timeout=WAIT)
            assert all(not d.threads for d in eng._devices.values())  # joined and released
            del eng, x, y
            calls = []

            def profile(frame, event, arg):
                if event == "call":
                    calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

            # other libraries' gc.callbacks (hypothesis registers one) run at every collection: they are
            # not code of freed objects, so they are set aside while we look
            callbacks, gc.callbacks[:] = gc.callbacks[:], []
            sys.setprofile(profile)
            try:
                gc.collect()
            finally:
                sys.setprofile(None)
                gc.callbacks[:] = callbacks
            assert calls == [], calls
    finally:
        gc.enable()
