"""Write a :class:`~d2l_async.trace.Trace` as Chrome Trace Event JSON that Perfetto opens.

The file has, for https://ui.perfetto.dev or chrome://tracing::

    process "frontend (CPU threads)"   thread per frontend lane   X slices: ops, launches, blocks
    process "cuda:0" / "cpu:1 (virtual)" thread per backend lane  X slices: kernels, copies, ops
    flow arrows  s (at the issue, on the frontend) -> f (at the start, on the backend lane)
    counters     C "queue <lane>": launch-queue length of each backend lane (HTA's definition)

Times are written in microseconds rounded to whole nanoseconds (``ts``, ``dur``, flow and counter
times alike), so slices that touch in the trace touch in the file.  Every column the Chrome format
has no field for is kept in ``args["d2l"]``, and the lanes and meta
in a top-level ``"d2l_async"`` record, so :func:`~d2l_async.trace.read_chrome_trace` gives back
the same trace and the same analysis.  Traces that came from the profiler keep Kineto's categories
(``cpu_op``, ``cuda_runtime``, ``kernel``, ...); others use the kind as the category.

So that other tools read an export as this package does (HolisticTraceAnalysis 0.5.0
is the oracle in ``tests/trace/test_hta_round_trip.py``), a profiler trace's export also has

* ``distributedInfo`` (``rank``, ``world_size``, ``backend``, as the rank's own file had it), first
  in the file: HTA takes a file's rank from the first ``"rank": N`` it finds, else calls it rank 0;
* ``baseTimeNanoseconds`` and every ``ts`` on the original file's clock (the same numbers, to the
  nanosecond: HTA rounds them to whole microseconds and compares some of them unaligned, so only
  the original numbers give its original results; ``0`` when the original's times were absolute);
* the ``ProfilerStep#N`` ranges and the other user annotations (``meta["steps"]``,
  ``meta["annotations"]``) as ``user_annotation`` slices on their threads: HTA's default analysis
  leaves out the last step, and Perfetto shows the steps; and the GPU's copies of them
  (``meta["device_annotations"]``) as ``gpu_user_annotation`` slices on their device, with the
  stream and correlation id they had (none on ROCm, whose device-side steps HTA then counts as
  steps: ``last_step_starts``).

A merged multi-rank trace written to one file is for Perfetto (every rank in one view); HTA reads
one file per rank, which :func:`write_trace_dir` writes (HTA's ``trace_dir`` convention).
"""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from .._args import path as as_path
from ._chrome import _FORMAT_KEY, _KIND_TO_CAT
from ._model import Trace, TraceError
from ._queue import queue_steps, queued_mask
from ._job import origin_ns
from ._ranks import rank_metas, split_ranks

__all__ = ["write_chrome_trace", "write_trace_dir"]

_SEP = " · "


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def write_chrome_trace(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write ``trace`` as Chrome Trace Event JSON (gzip when the name ends in ``.gz``).

    Open the file at https://ui.perfetto.dev (or chrome://tracing).  Each lane is a thread,
    grouped by device; flow arrows join each issue to its start; a ``queue <lane>`` counter track
    shows the launch-queue length of each backend lane; profiler steps and user annotations are
    slices again.  A one-rank profiler trace keeps its ``distributedInfo`` and clock, so HTA reads
    the file as it read the original; for a merged multi-rank trace use :func:`write_trace_dir`.

    Args:
        trace: the trace to write.
        path: where to write; parent folders must exist.

    Returns:
        The path written.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"write_chrome_trace expects a Trace, got {type(trace).__name__}")
    path = as_path("path", path)
    # the profiler's clock: the original ts numbers again (times from the trace start for traces
    # without one: engine recordings)
    base_ns, zero_us = _clock(trace)
    m_ts = float(_us(zero_us, np.zeros(1))[0])  # metadata at the trace start, as Kineto writes it (HTA reads every ts)
    # lane -> (pid, tid): frontend threads in pid 1, each device in its own pid
    pids: dict[str, int] = {"": 1}
    lane_key: dict[str, tuple[int, int]] = {}
    out: list[dict[str, Any]] = []
    for i, lane in enumerate(trace.lanes):
        group = "" if lane.is_frontend else (lane.device or "backend")
        if lane.group:  # one process per rank and device: ranks stay apart in Perfetto
            group = f"{lane.group}{_SEP}{group or 'frontend (CPU threads)'}"
        pid = pids.setdefault(group, len(pids) + 1)
        # a stream's number as its thread id (viewers take 32-bit tids; args.stream keeps any id)
        tid = lane.stream if (not lane.is_frontend and 0 <= lane.stream < 2**31) else 1000 + i
        if (pid, tid) in lane_key.values():  # two lanes claiming one stream number stay apart
            tid = 1000 + i
        lane_key[lane.name] = (pid, tid)
        out.append({"ph": "M", "name": "thread_name", "ts": m_ts, "pid": pid, "tid": tid, "args": {"name": lane.name}})
        out.append({"ph": "M", "name": "thread_sort_index", "ts": m_ts, "pid": pid, "tid": tid, "args": {"sort_index": i}})
    for group, pid in pids.items():
        label = "frontend (CPU threads)" if group == "" else (group + (" (virtual)" if _virtual(trace, group) else ""))
        if group and _SEP in group and not group.endswith("frontend (CPU threads)"):
            label = group + (" (virtual)" if _virtual(trace, group.split(_SEP, 1)[1]) else "")
        out.append({"ph": "M", "name": "process_name", "ts": m_ts, "pid": pid, "tid": 0, "args": {"name": label}})
        out.append({"ph": "M", "name": "process_sort_index", "ts": m_ts, "pid": pid, "tid": 0, "args": {"sort_index": pid}})

    c = trace.columns
    n = len(trace)
    bad = ~(np.isfinite(c["start"]) & np.isfinite(c["end"]))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise TraceError(f"{path}: cannot write event {c['name'][j]!r} on lane {c['lane'][j]!r}: its start/end "
                         f"({c['start'][j]!r}, {c['end'][j]!r}) is not a finite time")
    # whole nanoseconds: µs * 1e6 leaves float noise (977.9999999999999) that makes slices which
    # touch overlap by < 1 ns in a viewer; end and start are rounded alike, so touching stays touching
    us_start = _us(zero_us, c["start"]).tolist()
    us_dur = _us_dur(c["start"], c["end"]).tolist()
    us_issue = _us(zero_us, c["issue"]).tolist()
    lanes_l = c["lane"].tolist()
    kinds = c["kind"].tolist()
    flows = c["flow"].tolist()
    names = c["name"].tolist()
    ids = c["id"].tolist()
    issue_l = c["issue"].tolist()
    backend = {l.name for l in trace.backend_lanes}
    # where each flow is issued from: the frontend event carrying the same flow id, if any
    flow_src: dict[int, str] = {}
    for j in range(n):
        if flows[j] >= 0 and lanes_l[j] not in backend:
            flow_src.setdefault(flows[j], lanes_l[j])
    first_front = trace.frontend_lanes[0].name if trace.frontend_lanes else None
    # Kineto's categories only for traces that came from the profiler: an engine's "print" block
    # is no cuda_runtime call
    profiler = trace.meta.get("source") in ("chrome", "cuda", "cpu")
    for j in range(n):
        pid, tid = lane_key[lanes_l[j]]
        d2l = {"lane": lanes_l[j], "id": ids[j], "kind": kinds[j], "flow": flows[j]}
        for name in ("source", "reason", "device"):
            v = c[name][j]
            if v:
                d2l[name] = v
        if c["nbytes"][j]:
            d2l["nbytes"] = int(c["nbytes"][j])
        for name in ("deps", "reads", "writes"):
            if len(c[name][j]):
                d2l[name] = _jsonable(c[name][j])
        if not math.isnan(issue_l[j]):
            d2l["issue"] = (us_issue[j] - zero_us) / 1e6  # the ns-rounded time, as start and end are
        args: dict[str, Any] = {"d2l": d2l}
        if flows[j] >= 0:
            args["correlation"] = flows[j]
        if lanes_l[j] in backend:
            lane = trace.lane(lanes_l[j])
            args["stream"] = lane.stream
            if c["nbytes"][j]:
                args["bytes"] = int(c["nbytes"][j])
        cat = _KIND_TO_CAT.get(kinds[j], "cpu_op") if profiler else kinds[j]
        out.append({"ph": "X", "cat": cat, "name": names[j], "pid": pid,
                    "tid": tid, "ts": us_start[j], "dur": max(us_dur[j], 0.0), "args": args})
        # flow arrow: issue on the frontend -> start on the backend lane
        if lanes_l[j] in backend and not math.isnan(us_issue[j]):
            src = flow_src.get(flows[j], first_front) if flows[j] >= 0 else first_front
            if src is not None:
                spid, stid = lane_key[src]
                fid = int(ids[j]) + 1
                out.append({"ph": "s", "cat": "issue", "name": "issue", "id": fid, "pid": spid, "tid": stid,
                            "ts": us_issue[j]})
                out.append({"ph": "f", "cat": "issue", "name": "issue", "id": fid, "pid": pid, "tid": tid,
                            "ts": us_start[j], "bp": "e"})
    out.extend(_ranges(trace, lane_key, zero_us))
    out.extend(_queue_counters(trace, lane_key, zero_us))
    _whole_numbers(out)
    head: dict[str, Any] = {}
    info = _distributed_info(trace)
    if info:
        head["distributedInfo"] = info
    if base_ns is not None:
        head["baseTimeNanoseconds"] = base_ns
    doc = {
        "traceEvents": out,
        "displayTimeUnit": "ms",
        _FORMAT_KEY: {
            "version": 1,
            "origin_us": zero_us,
            "lanes": [{"name": l.name, "role": l.role.value, "device": l.device, "virtual": l.virtual,
                       "stream": l.stream, "group": l.group, "rank": l.rank} for l in trace.lanes],
            "meta": _jsonable({k: v for k, v in trace.meta.items() if k != "path"}),
        },
    }
    data = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
    # the head first, spaced as Kineto writes it: HTA finds a file's rank with '"rank":\\s+(\\d+)';
    # written in pieces, so a large trace's encoded body is not copied once more to prepend it
    pieces = [json.dumps(_jsonable(head), allow_nan=False).encode()[:-1] + b", ", memoryview(data)[1:]] if head \
        else [data]
    try:
        with (gzip.open(path, "wb", compresslevel=6) if path.suffix == ".gz" else open(path, "wb")) as f:
            for piece in pieces:
                f.write(piece)
    except OSError as exc:
        raise TraceError(f"{path}: cannot write the trace ({exc})") from exc
    return path


def _virtual(trace: Trace, device: str) -> bool:
    return any(l.virtual for l in trace.backend_lanes if l.device == device)


#: µs below which times are rounded to whole ns (2**33 µs, 2.4 hours, where a float's spacing is
#: 0.002 ns); larger values are an original's own clock (~1e12-1e15 µs), kept as the float it held
_ROUND_BELOW = 2.0**33


def _us(zero_us: float, seconds: np.ndarray) -> np.ndarray:
    """Seconds from the trace start as µs on the file's clock.

    Rounded to whole ns where a float has room for them (times from the trace start); on an
    original's absolute clock (``zero_us`` ~1e12–1e15) the sum is already the float the original
    file held (rounding there, by multiplying by 1000, would move it by a float step).
    """
    x = zero_us + seconds * 1e6
    return np.where(np.abs(x) < _ROUND_BELOW, np.round(x, 3), x)


def _us_dur(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Durations in whole ns, from times relative to the trace start (small numbers: exact ns)."""
    return np.round(np.round(end * 1e6, 3) - np.round(start * 1e6, 3), 3)


def _whole_numbers(events: list[dict[str, Any]]) -> None:
    """Write times as JSON integers when every one is whole, as Kineto writes µs traces.

    HTA rounds float times (ns traces) but not integer ones, and its unstable sort orders equal
    times by the column's type: only the original's number type gives the original's order.
    """
    for e in events:
        for key in ("ts", "dur"):
            v = e.get(key)
            if v is not None and not float(v).is_integer():
                return
    for e in events:
        for key in ("ts", "dur"):
            if key in e:
                e[key] = int(e[key])


def _clock(trace: Trace) -> tuple[int | None, float]:
    """``(baseTimeNanoseconds, µs of the trace's time zero)`` of a profiler trace, ``(None, 0.0)``
    for one without a profiler clock."""
    if origin_ns(trace) is None:
        return None, 0.0
    return int(trace.meta.get("base_time_ns") or 0), float(trace.meta["origin_us"])


def _distributed_info(trace: Trace) -> dict[str, Any] | None:
    """The ``distributedInfo`` of a one-rank trace: :func:`split_ranks`' ``meta["distributed"]``,
    else the rank's own file's; None for a merged trace (several ranks) or when unknown."""
    if trace.ranks:
        return None
    info = trace.meta.get("distributed")
    if not isinstance(info, dict):
        info = (trace.meta.get("file") or {}).get("distributedInfo")
    if not isinstance(info, dict) or type(info.get("rank")) is not int:
        return None
    return {"rank": info["rank"], **{k: v for k, v in info.items() if k != "rank"}}


def _ranges(trace: Trace, lane_key: dict[str, tuple[int, int]], zero_us: float) -> list[dict[str, Any]]:
    """``user_annotation`` slices for the profiler steps and user annotations the reader kept
    (``meta["steps"]``, ``meta["annotations"]``), and ``gpu_user_annotation`` slices for the GPU's
    copies of them (``meta["device_annotations"]``), of every rank in a merged trace."""
    if trace.ranks and isinstance(trace.meta.get("per_rank"), dict):
        per = [(f"rank {r}{_SEP}", shift, m) for r, shift, m in rank_metas(trace)]
    else:
        per = [("", 0.0, trace.meta)]
    fronts = [l.name for l in trace.frontend_lanes]
    out = []
    for prefix, shift, meta in per:
        for rec in list(meta.get("steps") or []) + list(meta.get("annotations") or []):
            if not isinstance(rec, dict):
                continue
            lane = prefix + str(rec.get("lane") or "")
            if lane not in lane_key:  # a thread without a lane: the rank's first frontend lane
                lane = next((f for f in fronts if f.startswith(prefix)), None)
            if lane is None:
                continue
            pid, tid = lane_key[lane]
            out.append(_slice("user_annotation", rec, pid, tid, shift, zero_us, {}))
        rank = int(prefix[len("rank "):-len(_SEP)]) if prefix else -1
        for rec in meta.get("device_annotations") or []:
            if not isinstance(rec, dict):
                continue
            # on the device's process, on the stream the file named (its tid), as the GPU shows them
            mine = [l for l in trace.backend_lanes if l.rank == rank and l.device == rec.get("device")]
            lane = next((l for l in mine if l.stream == rec.get("tid")), mine[0] if mine else None)
            if lane is None:
                lane = next((l for l in trace.lanes if l.rank == rank), None)
            if lane is None:
                continue
            pid, tid = lane_key[lane.name]
            args = {k: int(rec[k]) for k in ("stream", "correlation") if int(rec.get(k, -1)) >= 0}
            out.append(_slice("gpu_user_annotation", rec, pid, tid, shift, zero_us, args))
    return out


def _slice(cat: str, rec: dict[str, Any], pid: int, tid: int, shift: float, zero_us: float,
           args: dict[str, Any]) -> dict[str, Any]:
    se = np.array([float(rec["start"]) + shift, float(rec["end"]) + shift])
    return {"ph": "X", "cat": cat, "name": str(rec["name"]), "pid": pid, "tid": tid,
            "ts": float(_us(zero_us, se[:1])[0]), "dur": max(float(_us_dur(se[:1], se[1:])[0]), 0.0), "args": args}


def write_trace_dir(trace: Trace, folder: str | os.PathLike[str]) -> list[Path]:
    """Write a merged multi-rank trace as one file per rank, ``rank<R>.json.gz``: HTA's ``trace_dir``.

    Each file is that rank's own trace (:func:`~d2l_async.trace.split_ranks`) with its
    ``distributedInfo`` (rank, world size, backend) and its own clock, so
    ``hta.TraceAnalysis(trace_dir=folder)`` sees every rank and gives the numbers it gives on the
    rank files the trace was read from.  A one-rank trace is written as one file.

    Args:
        trace: a merged trace (:func:`~d2l_async.trace.merge_ranks`, ``read_trace_dir``) or
            one rank's trace.
        folder: created if missing; it must not hold other trace files (HTA would read them as
            ranks too).

    Returns:
        The files written, by rank.

    Raises:
        TraceError: the folder holds other ``.json``/``.gz`` files, or cannot be written.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"write_trace_dir expects a Trace, got {type(trace).__name__}")
    folder = as_path("folder", folder)
    if trace.ranks:
        parts = split_ranks(trace)
    else:
        info = _distributed_info(trace)
        parts = {info["rank"] if info else 0: trace}
    names = {r: folder / f"rank{r}.json.gz" for r in parts}
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceError(f"{folder}: cannot create the folder ({exc})") from exc
    others = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name.endswith((".json", ".gz"))
                    and p not in names.values())
    if others:
        raise TraceError(f"{folder}: already holds other trace files {others[:4]}; HTA would read them as "
                         "ranks of this job too: choose an empty folder")
    return [write_chrome_trace(t, names[r]) for r, t in parts.items()]


def _queue_counters(trace: Trace, lane_key: dict[str, tuple[int, int]], zero_us: float = 0.0) -> list[dict[str, Any]]:
    """Counter events for the issued-not-started queue of each backend lane (HTA's definition)."""
    out: list[dict[str, Any]] = []
    mask = queued_mask(trace)
    for lane in trace.backend_lanes:
        t, q = queue_steps(trace, lane.name, mask=mask)
        if not len(t):
            continue
        pid, _ = lane_key[lane.name]
        # one value per distinct time: the last step at that instant holds
        keep = np.append(t[1:] != t[:-1], True)
        cname = f"queue {lane.name}"
        for tt, qq in zip(_us(zero_us, t[keep]).tolist(), q[keep].tolist()):
            out.append({"ph": "C", "name": cname, "pid": pid, "ts": tt, "args": {"queue_length": qq}})
    return out
