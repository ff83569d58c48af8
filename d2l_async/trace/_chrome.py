"""Chrome Trace Event JSON: read torch.profiler (Kineto) traces, write traces Perfetto opens.

Reading maps a profiler trace onto the lanes of :class:`~d2l_async.trace.Trace`::

    CPU thread (pid, tid)  -> frontend lane "thread 4515 (python)"
        cpu_op                            -> Kind.OP
        cudaLaunchKernel, cudaMemcpyAsync -> Kind.LAUNCH   (see LAUNCH_CALLS)
        cudaStreamSynchronize, ...        -> Kind.BLOCK, reason = the call (see SYNC_CALLS)
        any other runtime/driver call     -> Kind.RUNTIME
    GPU stream (device, stream) -> backend lane "cuda:0 stream 7"
        kernel -> Kind.KERNEL, gpu_memcpy -> Kind.COPY, gpu_memset -> Kind.MEMSET

A runtime call and the GPU work it caused share ``args.correlation``: that number becomes the
``flow`` column of both, and the GPU event's ``issue`` is the start of its runtime call.  Work whose
call is missing (or calls whose work is missing, as when the profiler window cuts a step) is counted
in ``meta["unmatched_gpu_ops"]`` and ``meta["unmatched_launches"]``, never an error.

Times in the file are microseconds, absolute or relative to ``baseTimeNanoseconds``; the trace
holds seconds from its first event.  Other categories are skipped and counted in
``meta["skipped"]``: ``user_annotation`` ranges (``record_function`` labels, ``ProfilerStep#3``)
can span the whole trace and would hide when the thread was really busy (the ``ProfilerStep``
ranges are kept in ``meta["steps"]``); ``cuda_sync``,
``gpu_user_annotation`` and ``python_function`` are not work on a lane either.

Files written by :func:`~d2l_async.trace.write_chrome_trace` (``_perfetto.py``) carry every column
in ``args["d2l"]`` and the lanes in a top-level ``"d2l_async"`` record; for those the reader
restores the trace exactly instead of applying the mapping above.

Only the standard library and numpy: no torch, no pandas.
"""

from __future__ import annotations

import gc
import gzip
import json
import math
import os
import zlib
from collections import Counter
from itertools import compress
from pathlib import Path
from typing import Any

import numpy as np

from ._model import _DEFAULTS, COLUMNS, Kind, Lane, LaneRole, Trace, TraceError, _order_lanes
from ._ranks import COLLECTIVE_PREFIXES

__all__ = ["read_chrome_trace", "LAUNCH_CALLS", "SYNC_CALLS"]

#: Runtime/driver calls that put work on a stream's launch queue.  HTA 0.5.0 counts exactly these
#: (``TraceSymbolTable.get_runtime_launch_events_query``), so queue lengths agree with it.
LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
    # ROCm builds of PyTorch (HTA counts these too)
    "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync", "hipMemcpyWithStream",
})
#: Calls that make the CPU thread wait for the GPU: the frontend is blocked while they run.
SYNC_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
    "cudaMemcpy2D", "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol", "cudaMemset",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpyDtoH", "cuMemcpyHtoD",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
})

# category -> (role, kind); runtime calls are refined by name after parsing
_FRONT, _BACK = 0, 1
_CATS: dict[str, tuple[int, str]] = {
    "cpu_op": (_FRONT, Kind.OP.value),
    "cuda_runtime": (_FRONT, Kind.RUNTIME.value),
    "cuda_driver": (_FRONT, Kind.RUNTIME.value),
    "kernel": (_BACK, Kind.KERNEL.value),
    "gpu_memcpy": (_BACK, Kind.COPY.value),
    "gpu_memset": (_BACK, Kind.MEMSET.value),
    "collective": (_FRONT, Kind.OP.value),  # a user_annotation named gloo:*, nccl:* (see below)
}
_COLLECTIVE = "collective"
_KIND_TO_CAT = {
    Kind.OP.value: "cpu_op", Kind.LAUNCH.value: "cuda_runtime", Kind.RUNTIME.value: "cuda_runtime",
    Kind.BLOCK.value: "cuda_runtime", Kind.KERNEL.value: "kernel", Kind.COPY.value: "gpu_memcpy",
    Kind.MEMSET.value: "gpu_memset",
}
_FORMAT_KEY = "d2l_async"  # top-level record of files we write
_EXTRA = ("id", "kind", "issue", "source", "reason", "nbytes", "deps", "reads", "writes", "device")


# ---------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------
def _load_json(path: Path) -> Any:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, expected a Chrome-trace .json or .json.gz file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read the file ({exc})") from exc
    if raw[:2] == b"\x1f\x8b":  # gzip magic, whatever the suffix
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(f"{path}: corrupt or truncated gzip data ({exc})") from None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: not valid JSON ({exc})") from None


def read_chrome_trace(path: str | os.PathLike[str]) -> Trace:
    """Load a torch.profiler / Kineto Chrome-trace JSON file (plain or gzip) as a :class:`Trace`.

    Args:
        path: a ``.json`` or ``.json.gz`` file (gzip is detected from the content).

    Returns:
        The trace: CPU threads as frontend lanes, GPU streams as backend lanes, times in seconds
        from the first event.  ``meta`` holds ``source="chrome"``, ``path``, ``device`` (the GPU
        names), ``unmatched_launches``, ``unmatched_gpu_ops``, ``skipped`` and the file's own
        top-level fields under ``file``.

    Raises:
        TraceError: the file is missing, not JSON, truncated, or not a Chrome trace; the message
            names the file and the problem.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"read_chrome_trace expects a file path (str or os.PathLike), got {type(path).__name__}")
    path = Path(path)
    # json.loads makes ~100k small dicts; the cyclic GC would rescan them again and again while
    # they are built (none of them can form a cycle), which doubles the load time.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _read(path)
    finally:
        if was_enabled:
            gc.enable()


def _read(path: Path) -> Trace:
    doc = _load_json(path)
    if isinstance(doc, list):  # the JSON-array form of the format
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        got = type(doc).__name__ if not isinstance(doc, dict) else f"keys {sorted(doc)[:6]}"
        raise TraceError(f"{path}: not a Chrome trace: expected an object with a 'traceEvents' list, got {got}")
    try:
        return _parse(doc, path)
    except TraceError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise TraceError(f"{path}: malformed trace event data ({type(exc).__name__}: {exc})") from None


def _parse(doc: dict[str, Any], path: Path) -> Trace:
    events = doc["traceEvents"]
    ours = doc.get(_FORMAT_KEY) if isinstance(doc.get(_FORMAT_KEY), dict) else None

    # A few C-speed passes (list comprehensions) instead of one Python loop with many appends:
    # this is what keeps a 109k-event file well under a second.
    if set(map(type, events)) - {dict}:
        i = next(i for i, e in enumerate(events) if type(e) is not dict)
        raise TraceError(f"{path}: traceEvents[{i}] is a {type(events[i]).__name__}, expected an object")
    cats = _CATS
    phs = [e.get("ph") for e in events]
    phases = Counter(phs)
    slices = list(compress(events, [p == "X" for p in phs]))
    cat_all = [e.get("cat") for e in slices]
    if "user_annotation" in cat_all:  # c10d's collectives (gloo:all_reduce) are work, not labels
        cat_all = [_COLLECTIVE if c == "user_annotation" and str(e.get("name", "")).startswith(COLLECTIVE_PREFIXES)
                   else c for c, e in zip(cat_all, slices)]
    cat_counts = Counter(cat_all)
    skipped = {str(k): v for k, v in cat_counts.items() if k not in cats}
    skipped.update({f"ph={k}": v for k, v in phases.items() if k not in ("X", "M", "s", "f", "i", "I", "C")})
    if ours is not None:  # our own file: every slice carries its record, whatever its category
        keep = [type(e.get("args")) is dict and "d2l" in e["args"] for e in slices]
        if not all(keep):
            raise TraceError(f"{path}: {keep.count(False)} slices lack their args.d2l record; "
                             "was the file edited after d2l_async wrote it?")
        skipped = {}
        xs, cat_l = slices, cat_all
    elif skipped:
        keep = [c in cats for c in cat_all]
        xs, cat_l = list(compress(slices, keep)), list(compress(cat_all, keep))
    else:
        xs, cat_l = slices, cat_all
    n = len(xs)
    cat = np.empty(n, dtype=object)
    cat[:] = cat_l
    role = np.zeros(n, dtype=np.int8)
    kind = np.full(n, Kind.OP.value, dtype=object)
    for c_name, (c_role, c_kind) in cats.items():
        if c_name in cat_counts:
            m = cat == c_name
            role[m] = c_role
            kind[m] = c_kind
    back = role == _BACK
    back_l = back.tolist()

    name_l = [e.get("name", "") for e in xs]
    pid_l = [e.get("pid", 0) for e in xs]
    tid_l = [e.get("tid", 0) for e in xs]
    ts_l = [e["ts"] for e in xs]
    dur_l = [e.get("dur", 0) for e in xs]
    empty: dict[str, Any] = {}
    args = [e.get("args") or empty for e in xs]
    corr_l = [a.get("correlation", -1) for a in args]
    # stream, device and bytes only matter on the GPU side: read them for those events alone
    gpu_args = list(compress(args, back_l))
    stream_g = [a.get("stream", -1) for a in gpu_args]
    dev_g = [a.get("device", -1) for a in gpu_args]
    bytes_g = [a.get("bytes", 0) for a in gpu_args]
    extra_l = [a.get("d2l") for a in args] if ours is not None else []
    thread_names: dict[tuple[Any, Any], str] = {}
    for e in compress(events, [p == "M" for p in phs]):
        if e.get("name") == "thread_name":
            tname = (e.get("args") or empty).get("name")
            key = (e.get("pid"), e.get("tid"))
            # Kineto may name a thread twice: by the process's name when it saw the thread
            # first, then by the name the thread gave itself (pt_gloo_runloop): keep the latter
            if tname and not (key in thread_names and str(tname).endswith("(python)")):
                thread_names[key] = str(tname)

    ng = len(gpu_args)
    try:
        ts = np.asarray(ts_l, dtype=np.float64)
        dur = np.asarray(dur_l, dtype=np.float64)
        corr = np.asarray(corr_l, dtype=np.int64)
        stream_b = np.asarray(stream_g, dtype=np.int64)
        dev_b = np.asarray(dev_g, dtype=np.int64)
        bytes_b = np.asarray(bytes_g, dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TraceError(f"{path}: a trace event has a field of the wrong type ({exc})") from None
    for col, label, size in ((ts, "ts", n), (dur, "dur", n), (corr, "args.correlation", n),
                             (stream_b, "args.stream", ng), (dev_b, "args.device", ng), (bytes_b, "args.bytes", ng)):
        if col.shape != (size,):
            raise TraceError(f"{path}: a trace event has a list where a number belongs in {label!r}")
    for col, label in ((ts, "ts"), (dur, "dur")):
        bad = ~np.isfinite(col)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise TraceError(f"{path}: event {name_l[j]!r} has a non-numeric or missing {label!r}")
    if (dur < 0).any():
        j = int(np.flatnonzero(dur < 0)[0])
        raise TraceError(f"{path}: event {name_l[j]!r} has a negative duration")
    stream = np.full(n, -1, dtype=np.int64)
    stream[back] = stream_b
    dev = np.full(n, -1, dtype=np.int64)
    dev[back] = dev_b
    nbytes = np.zeros(n, dtype=np.int64)
    nbytes[back] = bytes_b
    name = np.empty(n, dtype=object)
    name[:] = name_l
    if n and not all(isinstance(x, str) for x in set(name_l)):
        raise TraceError(f"{path}: an event 'name' is not a string")

    # -- times: microseconds -> seconds from the trace start
    if ours is not None:
        origin = float(ours.get("origin_us", 0.0))
    else:
        origin = float(ts.min()) if n else 0.0
    start = (ts - origin) / 1e6
    end = start + dur / 1e6

    # -- lanes: frontend = CPU thread, backend = (device, stream)
    gdev = np.where(dev >= 0, dev, _int_or(pid_l, back, -1))
    lane_col = np.empty(n, dtype=object)
    lanes: list[Lane] = []
    device_col = np.full(n, "", dtype=object)
    if back.any():
        keys = np.stack([gdev[back], stream[back]], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        names = np.array([f"cuda:{d} stream {s}" for d, s in uniq], dtype=object)
        lane_col[back] = names[inv.reshape(-1)]
        devs = np.array([f"cuda:{d}" for d, _ in uniq], dtype=object)
        device_col[back] = devs[inv.reshape(-1)]
        lanes += [Lane(str(nm), LaneRole.BACKEND, device=f"cuda:{d}", stream=int(s)) for nm, (d, s) in zip(names, uniq)]
    front_idx = np.flatnonzero(~back)
    if len(front_idx):
        seen: dict[tuple[Any, Any], str] = {}
        used: set[str] = set(l.name for l in lanes)
        keys = list(compress(zip(pid_l, tid_l), (~back).tolist()))
        # a thread whose only events are collectives (gloo's pt_gloo_runloop) does the
        # communication for the frontend: a backend lane of the CPU
        not_comm = {k for k, c in zip(keys, cat[front_idx].tolist()) if c != _COLLECTIVE}
        for key in dict.fromkeys(keys):  # first-seen order
            nm = _unique_name(thread_names.get(key) or f"thread {key[1]}", key, used)
            seen[key] = nm
            used.add(nm)
            if key in not_comm:
                lanes.append(Lane(nm, LaneRole.FRONTEND))
            else:
                lanes.append(Lane(nm, LaneRole.BACKEND, device="cpu"))
        lane_col[front_idx] = [seen[k] for k in keys]
        comm_keys = set(seen) - not_comm
        if comm_keys:
            comm_rows = front_idx[[k in comm_keys for k in keys]]
            device_col[comm_rows] = "cpu"

    # -- runtime calls: launch / block / other, by name
    rt = kind == Kind.RUNTIME.value
    if rt.any():
        rnames = name[rt]
        is_launch = np.fromiter((x in LAUNCH_CALLS for x in rnames), dtype=bool, count=len(rnames))
        is_sync = np.fromiter((x in SYNC_CALLS for x in rnames), dtype=bool, count=len(rnames))
        k = kind[rt]
        k[is_launch] = Kind.LAUNCH.value
        k[is_sync] = Kind.BLOCK.value
        kind[rt] = k
    reason = np.full(n, "", dtype=object)
    blk = kind == Kind.BLOCK.value
    reason[blk] = name[blk]

    # -- pair each GPU op with its runtime call through the correlation id
    issue = np.full(n, np.nan)
    flow = np.where(corr > 0, corr, -1)
    front_c = (~back) & (flow >= 0)
    back_c = back & (flow >= 0)
    fc_idx = np.flatnonzero(front_c)
    order = fc_idx[np.argsort(flow[fc_idx], kind="stable")]
    fc_sorted = flow[order]
    bc_idx = np.flatnonzero(back_c)
    pos = np.searchsorted(fc_sorted, flow[bc_idx])
    pos_ok = pos < len(fc_sorted)
    hit = np.zeros(len(bc_idx), dtype=bool)
    hit[pos_ok] = fc_sorted[pos[pos_ok]] == flow[bc_idx[pos_ok]]
    launch_rows = order[pos[hit]]
    issue[bc_idx[hit]] = start[launch_rows]
    device_col[launch_rows] = device_col[bc_idx[hit]]  # a launch targets its op's GPU
    unmatched_gpu = int(len(bc_idx) - hit.sum())
    launches = np.flatnonzero(kind == Kind.LAUNCH.value)
    matched = np.isin(flow[launches], flow[bc_idx[hit]])
    unmatched_launch = int((~matched).sum())

    cols: dict[str, Any] = {
        "lane": lane_col, "kind": kind, "name": name, "issue": issue, "start": start, "end": end,
        "device": device_col, "flow": flow, "reason": reason, "nbytes": np.maximum(nbytes, 0),
    }
    meta: dict[str, Any] = {
        "source": "chrome",
        "path": str(path),
        "device": _gpu_names(doc) or ("CPU only" if not back.any() else "GPU"),
        "unmatched_launches": unmatched_launch,
        "unmatched_gpu_ops": unmatched_gpu,
        "skipped": skipped,
        "origin_us": origin,
        "file": {k: v for k, v in doc.items() if k not in ("traceEvents", _FORMAT_KEY, "deviceProperties")},
    }
    if "baseTimeNanoseconds" in doc:
        meta["base_time_ns"] = doc["baseTimeNanoseconds"]
    steps = _profiler_steps(slices, origin)
    if steps:
        meta["steps"] = steps

    if ours is not None:
        lanes, cols, meta = _apply_ours(ours, extra_l, lanes, cols, meta, lane_col, path)
        return Trace.from_columns(cols, lanes, meta)
    return _fast_trace(cols, lanes, meta, n)


def _unique_name(name: str, key: tuple[Any, Any], used: set[str]) -> str:
    """``name``, or ``name (tid)`` / ``name (pid P, tid T)`` when another thread has it already
    (Chrome's own traces name several threads of one process alike)."""
    for cand in (name, f"{name} ({key[1]})", f"{name} (pid {key[0]}, tid {key[1]})"):
        if cand not in used:
            return cand
    i = 2
    while f"{name} #{i}" in used:
        i += 1
    return f"{name} #{i}"


def _profiler_steps(slices: list[dict[str, Any]], origin: float) -> list[dict[str, Any]]:
    """The ``ProfilerStep#N`` ranges ``torch.profiler.schedule`` marks, in seconds, by start.

    They are not events of the trace (an annotation spans everything in the step), but they tell
    where each training step began; HTA drops the work launched in the last one, which may be
    partial, before computing its queue statistics.
    """
    out = []
    for e in slices:
        name = e.get("name")
        if isinstance(name, str) and name.startswith("ProfilerStep"):
            start = (float(e["ts"]) - origin) / 1e6
            out.append({"name": name, "start": start, "end": start + float(e.get("dur", 0)) / 1e6})
    return sorted(out, key=lambda d: d["start"])


def _gpu_names(doc: dict[str, Any]) -> str:
    props = doc.get("deviceProperties") or []
    return ", ".join(dict.fromkeys(str(p.get("name", "?")) for p in props if isinstance(p, dict)))


def _fast_trace(cols: dict[str, Any], lanes: list[Lane], meta: dict[str, Any], n: int) -> Trace:
    """``Trace.from_columns`` without its element-wise copy of every object column."""
    out: dict[str, np.ndarray] = {}
    for name, dtype in COLUMNS.items():
        if name in cols:
            arr = np.asarray(cols[name], dtype=dtype)
        elif name == "id":
            arr = np.arange(n, dtype=np.int64)
        else:
            arr = np.empty(n, dtype=dtype)
            arr.fill(_DEFAULTS[name])
        arr.flags.writeable = False
        out[name] = arr
    return Trace(tuple(_order_lanes(lanes)), out, meta)


def _int_or(values: list[Any], mask: np.ndarray, default: int) -> np.ndarray:
    """pid as the GPU index where an event has no ``args.device`` (Kineto puts GPU n on pid n)."""
    out = np.full(len(values), default, dtype=np.int64)
    for j in np.flatnonzero(mask).tolist():
        v = values[j]
        if isinstance(v, int):
            out[j] = v
    return out


def _apply_ours(ours: dict[str, Any], extra: list[Any], lanes: list[Lane], cols: dict[str, Any],
                meta: dict[str, Any], lane_col: np.ndarray, path: Path):
    """Restore what a file written by :func:`write_chrome_trace` kept beyond the Chrome fields."""
    declared = []
    for rec in ours.get("lanes", []):
        lane = Lane(str(rec["name"]), LaneRole(rec["role"]), device=str(rec.get("device", "")),
                    virtual=bool(rec.get("virtual", False)), stream=int(rec.get("stream", -1)),
                    group=str(rec.get("group", "")), rank=int(rec.get("rank", -1)))
        declared.append(lane)
    n = len(lane_col)
    lane_out = np.empty(n, dtype=object)
    for j, x in enumerate(extra):
        if not isinstance(x, dict) or "lane" not in x:
            raise TraceError(f"{path}: event {j} lacks its args.d2l record; the file was edited?")
        lane_out[j] = x["lane"]
    cols = dict(cols)
    cols["lane"] = lane_out
    for name in _EXTRA:
        if name in ("deps", "reads", "writes"):
            vals = [tuple(x.get(name, ())) for x in extra]
        elif name == "issue":
            vals = [math.nan if x.get("issue") is None else x["issue"] for x in extra]
        else:
            vals = [x.get(name, _default(name)) for x in extra]
        if name == "kind":
            vals = [Kind(v).value for v in vals]
        cols[name] = vals
    cols["flow"] = [x.get("flow", -1) for x in extra]
    meta = {**meta, **(ours.get("meta") or {}), "path": str(path)}
    return declared, cols, meta


def _default(name: str) -> Any:
    return {"id": -1, "kind": Kind.OP.value, "source": "", "reason": "", "nbytes": 0, "device": ""}[name]
