"""Timings side by side: the chapter's "illusion" (naive timing) next to the honest number.

:func:`plot_measurements` draws every raw run of each measurement as a box with its points, so the
spread is visible, and the book's published numbers as reference marks labelled "book", each in a
category of its own right after the measurement it compares with (a mark drawn inside a
measured box read as if it were one of our runs).
:func:`plot_scheduling_overhead` draws the engine's per-op cost against its number of workers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style
from .._args import mapping
from ._common import check_title, empty_figure, fit_title, wrap_categories
from ._describe import describe, format_time

__all__ = ["plot_measurements", "plot_scheduling_overhead", "measurement_table", "book_column"]

_NAIVE = style.OKABE_ITO["vermillion"]
_SYNCED = style.OKABE_ITO["blue"]


def _runs(label: str, value: Any) -> tuple[np.ndarray, bool | None]:
    raw = getattr(value, "raw", None)
    if raw is None:
        raw = getattr(value, "times", None)
    if raw is None:
        raw = value
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Iterable):
        raise TypeError(f"measurement {label!r}: expected a sequence of seconds or an object with .raw/.times "
                        f"(d2l_async.benchmark.Measurement), got {type(value).__name__}")
    try:
        runs = np.asarray(list(raw), dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"measurement {label!r}: runs must be numbers of seconds") from exc
    if not len(runs):
        raise ValueError(f"measurement {label!r} has no runs; measure at least once")
    if not np.all(np.isfinite(runs)) or np.any(runs < 0):
        raise ValueError(f"measurement {label!r} has negative or non-finite times; times are seconds >= 0")
    synced = getattr(value, "synchronized", None)
    return runs, synced if isinstance(synced, bool) else None


def measurement_table(measurements: Any) -> pd.DataFrame:
    """The data step: one row per raw run with columns ``label, run, seconds, synchronized``.

    ``measurements`` is a mapping label -> runs (a sequence of seconds, or an object with
    ``.raw``/``.times`` such as :class:`d2l_async.benchmark.Measurement`), or a sequence of such
    objects, labelled by their ``.label``.

    Returns:
        A pandas DataFrame with one row per raw run and the columns ``label, run, seconds, synchronized``.
    """
    if isinstance(measurements, Mapping):
        items = list(measurements.items())
    elif isinstance(measurements, Iterable) and not isinstance(measurements, (str, bytes)):
        items = []
        for i, m in enumerate(measurements):
            if not (hasattr(m, "raw") or hasattr(m, "times")):
                raise TypeError("a sequence passed to plot_measurements must hold Measurement objects "
                                f"(with .raw); item {i} is {type(m).__name__}; pass a dict label -> seconds instead")
            items.append((getattr(m, "label", "") or f"measurement {i}", m))
    else:
        raise TypeError(f"plot_measurements() expects a mapping label -> seconds or a sequence of Measurement "
                        f"objects, got {type(measurements).__name__}")
    rows = []
    for label, value in items:
        runs, synced = _runs(str(label), value)
        rows += [{"label": str(label), "run": i, "seconds": float(s), "synchronized": synced}
                 for i, s in enumerate(runs)]
    return pd.DataFrame(rows, columns=["label", "run", "seconds", "synchronized"])


def _colour(label: str, synced: bool | None, i: int) -> str:
    low = label.lower()
    if synced is False or "naive" in low or "unsync" in low or "no sync" in low:
        return _NAIVE
    if synced is True or "sync" in low:
        return _SYNCED
    return style.series_color(i)


def plot_measurements(measurements: Any, *, book: Mapping[str, float] | None = None,
                      title: str | None = None) -> go.Figure:
    """Each measurement's raw runs as a box with its points; the book's numbers as marks.

    Args:
        measurements: mapping label -> seconds per run (or Measurement objects), or a sequence of
            Measurement objects.  Naive (unsynchronized) timings are vermillion, synchronized blue.
        book: label -> seconds the book printed, drawn as a black bar labelled "book" in its own
            column ``"the book: <label>"``, placed right after the measured column of that label.
        title: figure title.

    Returns:
        A plotly Figure with one box of raw runs per label (and the book's marks), its fact the medians; an empty
        figure saying "no measurements" when there is none.
    """
    title = check_title(title)
    table = measurement_table(measurements)
    book = dict(mapping("book", book, what="label -> seconds the book printed") if book is not None else {})
    for label, value in book.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not np.isfinite(value):
            raise TypeError(f"book[{label!r}] must be a number of seconds, got {value!r}")
    title = title if title is not None else "Measured time per run: naive vs synchronized"
    if not len(table) and not book:
        return empty_figure(title, "no measurements")
    values = np.r_[table["seconds"].to_numpy(float), np.asarray(list(book.values()), dtype=float)]
    positive = values[values > 0]
    unit, factor = style.time_unit(float(np.median(positive)) if len(positive) else 0.0)
    log = len(positive) > 1 and positive.max() / positive.min() > 30
    fig = go.Figure()
    n_columns = table["label"].nunique() + len(book)
    for i, (label, grp) in enumerate(table.groupby("label", sort=False)):
        synced = grp["synchronized"].iloc[0]
        runs = grp["seconds"].to_numpy(float) * factor
        med = float(np.median(runs))
        top = float(runs.max())
        fig.add_trace(go.Box(
            x=[label] * len(runs), y=runs, name=label, boxpoints="all", jitter=0.35, pointpos=0,
            marker={"color": _colour(label, synced, i), "size": 5, "opacity": 0.7},
            line={"color": _colour(label, synced, i)}, fillcolor="rgba(0,0,0,0)",
            hovertemplate=f"{label}<br>%{{y:.4g}} {unit}<extra></extra>", showlegend=False,
        ))
        # the median above its own box, centred on it (beside it, it read as the next box's)
        fig.add_annotation(x=label, y=np.log10(max(top, 1e-300)) if log else top,
                           text=f"median{'<br>' if n_columns > 4 else ' '}{med:.3g} {unit}", showarrow=False,
                           xanchor="center", yanchor="bottom", yshift=4,
                           font={"size": 11, "color": _colour(label, synced, i)})
    order = list(dict.fromkeys(table["label"]))
    if book:
        labels = list(book)
        ys = [book[k] * factor for k in labels]
        columns = [book_column(k) for k in labels]
        for k in labels:  # the book's column follows the measured one it compares with
            col = book_column(k)
            order.insert(order.index(k) + 1 if k in order else len(order), col)
        fig.add_trace(go.Scatter(
            x=columns, y=ys, mode="markers+text", name="book (published)", text=["book"] * len(labels),
            textposition="middle left",
            marker={"symbol": "line-ew-open", "size": 44, "color": "#000000", "line": {"width": 3}},
            hovertemplate=f"book: %{{y:.4g}} {unit}<extra></extra>",
        ))
    fig.update_layout(**style.base_layout(title=title, height=420, boxgap=0.7))
    fit_title(fig)
    # room above the highest box for its median label
    hi = float(values.max()) * factor if len(values) else 1.0
    lo = float(positive.min()) * factor if len(positive) else 1.0
    yrange = [np.log10(lo) - 0.1, np.log10(hi) + 0.35] if log else [0.0, hi * 1.22 or 1.0]
    fig.update_yaxes(title_text=f"time per run ({unit}{', log scale' if log else ''})",
                     type="log" if log else "linear", range=yrange)
    fig.update_xaxes(title_text="", categoryorder="array", categoryarray=order, tickmode="array", tickvals=order,
                     ticktext=wrap_categories(order))
    medians = table.groupby("label", sort=False)["seconds"].median()
    fact = "median per run: " + ", ".join(f"{k} {format_time(float(v))}" for k, v in medians.items())
    if book:
        fact += "; the book: " + ", ".join(f"{k} {format_time(float(v))}" for k, v in book.items())
    return describe(fig, fact)


def book_column(label: str) -> str:
    """The x category the book's number for ``label`` is drawn in."""
    return f"the book: {label}"


def _overhead_rows(rows: Any) -> pd.DataFrame:
    if isinstance(rows, pd.DataFrame):
        return rows.copy()
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise TypeError(f"plot_scheduling_overhead() expects a DataFrame, mappings or SchedulingOverhead "
                        f"objects, got {type(rows).__name__}")
    out = []
    for r in rows:
        if isinstance(r, Mapping):
            out.append(dict(r))
        elif hasattr(r, "workers") and hasattr(r, "per_op_us"):  # d2l_async.engine.SchedulingOverhead
            row = {"workers": r.workers, "per_op_us": r.per_op_us}
            if getattr(r, "runs", None):
                row["runs"] = tuple(r.runs)
            if getattr(r, "label", None):
                row["label"] = r.label
            out.append(row)
        else:
            raise TypeError("plot_scheduling_overhead() rows need 'workers' and 'per_op_us' "
                            f"(a mapping or a SchedulingOverhead), got {type(r).__name__}")
    return pd.DataFrame(out)


def plot_scheduling_overhead(rows: Any, *, title: str | None = None) -> go.Figure:
    """Per-op scheduling cost against the number of engine workers.

    Args:
        rows: :class:`d2l_async.engine.SchedulingOverhead` objects, a DataFrame or mappings with
            ``workers`` and ``per_op_us`` (the median), and optionally ``label`` (one line per
            label), ``runs`` (µs per op of each repeat: drawn as points, the quartiles as the error
            bar) or ``spread_us`` (an error bar cut at 0).
        title: figure title.

    Returns:
        A plotly Figure of the median per-op cost (µs) against the worker count, one line per label with the runs or
        spread as error bars, its fact the medians; an empty figure saying "no measurements" when there is none.
    """
    title = check_title(title)
    df = _overhead_rows(rows)
    title = title if title is not None else "Scheduling overhead of the engine (CPU threads)"
    if not len(df):
        return empty_figure(title, "no measurements")
    missing = {"workers", "per_op_us"} - set(df.columns)
    if missing:
        raise ValueError(f"rows lack column(s) {sorted(missing)}; each row needs 'workers' and 'per_op_us'")
    if "label" not in df.columns:
        df["label"] = "median per op"
    df["label"] = df["label"].fillna("median per op")
    fig = go.Figure()
    for i, (label, grp) in enumerate(df.groupby("label", sort=False)):
        grp = grp.sort_values("workers")
        color = style.series_color(i)
        err = None
        if "runs" in grp.columns and grp["runs"].notna().all():
            # quartiles of the runs around the median: never below the fastest run, so never below 0
            med = grp["per_op_us"].to_numpy(float)
            lo = np.minimum(np.array([np.percentile(r, 25) for r in grp["runs"]]), med)
            hi = np.maximum(np.array([np.percentile(r, 75) for r in grp["runs"]]), med)
            err = {"type": "data", "symmetric": False, "array": hi - med, "arrayminus": med - lo, "visible": True}
            xs = [w for w, r in zip(grp["workers"], grp["runs"]) for _ in r]
            ys = [v for r in grp["runs"] for v in r]
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name="each run" if label == "median per op" else f"{label}: each run", legendgroup=str(label),
                                     marker={"color": color, "size": 5, "opacity": 0.5},
                                     hovertemplate="%{x} workers: %{y:.3g} µs per op<extra>run</extra>"))
        elif "spread_us" in grp.columns:  # a spread with no runs: the bar stops at 0, never below
            spread, med = grp["spread_us"].to_numpy(float), grp["per_op_us"].to_numpy(float)
            err = {"type": "data", "symmetric": False, "array": spread, "arrayminus": np.minimum(spread, med),
                   "visible": True}
        fig.add_trace(go.Scatter(x=grp["workers"], y=grp["per_op_us"], error_y=err, mode="lines+markers",
                                 name=str(label), legendgroup=str(label), line={"color": color},
                                 hovertemplate="%{x} workers: %{y:.3g} µs per op<extra>" + str(label) + "</extra>"))
    fig.update_layout(**style.base_layout(title=title, height=380))
    fit_title(fig)
    fig.update_xaxes(title_text="engine workers (threads)", type="log" if df["workers"].max() >= 8 else "linear",
                     tickvals=sorted(df["workers"].unique()))
    fig.update_yaxes(title_text="time per op (µs)", rangemode="tozero")
    parts = []
    for label, grp in df.groupby("label", sort=False):
        grp = grp.sort_values("workers")
        per = ", ".join(f"{int(w)} worker{'s' if w != 1 else ''} {v:.3g} µs" for w, v in zip(grp["workers"], grp["per_op_us"]))
        parts.append(per if label == "median per op" else f"{label}: {per}")
    return describe(fig, "median per op: " + "; ".join(parts))
