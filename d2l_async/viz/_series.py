"""The analysis tables the figures draw, taken from :mod:`d2l_async.analysis`.

Queue length is HTA's definition (+1 when the frontend issues work to a backend lane, -1 when it
starts there; "in flight": -1 at the end); memory held by pending work counts each result's bytes
from issue to end.  The one table made here is the blocked time per *cause* (reason and source
line together, as the timeline labels them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import analysis
from ..trace import Trace
from . import style

queue_length_series = analysis.queue_length_series


def pending_memory_series(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(time, bytes) arrays of memory held by issued-but-unfinished work, all lanes together."""
    df = analysis.pending_memory_series(trace)
    return df["time"].to_numpy(float), df["pending_bytes"].to_numpy(float)


def blocked_table(trace: Trace) -> pd.DataFrame:
    """Total frontend blocked time per cause: columns ``label, reason, source, total, count``,
    largest total first (``label`` as the timeline writes it, e.g. ``"print(z) — line 12"``)."""
    mask = trace["kind"] == "block"
    if not mask.any():
        return pd.DataFrame({"label": [], "reason": [], "source": [], "total": [], "count": []})
    df = pd.DataFrame({
        "reason": trace["reason"][mask].astype(str),
        "source": trace["source"][mask].astype(str),
        "seconds": (trace["end"][mask] - trace["start"][mask]).astype(float),
    })
    out = df.groupby(["reason", "source"], sort=False).agg(total=("seconds", "sum"),
                                                          count=("seconds", "size")).reset_index()
    out.insert(0, "label", [style.block_label(r, s) for r, s in zip(out["reason"], out["source"])])
    return out.sort_values("total", ascending=False, kind="stable").reset_index(drop=True)
