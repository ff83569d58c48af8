"""The trace model: one table of events on lanes, whatever recorded them.

Every figure of the chapter draws the same kind of data, whether it came from the CPU engine
(``eng.trace()``), from a live CUDA run captured with ``torch.profiler``, or from a Chrome-trace
JSON file a reader recorded on their own training loop.

A trace is a set of **lanes** and a table of **events**::

    frontend lane  (the Python thread that issues work)
      |  push / cudaLaunchKernel ----------.         issue: when the frontend handed it over
      |  [ block: print(z) at line 12 ]    | flow
    backend lanes  (engine workers, virtual devices, CUDA streams)
      |            queued ...  [ op / kernel ]       start, end: when the backend ran it

Each event has:

=========  =====================================================================================
column     meaning
=========  =====================================================================================
id         integer, unique in the trace
lane       name of the lane the event sits on (see :class:`Lane`)
kind       one of :class:`Kind` (op, launch, kernel, copy, memset, block, runtime, python)
name       what ran (``"mul"``, ``"volta_sgemm_128x64_nn"``, ``"print"``)
issue      seconds: when the frontend pushed/launched it (NaN when unknown or not applicable)
start      seconds: when it began on its lane
end        seconds: when it ended on its lane
device     ``"cpu:0"``, ``"cuda:0"``, ... (``""`` when unknown)
deps       tuple of event ids this event waited for (dependency edges)
reads      tuple of array labels read (engine ops)
writes     tuple of array labels written (engine ops)
flow       correlation id linking a launch to its kernel (``-1`` when none)
source     frontend source line that issued or caused it (``"cell 3, line 12: print(z)"``)
reason     for blocks: why the frontend waited (``"print"``, ``"waitall"``, ``"full queue"``)
nbytes     bytes of memory the event's output holds (0 when unknown)
=========  =====================================================================================

Times are seconds relative to the trace start.  The table is stored column-wise (numpy arrays), so a
109k-event profiler trace stays fast; an engine's trace keeps its strings by code and its tuples
flat until a column is first read (:mod:`._columns`, 85 bytes a row, not 370).
:meth:`Trace.event` and :meth:`Trace.events` give frozen
:class:`Event` records for the slow, readable path.

This module uses only the standard library and numpy: ``import d2l_async.trace`` loads neither
torch, plotly nor ipywidgets, so traces can be analysed anywhere.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ._columns import LeanColumns
from ._stack import PYTHON_GROUP

__all__ = ["Kind", "LaneRole", "Lane", "Event", "Trace", "TraceError", "COLUMNS"]


class TraceError(ValueError):
    """A trace could not be built or read; the message names the file and the problem."""


class Kind(str, enum.Enum):
    """What an event is.  Values are plain strings so columns stay cheap to compare."""

    OP = "op"  # a framework/engine op (backend), or a cpu_op on the frontend
    LAUNCH = "launch"  # the frontend handing work to a backend lane (cudaLaunchKernel, push)
    KERNEL = "kernel"  # GPU compute on a stream
    COPY = "copy"  # data movement between devices (gpu_memcpy, engine ``.to()``)
    MEMSET = "memset"  # gpu_memset
    BLOCK = "block"  # the frontend waiting: a barrier, an implicit blocker, a full queue
    RUNTIME = "runtime"  # other runtime calls on the frontend (cudaMalloc, cudaEventRecord, ...)
    PYTHON = "python"  # a Python function on the frontend's call stack (with_stack=True traces)


#: Kinds that do work on a backend lane (these are what queue up).
BACKEND_KINDS = (Kind.OP.value, Kind.KERNEL.value, Kind.COPY.value, Kind.MEMSET.value)


class LaneRole(str, enum.Enum):
    FRONTEND = "frontend"
    BACKEND = "backend"


@dataclass(frozen=True)
class Lane:
    """A row of the timeline.

    Attributes:
        name: unique label, e.g. ``"frontend"``, ``"cpu:1 worker 0"``, ``"cuda:0 stream 7"``.
        role: frontend (issues work, blocks) or backend (runs work).
        device: the device the lane belongs to (``""`` for the frontend).
        virtual: True for the engine's virtual devices (a thread pretending to be a device); a
            figure must say so.
        stream: the CUDA stream number or engine worker index (``-1`` when not applicable).
        group: the lane group the lane is drawn in (``""``: none).  A trace merged from several
            ranks has one group per rank, ``"rank 0"``, ``"rank 1"``, ... (see
            :func:`~d2l_async.trace.merge_ranks`); groups are drawn one above the other.
        rank: the distributed rank the lane belongs to (``-1``: not a distributed trace).
    """

    name: str
    role: LaneRole
    device: str = ""
    virtual: bool = False
    stream: int = -1
    group: str = ""
    rank: int = -1

    @property
    def is_frontend(self) -> bool:
        return self.role is LaneRole.FRONTEND


@dataclass(frozen=True)
class Event:
    """One row of the trace, as a readable record (see the module docstring for each field)."""

    lane: str
    kind: Kind | str
    name: str
    start: float
    end: float
    issue: float = math.nan
    device: str = ""
    id: int = -1
    deps: tuple[int, ...] = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    flow: int = -1
    source: str = ""
    reason: str = ""
    nbytes: int = 0

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def queued(self) -> float:
        """Seconds between issue and start (NaN when the issue time is unknown)."""
        return self.start - self.issue


#: Column name -> numpy dtype of its array.
COLUMNS: dict[str, Any] = {
    "id": np.int64,
    "lane": object,
    "kind": object,
    "name": object,
    "issue": np.float64,
    "start": np.float64,
    "end": np.float64,
    "device": object,
    "deps": object,
    "reads": object,
    "writes": object,
    "flow": np.int64,
    "source": object,
    "reason": object,
    "nbytes": np.int64,
}
#: Defaults for columns a source does not fill.
_DEFAULTS: dict[str, Any] = {
    "lane": "", "kind": Kind.OP.value, "name": "", "issue": math.nan, "start": math.nan,
    "end": math.nan, "device": "", "deps": (), "reads": (), "writes": (), "flow": -1,
    "source": "", "reason": "", "nbytes": 0,
}


def _as_column(name: str, values: Any, n: int) -> np.ndarray:
    dtype = COLUMNS[name]
    if dtype is object:
        if isinstance(values, np.ndarray) and values.dtype == object and values.shape == (n,):
            return values.copy()  # already a column (the engine's recorder builds these): no per-element loop
        out = np.empty(n, dtype=object)
        for i, v in enumerate(values):  # element-wise: tuples must stay tuples, not become axes
            out[i] = v
        return out
    return np.asarray(values, dtype=dtype).reshape(n)


def _default_column(name: str, n: int) -> np.ndarray:
    """A column of ``n`` copies of the column's default (a tuple default stays one tuple per row)."""
    dtype = COLUMNS[name]
    out = np.empty(n, dtype=dtype)
    out.fill(_DEFAULTS[name])
    return out


@dataclass(frozen=True, eq=False)
class Trace:
    """Events on lanes, stored column-wise.  Immutable: filters return new traces.

    Build one with :meth:`from_events` (records) or :meth:`from_columns` (arrays); load one with
    :func:`~d2l_async.trace.read_chrome_trace` (one file) or :func:`~d2l_async.trace.read_trace_dir`
    (a folder of per-rank files); get one from ``eng.trace()`` or ``d2l_async.capture``; write one with
    :func:`~d2l_async.trace.write_chrome_trace` or :func:`~d2l_async.trace.write_trace_dir`.

    Attributes:
        lanes: lanes in display order (frontend lanes first).
        columns: column name -> numpy array, all of the same length (see :data:`COLUMNS`).
        meta: free-form facts about where the trace came from: ``source`` (``"engine"``,
            ``"cuda"``, ``"chrome"``), ``device`` (a one-line description of the machine),
            ``virtual`` (bool), ``path``, ``unmatched_launches``, ``unmatched_gpu_ops``, ...
    """

    lanes: tuple[Lane, ...]
    columns: Mapping[str, np.ndarray]
    meta: Mapping[str, Any] = field(default_factory=dict)

    # -- construction ----------------------------------------------------------------------
    def __post_init__(self) -> None:
        if not isinstance(self.lanes, (tuple, list)) or not all(isinstance(lane, Lane) for lane in self.lanes):
            raise TypeError(f"lanes must be a tuple of d2l_async.trace.Lane, got {type(self.lanes).__name__} "
                            f"{self.lanes!r:.80}")
        if not isinstance(self.columns, Mapping):
            raise TypeError(f"columns must be a dict of column name -> array, got {type(self.columns).__name__} "
                            f"{self.columns!r:.80}; build a trace with Trace.from_events or Trace.from_columns")
        missing = set(COLUMNS) - set(self.columns)
        if missing:
            raise TraceError(f"columns is missing {sorted(missing)}: from_columns fills in the defaults")
        lean = isinstance(self.columns, LeanColumns)  # lean columns are not decoded here
        lengths = ({len(self.columns.raw(k)) for k in self.columns} if lean
                   else {len(v) for v in self.columns.values()})
        if len(lengths) > 1:
            raise TraceError(f"trace columns have different lengths: {sorted(lengths)}")
        known = {lane.name for lane in self.lanes}
        if len(known) != len(self.lanes):
            raise TraceError("lane names must be unique")
        if len(self):
            names = self.columns.lane_names() if lean else {str(x) for x in set(self.columns["lane"].tolist())}
            unknown = names - known
            if unknown:
                raise TraceError(f"events on undeclared lanes {sorted(unknown)}; declare them in lanes")

    @classmethod
    def from_columns(
        cls,
        columns: Mapping[str, Any],
        lanes: Sequence[Lane],
        meta: Mapping[str, Any] | None = None,
    ) -> "Trace":
        """Build from arrays; omitted columns get their defaults, ``id`` defaults to 0..n-1."""
        given = {k: v for k, v in columns.items() if v is not None}
        unknown = set(given) - set(COLUMNS)
        if unknown:
            raise TraceError(f"unknown trace columns {sorted(unknown)}; known: {list(COLUMNS)}")
        n = len(given["start"]) if "start" in given else 0
        cols: dict[str, np.ndarray] = {}
        for name in COLUMNS:
            if name in given:
                cols[name] = _as_column(name, given[name], n)
            elif name == "id":
                cols[name] = np.arange(n, dtype=np.int64)
            else:
                cols[name] = _default_column(name, n)
        for col in cols.values():
            col.flags.writeable = False
        return cls(tuple(_order_lanes(lanes)), cols, dict(meta or {}))

    @classmethod
    def from_lean(cls, columns: Mapping[str, Any], lanes: Sequence[Lane], meta: Mapping[str, Any] | None = None,
                  ) -> "Trace":
        """Build from lean columns (:mod:`._columns`: categorical strings, flat tuples) as they are,
        without copying or decoding them; a column is decoded the first time it is read."""
        n = len(columns["start"])
        return cls(tuple(_order_lanes(lanes)), LeanColumns(columns, n), dict(meta or {}))

    @classmethod
    def from_events(
        cls,
        events: Iterable[Event],
        lanes: Sequence[Lane] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> "Trace":
        """Build from :class:`Event` records.  Lanes not declared are inferred (backend roles,
        except a lane named ``"frontend"``).  Events with ``id == -1`` get their row index."""
        events = list(events)
        cols: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        for i, ev in enumerate(events):
            for name in COLUMNS:
                value = getattr(ev, name)
                if name == "kind":
                    value = Kind(value).value
                elif name == "id" and value == -1:
                    value = i
                cols[name].append(value)
        declared = list(lanes or [])
        names = {lane.name for lane in declared}
        for ev in events:
            if ev.lane not in names:
                names.add(ev.lane)
                role = LaneRole.FRONTEND if ev.lane == "frontend" else LaneRole.BACKEND
                declared.append(Lane(ev.lane, role, device=ev.device if role is LaneRole.BACKEND else ""))
        return cls.from_columns(cols, declared, meta)

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.columns["start"])

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.columns[name]
        except KeyError:
            raise TraceError(f"no column {name!r}; columns are {list(COLUMNS)}") from None

    def lane(self, name: str) -> Lane:
        for lane in self.lanes:
            if lane.name == name:
                return lane
        raise TraceError(f"no lane {name!r}; lanes are {[l.name for l in self.lanes]}")

    @property
    def frontend_lanes(self) -> tuple[Lane, ...]:
        return tuple(l for l in self.lanes if l.role is LaneRole.FRONTEND)

    @property
    def backend_lanes(self) -> tuple[Lane, ...]:
        return tuple(l for l in self.lanes if l.role is LaneRole.BACKEND)

    @property
    def is_virtual(self) -> bool:
        """True when any backend lane is a virtual device (engine threads, not hardware)."""
        return any(l.virtual for l in self.backend_lanes) or bool(self.meta.get("virtual", False))

    @property
    def duration(self) -> float:
        """Seconds from the earliest issue/start to the latest end (0 for an empty trace)."""
        if not len(self):
            return 0.0
        lo = np.nanmin(np.concatenate([self["start"], self["issue"]]))
        return float(np.nanmax(self["end"]) - lo)

    def event(self, i: int) -> Event:
        """Row ``i`` as an :class:`Event`."""
        n = len(self)
        if not -n <= i < n:
            raise TraceError(f"event index {i} out of range for a trace of {n} events")
        row = {name: self.columns[name][i] for name in COLUMNS}
        row = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}
        row["kind"] = Kind(row["kind"])
        return Event(**row)

    def events(self) -> Iterator[Event]:
        for i in range(len(self)):
            yield self.event(i)

    def to_frame(self):  # -> pandas.DataFrame
        """The events as a pandas DataFrame (one row per event)."""
        import pandas as pd

        return pd.DataFrame({name: self.columns[name] for name in COLUMNS})

    # -- deriving --------------------------------------------------------------------------
    def filter(self, mask: np.ndarray) -> "Trace":
        """Rows where ``mask`` is True, keeping all lanes and the meta."""
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (len(self),):
            raise TraceError(f"mask has shape {mask.shape}, expected ({len(self)},)")
        if isinstance(self.columns, LeanColumns):  # stays lean: nothing decoded to filter it
            return Trace(self.lanes, self.columns.take(np.nonzero(mask)[0]), self.meta)
        cols = {k: v[mask] for k, v in self.columns.items()}
        return Trace.from_columns(cols, self.lanes, self.meta)

    def where(self, *, kind: str | Iterable[str] | None = None, lane: str | Iterable[str] | None = None) -> "Trace":
        """Events of the given kind(s) and/or on the given lane(s)."""
        mask = np.ones(len(self), dtype=bool)
        if kind is not None:
            kinds = [Kind(kind).value] if isinstance(kind, str) else [Kind(k).value for k in kind]
            mask &= np.isin(self["kind"], kinds)
        if lane is not None:
            lanes = [lane] if isinstance(lane, str) else list(lane)
            for name in lanes:
                self.lane(name)  # clear error for an unknown lane
            mask &= np.isin(self["lane"], lanes)
        return self.filter(mask)

    def with_meta(self, **meta: Any) -> "Trace":
        return Trace(self.lanes, self.columns, {**self.meta, **meta})

    @property
    def ranks(self) -> tuple[int, ...]:
        """The distributed ranks whose lanes the trace holds, in display order (``()`` if none)."""
        return tuple(dict.fromkeys(l.rank for l in self.lanes if l.rank >= 0))

    def __repr__(self) -> str:
        src = self.meta.get("source", "?")
        return (
            f"<Trace {len(self)} events on {len(self.lanes)} lanes "
            f"({len(self.frontend_lanes)} frontend), {self.duration:.6f} s, source={src}>"
        )


def _order_lanes(lanes: Iterable[Lane]) -> list[Lane]:
    """Lane groups in first-seen order (one rank above the next); within a group, frontend lanes
    first, then the group's Python call-stack lanes (group ``"<group> · python call stack"``),
    then backend lanes; the given order is kept within each."""
    lanes = list(lanes)

    def base(group: str) -> str:
        return group[: -len(PYTHON_GROUP)].removesuffix(" · ") if group.endswith(PYTHON_GROUP) else group

    out: list[Lane] = []
    for group in dict.fromkeys(base(l.group) for l in lanes):
        members = [l for l in lanes if l.group == group]
        stack = [l for l in lanes if l.group != group and base(l.group) == group]
        out += [l for l in members if l.role is LaneRole.FRONTEND] + stack
        out += [l for l in members if l.role is not LaneRole.FRONTEND]
    return out
