"""Chrome Trace Event JSON: read torch.profiler (Kineto) traces of any generation.

Reading maps a profiler trace onto the lanes of :class:`~d2l_async.trace.Trace` (the category
table for every Kineto generation, CUDA, ROCm and MTIA is in ``_kineto.py``)::

    CPU thread (pid, tid)  -> frontend lane "thread 4515 (python)"
        cpu_op / Operator                 -> Kind.OP
        cudaLaunchKernel, cuLaunchKernelEx, hipModuleLaunchKernel, cudaGraphLaunch, cudaMemcpyAsync,
        runFunction - job_prep... (any vendor's launch, LAUNCH_CALLS) -> Kind.LAUNCH
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
and would hide when the thread was really busy; the GPU's copies of them (``gpu_user_annotation``;
ROCm writes one of every ``ProfilerStep#N``, without a stream) in ``meta["device_annotations"]``;
the writer exports all three as slices again.  As events they are skipped and counted in
``meta["skipped"]``, as are ``cuda_sync`` markers and the profiler's own spans.  A file with no
work at all loads as an empty trace with an :class:`EmptyTrace` warning that says so; a process
named twice, differently, warns with :class:`NameConflict`.

The file is read within a size limit, and only if it is a regular file (``_json.py``); its
strings stay codes into tables of distinct values all the way into the trace (``Trace.from_lean``):
a column is made a plain array the first time it is read.

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
from pathlib import Path
from typing import Any

import numpy as np

from .._args import flag
from .._args import path as as_path
from ._columns import Coded, Ragged
from ._convert import check_values
from ._jax import refuse_jax_file
from ._json import Fields, Strings, check_max_bytes, load_fields, out_of_memory
from ._lanes import device_pairs, thread_lanes
from ._kineto import (BACK, CATEGORIES, COLLECTIVE_CATEGORY, COLLECTIVE_PREFIXES, LAUNCH_CALLS, NOT_HTA_LAUNCH_CALLS,
                      SYNC_CALLS, NameConflict, UnplacedDeviceEvents, blocking_copy_calls, category, device_names,
                      device_prefix, is_mtia_copy, metadata, unplaced)
from ._model import _DEFAULTS, COLUMNS, Kind, Lane, LaneRole, Trace, TraceError
from ._restore import apply_ours as _apply_ours

__all__ = ["read_chrome_trace", "EmptyTrace", "LAUNCH_CALLS", "SYNC_CALLS"]

_KIND_TO_CAT = {
    Kind.OP.value: "cpu_op", Kind.LAUNCH.value: "cuda_runtime", Kind.RUNTIME.value: "cuda_runtime",
    Kind.BLOCK.value: "cuda_runtime", Kind.KERNEL.value: "kernel", Kind.COPY.value: "gpu_memcpy",
    Kind.MEMSET.value: "gpu_memset", Kind.PYTHON.value: "python_function",
}
_FORMAT_KEY = "d2l_async"  # top-level record of files we write
_PY = "python_function"
_MAX_US = 1e17  # µs: 3,000 years; absolute Kineto times are ~1.8e15 µs since 1970


def read_chrome_trace(path: str | os.PathLike[str], *, python_stack: bool = True,
                      max_bytes: int | None = None) -> Trace:
    """Load a torch.profiler / Kineto Chrome-trace JSON file (plain or gzip) as a :class:`Trace`.

    Args:
        path: a ``.json`` or ``.json.gz`` file (gzip is detected from the content); a regular
            file (a FIFO or a device is refused without reading it).
        python_stack: keep the ``python_function`` events of a ``with_stack=True`` trace as the
            "python call stack" lane group (``False`` skips them: a smaller trace).
        max_bytes: the most bytes of JSON to read (a gzip file's inflated size).  Default: what
            fits in the memory available now (reading takes up to 3x the JSON's size, ``_json.py``).

    Returns:
        The trace: CPU threads as frontend lanes, device streams as backend lanes, times in
        seconds from the first event.  ``meta`` holds ``source="chrome"``, ``path``, ``device``
        (the GPU names), ``unmatched_launches``, ``unmatched_gpu_ops``, ``skipped``,
        ``generations`` (which Kineto category sets the file used), ``steps``,
        ``device_annotations`` (the GPU's copies of annotation ranges), ``origin_us`` and the
        file's own top-level fields under ``file``.

    Raises:
        TraceError: the file is missing, not a regular file, larger than ``max_bytes`` (by default
            what the memory available, a container's limit and ``ulimit -v`` allow), not UTF-8
            JSON, truncated, nested absurdly deep, not a Chrome trace, or has out-of-range times,
            or memory ran out while it was read; the message names the file and the problem (and,
            for size and memory, the size and the limits).

    Warns:
        UnplacedDeviceEvents: device events in categories the reader does not know.
        NameConflict: one process named twice, differently.
    """
    path = as_path("path", path)
    python_stack = flag("python_stack", python_stack)
    max_bytes = check_max_bytes(max_bytes)
    try:
        return _read(path, python_stack, max_bytes)
    except MemoryError:
        pass  # out of the handler first: the frames that held the file's bytes are gone, memory is back
    raise out_of_memory(path, max_bytes)


def _read(path: Path, python_stack: bool, max_bytes: int | None) -> Trace:
    # parsing makes ~10^5-10^6 small objects; the cyclic GC would rescan them again and again while
    # they are built (none of them can form a cycle), which doubles the load time.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        fields = load_fields(path, max_bytes=max_bytes)
        try:
            trace = _parse(fields, path, python_stack)
            if not len(trace):
                refuse_jax_file(path, fields.args["name"].values())  # no 'cat': say which reader reads it
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
    total = f.n
    if not total:
        why = "its traceEvents list holds no events (did the profiler stop before its first active step?)"
    else:
        skipped = trace.meta.get("skipped") or {}
        what = ", ".join(f"{v} {k}" for k, v in sorted(skipped.items(), key=lambda kv: -kv[1])[:4])
        why = f"none of its {total} events is work on a lane" + (f" (skipped: {what})" if what else "")
    warnings.warn(f"{path}: the trace is empty: {why}; figures and tables of it will be empty",
                  EmptyTrace, stacklevel=3)


def _numbers(values: np.ndarray, dtype: Any) -> np.ndarray:
    """A numeric column of the reader (``_convert.py`` filled and checked it) as ``dtype``; stream
    and device ids beyond int64 stay Python ints."""
    return values if values.dtype == object else values.astype(dtype, copy=False)


def _lut(values: np.ndarray, test) -> np.ndarray:
    """``test(v)`` for each distinct value of a coded column (a lookup table by code)."""
    return np.fromiter((bool(test(v)) for v in values.tolist()), dtype=bool, count=len(values))


_KINDS = np.array([k.value for k in Kind], dtype=object)
_KIND = {k.value: i for i, k in enumerate(Kind)}


def _parse(f: Fields, path: Path, python_stack: bool) -> Trace:
    """Map the file's events onto lanes (see the module docstring), column by column.  Strings stay
    codes into the file's tables of distinct values; each row's kind, lane, device and reason are
    codes too, so the trace is built lean (``Trace.from_lean``)."""
    ours = f.top.get(_FORMAT_KEY) if isinstance(f.top.get(_FORMAT_KEY), dict) else None
    ph_counts = np.bincount(f.ph.codes, minlength=len(f.ph.categories))
    phases = {f.ph.categories[k]: int(c) for k, c in enumerate(ph_counts.tolist()) if c}
    x = f.ph.code_of("X")
    x_idx = np.flatnonzero(f.ph.codes == x) if x >= 0 else np.zeros(0, np.int64)
    cat_values, name_values = f.cat.categories, f.name.categories
    cat_x, name_x = f.cat.codes[x_idx], f.name.codes[x_idx]
    cat_counts = np.bincount(cat_x, minlength=len(cat_values))
    present = [k for k, c in enumerate(cat_counts.tolist()) if c]
    raw_cats = {cat_values[k]: int(cat_counts[k]) for k in present}
    # canonical category of each slice (a code into `table`); collectives and python calls have their own
    canon = {k: category(cat_values[k]) for k in present}
    table: list[Any] = [None, *sorted({c for c in canon.values() if c is not None}), COLLECTIVE_CATEGORY, _PY]
    where = {c: i for i, c in enumerate(table)}
    lut = np.zeros(len(cat_values), dtype=np.int16)
    for k, c in canon.items():
        lut[k] = where[c]
    ecat = lut[cat_x]  # 0: not work on a lane
    ua, gua = (f.cat.code_of(c) for c in ("user_annotation", "gpu_user_annotation"))
    is_ua = cat_x == ua if ua >= 0 else np.zeros(len(x_idx), bool)
    if ua >= 0:
        coll_name = _lut(name_values, lambda v: isinstance(v, str) and v.startswith(COLLECTIVE_PREFIXES))
        ecat[is_ua & coll_name[name_x]] = where[COLLECTIVE_CATEGORY]
    step_name = _lut(name_values, lambda v: isinstance(v, str) and v.startswith("ProfilerStep#"))
    is_step = step_name[name_x]
    on_gpu = cat_x == gua if gua >= 0 else np.zeros(len(x_idx), bool)
    # user annotations (record_function ranges) other than steps and collectives: kept as ranges
    # in meta["annotations"], not as events (they span work and would hide when a thread was busy);
    # the GPU's copies of them (gpu_user_annotation, ProfilerStep#N among them) in meta["device_annotations"]
    steps_j = np.flatnonzero(is_step & ~on_gpu)
    notes_j = np.flatnonzero(is_ua & (ecat == 0) & ~is_step)
    device_j = np.flatnonzero(on_gpu)
    py_code = f.cat.code_of(_PY)
    if ours is not None:  # our own file: every slice carries its record, except the ranges it exports
        d2l = f.args["d2l"]
        has = np.fromiter((isinstance(d2l.get(i), dict) for i in x_idx.tolist()), dtype=bool, count=len(x_idx))
        ranges = np.concatenate([steps_j, notes_j, device_j])
        missing = int((~has).sum() - (~has[ranges]).sum())
        if missing:
            raise TraceError(f"{path}: {missing} slices lack their args.d2l record; "
                             "was the file edited after d2l_async wrote it?")
        keep = has
        skipped: dict[str, int] = {}
    else:
        keep = (ecat != 0) & ~is_step
        if python_stack and py_code >= 0:
            py_x = cat_x == py_code
            keep |= py_x
            ecat[py_x] = where[_PY]
        kept = np.bincount(cat_x[keep], minlength=len(cat_values))
        skipped = {str(cat_values[k]): int(cat_counts[k] - kept[k]) for k in present if cat_counts[k] - kept[k]}
        skipped.update({f"ph={k}": v for k, v in phases.items() if k not in ("X", "M", "s", "f", "i", "I", "C")})
    rows = x_idx[keep]
    n = len(rows)
    ek = ecat[keep]
    nk = name_x[keep]
    used = np.unique(nk)
    if n and not all(isinstance(v, str) for v in name_values[used].tolist()):
        raise TraceError(f"{path}: an event 'name' is not a string")
    names = Strings(nk, name_values)

    role_of = np.zeros(len(table), dtype=np.int8)
    kind_of = np.full(len(table), _KIND[Kind.OP.value], dtype=np.int8)
    for i, c in enumerate(table):
        if c in CATEGORIES:
            role_of[i], kind_of[i] = CATEGORIES[c][0], _KIND[CATEGORIES[c][1]]
        elif c == _PY:
            kind_of[i] = _KIND[Kind.PYTHON.value]
    role = role_of[ek]
    kind = kind_of[ek]
    back = role == BACK
    if "mtia_ccp_events" in raw_cats:  # MTIA's DMA requests move data
        mt = np.flatnonzero(ek == where.get("mtia_ccp_events", -1))
        kind[mt[_lut(name_values, lambda v: isinstance(v, str) and is_mtia_copy(v))[nk[mt]]]] = _KIND[Kind.COPY.value]

    b_rows = rows[back]
    step_rows = x_idx[np.concatenate([steps_j, notes_j, device_j])]
    if f.bad:  # a value that could not be converted, in an event the trace uses: say which
        both = np.concatenate([rows, step_rows])
        check_values(f.bad, {"ts": both, "dur": both, "correlation": rows,
                             "stream": b_rows, "device": b_rows, "bytes": b_rows}, f.name, path)
    ts = _numbers(f.ts[rows], np.float64)
    dur = _numbers(f.dur[rows], np.float64)
    corr = _numbers(f.args["correlation"][rows], np.int64)
    stream_b = _numbers(f.args["stream"][b_rows], np.int64)
    dev_b = _numbers(f.args["device"][b_rows], np.int64)
    bytes_b = _numbers(f.args["bytes"][b_rows], np.int64)
    for col, label in ((ts, "ts"), (dur, "dur")):
        bad = ~np.isfinite(col)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise TraceError(f"{path}: event {names[j]!r} has a non-numeric or missing {label!r}")
    if (dur < 0).any():
        j = int(np.flatnonzero(dur < 0)[0])
        raise TraceError(f"{path}: event {names[j]!r} has a negative duration")

    # -- times: microseconds -> seconds from the trace start
    origin = float(ours.get("origin_us", 0.0)) if ours is not None else (float(ts.min()) if n else 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        start = (ts - origin) / 1e6
        end = start + dur / 1e6
    bad = ~(np.isfinite(start) & np.isfinite(end)) | (np.abs(ts) > _MAX_US) | (dur > _MAX_US)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise TraceError(f"{path}: event {names[j]!r} has 'ts'/'dur' out of range ({ts[j]!r}, {dur[j]!r} µs): "
                         f"a profiler time is below {_MAX_US:.0e} µs (3,000 years)")
    del ts, dur

    thread_names, device_pids, conflicts = metadata(f)
    for why in conflicts:
        warnings.warn(f"{path}: {why}", NameConflict, stacklevel=3)
    lane_names: list[str] = []
    lane_code = np.zeros(n, dtype=np.int32)
    devices: list[str] = ["", "cpu"]
    device_code = np.zeros(n, dtype=np.int32)
    lanes: list[Lane] = []
    prefix = device_prefix(set(raw_cats))
    nbytes = np.zeros(n, dtype=np.int64)
    nbytes[back] = bytes_b
    if back.any():
        pid_b = np.array([p if type(p) is int and -2**63 <= p < 2**63 else -1 for p in f.pid.categories.tolist()],
                         dtype=np.int64)[f.pid.codes[b_rows]]
        gdev = np.where(dev_b != -1, dev_b, pid_b)  # no args.device: the process is the device
        uniq, inv = device_pairs(gdev, stream_b)
        pair_names = [f"{prefix}:{d} stream {s}" if s != -1 else f"{prefix}:{d} (no stream)" for d, s in uniq]
        dev_names = list(dict.fromkeys(f"{prefix}:{d}" for d, _ in uniq))
        dev_index = {d: len(devices) + i for i, d in enumerate(dev_names)}
        devices += dev_names
        lane_code[back] = inv
        device_code[back] = np.array([dev_index[f"{prefix}:{d}"] for d, _ in uniq], dtype=np.int32)[inv]
        lane_names += pair_names
        lanes += [Lane(nm, LaneRole.BACKEND, device=f"{prefix}:{d}", stream=int(s)) for nm, (d, s) in zip(pair_names, uniq)]
    front = np.flatnonzero(~back)
    fr = rows[front]
    lanes, thread_lane_names, lane_of, comm, thread_of = thread_lanes(
        lanes, front, f.pid.codes[fr], f.tid.codes[fr], f.pid.categories, f.tid.categories,
        ek[front] == where[COLLECTIVE_CATEGORY], ek[front] == where[_PY], thread_names, start, end)
    lane_code[front] = lane_of + len(lane_names)
    lane_names += thread_lane_names
    device_code[front[comm]] = 1  # "cpu": gloo's communication threads

    # -- runtime calls: launch / block / other, by name
    rt = np.flatnonzero(kind == _KIND[Kind.RUNTIME.value])
    if len(rt):
        launch_name = _lut(name_values, LAUNCH_CALLS.__contains__)
        sync_name = _lut(name_values, SYNC_CALLS.__contains__)
        kind[rt[launch_name[nk[rt]]]] = _KIND[Kind.LAUNCH.value]
        kind[rt[sync_name[nk[rt]]]] = _KIND[Kind.BLOCK.value]
        not_hta = np.bincount(nk[rt], minlength=len(name_values))
        not_hta = {v: int(not_hta[k]) for k, v in enumerate(name_values.tolist())
                   if not_hta[k] and v in NOT_HTA_LAUNCH_CALLS}
    else:
        not_hta = {}
    issue, flow, unmatched_gpu, unmatched_launch = _pair(back, corr, kind == _KIND[Kind.LAUNCH.value], start,
                                                         device_code)
    del corr
    reasons: list[Any] = [""]
    reason_code = np.zeros(n, dtype=np.int32)
    blk = np.flatnonzero(kind == _KIND[Kind.BLOCK.value])
    if ours is None:  # a cudaMemcpyAsync into pageable memory held the CPU until its copy was done: a wait
        held, why = blocking_copy_calls(kind == _KIND[Kind.COPY.value], kind == _KIND[Kind.LAUNCH.value], names,
                                        flow, back)
        kind[held] = _KIND[Kind.BLOCK.value]
    else:
        held, why = np.zeros(0, np.int64), []
    if len(blk):  # a wait's reason is the call's name
        reasons = ["", *name_values.tolist()]
        reason_code[blk] = nk[blk] + 1
    if len(held):
        extra = list(dict.fromkeys(why))
        at = {r: len(reasons) + i for i, r in enumerate(extra)}
        reasons += extra
        reason_code[held] = [at[r] for r in why]

    known = {c for c in raw_cats if category(c) is not None or c == _PY}
    generations = sorted({CATEGORIES[category(c)][2] for c in known if category(c)})
    not_placed = unplaced(f, x_idx, canon, device_pids) if ours is None else []
    device = device_names(f.top) or ("GPU" if back.any() and prefix == "cuda" else
                                   "MTIA" if back.any() else "CPU only")
    if not_placed:
        device = f"{device if device != 'CPU only' else 'a device'} (events not placed: {', '.join(not_placed)})"
        warnings.warn(f"{path}: device events in categories the reader does not know were skipped: "
                      f"{not_placed}; the figures miss them", UnplacedDeviceEvents, stacklevel=3)
    meta: dict[str, Any] = {
        "source": "chrome", "path": str(path), "device": device,
        "unmatched_launches": unmatched_launch, "unmatched_gpu_ops": unmatched_gpu,
        "skipped": skipped, "origin_us": origin, "generations": generations,
        "file": {k: v for k, v in f.top.items() if k not in (_FORMAT_KEY, "deviceProperties")},
    }
    if not_placed:
        meta["unplaced_device_events"] = not_placed
    if not_hta:  # launches HTA 0.5.0 does not count (_kineto.NOT_HTA_LAUNCH_CALLS)
        meta["launches_not_in_hta"] = not_hta
    if "baseTimeNanoseconds" in f.top:
        meta["base_time_ns"] = f.top["baseTimeNanoseconds"]
    steps = _ranges(f, x_idx[steps_j], origin, thread_of)
    if steps:
        meta["steps"] = steps
    notes = _ranges(f, x_idx[notes_j], origin, thread_of)
    if notes:
        meta["annotations"] = notes
    gpu_notes = _device_ranges(f, x_idx[device_j], origin, prefix)
    if gpu_notes:
        meta["device_annotations"] = gpu_notes
    cols: dict[str, Any] = {
        "id": np.arange(n, dtype=np.int64),
        "lane": Coded(lane_code, np.array(lane_names, dtype=object)),
        "kind": Coded(kind, _KINDS), "name": Coded(nk, name_values), "issue": issue, "start": start, "end": end,
        "device": Coded(device_code, np.array(devices, dtype=object)),
        "flow": flow, "reason": Coded(reason_code, np.array(reasons, dtype=object)), "nbytes": np.maximum(nbytes, 0),
    }
    if ours is not None:
        cols = {k: v.decode() if isinstance(v, Coded) else v for k, v in cols.items()}
        lanes, cols, meta = _apply_ours(ours, [f.args["d2l"].get(i) for i in rows.tolist()], cols, meta, path)
        return Trace.from_columns(cols, lanes, meta)
    return _lean_trace(cols, lanes, meta, n)


def _pair(back, corr, is_launch, start, device_code):
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
    device_code[launch_rows] = device_code[bc_idx[hit]]  # a launch targets its op's device
    launches = np.flatnonzero(is_launch)
    matched = np.isin(flow[launches], flow[bc_idx[hit]])
    return issue, flow, int(len(bc_idx) - hit.sum()), int((~matched).sum())


def _ranges(f: Fields, idx: np.ndarray, origin: float, thread_of: dict[Any, str]) -> list[dict[str, Any]]:
    """CPU ranges by start: ``name``, ``start``, ``end`` (seconds) and ``lane`` (their thread's lane,
    ``""`` when that thread has no lane).

    For the ``ProfilerStep#N`` ranges ``torch.profiler.schedule`` marks: they tell where each
    training step began; HTA drops the work launched in the last one, which may be partial, before
    computing its queue statistics (``include_last_profiler_step``).  The writer exports them (and
    the other user annotations) as ``user_annotation`` slices again, so HTA and Perfetto see them.
    """
    out = []
    for i in idx.tolist():
        start = (float(f.ts[i]) - origin) / 1e6
        out.append({"name": f.name[i], "start": start, "end": start + float(f.dur[i] or 0) / 1e6,
                    "lane": thread_of.get((f.pid[i], f.tid[i]), "")})
    return sorted(out, key=lambda d: d["start"])


def _device_ranges(f: Fields, idx: np.ndarray, origin: float, prefix: str) -> list[dict[str, Any]]:
    """The GPU's copies of annotation ranges (``gpu_user_annotation``), by start: ``name``,
    ``start``, ``end`` (seconds), the ``device`` and ``tid`` the file put them on, and their
    ``args.stream`` and ``args.correlation`` (-1: none).

    They are not work, but they are rows HTA reads: ROCm writes a device-side ``ProfilerStep#N``
    for each step *without* a stream or a correlation id, so HTA's filter of the profiler steps
    (its "CPU" rows: not ``stream >= 0 and correlation >= 0``) takes it for a step, and its last
    step starts where the GPU began that step, after the CPU did.
    :func:`~d2l_async.trace.last_step_starts` does the same; the writer exports them as written.
    """
    out = []
    stream, corr = f.args["stream"], f.args["correlation"]
    for i in idx.tolist():
        start = (float(f.ts[i]) - origin) / 1e6
        pid = f.pid[i]
        out.append({"name": f.name[i], "start": start, "end": start + float(f.dur[i] or 0) / 1e6,
                    "device": f"{prefix}:{pid}" if type(pid) is int else str(pid), "tid": f.tid[i],
                    "stream": int(stream[i]) if stream[i] is not None else -1,
                    "correlation": int(corr[i]) if corr[i] is not None else -1})
    return sorted(out, key=lambda d: d["start"])


def _lean_trace(cols: dict[str, Any], lanes: list[Lane], meta: dict[str, Any], n: int) -> Trace:
    """The trace, lean (``_columns.py``): string columns stay codes, the columns no Chrome event
    fills (``deps``, ``reads``, ``writes``, ``source``) take no row storage; each is made a plain
    column the first time it is read."""
    out: dict[str, Any] = {}
    none = np.zeros(n, dtype=np.int8)
    for name, dtype in COLUMNS.items():
        if name in cols:
            col = cols[name]
            if isinstance(col, np.ndarray):
                col = np.asarray(col, dtype=dtype)
                col.flags.writeable = False
        elif name in ("deps", "reads", "writes"):
            col = Ragged(none, np.zeros(0, dtype=np.int64))
        else:
            col = Coded(none, np.array([_DEFAULTS[name]], dtype=object))
        out[name] = col
    return Trace.from_lean(out, lanes, meta)
