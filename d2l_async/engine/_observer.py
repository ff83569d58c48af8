"""How the engine reports what it does: an observer protocol, and a recorder that makes a Trace.

The engine calls each observer at six moments (all times are ``time.perf_counter()`` seconds)::

    on_push(op)          the frontend registered an op        (op.t_launch .. op.t_issue)
    on_ready(op)         all its inputs were granted: it entered its device's queue
    on_start(op)         a worker began it                    (op.t_start, op.worker)
    on_finish(op)        it ended, with or without op.error   (op.t_end)
    on_block_begin(reason, t, source)    the frontend starts to wait: "wait_to_read", "print", ...
    on_block_end(reason, t, deps)        ... and stops; deps = ids of the ops it waited for

``on_ready`` and ``on_finish`` run with the engine's lock held (on a worker, or on the frontend
of a naive engine); ``on_push`` runs on the frontend thread without it, before the op enters the
inbox (no worker can see the op yet); ``on_start`` runs on the worker without it, and the block
moments on the frontend without it.  Keep every one to an append: they are on the path of every op.
Observers are given to the scheduler (``observers=``, :meth:`Scheduler.set_observers`, declared in
:mod:`d2l_async.engine.core`); the engines readers use attach their :class:`Recorder` themselves
(``record=``).
With no observer (``record=False``) the engine skips every stamp and call: recording costs
nothing when it is off.  :class:`Recorder` turns the calls into a :class:`~d2l_async.trace.Trace`.

What recording costs, and its bound.  The recorder keeps one typed column per field
(``array.array``: 8 bytes per time stamp, 1-4 per code), with names, labels, files and reasons
stored once in small tables and referred to by number: about 80-90 bytes per op, where a tuple or
a list of Python objects per op cost 300 and more (and gave the garbage collector more to walk).
Array labels made by the engine (``a17``) are not stored at all: their number is.  And it stops:
after ``limit`` events (ops plus blocks, default :data:`RECORD_LIMIT`) it records nothing more --
the engine stops stamping ops, so the rest runs at full speed -- and the trace says so, in
``meta["recording"]`` and with a marker on the frontend lane, ``"recording stopped at N events"``.
A student's 10-million-op loop on Binder (2 GB) thus costs at most ~100 MB of recording.
:meth:`Recorder.trace` builds the Trace with numpy, a column at a time, never a row at a time.
"""

from __future__ import annotations

import math
import struct
import time
from array import array
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from .._args import instance, sequence
from ..trace import Kind, Lane, LaneRole, Trace
from ..trace import Coded, Ragged, segments
from ._source import format_source

__all__ = ["Observer", "Recorder", "RECORD_LIMIT"]

#: Events (ops + blocks) a recorder keeps by default before it stops (about 90 MB at most).
RECORD_LIMIT = 1_000_000
#: One finished op, packed (76 bytes): id, nbytes, t_launch, t_issue, t_start, t_end, then uint32s:
#: device << 16 | worker, name code, file code, line, number of dependencies, number of reads,
#: n_writes << 2 | is_copy << 1 | failed.  One ``pack`` and one ``+=`` per op: the cheapest way
#: found to append a dozen numbers from Python (three ``array.extend`` cost twice it).  Each count
#: has a field of its own (reads shared 14 bits with the writes, and an op reading 16,384
#: arrays overflowed into them); a count no field holds is refused before anything is written.
_ROW = struct.Struct("<qqddddIIIIIII")
_ROW_DTYPE = np.dtype([("id", "<i8"), ("nbytes", "<i8"), ("t_launch", "<f8"), ("t_issue", "<f8"),
                       ("t_start", "<f8"), ("t_end", "<f8"), ("where", "<u4"), ("name", "<u4"),
                       ("file", "<u4"), ("line", "<u4"), ("n_deps", "<u4"), ("n_reads", "<u4"),
                       ("flags", "<u4")])


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


class _Table:
    """Strings stored once: ``code(s)`` gives a small int, ``values`` the strings in code order."""

    __slots__ = ("codes", "values")

    def __init__(self) -> None:
        self.codes: dict[Any, int] = {}
        self.values: list[Any] = []

    def code(self, value: Any) -> int:
        c = self.codes.get(value)
        if c is None:
            c = self.codes[value] = len(self.values)
            self.values.append(value)
        return c


class Recorder:
    """Keeps what finished ops did, column-wise, and the frontend's blocks; :meth:`trace` builds
    the Trace.  Stops after ``limit`` events (see the module docstring).

    Args:
        devices: the engine's virtual device names.
        workers: worker threads per device (0 for the naive engine: its ops run inline and are
            drawn on ``"<device> worker 0"``).
        engine: ``"threaded"`` or ``"naive"``.
        t0: the time origin (perf_counter seconds); traces report times relative to it.
        limit: events (ops + blocks) to keep; afterwards nothing more is recorded.
        label_prefix: the text before a numbered variable's number (``"a"``: ``"a17"``, the
            engine's arrays; the torch runtime's variables are ``"t17"``).

    Attributes:
        on_full: called once (with no argument) when the limit is reached; the engine uses it to
            stop stamping ops.
        dropped: ops (and blocks) that finished after the limit, not recorded.  The recorder
            counts what still reaches it; the engine, which stops calling it, sets the rest.
    """

    #: The engine stamps the times on the op itself; a Recorder needs only these calls.
    hooks = frozenset({"on_finish", "on_block_begin", "on_block_end"})

    def __init__(self, devices: Sequence[str], workers: int, engine: str, t0: float | None = None,
                 limit: int = RECORD_LIMIT, label_prefix: str = "a") -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit={limit!r}: pass a positive int (events to record)")
        self.devices = tuple(instance("devices", d, str, what="device name (str) in each place")
                             for d in sequence("devices", devices, what="device names (str)"))
        self.workers = workers
        self.engine = engine
        self.t0 = time.perf_counter() if t0 is None else t0
        self.limit = limit
        self.label_prefix = label_prefix
        self.on_full: Callable[[], None] | None = None
        self.dropped = 0
        self.stopped_at = math.nan  # perf_counter time the limit was reached
        self._events = 0
        self._names, self._labels, self._files = _Table(), _Table(), _Table()
        self._reasons, self._sources = _Table(), _Table()
        # per finished op, one packed row (see _ROW: every Python call counts here)
        self._rows = bytearray()
        self._pack = _ROW.pack
        # variable-length parts, flat: n_deps and the counts in its row say how many belong to an op
        self._deps, self._codes = array("q"), array("i")  # dependency ids; read, then written labels
        self._blocks = {"reason": array("H"), "t0": array("d"), "t1": array("d"), "source": array("I"),
                        "n_deps": array("I")}
        self._block_deps = array("q")
        self._open: tuple | None = None

    # -- the limit -------------------------------------------------------------------------
    def _full(self) -> None:
        self.stopped_at = time.perf_counter()
        if self.on_full is not None:
            try:
                self.on_full()
            finally:
                self.on_full = None

    # -- the protocol ----------------------------------------------------------------------
    def on_push(self, op: Any) -> None:
        pass

    def on_ready(self, op: Any) -> None:
        pass

    def on_start(self, op: Any) -> None:
        pass

    def on_finish(self, op: Any) -> None:
        if self._events >= self.limit:
            self.dropped += 1
            return
        name, f = op.name, op.file
        nc = self._names.codes.get(name)
        if nc is None:
            nc = self._names.code(name)
        fc = self._files.codes.get(f)
        if fc is None:
            fc = self._files.code(f)
        deps = op.deps
        r, w, out = op.reads, op.writes, op.out
        nw = len(w) + (out is not None)
        # packed first: a field that cannot hold a value raises here, before anything is kept
        # (the deps and labels of a row that failed shifted every later row's)
        row = self._pack(op.id, op.nbytes, op.t_launch, op.t_issue, op.t_start, op.t_end,
                         op.device.index << 16 | op.worker, nc, fc, op.line, len(deps), len(r),
                         nw << 2 | (op.kind == "copy") << 1 | (op.error is not None))
        n_deps, n_codes = len(self._deps), len(self._codes)
        try:
            if deps:
                self._deps.extend(deps)
            code = self._codes.append
            for v in r:  # an engine-made label "a17" is stored as ~17 == -18; a name by its table code
                n = v.num
                code(~n if n >= 0 else self._labels.code(v.label))
            for v in w:
                n = v.num
                code(~n if n >= 0 else self._labels.code(v.label))
            if out is not None:
                n = out.num
                code(~n if n >= 0 else self._labels.code(out.label))
        except BaseException:
            del self._deps[n_deps:], self._codes[n_codes:]  # no half-kept row
            raise
        self._rows += row  # last, in one C call: trace() sees whole rows, and their deps and labels
        self._events += 1
        if self._events == self.limit:
            self._full()

    def on_block_begin(self, reason: str, t: float, source: tuple[str, int] | None) -> None:
        self._open = (reason, t, source)

    def on_block_end(self, reason: str, t: float, deps: tuple[int, ...]) -> None:
        opened, self._open = self._open, None
        if self._events >= self.limit:
            self.dropped += 1
            return
        self._events += 1
        t0, source = (opened[1], opened[2]) if opened and opened[0] == reason else (t, None)
        b = self._blocks
        b["reason"].append(self._reasons.code(reason))
        b["t0"].append(t0)
        b["t1"].append(t)
        b["source"].append(self._sources.code(source))
        b["n_deps"].append(len(deps))
        self._block_deps.extend(deps)
        if self._events == self.limit:
            self._full()

    # -- the result ------------------------------------------------------------------------
    def lanes(self) -> list[Lane]:
        """Returns the trace's lanes: the frontend, then one per worker of each device (virtual)."""
        lanes = [Lane("frontend", LaneRole.FRONTEND)]
        for d in self.devices:
            for k in range(max(self.workers, 1)):
                lanes.append(Lane(f"{d} worker {k}", LaneRole.BACKEND, device=d, virtual=True, stream=k))
        return lanes

    @property
    def ops(self) -> int:
        """Ops recorded so far."""
        return len(self._rows) // _ROW.size

    @property
    def recorded(self) -> int:
        """Events (ops + blocks) recorded so far."""
        return self._events

    def nbytes(self) -> int:
        """Bytes the recorded columns hold (the tables of names and labels not counted)."""
        cols = (self._deps, self._codes, *self._blocks.values(), self._block_deps)
        return len(self._rows) + sum(c.buffer_info()[1] * c.itemsize for c in cols)

    def trace(self, **meta: Any) -> Trace:
        """Everything finished so far, as a Trace (ops, their launches, and the frontend's blocks).

        The columns are lean (:class:`d2l_async.trace.Coded`, :class:`~d2l_async.trace.Ragged`):
        strings by code, tuples flat, decoded when first read -- about 100 bytes per row, not 370.
        """
        rows = bytes(self._rows)  # first (one C copy): its rows' deps and labels are already stored
        n = len(rows) // _ROW.size
        rec = np.frombuffer(rows, dtype=_ROW_DTYPE, count=n)
        t0 = self.t0
        flags = rec["flags"].astype(np.int32)
        # the fields, each as compact as it can be; the packed rows are dropped before the columns
        # are built, and every field after the last column that needs it: the peak counts
        f: dict[str, np.ndarray] = {
            "ids": rec["id"].copy(), "where": rec["where"].astype(np.int32), "kind": (flags >> 1) & 1,
            "failed": (flags & 1).astype(bool), "n_reads": rec["n_reads"].astype(np.int32), "n_writes": flags >> 2,
            "name": rec["name"].astype(np.int32), "n_deps": rec["n_deps"].astype(np.int32),
            "nbytes": rec["nbytes"].copy(), "tl": rec["t_launch"] - t0, "ti": rec["t_issue"] - t0,
            "ts": rec["t_start"] - t0, "te": rec["t_end"] - t0}
        op_src, src_text = self._op_sources(rec["file"], rec["line"])
        f["op_src"] = op_src.astype(np.int32)
        del rec, rows, flags, op_src
        blocks = {k: _numpy(c) for k, c in self._blocks.items()}
        nb = min(len(c) for c in blocks.values())
        blocks = {k: c[:nb] for k, c in blocks.items()}
        stopped = self._events >= self.limit
        nm = 1 if stopped else 0
        ids = f["ids"]
        next_id = int(ids.max()) + 1 if n else 0
        failed_ops = sorted(ids[f.pop("failed")].tolist())
        lanes_w = max(self.workers, 1)
        lane_names = [f"{d} worker {k}" for d in self.devices for k in range(lanes_w)]
        names = list(self._names.values)
        nn = len(names)
        reasons = list(self._reasons.values)
        block_src = [format_source(s) for s in self._sources.values]
        marker = f"recording stopped at {self.limit:,} events"

        def coded(parts: list, categories: list, dtype: Any = np.int32) -> Coded:
            return Coded(np.concatenate([np.asarray(p, dtype=dtype) for p in parts]), _objects(categories))

        def const(k: int, value: int) -> np.ndarray:
            return np.full(k, value, np.int32)

        f_lane, f_dev = len(lane_names), len(self.devices)
        label = _label_decoder(self._labels.values, self.label_prefix)
        zeros = np.zeros(n + nb + nm, np.int32)
        t_stop = np.array([self.stopped_at - t0] * nm)

        def labels(which: str) -> Ragged:
            # per op, its read labels then its written ones, flat: split by the two counts
            nr, nw = f["n_reads"], f["n_writes"]
            starts = np.concatenate([np.zeros(1, np.int64), np.cumsum(nr + nw, dtype=np.int64)[:-1]])
            counts, first = (nr, starts) if which == "reads" else (nw, starts + nr)
            return Ragged(np.concatenate([counts, zeros]), _numpy(self._codes)[segments(first, counts)], label)

        # one builder per column, run in this order once the rows' order is known, and sorted at
        # once; after each, the fields no later column needs are dropped (the last item)
        builders: list[tuple[str, Callable[[], Any], tuple[str, ...]]] = [
            ("end", lambda: np.concatenate([f["te"], f["ti"], blocks["t1"] - t0, t_stop]), ("te",)),
            ("issue", lambda: np.concatenate([f["ti"], f["tl"], np.full(nb, math.nan), t_stop]), ("ti", "tl")),
            ("nbytes", lambda: np.concatenate([f["nbytes"], np.zeros(n + nb + nm, np.int64)]), ("nbytes",)),
            ("flow", lambda: np.concatenate([ids, ids, np.full(nb + nm, -1, np.int64)]), ()),
            ("lane", lambda: coded([(f["where"] >> 16) * lanes_w + (f["where"] & 0xFFFF), const(n, f_lane),
                                    const(nb, f_lane), const(nm, f_lane)], lane_names + ["frontend"]), ()),
            ("device", lambda: coded([f["where"] >> 16, f["where"] >> 16, const(nb, f_dev), const(nm, f_dev)],
                                     list(self.devices) + [""]), ("where",)),
            ("kind", lambda: coded([f["kind"], const(n, 2), const(nb, 3), const(nm, 4)],
                                   [Kind.OP.value, Kind.COPY.value, Kind.LAUNCH.value, Kind.BLOCK.value,
                                    Kind.RUNTIME.value], np.uint8), ("kind",)),
            ("name", lambda: coded([f["name"], f["name"] + nn, blocks["reason"].astype(np.int32) + 2 * nn,
                                    const(nm, 2 * nn + len(reasons))],
                                   names + [f"push {x}" for x in names] + reasons + [marker]), ("name",)),
            ("source", lambda: coded([f["op_src"], f["op_src"], blocks["source"].astype(np.int32) + len(src_text),
                                      const(nm, len(src_text) + len(block_src))], src_text + block_src + [""]),
             ("op_src",)),
            ("reason", lambda: coded([const(2 * n, 0), blocks["reason"].astype(np.int32) + 1,
                                      const(nm, len(reasons) + 1)], [""] + reasons + ["recording stopped"]), ()),
            ("deps", lambda: Ragged(np.concatenate([f["n_deps"], zeros[:n], blocks["n_deps"].astype(np.int32),
                                                    zeros[:nm]]),
                                    np.concatenate([_numpy(self._deps), _numpy(self._block_deps)])), ("n_deps",)),
            ("reads", lambda: labels("reads"), ()),
            ("writes", lambda: labels("writes"), ("n_reads", "n_writes")),
        ]
        total = 2 * n + nb + nm
        all_ids = np.concatenate([ids, np.arange(next_id, next_id + n + nb + nm, dtype=np.int64)])
        start = np.concatenate([f.pop("ts"), f["tl"], blocks["t0"] - t0, t_stop])
        order = np.lexsort((all_ids, start))
        if total < 2**31:
            order = order.astype(np.int32)
        columns: dict[str, Any] = {"id": all_ids[order], "start": start[order]}
        del all_ids, start
        for name, build, done in builders:
            col = build()
            columns[name] = col.take(order) if isinstance(col, (Coded, Ragged)) else col[order]
            del col
            for field in done:
                del f[field]
        for col in columns.values():
            if isinstance(col, np.ndarray):
                col.flags.writeable = False
        info: dict[str, Any] = {
            "source": "engine", "virtual": True, "engine": self.engine, "workers": self.workers,
            "devices": list(self.devices), "failed_ops": failed_ops,
            "device": (f"virtual devices {', '.join(self.devices)}: threads on this CPU, "
                       f"{self.workers} worker(s) each" if self.workers else
                       f"virtual devices {', '.join(self.devices)}: ops run inline on the frontend thread"),
            "recording": {"limit": self.limit, "recorded": self._events, "dropped": self.dropped,
                          "stopped": stopped}}
        if stopped:
            info["recording_stopped"] = (f"{marker}; {self.dropped:,} later ops were not recorded "
                                         "(create the engine with a larger record=N, or call reset_trace())")
        info.update(meta)
        return Trace.from_lean({k: columns[k] for k in _COLUMN_ORDER}, self.lanes(), info)

    def _op_sources(self, file: np.ndarray, line: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """Each op's source line: a code per op into texts formatted once per distinct (file, line)."""
        if not len(file):
            return np.zeros(0, np.int64), []
        key = file.astype(np.int64) << 32 | line.astype(np.int64)
        uniq, inverse = np.unique(key, return_inverse=True)
        files = self._files.values
        text = [format_source((files[k >> 32], k & 0xFFFFFFFF)) if files[k >> 32] else "" for k in uniq.tolist()]
        return inverse.reshape(-1), text


_COLUMN_ORDER = ("id", "lane", "kind", "name", "issue", "start", "end", "device", "deps", "reads", "writes", "flow",
                 "source", "reason", "nbytes")


def _label_decoder(names: list, prefix: str = "a") -> Callable[[int], str]:
    """A label's code to its text: an engine-made label "a17" is stored as ~17; a name by its code."""
    return lambda c: f"{prefix}{-c - 1}" if c < 0 else names[c]


def _numpy(column: array) -> np.ndarray:
    """A numpy copy of a column (slicing copies at once, under the GIL: workers may be appending;
    a view would stop them from growing the column)."""
    return np.frombuffer(column[: len(column)], dtype=column.typecode)


def _objects(values: Sequence[Any]) -> np.ndarray:
    """A 1-d object array holding ``values`` as they are (tuples stay tuples)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out
