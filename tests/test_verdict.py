"""The comparison and trend helpers: noise inside the spread is can't tell; clear effects decide."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from d2l_async.verdict import UNREPEATED_FACTOR, compare, spearman, trend


def noisy(centre, n, spread, seed):
    rng = random.Random(seed)
    return [centre * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_noise_inside_the_spread_cannot_tell():
    a, b = noisy(1.0, 7, 0.5, 1), noisy(1.06, 7, 0.5, 2)  # C7: a 6 % gap, runs varying 2x
    v = compare(a, b)
    assert v.holds is None and v.low < 1 < v.high


def test_a_clear_effect_holds_and_the_opposite_fails():
    fast, slow = noisy(1.0, 5, 0.05, 3), noisy(2.0, 5, 0.05, 4)
    assert compare(fast, slow).holds is True
    assert compare(slow, fast).holds is False
    assert compare(slow, fast, less=False).holds is True
    # "at least twice as fast" on a 1.5x effect beyond the spread: the opposite of the claim
    assert compare(noisy(1.0, 5, 0.02, 5), noisy(1.5, 5, 0.02, 6), by=0.5).holds is False


def test_two_samples_use_the_whole_range():
    v = compare([1.0, 1.4], [1.3, 1.5])  # ranges overlap
    assert v.holds is None and v.method.startswith("compare: range")
    assert compare([1.0, 1.1], [1.3, 1.5]).holds is True


def test_one_sample_each_decides_only_beyond_the_factor():
    assert compare(1.0, 1.9).holds is None
    assert compare(1.0, UNREPEATED_FACTOR * 1.01).holds is True
    assert compare(3.0, 1.0).holds is False
    assert "no spread" in compare(1.0, 1.2).spread


def test_verdicts_are_deterministic_and_refuse_bad_input():
    a, b = noisy(1.0, 9, 0.3, 7), noisy(1.2, 9, 0.3, 8)
    assert compare(a, b) == compare(a, b)
    with pytest.raises(ValueError):
        compare([], [1.0])
    with pytest.raises(ValueError):
        compare([float("nan")], [1.0])
    with pytest.raises(ValueError):
        compare([1.0], [1.0], by=0)
    with pytest.raises(TypeError):
        bool(compare([1.0], [1.0]))  # three outcomes: read .holds


def test_a_non_monotone_series_does_not_shrink():
    # C4: 05's five ratios over op sizes; the last is lower than the first, the series is not falling
    t = trend([1, 10, 100, 1_000, 10_000], [2.98, 6.46, 2.82, 3.20, 1.27])
    assert t.holds is None and t.rho == pytest.approx(-0.5)


def test_a_monotone_series_shrinks_and_a_rising_one_fails():
    x = [1, 10, 100, 1_000, 10_000, 100_000]
    assert trend(x, [6.0, 4.0, 3.1, 2.0, 1.4, 1.1]).holds is True
    assert trend(x, [1.1, 1.4, 2.0, 3.1, 4.0, 6.0]).holds is False
    assert trend(x, [1.1, 1.4, 2.0, 3.1, 4.0, 6.0], falling=False).holds is True
    assert trend([1, 2], [2.0, 1.0]).holds is None  # two points cannot decide
    many = list(range(20))
    assert trend(many, [-v for v in many]).holds is True  # normal approximation above 8 points


def test_spearman_handles_ties():
    assert spearman([1, 2, 3, 4], [1, 1, 2, 2]) == pytest.approx(0.894427, rel=1e-5)
    with pytest.raises(ValueError):
        spearman([1, 2], [1])


def test_verdict_is_stdlib_only():
    code = ("import sys, d2l_async.verdict; "
            "print([m for m in ('numpy', 'torch', 'plotly', 'ipywidgets') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_within_a_tolerance_against_the_spread():
    from d2l_async.verdict import within

    assert within([1.0, 1.02, 0.98, 1.01], 1.0, tolerance=0.25).holds is True
    assert within([2.0, 2.1, 1.9], 1.0, tolerance=0.25).holds is False
    assert within([0.7, 1.3, 1.0, 0.8, 1.25], 1.0, tolerance=0.25).holds is None
    assert within([1.1], 1.0, tolerance=0.25).method.startswith("within:")
    with pytest.raises(ValueError):
        within([1.0], 0.0, tolerance=0.2)


def test_a_lower_bound_against_the_spread_with_its_estimates_slack():
    from d2l_async.verdict import at_least

    above = at_least([2.0, 2.1, 1.9], 1.0, names=("measured", "model"))
    assert above.holds is True and above.ratio == pytest.approx(2.0) and (above.n_a, above.n_b) == (3, 1)
    assert above.method.startswith("at_least:") and "measured / model = 2.00" in above.spread
    assert "3 runs against a fixed model" in above.spread and above.spread.count("1.00") == 1
    assert at_least([0.5, 0.55, 0.45], 1.0, slack=0.25).holds is False  # beat the best case beyond its slack
    assert at_least([0.8, 0.85, 0.9], 1.0, slack=0.25).holds is True  # within the estimates' error
    assert at_least([0.6, 0.8, 1.0, 0.7, 0.9], 1.0, slack=0.25).holds is None  # the runs straddle 0.75
    assert at_least(0.74, 1.0, slack=0.25).holds is False and at_least(0.76, 1.0, slack=0.25).holds is True
    for bad in ({"bound": 0.0}, {"bound": 1.0, "slack": 1.0}, {"bound": 1.0, "slack": -0.1}):
        with pytest.raises(ValueError, match="bound|slack"):
            at_least([1.0], **bad)


def test_paired_samples_are_not_widened_by_a_shared_load():
    from d2l_async.verdict import compare_paired

    backward = [0.04, 0.9, 0.13, 1.4, 0.06]  # a loaded machine: each pass 1x to 35x the fastest
    after = [t + 0.005 for t in backward]
    bucketed = [t + 0.001 for t in backward]
    assert compare(bucketed, after).holds is None  # unpaired: the load's spread swamps 4 ms
    v = compare_paired(bucketed, after)
    assert v.holds is True and "paired" in v.method
    with pytest.raises(ValueError):
        compare_paired([1.0], [1.0, 2.0])
