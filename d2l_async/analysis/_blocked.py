"""Time the frontend spent blocked, and why.

Asynchrony only pays while the frontend keeps issuing work.  Every ``print(z)``, ``z.item()``,
``waitall()`` or ``cudaStreamSynchronize`` makes it wait until the backend catches up; those waits
are the ``block`` events of a trace, with the reason (the call that blocked) and, where the
recorder knows it, the source line that caused it.  This module adds them up.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import Kind, Trace
from ._common import check_trace

__all__ = ["blocked_time", "BLOCKED_COLUMNS"]

#: columns of :func:`blocked_time` (the first is named after ``by``)
BLOCKED_COLUMNS = ("count", "total", "mean", "max", "fraction")
_BY = ("reason", "source", "name", "lane")


def blocked_time(trace: Trace, *, by: str = "reason") -> pd.DataFrame:
    """Seconds the frontend spent in ``block`` events, grouped.

    Args:
        trace: any trace.
        by: group by ``"reason"`` (the blocking call: ``"print"``, ``"cudaStreamSynchronize"``),
            ``"source"`` (the frontend source line), ``"name"`` or ``"lane"``.  Events with an
            empty key are grouped under ``"(unknown)"``.

    Returns:
        A DataFrame with the key column, then ``count``, ``total``, ``mean`` and ``max``
        (seconds) and ``fraction`` (of the trace's duration), largest total first.  Empty, with
        the same columns, when nothing blocked.
    """
    check_trace(trace)
    if by not in _BY:
        raise ValueError(f"by={by!r} is not supported; choose one of {_BY}")
    c = trace.columns
    sel = c["kind"] == Kind.BLOCK.value
    dur = (c["end"][sel] - c["start"][sel]).astype(float)
    keys = np.array([k if k else "(unknown)" for k in c[by][sel]], dtype=object)
    if not len(keys):
        return pd.DataFrame({by: np.zeros(0, dtype=object), "count": np.zeros(0, dtype=np.int64),
                             "total": np.zeros(0), "mean": np.zeros(0), "max": np.zeros(0),
                             "fraction": np.zeros(0)})
    frame = pd.DataFrame({by: keys, "dur": dur})
    out = frame.groupby(by, sort=False)["dur"].agg(["count", "sum", "mean", "max"]).reset_index()
    out = out.rename(columns={"sum": "total"})
    total_time = trace.duration
    out["fraction"] = out["total"] / total_time if total_time > 0 else 0.0
    out["count"] = out["count"].astype(np.int64)
    return out.sort_values("total", ascending=False, kind="stable").reset_index(drop=True)
