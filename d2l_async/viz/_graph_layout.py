"""Where each node of a dependency graph sits: columns by depth, rows by device.

Depth is the longest path from an input (Kahn's order), so data flows left to right.  When the ops
ran on two or more devices, each device gets a horizontal lane of its own, as in the book's figure of
the two-GPU MLP (§13.3): its ops, the arrays they wrote, and the inputs they read first; otherwise the
nodes of each depth are spread around the middle.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

__all__ = ["lane_device"]


def _layout(nodes: pd.DataFrame, edges: pd.DataFrame) -> pd.DataFrame:
    """Depth = longest path from a source (Kahn's order); y spreads each depth's nodes around 0."""
    keys = list(nodes["key"])
    index = {k: i for i, k in enumerate(keys)}
    preds: list[list[int]] = [[] for _ in keys]
    succs: list[list[int]] = [[] for _ in keys]
    for s, d in zip(edges["src"], edges["dst"]):
        preds[index[d]].append(index[s])
        succs[index[s]].append(index[d])
    indeg = [len(p) for p in preds]
    depth = [0] * len(keys)
    todo = [i for i, n in enumerate(indeg) if n == 0]
    seen = 0
    while todo:
        i = todo.pop()
        seen += 1
        for j in succs[i]:
            depth[j] = max(depth[j], depth[i] + 1)
            indeg[j] -= 1
            if indeg[j] == 0:
                todo.append(j)
    if seen != len(keys):
        raise ValueError("the dependency edges form a cycle; a dependency graph must be acyclic")
    for i in range(len(keys)):  # inputs and constants sit just left of their first consumer
        if not preds[i] and succs[i]:
            depth[i] = max(0, min(depth[j] for j in succs[i]) - 1)
    nodes = nodes.assign(depth=depth)
    nodes["y"] = 0.0
    nodes["band"] = ""  # the device whose lane a node is drawn in ("" when the graph has no lanes)
    band = _device_bands(nodes, preds, succs)
    if band is not None:  # one horizontal lane per device, data flowing left to right (the book's figure)
        devices = sorted({lane_device(l) for l, t in zip(nodes["lane"], nodes["type"]) if t == "op"})
        nodes["band"] = [devices[b] for b in band]
        offset = 0.0
        for b in sorted(set(band)):
            in_band = nodes[nodes["band"] == devices[b]]
            height = int(in_band.groupby("depth").size().max())
            for _, grp in in_band.groupby("depth"):
                nodes.loc[grp.index, "y"] = -(offset + np.arange(len(grp)))
            offset += height + 1.0  # a blank row between two devices' lanes
        return nodes
    for _, grp in nodes.groupby("depth"):
        m = len(grp)
        nodes.loc[grp.index, "y"] = -(np.arange(m) - (m - 1) / 2)
    return nodes


_DEVICE = re.compile(r"^(\S+?)(?: (?:worker|stream)\b.*)?$")


def lane_device(lane: str) -> str:
    """The device a lane belongs to: ``"cpu:1 worker 0"`` -> ``"cpu:1"``."""
    m = _DEVICE.match(str(lane))
    return m.group(1) if m else str(lane)


def _device_bands(nodes: pd.DataFrame, preds: list[list[int]], succs: list[list[int]]) -> list[int] | None:
    """Band (lane) index per node when the ops ran on two or more devices, else None: an op's band is
    its device's; an array sits in the band of the op that wrote it, an input in its first reader's."""
    ops = nodes["type"].to_numpy() == "op"
    devices = [lane_device(l) if o else "" for l, o in zip(nodes["lane"], ops)]
    order = sorted({d for d in devices if d})
    if len(order) < 2:
        return None
    band = [order.index(d) if d else -1 for d in devices]
    for i in range(len(band)):
        if band[i] < 0:
            src = [band[j] for j in preds[i] if band[j] >= 0]
            dst = [band[j] for j in succs[i] if band[j] >= 0]
            band[i] = src[0] if src else (min(dst) if dst else 0)
    return band


