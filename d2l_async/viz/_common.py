"""Helpers shared by the figure modules: input checks, the "no events" figure, decimation."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from ..trace import Trace
from . import style


def check_trace(trace: Any, func: str) -> Trace:
    """Return ``trace`` if it is a :class:`~d2l_async.trace.Trace`, else raise a TypeError."""
    if not isinstance(trace, Trace):
        raise TypeError(
            f"{func}() expects a d2l_async.trace.Trace, got {type(trace).__name__}; "
            "get one from eng.trace(), d2l_async.data.load_sample(...) or Trace.from_chrome_trace(path)"
        )
    return trace


def check_positive_int(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def two_line_title(head: str, details: str = "") -> str:
    """A short first line and, when given, the details in a smaller second line.

    A FigureWidget in a notebook is about 650 px wide: a title past ~60 characters is clipped, so
    the first line says what the figure is and the details (device, counts) go below it.
    """
    return f"{head}<br><sup>{details}</sup>" if details else head


def modelled_note(title: str, meta: Any) -> str:
    """``title`` with the modelled-device label of a trace whose durations come from a cost model
    (``meta["modelled_label"]``, set by the engine; see ``d2l_async.engine._modelled``), said once."""
    label = str((meta or {}).get("modelled_label", "") or "")
    if not label or "not measured" in title:
        return title
    if title.endswith("</sup>"):
        return f"{title[:-len('</sup>')]}; {label}</sup>"
    return two_line_title(title, label)


def fit_title(fig: go.Figure, top: int = 90) -> go.Figure:
    """Give a title with a second line (``<br>`` or a subtitle) room in the top margin."""
    title = fig.layout.title
    two_lines = "<br>" in (title.text or "") or bool(title.subtitle.text)
    if two_lines and (fig.layout.margin.t or 0) < top:
        fig.update_layout(margin={"t": top})
    return fig


def empty_figure(title: str | None, message: str = "no events in this trace") -> go.Figure:
    """A figure that says plainly that there is nothing to draw."""
    fig = go.Figure()
    fig.update_layout(**style.base_layout(title=title, height=260))
    fit_title(fig)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       font={"size": 16, "color": style.OKABE_ITO["grey"]})
    return fig


def time_span(trace: Trace) -> tuple[float, float]:
    """(first, last) time in the trace, over issue/start/end; (0, 0) when empty."""
    if not len(trace):
        return 0.0, 0.0
    cols = np.concatenate([trace["issue"], trace["start"], trace["end"]])
    cols = cols[np.isfinite(cols)]
    if not len(cols):
        return 0.0, 0.0
    return float(cols.min()), float(cols.max())


def decimate_steps(t: np.ndarray, v: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Thin a step series to about ``4 * bins`` points, keeping each bin's first, max, min, last.

    The maximum and minimum of the series survive exactly (what a reader looks for in a queue
    plot); what is lost is only the order of changes within one bin, narrower than a pixel.
    """
    n = len(t)
    if n <= 4 * bins:
        return t, v
    lo, hi = float(t[0]), float(t[-1])
    width = (hi - lo) / bins or 1.0
    b = np.minimum(((t - lo) / width).astype(np.int64), bins - 1)
    keep = np.zeros(n, dtype=bool)
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    ends = np.r_[starts[1:], n] - 1
    keep[starts] = True
    keep[ends] = True
    order_max = np.lexsort((-v, b))  # within each bin, largest value first
    order_min = np.lexsort((v, b))
    first_of_bin = np.r_[True, b[order_max][1:] != b[order_max][:-1]]
    keep[order_max[first_of_bin]] = True
    first_of_bin = np.r_[True, b[order_min][1:] != b[order_min][:-1]]
    keep[order_min[first_of_bin]] = True
    return t[keep], v[keep]


def scaled(values: np.ndarray, factor: float) -> np.ndarray:
    return np.asarray(values, dtype=float) * factor
