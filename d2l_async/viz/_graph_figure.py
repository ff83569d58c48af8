"""Drawing the dependency graph as it executes (the data step is :mod:`._graph`).

One frame per time of :func:`~._graph.frame_times` (every change of state, or at most
``max_frames`` evenly spaced times): node colours follow :func:`~._graph.node_states`, a ring marks
the op the frontend pushed last, and a caption says what the frontend is doing
(:func:`~._graph.frontend_status`).  Frames carry only colours and a caption, so the animation is
light and plays without a kernel.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..trace import Trace
from . import style
from ._common import check_positive_int, empty_figure, fit_title, modelled_note, two_line_title
from ._controls import animation_controls
from ._describe import describe, format_time
from ._graph import (OP_STATES, DependencyGraph, _expression_graph, dependency_graph, frame_times, frontend_status,
                     node_states)

__all__ = ["plot_dependency_graph"]

_SYMBOL = {"op": "circle", "array": "square", "const": "diamond"}


_BREAK = re.compile(r"(?=[ (@])")  # between words, or before "(" and "@": "gW20" / "(cpu:2)"


def _wrap(label: str, n: int) -> str:
    """``label`` on lines of about ``n`` characters, broken between words or before ``(`` and
    ``@``: a name always reads whole ("backward W2", "gW20(cpu:2)"), never cut to "gW20(cp…"."""
    lines: list[str] = []
    for piece in (p for p in _BREAK.split(str(label)) if p):
        if lines and len(lines[-1]) + len(piece.rstrip()) <= n:
            lines[-1] += piece
        else:
            lines.append(piece.lstrip())
    return "<br>".join(line.strip() for line in lines if line.strip())


def _in_lane(label: str, device: str) -> str:
    """An array's name as its device's lane shows it: ``"X0.0@cpu:1"`` in lane cpu:1 is ``"X0.0"``
    (the lane says where it lives; the hover keeps the full name)."""
    if not device:
        return label
    short = re.sub(rf"(?<=.)@{re.escape(device)}(?=$| \(v\d+\)$)", "", label)  # "W1@cpu:1 (v2)" -> "W1 (v2)"
    return short or label


def _lane_boxes(nodes: pd.DataFrame) -> list[tuple[str, float, float]]:
    """(device, top y, bottom y) of each device's lane, top to bottom; none when the graph has one lane."""
    if "band" not in nodes.columns or not (nodes["band"] != "").any():
        return []
    out = []
    for device, grp in nodes.groupby("band", sort=False):
        out.append((str(device), float(grp["y"].max()), float(grp["y"].min())))
    return sorted(out, key=lambda b: -b[1])


def _node_colors(states: np.ndarray) -> list[str]:
    return [style.STATE_COLORS.get(s, "#FFFFFF") for s in states]


def _ring(graph: DependencyGraph, t: float) -> tuple[list[float], list[float]]:
    n = graph.nodes
    ops = n[(n["type"] == "op") & (n["issue"] <= t)]
    if not len(ops):
        return [], []
    last = ops.loc[ops["issue"].idxmax()]
    return [float(last["depth"])], [float(last["y"])]


def plot_dependency_graph(source: Trace | str | DependencyGraph, *, max_ops: int = 16, max_frames: int = 150,
                          title: str | None = None) -> go.Figure:
    """The dependency graph, animated from queued to done, with the frontend's statement.

    Args:
        source: a :class:`~d2l_async.trace.Trace` of an engine recording, an expression such as
            ``"z = x * y + 2"`` (schematic schedule), or a :class:`DependencyGraph`.
        max_ops: most ops drawn from a trace (the first ones issued).
        max_frames: most animation frames (times are resampled evenly beyond it).
        title: figure title.

    Frame names are the frame's time in seconds (steps for an expression), as text.

    Returns:
        A plotly Figure of the graph with one animation frame per sampled time (nodes coloured by state, the
        frontend's statement written in each frame); an empty figure that says so for a trace without events or ops.
    """
    max_ops = check_positive_int(max_ops, "max_ops")
    max_frames = check_positive_int(max_frames, "max_frames", minimum=2)
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None, got {type(title).__name__} {title!r}")
    if isinstance(source, str):
        graph = _expression_graph(source, "source")
    elif isinstance(source, DependencyGraph):
        graph = source
    elif isinstance(source, Trace):
        graph = dependency_graph(source, max_ops=max_ops) if len(source) else None
    else:
        raise TypeError(f"plot_dependency_graph() expects a d2l_async.trace.Trace, an expression string or "
                        f"a DependencyGraph, got {type(source).__name__}")
    if title is None:
        title = "Dependency graph"
        if graph is not None and graph.schematic:
            title = two_line_title(f"Dependency graph of {graph.title}", "schematic schedule, not measured")
        elif graph is not None and graph.meta.get("virtual"):
            title = two_line_title(title, "engine on virtual devices (threads, not hardware)")
    if graph is not None:
        title = modelled_note(title, graph.meta)  # modelled devices say so on every figure
    if graph is None or not len(graph.nodes):
        return empty_figure(title, "no events in this trace" if graph is None else "no ops to draw")
    nodes, edges = graph.nodes, graph.edges
    times = frame_times(graph, max_frames)
    if graph.schematic:
        unit, factor = "steps", 1.0
    else:
        unit, factor = style.time_unit(times[-1] - times[0])
    # display times from the first frame, so the slider starts at 0 (the frame names keep the trace's
    # own seconds)
    o = 0.0 if graph.schematic else float(times[0])
    pos = {k: (d, y) for k, d, y in zip(nodes["key"], nodes["depth"], nodes["y"])}

    fig = go.Figure()
    # edges, shortened at the head so the arrow is not hidden under the node
    ex, ey, sizes = [], [], []
    for s, d in zip(edges["src"], edges["dst"]):
        (x0, y0), (x1, y1) = pos[s], pos[d]
        length = float(np.hypot(x1 - x0, y1 - y0)) or 1.0
        k = max(0.0, 1 - 0.16 / length)
        ex += [x0, x0 + (x1 - x0) * k, None]
        ey += [y0, y0 + (y1 - y0) * k, None]
        sizes += [0, 9, 0]
    fig.add_trace(go.Scatter(x=ex, y=ey, mode="lines+markers", hoverinfo="skip", showlegend=False,
                             line={"color": "#888888", "width": 1.2},
                             marker={"symbol": "arrow", "angleref": "previous", "size": sizes, "color": "#888888"}))
    for state in OP_STATES + ("pending",):  # legend entries for the colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=state,
                                 marker={"color": style.STATE_COLORS[state], "size": 12, "symbol": "circle",
                                         "line": {"color": "#555555", "width": 1}}))
    states0 = node_states(graph, times[0])
    typ = nodes["type"].to_numpy()
    # size nodes to the columns available (a 900 px figure: about 800 px of plot); labels alternate
    # above and below by column, so a label has two columns of room and never meets its neighbour's
    col_px = 700 / (float(nodes["depth"].max() - nodes["depth"].min()) + 1)
    op_size = float(np.clip(col_px * 0.55, 10, 40))
    arr_size = float(np.clip(col_px * 0.3, 7, 22))
    width = int(max(6, min(16, 2 * col_px / (11 * 0.62) - 3)))  # characters that fit in two columns
    bands = nodes["band"] if "band" in nodes.columns else pd.Series([""] * len(nodes), index=nodes.index)
    labels = [_wrap(lbl if t == "op" else _in_lane(str(lbl), str(dev)), width)
              for lbl, t, dev in zip(nodes["label"], typ, bands)]
    text = [lbl if col_px >= 30 else "" for lbl in labels]
    above = (nodes["depth"].to_numpy() % 2) == 0
    hover = []
    for r in nodes.itertuples(index=False):
        if r.type == "op":
            hover.append(f"<b>{r.label}</b> on {r.lane}<br>issue {(r.issue - o) * factor:.4g} · ready {(r.ready - o) * factor:.4g}"
                         f" · start {(r.start - o) * factor:.4g} · end {(r.end - o) * factor:.4g} {unit}")
        else:
            hover.append(f"<b>{r.label}</b> ({r.type})")
    node_index = len(fig.data)
    fig.add_trace(go.Scatter(
        x=nodes["depth"], y=nodes["y"], mode="markers+text", text=text, showlegend=False,
        # names above the node in even columns, below it in odd ones: whole words, never inside a node
        textposition=["top center" if a else "bottom center" for a in above],
        textfont={"size": 11}, customdata=states0, hovertext=hover,
        hovertemplate="%{hovertext}<br>state: %{customdata}<extra></extra>",
        marker={"symbol": [_SYMBOL[t] for t in typ], "size": [op_size if t == "op" else arr_size for t in typ],
                "color": _node_colors(states0), "opacity": 1.0,
                "line": {"color": "#555555", "width": 1}},
    ))
    ring_index = len(fig.data)
    rx, ry = _ring(graph, times[0])
    fig.add_trace(go.Scatter(x=rx, y=ry, mode="markers", name="last op the frontend pushed",
                             marker={"symbol": "circle-open", "size": op_size * 1.35, "color": "#000000", "line": {"width": 2.5}},
                             hoverinfo="skip"))
    top = float(nodes["y"].max()) + 1.0
    x_left = float(nodes["depth"].min())
    text_index = len(fig.data)

    def caption(t: float) -> tuple[str, str]:
        what, blocked = frontend_status(graph, t)
        color = style.KIND_COLORS["block"] if blocked else "#222222"
        return f"t = {(t - o) * factor:.4g} {unit} · frontend: {what}", color

    c0, col0 = caption(times[0])
    fig.add_trace(go.Scatter(x=[x_left - 0.3], y=[top], mode="text", text=[c0], textposition="middle right",
                             textfont={"size": 13, "color": col0}, showlegend=False, hoverinfo="skip"))

    frames = []
    for t in times:
        st = node_states(graph, t)
        rx, ry = _ring(graph, t)
        cap, col = caption(t)
        frames.append(go.Frame(name=f"{t:.12g}", traces=[node_index, ring_index, text_index], data=[
            go.Scatter(marker={"color": _node_colors(st)}, customdata=st),
            go.Scatter(x=rx, y=ry),
            go.Scatter(text=[cap], textfont={"color": col}),
        ]))
    fig.frames = frames
    # each device's lane, shaded and named at its left end (07's three lanes were unnamed)
    lanes = _lane_boxes(nodes)
    x_right = float(nodes["depth"].max())
    for device, y_top, y_bottom in lanes:
        # the name sits on the lane's top edge, above the names of its first row of nodes
        fig.add_shape(type="rect", x0=x_left - 0.45, x1=x_right + 0.45, y0=y_bottom - 0.5, y1=y_top + 0.62,
                      fillcolor="rgba(153,153,153,0.08)", line={"width": 0}, layer="below")
        fig.add_annotation(x=x_left - 0.42, y=y_top + 0.62, xanchor="left", yanchor="bottom", showarrow=False,
                           text=f"<b>{device}</b>", font={"size": 11, "color": "#555555"})
    if not lanes:  # one device: say where the ops ran
        where = sorted({str(l) for l, t in zip(nodes["lane"], typ) if t == "op" and l})
        if where:
            fig.add_annotation(text="ops ran on " + ", ".join(where), xref="paper", yref="paper", x=0, y=0,
                               xanchor="left", showarrow=False, font={"color": style.OKABE_ITO["grey"], "size": 11})
    fig.update_layout(**animation_controls(times, factor, unit, origin=o))
    fig.update_layout(**style.base_layout(title=title, height=max(380, 120 + 90 * (nodes["y"].max() - nodes["y"].min() + 2))))
    fig.update_layout(margin={"t": 90, "b": 90})
    fit_title(fig)
    # room for the first and last columns' labels, centred on their nodes (clipped "make minibatch")
    half = max((len(str(t).split("<br>")[0]) for t in text), default=0) * 11 * 0.62 / 2 / col_px
    fig.update_xaxes(visible=False, range=[x_left - max(0.5, half + 0.2), float(nodes["depth"].max()) + max(0.9, half + 0.2)])
    fig.update_yaxes(visible=False, range=[float(nodes["y"].min()) - 0.7, top + 0.5])
    if graph.n_ops_total > graph.n_ops:
        fig.add_annotation(text=f"first {graph.n_ops} of {graph.n_ops_total:,} ops", xref="paper", yref="paper",
                           x=1, y=0, showarrow=False, xanchor="right", font={"color": style.OKABE_ITO["grey"]})
    if lanes:  # the band's name sits in its top row: room above the first lane
        fig.update_yaxes(range=[float(nodes["y"].min()) - 0.7, max(top, lanes[0][1] + 0.8) + 0.5])
    n_arrays = int((typ != "op").sum())
    ran_on = ", ".join(d for d, _, _ in lanes) if lanes else ", ".join(
        sorted({str(l) for l, t in zip(nodes["lane"], typ) if t == "op" and l}))
    span = float(times[-1] - o)
    when = f"{span:g} schematic steps" if graph.schematic else format_time(span)
    fact = (f"{graph.n_ops} ops and {n_arrays} arrays in {int(nodes['depth'].max()) + 1} columns"
            + (f" on {ran_on}" if ran_on else "") + f"; all done after {when}")
    return describe(fig, fact)
