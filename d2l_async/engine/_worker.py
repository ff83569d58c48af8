"""The threaded engine's workers: their loop, and what stops them when a reader drops an engine.

A worker takes READY ops from its device's queue and runs them (the state machine is drawn in
:mod:`._scheduler`).  It finishes the last op and takes the next one under one lock, and runs the
op without it.

**Dropped engines**.  A worker thread that referred to its engine would keep it alive
for ever: 50 engines made and dropped in a loop were 200 live threads.  So a worker holds only a
weak reference while it sleeps (:func:`worker_loop`); when the reader drops the engine, a
finalizer (:func:`abandoned`, which refers to the devices, never to the engine) stops the workers
and warns once with a ``ResourceWarning``, as an unclosed file does.  The finalizer may run on any
thread at any moment (even a worker's, with the engine's lock held), so it never blocks on that
lock.

The loop needs of its engine only what :class:`WorkerHost` names; it imports no engine module but
the records and the thread-local of :mod:`._guard`, so the scheduler imports it and not the other
way round (no circle of imports).
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
import weakref
from collections import deque
from typing import Callable, Iterable, Protocol

from ._guard import inside
from ._op import _RUNNING, Device, EngineOp

__all__ = ["WorkerHost", "worker_loop", "abandoned", "lower_priority", "IDLE_RECHECK"]

#: An idle worker looks at the inbox this often even if nobody woke it (a wake-up lost to a
#: KeyboardInterrupt in the middle of ``notify`` costs at most this long).
IDLE_RECHECK = 0.5


class WorkerHost(Protocol):
    """What a worker uses of its engine (the scheduler is one)."""

    _lock: threading.Lock
    _inbox: deque
    _running: int

    def _book(self) -> None: ...

    def _finish(self, op: EngineOp) -> None: ...

    def _execute(self, op: EngineOp, k: int) -> None: ...


def worker_loop(ref: "weakref.ref[WorkerHost]", dev: Device, k: int, token: object,
                thread_init: Callable[[], None] | None) -> None:
    """A worker: finish the last op and take the next one under one lock, run it without.

    ``ref`` is a weak reference: while asleep the worker holds no strong one, so an engine the
    reader dropped can be collected (and :func:`abandoned` stops this loop).
    """
    inside.token = token
    if thread_init is not None:
        try:
            thread_init()
        except Exception as exc:  # noqa: BLE001 - a worker must not die: the engine would hang
            warnings.warn(f"d2l_async engine: worker start-up failed ({exc!r}); the worker runs anyway",
                          RuntimeWarning, stacklevel=1)
    eng = ref()
    if eng is None:
        return
    lock, cond, queue, inbox = eng._lock, dev.cond, dev.queue, eng._inbox
    op = None
    while True:
        with lock:
            if op is not None:
                eng._finish(op)
                op = None
            while True:
                if dev.stopping:  # shut down: what has not started is dropped
                    return
                if inbox:
                    eng._book()
                if queue:
                    break
                dev.idle += 1  # announce first, then look at the inbox a last time
                if inbox:
                    dev.idle -= 1
                    continue
                eng = None  # asleep: no strong reference (dropping it may run `abandoned` here)
                if dev.stopping:
                    return
                if not cond.wait(IDLE_RECHECK) and dev.idle > 0:
                    dev.idle -= 1  # nobody woke us (whoever notifies takes us off dev.idle)
                eng = ref()
                if eng is None:
                    return
            op = queue.popleft()
            op.state = _RUNNING
            eng._running += 1
            dev.running += 1
        eng._execute(op, k)


def lower_priority(nice: int) -> int:
    """Make the calling thread ``nice`` steps less urgent for the OS than it is; return the steps taken.

    A worker stands in for a device, and a GPU never takes a CPU from the Python that feeds it:
    where a worker and its torch intra-op threads compete with the frontend for the cores, the
    frontend should win.  On Linux the nice value is per thread, and the threads this one starts
    later (torch's OpenMP pool among them) inherit it.  Elsewhere (macOS, Windows) the call would
    change the whole process, so nothing is done (0).  Raising a nice value needs no privilege;
    a refusal (a sandbox) is not an error: the worker runs at the frontend's priority (0).

    Returns:
        The steps the nice value actually rose (capped at 19); 0 for ``nice <= 0``, off Linux, or when the OS
        refused.
    """
    if nice <= 0 or not sys.platform.startswith("linux"):
        return 0
    try:
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(before + nice, 19))
        return os.getpriority(os.PRIO_PROCESS, tid) - before
    except (OSError, AttributeError):
        return 0


def abandoned(devices: Iterable[Device], lock: threading.Lock, what: str) -> None:
    """Finalizer of an engine dropped without ``shutdown()``: stop its workers, warn once.

    Never blocks on ``lock``: it may run on a thread that holds it.  A worker that is not woken
    here sees ``stopping`` within :data:`IDLE_RECHECK` seconds.
    """
    devices = list(devices)
    for dev in devices:
        dev.stopping = True
    if lock.acquire(blocking=False):
        try:
            for dev in devices:
                dev.idle = 0
                dev.cond.notify_all()
        finally:
            lock.release()
    warnings.warn(f"{what} was garbage-collected without shutdown(); its workers were stopped. Use it in "
                  "a `with` block or call eng.shutdown()", ResourceWarning, stacklevel=2)
