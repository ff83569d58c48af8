"""The lanes of a profiler trace: one per device stream, one per CPU thread.

``_chrome.py`` maps each slice to a lane; this module names and builds them::

    device stream (device, stream)    -> backend lane "cuda:0 stream 7" (ids of any 64 bits)
    CPU thread (pid, tid)             -> frontend lane "thread 4515 (python)"
    a thread whose only work is collectives (gloo's pt_gloo_runloop) -> backend lane of "cpu"
    python_function slices (with_stack=True) -> the "python call stack" lanes, one per depth
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._kineto import COLLECTIVE_CATEGORY
from ._model import Lane, LaneRole
from ._stack import PYTHON_GROUP, stack_depths, stack_lane_name

__all__ = ["device_pairs", "thread_lanes"]

_PY = "python_function"


def device_pairs(dev: np.ndarray, stream: np.ndarray) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The distinct (device, stream) pairs, sorted, and each row's pair index.

    Ids may be any 64-bit value (``_convert.py``): one int64 key ``device * width + stream`` is
    used only when it cannot overflow (a 1-D unique is ~10x faster than ``unique(axis=0)``);
    otherwise each id is numbered on its own first.
    """
    lo_d, hi_d = (int(dev.min()), int(dev.max())) if len(dev) else (0, 0)
    lo_s, hi_s = (int(stream.min()), int(stream.max())) if len(stream) else (0, 0)
    width = hi_s - lo_s + 1
    if dev.dtype != object and stream.dtype != object and (hi_d - lo_d + 1) * width < 2**62:
        code, inv = np.unique((dev - lo_d) * width + (stream - lo_s), return_inverse=True)
        pairs = list(zip((code // width + lo_d).tolist(), (code % width + lo_s).tolist()))
        return pairs, inv.reshape(-1)
    ud, di = np.unique(dev, return_inverse=True)
    us, si = np.unique(stream, return_inverse=True)
    code, inv = np.unique(di.reshape(-1).astype(np.int64) * len(us) + si.reshape(-1), return_inverse=True)
    pairs = [(int(ud[c // len(us)]), int(us[c % len(us)])) for c in code.tolist()]
    return pairs, inv.reshape(-1)


def thread_lanes(lanes, back, kind, cat_arr, pid_l, tid_l, thread_names, lane_col, device_col, start, end):
    """Frontend lanes (one per CPU thread), gloo's communication threads, the Python call stack."""
    front_idx = np.flatnonzero(~back)
    if not len(front_idx):
        return lanes, {}
    used = {l.name for l in lanes}
    keys = [(pid_l[i], tid_l[i]) for i in front_idx.tolist()]
    cats = cat_arr[front_idx].tolist()
    # a thread whose only events are collectives (gloo's pt_gloo_runloop) does the
    # communication for the frontend: a backend lane of the CPU
    work = {k for k, c in zip(keys, cats) if c not in (COLLECTIVE_CATEGORY, _PY)}
    comm = {k for k, c in zip(keys, cats) if c == COLLECTIVE_CATEGORY} - work
    seen: dict[tuple[Any, Any], str] = {}
    py_lanes: list[Lane] = []
    thread_lanes: list[Lane] = []
    for key in dict.fromkeys(keys):  # first-seen order
        nm = unique_name(thread_names.get(key) or f"thread {key[1]}", key, used)
        seen[key] = nm
        used.add(nm)
        if key in comm:
            thread_lanes.append(Lane(nm, LaneRole.BACKEND, device="cpu"))
        else:
            thread_lanes.append(Lane(nm, LaneRole.FRONTEND))
    lane_col[front_idx] = [seen[k] for k in keys]
    comm_rows = front_idx[[k in comm for k in keys]] if comm else front_idx[:0]
    device_col[comm_rows] = "cpu"
    py = front_idx[np.asarray([c == _PY for c in cats], dtype=bool)]
    if len(py):
        py_keys = [(pid_l[i], tid_l[i]) for i in py.tolist()]
        depth = stack_depths(py_keys, start[py], end[py])
        lane_of = [stack_lane_name(seen[k], int(d)) for k, d in zip(py_keys, depth.tolist())]
        lane_col[py] = lane_of
        first = {k: i for i, k in enumerate(seen)}
        order = sorted(set(zip(py_keys, depth.tolist())), key=lambda kd: (first[kd[0]], kd[1]))
        py_lanes = [Lane(stack_lane_name(seen[k], d), LaneRole.FRONTEND, group=PYTHON_GROUP) for k, d in order]
    return thread_lanes + py_lanes + lanes, seen


def unique_name(name: str, key: tuple[Any, Any], used: set[str]) -> str:
    """``name``, or ``name (tid)`` / ``name (pid P, tid T)`` when another thread has it already
    (Chrome's own traces name several threads of one process alike)."""
    for cand in (name, f"{name} ({key[1]})", f"{name} (pid {key[0]}, tid {key[1]})"):
        if cand not in used:
            return cand
    i = 2
    while f"{name} #{i}" in used:
        i += 1
    return f"{name} #{i}"
