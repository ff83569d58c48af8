"""What keeps a student from wedging an engine: ops that wait, dropped engines, interrupted cells.

Three things go wrong when a reader pokes an asynchronous engine, and each is caught here or beside
it.  Standard library only, like the rest of the core.  This module imports nothing of the
engine but its errors: the scheduler, the waits and the workers import it, never the other way
(a circle of imports is one module split in two).

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
while it sleeps; when the reader drops the engine, a finalizer stops the workers and warns (both in
:mod:`._worker`).

**Interrupted ``with`` blocks** are handled by ``Scheduler.__exit__``: on an exception the queue is
cancelled (:meth:`Scheduler._cancel`), not drained, so a Ctrl-C in a cell reaches the reader at
once, not after the queued work.
"""

from __future__ import annotations

import threading
import warnings

from ._errors import EngineError

__all__ = ["inside", "inside_op", "wait_inside_op", "observer_failed"]

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


def observer_failed(exc: Exception) -> None:
    """An observer raised.  It runs inside a worker with the engine's lock held, so raising would
    kill the worker and hang every wait: warn instead."""
    warnings.warn(f"d2l_async engine: an observer raised {exc!r}; ignored", RuntimeWarning, stacklevel=2)
