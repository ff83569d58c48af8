"""Hidden vs exposed communication per rank and setting: the bar of the distributed notebook.

Data-parallel training pays for its all-reduce only where no compute runs beside it.  The data step
:func:`comm_table` takes rows with ``setting, rank, hidden_s, exposed_s`` (what
``d2l_async.distributed.TrainingResult.rows()`` returns, or any such records) and
:func:`plot_comm_overlap` stacks, for each setting and rank, the communication hidden behind the
backward pass (green) under the exposed part (vermillion), with the median step time of the
setting as a marker on a second axis when the rows carry ``step_s``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

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
    fig = go.Figure()
    for col, name, colour in (("hidden_s", "hidden behind backward compute", style.OKABE_ITO["bluish_green"]),
                              ("exposed_s", "exposed (nothing to hide it)", style.OKABE_ITO["vermillion"])):
        fig.add_bar(x=df["label"], y=np.round(df[col].to_numpy() * factor, 4), name=name, marker_color=colour,
                    hovertemplate="%{x}<br>" + name + ": %{y:.2f} ms<extra></extra>")
    if "step_s" in df.columns and df["step_s"].notna().all():
        fig.add_scatter(x=df["label"], y=np.round(df["step_s"].to_numpy(dtype=float) * factor, 4), mode="markers",
                        name="median step (slowest rank)", yaxis="y2",
                        marker={"symbol": "diamond", "size": 10, "color": style.OKABE_ITO["black"]},
                        hovertemplate="%{x}<br>median step: %{y:.2f} ms<extra></extra>")
        fig.update_layout(yaxis2={"title": "step time (ms)", "overlaying": "y", "side": "right", "rangemode": "tozero",
                                  "showgrid": False})
    fig.update_layout(**style.base_layout(
        title=title or "Communication per rank: hidden behind the backward pass, or exposed",
        barmode="stack", xaxis_title="setting · rank", yaxis_title="communication (ms)",
        legend={"orientation": "h", "y": -0.25}))
    return fit_title(fig)
