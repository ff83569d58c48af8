"""Argument checks shared by the analysis functions."""

from __future__ import annotations

from ..trace import Lane, Trace


def check_trace(trace: object) -> None:
    if not isinstance(trace, Trace):
        raise TypeError(f"expected a d2l_async.trace.Trace, got {type(trace).__name__}; "
                        "load one with read_chrome_trace(path) or d2l_async.data.load_sample(name)")


def backend_lane(trace: Trace, name: str) -> Lane:
    """The backend lane called ``name``, or a clear error."""
    if not isinstance(name, str):
        raise TypeError(f"lane must be a lane name (str), got {type(name).__name__}")
    lane = trace.lane(name)  # TraceError listing the lanes when unknown
    if lane.is_frontend:
        raise ValueError(f"lane {name!r} is a frontend lane; choose a backend lane: "
                         f"{[l.name for l in trace.backend_lanes]}")
    return lane
