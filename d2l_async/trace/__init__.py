"""The trace model every figure draws from: :class:`Trace`, its lanes and events.

Also reads and writes Chrome-trace JSON (:func:`read_chrome_trace`, :func:`write_chrome_trace`)
gives the launch-queue step function the analysis and the Perfetto export share, and merges the
traces of several ranks into one (:func:`merge_ranks`, :func:`read_trace_dir`, ``_ranks.py``).

Loads neither torch, plotly nor ipywidgets.
"""

from __future__ import annotations

from ._chrome import LAUNCH_CALLS, SYNC_CALLS, read_chrome_trace
from ._model import BACKEND_KINDS, COLUMNS, Event, Kind, Lane, LaneRole, Trace, TraceError
from ._perfetto import write_chrome_trace
from ._queue import queue_steps, queued_mask
from ._ranks import COLLECTIVE_PREFIXES, RankLanes, merge_ranks, rank_lanes, read_trace_dir

__all__ = [
    "BACKEND_KINDS", "COLLECTIVE_PREFIXES", "COLUMNS", "RankLanes", "merge_ranks", "rank_lanes", "read_trace_dir", "Event", "Kind", "LAUNCH_CALLS", "Lane", "LaneRole", "SYNC_CALLS",
    "Trace", "TraceError", "queue_steps", "queued_mask", "read_chrome_trace", "write_chrome_trace",
]
