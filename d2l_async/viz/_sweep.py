"""The sync/async sweep (D2L §13.2.3): the synchronous / asynchronous time ratio against op count,
one line per tensor size, with 1× (no advantage) marked.

Pure, like every figure here: :func:`sweep_table` is the data step (sweep -> rows) and
:func:`plot_sweep` draws it.  A sweep is anything with ``points`` (each with ``ops``, ``numel`` and
``ratio``) and a ``device`` label, e.g. :func:`d2l_async.experiments.sweep_sync_async`'s result.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from . import style
from ._common import empty_figure, fit_title, two_line_title
from ._describe import describe

__all__ = ["sweep_table", "plot_sweep"]


def sweep_table(sweep: Any) -> list[dict[str, Any]]:
    """The data step: one dict per sweep point (``ops``, ``numel``, ``ratio``).

    Raises:
        TypeError: ``sweep`` has no ``points``, or a point lacks ``ops``/``numel``/``ratio``.
    """
    points = getattr(sweep, "points", None)
    if points is None:
        raise TypeError(f"plot_sweep() expects a sweep with .points (sweep_sync_async's result), "
                        f"got {type(sweep).__name__}")
    rows = []
    for p in points:
        try:
            rows.append({"ops": int(p.ops), "numel": int(p.numel), "ratio": float(p.ratio)})
        except AttributeError as e:
            raise TypeError(f"a sweep point needs ops, numel and ratio ({e})") from None
    return rows


def plot_sweep(sweep: Any, *, title: str | None = None) -> go.Figure:
    """sync/async ratio against op count, one line per tensor size; 1× marked.

    Args:
        sweep: a sweep (see the module docstring).
        title: figure title (default: what it shows, and where it ran on a second line).
    """
    rows = sweep_table(sweep)
    device = str(getattr(sweep, "device", ""))
    machine = getattr(sweep, "machine", None)  # devices.machine() when the sweep ran
    if machine is not None and hasattr(machine, "describe"):
        device = f"{device}; {machine.describe()}" if device else machine.describe()
    if title is None:
        title = two_line_title("Sync / async time ratio by op count", device)
    if not rows:
        return empty_figure(title, "no sweep points")
    fig = go.Figure()
    for i, numel in enumerate(sorted({r["numel"] for r in rows})):
        pts = sorted((r for r in rows if r["numel"] == numel), key=lambda r: r["ops"])
        fig.add_trace(go.Scatter(x=[r["ops"] for r in pts], y=[r["ratio"] for r in pts], mode="lines+markers",
                                 name=f"{numel:,} elements", line={"color": style.series_color(i)},
                                 hovertemplate="%{x} ops: %{y:.2f}×<extra>" + f"{numel:,} elements</extra>"))
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "#777777"}, annotation_text="no advantage (1×)")
    fig.update_layout(**style.base_layout(title=title, height=380))
    fit_title(fig)
    fig.update_xaxes(title_text="ops per run", type="log")
    fig.update_yaxes(title_text="sync / async (×)", rangemode="tozero")
    lo, hi = min(rows, key=lambda r: r["ratio"]), max(rows, key=lambda r: r["ratio"])
    return describe(fig, f"sync / async from {lo['ratio']:.2f}× ({lo['numel']:,} elements, {lo['ops']:,} ops) to "
                         f"{hi['ratio']:.2f}× ({hi['numel']:,} elements, {hi['ops']:,} ops) over {len(rows)} points")
