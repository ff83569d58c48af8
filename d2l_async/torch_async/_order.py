"""Program order with one worker, and ops that jump the line (a mixin of ``AsyncRuntime``).

With one worker (the default) ops *start* in program order: :meth:`OrderedReady.queue_ready` holds an
op that became ready until every op pushed before it has been handed out -- exactly eager torch's
order, like one CUDA stream, whatever the dependency analysis could have missed.  The exception
is an *escape* op (``.numpy()``, see ``._sync.SyncPaths.escape``): it runs nothing, so it is queued
ahead of the ready ops as soon as its dependencies are met, and its place in program order is
passed.  :meth:`OrderedReady.submit` also records each variable's last op (``TVar.last``), which
lets the frontend tell an idle variable.
"""

from __future__ import annotations

from ..engine.core import EngineOp, Scheduler
from ._sync import ESCAPE

__all__ = ["OrderedReady"]


class OrderedReady(Scheduler):
    """``queue_ready``/``submit`` of :class:`~._runtime.AsyncRuntime` (needs ``_fifo``, ``_held``, ``_next``)."""

    def queue_ready(self, op: EngineOp, obs: tuple) -> None:
        """The scheduler's hook (lock held, see :mod:`d2l_async.engine.core`): with one worker,
        hand ready ops out in push order; an escape goes first.  Returns nothing."""
        if op.fn is ESCAPE:  # memory escapes (.numpy()): first in line, it runs nothing
            super().queue_ready(op, obs, first=True)  # ahead of the ready ops: a wait for the data, not work
            if not self._fifo:
                return
            op_id, op = op.id, None  # its place in program order is passed
        elif not self._fifo:
            return super().queue_ready(op, obs)
        else:
            op_id = op.id
        held = self._held  # lock held: hand ops out in push (id) order
        held[op_id] = op
        while self._next in held:
            o = held.pop(self._next)
            self._next += 1
            if o is not None:
                super().queue_ready(o, obs)

    def submit(self, op: EngineOp, depth: int = 2) -> None:
        """The scheduler's hook (frontend, no lock): record ``op`` as the last op of each of its
        vars, then push it.  Every op of the runtime comes through here, the fast path included."""
        for v in op.reads:  # what lets the frontend tell an idle variable (._sync.idle)
            v.last = op
        for v in op.writes:
            v.last = op
        if op.out is not None:
            op.out.last = op
        super().submit(op, depth + 1)

