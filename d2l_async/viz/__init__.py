"""Figures of the chapter, drawn from any :class:`~d2l_async.trace.Trace`.

Every function here is pure: it takes data and returns a ``plotly.graph_objects.Figure`` — no
``show()``, no files written, no experiment run.  Each figure has a data step that can be tested on
its own (:func:`timeline_data`, :func:`queue_data`, :func:`dependency_graph`,
:func:`expression_graph`, :func:`node_states`, :func:`measurement_table`, :func:`queue_at`,
:func:`sweep_table`) and a
drawing step; colours, fonts and units come from :mod:`d2l_async.viz.style`.

Every figure also carries a short text alternative computed from its data — its title and the one
fact it shows — for a screen reader or a page whose plots do not draw: ``viz.alt_text(fig)``
returns it (the static site writes it as each figure's ``aria-label``).

=========================  ==============================================================
figure                     what it shows
=========================  ==============================================================
plot_timeline              frontend and backend lanes, ops, queue connectors, blocked spans
plot_queue_length          queued (and in-flight) work per backend lane, cap, pending memory
plot_trace                 the two above, sharing the time axis
animate_timeline           the timeline and a queue counter, revealed frame by frame
plot_dependency_graph      the DAG of arrays and ops, animated queued → ready → running → done
plot_measurements          naive vs synchronized timings with their spread, book marks
plot_scheduling_overhead   the engine's per-op cost against its number of workers
plot_blocked_time          where the frontend waited, per cause
plot_sweep                 sync/async time ratio against op count, a line per tensor size
plot_comm_overlap          communication per rank: hidden behind backward, or exposed
=========================  ==============================================================
"""

from __future__ import annotations

from . import style
from ._animate import animate_timeline, queue_at
from ._blocked import plot_blocked_time
from ._comm import comm_table, join_wait, plot_comm_overlap
from ._describe import alt_text
from ._graph import DependencyGraph, dependency_graph, expression_graph, frontend_status, node_states
from ._graph_figure import plot_dependency_graph
from ._measurements import measurement_table, plot_measurements, plot_scheduling_overhead
from ._queue import QueueData, plot_queue_length, plot_trace, queue_data
from ._sweep import plot_sweep, sweep_table
from ._timeline import TimelineData, plot_timeline, timeline_data

#: the figures, each one's data steps (what a figure draws, as data) and its text alternative
__all__ = [
    "DependencyGraph", "QueueData", "TimelineData", "alt_text", "animate_timeline", "comm_table",
    "dependency_graph", "expression_graph", "frontend_status", "join_wait", "measurement_table", "node_states",
    "plot_blocked_time", "plot_comm_overlap", "plot_dependency_graph", "plot_measurements", "plot_queue_length",
    "plot_scheduling_overhead", "plot_sweep", "plot_timeline", "plot_trace", "queue_at", "queue_data", "style",
    "sweep_table", "timeline_data",
]
