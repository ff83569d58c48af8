"""Ctrl-C and the engine's bookkeeping: a KeyboardInterrupt never lands half-way through it.

Python raises a KeyboardInterrupt in the main thread between two bytecodes, wherever that thread
is.  A worker thread never sees one, but the *naive* engine books, runs and finishes its ops on
the frontend -- the main thread.  An interrupt that landed between taking a lock and releasing it,
or between taking an op off the ready queue and finishing it, lost the op (a later ``print``
waited for it forever) or kept the lock (every later push spun on it): 4 of about 80 random
interrupts did, in an adversarial pass.  ``try``/``finally`` cannot fix that: the
interrupt can land inside the ``finally``, or between ``acquire()`` returning and the ``try``.

So the bookkeeping is *shielded*, as trio shields its own internals: while Python's default
Ctrl-C handler is in force, the engine puts in its place :func:`_handler`, which behaves exactly
like it -- raise KeyboardInterrupt -- except when the main thread is inside a shielded function
(the nearest engine function on the stack decides: the bookkeeping is shielded, the op a naive
engine runs and every wait are not).  Then the interrupt is only *postponed*: the handler asks for
it again a millisecond later (``_thread.interrupt_main`` from a short-lived thread), by which time
the bookkeeping -- microseconds -- is done, and it lands in the op itself, the wait, or the
reader's own code (if not, it is postponed again).  Nothing is
paid on the hot path: code objects are only looked at when a Ctrl-C arrives.

A wait has one such spot of its own: ``threading.Condition.wait`` gives the engine's lock up while
it sleeps and takes it back in Python code.  An interrupt raised there, before the lock was taken
back, left the waiting ``with self._lock`` to release a lock it did not hold -- a worker's, by then:
the worker died at its own release ("release unlocked lock") and the engine hung (once in about
2,500 real SIGINTs at random moments of a plain-torch training loop).  The frontend therefore waits
on a :class:`FrontCondition`, whose ``wait`` gives the lock up and takes it back in shielded code;
a Ctrl-C in its sleep is judged as if it arrived in the caller (raised, unless a shielded function
waits), and reaches the caller with the lock held.

A runtime built on the engine shields its own frontend bookkeeping the same way (plain torch's
queues each op in Python: ``d2l_async.torch_async``), through :mod:`d2l_async.engine.core`.

A custom SIGINT handler of the reader's (or of a test) is left alone.
"""

from __future__ import annotations

import _signal
import _thread
import signal
import threading
from collections import deque
from types import CodeType, FunctionType
from typing import Any, Callable

__all__ = ["shield", "expose", "shield_ctrl_c", "handler_installed", "FrontCondition"]

_SHIELDED: set[CodeType] = set()
_EXPOSED: set[CodeType] = set()
_DEFAULT = signal.default_int_handler
_MAIN = threading.main_thread().ident
#: A postponed Ctrl-C is asked for again this many seconds later (by a short-lived thread: asked
#: for from the handler itself, Python would run the handler again at once, inside it).
RELAY = 0.001


def _code(fn: Any) -> CodeType:
    fn = getattr(fn, "__func__", fn)
    if not isinstance(fn, FunctionType):
        raise TypeError(f"{fn!r} is not a Python function")
    return fn.__code__


def shield(*functions: Callable) -> None:
    """A Ctrl-C that arrives while the main thread runs one of these is postponed until it has left."""
    _SHIELDED.update(_code(f) for f in functions)


def expose(*functions: Callable) -> None:
    """A Ctrl-C is delivered inside these at once, even when a shielded function called them (an
    op the naive engine runs, a wait)."""
    _EXPOSED.update(_code(f) for f in functions)


def _handler(signum: int, frame: Any) -> None:
    """SIGINT: raise KeyboardInterrupt, as Python's default handler does, unless the main thread is
    in shielded bookkeeping; then ask for it again, to be raised once it has left."""
    f = frame
    while f is not None:
        code = f.f_code
        if code is _SLEEP:  # a FrontCondition's sleep: whoever called the wait decides
            f = f.f_back.f_back if f.f_back is not None else None
            continue
        if code in _EXPOSED:
            break
        if code in _SHIELDED:  # postponed, not lost: delivered again a moment later
            relay = threading.Timer(RELAY, _thread.interrupt_main)
            relay.name, relay.daemon = "d2l_async ctrl-c relay", True
            relay.start()
            return
        f = f.f_back
    raise KeyboardInterrupt


def shield_ctrl_c() -> None:
    """Put :func:`_handler` in place of Python's default SIGINT handler (main thread only; a
    handler of the reader's stays).  Cheap enough to call at every naive drain (and as every
    plain-torch block opens): a notebook kernel puts the default handler back before each cell."""
    # _signal.getsignal: the same handler object, without signal.getsignal's enum conversion (1.4 us,
    # a fifth of a naive push)
    if threading.get_ident() == _MAIN and _signal.getsignal(signal.SIGINT) is _DEFAULT:
        signal.signal(signal.SIGINT, _handler)


def handler_installed() -> bool:
    """True while the shielding handler is Python's SIGINT handler."""
    return _signal.getsignal(signal.SIGINT) is _handler


def _sleep(waiter: Any, timeout: float | None) -> bool:
    """The sleep of :meth:`FrontCondition.wait`.  A Ctrl-C that arrives here is judged by the
    wait's caller, not by the shielded ``wait`` around it: raised at once, unless a shielded
    function is waiting (then postponed until its wait is over)."""
    return waiter.acquire() if timeout is None else waiter.acquire(True, timeout)


_SLEEP = _sleep.__code__


class FrontCondition:
    """``threading.Condition(lock)`` for the frontend's waits, minus a Ctrl-C hazard (module docstring).

    ``wait`` and ``notify_all`` are called with ``lock`` held, as a Condition's are; ``wait`` gives
    it up and takes it back in this (shielded) frame, and sleeps in :func:`_sleep`, where a Ctrl-C
    is raised as it would be in the caller.
    """

    __slots__ = ("_lock", "_waiters")

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self._waiters: deque = deque()

    def wait(self, timeout: float | None = None) -> bool:
        """Give the lock up until :meth:`notify_all` or ``timeout`` seconds; returns whether notified."""
        waiter = _thread.allocate_lock()
        waiter.acquire()
        self._waiters.append(waiter)
        self._lock.release()
        got = False
        try:
            got = _sleep(waiter, timeout)
        finally:
            self._lock.acquire()
            if not got:
                try:
                    self._waiters.remove(waiter)
                except ValueError:  # notified meanwhile
                    pass
        return got

    def notify_all(self) -> None:
        """Wake every waiter (lock held)."""
        waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:  # each still held: only a notify releases it
            waiter.release()


shield(FrontCondition.wait)
