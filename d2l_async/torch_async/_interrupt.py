"""When an exception ends a block: its queued ops run first, and a second Ctrl-C abandons them.

On CUDA an exception that leaves the code which queued the kernels -- a Ctrl-C in a training loop
-- does not stop the stream: the kernels already queued run to the end, so every tensor holds
the value the program gave it, in program order, up to the line that raised.  A block does the
same (:func:`finish_after`)::

    with d2l_async.asynchronous():
        for step in range(1000):
            train_step()                 # Ctrl-C here: the ops queued so far still run
    # parameters, Adam's moments and its step count are those of the line that was interrupted

1. Any exception that leaves the block -- a KeyboardInterrupt, a Python error, a queued op's error
   raised at a blocking point -- waits for every queued op (recorded as the end of the block,
   ``waitall``) and raises none of their errors: what a failed op wrote raises its error when
   read, as always.  Then the exception goes on, with a note saying how many ops ran.  When they
   take longer than :data:`QUIET` seconds, a line on stderr says what the block waits for.
2. A second Ctrl-C while they run (or a run's time limit, ``d2l_async.engine.wait_limit``)
   *abandons* them: the ops not started are dropped (one a worker is running finishes: a thread
   cannot be stopped from outside).  A tensor that one of them would have written -- its output,
   a tensor updated in place, a view of either -- then raises :class:`NotComputedError` when read,
   naming the block and the op that did not run, instead of a value no program order gives.
   What can still be read is consistent: an op runs only after every earlier op that writes what
   it reads or writes (the engine's rules), so the ops that ran are, for every tensor, a prefix of
   its history.  torch's global generator stays where the last random op that ran left it.

Exceptions *inside* the runtime: Python raises a KeyboardInterrupt between any two bytecodes of
the main thread.  One that landed in the runtime's own bookkeeping -- an op's id taken and the
op not queued yet -- left every later op of a one-worker block waiting for it for ever.  The
engine's shield (:func:`d2l_async.engine.core.shield`) postpones a Ctrl-C that arrives in the
runtime's dispatch until it has left it: an aten op is atomic, as eager torch's C++ ops are.  A
Ctrl-C that arrives in a wait (``.item()``, ``print``, the end of the block) is raised there
(:mod:`._context` registers which is which).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any

from ..engine.core import EngineError, EngineOp

__all__ = ["NotComputedError", "QUIET", "finish_after", "not_computed", "opening_line", "run_queued"]

#: Seconds the end of a block waits for its queued ops in silence before it says on stderr what it
#: waits for (and that a second Ctrl-C abandons them).
QUIET = 1.0
#: Seconds the op a worker is running gets to finish after a second Ctrl-C, before the exception goes
#: on (its worker exits after it; reading what it writes waits for it).
ABANDON_JOIN = 0.1

_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_CONTEXTLIB = contextlib.__file__


class NotComputedError(RuntimeError):
    """A tensor read after its block abandoned the op that would have written it.

    Attributes:
        op: the name of the op that did not run (``"add_"``).
        op_id: its number in the block's trace (-1: it was never queued).
        source: ``"file.py:12"``, the line that queued it ("" when the block did not record).
        block: ``"file.py:3"``, the line that opened the block.
        ended_by: the exception that ended the block, then what abandoned its ops
            (``"KeyboardInterrupt, then KeyboardInterrupt"``).
    """

    def __init__(self, message: str, op: str, op_id: int, source: str, block: str, ended_by: str) -> None:
        super().__init__(message)
        self.op = op
        self.op_id = op_id
        self.source = source
        self.block = block
        self.ended_by = ended_by


def opening_line() -> str:
    """Returns ``"file.py:12"``: the reader's line that opens a block (the first frame outside this
    package and contextlib), or ``""``."""
    f: Any = sys._getframe(1)
    while f is not None and (f.f_code.co_filename.startswith(_HERE) or f.f_code.co_filename == _CONTEXTLIB):
        f = f.f_back
    return "" if f is None else f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"


def not_computed(rt: Any, op: EngineOp, reason: str) -> NotComputedError:
    """Returns the error for reading (at ``reason``) a tensor that ``op``, never run, would have written."""
    source = f"{os.path.basename(op.file)}:{op.line}" if getattr(op, "file", "") else ""
    first, second = rt.abandoned or ("an exception", "an exception")
    where = f", queued at {source}" if source else ""
    return NotComputedError(
        f"{reason}: this tensor has no value: op {op.name!r} (#{op.id}{where}), which writes it, never ran. "
        f"The asynchronous() block opened at {rt.opened_at or '?'} ended with {first}, and a {second} while its "
        "queued ops ran abandoned them. Compute it again; for a parameter, assign new data (p.data = ...) or "
        "rebuild the model", op.name, op.id, source, rt.opened_at, f"{first}, then {second}")


def run_queued(rt: Any, ending: str) -> None:
    """Wait until no op of ``rt`` is queued or running (exposed to Ctrl-C: a second one stops the
    wait).  Raises nothing of the ops'."""
    t0 = time.perf_counter()
    try:
        rt.wait_idle("waitall", t0, t0 + QUIET)
    except TimeoutError:
        print(f"d2l_async: {ending}: the asynchronous() block opened at {rt.opened_at or '?'} runs its "
              f"{rt.statistics().pending:,} queued op(s) first, as a CUDA stream would; press Ctrl-C again "
              "to abandon them", file=sys.stderr, flush=True)
        rt.wait_idle("waitall", time.perf_counter(), None)


def _unraised(rt: Any) -> BaseException | None:
    """The first error of a queued op that nobody has raised (taken: ``waitall`` forgets it)."""
    try:
        rt.waitall()
    except Exception as exc:  # noqa: BLE001 - an op's own error, of any type
        return exc
    return None


def _note(exc: BaseException, text: str) -> None:
    try:
        exc.add_note(text)
    except Exception:  # noqa: BLE001 - a note is a courtesy
        pass


def finish_after(rt: Any, exc: BaseException) -> None:
    """``exc`` leaves ``rt``'s block: run its queued ops, or abandon them on a second Ctrl-C (see
    the module docstring); shut the runtime down; say which in a note on ``exc``.  Raises nothing."""
    if rt.closed:
        return
    name = type(exc).__name__
    queued = rt.statistics().pending
    second: BaseException | None = None
    if queued:
        try:
            run_queued(rt, name)
        except BaseException as stop:  # noqa: BLE001 - a second Ctrl-C, a run's time limit
            second = stop
    if second is None:
        failed = _unraised(rt)
        try:
            rt.shutdown(wait=True, timeout=30.0)
        except EngineError as stuck:  # nothing is queued: only a wedged op keeps a worker
            _note(exc, f"d2l_async: {stuck}")
        if queued:
            text = (f"d2l_async: the asynchronous() block opened at {rt.opened_at or '?'} ended with {name}; its "
                    f"{queued:,} queued op(s) ran first (as a CUDA stream runs its queue), so every tensor holds the "
                    "value of program order at the line that raised")
            if failed is not None:
                text += (f"; some of them failed (the first: {type(failed).__name__}: {failed}): what they wrote "
                         "raises that error when read")
            _note(exc, text)
        return
    s = rt.statistics()
    left = s.pending - s.running
    rt.abandoned = (name, type(second).__name__)
    try:
        rt.shutdown(wait=False, timeout=ABANDON_JOIN)
    except EngineError:  # the op a worker runs finishes after the exception; its worker exits then
        pass
    _note(exc, f"d2l_async: the asynchronous() block opened at {rt.opened_at or '?'} ended with {name}; a "
               f"{type(second).__name__} while its queued ops ran abandoned {left:,} of them: a tensor one of them "
               "would have written raises NotComputedError when read")
