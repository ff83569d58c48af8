"""Running an op and booking it as finished: the half of the engine core that the workers drive.

A worker takes a ready op from its device's queue and calls :meth:`Completion._execute` with no
lock held: the op runs (a modelled device then holds it for its modelled time) and an error is kept
on the op, never raised in the worker.  Under the engine's lock the worker then calls
:meth:`Completion._finish`: the counters drop, the op's variables are released
(:func:`._deps.finish_op`), the ops that became ready are queued, observers hear ``on_finish`` and the
frontend is woken if it waits for this op, for the whole queue or for space in it.  A failed op
passes its error to the arrays it writes (:meth:`Completion._failed_op`); a Ctrl-C in an op the naive
engine runs inline is raised at once instead (:meth:`Completion._interrupted`).

This is a mixin of :class:`._scheduler.Scheduler`, which owns the state it reads (``_lock``,
``_observers``, the counters, ``queue_ready``); it imports nothing of the scheduler's.
"""

from __future__ import annotations

import time

from ._deps import finish_op
from ._errors import EngineError
from ._guard import observer_failed as _observer_failed
from ._op import _DONE, _FAILED, Device, EngineOp

__all__ = ["Completion"]

_perf = time.perf_counter


class Completion:
    """Run an op and book it as finished (see the module docstring)."""

    def _execute(self, op: EngineOp, k: int) -> None:
        """Run ``op`` (no lock held); keep its error instead of raising it."""
        obs = self._observers
        if obs:
            op.worker = k
            op.t_start = _perf()
            for f in self._on_start:
                try:  # zero cost unless it raises: an observer must not kill a worker
                    f(op)
                except Exception as exc:  # noqa: BLE001
                    _observer_failed(exc)
        model = op.device.model  # a modelled device (._modelled): hold it for the op's modelled time
        t_run = _perf() if model is not None else 0.0
        try:
            if self._failed:
                self._check_inputs(op)
            op.run(op)
            if model is not None:
                model.hold(op, t_run)  # sleeps (no CPU) until the modelled duration has passed
        except BaseException as exc:  # noqa: BLE001 - kept, and raised at the blocker (a Ctrl-C in a hold too)
            op.error = exc
        if obs:
            op.t_end = _perf()

    @staticmethod
    def _check_inputs(op: EngineOp) -> None:
        """An op whose input failed does not run: it fails with that same error."""
        for v in (*op.reads, *op.writes):
            if v.error is not None:
                op.origin = False
                raise v.error

    def _finish(self, op: EngineOp) -> None:
        """Book a finished op (lock held): release its vars, queue what became ready, wake waiters."""
        dev = op.device
        self._running -= 1
        dev.running -= 1
        self._booked -= 1
        dev.pending -= 1
        self._bytes_pending -= op.nbytes
        if op.error is not None:
            op.state = _FAILED
            self._failed += 1
            if self._inline and isinstance(op.error, KeyboardInterrupt):
                self._interrupted(op)
            else:
                self._failed_op(op, dev)
        else:
            op.state = _DONE
            self._done += 1
        obs = self._on_ready
        ready = finish_op(op)  # the vars' rules (._deps): who got access, and is now ready
        if ready:
            for o in ready:
                self.queue_ready(o, obs)
        for f in self._on_finish:
            try:  # zero cost unless it raises: an observer must not kill a worker
                f(op)
            except Exception as exc:  # noqa: BLE001
                _observer_failed(exc)
        op.run = op.fn = op.arg = None  # free the tensors and arrays the op held
        op.reads = op.writes = ()
        op.out = None  # the array points at the op (producer): no cycle left for the gc
        if op.watched or (self._waitall_waiting and not self._booked and not self._inbox) or (
                self._space_waiting and self._booked + len(self._inbox) < self.max_pending):
            self._front.notify_all()

    def _failed_op(self, op: EngineOp, dev: Device) -> None:
        """A failed op (lock held): its outputs carry the error; an origin waits to be raised."""
        for v in op.writes:
            v.error = op.error
        if op.out is not None:
            op.out.error = op.error
        if op.origin:
            self._unreported.append(op)
            where = f" ({op.file}:{op.line})" if getattr(op, "file", "") else ""
            try:
                op.error.add_note(f"d2l_async.engine: raised by op {op.name!r} (#{op.id}) on "
                                  f"{dev.name}{where}")
            except Exception:  # noqa: BLE001 - a note is a courtesy
                pass

    def _interrupted(self, op: EngineOp) -> None:
        """A Ctrl-C inside a naive engine's inline op (lock held): raised at once, never kept.

        The arrays it writes keep their values -- a KeyboardInterrupt is not a property of the data
        (every later read of ``x`` raised it again); a custom op stopped half-way may
        have left them half-written.  Its fresh output was never made: reading it says so.
        """
        if op.out is not None:
            op.out.error = EngineError(
                f"{op.out.label!r} was not computed: its op {op.name!r} (#{op.id}) was interrupted "
                "(KeyboardInterrupt); compute it again")
