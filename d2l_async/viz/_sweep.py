"""The sync/async sweep (D2L §13.2.3): the synchronous / asynchronous time ratio against op count,
one line per tensor size, with 1× (no advantage) marked.

Pure, like every figure here: :func:`sweep_table` is the data step (sweep -> rows) and
:func:`plot_sweep` draws it.  A sweep is anything with ``points`` (each with ``ops``, ``numel`` and
``ratio``) and a ``device`` label, e.g. :func:`d2l_async.experiments.sweep_sync_async`'s result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go

from . import style
from .._args import mapping
from ._common import check_title, empty_figure, fit_title, two_line_title
from ._describe import describe

__all__ = ["sweep_table", "plot_sweep"]


def sweep_table(sweep: Any) -> list[dict[str, Any]]:
    """The data step: one dict per sweep point (``ops``, ``numel``, ``ratio``).

    Returns:
        A list of ``{"ops": int, "numel": int, "ratio": float}`` dicts, in the sweep's order.

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


def plot_sweep(sweep: Any, *, by: str = "ops", reference: Mapping[str, float] | None = None,
               title: str | None = None) -> go.Figure:
    """sync/async ratio against op count, one line per tensor size (or against the tensor size, one
    line per op count); 1× marked.

    Args:
        sweep: a sweep (see the module docstring).
        by: the x axis: ``"ops"`` (ops per run) or ``"numel"`` (elements per op).
        reference: label -> a published ratio drawn as a dashed line (the book's 3.4×).
        title: figure title (default: what it shows, and where it ran on a second line).

    Returns:
        A plotly Figure with one ratio line per tensor size (or per op count), the 1× line and any reference lines,
        its fact the lowest and highest ratio; an empty figure saying "no sweep points" when there is none.
    """
    title = check_title(title)
    if by not in ("ops", "numel"):
        raise ValueError(f"by must be 'ops' or 'numel', got {by!r}")
    reference = dict(mapping("reference", reference, what="label -> a published ratio") if reference is not None else {})
    for label, value in reference.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise TypeError(f"reference[{label!r}] must be a positive ratio, got {value!r}")
    rows = sweep_table(sweep)
    device = str(getattr(sweep, "device", ""))
    machine = getattr(sweep, "machine", None)  # devices.machine() when the sweep ran
    if machine is not None and hasattr(machine, "describe"):
        device = f"{device}; {machine.describe()}" if device else machine.describe()
    if title is None:
        title = two_line_title(f"Sync / async time ratio by {'op count' if by == 'ops' else 'tensor size'}", device)
    if not rows:
        return empty_figure(title, "no sweep points")
    line_of = "numel" if by == "ops" else "ops"
    fig = go.Figure()
    for i, value in enumerate(sorted({r[line_of] for r in rows})):
        pts = sorted((r for r in rows if r[line_of] == value), key=lambda r: r[by])
        name = f"{value:,} elements" if line_of == "numel" else f"{value:,} ops"
        fig.add_trace(go.Scatter(x=[r[by] for r in pts], y=[r["ratio"] for r in pts], mode="lines+markers",
                                 name=name, line={"color": style.series_color(i)},
                                 hovertemplate=f"%{{x:,}} {'ops' if by == 'ops' else 'elements'}: %{{y:.2f}}×"
                                               f"<extra>{name}</extra>"))
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "#777777"}, annotation_text="no advantage (1×)")
    for label, value in reference.items():
        fig.add_hline(y=float(value), line={"dash": "dash", "color": "#000000"}, annotation_text=label)
    fig.update_layout(**style.base_layout(title=title, height=380 if by == "ops" else 440))
    fit_title(fig)
    fig.update_xaxes(title_text="ops per run" if by == "ops" else "elements of x", type="log")
    fig.update_yaxes(title_text="sync / async (×)", rangemode="tozero")
    lo, hi = min(rows, key=lambda r: r["ratio"]), max(rows, key=lambda r: r["ratio"])
    fact = (f"sync / async from {lo['ratio']:.2f}× ({lo['numel']:,} elements, {lo['ops']:,} ops) to "
            f"{hi['ratio']:.2f}× ({hi['numel']:,} elements, {hi['ops']:,} ops) over {len(rows)} points")
    if reference:
        fact += "; " + ", ".join(f"{k}: {v:g}×" for k, v in reference.items())
    return describe(fig, fact)
