"""Reading a Chrome-trace file into per-field columns, lean on memory.

A profiler trace of a real training step is often 100–300 MB of JSON with a million events, most
of whose fields (input shapes, occupancy, ``External id`` ...) no figure uses.  Parsed into a
million Python dicts it costs ~1.2 KB per event: a 200 MB file peaked at 1.3 GiB.  So when
`msgspec <https://jcristharriff.com/msgspec/>`_ is installed (a dependency; the standard library
is the fallback) the reader

1. splits the ``traceEvents`` array into raw byte slices without parsing them,
2. decodes 50,000 events at a time into small typed records holding only the fields it needs
   (the C decoder skips the others without building them), and
3. turns each chunk into compact columns before decoding the next: numbers into numpy arrays,
   strings interned (a million events carry a few thousand distinct names).

Measured with ``benchmarks/bench_trace.py`` on this project's 2-core VM (peak RSS of a fresh
process; CPU seconds, since the machine was shared; 1 Dec 2026, load average 2.5-4.0): the
generated 203 MB, 1.09M-event Kineto file loads and summarises in 4.8 s (2.9 s of CPU) at 522 MB
peak, and the same file spelled as ROCm writes it (hex-string stream ids, issue 17) in 5.2 s
(3.3 s of CPU) at 521 MB (it used to leave the fast path: 1,177 MB, as issue 17 measured).  The decoders
compared on the 109k-event A100 trace (26 MB of JSON, alone in a process): stdlib ``json``
0.59 s and +87 MB, ``msgspec`` untyped 0.59 s and +83 MB, ``msgspec`` typed 0.31 s and +36 MB
(``orjson``, measured earlier at load 1.7: 0.17 s against typed msgspec's 0.16 s, +138 MB):
typed msgspec is both the fastest and the leanest, hence the choice.

Numbers are taken as each vendor spells them, one column at a time (``_convert.py``): ROCm's
``"stream": "0x0"``, a ``ts`` written as a string, an id as ``7.0`` stay on the fast path, and a
value that cannot be converted is a :class:`TraceError` naming the file, the event and the field.
Without msgspec, or when a file does not fit the records at all (an event or ``args`` that is not
an object, a JSON-array file), the standard library's ``json`` parses it and the same columns are
built from dicts: slower, same result.

:class:`Fields` is what both paths produce: for each trace event its ``ph``, ``cat``, ``name``,
``pid``, ``tid``, ``ts``, ``dur`` and the few ``args`` entries used.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np

from ._convert import NUMERIC, NumberColumn
from ._model import TraceError

__all__ = ["Fields", "load_fields", "HAVE_MSGSPEC"]

try:  # optional: the fast, lean path
    import msgspec

    HAVE_MSGSPEC = True
except ImportError:  # pragma: no cover - exercised by forcing the fallback in tests
    msgspec = None
    HAVE_MSGSPEC = False

#: args entries the reader uses
ARGS = ("correlation", "stream", "device", "bytes", "name", "labels", "d2l")


@dataclass
class Fields:
    """Per-event fields in file order.  ``ph``, ``cat``, ``name``, ``pid``, ``tid`` are lists;
    ``ts``, ``dur`` and the numeric ``args`` entries (``correlation``, ``stream``, ``device``,
    ``bytes``) numpy columns with their absent value filled (``ts`` NaN, ids -1, bytes 0); the
    other ``args`` entries lists (None when absent).  ``bad`` holds, per numeric field, the values
    that could not be converted, by event index (see ``_convert.py``)."""

    ph: list[Any]
    cat: list[Any]
    name: list[Any]
    pid: list[Any]
    tid: list[Any]
    ts: np.ndarray
    dur: np.ndarray
    args: dict[str, Any]
    has_args: list[bool]
    top: dict[str, Any]  # the file's top-level fields other than traceEvents
    bad: dict[str, dict[int, Any]] = field(default_factory=dict)


if HAVE_MSGSPEC:
    # numbers are decoded as whatever the file wrote (Any) and converted per column: a string id
    # or time never fails the typed decode (which would send the whole file to the slow path)
    class _Args(msgspec.Struct, gc=False):
        correlation: Any = -1  # absent: the column's default (an explicit null is None)
        stream: Any = -1
        device: Any = -1
        bytes: Any = 0
        name: Any = None
        labels: Any = None
        d2l: Any = None

    class _Ev(msgspec.Struct, gc=False):
        ph: Any = None
        cat: Any = None
        name: Any = ""
        pid: Any = 0
        tid: Any = 0
        ts: Any = math.nan
        dur: Any = 0.0
        args: _Args | None = None

    _DECODER = msgspec.json.Decoder(list[_Ev])
    _RAWS = msgspec.json.Decoder(list[msgspec.Raw])
    _TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])

#: events decoded into records at a time: the records of one chunk (~1 KB each) are turned into
#: compact columns before the next chunk is decoded, so they never all exist at once
CHUNK = 50_000
#: files up to this many bytes of events are decoded in one go (their records fit in ~100 MB)
WHOLE_BYTES = 32_000_000
_ARG_NUMBERS = tuple(k for k in NUMERIC if k not in ("ts", "dur"))


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic (whatever the suffix)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory; for a folder of per-rank traces use "
                         "read_trace_dir / Trace.from_trace_dir") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the file ({exc})") from exc
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(f"{path}: corrupt or truncated gzip data ({exc})") from None
    if not raw or raw.isspace():  # isspace stops at the first other byte (strip would copy)
        raise TraceError(f"{path}: the file is empty ({len(raw)} bytes): no trace was written to it")
    return raw


def load_fields(path: Path, *, fast: bool | None = None) -> Fields:
    """Parse ``path`` into :class:`Fields` (msgspec when available and ``fast`` is not False)."""
    raw = read_bytes(path)
    if (fast is None or fast) and HAVE_MSGSPEC:
        out = _fast(raw)
        if out is not None:
            return out
        if fast:
            raise TraceError(f"{path}: the file does not fit the fast reader's records")
    return _slow(raw, path)


def _fast(raw: bytes) -> Fields | None:
    """msgspec typed decoding, chunk by chunk, into compact columns: strings interned (one object
    per distinct name), numbers in numpy columns.  None when the file's events or ``args`` are
    not objects (the generic path gives the precise error message)."""
    try:
        top = _TOP.decode(raw)
        if "traceEvents" not in top:
            return None
        events_raw = top.pop("traceEvents")
        whole = len(events_raw) <= WHOLE_BYTES  # small file: one decode, no slicing
        raws = _DECODER.decode(events_raw) if whole else _RAWS.decode(events_raw)
        del events_raw
        rest = {k: msgspec.json.decode(v) for k, v in top.items()}
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError):
        return None
    n = len(raws)
    strs: dict[Any, Any] = {}
    ph: list[Any] = []
    cat: list[Any] = []
    name: list[Any] = []
    pid: list[Any] = []
    tid: list[Any] = []
    nums = {k: NumberColumn(k, n) for k in NUMERIC}
    objs: dict[str, list[Any]] = {"name": [], "labels": [], "d2l": []}
    has: list[bool] = []
    empty = _Args()
    put = strs.setdefault
    try:
        for lo in range(0, n, CHUNK):
            hi = min(lo + CHUNK, n)
            events = raws[lo:hi] if whole else _DECODER.decode(b"[" + b",".join(raws[lo:hi]) + b"]")
            ph += [put(e.ph, e.ph) for e in events]
            cat += [put(e.cat, e.cat) for e in events]
            name += [put(e.name, e.name) for e in events]
            pid += [put(e.pid, e.pid) for e in events]
            tid += [put(e.tid, e.tid) for e in events]
            nums["ts"].put(lo, [e.ts for e in events])
            nums["dur"].put(lo, [e.dur for e in events])
            args = [e.args for e in events]
            has += [a is not None for a in args]
            args = [empty if a is None else a for a in args]
            for key in _ARG_NUMBERS:
                nums[key].put(lo, list(map(attrgetter(key), args)))
            objs["name"] += [a.name for a in args]
            objs["labels"] += [a.labels for a in args]
            objs["d2l"] += [a.d2l for a in args]
            del events, args
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None  # an event or its args is not an object: the generic path says which
    except TypeError:  # an unhashable name/pid/tid (a list): the generic path reports it
        return None
    del raws
    return _fields(ph, cat, name, pid, tid, nums, objs, has, rest)


def _fields(ph, cat, name, pid, tid, nums: dict[str, NumberColumn], objs, has, top) -> Fields:
    bad = {k: c.bad for k, c in nums.items() if c.bad}
    args = {**{k: nums[k].values for k in _ARG_NUMBERS}, **objs}
    return Fields(ph, cat, name, pid, tid, nums["ts"].values, nums["dur"].values, args, has, top, bad)


def _slow(raw: bytes, path: Path) -> Fields:
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise TraceError(f"{path}: JSON nested too deeply to be a Chrome trace") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(doc, list):  # the JSON-array form of the format
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        got = type(doc).__name__ if not isinstance(doc, dict) else f"keys {sorted(doc)[:6]}"
        raise TraceError(f"{path}: not a Chrome trace: expected an object with a 'traceEvents' list, got {got}")
    events = doc.pop("traceEvents")
    if set(map(type, events)) - {dict}:
        i = next(i for i, e in enumerate(events) if type(e) is not dict)
        raise TraceError(f"{path}: traceEvents[{i}] is a {type(events[i]).__name__}, expected an object")
    args = [e.get("args") for e in events]
    for i, a in enumerate(args):
        if a is not None and type(a) is not dict:
            raise TraceError(f"{path}: traceEvents[{i}].args is a {type(a).__name__}, expected an object")
    has = [a is not None for a in args]
    none: dict[str, Any] = {}
    args = [a if a is not None else none for a in args]
    n = len(events)
    nums = {k: NumberColumn(k, n) for k in NUMERIC}
    for key in ("ts", "dur"):
        default = NUMERIC[key][1]
        nums[key].put(0, [e.get(key, default) for e in events])
    for key in _ARG_NUMBERS:
        default = NUMERIC[key][1]
        nums[key].put(0, [a.get(key, default) for a in args])
    objs = {key: [a.get(key) for a in args] for key in ARGS if key not in NUMERIC}
    return _fields([e.get("ph") for e in events], [e.get("cat") for e in events],
                   [e.get("name", "") for e in events], [e.get("pid", 0) for e in events],
                   [e.get("tid", 0) for e in events], nums, objs, has, doc)
