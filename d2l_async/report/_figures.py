"""The one figure the report draws itself: the sync/async sweep (a line per tensor size).

Pure: data in, ``go.Figure`` out.  (It belongs with :mod:`d2l_async.viz` once a sweep figure is
needed there too; it uses the same style module.)
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from d2l_async.viz import style

__all__ = ["sweep_table", "plot_sweep"]


def sweep_table(sweep: Any) -> list[dict[str, Any]]:
    """The data step: one dict per sweep point (``ops``, ``numel``, ``ratio``)."""
    return [{"ops": p.ops, "numel": p.numel, "ratio": p.ratio} for p in sweep.points]


def plot_sweep(sweep: Any, *, title: str | None = None) -> go.Figure:
    """sync/async ratio against op count, one line per tensor size; 1× marked."""
    rows = sweep_table(sweep)
    fig = go.Figure()
    for i, numel in enumerate(sorted({r["numel"] for r in rows})):
        pts = sorted((r for r in rows if r["numel"] == numel), key=lambda r: r["ops"])
        fig.add_trace(go.Scatter(x=[r["ops"] for r in pts], y=[r["ratio"] for r in pts], mode="lines+markers",
                                 name=f"{numel:,} elements", line={"color": style.series_color(i)},
                                 hovertemplate="%{x} ops: %{y:.2f}×<extra>" + f"{numel:,} elements</extra>"))
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "#777777"}, annotation_text="no advantage (1×)")
    fig.update_layout(**style.base_layout(title=title or f"sync / async time — {sweep.device}", height=380))
    fig.update_xaxes(title_text="ops per run", type="log")
    fig.update_yaxes(title_text="sync / async (×)", rangemode="tozero")
    return fig
