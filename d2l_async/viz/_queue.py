"""Queue length over time: how far the frontend has run ahead of each backend lane.

The queue of a lane holds the work the frontend has issued to it that has not started yet
(+1 at issue, -1 at start; HTA's definition).  "In flight" also counts the work that is running
(-1 at the end instead).  A CUDA stream's launch queue is bounded (about 1024 kernels in current
drivers): when it is full, the next launch blocks the Python thread — the cap line shows it.

Scale: the series of a 10^5-event trace has 10^5 steps per stream; :func:`queue_data` keeps,
per pixel-wide bin, the first, largest, smallest and last value, so maxima survive exactly.

Several ranks (a trace from ``d2l_async.trace.merge_ranks``): one panel per rank, rank 0 on top,
sharing the time axis, so ranks stand one above the other as in the timeline.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..trace import Trace, last_step_starts
from . import style
from ._common import (check_positive_int, check_title, check_trace,
                      decimate_steps, empty_figure, fit_title, time_span)
from ._describe import describe
from ._series import pending_memory_series, queue_length_series
from ._timeline import _notes, default_title, draw_timeline, timeline_data, timeline_fact

__all__ = ["QueueData", "queue_data", "plot_queue_length", "plot_trace", "CUDA_QUEUE_CAP"]

#: Launch-queue depth at which CUDA launches start to block the host (observed ~1022-1024).
CUDA_QUEUE_CAP = 1024
_GL_POINTS = 2000  # above this many points a series is drawn with WebGL


@dataclass(frozen=True)
class QueueData:
    """What :func:`plot_queue_length` draws (times in seconds).

    Attributes:
        queued: lane -> (time, queue length) step points, decimated for display.
        in_flight: lane -> (time, issued-but-unfinished) points; empty unless asked for.
        memory: (time, bytes held by pending work), or None.
        peak: lane -> exact maximum queue length (before decimation).
        cap: the queue cap to mark, or None.
        span, unit, factor: time range in seconds, display unit and factor.
        note: what the counts leave out (work launched in the last ProfilerStep, as HTA does).
    """

    queued: dict[str, tuple[np.ndarray, np.ndarray]]
    in_flight: dict[str, tuple[np.ndarray, np.ndarray]]
    memory: tuple[np.ndarray, np.ndarray] | None
    peak: dict[str, int]
    cap: float | None
    span: tuple[float, float]
    unit: str
    factor: float
    note: str = ""


def default_cap(trace: Trace) -> int | None:
    """1024 for traces of real CUDA streams (profiler captures), None for everything else."""
    gpu = any(str(l.device).startswith("cuda") and not l.virtual for l in trace.backend_lanes)
    return CUDA_QUEUE_CAP if gpu and trace.meta.get("source") in ("cuda", "chrome") else None


def _steps(df, lane: str, span: tuple[float, float], bins: int) -> tuple[np.ndarray, np.ndarray]:
    sub = df[df["lane"] == lane]
    t = sub["time"].to_numpy(float)
    v = sub["queue_length"].to_numpy(float)
    # start at 0 at the trace start and hold the last value to the trace end
    t = np.r_[span[0], t, span[1]]
    v = np.r_[0.0, v, v[-1] if len(v) else 0.0]
    return decimate_steps(t, v, bins)


def queue_data(trace: Trace, *, in_flight: bool = False, memory: bool = False,
               cap: float | None | Literal["auto"] = "auto", bins: int = 1500) -> QueueData:
    """The queue figure's data step: per backend lane, decimated step series and exact peaks.

    Returns:
        The :class:`QueueData`: per lane the decimated queued (and, if asked, in-flight) step points and the exact
        peak, the memory series (or ``None``), the cap to mark, the time span, display unit and factor, and a note
        on what the counts leave out.
    """
    trace = check_trace(trace, "queue_data")
    bins = check_positive_int(bins, "bins")
    if cap == "auto":
        cap = default_cap(trace)
    elif cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or cap <= 0):
        raise ValueError(f"cap must be a positive number, None (no line) or 'auto', got {cap!r}")
    span = time_span(trace)
    unit, factor = style.time_unit(span[1] - span[0])
    queued_df = queue_length_series(trace)
    lanes = [l.name for l in trace.backend_lanes if (queued_df["lane"] == l.name).any()]
    queued = {lane: _steps(queued_df, lane, span, bins) for lane in lanes}
    peak = {lane: int(queued_df.loc[queued_df["lane"] == lane, "queue_length"].max()) for lane in lanes}
    flight = {}
    if in_flight:
        fl = queue_length_series(trace, in_flight=True)
        flight = {lane: _steps(fl, lane, span, bins) for lane in lanes if (fl["lane"] == lane).any()}
    mem = None
    if memory:
        t, b = pending_memory_series(trace)
        if len(t):
            mem = decimate_steps(np.r_[span[0], t, span[1]], np.r_[0.0, b, b[-1]], bins)
    note = ("work launched in the last ProfilerStep is not counted (HTA's default)"
            if last_step_starts(trace) else "")
    return QueueData(queued, flight, mem, peak, cap, span, unit, factor, note)


def queue_fact(data: QueueData) -> str:
    """The queue figure's one fact: the longest queue, where, and whether it reached the cap."""
    if not data.peak:
        return "nothing was queued"
    lane = max(data.peak, key=lambda k: data.peak[k])
    fact = f"the queue peaked at {data.peak[lane]:,} on {lane}"
    if data.cap is not None and data.peak[lane] >= 0.98 * data.cap:
        fact += f", at the cap of about {data.cap:g}"
    return fact


def rank_parts(trace: Trace, data: QueueData) -> list[tuple[str, QueueData]]:
    """``data`` split by rank, in rank order, for a trace of several ranks (ranks with nothing
    queued are left out); ``[("", data)]`` for a single-rank trace.  The pending-memory series
    covers all ranks and goes with the first part."""
    if len(trace.ranks) < 2:
        return [("", data)]
    out: list[tuple[str, QueueData]] = []
    for r in trace.ranks:
        names = {l.name for l in trace.backend_lanes if l.rank == r}
        if not names & set(data.queued):
            continue
        part = replace(data, queued={k: v for k, v in data.queued.items() if k in names},
                       in_flight={k: v for k, v in data.in_flight.items() if k in names},
                       peak={k: v for k, v in data.peak.items() if k in names},
                       memory=data.memory if not out else None)
        out.append((f"rank {r}", part))
    return out


def _series(x: np.ndarray, y: np.ndarray, **kwargs) -> go.Scatter | go.Scattergl:
    cls = go.Scattergl if len(x) > _GL_POINTS else go.Scatter
    return cls(x=x, y=y, mode="lines", line_shape="hv", **kwargs)


def draw_queue(fig: go.Figure, data: QueueData, *, row: int | None = None, col: int | None = None,
               webgl: bool = True) -> None:
    """Add the queue series (and cap line, memory) to ``fig``, optionally to one subplot."""
    where = {"row": row, "col": col} if row is not None else {}
    f, o = data.factor, data.span[0]
    make = _series if webgl else (lambda x, y, **kw: go.Scatter(x=x, y=y, mode="lines", line_shape="hv", **kw))
    for i, (lane, (t, v)) in enumerate(data.queued.items()):
        color = style.series_color(i)
        fig.add_trace(make((t - o) * f, v, name=f"{lane}: queued (peak {data.peak[lane]})", legendgroup=lane,
                           line={"color": color, "width": 1.5},
                           hovertemplate=f"{lane}<br>%{{y}} queued at %{{x:.4g}} {data.unit}<extra></extra>"),
                      **where)
        if lane in data.in_flight:
            tf, vf = data.in_flight[lane]
            fig.add_trace(make((tf - o) * f, vf, name=f"{lane}: in flight", legendgroup=lane,
                               line={"color": color, "width": 1, "dash": "dot"},
                               hovertemplate=f"{lane}<br>%{{y}} in flight at %{{x:.4g}} {data.unit}<extra></extra>"),
                          **where)
    if data.cap is not None:
        fig.add_hline(y=data.cap, line={"color": style.OKABE_ITO["vermillion"], "dash": "dash", "width": 1.5},
                      annotation_text=f"queue cap ≈ {data.cap:g}: launches block beyond it",
                      annotation_position="top left", annotation_font_color=style.OKABE_ITO["vermillion"],
                      **where)
    if data.memory is not None:
        t, b = data.memory
        unit, div = style.bytes_unit(float(np.max(b)) if len(b) else 0.0)
        mem_kwargs = dict(name=f"memory held by pending work ({unit})",
                          line={"color": style.OKABE_ITO["grey"], "width": 1.2},
                          hovertemplate=f"%{{y:.4g}} {unit} pending at %{{x:.4g}} {data.unit}<extra></extra>")
        if row is not None:
            fig.add_trace(make((t - o) * f, b / div, **mem_kwargs), row=row, col=col, secondary_y=True)
        else:
            fig.add_trace(make((t - o) * f, b / div, **mem_kwargs), secondary_y=True)
        sec = {"row": row, "col": col} if row is not None else {}
        fig.update_yaxes(title_text=f"pending memory ({unit})", secondary_y=True, showgrid=False,
                         rangemode="tozero", tickmode="auto", **sec)
    title = "queued (issued, not started)"
    if data.in_flight:
        title = "queued (solid), in flight (dotted)"
    primary = {"secondary_y": False} if fig._grid_ref is not None else {}
    fig.update_yaxes(title_text=title, rangemode="tozero", **primary, **where)
    fig.update_xaxes(range=[0.0, (data.span[1] - o) * f], **where)


def plot_queue_length(trace: Trace, *, in_flight: bool = False, cap: float | None | Literal["auto"] = "auto",
                      memory: bool = False, title: str | None = None) -> go.Figure:
    """The queue length of each backend lane over time, as a step series.

    Args:
        trace: a :class:`~d2l_async.trace.Trace`.
        in_flight: also draw issued-but-unfinished work (dotted).
        cap: a horizontal line at this queue length; ``"auto"`` (default) draws 1024 for profiler
            traces of CUDA streams and nothing otherwise; ``None`` draws none.
        memory: also draw the bytes held by pending work, on a secondary axis.
        title: figure title.

    Returns:
        A plotly Figure with one step line per backend lane (and the cap, in-flight and memory traces asked for),
        its fact the peak queue; an empty figure that says so when the trace is empty or nothing was queued.
    """
    title = check_title(title)
    trace = check_trace(trace, "plot_queue_length")
    title = title if title is not None else default_title(trace, "Queue length")
    if not len(trace):
        return empty_figure(title)
    data = queue_data(trace, in_flight=in_flight, memory=memory, cap=cap)
    if not data.queued:
        return empty_figure(title, "no backend work with an issue time: nothing was queued")
    parts = rank_parts(trace, data)
    if len(parts) > 1:  # one panel per rank, one above the other
        fig = make_subplots(rows=len(parts), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                            subplot_titles=[name for name, _ in parts],
                            specs=[[{"secondary_y": data.memory is not None}]] * len(parts))
        for i, (_, part) in enumerate(parts):
            draw_queue(fig, part, row=i + 1, col=1)
    else:
        fig = make_subplots(specs=[[{"secondary_y": True}]]) if data.memory is not None else go.Figure()
        draw_queue(fig, data)
    if memory and data.memory is None:
        fig.add_annotation(text="no memory sizes (nbytes) recorded in this trace", xref="paper", yref="paper",
                           x=1, y=1, xanchor="right", yanchor="bottom", showarrow=False,
                           font={"color": style.OKABE_ITO["grey"], "size": 11})
    fig.update_layout(**style.base_layout(title={"text": title, "subtitle": {"text": data.note}} if data.note else title,
                                          height=380 + 220 * (len(parts) - 1)))
    fit_title(fig)
    fig.update_xaxes(title_text=style.time_axis_title(data.unit), **({"row": len(parts), "col": 1} if len(parts) > 1 else {}))
    return describe(fig, queue_fact(data))


def plot_trace(trace: Trace, *, in_flight: bool = False, cap: float | None | Literal["auto"] = "auto",
               memory: bool = False, max_events: int = 4000, title: str | None = None) -> go.Figure:
    """The timeline over the queue length, sharing one time axis (zoom one, both follow).

    Returns:
        A plotly Figure with the timeline above the queue length on one shared time axis, its fact both figures'
        facts; an empty figure that says so for an empty trace.
    """
    title = check_title(title)
    trace = check_trace(trace, "plot_trace")
    title = title if title is not None else default_title(trace, "Timeline and queue length")
    if not len(trace):
        return empty_figure(title)
    tl = timeline_data(trace, max_events=max_events)
    q = queue_data(trace, in_flight=in_flight, memory=memory, cap=cap)
    nl = len(tl.lanes)
    parts = rank_parts(trace, q) if q.queued else [("", q)]
    nq = len(parts)
    fig = make_subplots(rows=1 + nq, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        row_heights=[0.62] + [0.38 / nq] * nq,
                        specs=[[{}]] + [[{"secondary_y": q.memory is not None}]] * nq)
    draw_timeline(fig, tl, row=1, col=1)
    for i, (_, part) in enumerate(parts):
        if part.queued:
            draw_queue(fig, part, row=2 + i, col=1)
    notes = _notes(tl)
    fig.update_layout(**style.base_layout(
        title={"text": title, "subtitle": {"text": notes}} if notes else {"text": title},
        barmode="overlay", bargap=0, height=420 + 46 * nl + 160 * (nq - 1)))
    fig.update_layout(margin={"t": 90})
    fit_title(fig)
    fig.update_xaxes(title_text=style.time_axis_title(tl.unit), row=1 + nq, col=1)
    return describe(fig, f"{timeline_fact(tl)}; {queue_fact(q)}")
