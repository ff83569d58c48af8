"""What keeps a student from wedging an engine: ops that wait, dropped engines, interrupted cells.

Three things go wrong when a reader pokes an asynchronous engine, and each is caught here
(issue 11).  Standard library only, like the rest of the core.

**Waiting from inside an op.**  An op runs on a worker.  If it calls ``eng.waitall()``, reads its
own output (``x.wait_to_read()``) or opens ``with Benchmark():`` (which waits for every engine),
it waits for work that can only run after it returns: the worker waits on itself, forever.  MXNet
forbids it ("do not call WaitToRead inside an engine op").  Each worker thread carries its
engine's *token* in a thread-local (:data:`inside`); a wait that would block on a thread that
carries the token raises :class:`EngineError` at once instead.  The check costs one attribute read,
and only on the slow path of a wait (a value that is ready is returned without it).  A push from
inside an op is fine (MXNet allows it): it never waits on back-pressure, since the op that would
make room is the one pushing.

**Dropped engines.**  A worker thread that referred to its engine would keep it alive for ever: 50
engines made and dropped in a loop were 200 live threads.  So a worker holds only a weak reference
while it sleeps (:func:`worker_loop`); when the reader drops the engine, a finalizer
(:func:`abandoned`, which refers to the devices, never to the engine) stops the workers and warns
once with a ``ResourceWarning``, as an unclosed file does.  The finalizer may run on any thread at
any moment (even a worker's, with the engine's lock held), so it never blocks on that lock.

**Interrupted ``with`` blocks** are handled by ``Scheduler.__exit__``: on an exception the queue is
cancelled (:meth:`Scheduler._cancel`), not drained, so a Ctrl-C in a cell reaches the reader at
once, not after the queued work.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Callable, Iterable

from ._errors import EngineError
from ._op import _RUNNING

if TYPE_CHECKING:
    from ._op import Device
    from ._scheduler import Scheduler

__all__ = ["inside", "inside_op", "wait_inside_op", "worker_loop", "abandoned", "observer_failed",
           "IDLE_RECHECK"]

#: An idle worker looks at the inbox this often even if nobody woke it (a wake-up lost to a
#: KeyboardInterrupt in the middle of ``notify`` costs at most this long).
IDLE_RECHECK = 0.5

#: ``inside.token``: the token of the engine whose op this thread is running (workers: always).
inside = threading.local()


def inside_op(token: object) -> bool:
    """True on a thread that is running an op of the engine with this token."""
    return getattr(inside, "token", None) is token


def wait_inside_op(what: str) -> EngineError:
    """The error for a wait from inside an op (see the module docstring)."""
    return EngineError(
        f"{what} inside an op of the same engine: the op would wait for work that can only run after "
        "it returns, so the engine would hang (MXNet forbids waiting inside an op too). Pass the arrays "
        "the op needs in reads=(...) and use the tensors it receives, or push follow-up work instead of "
        "waiting for it; wait on the frontend, after the push.")


def worker_loop(ref: "weakref.ref[Scheduler]", dev: "Device", k: int, token: object,
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


def abandoned(devices: Iterable["Device"], lock: threading.Lock, what: str) -> None:
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


def observer_failed(exc: Exception) -> None:
    """An observer raised.  It runs inside a worker with the engine's lock held, so raising would
    kill the worker and hang every wait: warn instead."""
    warnings.warn(f"d2l_async engine: an observer raised {exc!r}; ignored", RuntimeWarning, stacklevel=2)
