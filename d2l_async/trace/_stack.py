"""The frontend's Python call stack: ``python_function`` events as a lane group.

A trace recorded with ``torch.profiler.profile(with_stack=True)`` has, besides the ops, one
``python_function`` slice per Python call the profiler saw (``train.py(42): step``,
``torch/nn/modules/module.py(1750): _call_impl``).  They nest: a call lies inside its caller.  The
reader puts them on lanes of their own, one lane per call depth of each thread::

    python call stack   thread 4515 (python) · py 0   [ train.py(40): <module>                  ]
                        thread 4515 (python) · py 1     [ train.py(42): step ] [ step ]
                        thread 4515 (python) · py 2       [ module.py: _call_impl ]
    thread 4515 (python)                                    [aten::mm][cudaLaunchKernel]
    cuda:0 stream 7                                                   [ sgemm ]

so a reader sees which Python line launched a kernel.  The lanes are frontend lanes in the group
:data:`PYTHON_GROUP` (shown above the frontend they belong to); their events have kind
``python``, so no analysis counts them as work.  Figures of large traces leave the group out
unless asked (``python_stack=True``).

Depth comes from the nesting of the intervals on each thread (a call starts at or after its caller
and ends at or before it), so it needs no ``Python id`` / ``Python parent id`` fields.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["PYTHON_GROUP", "stack_depths", "stack_lane_name", "is_python_lane"]

#: ``Lane.group`` of the call-stack lanes (``"rank R · python call stack"`` in a merged trace)
PYTHON_GROUP = "python call stack"


def stack_lane_name(thread_lane: str, depth: int) -> str:
    return f"{thread_lane} · py {depth}"


def is_python_lane(lane: Any) -> bool:
    """True for a lane of the Python call-stack group (also inside a merged, multi-rank trace).

    Returns:
        ``True`` when ``lane``'s ``group`` ends with the Python-stack group's name; ``False`` otherwise (also for an
        object without a ``group``).
    """
    return str(getattr(lane, "group", "")).endswith(PYTHON_GROUP)


def stack_depths(threads: Sequence[Any], start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Call depth of each interval: how many intervals of the same thread enclose it.

    Args:
        threads: a hashable thread key per interval.
        start, end: interval bounds (same length).
    """
    n = len(start)
    depth = np.zeros(n, dtype=np.int64)
    if not n:
        return depth
    keys = {k: i for i, k in enumerate(dict.fromkeys(threads))}
    code = np.fromiter((keys[k] for k in threads), dtype=np.int64, count=n)
    # by thread, then start, the enclosing (longer) interval first at equal starts
    order = np.lexsort((-end, start, code)).tolist()
    code_l, start_l, end_l = code.tolist(), start.tolist(), end.tolist()
    stack: list[float] = []
    current = None
    out = depth
    for i in order:
        if code_l[i] != current:
            current, stack = code_l[i], []
        s, e = start_l[i], end_l[i]
        while stack and stack[-1] <= s:  # callers that returned before this call began
            stack.pop()
        out[i] = len(stack)
        stack.append(e)
    return out
