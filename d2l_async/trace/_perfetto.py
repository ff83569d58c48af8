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
"""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ._chrome import _FORMAT_KEY, _KIND_TO_CAT
from ._model import Trace, TraceError
from ._queue import queue_steps, queued_mask

__all__ = ["write_chrome_trace"]

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
    shows the launch-queue length of each backend lane.

    Args:
        trace: the trace to write.
        path: where to write; parent folders must exist.

    Returns:
        The path written.
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"write_chrome_trace expects a Trace, got {type(trace).__name__}")
    path = Path(path)
    # lane -> (pid, tid): frontend threads in pid 1, each device in its own pid
    pids: dict[str, int] = {"": 1}
    lane_key: dict[str, tuple[int, int]] = {}
    out: list[dict[str, Any]] = []
    for i, lane in enumerate(trace.lanes):
        group = "" if lane.is_frontend else (lane.device or "backend")
        if lane.group:  # one process per rank and device: ranks stay apart in Perfetto
            group = f"{lane.group}{_SEP}{group or 'frontend (CPU threads)'}"
        pid = pids.setdefault(group, len(pids) + 1)
        tid = lane.stream if (not lane.is_frontend and lane.stream >= 0) else 1000 + i
        if (pid, tid) in lane_key.values():  # two lanes claiming one stream number stay apart
            tid = 1000 + i
        lane_key[lane.name] = (pid, tid)
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": lane.name}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": i}})
    for group, pid in pids.items():
        label = "frontend (CPU threads)" if group == "" else (group + (" (virtual)" if _virtual(trace, group) else ""))
        if group and _SEP in group and not group.endswith("frontend (CPU threads)"):
            label = group + (" (virtual)" if _virtual(trace, group.split(_SEP, 1)[1]) else "")
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})

    c = trace.columns
    n = len(trace)
    bad = ~(np.isfinite(c["start"]) & np.isfinite(c["end"]))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise TraceError(f"{path}: cannot write event {c['name'][j]!r} on lane {c['lane'][j]!r}: its start/end "
                         f"({c['start'][j]!r}, {c['end'][j]!r}) is not a finite time")
    # whole nanoseconds: µs * 1e6 leaves float noise (977.9999999999999) that makes slices which
    # touch overlap by < 1 ns in a viewer; end and start are rounded alike, so touching stays touching
    us_start_a = np.round(c["start"] * 1e6, 3)
    us_end_a = np.round(c["end"] * 1e6, 3)
    us_start = us_start_a.tolist()
    us_dur = np.round(us_end_a - us_start_a, 3).tolist()
    us_issue = np.round(c["issue"] * 1e6, 3).tolist()
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
            d2l["issue"] = us_issue[j] / 1e6  # the ns-rounded time, as start and end are
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
    out.extend(_queue_counters(trace, lane_key))
    doc = {
        "traceEvents": out,
        "displayTimeUnit": "ms",
        _FORMAT_KEY: {
            "version": 1,
            "origin_us": 0.0,
            "lanes": [{"name": l.name, "role": l.role.value, "device": l.device, "virtual": l.virtual,
                       "stream": l.stream, "group": l.group, "rank": l.rank} for l in trace.lanes],
            "meta": _jsonable({k: v for k, v in trace.meta.items() if k != "path"}),
        },
    }
    data = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
    if path.suffix == ".gz":
        data = gzip.compress(data, compresslevel=6)
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise TraceError(f"{path}: cannot write the trace ({exc})") from exc
    return path


def _virtual(trace: Trace, device: str) -> bool:
    return any(l.virtual for l in trace.backend_lanes if l.device == device)


def _queue_counters(trace: Trace, lane_key: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
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
        for tt, qq in zip(np.round(t[keep] * 1e6, 3).tolist(), q[keep].tolist()):
            out.append({"ph": "C", "name": cname, "pid": pid, "ts": tt, "args": {"queue_length": qq}})
    return out
