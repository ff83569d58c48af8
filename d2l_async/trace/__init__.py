"""The trace model every figure draws from: :class:`Trace`, its lanes and events.

Also reads and writes Chrome-trace JSON (:func:`read_chrome_trace`, :func:`write_chrome_trace`):
torch.profiler traces of every Kineto generation (2020–2026), CUDA, ROCm and MTIA (one category
table, ``_kineto.py``), a ``with_stack=True`` profile's Python call stack as lanes (``_stack.py``),
files of any size with little memory (``_json.py``); gives the launch-queue step function the
analysis and the Perfetto export share, with HTA's defaults (``_queue.py``); merges the traces
of several ranks into one, a lane group per rank (:func:`merge_ranks`, :func:`read_trace_dir`,
``_ranks.py``), after checking that a folder's files are one job's (``_job.py``); and writes
exports HTA reads as this package does, one file per rank for a merged trace
(:func:`write_trace_dir`, :func:`split_ranks`).  ``jax.profiler`` traces of JAX's CPU backend are read by
:func:`read_jax_trace` (``_jax.py``); :func:`read_trace` picks the reader a file's content asks for.

Loads neither torch, plotly nor ipywidgets.
"""

from __future__ import annotations

from ._chrome import EmptyTrace, read_chrome_trace
from ._columns import Coded, Ragged, segments
from ._job import MixedJobs
from ._jax import JAX_WAIT, read_jax_trace
from ._json import HAVE_MSGSPEC
from ._kineto import (BLOCKING_COPIES, BLOCKING_COPY_REASON, CATEGORIES, COLLECTIVE_PREFIXES, LAUNCH_CALLS, SYNC_CALLS,
                      NameConflict, UnplacedDeviceEvents)
from ._model import BACKEND_KINDS, COLUMNS, Event, Kind, Lane, LaneRole, Trace, TraceError
from ._perfetto import write_chrome_trace, write_trace_dir
from ._read import read_trace
from ._hta import hta_times, hta_window_mask, last_step_starts
from ._queue import HTA_ORDERS, hta_ties, launch_calls, queue_steps, queued_mask
from ._ranks import (MissingRanks, RankLanes, SkippedEntries, merge_ranks, rank_lanes,
                     rank_metas, read_trace_dir, split_ranks)
from ._stack import PYTHON_GROUP, is_python_lane

__all__ = [
    "BACKEND_KINDS", "BLOCKING_COPIES", "BLOCKING_COPY_REASON", "CATEGORIES", "EmptyTrace", "COLLECTIVE_PREFIXES", "HAVE_MSGSPEC", "JAX_WAIT", "MissingRanks", "MixedJobs", "NameConflict", "SkippedEntries", "PYTHON_GROUP", "UnplacedDeviceEvents",
    "HTA_ORDERS", "hta_ties", "hta_times", "hta_window_mask", "is_python_lane", "last_step_starts", "launch_calls", "COLUMNS", "RankLanes", "merge_ranks", "rank_lanes", "rank_metas", "read_trace_dir", "Event", "Kind", "LAUNCH_CALLS", "Lane", "LaneRole", "SYNC_CALLS",
    "Trace", "TraceError", "Coded", "Ragged", "segments", "queue_steps", "queued_mask", "read_chrome_trace", "read_jax_trace", "read_trace", "split_ranks", "write_chrome_trace", "write_trace_dir",
]
