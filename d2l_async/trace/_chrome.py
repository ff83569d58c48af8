"""Chrome Trace Event JSON: read torch.profiler (Kineto) traces of any generation.

Reading maps a profiler trace onto the lanes of :class:`~d2l_async.trace.Trace` (the category
table for every Kineto generation, CUDA, ROCm and MTIA is in ``_kineto.py``)::

    CPU thread (pid, tid)  -> frontend lane "thread 4515 (python)"
        cpu_op / Operator                 -> Kind.OP
        cudaLaunchKernel, hipLaunchKernel, runFunction - job_prep... -> Kind.LAUNCH (LAUNCH_CALLS)
        cudaStreamSynchronize, ...        -> Kind.BLOCK, reason = the call (see SYNC_CALLS)
        cudaMemcpyAsync of a "Memcpy DtoH (Device -> Pageable)" copy -> Kind.BLOCK,
            reason "cudaMemcpyAsync (Device -> Pageable)": it returns when the copy is done
        any other runtime/driver call     -> Kind.RUNTIME
        python_function (with_stack=True) -> Kind.PYTHON on the "python call stack" lanes
    gloo's communication thread          -> backend lane of device "cpu" (gloo:all_reduce ranges)
    device stream (device, stream) -> backend lane "cuda:0 stream 7" / "mtia:9 stream 1"
        kernel -> Kind.KERNEL, gpu_memcpy -> Kind.COPY, gpu_memset -> Kind.MEMSET

A runtime call and the device work it caused share ``args.correlation``: that number becomes the
``flow`` column of both, and the device event's ``issue`` is the start of its runtime call.  Work
whose call is missing (or calls whose work is missing, as when the profiler window cuts a step) is
counted in ``meta["unmatched_gpu_ops"]`` and ``meta["unmatched_launches"]``, never an error.

Times in the file are microseconds, absolute or relative to ``baseTimeNanoseconds``; the trace
holds seconds from its first event (``meta["origin_us"]``, ``meta["base_time_ns"]`` keep the
absolute zero, which :func:`~d2l_async.trace.merge_ranks` uses to put ranks on one clock).  The
``ProfilerStep#N`` ranges are kept in ``meta["steps"]`` and the other CPU ``user_annotation``
ranges in ``meta["annotations"]`` (name, start, end, lane), not as events: they span whole steps
and would hide when the thread was really busy; the writer exports both as slices again.  As
events they are skipped and counted in ``meta["skipped"]``, as are ``cuda_sync`` markers, the GPU's
copies of annotations and the profiler's own spans.  A file with no work at all loads as an empty
trace with an :class:`EmptyTrace` warning that says so.

Numbers are read as each vendor spells them (``_convert.py``: ROCm's ``"stream": "0x0"``, times
as strings); lanes are built in ``_lanes.py``.

Files written by :func:`~d2l_async.trace.write_chrome_trace` (``_perfetto.py``) carry every column
in ``args["d2l"]`` and the lanes in a top-level ``"d2l_async"`` record; for those the reader
restores the trace instead of applying the mapping above.

Only the standard library, numpy and (optionally) msgspec: no torch, no pandas.
"""

from __future__ import annotations

import gc
import os
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ._convert import check_values
from ._json import Fields, load_fields
from ._lanes import device_pairs, thread_lanes
from ._kineto import (BACK, CATEGORIES, COLLECTIVE_CATEGORY, LAUNCH_CALLS, SYNC_CALLS, UnplacedDeviceEvents,
                      blocking_copy_calls, category, device_names, device_prefix, is_mtia_copy, metadata, unplaced)
from ._model import _DEFAULTS, COLUMNS, Kind, Lane, LaneRole, Trace, TraceError, _order_lanes
from ._restore import apply_ours as _apply_ours
from ._ranks import COLLECTIVE_PREFIXES

__all__ = ["read_chrome_trace", "EmptyTrace", "LAUNCH_CALLS", "SYNC_CALLS"]

_KIND_TO_CAT = {
    Kind.OP.value: "cpu_op", Kind.LAUNCH.value: "cuda_runtime", Kind.RUNTIME.value: "cuda_runtime",
    Kind.BLOCK.value: "cuda_runtime", Kind.KERNEL.value: "kernel", Kind.COPY.value: "gpu_memcpy",
    Kind.MEMSET.value: "gpu_memset", Kind.PYTHON.value: "python_function",
}
_FORMAT_KEY = "d2l_async"  # top-level record of files we write
_PY = "python_function"
_MAX_US = 1e17  # µs: 3,000 years; absolute Kineto times are ~1.8e15 µs since 1970


def read_chrome_trace(path: str | os.PathLike[str], *, python_stack: bool = True) -> Trace:
    """Load a torch.profiler / Kineto Chrome-trace JSON file (plain or gzip) as a :class:`Trace`.

    Args:
        path: a ``.json`` or ``.json.gz`` file (gzip is detected from the content).
        python_stack: keep the ``python_function`` events of a ``with_stack=True`` trace as the
            "python call stack" lane group (``False`` skips them: a smaller trace).

    Returns:
        The trace: CPU threads as frontend lanes, device streams as backend lanes, times in
        seconds from the first event.  ``meta`` holds ``source="chrome"``, ``path``, ``device``
        (the GPU names), ``unmatched_launches``, ``unmatched_gpu_ops``, ``skipped``,
        ``generations`` (which Kineto category sets the file used), ``steps``, ``origin_us`` and
        the file's own top-level fields under ``file``.

    Raises:
        TraceError: the file is missing, not JSON, truncated, nested absurdly deep, not a Chrome
            trace, or has out-of-range times; the message names the file and the problem.

    Warns:
        UnplacedDeviceEvents: device events in categories the reader does not know.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"read_chrome_trace expects a file path (str or os.PathLike), got {type(path).__name__}")
    path = Path(path)
    # parsing makes ~10^5-10^6 small objects; the cyclic GC would rescan them again and again while
    # they are built (none of them can form a cycle), which doubles the load time.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        fields = load_fields(path)
        try:
            trace = _parse(fields, path, python_stack)
            if not len(trace):
                _warn_empty(path, fields, trace)
            return trace
        except TraceError as exc:
            if str(path) in str(exc):
                raise
            raise TraceError(f"{path}: {exc}") from None  # every error names the file
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise TraceError(f"{path}: malformed trace event data ({type(exc).__name__}: {exc})") from None
    finally:
        if was_enabled:
            gc.enable()


class EmptyTrace(UserWarning):
    """A trace file loaded as 0 events (the message says why: no events, or none that is work)."""


def _warn_empty(path: Path, f: Fields, trace: Trace) -> None:
    total = len(f.ph)
    if not total:
        why = "its traceEvents list holds no events (did the profiler stop before its first active step?)"
    else:
        skipped = trace.meta.get("skipped") or {}
        what = ", ".join(f"{v} {k}" for k, v in sorted(skipped.items(), key=lambda kv: -kv[1])[:4])
        why = f"none of its {total} events is work on a lane" + (f" (skipped: {what})" if what else "")
    warnings.warn(f"{path}: the trace is empty: {why}; figures and tables of it will be empty",
                  EmptyTrace, stacklevel=3)


def _take(values: Any, idx: list[int]) -> Any:
    if isinstance(values, np.ndarray):
        return values[np.asarray(idx, dtype=np.int64)]
    return [values[i] for i in idx]


def _numbers(values: np.ndarray, dtype: Any) -> np.ndarray:
    """A numeric column of the reader (``_convert.py`` filled and checked it) as ``dtype``; stream
    and device ids beyond int64 stay Python ints."""
    return values if values.dtype == object else values.astype(dtype, copy=False)


def _parse(f: Fields, path: Path, python_stack: bool) -> Trace:
    ours = f.top.get(_FORMAT_KEY) if isinstance(f.top.get(_FORMAT_KEY), dict) else None
    phs = f.ph
    phases = Counter(phs)
    x_idx = [i for i, p in enumerate(phs) if p == "X"]
    cat_x = _take(f.cat, x_idx)
    name_x = _take(f.name, x_idx)
    raw_cats = Counter(cat_x)
    # canonical category of each slice; collectives and python calls have their own
    canon = {c: category(c) for c in raw_cats}
    cats = [canon[c] for c in cat_x]
    if "user_annotation" in raw_cats:
        cats = [COLLECTIVE_CATEGORY if c == "user_annotation" and isinstance(nm, str)
                and nm.startswith(COLLECTIVE_PREFIXES) else k for c, k, nm in zip(cat_x, cats, name_x)]
    steps_idx = [j for j, nm in enumerate(name_x) if isinstance(nm, str) and nm.startswith("ProfilerStep#")]
    step_set = set(steps_idx)
    # user annotations (record_function ranges) other than steps and collectives: kept as ranges
    # in meta["annotations"], not as events (they span work and would hide when a thread was busy)
    notes_idx = ([j for j, (c, k) in enumerate(zip(cat_x, cats)) if c == "user_annotation" and k is None
                  and j not in step_set] if "user_annotation" in raw_cats else [])
    if ours is not None:  # our own file: every slice carries its record, except the ranges it exports
        d2l_x = _take(f.args["d2l"], x_idx)
        keep = [j for j, d in enumerate(d2l_x) if isinstance(d, dict)]
        missing = len(x_idx) - len(keep) - sum(not isinstance(d2l_x[j], dict) for j in steps_idx + notes_idx)
        if missing:
            raise TraceError(f"{path}: {missing} slices lack their args.d2l record; "
                             "was the file edited after d2l_async wrote it?")
        skipped: dict[str, int] = {}
    else:
        keep = [j for j, k in enumerate(cats) if k is not None and j not in step_set]
        py = [j for j, c in enumerate(cat_x) if c == _PY] if python_stack and _PY in raw_cats else []
        keep = sorted(keep + py) if py else keep
        kept = Counter(_take(cat_x, keep))
        skipped = {str(c): v - kept.get(c, 0) for c, v in raw_cats.items() if v - kept.get(c, 0)}
        skipped.update({f"ph={k}": v for k, v in phases.items() if k not in ("X", "M", "s", "f", "i", "I", "C")})
    rows = [x_idx[j] for j in keep]
    n = len(rows)
    cat_k = [cats[j] if cats[j] is not None else cat_x[j] for j in keep]
    name_l = _take(name_x, keep)
    if n and not all(isinstance(x, str) for x in set(name_l)):
        raise TraceError(f"{path}: an event 'name' is not a string")
    intern = {}  # one str object per distinct name: a 10^6-event trace has ~10^3 of them
    name = np.empty(n, dtype=object)
    name[:] = [intern.setdefault(x, x) for x in name_l]

    role = np.zeros(n, dtype=np.int8)
    kind = np.empty(n, dtype=object)
    kind[:] = Kind.OP.value
    cat_arr = np.empty(n, dtype=object)
    cat_arr[:] = cat_k
    for c in set(cat_k):
        m = cat_arr == c
        if c in CATEGORIES:
            role[m], kind[m] = CATEGORIES[c][0], CATEGORIES[c][1]
        elif c == _PY:
            kind[m] = Kind.PYTHON.value
    back = role == BACK
    if "mtia_ccp_events" in raw_cats:  # MTIA's DMA requests move data
        mt = np.flatnonzero(cat_arr == "mtia_ccp_events")
        kind[mt[[is_mtia_copy(x) for x in name[mt]]]] = Kind.COPY.value

    b_rows = [r for r, b in zip(rows, back.tolist()) if b]
    step_rows = [x_idx[j] for j in steps_idx + notes_idx]
    if f.bad:  # a value that could not be converted, in an event the trace uses: say which
        check_values(f.bad, {"ts": rows + step_rows, "dur": rows + step_rows, "correlation": rows,
                             "stream": b_rows, "device": b_rows, "bytes": b_rows}, f.name, path)
    ts = _numbers(_take(f.ts, rows), np.float64)
    dur = _numbers(_take(f.dur, rows), np.float64)
    corr = _numbers(_take(f.args["correlation"], rows), np.int64)
    stream_b = _numbers(_take(f.args["stream"], b_rows), np.int64)
    dev_b = _numbers(_take(f.args["device"], b_rows), np.int64)
    bytes_b = _numbers(_take(f.args["bytes"], b_rows), np.int64)
    for col, label in ((ts, "ts"), (dur, "dur")):
        bad = ~np.isfinite(col)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise TraceError(f"{path}: event {name[j]!r} has a non-numeric or missing {label!r}")
    if (dur < 0).any():
        j = int(np.flatnonzero(dur < 0)[0])
        raise TraceError(f"{path}: event {name[j]!r} has a negative duration")

    # -- times: microseconds -> seconds from the trace start
    origin = float(ours.get("origin_us", 0.0)) if ours is not None else (float(ts.min()) if n else 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        start = (ts - origin) / 1e6
        end = start + dur / 1e6
    bad = ~(np.isfinite(start) & np.isfinite(end)) | (np.abs(ts) > _MAX_US) | (dur > _MAX_US)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise TraceError(f"{path}: event {name[j]!r} has 'ts'/'dur' out of range ({ts[j]!r}, {dur[j]!r} µs): "
                         f"a profiler time is below {_MAX_US:.0e} µs (3,000 years)")

    pid_l, tid_l = _take(f.pid, rows), _take(f.tid, rows)
    thread_names, device_pids = metadata(f)
    lane_col = np.empty(n, dtype=object)
    device_col = np.empty(n, dtype=object)
    device_col[:] = ""
    lanes: list[Lane] = []
    prefix = device_prefix(set(raw_cats))
    nbytes = np.zeros(n, dtype=np.int64)
    nbytes[back] = bytes_b
    if back.any():
        pid_b = np.array([p if type(p) is int and -2**63 <= p < 2**63 else -1 for p in _take(f.pid, b_rows)],
                         dtype=np.int64)
        gdev = np.where(dev_b != -1, dev_b, pid_b)  # no args.device: the process is the device
        uniq, inv = device_pairs(gdev, stream_b)
        names = np.array([f"{prefix}:{d} stream {s}" if s != -1 else f"{prefix}:{d} (no stream)" for d, s in uniq],
                         dtype=object)
        lane_col[back] = names[inv]
        device_col[back] = np.array([f"{prefix}:{d}" for d, _ in uniq], dtype=object)[inv]
        lanes += [Lane(str(nm), LaneRole.BACKEND, device=f"{prefix}:{d}", stream=int(s)) for nm, (d, s) in zip(names, uniq)]
    lanes, thread_of = thread_lanes(lanes, back, kind, cat_arr, pid_l, tid_l, thread_names, lane_col, device_col,
                          start, end)

    # -- runtime calls: launch / block / other, by name
    rt = np.flatnonzero(kind == Kind.RUNTIME.value)
    if len(rt):
        rnames = name[rt].tolist()
        kind[rt[[x in LAUNCH_CALLS for x in rnames]]] = Kind.LAUNCH.value
        kind[rt[[x in SYNC_CALLS for x in rnames]]] = Kind.BLOCK.value
    reason = np.empty(n, dtype=object)
    reason[:] = ""
    blk = kind == Kind.BLOCK.value
    reason[blk] = name[blk]
    issue, flow, unmatched_gpu, unmatched_launch = _pair(back, corr, kind, start, device_col)
    if ours is None:  # a cudaMemcpyAsync into pageable memory held the CPU until its copy was done: a wait
        held, why = blocking_copy_calls(kind, name, flow, back)
        kind[held] = Kind.BLOCK.value
        reason[held] = why

    known = {c for c in raw_cats if canon[c] is not None or c == _PY}
    generations = sorted({CATEGORIES[canon[c]][2] for c in known if canon.get(c)})
    not_placed = unplaced(f, x_idx, cat_x, canon, device_pids) if ours is None else []
    device = device_names(f.top) or ("GPU" if back.any() and prefix == "cuda" else
                                   "MTIA" if back.any() else "CPU only")
    if not_placed:
        device = f"{device if device != 'CPU only' else 'a device'} (events not placed: {', '.join(not_placed)})"
        warnings.warn(f"{path}: device events in categories the reader does not know were skipped: "
                      f"{not_placed}; the figures miss them", UnplacedDeviceEvents, stacklevel=3)
    cols: dict[str, Any] = {
        "lane": lane_col, "kind": kind, "name": name, "issue": issue, "start": start, "end": end,
        "device": device_col, "flow": flow, "reason": reason, "nbytes": np.maximum(nbytes, 0),
    }
    meta: dict[str, Any] = {
        "source": "chrome", "path": str(path), "device": device,
        "unmatched_launches": unmatched_launch, "unmatched_gpu_ops": unmatched_gpu,
        "skipped": skipped, "origin_us": origin, "generations": generations,
        "file": {k: v for k, v in f.top.items() if k not in (_FORMAT_KEY, "deviceProperties")},
    }
    if not_placed:
        meta["unplaced_device_events"] = not_placed
    if "baseTimeNanoseconds" in f.top:
        meta["base_time_ns"] = f.top["baseTimeNanoseconds"]
    steps = _ranges(f, [x_idx[j] for j in steps_idx], origin, thread_of)
    if steps:
        meta["steps"] = steps
    notes = _ranges(f, [x_idx[j] for j in notes_idx], origin, thread_of)
    if notes:
        meta["annotations"] = notes
    if ours is not None:
        lanes, cols, meta = _apply_ours(ours, _take(f.args["d2l"], rows), cols, meta, path)
        return Trace.from_columns(cols, lanes, meta)
    return _fast_trace(cols, lanes, meta, n)


def _pair(back, corr, kind, start, device_col):
    """Pair each device op with its runtime call through the correlation id."""
    n = len(back)
    issue = np.full(n, np.nan)
    flow = np.where(corr > 0, corr, -1)
    fc_idx = np.flatnonzero((~back) & (flow >= 0))
    order = fc_idx[np.argsort(flow[fc_idx], kind="stable")]
    fc_sorted = flow[order]
    bc_idx = np.flatnonzero(back & (flow >= 0))
    pos = np.searchsorted(fc_sorted, flow[bc_idx])
    pos_ok = pos < len(fc_sorted)
    hit = np.zeros(len(bc_idx), dtype=bool)
    hit[pos_ok] = fc_sorted[pos[pos_ok]] == flow[bc_idx[pos_ok]]
    launch_rows = order[pos[hit]]
    issue[bc_idx[hit]] = start[launch_rows]
    device_col[launch_rows] = device_col[bc_idx[hit]]  # a launch targets its op's device
    launches = np.flatnonzero(kind == Kind.LAUNCH.value)
    matched = np.isin(flow[launches], flow[bc_idx[hit]])
    return issue, flow, int(len(bc_idx) - hit.sum()), int((~matched).sum())


def _ranges(f: Fields, idx: list[int], origin: float, thread_of: dict[Any, str]) -> list[dict[str, Any]]:
    """CPU ranges by start: ``name``, ``start``, ``end`` (seconds) and ``lane`` (their thread's lane,
    ``""`` when that thread has no lane).

    For the ``ProfilerStep#N`` ranges ``torch.profiler.schedule`` marks: they tell where each
    training step began; HTA drops the work launched in the last one, which may be partial, before
    computing its queue statistics (``include_last_profiler_step``).  The writer exports them (and
    the other user annotations) as ``user_annotation`` slices again, so HTA and Perfetto see them.
    """
    out = []
    for i in idx:
        if f.cat[i] in ("gpu_user_annotation",):  # the GPU's copy of the range
            continue
        start = (float(f.ts[i]) - origin) / 1e6
        out.append({"name": f.name[i], "start": start, "end": start + float(f.dur[i] or 0) / 1e6,
                    "lane": thread_of.get((f.pid[i], f.tid[i]), "")})
    return sorted(out, key=lambda d: d["start"])


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
