"""Helpers shared by the figure modules: input checks, the "no events" figure, decimation."""

from __future__ import annotations

import html
import re
from typing import Any

import numpy as np
import plotly.graph_objects as go

from ..trace import Trace
from . import style
from ._describe import describe
from .._args import instance, integer


def check_trace(trace: Any, func: str) -> Trace:
    """Return ``trace`` if it is a :class:`~d2l_async.trace.Trace`, else raise a TypeError."""
    if not isinstance(trace, Trace):
        raise TypeError(
            f"{func}() expects a d2l_async.trace.Trace, got {type(trace).__name__}; "
            "get one from eng.trace(), d2l_async.data.load_sample(...) or read_chrome_trace(path)"
        )
    return trace


def check_positive_int(value: Any, name: str, minimum: int = 1, maximum: int | None = None) -> int:
    """:func:`d2l_async._args.integer`, in the figures' argument order, with a lower bound of 1."""
    return integer(name, value, minimum=minimum, maximum=maximum)


def check_title(title: Any) -> str | None:
    """A figure's ``title=``: a str or None (plotly's own refusal of anything else names its layout, not the
    argument)."""
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None, got {type(title).__name__} {title!r:.80}")
    return title


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


#: The width a figure is laid out for when it has none (a notebook cell, the figure test's PNGs).
FIGURE_WIDTH = 900
#: Average advance of one character, as a share of the font size (sans-serif, mixed case).
CHAR_EM = 0.6  # a little wide on purpose: a wrapped line must not reach the edge
_TAG = re.compile(r"<[^>]+>")


def text_px(text: str, size: float) -> float:
    """Estimated width in pixels of ``text`` (tags removed) at font ``size``."""
    return len(html.unescape(_TAG.sub("", text))) * size * CHAR_EM


def _wrap_line(line: str, size: float, width: float) -> list[str]:
    sup = line.startswith("<sup>") and line.endswith("</sup>")
    body = line[5:-6] if sup else line
    size = size * 0.7 if sup else size  # plotly draws <sup> at 70 %
    out, cur = [], ""
    for word in body.split(" "):
        trial = f"{cur} {word}" if cur else word
        if cur and text_px(trial, size) > width:
            out.append(cur)
            cur = word
        else:
            cur = trial
    out.append(cur)
    return [f"<sup>{x}</sup>" for x in out] if sup else out


def wrap_title(text: str, *, size: float, width: float) -> str:
    """``text`` with ``<br>`` inserted between words so that no line is wider than ``width`` px;
    a ``<sup>...</sup>`` line is wrapped as sup lines (titles of 194 characters were cut off)."""
    lines = re.split(r"<br\s*/?>", text or "")
    # "head<sup>details</sup>" without a break: keep as given (rare); wrap the parts we can
    return "<br>".join(part for line in lines for part in _wrap_line(line.strip(), size, width))


def fit_title(fig: go.Figure, top: int = 90, *, width: int | None = None) -> go.Figure:
    """Wrap the title (and subtitle) to the figure's width and give its lines room in the top margin.

    Args:
        width: the width to fit (default the figure's, else :data:`FIGURE_WIDTH`).
    """
    instance("fig", fig, go.Figure, what="plotly.graph_objects.Figure")
    title = fig.layout.title
    base = float(fig.layout.font.size or style.FONT["size"])
    size = float(title.font.size or base * 1.4)  # plotly's default title size
    room = float(width or fig.layout.width or FIGURE_WIDTH) - 40
    lines = 0
    if title.text:
        wrapped = wrap_title(title.text, size=size, width=room)
        fig.update_layout(title_text=wrapped)
        lines += wrapped.count("<br>") + 1
    if title.subtitle.text:
        sub = float(title.subtitle.font.size or base)
        wrapped = "<br>".join(_wrap_line(title.subtitle.text, sub * 1.0, room))
        fig.update_layout(title_subtitle_text=wrapped)
        lines += wrapped.count("<br>") + 1
    need = 30 + 22 * lines
    if lines > 1 and (fig.layout.margin.t or 0) < max(top, need):
        fig.update_layout(margin={"t": max(top, need)})
    return fig


def wrap_categories(labels: list[str], *, share: float = 1.0, size: float | None = None) -> list[str]:
    """Category labels broken at spaces onto lines that fit their slot of a :data:`FIGURE_WIDTH`
    figure (``share``: the part of the plot width the axis spans): plotly turns a label wider than
    its slot, and turned labels run into the axis title and the legend."""
    size = float(size or style.FONT["size"])
    slot = (FIGURE_WIDTH - 120) * share / max(len(labels), 1) - 8
    return ["<br>".join(_wrap_line(str(label), size, slot)) for label in labels]


def empty_figure(title: str | None, message: str = "no events in this trace") -> go.Figure:
    """A figure that says plainly that there is nothing to draw."""
    fig = go.Figure()
    fig.update_layout(**style.base_layout(title=title, height=260))
    fit_title(fig)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       font={"size": 16, "color": style.OKABE_ITO["grey"]})
    return describe(fig, message)


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
