"""Drawing the dependency graph as it executes (the data step is :mod:`._graph`).

One frame per time of :func:`~._graph.frame_times` (every change of state, or at most
``max_frames`` evenly spaced times): node colours follow :func:`~._graph.node_states`, a ring marks
the op the frontend pushed last, and a caption says what the frontend is doing
(:func:`~._graph.frontend_status`).  Frames carry only colours and a caption, so the animation is
light and plays without a kernel.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..trace import Trace
from . import style
from ._common import check_positive_int, empty_figure, fit_title, modelled_note, two_line_title
from ._controls import animation_controls
from ._graph import OP_STATES, DependencyGraph, dependency_graph, expression_graph, frame_times, frontend_status, node_states

__all__ = ["plot_dependency_graph"]

_SYMBOL = {"op": "circle", "array": "square", "const": "diamond"}


def _short(label: str, n: int) -> str:
    label = str(label)
    return label if len(label) <= n else label[: n - 1] + "…"


def _wrap(label: str, n: int, lines: int = 2) -> str:
    """``label`` on at most ``lines`` lines of about ``n`` characters, broken at spaces (an op's name
    such as "backward W2" or "make minibatch" reads whole instead of "backwa…")."""
    out: list[str] = []
    for word in str(label).split():
        if out and len(out[-1]) + 1 + len(word) <= n:
            out[-1] += " " + word
        else:
            out.append(word)
    if len(out) > lines:
        out = out[: lines - 1] + [_short(" ".join(out[lines - 1:]), n)]
    return "<br>".join(_short(line, max(n, 10)) for line in out)


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
    """
    if isinstance(source, str):
        graph = expression_graph(source)
    elif isinstance(source, DependencyGraph):
        graph = source
    elif isinstance(source, Trace):
        graph = dependency_graph(source, max_ops=max_ops) if len(source) else None
    else:
        raise TypeError(f"plot_dependency_graph() expects a d2l_async.trace.Trace, an expression string or "
                        f"a DependencyGraph, got {type(source).__name__}")
    max_frames = check_positive_int(max_frames, "max_frames", minimum=2)
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
    # display times from the first event (the frame names keep the trace's own seconds)
    o = 0.0 if graph.schematic else float(times[1] if len(times) > 1 else times[0])
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
    labels = [_wrap(lbl, width) if t == "op" else _short(lbl, width) for lbl, t in zip(nodes["label"], typ)]
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
    return fig
