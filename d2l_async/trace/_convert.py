"""The numbers of a trace file, as each vendor spells them, converted one column at a time.

Kineto's own files write times and ids as JSON numbers, but not every writer does::

    ROCm 6.2 (some builds)    "args": {"stream": "0x0", "device": 2}         an id as a hex string
    hand-edited / converted   "ts": "5226823541812.46"                       a time as a string
    older exporters           "correlation": 118.0                           an id as a float

The reader builds each numeric field (``ts``, ``dur``, ``args.correlation``, ``args.stream``,
``args.device``, ``args.bytes``) as one numpy column.  :class:`NumberColumn` fills it a chunk at a
time: a chunk of plain numbers (the common case) is assigned in one numpy call; a chunk holding
anything else is converted value by value with the rules below, so one odd value never sends the
whole file to a slower path.

==============  ==========================================================================
field           accepted
==============  ==========================================================================
times           int or float; a string that ``float()`` reads (``"12.5"``, ``"1e3"``)
ids, bytes      int; an integral float (``7.0``); a decimal (``"7"``) or hex (``"0x7"``) string
stream, device  any 64-bit value, signed or unsigned (beyond int64 the column holds Python ints)
==============  ==========================================================================

Anything else (``"soon"``, ``true``, a list, ``2.5`` as an id, a number beyond 64 bits) is never
guessed: the column keeps its "absent" value there and remembers the value as written
(:attr:`NumberColumn.bad`); the reader raises a :class:`~d2l_async.trace.TraceError` naming the
file, the event and the field when that event is one it uses (:func:`check_values`).  Events the
reader skips may hold anything.
"""

from __future__ import annotations

import math
from array import array
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ._model import TraceError

__all__ = ["NUMERIC", "NumberColumn", "check_values"]

#: numeric field -> (is a time, value when absent, accepts any 64-bit value)
NUMERIC: dict[str, tuple[bool, Any, bool]] = {
    "ts": (True, math.nan, False), "dur": (True, 0.0, False),
    "correlation": (False, -1, False), "stream": (False, -1, True), "device": (False, -1, True),
    "bytes": (False, 0, False),
}
_I64 = (-(2**63), 2**63 - 1)
_U64_MAX = 2**64 - 1
_WHAT = {True: "a number of microseconds (a number or a numeric string)",
         False: "an integer (a number, or a decimal or 0x-hex string) within 64 bits"}


def _to_float(v: Any) -> float | None:
    t = type(v)
    if t is float:
        return v
    if t is int:
        try:
            return float(v)
        except OverflowError:
            return None
    if t is str:
        try:
            return float(v)
        except ValueError:
            return None
    return None  # bool, list, dict, ...


def _to_int(v: Any) -> int | None:
    t = type(v)
    if t is int:
        return v
    if t is float:
        return int(v) if v.is_integer() else None
    if t is str:
        s = v.strip()
        try:
            if s.lstrip("+-")[:2].lower() == "0x":
                return int(s, 16)
            return int(s, 10)
        except ValueError:
            f = _to_float(s)
            return int(f) if f is not None and f.is_integer() else None
    return None


class NumberColumn:
    """One numeric field of every event, filled chunk by chunk (see the module docstring).

    The column grows in place as chunks come (no count of events is needed first), and a field
    no event has costs nothing: until a chunk holds a value other than the field's absent one,
    no storage exists, and a column that never gets one is that value shared by every row.

    Attributes:
        field: the field's name (``"ts"``, ``"stream"``, ...).
        bad: event index -> the value as written, for values that could not be converted.
    """

    def __init__(self, field: str) -> None:
        self.field = field
        self.is_time, self.default, self.wide = NUMERIC[field]
        self.dtype = np.float64 if self.is_time else np.int64
        self.n = 0
        self._store: array | list | None = None  # None: every row so far is the default
        self.bad: dict[int, Any] = {}

    def append(self, vals: list[Any]) -> None:
        """Add the values of the next ``len(vals)`` events as decoded (None: absent)."""
        lo, k = self.n, len(vals)
        self.n += k
        if not k:
            return
        types = set(map(type, vals))
        plain = {float, int} if self.is_time else {int}
        chunk = None
        if types <= plain:
            try:
                chunk = np.asarray(vals, dtype=self.dtype)
            except OverflowError:  # a number beyond int64 (or float): convert one by one
                pass
        if chunk is None:
            chunk = self._convert(lo, vals)
        if self._store is None:
            same = np.isnan(chunk).all() if self.is_time and math.isnan(self.default) else (
                chunk.dtype != object and bool((chunk == self.default).all()))
            if same:
                return
            self._store = array("d" if self.is_time else "q", [self.default]) * lo
        if chunk.dtype == object and isinstance(self._store, array):  # rare: a stream id past 2**63
            self._store = self._store.tolist()
        if isinstance(self._store, list):
            self._store.extend(chunk.tolist())
        else:
            self._store.frombytes(memoryview(np.ascontiguousarray(chunk)).cast("B"))

    def finish(self, n: int) -> np.ndarray:
        """The column of ``n`` rows: float64 (times) or int64, read-only; an object array of Python
        ints for a stream or device column holding a value beyond int64."""
        if self._store is None:
            out = np.broadcast_to(np.array(self.default, dtype=self.dtype), (n,))
        elif isinstance(self._store, list):
            out = np.empty(n, dtype=object)
            out[:] = self._store
        else:
            out = np.frombuffer(self._store, dtype=self.dtype) if len(self._store) else np.zeros(0, self.dtype)
        out.flags.writeable = False
        return out

    def _convert(self, lo: int, vals: list[Any]) -> np.ndarray:
        conv = _to_float if self.is_time else _to_int
        out = []
        for i, v in enumerate(vals):
            x = self.default if v is None else conv(v)
            if x is None or (not self.is_time and not self._fits(x)):
                self.bad[lo + i] = v
                x = self.default
            out.append(x)
        if not self.is_time and any(not _I64[0] <= x <= _I64[1] for x in out):
            arr = np.empty(len(out), dtype=object)
            arr[:] = out
            return arr
        return np.asarray(out, dtype=self.dtype)

    def _fits(self, x: int) -> bool:
        return _I64[0] <= x <= (_U64_MAX if self.wide else _I64[1])


def check_values(bad: dict[str, dict[int, Any]], used: dict[str, Iterable[int]], names: Any, path: Path) -> None:
    """Raise for the first unconvertible value in an event the reader uses.

    Args:
        bad: field -> {event index: value as written} (:attr:`NumberColumn.bad` of each field).
        used: field -> indices of the events whose value of that field the reader needs.
        names: every event's ``name`` (to say which event).
        path: the file (named in the error).
    """
    for field, rows in used.items():
        wrong = bad.get(field)
        if not wrong:
            continue
        keys = np.fromiter(wrong.keys(), dtype=np.int64, count=len(wrong))
        hit = sorted(keys[np.isin(keys, np.asarray(rows, dtype=np.int64))].tolist())
        if hit:
            i = hit[0]
            label = field if field in ("ts", "dur") else f"args.{field}"
            more = f" ({len(hit) - 1} more events like it)" if len(hit) > 1 else ""
            raise TraceError(f"{path}: traceEvents[{i}] (name {names[i]!r}) has {label} = {wrong[i]!r}, "
                             f"which is not {_WHAT[NUMERIC[field][0]]}{more}")
