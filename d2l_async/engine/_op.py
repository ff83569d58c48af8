"""The records the scheduler keeps: an op, an array's var, a virtual device, a statistics snapshot.

Standard library only (see :mod:`._scheduler` for how they move).
"""

from __future__ import annotations

import enum
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from .._args import sequence
from ._deps import Op, Var

__all__ = ["OpState", "EngineVar", "EngineOp", "Device", "EngineStatistics", "parse_devices"]

_DEVICE_NAME = re.compile(r"cpu:(0|[1-9]\d*)\Z")  # "cpu:00" would be a second name for cpu:0


class OpState(enum.Enum):
    WAITING = "waiting"
    READY = "ready"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


_WAITING, _READY, _RUNNING, _DONE, _FAILED = (OpState.WAITING, OpState.READY, OpState.RUNNING,
                                               OpState.DONE, OpState.FAILED)


class EngineVar(Var):
    """A var as the scheduler sees it: dependency state plus what blockers and traces need.

    Attributes:
        producer: the last pushed, unfinished op that writes this var (None when none).
        error: the exception that left this var's value undefined (None when fine).
        label: the name used in traces.
        last_write: id of the last op that wrote it (-1: none); recorded as a dependency.
        read_ids: ids of ops that read it since that write (recorded only while recording; an
            ``array("q")``, 8 bytes per read).
        num: for a label the engine made (``"a17"``), its number (17), else -1; a recorder stores
            the number, not the string (see ._observer).
    """

    __slots__ = ("producer", "error", "label", "last_write", "read_ids", "num")

    def __init__(self, label: str) -> None:
        Var.__init__(self)
        self.producer: EngineOp | None = None
        self.error: BaseException | None = None
        self.label = label
        self.last_write = -1
        self.read_ids: Any = None
        self.num = -1


class EngineOp(Op):
    """One pushed op.  Observers may read every attribute; only the engine writes them.

    Attributes:
        id: unique in the engine, in push order.
        name, kind: what the trace calls it (``"add"``, ``"op"``/``"copy"``).
        run: ``run(op)`` does the work on a worker (set by the layer that builds ops).
        out: the fresh array the op creates (``y`` in ``y = x + 1``), or None.  It is a write too,
            but one that needs no rules: nothing can have touched an array before the op that
            creates it, so it is granted at once (and needs no tuple, see ``EngineArray._one``).
        fn, arg: the function ``run`` calls and its extra argument (a scalar, a second array, ...);
            dropped with ``reads``/``writes`` once the op finished, so tensors are freed.  (Slots,
            not an args tuple: every object a pending op keeps alive is more work for Python's
            garbage collector, which 10,000 pending ops can otherwise trigger in full.)
        device: the device whose queue runs it.
        state: an :class:`OpState`.
        error: the exception, for a failed op; ``origin`` is False when the op did not run because
            an input had already failed.
        nbytes: bytes of the outputs it makes (for ``bytes_pending``).
        t_launch, t_issue, t_start, t_end: perf_counter stamps (only while recording).
        worker: index of the worker that ran it; deps: ids it waited for (only while recording).
        file, line: the user's source line that pushed it (only while recording; two fields, not
            a tuple: no object to allocate per op).
    """

    __slots__ = ("id", "name", "kind", "run", "fn", "arg", "device", "state", "error", "origin",
                 "nbytes", "t_launch", "t_issue", "t_start", "t_end", "worker", "deps", "file", "line",
                 "watched")

    def __init__(self, name: str, kind: str, run: Callable[["EngineOp"], None], fn: Any, arg: Any,
                 reads: tuple, writes: tuple, device: "Device", nbytes: int = 0,
                 out: "EngineVar | None" = None) -> None:
        self.reads = reads
        self.writes = writes
        self.out = out
        self.wait = 0
        self.name = name
        self.kind = kind
        self.run = run
        self.fn = fn
        self.arg = arg
        self.device = device
        self.nbytes = nbytes
        self.state = _WAITING
        self.error = None
        self.origin = True
        self.watched = False
        self.id = -1

    def __repr__(self) -> str:
        return f"<EngineOp #{self.id} {self.name} on {self.device.name}: {self.state.value}>"


class Device:
    """A virtual device: a queue of READY ops, and a condition its idle workers sleep on.

    Attributes:
        queue: READY ops, first in first out.
        idle: workers asleep on ``cond`` that nobody has woken yet (a waker decrements it).
        pending: ops of this device booked and not finished.
        running: ops of this device a worker runs right now.
        threads: its worker threads.
        model: a :class:`._modelled.ModelledDevice` when its ops' durations are modelled, else None.
    """

    __slots__ = ("name", "index", "queue", "cond", "idle", "pending", "threads", "stopping", "model",
                 "running")

    def __init__(self, name: str, index: int, lock: threading.Lock) -> None:
        self.name = name
        self.index = index
        self.queue: deque = deque()
        self.cond = threading.Condition(lock)
        self.idle = 0
        self.pending = 0
        self.threads: list[threading.Thread] = []
        self.stopping = False
        self.running = 0  # ops of this device a worker runs now (what a cancel cannot drop)
        self.model = None  # set by the engine's model= (see ._modelled): hold ops for a modelled time


@dataclass(frozen=True)
class EngineStatistics:
    """A snapshot of the engine (trio's ``statistics()``): nothing here changes afterwards.

    Attributes:
        pending: ops pushed and not finished (waiting, ready or running).
        running: ops a worker runs right now.
        done: ops finished without error; failed: ops finished with an error.
        device_pending: device name -> its pending ops.
        bytes_pending: bytes the outputs of pending ops will hold (memory the queue commits).
        blocked_seconds: total time the frontend spent blocked (waits and a full queue).
        elapsed: seconds since the engine started.
    """

    pending: int
    running: int
    done: int
    failed: int
    device_pending: Mapping[str, int] = field(default_factory=dict)
    bytes_pending: int = 0
    blocked_seconds: float = 0.0
    elapsed: float = 0.0


def parse_devices(devices: Sequence[str]) -> tuple[str, ...]:
    """Check virtual device names: ``"cpu:N"``, at least one, no duplicates."""
    if isinstance(devices, str):
        devices = (devices,)
    names = sequence("devices", devices, what="virtual device names such as 'cpu:0'")
    if not names:
        raise ValueError("devices is empty; pass at least one virtual device, e.g. ('cpu:0',)")
    for name in names:
        if not isinstance(name, str) or not _DEVICE_NAME.match(name):
            raise ValueError(
                f"virtual device {name!r} is not supported: the engine's devices are threads on "
                "this CPU, named 'cpu:0', 'cpu:1', ... (for real GPUs use torch with d2l_async.capture)")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"devices {dupes} are listed more than once; name each virtual device once")
    return names
