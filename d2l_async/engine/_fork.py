"""An engine belongs to the process that made it: what ``os.fork()`` leaves in the child.

``fork()`` copies the whole memory of a process but only the thread that called it
(POSIX ``fork(2)``; https://docs.python.org/3/library/os.html#os.fork).  In the child an engine's
worker threads do not exist, the ops they were running never finish, and a lock a worker held at
that instant stays held for ever.  A blocker in the child -- ``print(z)``, ``waitall()``, the
end of an ``asynchronous()`` block -- then waited for work nobody would ever do.  A forked child
is common without anyone writing ``fork``: ``multiprocessing``'s default start method on Linux,
a ``DataLoader(num_workers=2)``.

So the engine registers :func:`orphan_all` with :func:`os.register_at_fork`: in the child, every
live engine (plain :class:`~d2l_async.engine.ThreadedEngine`, :class:`NaiveEngine` and the runtime of
``d2l_async.asynchronous()``, which subclass the same scheduler) is *orphaned* at once::

    parent: engine with workers -- os.fork() --> child: the same engine, orphaned
                                                   fresh locks     (none is held by a dead thread)
                                                   devices stopping, no threads, no finalizer
                                                   not a live engine (waitall_all, exit skip it)
                                                   _forked_from = the parent's pid

An orphan answers every use that needs its workers -- a push, a blocker on unfinished work, a
barrier with work pending -- with :func:`forked_error`, an :class:`EngineError` that names the
parent and says what to do; values finished before the fork are still read (the child has a copy
of them), and shutting an orphan down (the end of a ``with`` block) waits for nothing.  The
default engine (``get_engine``) is forgotten in the child, so the child's first use makes its own.
Resetting an orphan to run again is not offered: the dependency state it inherited may be
half-way through a worker's update.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from ._errors import EngineError
from ._shield import FrontCondition

__all__ = ["forked_error", "orphan", "orphan_all", "install"]


def forked_error(what: str, parent: int) -> EngineError:
    """The error an orphaned engine raises (see the module docstring)."""
    return EngineError(
        f"{what}: this engine belongs to the parent process (pid {parent}); this process "
        f"(pid {os.getpid()}) is a child made by os.fork() after the engine started, and the "
        "engine's worker threads do not exist here, so nothing would ever run. Create a new engine "
        "(or a new `with d2l_async.asynchronous():` block) in the child, or start child processes "
        "with multiprocessing.get_context('spawn') (or 'forkserver') instead of fork.")


def orphan(engine: Any, parent: int) -> None:
    """Make ``engine`` (a :class:`._scheduler.Scheduler`, which imports this module) an orphan of
    ``parent`` in this (child) process: fresh locks, no workers."""
    lock = threading.Lock()
    engine._lock = lock
    engine._front = FrontCondition(lock)
    engine._serial = threading.RLock()
    for dev in engine._devices.values():
        dev.cond = threading.Condition(lock)
        dev.stopping = True
        dev.idle = 0
        dev.threads[:] = []  # they did not come along (threading marks them stopped in the child)
    if engine._finalizer is not None:
        engine._finalizer.detach()  # its workers are not here to stop
    engine._forked_from = parent


def orphan_all(live: "weakref.WeakSet[Any]", parent: int) -> None:
    """Orphan every engine of ``live`` (and empty it): the child's hook."""
    for engine in list(live):
        orphan(engine, parent)
    live.clear()


def install(live: "weakref.WeakSet[Any]") -> None:
    """Register the fork hook once for the scheduler's set of live engines."""
    if not hasattr(os, "register_at_fork"):  # Windows has no fork
        return
    parent = [os.getpid()]

    def before() -> None:
        parent[0] = os.getpid()

    os.register_at_fork(before=before, after_in_child=lambda: orphan_all(live, parent[0]))
