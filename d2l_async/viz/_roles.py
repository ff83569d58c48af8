"""What each timeline bar is for, and which bars can carry their name.

A profiler trace of a data-parallel step drawn in one colour cannot show "the all-reduces run during
the backward pass"; a dense trace whose every bar is named prints names over each other.  This
module holds the two data steps the timeline uses for that: :func:`bar_roles` (forward / backward /
all-reduce / optimizer step, or one role per device) and :func:`bar_labels` (a name only where it
fits inside its bar and does not overlap a name already placed on the row).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace import Lane
from . import style

__all__ = ["ROLE_COLOURS", "bar_labels", "bar_roles", "role_color"]


_ROLE_PATTERNS = (
    # collectives by their own names: c10d's calls, gloo's and NCCL's intervals, a modelled link's
    # "all-reduce bucket 1"; not aten::broadcast_tensors, a shape op of every loss function
    ("all-reduce", re.compile(r"all[_-]?reduce|all_?gather|reduce_scatter|gloo|nccl|c10d|record_param_comms", re.I)),
    ("backward", re.compile(r"backward", re.I)),
    ("optimizer step", re.compile(r"optimizer|sgd|adam", re.I)),
)
#: Kinds that are their own role (frontend launches, runtime calls, copies): never re-coloured.
_OWN_ROLE = ("launch", "runtime", "copy", "memset")


def bar_roles(bars: pd.DataFrame, lanes: tuple[Lane, ...]) -> list[str]:
    """The role of each bar, for colouring: ``""`` (colour by kind, as before) unless the trace has
    roles worth telling apart (10's DDP timelines were one colour, so "all-reduces during
    the backward pass" could not be seen):

    * a profiler trace with backward ops or collectives: ``"all-reduce"``, ``"backward"``,
      ``"optimizer step"``, else ``"forward / other"``;
    * an engine trace with ops on two or more devices: ``"ops on <device>"`` (03's chain and
      follow-up, 07's two devices).
    """
    if not len(bars):
        return []
    names = bars["name"].astype(str).tolist()
    kinds = bars["kind"].astype(str).tolist()
    by_pattern = []
    for name, kind in zip(names, kinds):
        role = ""
        if kind not in _OWN_ROLE:
            role = next((r for r, pat in _ROLE_PATTERNS if pat.search(name)), "")
        by_pattern.append(role)
    if any(r in ("all-reduce", "backward") for r in by_pattern):
        return [r or ("" if k in _OWN_ROLE else "forward / other") for r, k in zip(by_pattern, kinds)]
    device = {l.name: l.device for l in lanes if not l.is_frontend and l.device}
    ops_devices = {device.get(str(ln), "") for ln, k in zip(bars["lane"], kinds) if k == "op"} - {""}
    if len(ops_devices) >= 2:
        return [f"ops on {device.get(str(ln), '')}" if k == "op" and device.get(str(ln)) else ""
                for ln, k in zip(bars["lane"], kinds)]
    return [""] * len(bars)


#: One colour per role, none shared with a kind drawn beside the roles (copies are orange, memsets
#: yellow, launches sky blue, runtime calls grey, a blocked frontend vermillion).
ROLE_COLOURS = {"forward / other": style.OKABE_ITO["blue"], "backward": style.OKABE_ITO["reddish_purple"],
                "all-reduce": style.OKABE_ITO["black"], "optimizer step": style.OKABE_ITO["bluish_green"]}


def role_color(role: str, i: int) -> str:
    return ROLE_COLOURS.get(role) or style.series_color(i)


def bar_labels(bars: pd.DataFrame, px_per_s: float, size: int = 11) -> pd.Series:
    """Each bar's name where it fits inside the bar at ``size`` px and does not overlap a label already
    placed on the same row (nested events such as ``aten::matmul`` around ``aten::mm``: the longer bar
    is named), else ``""`` — no overprinted labels."""
    out = pd.Series([""] * len(bars), index=bars.index, dtype=object)
    if not len(bars):
        return out
    placed: dict[int, list[tuple[float, float]]] = {}
    dur = (bars["end"] - bars["start"]).to_numpy()
    for i in np.argsort(-dur, kind="stable"):
        r = bars.iloc[i]
        name = str(r["name"])
        w = len(name) * size * 0.6 + 6
        if w > dur[i] * px_per_s:
            continue
        centre = (r["start"] + r["end"]) / 2 * px_per_s
        box = (centre - w / 2, centre + w / 2)
        row = placed.setdefault(int(r["row"]), [])
        if all(box[1] <= a or box[0] >= b for a, b in row):
            row.append(box)
            out.iloc[i] = name
    return out


