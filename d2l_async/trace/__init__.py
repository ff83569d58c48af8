"""The trace model every figure draws from: :class:`Trace`, its lanes and events.

Loads neither torch, plotly nor ipywidgets.
"""

from __future__ import annotations

from ._model import BACKEND_KINDS, COLUMNS, Event, Kind, Lane, LaneRole, Trace, TraceError

__all__ = ["BACKEND_KINDS", "COLUMNS", "Event", "Kind", "Lane", "LaneRole", "Trace", "TraceError"]
