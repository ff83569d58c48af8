"""Interval arithmetic: unions, shared time, intervals meeting a set."""

from __future__ import annotations

import numpy as np
import pytest

from d2l_async.analysis import intersection_seconds, intervals_union, overlap_counts, union_seconds


def test_union_merges_overlapping_and_touching_intervals():
    s, e = intervals_union(np.array([5.0, 0.0, 1.0, 3.0]), np.array([6.0, 2.0, 1.5, 5.0]))
    assert s.tolist() == [0.0, 3.0] and e.tolist() == [2.0, 6.0]
    s, e = intervals_union(np.zeros(0), np.zeros(0))
    assert len(s) == len(e) == 0


def test_intersection_and_counts():
    a = (np.array([0.0, 4.0]), np.array([2.0, 6.0]))
    b = (np.array([1.0, 5.5]), np.array([5.0, 7.0]))
    assert intersection_seconds(a, b) == pytest.approx(1.0 + 1.0 + 0.5)
    # [2,3) touches nothing with positive length; [1.5,1.6) is inside; [6.5,8) overlaps [5.5,7)
    assert overlap_counts(np.array([2.0, 1.5, 6.5, 9.0]), np.array([3.0, 1.6, 8.0, 10.0]), a) == 1
    assert overlap_counts(np.array([2.0, 1.5, 6.5]), np.array([3.0, 1.6, 8.0]), b) == 3


def test_union_seconds_counts_shared_time_once():
    assert union_seconds(np.array([0.0, 1.0, 5.0]), np.array([2.0, 3.0, 6.0])) == pytest.approx(4.0)
    assert union_seconds(np.zeros(0), np.zeros(0)) == 0.0
