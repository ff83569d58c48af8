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
process; CPU seconds, since the machine was shared): the generated 203 MB, 1.09M-event Kineto file
loads and summarises in 4.8 s of CPU at 541 MB peak.  The decoders compared on the 109k-event A100
trace (26 MB of JSON, alone in a process, load average 1.7): stdlib ``json`` 0.32 s and +87 MB,
``orjson`` 0.17 s and +138 MB, ``msgspec`` untyped 0.23 s and +84 MB, ``msgspec`` typed 0.16 s
and +28 MB: typed msgspec is both the fastest and the leanest, hence the choice.

Without msgspec, or when a file does not fit the typed records (a ``ts`` given as a string, an
``args`` that is a list, a number beyond int64), the standard library's ``json`` parses it and the
same columns are built from dicts: slower, same result, and the precise error messages.

:class:`Fields` is what both paths produce: for each trace event its ``ph``, ``cat``, ``name``,
``pid``, ``tid``, ``ts``, ``dur`` and the few ``args`` entries used.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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
    """Per-event fields in file order: lists, or numpy arrays from the fast path (``ts`` NaN and
    numeric ``args`` -1 / 0 when absent; other ``args`` entries None when absent)."""

    ph: list[Any]
    cat: list[Any]
    name: list[Any]
    pid: list[Any]
    tid: list[Any]
    ts: Any  # list or float64 array
    dur: Any
    args: dict[str, list[Any]]
    has_args: list[bool]
    top: dict[str, Any]  # the file's top-level fields other than traceEvents


if HAVE_MSGSPEC:
    class _Args(msgspec.Struct, gc=False):
        correlation: int = -1
        stream: int = -1
        device: int = -1
        bytes: int = 0
        name: Any = None
        labels: Any = None
        d2l: Any = None

    class _Ev(msgspec.Struct, gc=False):
        ph: Any = None
        cat: Any = None
        name: Any = ""
        pid: Any = 0
        tid: Any = 0
        ts: float = math.nan
        dur: float = 0.0
        args: _Args | None = None

    _DECODER = msgspec.json.Decoder(list[_Ev])
    _RAWS = msgspec.json.Decoder(list[msgspec.Raw])
    _TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])

#: events decoded into records at a time: the records of one chunk (~1 KB each) are turned into
#: compact columns before the next chunk is decoded, so they never all exist at once
CHUNK = 50_000
#: files up to this many bytes of events are decoded in one go (their records fit in ~100 MB)
WHOLE_BYTES = 32_000_000
#: numeric args -> (dtype, value when absent)
_NUMERIC = {"correlation": (np.int64, -1), "stream": (np.int64, -1), "device": (np.int64, -1),
            "bytes": (np.int64, 0)}


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
    per distinct name), numbers in numpy arrays.  None when the file needs the generic path
    (which gives the precise error messages)."""
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
    ts = np.empty(n)
    dur = np.empty(n)
    nums = {k: np.empty(n, dtype=dt) for k, (dt, _) in _NUMERIC.items()}
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
            ts[lo:hi] = [e.ts for e in events]
            dur[lo:hi] = [e.dur for e in events]
            args = [e.args for e in events]
            has += [a is not None for a in args]
            args = [empty if a is None else a for a in args]
            block = np.array([(a.correlation, a.stream, a.device, a.bytes) for a in args], dtype=np.int64)
            for j, key in enumerate(_NUMERIC):
                nums[key][lo:hi] = block[:, j] if len(block) else 0
            objs["name"] += [a.name for a in args]
            objs["labels"] += [a.labels for a in args]
            objs["d2l"] += [a.d2l for a in args]
            del events, args
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, TypeError, ValueError, OverflowError):
        return None  # a field of the wrong type or shape: the generic path says which
    del raws
    return Fields(ph, cat, name, pid, tid, ts, dur, {**nums, **objs}, has, rest)


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
    cols = {key: [a.get(key) for a in args] for key in ARGS}
    return Fields([e.get("ph") for e in events], [e.get("cat") for e in events],
                  [e.get("name", "") for e in events], [e.get("pid", 0) for e in events],
                  [e.get("tid", 0) for e in events], [e.get("ts") for e in events],
                  [e.get("dur", 0) for e in events], cols, has, doc)
