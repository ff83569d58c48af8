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

    Attributes:
        field: the field's name (``"ts"``, ``"stream"``, ...).
        values: float64 (times) or int64 array; an object array of Python ints for a stream or
            device column holding a value beyond int64.
        bad: event index -> the value as written, for values that could not be converted.
    """

    def __init__(self, field: str, n: int) -> None:
        self.field = field
        self.is_time, self.default, self.wide = NUMERIC[field]
        self.values = np.empty(n, dtype=np.float64 if self.is_time else np.int64)
        self.bad: dict[int, Any] = {}

    def put(self, lo: int, vals: list[Any]) -> None:
        """Set events ``lo .. lo + len(vals)`` from their values as decoded (None: absent)."""
        types = set(map(type, vals))
        plain = {float, int} if self.is_time else {int}
        if types <= plain:
            try:
                self.values[lo:lo + len(vals)] = vals
                return
            except OverflowError:  # a number beyond int64 (or float): convert one by one
                pass
        self._convert(lo, vals)

    def _convert(self, lo: int, vals: list[Any]) -> None:
        conv = _to_float if self.is_time else _to_int
        out = []
        for i, v in enumerate(vals):
            x = self.default if v is None else conv(v)
            if x is None or (not self.is_time and not self._fits(x)):
                self.bad[lo + i] = v
                x = self.default
            out.append(x)
        if not self.is_time and self.values.dtype != object and any(not _I64[0] <= x <= _I64[1] for x in out):
            self.values = self.values.astype(object)  # rare: a stream id past 2**63 keeps its value
        self.values[lo:lo + len(out)] = out

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
        hit = sorted(wrong.keys() & set(rows))
        if hit:
            i = hit[0]
            label = field if field in ("ts", "dur") else f"args.{field}"
            more = f" ({len(hit) - 1} more events like it)" if len(hit) > 1 else ""
            raise TraceError(f"{path}: traceEvents[{i}] (name {names[i]!r}) has {label} = {wrong[i]!r}, "
                             f"which is not {_WHAT[NUMERIC[field][0]]}{more}")
