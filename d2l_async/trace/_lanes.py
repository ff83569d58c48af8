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

from ._model import Lane, LaneRole
from ._stack import PYTHON_GROUP, stack_depths, stack_lane_name

__all__ = ["device_pairs", "thread_lanes"]

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


def thread_lanes(lanes: list[Lane], front_idx: np.ndarray, pid_codes: np.ndarray, tid_codes: np.ndarray,
                 pids: np.ndarray, tids: np.ndarray, is_coll: np.ndarray, is_py: np.ndarray,
                 thread_names: dict[tuple[Any, Any], str], start: np.ndarray, end: np.ndarray):
    """Frontend lanes (one per CPU thread), gloo's communication threads, the Python call stack.

    Args:
        lanes: the backend lanes so far (their names are taken).
        front_idx: the rows on CPU threads.
        pid_codes, tid_codes: those rows' pid and tid as codes into ``pids`` and ``tids``.
        is_coll, is_py: which of those rows are collectives / ``python_function`` calls.
        thread_names: the file's thread names by (pid, tid).
        start, end: every row's times (for the call-stack depth).

    Returns:
        ``(lanes, names, lane_of, comm, seen)``: every lane in display order, the new lanes'
        names, each front row's index into ``names``, the front rows on a communication thread,
        and (pid, tid) -> lane name.
    """
    if not len(front_idx):
        return lanes, [], np.zeros(0, np.int64), np.zeros(0, bool), {}
    used = {l.name for l in lanes}
    width = int(tid_codes.max()) + 1
    key = pid_codes.astype(np.int64) * width + tid_codes
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(first, kind="stable")  # first-seen order
    # a thread whose only events are collectives (gloo's pt_gloo_runloop) does the
    # communication for the frontend: a backend lane of the CPU
    work = np.bincount(inv[~is_coll & ~is_py], minlength=len(uniq)) > 0
    comm_key = (np.bincount(inv[is_coll], minlength=len(uniq)) > 0) & ~work
    seen: dict[tuple[Any, Any], str] = {}
    names: list[str] = []
    index_of = np.empty(len(uniq), dtype=np.int64)
    new: list[Lane] = []
    for k in order.tolist():
        u = int(uniq[k])
        tkey = (pids[u // width], tids[u % width])
        nm = unique_name(thread_names.get(tkey) or f"thread {tkey[1]}", tkey, used)
        seen[tkey] = nm
        used.add(nm)
        index_of[k] = len(names)
        names.append(nm)
        new.append(Lane(nm, LaneRole.BACKEND, device="cpu") if comm_key[k] else Lane(nm, LaneRole.FRONTEND))
    lane_of = index_of[inv]
    py_lanes: list[Lane] = []
    py = np.flatnonzero(is_py)
    if len(py):
        rows = front_idx[py]
        depth = stack_depths(key[py].tolist(), start[rows], end[rows])
        stack = {}
        for th, d in sorted(set(zip(lane_of[py].tolist(), depth.tolist()))):
            stack[(th, d)] = len(names)
            names.append(stack_lane_name(names[th], int(d)))
            py_lanes.append(Lane(names[-1], LaneRole.FRONTEND, group=PYTHON_GROUP))
        lane_of[py] = [stack[(th, d)] for th, d in zip(lane_of[py].tolist(), depth.tolist())]
    return new + py_lanes + lanes, names, lane_of, comm_key[inv], seen


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
