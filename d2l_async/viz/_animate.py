"""The timeline and the queue counter, growing over time: the frontend racing ahead, animated.

The whole trace is drawn once; each frame moves a "now" line and an opaque curtain that hides
everything after it, and updates a counter of the work queued at that moment.  A frame therefore
carries a handful of numbers, not the events, so even a long trace animates smoothly and the
exported HTML stays small.  Frames are at most ``max_frames`` evenly spaced times.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..trace import Trace
from . import style
from ._common import check_positive_int, check_title, check_trace, empty_figure, fit_title, modelled_note
from ._controls import animation_controls
from ._queue import draw_queue, queue_data
from ._series import queue_length_series
from ._describe import describe
from ._timeline import _notes, default_title, draw_timeline, timeline_data, timeline_fact

__all__ = ["animate_timeline", "queue_at"]

_CURTAIN = "rgba(255,255,255,1)"


def queue_at(trace: Trace, times: np.ndarray) -> dict[str, np.ndarray]:
    """Exact queue length of each backend lane at each of ``times`` (the counter's data step).

    Returns:
        Lane -> a float array of queue lengths, one per entry of ``times`` (0 before the lane's first change); lanes
        that never queued are absent.
    """
    trace = check_trace(trace, "queue_at")
    try:
        times = np.asarray(times, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"times must be numbers (seconds, an array or a list), got {type(times).__name__} "
                        f"{times!r:.80}") from None
    df = queue_length_series(trace)
    out = {}
    for lane in [l.name for l in trace.backend_lanes]:
        sub = df[df["lane"] == lane]
        if not len(sub):
            continue
        t = sub["time"].to_numpy(float)
        q = sub["queue_length"].to_numpy(float)
        i = np.searchsorted(t, times, side="right") - 1  # last change at or before each time
        out[lane] = np.where(i >= 0, q[np.maximum(i, 0)], 0.0)
    return out


def animate_timeline(trace: Trace, *, max_frames: int = 150, max_events: int = 2000,
                     title: str | None = None) -> go.Figure:
    """The timeline over the queue length, revealed frame by frame with a live queue counter.

    Args:
        trace: a :class:`~d2l_async.trace.Trace`.
        max_frames: most frames (evenly spaced over the trace).
        max_events: most timeline bars (denser traces merge bars closer than a pixel).
        title: figure title.

    Frame names are the frame's time in seconds, as text.

    Returns:
        A plotly Figure: the timeline above the queue length on a shared time axis, with one frame per sampled time
        and a live queue counter; ``layout.meta["fact"]`` states the timeline's fact, the peak queue and the frame
        count. An empty figure that says so for an empty trace.
    """
    title = check_title(title)
    trace = check_trace(trace, "animate_timeline")
    # each frame holds its own copy of the queue bars: past a thousand the figure is too heavy to play
    max_frames = check_positive_int(max_frames, "max_frames", minimum=2, maximum=1000)
    max_events = check_positive_int(max_events, "max_events")
    title = modelled_note(title if title is not None else default_title(trace, "Timeline, animated"), trace.meta)
    if not len(trace):
        return empty_figure(title)
    tl = timeline_data(trace, max_events=max_events, max_connectors=min(max_events, 600))
    q = queue_data(trace, cap=None)
    t0, t1 = tl.span
    f, unit = tl.factor, tl.unit
    times = np.linspace(t0, t1, max_frames)
    counts = queue_at(trace, times)
    total = np.sum(list(counts.values()), axis=0) if counts else np.zeros(len(times))

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.05, row_heights=[0.65, 0.35])
    # the waits are named by a text trace under the curtain (annotations would sit above it and give
    # the future away)
    draw_timeline(fig, tl, row=1, col=1, labels_as_text=True)
    for tr in fig.data:  # pushes are a few µs apart: their names would print over each other (hover keeps them)
        if tr.type == "bar" and tr.name == "launch":
            tr.text = None
    if q.queued:
        # SVG traces only: a WebGL layer would sit above the curtain and show through it
        draw_queue(fig, q, row=2, col=1, webgl=False)
    nrows = len(tl.lanes)
    qmax = max([max(v.max(), 1.0) for _, v in q.queued.values()] or [1.0]) * 1.15
    # a queue holds whole ops: integer ticks only
    fig.update_yaxes(range=[0, qmax], tick0=0, dtick=max(1, math.ceil(qmax / 5)), tickformat="d", row=2, col=1)
    if not q.queued:
        fig.update_yaxes(range=[0, 1], title_text="queue length (nothing queued)", row=2, col=1)

    def curtain(t: float, lo: float, hi: float) -> dict:
        x0, x1 = (t - t0) * f, (t1 - t0) * f * 1.001 + 1e-12
        return {"x": [x0, x1, x1, x0, x0], "y": [lo, lo, hi, hi, lo]}

    def counter_text(k: int) -> str:
        parts = [f"{int(v[k])} queued on {lane}" for lane, v in counts.items()][:3]
        return "<br>".join(parts) if parts else "nothing queued"

    first = len(fig.data)
    fig.add_trace(go.Scatter(**curtain(times[0], nrows, -1), fill="toself", fillcolor=_CURTAIN, mode="none",
                             hoverinfo="skip", showlegend=False), row=1, col=1)
    fig.add_trace(go.Scatter(**curtain(times[0], -1, qmax * 2), fill="toself", fillcolor=_CURTAIN, mode="none",
                             hoverinfo="skip", showlegend=False), row=2, col=1)
    fig.add_trace(go.Scatter(x=[(times[0] - t0) * f] * 2, y=[nrows, -1], mode="lines", name="now",
                             line={"color": "#000000", "width": 1.5}, hoverinfo="skip"), row=1, col=1)
    fig.add_trace(go.Scatter(x=[(times[0] - t0) * f], y=[total[0]], mode="markers+text", text=[counter_text(0)],
                             textposition="middle right", showlegend=False, hoverinfo="skip",
                             marker={"color": "#000000", "size": 8}, textfont={"size": 12}), row=2, col=1)
    traces = list(range(first, first + 4))
    frames = []
    for k, t in enumerate(times):
        frames.append(go.Frame(name=f"{t:.12g}", traces=traces, data=[
            go.Scatter(**curtain(t, nrows, -1)),
            go.Scatter(**curtain(t, -1, qmax * 2)),
            go.Scatter(x=[(t - t0) * f] * 2, y=[nrows, -1]),
            go.Scatter(x=[(t - t0) * f], y=[total[k]], text=[counter_text(k)],
                       textposition="middle right" if t < (t0 + t1) / 2 else "middle left"),
        ]))
    fig.frames = frames
    notes = _notes(tl)
    fig.update_layout(**animation_controls(times, f, unit, origin=t0))
    # the legend goes under the play button and the slider, across the figure: at the side (every
    # figure's place) its long names took about 40 % of the width from the timeline it explains
    height, top, bottom = 530 + 46 * nrows, 90, 190
    fig.update_layout(**style.base_layout(
        title={"text": title, "subtitle": {"text": notes}} if notes else {"text": title},
        barmode="overlay", bargap=0, height=height))
    fig.update_layout(margin={"t": top, "b": bottom},
                      legend={"orientation": "h", "x": 0, "xanchor": "left", "yanchor": "top",
                              "y": -160 / (height - top - bottom)})
    fit_title(fig)
    fig.update_xaxes(title_text=style.time_axis_title(unit), row=2, col=1)
    peak = f"; at most {int(total.max())} ops queued" if len(total) else ""
    return describe(fig, f"{timeline_fact(tl)}{peak}; animated in {len(times)} frames")
