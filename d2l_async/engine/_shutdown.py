"""Shutting an engine down: run the queue or cancel it, stop the workers, join them.

``shutdown(wait=True)`` (the end of a ``with`` block) runs every queued op first;
``shutdown(wait=False)`` *cancels* what has not started: it is dropped, and a blocker on it raises
:class:`EngineError`.  An exception that ends a ``with`` block -- a Ctrl-C in a notebook cell --
cancels too, and goes through at once: draining 40 s of queued ops first hid the Ctrl-C behind them
.  Ops already running finish (a thread cannot be stopped from outside); their workers
exit after them, and a later ``shutdown()`` joins them.  Mixed into :class:`._scheduler.Scheduler`.
"""

from __future__ import annotations

import threading
import time

from . import _gcfreeze as gc_freeze
from ._errors import EngineError
from ._guard import inside_op, wait_inside_op
from ._waits import WAIT_SLICE

__all__ = ["Shutdown", "ABORT_JOIN"]

_perf = time.perf_counter

#: How long ``__exit__`` waits for the op a worker is running when an exception (a Ctrl-C) ends a
#: ``with`` block: the exception must reach the reader at once; the worker exits after it.
ABORT_JOIN = 0.1


class Shutdown:
    """Shutdown, cancel and the context manager of :class:`._scheduler.Scheduler` (a mixin)."""

    _gc_held = False  # inside its `with` block: the older objects are frozen (._gcfreeze)

    def shutdown(self, *, wait: bool = True, timeout: float = 30.0) -> None:
        """Stop the workers and join them.  Idempotent.

        ``wait=True`` runs every queued op first (for at most ``timeout`` seconds); ``wait=False``
        cancels what has not started (a blocker on a cancelled op raises :class:`EngineError`), and
        so does a Ctrl-C while waiting, which is then raised.  Errors of failed ops are not raised
        here (``waitall`` and the ``with`` block raise them).

        Called again, it joins the workers an exception left finishing their op.

        Raises:
            EngineError: a worker did not stop within ``timeout`` seconds (an op still running), or
                ``wait=True`` from inside an op of this engine.
        """
        if self._forked_from and not self.closed:  # a child of os.fork(): its workers are not here
            self.closed = True
            self._forget()
            return
        if self.closed:  # again: join the workers an exception left finishing an op (__exit__)
            me, end = threading.current_thread(), _perf() + timeout
            for d in self._devices.values():
                for t in [t for t in d.threads if t is not me and t.is_alive()]:
                    t.join(max(0.0, end - _perf()))
                d.threads[:] = [t for t in d.threads if t.is_alive()]
            return
        deadline = _perf() + timeout
        if wait:
            if inside_op(self._token):
                raise wait_inside_op("shutdown(wait=True)")
            try:
                if self._inline:
                    self._drain(deadline)
                with self._lock:
                    self._waitall_waiting += 1
                    try:
                        while (self._booked or self._inbox) and _perf() < deadline:
                            self._front.wait(WAIT_SLICE)
                    finally:
                        self._waitall_waiting -= 1
            except BaseException:  # a Ctrl-C while draining: cancel the rest, raise it at once
                self._close(cancel=True, join=ABORT_JOIN)
                raise
        _, stuck = self._close(cancel=not wait, join=max(0.0, deadline - _perf()) if wait else timeout)
        if stuck:
            raise EngineError(f"workers {stuck} did not stop within {timeout} s: an op is still running")

    def _close(self, *, cancel: bool, join: float) -> tuple[int, list[str]]:
        """Mark the engine closed, stop its workers (first dropping every op that has not started,
        when ``cancel``) and join them for at most ``join`` seconds in all.

        Returns:
            ``(ops cancelled, names of workers still running an op)``.
        """
        self.closed = True
        if self._finalizer is not None:
            self._finalizer.detach()
        dropped = 0
        with self._lock:
            if cancel:
                dropped = self._cancel()
            for dev in self._devices.values():
                dev.stopping = True
                dev.idle = 0
                dev.cond.notify_all()
            self._front.notify_all()  # blockers on cancelled ops wake up and raise
        end = _perf() + join
        stuck = []
        me = threading.current_thread()
        for dev in self._devices.values():
            for t in dev.threads:
                if t is not me:
                    t.join(max(0.0, end - _perf()))
                    if t.is_alive():
                        stuck.append(t.name)
            # release the joined threads: a Thread is in threading's WeakSet of dangling
            # threads, whose callback is Python code; freed later by the garbage collector, in the
            # reader's next loop, a Ctrl-C that landed in that callback was swallowed
            dev.threads[:] = [t for t in dev.threads if t.is_alive()]
        self._forget()
        return dropped, stuck

    def _cancel(self) -> int:
        """Drop every op that has not started (lock held); returns how many.  Ops running now
        finish; what they would grant is never run (workers stop)."""
        dropped = len(self._inbox) + self._booked - self._running
        self._inbox.clear()
        self._inline_ready.clear()
        for dev in self._devices.values():
            dev.queue.clear()
            dev.pending = dev.running
        self._booked = self._running
        self._bytes_pending = 0  # unknown for the running ops' outputs; statistics floor it at 0
        self._cancelled += dropped
        return dropped

    def __enter__(self):
        if not self._gc_held:  # a frontend that runs ahead: see ._gcfreeze
            self._gc_held = True
            gc_freeze.hold()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self._exit(exc_type, exc)
        finally:
            if self._gc_held:
                self._gc_held = False
                gc_freeze.release()

    def _exit(self, exc_type, exc) -> None:
        if exc_type is not None:
            # an exception (a Ctrl-C) ends the block: cancel the queue instead of running it first,
            # and let the exception itself through at once (40 s of queued ops hid it)
            if not self.closed:
                dropped, _ = self._close(cancel=True, join=ABORT_JOIN)
                if dropped and exc is not None:
                    try:
                        exc.add_note(f"d2l_async.engine: the `with` block ended with {exc_type.__name__}: "
                                     f"{dropped} queued op(s) were cancelled and the engine shut down")
                    except Exception:  # noqa: BLE001 - a note is a courtesy
                        pass
            return
        self.shutdown(wait=True)
        self._raise_unreported("the end of the `with` block")
