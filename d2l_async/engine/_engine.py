"""The engines readers use: ``ThreadedEngine`` (asynchronous) and ``NaiveEngine`` (its synchronous twin).

Both have the same API; only *when* an op runs differs.  ``ThreadedEngine`` hands each op to
worker threads and returns at once; ``NaiveEngine`` runs it at push time on the calling thread,
like MXNet's ``NaiveEngine`` and dask's ``get_sync``: the baseline for "how much did asynchrony
buy?" and the debugging mode.

:func:`make_engine` is the one place the package's experiments (and so its dashboards) create an
engine: a ``ThreadedEngine``, or a ``NaiveEngine`` when the environment says
``D2L_ASYNC_ENGINE=naive`` -- every experiment then runs synchronously, and its traces say so
(``meta["engine"] == "naive"``).
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

import torch

from ..config import ENGINE_KINDS, engine_kind
from ..trace import Trace
from ._array import EngineArray
from ._errors import EngineError
from ._observer import RECORD_LIMIT, Recorder
from ._deps import split_access
from ._modelled import modelled_meta, resolve_models
from ._op import EngineOp
from ._scheduler import Scheduler

__all__ = ["ThreadedEngine", "NaiveEngine", "make_engine"]


def _run_push(op: EngineOp) -> None:
    reads, writes, extra = op.arg
    op.fn(*[a._data for a in reads], *[a._data for a in writes], *extra)


class _ArrayAPI(Scheduler):
    """What both engines add to the scheduler: arrays, ``push``, traces."""

    def _setup_recording(self, record: bool | int) -> None:
        self._arrays = 0
        self._recorder: Recorder | None = None
        if isinstance(record, bool) or record is None:
            self._record_limit = RECORD_LIMIT
        elif isinstance(record, int) and record > 0:
            self._record_limit = record
        else:
            raise ValueError(f"record={record!r}: pass True, False, or the number of events to record")
        if record:
            self._start_recorder(self.t0)

    def _start_recorder(self, t0: float | None) -> None:
        rec = Recorder(self.devices, self.workers, self.engine_kind, t0, limit=self._record_limit)
        # at the limit the recorder stops, and so does the stamping of ops (they run at full speed)
        ref = weakref.ref(self)  # not the engine itself: the recorder must not keep it alive
        rec.on_full = lambda: ref() is not None and ref().set_observers(())
        self._recorder_base = self._done + self._failed  # ops finished before this recording
        self._recorder = rec
        self.set_observers((rec,))

    def array(self, data: Any, *, device: str | None = None, name: str | None = None,
              dtype: torch.dtype | None = None) -> EngineArray:
        """A new array holding a copy of ``data`` (a tensor, numpy array, list or number).

        Args:
            device: a virtual device of this engine (default: the first).
            name: the label used in traces and graphs (default ``"a0"``, ``"a1"``, ...).
            dtype: convert to this torch dtype.
        """
        if self.closed:
            raise EngineError("this engine is shut down; create a new one (use it in a `with` block)")
        dev = self.device_record(device)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name={name!r}: pass a str label")
        if isinstance(data, EngineArray):
            raise TypeError("data is already an EngineArray; use x.to(device) to copy it")
        if dtype is not None and not isinstance(dtype, torch.dtype):  # a str reached torch as a device
            raise TypeError(f"dtype={dtype!r}: pass a torch dtype, e.g. dtype=torch.float32")
        t = data.detach().clone() if isinstance(data, torch.Tensor) else torch.as_tensor(data).clone()
        if dtype is not None:
            t = t.to(dtype)
        if t.device.type != "cpu":
            raise ValueError(f"the engine's virtual devices hold CPU tensors; got one on {t.device}. "
                             "Move it with tensor.cpu() first")
        return EngineArray(self, t, t.shape, t.dtype, dev, name)

    def push(self, fn: Callable[..., Any], *args: Any, reads: Sequence[EngineArray] = (),
             writes: Sequence[EngineArray] = (), name: str | None = None, kind: str = "op",
             device: str | None = None) -> int:
        """Push a custom op (MXNet's ``PushAsync``): a worker calls
        ``fn(*read_tensors, *write_tensors, *args)`` once every dependency is met.

        ``fn`` must change the write tensors in place and must not touch other arrays.

        Args:
            reads: arrays whose values ``fn`` reads.
            writes: arrays ``fn`` writes (in place); reading them is implied.
            name: the op's name in traces (default: ``fn.__name__``).
            kind: ``"op"`` or ``"copy"`` (how traces draw it).
            device: the device whose queue runs it (default: the device of the first write, else
                of the first read, else the engine's first device).  Unlike ``+`` or ``@``, a
                custom op may touch arrays of several devices.

        Returns:
            The op's id (its event id in :meth:`trace`).
        """
        if not callable(fn):
            raise TypeError(f"fn={fn!r} is not callable; push(fn, reads=(...), writes=(...))")
        if kind not in ("op", "copy"):
            raise ValueError(f"kind={kind!r}: use 'op' or 'copy'")
        for role, arrays in (("reads", reads), ("writes", writes)):
            if isinstance(arrays, EngineArray) or not isinstance(arrays, (tuple, list)):
                raise TypeError(f"{role} must be a tuple of EngineArrays, e.g. {role}=(x,)")
            for a in arrays:
                if not isinstance(a, EngineArray) or a._engine is not self:
                    what = (f"array {a.label!r} of another engine" if isinstance(a, EngineArray)  # no repr:
                            else f"a {type(a).__name__}")  # an array's repr would block
                    raise TypeError(f"{role} holds {what}; pass arrays made by this engine")
        # MXNet's PushAsync: a custom op may touch arrays of several devices (communication is a
        # custom op too); it runs on ``device``, else where it writes, else where it reads
        home = (*writes, *reads)
        dev = self.device_record(device) if device is not None else (home[0]._dev if home else self.device_record(None))
        r, w = split_access(reads, writes)
        label = name if name is not None else getattr(fn, "__name__", "op")
        op = EngineOp(str(label), kind, _run_push, fn, (tuple(reads), tuple(writes), args), r, w, dev, 0)
        self.submit(op, 2)
        return op.id

    # -- traces ------------------------------------------------------------------------------
    def trace(self) -> Trace:
        """Everything recorded so far (finished ops, their pushes, and the frontend's blocks).

        Returns:
            A :class:`~d2l_async.trace.Trace`; ``meta`` says the engine kind, that its devices are
            virtual, which are modelled, and where recording stopped if it hit its limit.

        Raises:
            EngineError: the engine was created with ``record=False``.
        """
        rec = self._recorder
        if rec is None:
            raise EngineError("recording is off; create the engine with record=True to get a trace")
        stats = self.statistics()
        if rec.recorded >= rec.limit:  # the ops that finished after the recorder stopped listening
            rec.dropped = max(rec.dropped, stats.done + stats.failed - self._recorder_base - rec.ops)
        return rec.trace(pending=stats.pending, **modelled_meta(self._devices))  # says which are modelled

    def reset_trace(self) -> None:
        """Start a fresh recording: later traces hold only what happens from now on (time 0 = now)."""
        if self._recorder is None:
            raise EngineError("recording is off; create the engine with record=True to get a trace")
        with self._lock:
            self._start_recorder(None)

    def _attach_models(self, model: Any) -> None:
        """``model=``: the devices whose op durations are modelled (see ._modelled)."""
        for name, modelled in resolve_models(model, self.devices).items():
            self._devices[name].model = modelled

    def __repr__(self) -> str:
        s = self.statistics()
        state = "shut down" if self.closed else f"{s.pending} pending, {s.done} done, {s.failed} failed"
        return (f"<{type(self).__name__} virtual devices {list(self.devices)}, "
                f"{self.workers} worker(s) each: {state}>")


def _set_torch_threads(n: int) -> Callable[[], None]:
    def init() -> None:
        # torch's intra-op thread count is per thread: a setting made on the main thread does not
        # reach threads started later, so each worker sets its own
        torch.set_num_threads(n)
    return init


class ThreadedEngine(_ArrayAPI):
    """The asynchronous engine: each virtual device has a queue and ``workers`` threads.

    Args:
        workers: worker threads *per device*.
        devices: virtual device names, ``"cpu:0"``, ``"cpu:1"``, ... (threads on this CPU, not GPUs).
        max_pending: make ``push`` block while this many ops are pending (back-pressure, like the
            bounded CUDA launch queue); the blocked time is recorded as a ``"full queue"`` block.
        record: record a trace (``eng.trace()``) of up to 1,000,000 events (ops and blocks; an int
            sets another limit; the trace says where recording stopped); ``False`` costs nothing.
        torch_threads: torch intra-op threads in each worker (None: leave torch's default).
        model: modelled devices (:mod:`._modelled`): a ``DeviceModel`` for all devices, or a mapping
            ``device -> DeviceModel``; their ops compute real values but hold the device for a
            modelled time.  None (default): every device is plain threads.

    Use it in a ``with`` block (or call :meth:`shutdown`): the workers stop at the end.
    """

    engine_kind = "threaded"

    def __init__(self, *, workers: int = 1, devices: Sequence[str] = ("cpu:0",),
                 max_pending: int | None = None, record: bool | int = True, torch_threads: int | None = 1,
                 model: Any = None) -> None:
        if torch_threads is not None and (isinstance(torch_threads, bool) or not isinstance(torch_threads, int)
                                          or torch_threads < 1):
            raise ValueError(f"torch_threads={torch_threads!r}: pass a positive int, or None for torch's default")
        self.torch_threads = torch_threads
        init = _set_torch_threads(torch_threads) if torch_threads is not None else None
        resolve_models(model, devices if not isinstance(devices, str) else (devices,))  # bad model: fail first
        super().__init__(devices=devices, workers=workers, max_pending=max_pending, thread_init=init)
        self._attach_models(model)
        self._setup_recording(record)


class NaiveEngine(_ArrayAPI):
    """The synchronous twin: every op runs at push time on the calling thread.

    Errors are still raised at the next blocker (not at the push), so a program behaves the same
    on both engines.  Its traces draw ops on ``"<device> worker 0"`` lanes; ``meta["engine"]`` is
    ``"naive"`` and says they ran inline.
    """

    engine_kind = "naive"

    def __init__(self, *, devices: Sequence[str] = ("cpu:0",), record: bool | int = True, model: Any = None) -> None:
        resolve_models(model, devices if not isinstance(devices, str) else (devices,))  # bad model: fail first
        super().__init__(devices=devices, workers=0, inline=True)
        self._attach_models(model)
        self._setup_recording(record)



def make_engine(*, workers: int = 1, devices: Sequence[str] = ("cpu:0",), max_pending: int | None = None,
                record: bool | int = True, torch_threads: int | None = 1, model: Any = None,
                kind: str | None = None) -> ThreadedEngine | NaiveEngine:
    """The engine an experiment or a dashboard runs on: the one factory they all use.

    Args:
        workers, devices, max_pending, record, torch_threads, model: as :class:`ThreadedEngine`
            takes them.  A naive engine takes ``devices``, ``record`` and ``model``; it has no
            workers and no queue (every op runs at push time), so the other three do not apply.
        kind: ``"threaded"`` or ``"naive"``; None (default): the ``D2L_ASYNC_ENGINE`` environment
            variable, ``"threaded"`` when it is unset (see :func:`d2l_async.config.engine_kind`).

    Returns:
        A new engine (use it in a ``with`` block); ``engine.engine_kind`` names which.

    Raises:
        ValueError: ``kind`` or ``D2L_ASYNC_ENGINE`` is neither ``"threaded"`` nor ``"naive"``.
    """
    if kind is None:
        kind = engine_kind()
    elif kind not in ENGINE_KINDS:
        raise ValueError(f"kind={kind!r}: pass one of {list(ENGINE_KINDS)}, or None for D2L_ASYNC_ENGINE's")
    if kind == "naive":
        return NaiveEngine(devices=devices, record=record, model=model)
    return ThreadedEngine(workers=workers, devices=devices, max_pending=max_pending, record=record,
                          torch_threads=torch_threads, model=model)
