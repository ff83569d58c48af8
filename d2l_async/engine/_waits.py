"""Waiting: the frontend's blockers and barriers, and what a Ctrl-C or a shutdown does to them.

A blocker (``x.wait_to_read()``, ``print(x)``, ``x.item()``, ...) waits for the op that last wrote
``x``; a barrier (``waitall``) for every op pushed.  Each sleeps on the engine's ``_front``
condition in slices of :data:`WAIT_SLICE`, so a KeyboardInterrupt -- a real Ctrl-C or
``_thread.interrupt_main`` -- reaches the reader between slices, and the engine stays consistent
(the frontend never changes the dependency state).  Three waits can never succeed, and raise at
once instead of hanging:

* a wait from inside an op of the same engine (the op would wait for itself, see ._guard);
* a wait for an op a shut-down engine will never run (it was cancelled);
* a wait past its ``timeout`` (tests give every wait one).

An error delivered at a blocker is not raised again by ``waitall``.  The naive engine, whose ops run
on the frontend, first runs what is queued (``_drain``): a push from inside an op, or one left by a
Ctrl-C, runs then.  Mixed into :class:`._scheduler.Scheduler`, whose state it reads.
"""

from __future__ import annotations

import contextlib
import threading
import time
from contextvars import ContextVar
from typing import Callable, Iterator

from ._errors import EngineError, deferred
from ._fork import forked_error
from ._guard import inside_op, observer_failed as _observer_failed, wait_inside_op
from ._op import _DONE, _FAILED, _RUNNING, EngineOp, EngineVar
from ._source import user_source

__all__ = ["Waits", "WAIT_SLICE", "wait_limit"]

_perf = time.perf_counter

#: Blocking waits sleep in slices this long, so a KeyboardInterrupt (a real Ctrl-C or
#: ``_thread.interrupt_main``) reaches the frontend between slices; a finishing op wakes it earlier.
WAIT_SLICE = 0.05

#: A limit every wait on this thread keeps, set by the code above the engine (an experiment's
#: time limit: a dashboard's 1 s limit stopped a run only at 4.3 s, after a waitall):
#: ``(perf_counter time, what to raise once it has passed)``.
_LIMIT: ContextVar[tuple[float, Callable[[], BaseException]] | None] = ContextVar("d2l_async_wait_limit",
                                                                                  default=None)


@contextlib.contextmanager
def wait_limit(until: float | None, error: Callable[[], BaseException] | None = None) -> Iterator[None]:
    """Inside the block, every blocking wait of every engine on this thread -- blockers, barriers,
    a full queue -- gives up at ``until`` (a ``time.perf_counter()`` time) by raising ``error()``.

    The layer above uses it for a run's time limit (``d2l_async.experiments``' ``deadline``): the
    wait gets the time that is left, not the whole queue's.  ``until=None``: no limit inside.

    Yields:
        ``None``: the block runs under the limit (or under none, for ``until=None``); the previous limit is restored
        on exit.
    """
    if until is not None and error is None:
        raise ValueError("wait_limit(until, error): pass what to raise once `until` has passed")
    token = _LIMIT.set(None if until is None else (until, error))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def _limit_left() -> float | None:
    """Seconds left before this thread's :func:`wait_limit` (None: none); raise once it passed."""
    limit = _LIMIT.get()
    if limit is None:
        return None
    left = limit[0] - _perf()
    if left <= 0:
        raise limit[1]()
    return left


class Waits:
    """Blockers and barriers of :class:`._scheduler.Scheduler` (a mixin: no state of its own)."""

    def wait_op(self, op: EngineOp, reason: str, timeout: float | None = None) -> None:
        """Block the frontend until ``op`` finished (return at once when it has); a recorded block
        named ``reason``.  Subclass hook for blockers: frontend thread, no lock held.  It raises
        nothing of the op's: read ``op.error`` afterwards.

        Raises:
            EngineError: called from inside an op of this engine, or the op was cancelled.
            TimeoutError: ``timeout`` seconds (or a run's time limit, :func:`wait_limit`) passed.
        """
        st = op.state
        if st is _DONE or st is _FAILED:  # identity, not `in {...}`: an Enum's hash runs Python code
            return
        if inside_op(self._token):  # it would wait on itself: refuse at once
            raise wait_inside_op(f"a blocker ({reason})")
        if self._forked_from:  # a child of os.fork(): the op's worker is in the parent (._fork)
            raise forked_error(f"a blocker ({reason})", self._forked_from)
        t0 = _perf()
        deadline = None if timeout is None else t0 + timeout
        if self._inline:  # ops pushed from inside an op, or left by a Ctrl-C, run now
            self._drain(deadline)
            st = op.state
            if st is _DONE or st is _FAILED:
                return
        self._block_begin(reason, t0)
        try:
            with self._lock:
                op.watched = True
                while op.state is not _DONE and op.state is not _FAILED:
                    if op.device.stopping and op.state is not _RUNNING:  # nobody will run it now
                        raise EngineError(f"{reason}: the engine was shut down before this op ran (it was "
                                          "cancelled); create a new engine and compute it again")
                    self._front.wait(self._slice(deadline, reason))
        finally:
            t1 = _perf()
            self._blocked += t1 - t0
            self._block_end(reason, t1, (op.id,))

    def _wait_var(self, var: EngineVar, reason: str, timeout: float | None = None) -> None:
        """A blocker: wait for the last write of ``var``, then raise its error if it has one."""
        op = var.producer
        if op is not None:
            self.wait_op(op, reason, timeout)
        if var.error is not None:
            error = var.error
            self.mark_raised(error)  # delivered here: waitall does not raise it again
            raise deferred(error, f"a failed op, raised at {reason}") from error

    def waitall(self, *, timeout: float | None = None) -> None:
        """Block until every pushed op has finished; raise, once, the first error not yet raised
        (an error a blocker already raised is not raised again).

        Args:
            timeout: seconds before :class:`TimeoutError` (for tests; the book's API has none).

        Raises:
            EngineError: called from inside an op of this engine (it would wait for itself).
        """
        if self._forked_from:  # a child of os.fork(): the parent's ops are the parent's to wait for
            if self._inbox or self._booked:
                raise forked_error("waitall()", self._forked_from)
            return
        t0 = _perf()
        deadline = None if timeout is None else t0 + timeout
        if self._inline and (self._inbox or self._inline_ready) and not inside_op(self._token):
            self._drain(deadline)
        if self._inbox or self._booked:
            if inside_op(self._token):  # the op calling it is pending: it would wait for itself
                raise wait_inside_op("waitall()")
            self.wait_idle("waitall", t0, deadline)
        self._raise_unreported("waitall")

    def wait_idle(self, reason: str, t0: float, deadline: float | None) -> None:
        """Wait until no op is queued or running: a block named ``reason`` from ``t0``, in slices
        (:meth:`_slice` raises past ``deadline``, a ``perf_counter`` time).  Raises no op's error
        (``waitall`` does that).  Subclass hook for barriers: frontend thread, no lock held.

        Raises:
            TimeoutError: past ``deadline`` (or a run's time limit).
            EngineError: in a child of ``os.fork()`` (the engine's workers are in the parent).
        """
        if self._forked_from:
            raise forked_error(reason, self._forked_from)
        self._block_begin(reason, t0)
        try:
            with self._lock:
                self._waitall_waiting += 1
                try:
                    while self._booked or self._inbox:
                        self._front.wait(self._slice(deadline, reason))
                finally:
                    self._waitall_waiting -= 1
        finally:
            t1 = _perf()
            self._blocked += t1 - t0
            self._block_end(reason, t1, ())

    def _raise_unreported(self, reason: str) -> None:
        if self._forked_from:  # the parent's errors: the parent raises them
            return
        with self._lock:
            failed, self._unreported = self._unreported, []
        if failed:
            first = failed[0]
            more = f" ({len(failed) - 1} more ops failed)" if len(failed) > 1 else ""
            raise deferred(first.error, f"op {first.name!r} (#{first.id}), raised at {reason}{more}") \
                from first.error

    def _slice(self, deadline: float | None, reason: str) -> float:
        """How long the next wait may sleep (lock held); raise when waiting can no longer succeed."""
        if self.closed and not any(t.is_alive() for d in self._devices.values() for t in d.threads):
            raise EngineError(f"{reason}: the engine was shut down before this op ran")
        outer = _limit_left()  # a run's time limit
        if deadline is None:
            return WAIT_SLICE if outer is None else min(outer, WAIT_SLICE)
        left = deadline - _perf()
        if left <= 0:
            raise TimeoutError(f"{reason} timed out; the engine is still running the queued ops")
        return min(left, WAIT_SLICE) if outer is None else min(left, outer, WAIT_SLICE)

    def _block_begin(self, reason: str, t: float) -> None:
        if self._on_block_begin:
            src = user_source(2)  # waits come by several paths: walk from here
            for f in self._on_block_begin:
                try:  # zero cost unless it raises: an observer must not kill a worker
                    f(reason, t, src)
                except Exception as exc:  # noqa: BLE001
                    _observer_failed(exc)

    def _block_end(self, reason: str, t: float, deps: tuple) -> None:
        for f in self._on_block_end:
            try:  # zero cost unless it raises: an observer must not kill a worker
                f(reason, t, deps)
            except Exception as exc:  # noqa: BLE001
                _observer_failed(exc)


def _take(lock: "threading.RLock", deadline: float | None) -> None:
    """Take the naive engine's ``_serial`` lock, which another thread holds while it runs its ops:
    in slices, so a Ctrl-C gets through, and never past ``deadline`` (this spin ignored
    ``waitall(timeout=)``, and spun for ever on a lock a Ctrl-C had kept)."""
    while not lock.acquire(timeout=WAIT_SLICE if deadline is None else max(0.0, min(WAIT_SLICE,
                                                                                   deadline - _perf()))):
        _limit_left()  # a run's time limit
        if deadline is not None and _perf() >= deadline:
            raise TimeoutError("timed out waiting for another thread that is running the naive engine's "
                               "ops; the engine is still running them")
