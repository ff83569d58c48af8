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


#: What the recorder keeps per finished op, one list per field (see :meth:`Recorder.on_finish`).
_OP_FIELDS = ("id", "device", "worker", "kind", "name", "t_launch", "t_issue", "t_start", "t_end", "deps",
              "reads", "writes", "file", "line", "nbytes", "failed")
_SEP = "\x1f"  # joins the labels of an op with several inputs (a str is not tracked by the gc)


class Recorder:
    """Keeps what finished ops did, column-wise, and the frontend's blocks; :meth:`trace` builds
    the Trace.

    Column-wise, with strings for the labels, because of Python's garbage collector: a tuple or a
    list per op would be one more object to allocate per op, and the collector runs a full
    collection of the whole heap (torch's included) after every few tens of thousands.

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
        self._cols: dict[str, list] = {f: [] for f in _OP_FIELDS}
        (self._id, self._device, self._worker, self._kind, self._name, self._tl, self._ti, self._ts,
         self._te, self._deps, self._reads, self._writes, self._file, self._line, self._nbytes,
         self._failed) = (self._cols[f].append for f in _OP_FIELDS)
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
        self._id(op.id)
        self._device(op.device.name)
        self._worker(op.worker)
        self._kind(op.kind)
        self._name(op.name)
        self._tl(op.t_launch)
        self._ti(op.t_issue)
        self._ts(op.t_start)
        self._te(op.t_end)
        self._deps(op.deps)
        r, w = op.reads, op.writes
        self._reads(r[0].label if len(r) == 1 else _SEP.join([v.label for v in r]))
        out = op.out
        if not w:
            self._writes(out.label if out is not None else "")
        else:
            self._writes(_SEP.join([v.label for v in (*w, out) if v is not None]))
        self._file(op.file)
        self._line(op.line)
        self._nbytes(op.nbytes)
        self._failed(op.error is not None)

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
        cols = {f: list(c) for f, c in self._cols.items()}  # copies: workers keep appending
        n = min(len(c) for c in cols.values())  # a row a worker is half-way through is left out
        blocks = list(self._blocks)
        rows: list[dict[str, Any]] = []
        t0 = self.t0
        sources: dict[Any, str] = {}

        def src(s: Any) -> str:
            if s not in sources:
                sources[s] = format_source(s)
            return sources[s]

        def labels(s: str) -> tuple[str, ...]:
            return tuple(s.split(_SEP)) if s else ()

        next_id = max(cols["id"][:n], default=-1) + 1
        failed_ids = sorted(i for i, bad in zip(cols["id"][:n], cols["failed"][:n]) if bad)
        for k in range(n):
            oid, dev, name, ti = cols["id"][k], cols["device"][k], cols["name"][k], cols["t_issue"][k]
            tl = cols["t_launch"][k]
            text = src((cols["file"][k], cols["line"][k]) if cols["file"][k] else None)
            rows.append(dict(id=oid, lane=f"{dev} worker {cols['worker'][k]}", kind=cols["kind"][k], name=name,
                             issue=ti - t0, start=cols["t_start"][k] - t0, end=cols["t_end"][k] - t0,
                             device=dev, deps=tuple(cols["deps"][k]), reads=labels(cols["reads"][k]),
                             writes=labels(cols["writes"][k]), flow=oid, source=text, reason="",
                             nbytes=cols["nbytes"][k]))
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
