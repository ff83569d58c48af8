"""Hidden vs exposed communication per rank and setting: the bar of the distributed notebook.

Data-parallel training pays for its all-reduce only where no compute runs beside it.  The data step
:func:`comm_table` takes rows with ``setting, rank, hidden_s, exposed_s`` (what
``d2l_async.distributed.TrainingResult.rows()`` returns, or any such records) and
:func:`plot_comm_overlap` stacks, for each setting and rank, the communication hidden behind the
backward pass (green) under the exposed part (vermillion); when the rows carry ``step_s``, a second
panel beside it shows each setting's median step time (two panels, not a second y-axis).

A straggler (a result whose ``delay_s`` has a setting with a slow rank) is a different lesson: the
other ranks' communication is mostly *waiting* for the slow rank to join, which is neither hidden nor
useful.  Given the result itself (its ``traces``), the bars then split each rank's communication into
the time before the last rank joined (:func:`join_wait`, read from the trace) and the rest, and the
subtitle states what this run measured (the wait against the delay, the two median steps).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis import union_seconds
from ..trace import Trace, rank_lanes
from . import style
from ._common import check_title, empty_figure, fit_title, wrap_categories
from ._describe import describe, format_time

__all__ = ["comm_table", "join_wait", "plot_comm_overlap"]

_COLUMNS = ("setting", "rank", "hidden_s", "exposed_s")


def join_wait(trace: Trace) -> dict[int, float]:
    """Per rank, the seconds its communication spent before the last rank joined: no collective can
    finish before every rank has entered it, so that time is waiting for the slowest rank, whatever
    ran beside it.  The ``k``-th collective of each rank (by start) is matched with the ``k``-th of
    the others (every rank issues the same collectives in the same order); when the ranks' counts
    differ (a recording cut short), only the first collective is matched.

    Ranks without collectives are left out; a trace of one rank gives ``{}``.

    Returns:
        Rank -> seconds its collectives spent before the last rank entered them (the union of those intervals).
    """
    if not isinstance(trace, Trace):
        raise TypeError(f"join_wait expects a Trace, got {type(trace).__name__}")
    lane = trace["lane"]
    comm = {}
    for rl in rank_lanes(trace):
        mask = np.isin(lane, list(rl.communication)) if rl.communication else np.zeros(len(trace), bool)
        mask &= np.isfinite(trace["start"]) & np.isfinite(trace["end"])
        if mask.any():
            order = np.argsort(trace["start"][mask], kind="stable")
            comm[int(rl.rank)] = (trace["start"][mask][order].astype(float), trace["end"][mask][order].astype(float))
    if len(comm) < 2:
        return {}
    counts = {len(s) for s, _ in comm.values()}
    k = counts.pop() if len(counts) == 1 else 1
    joined = np.max([s[:k] for s, _ in comm.values()], axis=0)  # when the last rank entered each collective
    out = {}
    for r, (s, e) in comm.items():
        lo, hi = s[:k], np.minimum(e[:k], joined)
        out[r] = union_seconds(lo[hi > lo], hi[hi > lo])
    return out


def comm_table(rows: Any) -> pd.DataFrame:
    """The data step: one row per (setting, rank), with ``label`` (``"bucketed · rank 1"``).

    Args:
        rows: records with ``setting, rank, hidden_s, exposed_s`` (optional ``step_s``), as
            mappings, a DataFrame, or an object with ``.rows()``.

    Returns:
        A pandas DataFrame with the input's columns plus ``label``, one row per (setting, rank), on a fresh index;
        an empty frame with the columns ``setting, rank, hidden_s, exposed_s, label`` for no rows.

    Raises:
        TypeError: ``rows`` is not records.  ValueError: a column is missing or a time is negative.
    """
    source = rows
    if hasattr(rows, "rows") and callable(rows.rows):
        rows = rows.rows()
    if isinstance(rows, pd.DataFrame):
        df = rows.copy()
    elif isinstance(rows, Iterable) and not isinstance(rows, (str, bytes, Mapping)):
        rows = list(rows)
        if not all(isinstance(r, Mapping) for r in rows):
            raise TypeError("comm_table expects records (mappings) with setting, rank, hidden_s, exposed_s")
        df = pd.DataFrame(rows)
    else:
        raise TypeError(f"comm_table expects records or a DataFrame for rows, got {type(rows).__name__} {rows!r:.80}")
    if not len(df):
        return pd.DataFrame(columns=[*_COLUMNS, "label"])
    missing = [c for c in _COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"comm_table: rows lack {missing}; expected columns {list(_COLUMNS)}")
    for col in ("hidden_s", "exposed_s"):
        values = pd.to_numeric(df[col], errors="coerce")
        if values.isna().any() or (values < 0).any():
            raise ValueError(f"comm_table: {col} must be seconds >= 0")
        df[col] = values.astype(float)
    df["label"] = [f"{s} · rank {int(r)}" for s, r in zip(df["setting"], df["rank"])]
    traces = getattr(source, "traces", None)
    if isinstance(traces, Mapping) and all(isinstance(traces.get(s), Trace) for s in df["setting"].unique()):
        waits = {s: join_wait(traces[s]) for s in df["setting"].unique()}
        df["waiting_s"] = [waits[s].get(int(r), 0.0) for s, r in zip(df["setting"], df["rank"])]
    return df.reset_index(drop=True)


def _straggler(source: Any) -> tuple[str, float, int] | None:
    """(setting, delay in seconds, slow rank) of a result with a straggler setting, else None."""
    delays = getattr(source, "delay_s", None)
    if not isinstance(delays, Mapping) or not delays or max(delays.values()) <= 0:
        return None
    setting = max(delays, key=lambda k: delays[k])
    return str(setting), float(delays[setting]), int(getattr(source, "slow_rank", -1))


def _steps_fact(df: pd.DataFrame, first: str | None = None) -> str:
    per = df.groupby("setting", sort=False)["step_s"].first()
    names = list(per.index)
    if first in names:
        names = [first] + [n for n in names if n != first]
    return "median step " + " vs ".join(f"{format_time(per[n])} {n}" for n in names)


def _subtitle(df: pd.DataFrame, straggler: tuple[str, float, int] | None, steps: bool) -> str:
    """The measured fact of the figure, from its own data."""
    if straggler is not None and "waiting_s" in df.columns:
        setting, delay, slow = straggler
        sub = df[(df["setting"] == setting) & (df["rank"] != slow)]
        waited = ", ".join(f"rank {int(r)} {format_time(w)}" for r, w in zip(sub["rank"], sub["waiting_s"]))
        fact = (f"with rank {slow} sleeping {format_time(delay)} per step ({setting}), the other ranks' all-reduces "
                f"waited for it to join: {waited}")
    else:
        parts = []
        for setting, grp in df.groupby("setting", sort=False):
            comm = float((grp["hidden_s"] + grp["exposed_s"]).sum())
            share = 100 * float(grp["hidden_s"].sum()) / comm if comm > 0 else 0.0
            parts.append(f"{setting} {share:.0f} %")
        fact = "communication hidden behind backward compute: " + ", ".join(parts)
    if steps:
        fact += "; " + _steps_fact(df, straggler[0] if straggler else None)
    return fact


def plot_comm_overlap(rows: Any, *, title: str | None = None) -> go.Figure:
    """Stacked bars of each rank's communication per setting (milliseconds), and the median steps.

    Args:
        rows: see :func:`comm_table`.  Given a result with traces and a straggler setting (e.g.
            ``run_straggler()``'s), the bars split the waiting for the slow rank from the rest.
        title: the figure title (default: what the bars show); the subtitle is always the run's
            measured fact.

    Returns:
        A plotly Figure of stacked hidden/exposed (and, for a straggler run, waiting) milliseconds per setting and
        rank, with the median step times; an empty figure saying "no communication in these runs" for no rows.
    """
    title = check_title(title)
    df = comm_table(rows)
    if not len(df):
        return empty_figure(title, "no communication in these runs")
    factor = 1e3
    steps = "step_s" in df.columns and df["step_s"].notna().all()
    straggler = _straggler(rows) if "waiting_s" in df.columns else None
    # two panels, never a second y-axis over the bars (ticks 25.9, 51.8 and markers drawn over bars):
    # communication per rank on the left, the setting's median step on the right
    fig = make_subplots(rows=1, cols=2 if steps else 1, column_widths=[0.68, 0.32] if steps else None,
                        horizontal_spacing=0.12,
                        subplot_titles=("communication per rank (ms)", "median step, slowest rank (ms)") if steps else None)
    if straggler is not None:
        slow = straggler[2]
        rest = (df["hidden_s"] + df["exposed_s"] - df["waiting_s"]).clip(lower=0.0)
        parts = ((df["waiting_s"], f"waiting for rank {slow} to join", style.OKABE_ITO["orange"]),
                 (rest, "reducing, once every rank had joined", style.OKABE_ITO["blue"]))
    else:
        parts = ((df["hidden_s"], "hidden behind backward compute", style.OKABE_ITO["bluish_green"]),
                 (df["exposed_s"], "exposed (nothing to hide it)", style.OKABE_ITO["vermillion"]))
    for values, name, colour in parts:
        fig.add_trace(go.Bar(x=df["label"], y=np.round(values.to_numpy(float) * factor, 4), name=name,
                             marker_color=colour, hovertemplate="%{x}<br>" + name + ": %{y:.2f} ms<extra></extra>"),
                      row=1, col=1)
    if steps:
        per = df.groupby("setting", sort=False)["step_s"].first()
        fig.add_trace(go.Bar(x=list(per.index), y=np.round(per.to_numpy(dtype=float) * factor, 4),
                             name="median step (slowest rank)", marker_color=style.OKABE_ITO["grey"],
                             text=[f"{v * factor:.1f}" for v in per], textposition="outside", cliponaxis=False,
                             hovertemplate="%{x}<br>median step: %{y:.2f} ms<extra></extra>"), row=1, col=2)
        fig.update_yaxes(title_text="step (ms)", rangemode="tozero", row=1, col=2)
        fig.update_xaxes(tickmode="array", tickvals=list(per.index),
                         ticktext=wrap_categories([str(v) for v in per.index], share=0.32 * 0.88), row=1, col=2)
    fact = _subtitle(df, straggler, steps)
    fig.update_layout(**style.base_layout(
        title={"text": title or ("Communication per rank: waiting for the slowest rank, or reducing" if straggler
                                 else "Communication per rank: hidden behind the backward pass, or exposed"),
               "subtitle": {"text": fact}},
        barmode="stack", legend={"orientation": "h", "y": -0.28, "x": 0.0}, margin={"l": 10, "r": 20, "t": 60, "b": 110}))
    labels = df["label"].tolist()
    # "after_backward · rank 0" fits its slot on two lines; turned, it ran into the legend
    fig.update_xaxes(tickmode="array", tickvals=labels, tickangle=0,
                     ticktext=wrap_categories(labels, share=(0.68 if steps else 1.0) * 0.88), row=1, col=1)
    fig.update_yaxes(title_text="communication (ms)", row=1, col=1)
    fit_title(fig)
    if steps:  # the panels' own titles sit above the plots, under the subtitle
        fig.update_layout(margin={"t": int(fig.layout.margin.t or 60) + 28})
    return describe(fig, fact)
