"""The frontend/backend timeline: the book's threading diagram, drawn from a real trace.

One row per lane, the frontend (Python) threads first, then each backend lane (engine worker,
virtual device, CUDA stream)::

    frontend      |push|push|push|#### blocked: print(z) — line 12 ####|
                     \\    \\     \\                 (connector = time in the queue)
    cpu:0 worker 0     [mul]  [add]   [mul]
                                 issue --> start

Ops are bars coloured by kind; a connector runs from the moment the frontend issued an op to the
moment its lane started it; the intervals when the frontend waited are shaded and labelled with
their cause.

Scale: a profiler trace of a training step has 10^5 events, far more than pixels.  The data step
:func:`timeline_data` therefore merges bars of one lane and kind that lie closer than a pixel
(``span / pixels``) until at most ``max_events`` bars remain, and keeps an evenly spaced subset of
at most ``max_connectors`` connectors; the figure says when it did either.  Small traces are drawn
exactly, one bar per event.

Lane groups: a trace merged from several ranks (``d2l_async.trace.merge_ranks``) draws each rank's
lanes together, rank 0 on top, a rule between ranks.  A ``with_stack=True`` profile's Python call
stack (one lane per call depth, under its thread) is drawn when the trace has at most
:data:`PYTHON_STACK_AUTO` events, or when asked (``python_stack=True``): in a large trace its
hundreds of thousands of calls would crowd out the ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..trace import BACKEND_KINDS, Lane, Trace, is_python_lane
from . import style
from ._common import (check_positive_int, check_title, check_trace, empty_figure,
                      fit_title, modelled_note, time_span, two_line_title)
from ._describe import describe, format_time
from ._roles import ROLE_COLOURS, bar_labels, bar_roles, role_color

__all__ = ["TimelineData", "timeline_data", "plot_timeline"]

#: Fraction of a row a bar fills; frontend launches are drawn thinner, on top of the ops they are in.
BAR_WIDTH = 0.7
LAUNCH_WIDTH = 0.35
#: Bars with at most this many events get their name written inside.
_TEXT_LIMIT = 40
#: Width of the plotting area of a 900 px figure (lane labels and the legend take the rest): names are
#: written inside a bar only where they fit at this width.
_PLOT_PX = 620
_CHAR_PX = 7  # width of one label character at font size 11
#: Traces with at most this many events show their Python call-stack lanes by default.
PYTHON_STACK_AUTO = 20_000


#: Heights, in rows, at which a wait's label may sit on its lane: the middle, then just above and below
#: it (three labels side by side where one row of them would overprint).
_LABEL_LEVELS = (0.0, -0.33, 0.33)


def _label_texts(label: str, statement: str, reason: str) -> tuple[str, ...]:
    """A wait's names, longest first: ``"print(b.sum()) — In[3] line 7"``, ``"print(b.sum())"``,
    ``"print"`` (a call such as ``"cudaMemcpyAsync (Device -> Pageable)"``: its first word): the
    first that fits is written.  Only the label may be cut (in its code, never its line)."""
    texts = [t for t in (label, statement, reason) if t]
    shortest = min(texts, key=len, default="")
    word = shortest.replace("(", " ").split()[0] if shortest.strip() else ""
    return tuple(dict.fromkeys(t for t in (*texts, word) if t and (t is label or not t.endswith("…"))))


def _label_positions(blocks: pd.DataFrame, origin: float, right: float):
    """``(block, text, x, y, xanchor)`` for the wait labels that fit, longest block first.

    Every block first gets its shortest name (:func:`_label_texts`) at one of the heights of
    :data:`_LABEL_LEVELS` where it overlaps no label already placed; then each takes the longest of
    its names that still fits there or at another height.  A label is centred on its block, or
    anchored to the block's edge where it would cross a plot edge: its anchor always lies in its own
    block (04's five blockers, about 80 px apart, are all named, the roomy ones in full).
    """
    per_px = (right or 1.0) / _PLOT_PX  # seconds per pixel of a 900 px figure's plotting area

    def box(lb, text):
        width = len(text) * _CHAR_PX * per_px
        centre = (lb.start + lb.end) / 2 - origin
        if centre + width / 2 > right:
            return lb.end - origin, "right", (lb.end - origin - width, lb.end - origin)
        if centre - width / 2 < 0:
            return lb.start - origin, "left", (lb.start - origin, lb.start - origin + width)
        return centre, "center", (centre - width / 2, centre + width / 2)

    placed: dict[tuple[int, float], dict[int, tuple[float, float]]] = {}

    gap = 8 * per_px  # the labels' white boxes: never touching

    def free(row: int, level: float, span: tuple[float, float], me: int) -> bool:
        return all(span[1] + gap <= a or span[0] - gap >= b
                   for k, (a, b) in placed.get((row, level), {}).items() if k != me)

    rows = list(blocks.itertuples(index=False))
    names = [_label_texts(lb.label, lb.statement, lb.reason) for lb in rows]
    spot: dict[int, tuple[str, float, float, str]] = {}
    for upgrade in (False, True):
        for i, lb in enumerate(rows):
            if upgrade and i not in spot:
                continue
            texts = names[i][:-1] if upgrade else names[i][-1:]  # longer names, or the shortest one
            for text in texts:
                x, anchor, span = box(lb, text)
                level = next((lv for lv in _LABEL_LEVELS if free(int(lb.row), lv, span, i)), None)
                if level is None:
                    continue
                if i in spot:
                    placed[(int(lb.row), spot[i][2])].pop(i)
                placed.setdefault((int(lb.row), level), {})[i] = span
                spot[i] = (text, x, level, anchor)
                break
    for i, lb in enumerate(rows):
        if i in spot:
            text, x, level, anchor = spot[i]
            yield lb, text, x, lb.row + level, anchor


@dataclass(frozen=True)
class TimelineData:
    """Everything the timeline draws, in seconds (the drawing step converts to ``unit``).

    Attributes:
        lanes: lanes in display order (row ``i`` is ``lanes[i]``).
        labels: axis label of each row (virtual lanes say ``(virtual)``).
        bars: one row per bar: ``row, lane, kind, name, start, end, issue, count, reads, writes,
            source``; ``count > 1`` marks bars merged from events closer than a pixel.
        connectors: ``issue, start, from_row, to_row, name`` for the issue→start connectors drawn.
        n_connectors: how many events had an issue time (connectors before the cap).
        blocks: frontend waits: ``row, start, end, reason, source, label, statement``.
        span: (first, last) time of the trace in seconds; the figure draws ``span[0]`` as 0.
        unit, factor: display unit and the factor from seconds to it.
        n_events: bars before merging.
        hidden_python: Python call-stack events left out (``python_stack`` off).
    """

    lanes: tuple[Lane, ...]
    labels: tuple[str, ...]
    bars: pd.DataFrame
    connectors: pd.DataFrame
    n_connectors: int
    blocks: pd.DataFrame
    span: tuple[float, float]
    unit: str
    factor: float
    n_events: int
    hidden_python: int = 0

    @property
    def origin(self) -> float:
        """Time drawn as zero: the trace's first event (recorders do not all start at 0)."""
        return self.span[0]

    @property
    def merged(self) -> bool:
        return len(self.bars) < self.n_events


def _merge(group: np.ndarray, start: np.ndarray, end: np.ndarray, gap: float) -> np.ndarray:
    """Segment id per event (events sorted by group, then start): a new segment begins where the
    group changes or the event starts more than ``gap`` after everything before it has ended."""
    n = len(start)
    if not n:
        return np.empty(0, dtype=np.int64)
    lo = min(start.min(), end.min())
    big = (max(end.max(), start.max()) - lo) * 4 + gap * 4 + 1.0
    # offset each group by a large constant so one running maximum never crosses groups
    shifted_end = (end - lo) + group * big
    running = np.maximum.accumulate(shifted_end)
    prev = np.r_[-np.inf, running[:-1]]
    new = np.r_[True, group[1:] != group[:-1]] | ((start - lo) + group * big > prev + gap)
    return np.cumsum(new) - 1


def _without_python_stack(trace: Trace, python_stack: bool | None) -> tuple[Trace, int]:
    """The trace without its Python call-stack lanes when they are not to be drawn."""
    py_lanes = [l.name for l in trace.lanes if is_python_lane(l)]
    if not py_lanes:
        return trace, 0
    if python_stack is None:
        python_stack = len(trace) <= PYTHON_STACK_AUTO
    if python_stack:
        return trace, 0
    wanted = set(py_lanes)
    on_py = np.fromiter(map(wanted.__contains__, trace["lane"].tolist()), dtype=bool, count=len(trace))
    kept = trace.filter(~on_py)
    return type(trace)(tuple(l for l in trace.lanes if l.name not in wanted), kept.columns, kept.meta), int(on_py.sum())


def timeline_data(
    trace: Trace, *, max_events: int = 4000, max_connectors: int = 1500, pixels: int = 1500,
    python_stack: bool | None = None,
) -> TimelineData:
    """The timeline's data step: lanes, bars (merged below a pixel when needed), connectors, blocks.

    Args:
        trace: the trace to draw.
        max_events: most bars to keep; beyond it bars of one lane and kind closer than a pixel are
            merged (the pixel is ``span / pixels``, doubled until the bars fit; never fewer than
            one bar per lane and kind).
        max_connectors: most issue→start connectors; an evenly spaced subset is kept beyond it.
        pixels: the plot width the merging assumes.
        python_stack: draw the Python call-stack lanes of a ``with_stack=True`` profile; ``None``
            (default) draws them for traces of at most :data:`PYTHON_STACK_AUTO` events.

    Returns:
        The :class:`TimelineData`: lanes and row labels, the (merged) bars, the connectors kept and how many there
        were, the frontend's waits, the span, the display unit and factor, the event count before merging and the
        Python-stack events left out.
    """
    trace = check_trace(trace, "timeline_data")
    if python_stack is not None and not isinstance(python_stack, bool):
        raise TypeError(f"python_stack must be True, False or None, got {python_stack!r}")
    trace, hidden = _without_python_stack(trace, python_stack)
    max_events = check_positive_int(max_events, "max_events")
    max_connectors = check_positive_int(max_connectors, "max_connectors", minimum=0)
    pixels = check_positive_int(pixels, "pixels")
    lanes = tuple(trace.lanes)
    rows = {lane.name: i for i, lane in enumerate(lanes)}
    modelled = trace.meta.get("modelled") or {}  # modelled-time devices (engine/_modelled.py) say so
    labels = tuple(f"{l.name} (modelled)" if l.device in modelled else style.lane_label(l) for l in lanes)
    span = time_span(trace)
    unit, factor = style.time_unit(span[1] - span[0])

    kind = trace["kind"].astype(str)
    lane_col = trace["lane"].astype(str)
    start, end = trace["start"], trace["end"]
    finite = np.isfinite(start) & np.isfinite(end)
    row_of = np.fromiter((rows[n] for n in lane_col), dtype=np.int64, count=len(lane_col))

    # -- bars ---------------------------------------------------------------------------------
    bar_idx = np.flatnonzero(finite & (kind != "block"))
    n_events = len(bar_idx)
    kinds = np.unique(kind[bar_idx]) if n_events else np.empty(0, dtype=object)
    kind_code = np.searchsorted(kinds, kind[bar_idx])
    group = row_of[bar_idx] * max(len(kinds), 1) + kind_code
    order = np.lexsort((start[bar_idx], group))
    idx, group = bar_idx[order], group[order]
    if n_events > max_events:
        width = span[1] - span[0]
        gap = width / pixels if width > 0 else 1.0
        seg = _merge(group, start[idx], end[idx], gap)
        # a gap wider than the span merges each lane and kind into one bar: the fewest possible
        while seg[-1] + 1 > max_events and gap <= width:
            gap *= 2
            seg = _merge(group, start[idx], end[idx], gap)
        first = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
        count = np.diff(np.r_[first, len(idx)])
        b_start = np.minimum.reduceat(start[idx], first)
        b_end = np.maximum.reduceat(end[idx], first)
        head = idx[first]
        names = trace["name"][head].astype(str)
        names = np.where(count > 1, np.char.add(np.char.add(count.astype(str), " events from "), names.astype(str)), names)
        bars = pd.DataFrame({
            "row": row_of[head], "lane": lane_col[head], "kind": kind[head], "name": names,
            "start": b_start, "end": b_end, "issue": np.where(count > 1, np.nan, trace["issue"][head]),
            "count": count, "reads": trace["reads"][head], "writes": trace["writes"][head],
            "source": trace["source"][head],
        })
    else:
        bars = pd.DataFrame({
            "row": row_of[idx], "lane": lane_col[idx], "kind": kind[idx],
            "name": trace["name"][idx].astype(str), "start": start[idx], "end": end[idx],
            "issue": trace["issue"][idx], "count": np.ones(len(idx), dtype=np.int64),
            "reads": trace["reads"][idx], "writes": trace["writes"][idx], "source": trace["source"][idx],
        })

    bars["role"] = bar_roles(bars, lanes)

    # -- connectors: issue (frontend lane) -> start (backend lane) ------------------------------
    frontend_rows = [rows[l.name] for l in trace.frontend_lanes]
    conn_idx = np.flatnonzero(finite & np.isin(kind, BACKEND_KINDS) & np.isfinite(trace["issue"]))
    conn_idx = conn_idx[np.isin(row_of[conn_idx], frontend_rows, invert=True)]
    n_conn = len(conn_idx)
    if frontend_rows and n_conn and max_connectors:
        conn_idx = conn_idx[np.argsort(trace["issue"][conn_idx], kind="stable")]
        if n_conn > max_connectors:
            conn_idx = conn_idx[np.unique(np.linspace(0, n_conn - 1, max_connectors).round().astype(np.int64))]
        from_row = np.full(len(conn_idx), frontend_rows[0], dtype=np.int64)
        if len(frontend_rows) > 1:  # find the thread that launched it through the flow id
            flow = trace["flow"]
            fe = np.flatnonzero(np.isin(row_of, frontend_rows) & (flow != -1))
            flow_row = pd.Series(row_of[fe], index=flow[fe])
            flow_row = flow_row[~flow_row.index.duplicated()]
            mapped = pd.Series(flow[conn_idx]).map(flow_row).to_numpy()
            from_row = np.where(np.isnan(mapped.astype(float)), from_row, np.nan_to_num(mapped.astype(float))).astype(np.int64)
        connectors = pd.DataFrame({
            "issue": trace["issue"][conn_idx], "start": start[conn_idx], "from_row": from_row,
            "to_row": row_of[conn_idx], "name": trace["name"][conn_idx].astype(str),
        })
    else:
        connectors = pd.DataFrame({"issue": [], "start": [], "from_row": [], "to_row": [], "name": []})

    # -- blocks -------------------------------------------------------------------------------
    blk = np.flatnonzero(finite & (kind == "block"))
    blocks = pd.DataFrame({
        "row": row_of[blk], "start": start[blk], "end": end[blk],
        "reason": trace["reason"][blk].astype(str), "source": trace["source"][blk].astype(str),
    })
    blocks["label"] = [style.block_label(r, s) for r, s in zip(blocks["reason"], blocks["source"])]
    blocks["statement"] = [style.block_statement(r, s) for r, s in zip(blocks["reason"], blocks["source"])]
    return TimelineData(lanes, labels, bars, connectors, n_conn, blocks, span, unit, factor, n_events, hidden)


# -- drawing ----------------------------------------------------------------------------------
def _fmt_labels(values: Any) -> str:
    values = tuple(values) if isinstance(values, (tuple, list)) else ()
    return ", ".join(map(str, values)) if values else "—"


def _hover(bars: pd.DataFrame, unit: str, factor: float, origin: float) -> list[str]:
    out = []
    for r in bars.itertuples(index=False):
        issue = "—" if not np.isfinite(r.issue) else f"{(r.issue - origin) * factor:.4g} {unit}"
        text = (
            f"<b>{r.name}</b> ({r.kind} on {r.lane})<br>"
            f"issue {issue} · start {(r.start - origin) * factor:.4g} · end {(r.end - origin) * factor:.4g} {unit}<br>"
            f"duration {(r.end - r.start) * factor:.4g} {unit}"
        )
        if r.count > 1:
            text += f"<br>{r.count} events closer than a pixel, merged"
        else:
            text += f"<br>reads: {_fmt_labels(r.reads)} · writes: {_fmt_labels(r.writes)}"
            if r.source:
                text += f"<br>{r.source}"
        out.append(text)
    return out


def draw_timeline(fig: go.Figure, data: TimelineData, *, row: int | None = None, col: int | None = None,
                  connectors: bool = True, max_labels: int = 12, labels_as_text: bool = False) -> None:
    """Add the timeline's traces to ``fig`` (optionally to one subplot) and style its axes.

    Args:
        max_labels: most waits named on the figure (the longest).
        labels_as_text: name the waits with a text trace instead of annotations (annotations sit
            above every trace, so an animation's curtain could not hide them).
    """
    where = {"row": row, "col": col} if row is not None else {}
    f, unit, o = data.factor, data.unit, data.origin
    frontend_rows = {i for i, l in enumerate(data.lanes) if l.is_frontend}
    nrows = len(data.lanes)
    # a bar narrower than a pixel would vanish (10's modelled all-reduces beside a 1 s backward pass):
    # draw it 1.5 px wide on a 900 px figure (hover keeps the real times)
    min_width = (data.span[1] - o) * 1.5 / _PLOT_PX

    # blocked intervals under everything: a faint band over all lanes, a strong one on the frontend
    if len(data.blocks):
        b = data.blocks
        xs = (np.column_stack([b["start"], b["end"], b["end"], b["start"], b["start"],
                              np.full(len(b), np.nan)]).ravel() - o) * f
        top, bottom = -0.5, nrows - 0.5
        band_y = np.tile([top, top, bottom, bottom, top, np.nan], len(b))
        fig.add_trace(go.Scatter(x=xs, y=band_y, fill="toself", mode="none", hoverinfo="skip",
                                 fillcolor="rgba(213,94,0,0.07)", showlegend=False), **where)
        r = b["row"].to_numpy(float)
        lane_y = np.column_stack([r - 0.45, r - 0.45, r + 0.45, r + 0.45, r - 0.45, np.full(len(b), np.nan)]).ravel()
        fig.add_trace(go.Scatter(x=xs, y=lane_y, fill="toself", mode="none", hoverinfo="skip",
                                 fillcolor="rgba(213,94,0,0.35)", name="frontend blocked"), **where)
        fig.add_trace(go.Scatter(
            x=((b["start"] + b["end"]).to_numpy() / 2 - o) * f, y=r, mode="markers",
            marker={"size": 1, "color": style.KIND_COLORS["block"]}, showlegend=False,
            hovertext=[f"<b>frontend blocked</b>: {lbl}<br>{(s - o) * f:.4g} → {(e - o) * f:.4g} {unit} "
                       f"({(e - s) * f:.4g} {unit})" for lbl, s, e in zip(b["label"], b["start"], b["end"])],
            hovertemplate="%{hovertext}<extra></extra>"), **where)
        longest = b.assign(d=b["end"] - b["start"]).nlargest(max_labels, "d")
        right = data.span[1] - o
        spots = list(_label_positions(longest, o, right))
        if labels_as_text and spots:  # a trace, drawn under whatever is added after it (an animation's curtain)
            fig.add_trace(go.Scatter(
                x=[x * f for _, _, x, _, _ in spots], y=[y for _, _, _, y, _ in spots], mode="text",
                text=[t for _, t, _, _, _ in spots], hoverinfo="skip", showlegend=False,
                textposition=[{"left": "middle right", "right": "middle left"}.get(a, "middle center")
                              for *_, a in spots],
                textfont={"size": 11, "color": style.KIND_COLORS["block"]}), **where)
        for lb, text, x, y, anchor in ([] if labels_as_text else spots):
            fig.add_annotation(x=x * f, y=y, xanchor=anchor,
                               text=text, showarrow=False, bgcolor="rgba(255,255,255,0.75)",
                               font={"size": 11, "color": style.KIND_COLORS["block"]}, **where)

    # bars, one trace per role (or per kind) so the legend explains the colours
    bars = data.bars
    small = len(bars) <= _TEXT_LIMIT and not data.merged  # names only where each bar is one event
    px_per = _PLOT_PX / max((data.span[1] - o), 1e-12)  # pixels per second of the drawn plot
    order = {k: i for i, k in enumerate(style.KIND_ORDER)}
    roles = bars["role"] if "role" in bars.columns else pd.Series([""] * len(bars), index=bars.index)
    key = np.where(roles.astype(str) != "", roles.astype(str), bars["kind"].astype(str)) if len(bars) else []
    groups = bars.assign(_key=key).groupby("_key", sort=False) if len(bars) else []
    names_shown = bar_labels(bars, px_per) if small else None
    role_names = sorted({r for r in roles if r}, key=lambda r: (list(ROLE_COLOURS).index(r) if r in ROLE_COLOURS
                                                               else len(ROLE_COLOURS), r))
    for name, grp in sorted(groups, key=lambda kv: (kv[0] not in role_names,
                                                   role_names.index(kv[0]) if kv[0] in role_names
                                                   else order.get(kv[0], len(order)))):
        kind = str(grp["kind"].iloc[0])
        on_frontend = grp["row"].isin(frontend_rows).to_numpy()
        width = np.where(on_frontend & (kind != "op"), LAUNCH_WIDTH, BAR_WIDTH)
        colour = role_color(name, role_names.index(name)) if name in role_names else style.kind_color(kind)
        text = names_shown.loc[grp.index].tolist() if small else None
        fig.add_trace(go.Bar(
            orientation="h", base=(grp["start"].to_numpy() - o) * f, x=np.maximum((grp["end"] - grp["start"]).to_numpy(), min_width) * f,
            y=grp["row"].to_numpy(), width=width, name=str(name), marker={"color": colour, "line": {"width": 0}},
            hovertext=_hover(grp, unit, f, o), hovertemplate="%{hovertext}<extra></extra>",
            text=text, textposition="inside" if small else None, constraintext="none" if small else None,
            insidetextanchor="middle", textfont={"size": 11}, cliponaxis=False, showlegend=True,
        ), **where)

    # connectors: issue on the frontend -> start on the backend lane (the time spent queued)
    c = data.connectors
    if connectors and len(c):
        n = len(c)
        xs = (np.column_stack([c["issue"], c["start"], np.full(n, np.nan)]).ravel() - o) * f
        ys = np.column_stack([c["from_row"] + 0.2, c["to_row"] - BAR_WIDTH / 2, np.full(n, np.nan)]).ravel()
        waits = [f"<b>{name}</b> waited {(s - i) * f:.4g} {unit} in the queue"
                 for name, i, s in zip(c["name"], c["issue"], c["start"])]
        shown = "" if n == data.n_connectors else f" ({n} of {data.n_connectors})"
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines+markers", name=f"queued: issue → start{shown}",
            line={"color": f"rgba(102,102,102,{0.6 if n <= 50 else 0.25 if n <= 300 else 0.12})", "width": 1},
            marker={"symbol": "arrow", "angleref": "previous", "size": np.tile([0, 7, 0], n),
                    "color": f"rgba(102,102,102,{0.8 if n <= 50 else 0.3})"},
            hovertext=[t for w in waits for t in (w, w, "")], hovertemplate="%{hovertext}<extra></extra>",
        ), **where)

    # a rule between lane groups of different ranks: one rank above the other
    ranks = [l.rank for l in data.lanes]
    for i in range(1, nrows):
        if ranks[i] != ranks[i - 1]:
            fig.add_hline(y=i - 0.5, line={"color": style.OKABE_ITO["grey"], "width": 1.5}, **where)
    fig.update_yaxes(tickvals=list(range(nrows)), ticktext=list(data.labels), range=[nrows - 0.4, -0.6],
                     showgrid=False, zeroline=False, **where)
    fig.update_xaxes(range=[0.0, (data.span[1] - o) * f], **where)


def _notes(data: TimelineData) -> str:
    notes = []
    if data.merged:
        notes.append(f"{data.n_events:,} events drawn as {len(data.bars):,} bars (events closer than a pixel merged)")
    if len(data.connectors) < data.n_connectors:
        notes.append(f"{len(data.connectors):,} of {data.n_connectors:,} queue connectors shown")
    if data.hidden_python:
        notes.append(f"Python call stack ({data.hidden_python:,} calls) hidden: python_stack=True draws it")
    return "; ".join(notes)


def timeline_fact(data: TimelineData) -> str:
    """The timeline's one fact, from its data: how long the frontend waited, and for what; else how
    busy the busiest backend lane was."""
    span = data.span[1] - data.span[0]
    head = f"{len(data.lanes)} lanes over {format_time(span)}"
    b = data.blocks
    if len(b):
        d = (b["end"] - b["start"]).to_numpy(float)
        i = int(np.argmax(d))
        waits = f"{len(b)} wait{'s' if len(b) != 1 else ''}"
        return (f"{head}; the frontend waited {format_time(float(d.sum()))} in {waits}, the longest "
                f"{format_time(float(d[i]))} at {b['label'].iloc[i]}")
    backend = data.bars[~data.bars["row"].isin([i for i, l in enumerate(data.lanes) if l.is_frontend])]
    if len(backend):
        busy = (backend["end"] - backend["start"]).groupby(backend["lane"]).sum()
        lane = str(busy.idxmax())
        return f"{head}; the frontend never waited; {lane} ran work for {format_time(float(busy.max()))}"
    return f"{head}; the frontend never waited"


def default_title(trace: Trace, what: str) -> str:
    """``what`` and the event count on the first line; where the trace came from, said once, below."""
    device = str(trace.meta.get("device", "") or "")
    source = trace.meta.get("source", "")
    details = [device] if device else [f"source: {source}"] if source else []
    if trace.is_virtual and "virtual" not in device.lower():
        details.append("virtual devices (threads, not hardware)")
    return two_line_title(f"{what} — {len(trace):,} events", "; ".join(details))


def plot_timeline(trace: Trace, *, max_events: int = 4000, max_connectors: int = 1500,
                  title: str | None = None, python_stack: bool | None = None) -> go.Figure:
    """The frontend/backend timeline of a trace: lanes as rows, ops as bars, queue connectors,
    shaded frontend waits.

    Args:
        trace: a :class:`~d2l_async.trace.Trace` (from ``eng.trace()``, a sample or a profiler file).
        max_events: most bars drawn; denser traces merge bars closer than a pixel.
        max_connectors: most issue→start connectors drawn.
        title: figure title (default: what the trace is).
        python_stack: draw a ``with_stack=True`` profile's Python call-stack lanes (default:
            only for traces of at most :data:`PYTHON_STACK_AUTO` events).

    Returns:
        A ``plotly.graph_objects.Figure``; an empty trace gives a figure saying "no events".
    """
    title = check_title(title)
    trace = check_trace(trace, "plot_timeline")
    title = title if title is not None else default_title(trace, "Frontend and backend timeline")
    title = modelled_note(title, trace.meta)  # modelled devices say so on every figure
    if not len(trace):
        return empty_figure(title)
    data = timeline_data(trace, max_events=max_events, max_connectors=max_connectors, python_stack=python_stack)
    fig = go.Figure()
    draw_timeline(fig, data)
    notes = _notes(data)
    fig.update_layout(**style.base_layout(
        title={"text": title, "subtitle": {"text": notes}} if notes else {"text": title},
        barmode="overlay", height=160 + 46 * len(data.lanes), bargap=0,
    ))
    fig.update_layout(margin={"t": 90})
    fit_title(fig)
    fig.update_xaxes(title_text=style.time_axis_title(data.unit))
    return describe(fig, timeline_fact(data))
