"""Pure analysis of a :class:`~d2l_async.trace.Trace`: tables in, nothing drawn, nothing printed.

One module per question the chapter asks of a trace:

* ``_queue``   how far ahead of the backend is the frontend? (launch-queue length, HTA's definition)
* ``_blocked`` where did the frontend wait, and why?
* ``_busy``    how busy was each backend lane, and how much did lanes overlap?
* ``_memory``  how much memory did issued-but-unfinished work hold?
* ``_intervals`` how much of one set of intervals ran beside another?
* ``_comm``    per rank, how much communication was hidden behind the backward pass?

Uses numpy and pandas only: no torch, plotly or ipywidgets.
"""

from __future__ import annotations

from ._blocked import BLOCKED_COLUMNS, blocked_time
from ._busy import BUSY_COLUMNS, Overlap, busy_idle, overlap
from ._comm import RankComm, comm_overlap, comm_per_step, is_backward_name, step_windows
from ._intervals import intersection_seconds, intervals_union, overlap_counts, union_seconds
from ._memory import pending_memory_series
from ._queue import SUMMARY_COLUMNS, queue_length_series, queue_length_summary

__all__ = [
    "BLOCKED_COLUMNS", "BUSY_COLUMNS", "Overlap", "RankComm", "SUMMARY_COLUMNS", "blocked_time", "busy_idle",
    "comm_overlap", "comm_per_step", "intersection_seconds", "intervals_union", "is_backward_name", "overlap",
    "overlap_counts", "pending_memory_series", "queue_length_series", "queue_length_summary", "step_windows",
    "union_seconds",
]
