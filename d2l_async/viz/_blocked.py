"""Where the frontend waited: one bar per cause of blocking, longest first.

Every ``print(z)``, ``.item()``, ``waitall()`` or ``cudaStreamSynchronize`` stops the Python thread
until the backend catches up; this figure adds those waits up per cause so a reader sees which
line of their loop costs the asynchrony.
"""

from __future__ import annotations

import plotly.graph_objects as go

from .. import analysis
from ..trace import Trace
from . import style
from ._common import check_positive_int, check_title, check_trace, empty_figure, fit_title
from ._describe import describe, format_time
from ._series import blocked_table
from ._timeline import default_title

__all__ = ["plot_blocked_time"]

_BY = ("cause", "reason", "source", "name", "lane")


def plot_blocked_time(trace: Trace, *, by: str = "cause", top: int = 15, title: str | None = None) -> go.Figure:
    """Total time the frontend spent blocked, one horizontal bar per cause.

    Args:
        trace: a :class:`~d2l_async.trace.Trace`.
        by: ``"cause"`` (reason and source line together, as the timeline labels them) or a column
            of :func:`d2l_async.analysis.blocked_time`: ``"reason"``, ``"source"``, ``"name"``, ``"lane"``.
        top: most bars (the longest causes).
        title: figure title.

    Returns:
        A plotly Figure with one horizontal bar per cause (at most ``top``), its fact the total wait and the number
        of waits; an empty figure that says so when the trace is empty or the frontend never blocked.
    """
    title = check_title(title)
    trace = check_trace(trace, "plot_blocked_time")
    top = check_positive_int(top, "top")
    if by not in _BY:
        raise ValueError(f"by={by!r} is not supported; choose one of {_BY}")
    title = title if title is not None else default_title(trace, "Time the frontend was blocked")
    if not len(trace):
        return empty_figure(title)
    if by == "cause":
        table = blocked_table(trace)
    else:
        table = analysis.blocked_time(trace, by=by).rename(columns={by: "label"})
    if not len(table):
        return empty_figure(title, "the frontend never blocked in this trace")
    table = table.head(top).iloc[::-1]  # longest on top
    unit, factor = style.time_unit(float(table["total"].max()))
    fig = go.Figure(go.Bar(
        orientation="h", y=table["label"], x=table["total"] * factor, customdata=table["count"],
        marker={"color": style.KIND_COLORS["block"]},
        hovertemplate=f"%{{y}}<br>%{{x:.4g}} {unit} in %{{customdata}} wait(s)<extra></extra>",
        text=[f"{v * factor:.3g} {unit} ({c}×)" for v, c in zip(table["total"], table["count"])],
        textposition="auto",
    ))
    fig.update_layout(**style.base_layout(title=title, height=160 + 32 * len(table), showlegend=False))
    fit_title(fig)
    fig.update_xaxes(title_text=f"time blocked ({unit})")
    fig.update_yaxes(automargin=True)
    first = table.iloc[-1]  # longest (the table is reversed: longest on top)
    n = int(table["count"].sum())
    return describe(fig, f"the frontend waited {format_time(float(table['total'].sum()))} in {n:,} wait{'s' if n != 1 else ''}; "
                         f"the longest cause, {first['label']}, {format_time(float(first['total']))} in {int(first['count']):,}")
