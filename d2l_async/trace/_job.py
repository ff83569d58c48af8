"""Do the files of a ``trace_dir`` belong to one distributed job?

A folder of per-rank traces is merged into one timeline (``_ranks.py``).  Nothing in the folder
guarantees that its files came from one run: a folder of downloads can hold rank 3 of an
8-GPU job from 2022 beside ranks 0 and 1 of a 2-process gloo run from 2026, and merged they make
one 1,462-day timeline whose "ranks" never ran together.  Before merging, :func:`job_problems`
compares what the files say about themselves::

    distributedInfo.world_size   one value for every file that has one
    distributedInfo.backend      one value (nccl, gloo, ...)
    rank < world_size            for every file
    time range                   every rank's [first event, last event] on the profiler's clock
                                 shares some instant with every other rank's (they ran together)

Each problem names the files.  :func:`~d2l_async.trace.read_trace_dir` warns with them
(:class:`MixedJobs`) and merges anyway, or raises with ``strict=True``.  Files without a
``distributedInfo`` or without an absolute clock are not judged on what they lack.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._model import Trace

__all__ = ["MixedJobs", "job_problems", "origin_ns"]

_DAY_NS = 86_400 * 10**9


class MixedJobs(UserWarning):
    """The files of a trace folder do not look like one job (the message names them)."""


def _info(trace: Trace) -> dict[str, Any]:
    info = (trace.meta.get("file") or {}).get("distributedInfo")
    return info if isinstance(info, dict) else {}


def origin_ns(trace: Trace) -> int | None:
    """The trace's time zero in integer ns on the profiler's clock, or None when unknown."""
    origin = trace.meta.get("origin_us")
    if origin is None or trace.meta.get("source") == "engine":
        return None
    try:
        base = int(trace.meta.get("base_time_ns") or 0)
        return base + int(round(float(origin) * 1000.0))
    except (TypeError, ValueError, OverflowError):
        return None


def _span_ns(trace: Trace) -> tuple[int, int] | None:
    """The trace's [first, last] instant in ns on the profiler's clock, or None without one."""
    zero = origin_ns(trace)
    if zero is None or not len(trace):
        return None
    lo = float(np.nanmin(np.concatenate([trace["start"], trace["issue"]])))
    hi = float(np.nanmax(trace["end"]))
    return zero + int(round(lo * 1e9)), zero + int(round(hi * 1e9))


def _when(ns: int) -> str:
    import datetime

    if ns < 10**17:  # not Unix time (a clock relative to something else)
        return f"{ns / 1e9:.3f} s"
    return datetime.datetime.fromtimestamp(ns / 1e9, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _differ(files: dict[int, Path], values: dict[int, Any], what: str) -> list[str]:
    if len(set(map(repr, values.values()))) <= 1:
        return []
    listed = ", ".join(f"{files[r].name}: {values[r]!r}" for r in sorted(values))
    return [f"{what} differ ({listed})"]


def job_problems(traces: dict[int, Trace], files: dict[int, Path]) -> list[str]:
    """Why the per-rank traces would not be one job (empty when they look like one).

    Args:
        traces: rank -> that rank's trace, as read from its file.
        files: rank -> the file (named in the problems).
    """
    infos = {r: _info(t) for r, t in traces.items()}
    problems = _differ(files, {r: i["world_size"] for r, i in infos.items() if "world_size" in i}, "world sizes")
    problems += _differ(files, {r: i["backend"] for r, i in infos.items() if "backend" in i}, "backends")
    for r, i in sorted(infos.items()):
        ws = i.get("world_size")
        if isinstance(ws, int) and not isinstance(ws, bool) and not 0 <= r < ws:
            problems.append(f"{files[r].name} is rank {r} of a world of {ws}")
    spans = {r: s for r, s in ((r, _span_ns(t)) for r, t in traces.items()) if s is not None}
    if len(spans) >= 2:
        late = max(spans, key=lambda r: spans[r][0])  # starts last
        early = min(spans, key=lambda r: spans[r][1])  # ends first
        gap = spans[late][0] - spans[early][1]
        if gap > 0:
            far = (f"{gap / _DAY_NS:,.0f} days" if gap >= 2 * _DAY_NS else
                   f"{gap / 3.6e12:.1f} hours" if gap >= 3.6e12 else f"{gap / 1e9:.3f} s")
            problems.append(f"their time ranges do not overlap: {files[late].name} starts at "
                            f"{_when(spans[late][0])}, {far} after {files[early].name} ends "
                            f"({_when(spans[early][1])}); the ranks of one job are profiled together")
    return problems
