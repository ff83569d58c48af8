"""Hidden vs exposed communication per rank and setting: the bar of the distributed notebook.

Data-parallel training pays for its all-reduce only where no compute runs beside it.  The data step
:func:`comm_table` takes rows with ``setting, rank, hidden_s, exposed_s`` (what
``d2l_async.distributed.TrainingResult.rows()`` returns, or any such records) and
:func:`plot_comm_overlap` stacks, for each setting and rank, the communication hidden behind the
backward pass (green) under the exposed part (vermillion); when the rows carry ``step_s``, a second
panel beside it shows each setting's median step time (two panels, not a second y-axis).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import style
from ._common import empty_figure, fit_title

__all__ = ["comm_table", "plot_comm_overlap"]

_COLUMNS = ("setting", "rank", "hidden_s", "exposed_s")


def comm_table(rows: Any) -> pd.DataFrame:
    """The data step: one row per (setting, rank), with ``label`` (``"bucketed · rank 1"``).

    Args:
        rows: records with ``setting, rank, hidden_s, exposed_s`` (optional ``step_s``), as
            mappings, a DataFrame, or an object with ``.rows()``.

    Raises:
        TypeError: ``rows`` is not records.  ValueError: a column is missing or a time is negative.
    """
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
        raise TypeError(f"comm_table expects records or a DataFrame, got {type(rows).__name__}")
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
    return df.reset_index(drop=True)


def plot_comm_overlap(rows: Any, *, title: str | None = None) -> go.Figure:
    """Stacked bars of hidden and exposed communication per setting and rank (milliseconds).

    Args:
        rows: see :func:`comm_table`.
        title: the figure title (default: what the bars show).
    """
    df = comm_table(rows)
    if not len(df):
        return empty_figure(title, "no communication in these runs")
    factor = 1e3
    steps = "step_s" in df.columns and df["step_s"].notna().all()
    # two panels, never a second y-axis over the bars (issue 20: ticks 25.9, 51.8 and markers drawn
    # over bars): communication per rank on the left, the setting's median step on the right
    fig = make_subplots(rows=1, cols=2 if steps else 1, column_widths=[0.68, 0.32] if steps else None,
                        horizontal_spacing=0.12,
                        subplot_titles=("communication per rank (ms)", "median step, slowest rank (ms)") if steps else None)
    for col, name, colour in (("hidden_s", "hidden behind backward compute", style.OKABE_ITO["bluish_green"]),
                              ("exposed_s", "exposed (nothing to hide it)", style.OKABE_ITO["vermillion"])):
        fig.add_trace(go.Bar(x=df["label"], y=np.round(df[col].to_numpy() * factor, 4), name=name, marker_color=colour,
                             hovertemplate="%{x}<br>" + name + ": %{y:.2f} ms<extra></extra>"), row=1, col=1)
    if steps:
        per = df.groupby("setting", sort=False)["step_s"].first()
        fig.add_trace(go.Bar(x=list(per.index), y=np.round(per.to_numpy(dtype=float) * factor, 4),
                             name="median step (slowest rank)", marker_color=style.OKABE_ITO["grey"],
                             text=[f"{v * factor:.1f}" for v in per], textposition="outside", cliponaxis=False,
                             hovertemplate="%{x}<br>median step: %{y:.2f} ms<extra></extra>"), row=1, col=2)
        fig.update_yaxes(title_text="step (ms)", rangemode="tozero", row=1, col=2)
    fig.update_layout(**style.base_layout(
        title=title or "Communication per rank: hidden behind the backward pass, or exposed",
        barmode="stack", legend={"orientation": "h", "y": -0.3}))
    fig.update_xaxes(title_text="setting · rank", row=1, col=1)
    fig.update_yaxes(title_text="communication (ms)", row=1, col=1)
    return fit_title(fig)
