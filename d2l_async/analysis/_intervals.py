"""Sets of time intervals: their union, the time two sets share, how many intervals meet a set.

The one home of interval arithmetic for every analysis that asks "how much of this ran beside that":
devices working at once (notebook 07), communication hidden behind backward compute (notebook 10),
waiting for the last rank to join.  Intervals are half-open ``[start, end)`` in seconds, given as two
arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["intervals_union", "union_seconds", "intersection_seconds", "overlap_counts"]


def _set(name: str, value: object) -> tuple[np.ndarray, np.ndarray]:
    """An interval set ``(starts, ends)``, or a TypeError naming the argument."""
    if not isinstance(value, tuple) or len(value) != 2:
        raise TypeError(f"{name} must be a (starts, ends) pair of arrays, e.g. from intervals_union, got "
                        f"{type(value).__name__}")
    return _pair(*value, names=(f"{name}[0]", f"{name}[1]"))


def _times(name: str, values: object) -> np.ndarray:
    """``values`` as a 1-d float array, or a TypeError naming the argument."""
    try:
        out = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of times in seconds, got {type(values).__name__}") from None
    if out.ndim != 1:
        raise TypeError(f"{name} must be one-dimensional (one time per interval), got shape {out.shape}")
    return out


def _pair(start: object, end: object, names: tuple[str, str] = ("start", "end")) -> tuple[np.ndarray, np.ndarray]:
    s, e = _times(names[0], start), _times(names[1], end)
    if len(s) != len(e):
        raise ValueError(f"{names[0]} and {names[1]} must have one entry per interval, got {len(s)} and {len(e)}")
    return s, e


def intervals_union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge intervals into disjoint sorted ones (touching intervals join).

    Returns:
        ``(starts, ends)``: two float arrays of the merged intervals, sorted by start; two empty arrays for no
        input.

    Raises:
        TypeError: ``start`` or ``end`` is not a one-dimensional sequence of times.
        ValueError: they differ in length.
    """
    start, end = _pair(start, end)
    if not len(start):
        return np.zeros(0), np.zeros(0)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    ends = np.append(run_end[idx[1:] - 1], run_end[-1])
    return s[idx], ends


def union_seconds(start: np.ndarray, end: np.ndarray) -> float:
    """Seconds covered by the union of the intervals ``[start, end)``.

    Returns:
        The total length of the union, each instant counted once, in the intervals' unit (0.0 for none).
    """
    s, e = intervals_union(start, end)
    return float((e - s).sum())


def intersection_seconds(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Total length of the intersection of two disjoint sorted interval sets.

    Returns:
        The seconds covered by both sets (0.0 when they do not meet).

    Raises:
        TypeError: ``a`` or ``b`` is not a ``(starts, ends)`` pair of time arrays.
    """
    (sa, ea), (sb, eb) = _set("a", a), _set("b", b)
    total, i, j = 0.0, 0, 0
    while i < len(sa) and j < len(sb):
        lo, hi = max(sa[i], sb[j]), min(ea[i], eb[j])
        if hi > lo:
            total += hi - lo
        if ea[i] < eb[j]:
            i += 1
        else:
            j += 1
    return float(total)


def overlap_counts(start: np.ndarray, end: np.ndarray, other: tuple[np.ndarray, np.ndarray]) -> int:
    """How many intervals ``[start, end)`` intersect (with positive length) the disjoint set ``other``.

    Returns:
        The number of intervals that overlap ``other`` (0 when either side is empty).

    Raises:
        TypeError: bad arrays (see :func:`intervals_union`); ``other`` is not a ``(starts, ends)`` pair.
    """
    start, end = _pair(start, end)
    os_, oe = _set("other", other)
    if not len(start) or not len(os_):
        return 0
    # the first interval of `other` that ends after each start; it overlaps when it begins before the end
    k = np.searchsorted(oe, np.asarray(start, dtype=float), side="right")
    ok = k < len(os_)
    hit = np.zeros(len(start), dtype=bool)
    hit[ok] = os_[k[ok]] < np.asarray(end, dtype=float)[ok]
    return int(hit.sum())
