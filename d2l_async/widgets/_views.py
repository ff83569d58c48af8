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

import os
import threading
from typing import Any, Mapping

import numpy as np
import plotly.graph_objects as go
from .._args import instance

__all__ = ["MODES", "MODE_VARIABLE", "FigureView", "OutputView", "apply_figure", "drawn_size", "figure_widget",
           "publish_state", "view_state", "resolve_mode", "make_view"]

#: The display modes a dashboard accepts.
MODES = ("auto", "figurewidget", "output")
#: Sets what ``"auto"`` chooses for every dashboard (``figurewidget`` or ``output``): a front end where one
#: of them cannot draw (a lecturer's JupyterHub, a test that stands in for Colab) sets it once.
MODE_VARIABLE = "D2L_ASYNC_FIGURES"

# The layout keys a FigureWidget keeps for itself; never cleared.
_KEEP_LAYOUT = {"template"}
# The synced traits a new front-end view draws from: plotly >= 6 (anywidget), then plotly 5 (ipywidgets).
_STATE_TRAITS = (("_widget_data", "_widget_layout"), ("_data", "_layout"))


def resolve_mode(mode: str = "auto") -> str:
    """The display mode to use: ``"figurewidget"`` or ``"output"``.

    ``"auto"`` chooses what :data:`MODE_VARIABLE` (``D2L_ASYNC_FIGURES``) says when it is set; else
    ``"output"`` in Colab (its FigureWidget support is unreliable) and where a ``go.FigureWidget``
    cannot be created (no ``anywidget``, no ipywidgets); ``"figurewidget"`` otherwise.

    Returns:
        ``"figurewidget"`` or ``"output"``.

    Raises:
        ValueError: ``mode`` is not one of :data:`MODES`, or ``D2L_ASYNC_FIGURES`` names no mode.
    """
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: use one of {MODES}")
    if mode != "auto":
        return mode
    forced = os.environ.get(MODE_VARIABLE, "").strip()
    if forced:
        if forced not in MODES[1:]:
            raise ValueError(f"{MODE_VARIABLE}={forced!r}: use one of {MODES[1:]} (or unset it to choose by itself)")
        return forced
    from d2l_async.config import in_colab

    if in_colab():
        return "output"
    try:
        # what go.FigureWidget needs (anywidget on plotly >= 6, ipywidgets before), without making one: a
        # widget made to find out would open a model in the front end and stay in the notebook's widget state
        import plotly.basewidget  # noqa: F401
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


def drawn_size(figure: Any) -> tuple[int, int]:
    """What a browser holds of ``figure`` once it drew it: its traces, and their points (each trace's
    longest data array of x, y, z, values and base, summed), counted as a test reads plotly.js's ``gd.data``.

    Returns:
        ``(traces, points)``; ``(0, 0)`` for ``None`` (nothing shown yet).
    """
    if figure is None:
        return 0, 0
    points = 0
    for trace in figure.data:
        sizes = [np.size(v) for k in ("x", "y", "z", "values", "base")
                 if not isinstance(v := getattr(trace, k, None), (str, type(None))) and np.ndim(v) > 0]
        points += max(sizes, default=0)
    return len(figure.data), points


def publish_state(widget: go.FigureWidget) -> None:
    """Copy what ``widget`` shows into the synced state that a new front-end view is drawn from.

    A ``FigureWidget`` reaches the browser two ways: an update (``add_traces``, a restyle inside
    ``batch_update()``) travels as a one-shot message to the views that exist, and a view created later draws
    the widget's *synced state*.  plotly >= 6 builds the widget on anywidget and copies its traces into that
    state (``_widget_data``, ``_widget_layout``) only in ``FigureWidget._repr_mimebundle_``, which runs when
    the figure itself is displayed, never for a figure inside an ipywidgets box (upstream:
    github.com/plotly/plotly.py/issues/4998).  A dashboard draws its figures while its cell runs, before the
    cell's output (and so any view) exists: without this call every view would start from the empty figure the
    widget was created with, and the restyles that follow would change traces the view never had.  So after
    each update the state is copied the way plotly copies it, by the same method; the views that exist ignore
    the copy (they took the update message).  plotly 5 (ipywidgets 7, Colab) keeps its state traits itself:
    nothing to do.

    Args:
        widget: the ``go.FigureWidget`` to publish.
    """
    if "_widget_data" in widget.trait_names():
        widget._repr_mimebundle_()


def _decoded(value: Any) -> Any:
    """A synced plotly value with its binary arrays (``{"buffer", "dtype", "shape"}``) as numpy arrays."""
    if isinstance(value, dict):
        if {"buffer", "dtype", "shape"} <= value.keys():
            return np.frombuffer(value["buffer"], dtype=value["dtype"]).reshape(value["shape"])
        return {k: _decoded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_decoded(v) for v in value]
    return value


def view_state(widget: go.FigureWidget) -> dict[str, Any]:
    """What a new front-end view of ``widget`` would draw: its synced traces and layout.

    Read from ``widget.get_state()``, the state ipywidgets sends a front end that asks for it, not
    from ``widget.data``: the two differ when an update never reached the synced state.

    Args:
        widget: a ``go.FigureWidget`` (plotly 5, 6 or 7).

    Returns:
        ``{"data": [trace dicts], "layout": {...}}`` with binary arrays decoded to numpy arrays.
    """
    instance("widget", widget, go.FigureWidget, what="plotly go.FigureWidget")
    state = widget.get_state()
    for data_key, layout_key in _STATE_TRAITS:
        if data_key in state:
            return {"data": _decoded(list(state[data_key] or [])), "layout": _decoded(dict(state[layout_key] or {}))}
    raise TypeError(f"this plotly ({type(widget).__module__}) syncs no figure state the project knows: "
                    f"looked for {[d for d, _ in _STATE_TRAITS]} in {sorted(state)}")


def figure_widget(figure: go.Figure | None = None, *, classes: tuple[str, ...] = ()) -> go.FigureWidget:
    """A ``go.FigureWidget`` whose first message to the front end already carries ``figure``.

    An ipywidget announces itself with one message (the comm's opening, with its whole synced state)
    and then sends each change as an update.  A ``FigureWidget`` opens its comm before it has copied its
    traces into that state, so even a widget made *with* a figure reaches the front end as "empty,
    then updated".  A front end that is still loading the widget's code when the updates arrive (the
    first plotly figure of a page in Notebook 7, seen here) builds the model from the opening message
    alone and draws empty axes.  So this widget opens its comm only once its figure and CSS classes are
    in its state: a front end that gets the opening message has everything to draw.

    Args:
        figure: what the widget shows first (default: an empty figure).
        classes: CSS classes of the widget's views (``add_class``).

    Returns:
        The ``go.FigureWidget`` (a subclass of it), its comm open.
    """
    fig = figure if figure is not None else go.Figure()
    if not isinstance(fig, go.Figure):
        raise TypeError(f"figure must be a plotly go.Figure, got {type(fig).__name__}")
    widget = _OpenedWhenReady(fig)
    for name in classes:
        widget.add_class(name)
    publish_state(widget)
    widget._ready = True
    widget.open()
    return widget


class _OpenedWhenReady(go.FigureWidget):
    """A ``go.FigureWidget`` that ignores ``open()`` until :func:`figure_widget` has filled its state."""

    _ready = False

    def open(self) -> None:
        if self._ready:
            super().open()


class FigureView:
    """A ``go.FigureWidget`` made with its first figure (its first message to a front end carries it),
    then updated in place by :meth:`show` and :meth:`stream`.  A dashboard makes a new one per drawing
    (:class:`~d2l_async.widgets.Dashboard`); the live view streams its ticks into one.

    Attributes:
        widget: the ``go.FigureWidget``.
        figure: what is shown now (the widget itself).
        updates: how many figures it has shown (the first one included).
    """

    mode = "figurewidget"

    def __init__(self, figure: go.Figure | None = None) -> None:
        # the class is what the browser test looks for under a dashboard
        self.widget = figure_widget(figure, classes=("d2l-figure-view",))
        self.updates = 1 if figure is not None else 0
        self._lock = threading.Lock()  # the live poller and the main thread may both draw

    @property
    def figure(self) -> go.FigureWidget:
        return self.widget

    def show(self, figure: go.Figure) -> None:
        """Replace what the widget shows by ``figure`` (in place), for the views that exist and those to come."""
        with self._lock:
            apply_figure(self.widget, figure)
            publish_state(self.widget)
            self.updates += 1

    def stream(self, columns: Mapping[int, Mapping[str, Any]]) -> None:
        """Replace some traces' arrays, for the views that exist only: a live view's frequent ticks.

        Call :meth:`publish` after the last tick, so a view created later starts from it.

        Args:
            columns: trace index -> ``{property: array}`` (e.g. ``{0: {"x": t, "y": pending}}``).
        """
        with self._lock:
            with self.widget.batch_update():
                for index, props in columns.items():
                    self.widget.data[index].update(dict(props), overwrite=True)
            self.updates += 1

    def publish(self) -> None:
        """Copy what the widget shows now into the state new views are drawn from (see :func:`publish_state`)."""
        with self._lock:
            publish_state(self.widget)


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
        self.widget.add_class("d2l-figure-view")
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
    """A view for a resolved ``mode`` (``"figurewidget"`` or ``"output"``), showing ``figure`` if given.

    Returns:
        A :class:`FigureView` or an :class:`OutputView`.
    """
    if mode == "figurewidget":
        return FigureView(figure)
    if mode == "output":
        return OutputView(figure)
    raise ValueError(f"mode={mode!r}: resolve it first with resolve_mode(); use 'figurewidget' or 'output'")
