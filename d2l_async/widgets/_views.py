"""Where a dashboard's figures appear: a live ``FigureWidget`` updated in place, or a plain redraw.

The plotly + ipywidgets pattern (STYLE.md) is to build a ``go.FigureWidget`` once and, on every
change, replace its trace data inside ``batch_update()``: the browser receives one small update
message and the plot does not flicker.  :func:`apply_figure` does that for any new ``go.Figure``,
including a figure with more, fewer or different traces than the one on screen.

Some front ends cannot show a ``FigureWidget``: Colab (ipywidgets 7.7.1, plotly 5.24; custom widgets
need a separate widget manager there) or any Python without ``anywidget`` (plotly >= 6 builds its
widget on it).  There :class:`OutputView` clears an ``ipywidgets.Output`` and displays the plain
``go.Figure`` again.  :func:`resolve_mode` picks one of the two so the same notebook runs in both
.

=================  =====================================================================
view               what ``.widget`` is, and how an update reaches the screen
=================  =====================================================================
``FigureView``     a ``go.FigureWidget``; traces and layout are replaced in place
``OutputView``     an ``ipywidgets.Output``; cleared, then ``display(go.Figure)``
=================  =====================================================================
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

import numpy as np
import plotly.graph_objects as go
from .._args import instance

__all__ = ["MODES", "FigureView", "OutputView", "apply_figure", "resolve_mode", "make_view"]

#: The display modes a dashboard accepts.
MODES = ("auto", "figurewidget", "output")

# The layout keys a FigureWidget keeps for itself; never cleared.
_KEEP_LAYOUT = {"template"}


def resolve_mode(mode: str = "auto") -> str:
    """The display mode to use: ``"figurewidget"`` or ``"output"``.

    ``"auto"`` chooses ``"output"`` in Colab (its FigureWidget support is unreliable) and where a
    ``go.FigureWidget`` cannot be created (no ``anywidget``, no ipywidgets); ``"figurewidget"``
    otherwise.

    Raises:
        ValueError: ``mode`` is not one of :data:`MODES`.
    """
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: use one of {MODES}")
    if mode != "auto":
        return mode
    from d2l_async.config import in_colab

    if in_colab():
        return "output"
    try:
        go.FigureWidget()
    except Exception:  # ImportError (anywidget missing), or a broken widget stack: redraw instead
        return "output"
    return "figurewidget"


def _same(a: Any, b: Any) -> bool:
    """Deep equality for plotly JSON (dicts, lists, numpy arrays) that never raises."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
        except Exception:
            return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return False


def _replace_props(obj: Any, old: Mapping[str, Any], new: Mapping[str, Any], keep: set[str]) -> None:
    """Make plotly object ``obj`` (a trace or the layout) hold exactly ``new``'s top-level props."""
    for key in old:
        if key not in new and key not in keep and key not in ("type", "uid"):
            obj[key] = None
    changed = {k: v for k, v in new.items() if k not in ("type", "uid") and not _same(old.get(k), v)}
    if changed:
        obj.update(changed, overwrite=True)


def apply_figure(widget: go.FigureWidget, figure: go.Figure) -> None:
    """Make ``widget`` show ``figure`` without replacing the widget object.

    Traces that keep their type are updated in place (inside one ``batch_update()``, so the
    browser gets one message); surplus traces are deleted, missing ones added.  Properties the old
    trace had and the new one lacks are cleared, so nothing stale (an old colour array, an old
    axis range) survives.

    Args:
        widget: the ``go.FigureWidget`` on screen.
        figure: the new figure (any ``go.Figure``; it is not modified).
    """
    instance("widget", widget, go.FigureWidget, what="plotly go.FigureWidget")
    if not isinstance(figure, go.Figure):
        raise TypeError(f"a figure function must return a plotly go.Figure, got {type(figure).__name__}")
    new_traces = [t.to_plotly_json() for t in figure.data]
    old_traces = [t.to_plotly_json() for t in widget.data]
    # keep the longest prefix of traces whose type is unchanged; a trace cannot change type in place
    keep = 0
    while keep < min(len(old_traces), len(new_traces)) and old_traces[keep].get("type") == new_traces[keep].get("type"):
        keep += 1
    if keep < len(old_traces):
        widget.data = widget.data[:keep]
    new_layout = figure.layout.to_plotly_json()
    old_layout = widget.layout.to_plotly_json()
    with widget.batch_update():
        for i in range(keep):
            _replace_props(widget.data[i], old_traces[i], new_traces[i], set())
        _replace_props(widget.layout, old_layout, new_layout, _KEEP_LAYOUT)
    if keep < len(new_traces):
        widget.add_traces(list(figure.data[keep:]))


class FigureView:
    """A ``go.FigureWidget`` that is created once and updated in place.

    Attributes:
        widget: the ``go.FigureWidget`` (the same object for the dashboard's whole life).
        figure: what is shown now (the widget itself).
        updates: how many times :meth:`show` has updated it.
    """

    mode = "figurewidget"

    def __init__(self, figure: go.Figure | None = None) -> None:
        self.widget = go.FigureWidget(figure if figure is not None else go.Figure())
        self.updates = 0
        self._lock = threading.Lock()  # the live poller and the main thread may both draw

    @property
    def figure(self) -> go.FigureWidget:
        return self.widget

    def show(self, figure: go.Figure) -> None:
        """Replace what the widget shows by ``figure`` (in place)."""
        with self._lock:
            apply_figure(self.widget, figure)
            self.updates += 1


class OutputView:
    """The fallback: an ``ipywidgets.Output`` that is cleared and shows a plain ``go.Figure`` again.

    Attributes:
        widget: the ``ipywidgets.Output``.
        figure: the last ``go.Figure`` shown (``None`` before the first).
        updates: how many times :meth:`show` has redrawn.
    """

    mode = "output"

    def __init__(self, figure: go.Figure | None = None) -> None:
        import ipywidgets as widgets

        self.widget = widgets.Output()
        self.figure: go.Figure | None = None
        self.updates = 0
        self._lock = threading.Lock()
        if figure is not None:
            self.show(figure)

    def show(self, figure: go.Figure) -> None:
        """Clear the output area and display ``figure``."""
        if not isinstance(figure, go.Figure):
            raise TypeError(f"a figure function must return a plotly go.Figure, got {type(figure).__name__}")
        from IPython import get_ipython
        from IPython.display import clear_output, display

        with self._lock:
            self.figure = figure
            self.updates += 1
            if get_ipython() is None:  # plain Python (tests, scripts): nothing to draw on
                return
            with self.widget:
                clear_output(wait=True)
                display(figure)


def make_view(mode: str, figure: go.Figure | None = None) -> FigureView | OutputView:
    """A view for a resolved ``mode`` (``"figurewidget"`` or ``"output"``)."""
    if mode == "figurewidget":
        return FigureView(figure)
    if mode == "output":
        return OutputView(figure)
    raise ValueError(f"mode={mode!r}: resolve it first with resolve_mode(); use 'figurewidget' or 'output'")
