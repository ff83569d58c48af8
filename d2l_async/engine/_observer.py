"""How the engine reports what it does: an observer protocol, and a recorder that makes a Trace.

The engine calls each observer at six moments (all times are ``time.perf_counter()`` seconds)::

    on_push(op)          the frontend registered an op        (op.t_launch .. op.t_issue)
    on_ready(op)         all its inputs were granted: it entered its device's queue
    on_start(op)         a worker began it                    (op.t_start, op.worker)
    on_finish(op)        it ended, with or without op.error   (op.t_end)
    on_block_begin(reason, t, source)    the frontend starts to wait: "wait_to_read", "print", ...
    on_block_end(reason, t, deps)        ... and stops; deps = ids of the ops it waited for

``on_push``/``on_ready``/``on_finish`` run with the engine's lock held: keep them to an append.
With no observer (``record=False``) the engine skips every stamp and call: recording costs
nothing when it is off.  :class:`Recorder` turns the calls into a :class:`~d2l_async.trace.Trace`.
"""

from __future__ import annotations

import math
import time
from typing import Any, Protocol, Sequence

from ..trace import Kind, Lane, LaneRole, Trace
from ._source import format_source

__all__ = ["Observer", "Recorder"]


class Observer(Protocol):
    """What the engine calls; see the module docstring for when."""

    def on_push(self, op: Any) -> None: ...

    def on_ready(self, op: Any) -> None: ...

    def on_start(self, op: Any) -> None: ...

    def on_finish(self, op: Any) -> None: ...

    def on_block_begin(self, reason: str, t: float, source: tuple[str, int] | None) -> None: ...

    def on_block_end(self, reason: str, t: float, deps: tuple[int, ...]) -> None: ...

    #: Optional: the names of the moments this observer needs (the engine skips the others).
    hooks: frozenset[str]


class Recorder:
    """Keeps one small tuple per finished op and per block; :meth:`trace` builds the Trace.

    Args:
        devices: the engine's virtual device names.
        workers: worker threads per device (0 for the naive engine: its ops run inline and are
            drawn on ``"<device> worker 0"``).
        engine: ``"threaded"`` or ``"naive"``.
        t0: the time origin (perf_counter seconds); traces report times relative to it.
    """

    #: The engine stamps the times on the op itself; a Recorder needs only these calls.
    hooks = frozenset({"on_finish", "on_block_begin", "on_block_end"})

    def __init__(self, devices: Sequence[str], workers: int, engine: str, t0: float | None = None) -> None:
        self.devices = tuple(devices)
        self.workers = workers
        self.engine = engine
        self.t0 = time.perf_counter() if t0 is None else t0
        self._ops: list[tuple] = []
        self._blocks: list[tuple] = []
        self._open: tuple | None = None

    # -- the protocol ----------------------------------------------------------------------
    def on_push(self, op: Any) -> None:
        pass

    def on_ready(self, op: Any) -> None:
        pass

    def on_start(self, op: Any) -> None:
        pass

    def on_finish(self, op: Any) -> None:
        self._ops.append((op.id, op.device.name, op.worker, op.kind, op.name, op.t_launch, op.t_issue,
                          op.t_start, op.t_end, op.deps, tuple([v.label for v in op.reads]),
                          tuple([v.label for v in op.writes]), op.source, op.nbytes, op.error is not None))
        # only tuples of numbers and strings: the garbage collector stops tracking them, so a long
        # recording does not make full collections more frequent

    def on_block_begin(self, reason: str, t: float, source: tuple[str, int] | None) -> None:
        self._open = (reason, t, source)

    def on_block_end(self, reason: str, t: float, deps: tuple[int, ...]) -> None:
        opened, self._open = self._open, None
        t0, source = (opened[1], opened[2]) if opened and opened[0] == reason else (t, None)
        self._blocks.append((reason, t0, t, tuple(deps), source))

    # -- the result ------------------------------------------------------------------------
    def lanes(self) -> list[Lane]:
        lanes = [Lane("frontend", LaneRole.FRONTEND)]
        for d in self.devices:
            for k in range(max(self.workers, 1)):
                lanes.append(Lane(f"{d} worker {k}", LaneRole.BACKEND, device=d, virtual=True, stream=k))
        return lanes

    def trace(self, **meta: Any) -> Trace:
        """Everything finished so far, as a Trace (ops, their launches, and the frontend's blocks)."""
        ops = sorted(list(self._ops))  # by id = push order
        blocks = list(self._blocks)
        rows: list[dict[str, Any]] = []
        t0 = self.t0
        sources: dict[Any, str] = {}

        def src(s: Any) -> str:
            if s not in sources:
                sources[s] = format_source(s)
            return sources[s]

        next_id = (ops[-1][0] + 1) if ops else 0
        failed_ids = [o[0] for o in ops if o[-1]]
        for (oid, dev, worker, kind, name, tl, ti, ts, te, deps, reads, writes, source, nbytes, failed) in ops:
            text = src(source)
            rows.append(dict(id=oid, lane=f"{dev} worker {worker}", kind=kind, name=name, issue=ti - t0,
                             start=ts - t0, end=te - t0, device=dev, deps=tuple(deps), reads=tuple(reads),
                             writes=tuple(writes), flow=oid, source=text, reason="",
                             nbytes=nbytes))
            rows.append(dict(id=next_id, lane="frontend", kind=Kind.LAUNCH.value, name=f"push {name}",
                             issue=tl - t0, start=tl - t0, end=ti - t0, device=dev, deps=(), reads=(),
                             writes=(), flow=oid, source=text, reason="", nbytes=0))
            next_id += 1
        for reason, tb, te, deps, source in blocks:
            rows.append(dict(id=next_id, lane="frontend", kind=Kind.BLOCK.value, name=reason, issue=math.nan,
                             start=tb - t0, end=te - t0, device="", deps=deps, reads=(), writes=(), flow=-1,
                             source=src(source), reason=reason, nbytes=0))
            next_id += 1
        rows.sort(key=lambda r: (r["start"], r["id"]))
        columns = {name: [r[name] for r in rows] for name in rows[0]} if rows else {}
        info = {"source": "engine", "virtual": True, "engine": self.engine, "workers": self.workers,
                "devices": list(self.devices), "failed_ops": failed_ids,
                "device": (f"virtual devices {', '.join(self.devices)}: threads on this CPU, "
                           f"{self.workers} worker(s) each" if self.workers else
                           f"virtual devices {', '.join(self.devices)}: ops run inline on the frontend thread")}
        info.update(meta)
        return Trace.from_columns(columns, self.lanes(), info)
