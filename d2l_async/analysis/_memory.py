"""Memory held by work in flight.

Issuing work does not only queue it: each result's buffer is allocated when the op is issued and
stays allocated until the op has run, so a frontend that races ahead holds memory for everything
it issued (D2L 13.2: waiting too rarely can exhaust memory).  Each backend event's ``nbytes`` is
counted from its issue (its start when the issue is unknown) to its end.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import BACKEND_KINDS, Trace
from ._common import backend_lane, check_trace

__all__ = ["pending_memory_series"]


def pending_memory_series(trace: Trace, lane: str | None = None) -> pd.DataFrame:
    """Bytes held by issued-but-unfinished backend work, as a step series.

    Args:
        trace: any trace whose events carry ``nbytes`` (engine ops, GPU copies and memsets).
        lane: restrict to one backend lane; ``None`` for all of them together.

    Returns:
        A DataFrame with ``time`` (seconds), ``lane``, ``id`` (the event that changed it),
        ``delta`` and ``pending_bytes``, one row per change, sorted by time (releases before
        allocations at the same instant).  Empty, with these columns, when no event has bytes.
    """
    check_trace(trace)
    c = trace.columns
    lanes = [backend_lane(trace, lane).name] if lane is not None else [l.name for l in trace.backend_lanes]
    sel = np.isin(c["lane"], lanes) & np.isin(c["kind"], BACKEND_KINDS) & (c["nbytes"] > 0)
    sel &= np.isfinite(c["end"])
    if not sel.any():
        return pd.DataFrame({"time": np.zeros(0), "lane": np.zeros(0, dtype=object),
                             "id": np.zeros(0, dtype=np.int64), "delta": np.zeros(0, dtype=np.int64),
                             "pending_bytes": np.zeros(0, dtype=np.int64)})
    t_in = np.where(np.isfinite(c["issue"][sel]), c["issue"][sel], c["start"][sel])
    nb = c["nbytes"][sel].astype(np.int64)
    times = np.concatenate([t_in, c["end"][sel]])
    delta = np.concatenate([nb, -nb])
    order = np.lexsort((delta, times))
    return pd.DataFrame({
        "time": times[order],
        "lane": np.concatenate([c["lane"][sel], c["lane"][sel]])[order],
        "id": np.concatenate([c["id"][sel], c["id"][sel]])[order],
        "delta": delta[order],
        "pending_bytes": np.cumsum(delta[order]),
    })
