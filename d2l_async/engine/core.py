"""The engine's interface for a runtime built on it: what a subclass of the scheduler may use.

:mod:`d2l_async.torch_async` is such a runtime: its ``AsyncRuntime`` is a :class:`Scheduler` whose
ops are plain torch calls.  It, and any other runtime, imports the engine through this module only;
the engine's ``_private`` modules may change.  What is here:

Records (:mod:`._deps`, :mod:`._op`)
    :class:`Var` / :class:`EngineVar` -- one per array (storage): its dependency state, its last
    writer (``producer``), its ``error``, its trace ``label``.  :class:`Op` / :class:`EngineOp` --
    one per pushed op: ``reads``, ``writes``, a fresh ``out`` var, the ``run(op)`` a worker calls,
    the :class:`Device` it is queued on (:meth:`Scheduler.device_record`), its :class:`OpState`.
    Build an :class:`EngineOp`, then :meth:`Scheduler.submit` it; only the engine writes its fields.

The rules (:mod:`._deps`)
    :func:`split_access` dedupes an op's reads and writes (a var both read and written is a
    write) -- call it before building the op.  :func:`push_op` and :func:`finish_op` are what the
    scheduler itself runs for every op; a runtime never calls them on an op it has submitted.

The scheduler and its subclass hooks (:class:`Scheduler`)
    ==============================  ==========================  =======================================
    hook                            thread / lock               contract
    ==============================  ==========================  =======================================
    ``submit(op, depth)``           frontend, no lock           push and return; an override adds
                                                                frontend bookkeeping, then calls
                                                                ``super().submit(op, depth + 1)`` once
    ``queue_ready(op, obs, first)`` a worker (or the naive      an op's vars granted it access; an
                                    frontend), **lock held**    override may hold it back, but each op
                                                                reaches ``super().queue_ready`` once;
                                                                never take the lock, wait, or run user
                                                                code here
    ``wait_op(op, reason)``         frontend, no lock           a recorded block until ``op`` finished
    ``wait_idle(reason, t0, dl)``   frontend, no lock           a recorded block until nothing pends
    ``mark_raised(error)``          frontend, no lock           a blocker raised ``error``: ``waitall``
                                                                does not raise it again
    ``has_pending()``               any, takes the lock         is any op pushed and unfinished?
    ``set_observers(observers)``    frontend                    replace the :class:`Observer` s
    ``device_record(name)``         any                         the :class:`Device` an op is queued on
    ``t0``                          any                         ``perf_counter`` at creation (traces)
    ==============================  ==========================  =======================================

    ``closed``, ``workers``, ``devices``, ``waitall``, ``statistics`` and ``shutdown`` are the
    engine's ordinary public API.  Everything else on the scheduler (``_lock``, the counters, the
    inbox) is the engine's own.

Around it
    :class:`Observer` and :class:`Recorder` (:mod:`._observer`: the moments reported, and the
    recorder that makes a :class:`~d2l_async.trace.Trace`); :class:`EngineError` and
    :func:`deferred` (an op's error, raised again at a blocker with the original chained);
    :func:`add_internal_dir` (a package whose frames a trace's "which line pushed this op" skips);
    :func:`hold_gc_freeze` / :func:`release_gc_freeze` (old objects out of full garbage collections
    while a block runs ahead); :func:`lower_priority` (a worker thread yields the CPU to the
    frontend); :func:`shield` / :func:`expose` / :func:`shield_ctrl_c` (:mod:`._shield`: a Ctrl-C that
    arrives in a runtime's own frontend bookkeeping is postponed until it has left it, as for the
    engine's; one that arrives in a wait is raised there).

Loads the trace model (numpy) but not torch.
"""

from __future__ import annotations

from ._deps import Op, Var, finish_op, push_op, split_access
from ._errors import EngineError, deferred
from ._gcfreeze import hold as hold_gc_freeze
from ._gcfreeze import release as release_gc_freeze
from ._observer import RECORD_LIMIT, Observer, Recorder
from ._op import Device, EngineOp, EngineStatistics, EngineVar, OpState
from ._scheduler import Scheduler
from ._shield import expose, shield, shield_ctrl_c
from ._source import add_internal_dir
from ._worker import lower_priority

__all__ = [
    "Device",
    "EngineError",
    "EngineOp",
    "EngineStatistics",
    "EngineVar",
    "Observer",
    "Op",
    "OpState",
    "RECORD_LIMIT",
    "Recorder",
    "Scheduler",
    "Var",
    "add_internal_dir",
    "deferred",
    "expose",
    "finish_op",
    "hold_gc_freeze",
    "lower_priority",
    "push_op",
    "release_gc_freeze",
    "shield",
    "shield_ctrl_c",
    "split_access",
]
