"""Restoring a trace from a file :func:`~d2l_async.trace.write_chrome_trace` wrote.

Those files carry every column the Chrome format has no field for in each slice's
``args["d2l"]`` record, and the lanes (with their group and rank) and the meta in a top-level
``"d2l_async"`` record; the reader (``_chrome.py``) hands them here instead of mapping Kineto
categories.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ._model import Kind, Lane, LaneRole, TraceError

__all__ = ["apply_ours"]

_EXTRA = ("id", "kind", "issue", "source", "reason", "nbytes", "deps", "reads", "writes", "device")


def apply_ours(ours: dict[str, Any], extra: list[Any], cols: dict[str, Any], meta: dict[str, Any], path: Path):
    """Restore what a file written by :func:`write_chrome_trace` kept beyond the Chrome fields."""
    declared = []
    for rec in ours.get("lanes", []):
        declared.append(Lane(str(rec["name"]), LaneRole(rec["role"]), device=str(rec.get("device", "")),
                             virtual=bool(rec.get("virtual", False)), stream=int(rec.get("stream", -1)),
                             group=str(rec.get("group", "")), rank=int(rec.get("rank", -1))))
    n = len(extra)
    lane_out = np.empty(n, dtype=object)
    for j, x in enumerate(extra):
        if not isinstance(x, dict) or "lane" not in x:
            raise TraceError(f"{path}: event {j} lacks its args.d2l record; the file was edited?")
        lane_out[j] = x["lane"]
    cols = dict(cols)
    cols["lane"] = lane_out
    for name in _EXTRA:
        if name in ("deps", "reads", "writes"):
            vals = [tuple(x.get(name, ())) for x in extra]
        elif name == "issue":
            vals = [math.nan if x.get("issue") is None else x["issue"] for x in extra]
        else:
            vals = [x.get(name, _default(name)) for x in extra]
        if name == "kind":
            vals = [Kind(v).value for v in vals]
        cols[name] = vals
    cols["flow"] = [x.get("flow", -1) for x in extra]
    # the clock, steps and file fields are the original trace's (its record), not the export's
    meta = {k: v for k, v in meta.items() if k not in ("origin_us", "base_time_ns", "steps", "annotations", "file")}
    meta = {**meta, **(ours.get("meta") or {}), "path": str(path)}
    meta.pop("generations", None)
    return declared, cols, meta


def _default(name: str) -> Any:
    return {"id": -1, "kind": Kind.OP.value, "source": "", "reason": "", "nbytes": 0, "device": ""}[name]
