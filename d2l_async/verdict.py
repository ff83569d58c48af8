"""Verdicts against the run's own spread: is an effect larger than the noise of the same run?

A lesson check that compares timings (``a`` faster than ``b``, a ratio that shrinks as the size
grows) must not decide from one or two numbers: the same notebook prints run-to-run spreads of 2×
on a shared core.  This module decides such claims from *repeated samples*, with three outcomes:

* ``True``  (✔) — the effect is larger than the spread, in the claimed direction;
* ``False`` (✘) — it is larger than the spread, in the other direction;
* ``None``  (can't tell) — the difference is inside the spread.

Two helpers, both pure functions of numbers (standard library only, deterministic):

* :func:`compare` — ``a`` against ``b`` (repeated seconds of each): the ratio of medians
  ``median(a) / median(b)`` with a 90 % bootstrap interval (2000 resamples, fixed seed); with fewer
  than three samples on a side the interval is the ratio's whole range (``min(a)/max(b)`` to
  ``max(a)/min(b)``), and a single sample on each side has no spread at all: it decides only beyond
  a factor of 2 (:data:`UNREPEATED_FACTOR`).
* :func:`trend` — a series ``y`` over ``x`` (e.g. the async/sync ratio over op sizes): Spearman's
  rank correlation over *every* point, with its exact one-sided p-value (all permutations up to
  8 points, the normal approximation above).  "Shrinks" needs a significant negative correlation;
  a series that goes up and down is "can't tell", not "shrinks" because its last point is lower
  than its first.  It is the one rule for "grows" and "shrinks" in every notebook (05's sizes, 08's
  worker threads, where ``x`` repeats once per run: ties share their rank).

Built on :func:`compare`'s interval: :func:`similar` ("about the same"), :func:`within` ("within a
tolerance of a target") and :func:`at_least` ("not below a bound": a model's best case, which a run may
exceed but not beat).

Each returns a frozen record with ``holds``, the numbers, and ``method`` (which helper decided it);
a comparison also keeps the ``names`` of its two sides, the kind of ``interval`` and the ``rule`` the
claim needs, so its words (:mod:`d2l_async._words`, :attr:`Verdict.spread`) state the ratio in the
direction it was decided, each bound once;
:func:`d2l_async.lesson.check` accepts one for ``holds`` and stores ``method`` in the check's
``decided_by`` field, so a test can tell a check decided against the spread from one that was not.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._args import number, samples
from ._words import fmt_interval, spread_words

__all__ = ["Verdict", "Trend", "compare", "compare_paired", "similar", "within", "at_least", "overruled", "trend", "spearman", "UNREPEATED_FACTOR", "LEVEL"]

#: With one sample per side there is no spread: decide only beyond this factor.
UNREPEATED_FACTOR = 2.0
#: Two-sided coverage of the bootstrap interval (one-sided 5 % each way).
LEVEL = 0.90
_RESAMPLES = 2000
_ALPHA = 0.05


def _samples(name: str, xs: Sequence[float] | float) -> list[float]:
    return samples(name, xs)


def _fraction(name: str, value: Any) -> float:
    """A relative tolerance, strictly between 0 and 1."""
    f = number(name, value, above=0)
    if not f < 1:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return f


def _ratio(a: float, b: float) -> float:
    if b > 0:
        return a / b
    return math.inf if a > 0 else 1.0


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`compare`.

    Attributes:
        holds: True (claim holds beyond the spread), False (the opposite, beyond it), None (inside it).
        ratio: ``median(a) / median(b)``.
        low, high: the interval of that ratio (see ``method``).
        n_a, n_b: samples per side.
        by: the ratio the claim is judged against (``a < by * b`` for ``less=True``).
        less: the claim's direction (``a`` smaller than ``by * b``, or larger).
        method: which rule decided it (stored in the check's metadata).
        names: what ``a`` and ``b`` are (``("every step", "once at the end")``): the ratio is always
            written ``a / b`` with these names (:func:`d2l_async._words.ratio_words`).
        interval: how ``low``-``high`` was found (``"bootstrap 90% interval"``, ``"range"``; empty for
            one run each).
        rule: what the claim needs of the interval, in words (``"below 1"``, ``"inside 0.80–1.25"``).
    """

    holds: bool | None
    ratio: float
    low: float
    high: float
    n_a: int
    n_b: int
    by: float
    less: bool
    method: str
    names: tuple[str, str] = ("a", "b")
    interval: str = ""
    rule: str = ""

    @property
    def spread(self) -> str:
        """The ratio, its interval and the claim's bound in words (:func:`d2l_async._words.spread_words`),
        e.g. ``"a / b = 0.94, bootstrap 90% interval 0.81–1.07 over 5 vs 5 runs; the claim needs it below 1"``."""
        return spread_words(self)

    def __bool__(self) -> bool:
        raise TypeError("a Verdict has three outcomes; read .holds (True, False or None)")


def _check_names(names: Any) -> tuple[str, str]:
    if (not isinstance(names, (tuple, list)) or len(names) != 2
            or not all(isinstance(n, str) and n.strip() for n in names)):
        raise ValueError(f"names must be two non-empty strings (what a and b are), got {names!r}")
    return str(names[0]).strip(), str(names[1]).strip()


def compare(a: Sequence[float] | float, b: Sequence[float] | float, *, less: bool = True,
            by: float = 1.0, names: tuple[str, str] = ("a", "b")) -> Verdict:
    """Decide the claim ``a < by * b`` (``less=True``) or ``a > by * b`` from repeated samples.

    Args:
        a, b: repeated measurements (seconds, or any positive quantity) of the two sides.
        less: the claimed direction.
        by: the factor in the claim (1: plain comparison; 0.5: "at least twice as fast").
        names: what ``a`` and ``b`` are, for the words (the ratio is written ``a / b``).

    Returns:
        A :class:`Verdict`: ``holds`` True when the whole interval of ``median(a)/median(b)`` lies on
        the claimed side of ``by``, False when it lies wholly on the other side, None otherwise.
    """
    xa, xb = _samples("a", a), _samples("b", b)
    if isinstance(by, bool) or not isinstance(by, (int, float)) or not by > 0:
        raise ValueError(f"by must be a positive number, got {by!r}")
    names = _check_names(names)
    ratio = _ratio(statistics.median(xa), statistics.median(xb))
    side = "below" if less else "above"
    if len(xa) == 1 and len(xb) == 1:
        low = high = ratio
        method = f"compare: one run each, decided only beyond {UNREPEATED_FACTOR:g}x"
        lo_bound, hi_bound = by / UNREPEATED_FACTOR, by * UNREPEATED_FACTOR
        if (ratio < lo_bound) if less else (ratio > hi_bound):
            holds: bool | None = True
        elif (ratio > hi_bound) if less else (ratio < lo_bound):
            holds = False
        else:
            holds = None
        rule = f"{side} {lo_bound if less else hi_bound:.2f} (a factor {UNREPEATED_FACTOR:g} beyond {by:g})"
        return Verdict(holds, ratio, low, high, 1, 1, float(by), less, method, names, "", rule)
    if min(len(xa), len(xb)) < 3:
        low, high = _ratio(min(xa), max(xb)), _ratio(max(xa), min(xb))
        method = "compare: range of the ratio"
        interval = "range of the ratio"
    else:
        rng = random.Random(20)  # deterministic: the same samples give the same verdict
        boots = sorted(_ratio(statistics.median(rng.choices(xa, k=len(xa))),
                              statistics.median(rng.choices(xb, k=len(xb)))) for _ in range(_RESAMPLES))
        tail = (1 - LEVEL) / 2
        low, high = boots[int(tail * _RESAMPLES)], boots[int((1 - tail) * _RESAMPLES) - 1]
        method = f"compare: bootstrap {LEVEL:.0%} interval of the median ratio"
        interval = f"bootstrap {LEVEL:.0%} interval"
    if (high < by) if less else (low > by):
        holds = True
    elif (low > by) if less else (high < by):
        holds = False
    else:
        holds = None
    return Verdict(holds, ratio, low, high, len(xa), len(xb), float(by), less, method, names, interval,
                   f"wholly {side} {by:g}")


def compare_paired(a: Sequence[float], b: Sequence[float], *, less: bool = True, by: float = 1.0,
                   names: tuple[str, str] = ("a", "b")) -> Verdict:
    """As :func:`compare`, for paired samples (``a[i]`` and ``b[i]`` measured together, e.g. two
    schedules of the same measured pass): the interval is that of the median of the ratios ``a[i]/b[i]``,
    so a load that slows both members of a pair alike does not widen it.

    Returns:
        A frozen :class:`Verdict`: ``holds`` (True, False or None for can't tell), the ratio, its interval
        ``low``/``high`` and how it was decided (``method``, ``interval``, ``rule``).
    """
    xa, xb = _samples("a", a), _samples("b", b)
    if len(xa) != len(xb):
        raise ValueError(f"paired samples differ in length: {len(xa)} vs {len(xb)}")
    ratios = [_ratio(x, y) for x, y in zip(xa, xb)]
    v = compare(ratios, [1.0] * len(ratios), less=less, by=by)
    method = v.method.replace("median ratio", "median of the paired ratios").replace("range of the ratio",
                                                                                  "range of the paired ratios")
    interval = v.interval.replace("interval", "interval of the paired ratios").replace(
        "range of the ratio", "range of the paired ratios")
    return Verdict(v.holds, v.ratio, v.low, v.high, len(xa), len(xb), v.by, less, method, _check_names(names),
                   interval, v.rule)


def similar(a: Sequence[float] | float, b: Sequence[float] | float, *, tolerance: float = 0.25,
            names: tuple[str, str] = ("a", "b"), paired: bool = False) -> Verdict:
    """Decide "``a`` and ``b`` cost about the same" (``median(a)/median(b)`` within ``1/(1+tol)..1+tol``).

    True when the ratio's interval (as in :func:`compare`, or :func:`compare_paired` with ``paired``)
    lies inside that band, False when it lies wholly outside, None when it straddles an edge.

    Returns:
        A frozen :class:`Verdict`: ``holds`` (True, False or None for can't tell), the ratio, its interval
        ``low``/``high`` and how it was decided (``method``, ``interval``, ``rule``).
    """
    _fraction("tolerance", tolerance)
    v = compare_paired(a, b, names=names) if paired else compare(a, b, names=names)
    lo, hi = 1 / (1 + tolerance), 1 + tolerance
    if v.n_a == 1 and v.n_b == 1:
        holds: bool | None = lo <= v.ratio <= hi if (v.ratio < lo / UNREPEATED_FACTOR or v.ratio > hi * UNREPEATED_FACTOR
                                                    or lo <= v.ratio <= hi) else None
        rule = (f"inside {fmt_interval(lo, hi)} to hold, outside "
                f"{fmt_interval(lo / UNREPEATED_FACTOR, hi * UNREPEATED_FACTOR)} to fail")
    else:
        holds = _inside(v, lo, hi)
        rule = f"wholly inside {fmt_interval(lo, hi)}"
    method = "similar: " + v.method.split(":", 1)[1].strip() + f" inside {lo:.2f}-{hi:.2f}"
    return Verdict(holds, v.ratio, v.low, v.high, v.n_a, v.n_b, 1.0, True, method, v.names, v.interval, rule)


def overruled(v: Verdict, holds: bool | None, by: str) -> Verdict:
    """``v`` with its outcome set by a fact that outranks the timings -- a machine that could not show the
    effect, a trace that contradicts it -- named by ``by`` at the head of its method.

    Returns:
        A new :class:`Verdict` (``v`` is frozen): ``holds`` replaced, ``by`` prefixed to its method.

    Raises:
        TypeError: ``v`` is not a :class:`Verdict`, ``holds`` not True/False/None or ``by`` not a string.
    """
    if not isinstance(v, Verdict):
        raise TypeError(f"v must be a Verdict (from compare, trend, within, ...), got {type(v).__name__}")
    if holds not in (True, False, None):
        raise TypeError(f"holds must be True, False or None, got {holds!r}")
    if not isinstance(by, str) or not by:
        raise TypeError(f"by must be a non-empty str naming the overruling fact, got {by!r}")
    return replace(v, holds=holds, method=f"{by}; {v.method}")


def _inside(v: Verdict, lo: float, hi: float) -> bool | None:
    """True when ``v``'s interval lies inside ``[lo, hi]``, False when wholly outside it, None otherwise."""
    if lo <= v.low and v.high <= hi:
        return True
    if v.high < lo or v.low > hi:
        return False
    return None


def within(samples: Sequence[float] | float, target: float, *, tolerance: float,
           names: tuple[str, str] = ("measured", "target")) -> Verdict:
    """Decide "the samples' median is within ``tolerance`` (relative) of ``target``" against their spread.

    True when the interval of ``median(samples) / target`` (as in :func:`compare`) lies inside
    ``[1 - tolerance, 1 + tolerance]``, False when it lies wholly outside it, None otherwise.

    Returns:
        A frozen :class:`Verdict`: ``holds`` (True, False or None for can't tell), the ratio, its interval
        ``low``/``high`` and how it was decided (``method``, ``interval``, ``rule``).
    """
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not target > 0:
        raise ValueError(f"target must be a positive number, got {target!r}")
    _fraction("tolerance", tolerance)
    xs = _samples("samples", samples)
    v = compare(xs, [float(target)] * 3 if len(xs) >= 3 else [float(target)] * len(xs), names=names)
    lo, hi = 1 - tolerance, 1 + tolerance
    if len(xs) == 1:  # no spread: the point itself decides, as there is nothing to weigh it against
        holds: bool | None = lo <= v.ratio <= hi
    else:
        holds = _inside(v, lo, hi)
    method = "within: " + v.method.split(":", 1)[1].strip() + f" inside 1 \u00b1 {tolerance:g}"
    interval = v.interval if len(xs) > 1 else ""
    rule = f"wholly inside {fmt_interval(lo, hi)}" if len(xs) > 1 else f"inside {fmt_interval(lo, hi)}"
    return Verdict(holds, v.ratio, v.low, v.high, len(xs), 1, 1.0, True, method, v.names, interval, rule)


def at_least(samples: Sequence[float] | float, bound: float, *, slack: float = 0.0,
             names: tuple[str, str] = ("measured", "bound")) -> Verdict:
    """Decide "the samples' median is not below ``bound``" (a lower bound: a best case no run can beat)
    against their spread, allowing the bound's own estimation error ``slack`` (relative).

    True when the interval of ``median(samples) / bound`` (as in :func:`compare`) lies wholly at or above
    ``1 - slack``, False when it lies wholly below it, None otherwise; one sample has no spread, so the
    point itself decides (as in :func:`within`).

    Returns:
        A frozen :class:`Verdict`: ``holds`` (True, False or None for can't tell), the ratio, its interval
        ``low``/``high`` and how it was decided (``method``, ``interval``, ``rule``).
    """
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not bound > 0:
        raise ValueError(f"bound must be a positive number, got {bound!r}")
    if isinstance(slack, bool) or not isinstance(slack, (int, float)) or not 0 <= slack < 1:
        raise ValueError(f"slack must be in [0, 1), got {slack!r}")
    xs = _samples("samples", samples)
    floor = 1 - float(slack)
    v = compare(xs, [float(bound)] * 3 if len(xs) >= 3 else [float(bound)] * len(xs), names=names)
    if len(xs) == 1:  # no spread: the point itself decides, as there is nothing to weigh it against
        holds: bool | None = v.ratio >= floor
    else:
        holds = True if v.low >= floor else False if v.high < floor else None
    method = "at_least: " + v.method.split(":", 1)[1].strip() + f" at or above {floor:g}"
    interval = v.interval if len(xs) > 1 else ""
    rule = f"wholly at or above {floor:.2f}" if len(xs) > 1 else f"at or above {floor:.2f}"
    return Verdict(holds, v.ratio, v.low, v.high, len(xs), 1, floor, False, method, v.names, interval, rule)


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1  # ties share their average rank
        i = j + 1
    return ranks


def _pearson(x: Sequence[float], y: Sequence[float]) -> float:
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    return 0.0 if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation of ``y`` with ``x`` over every point (ties: average ranks).

    Returns:
        rho, in ``[-1, 1]``.
    """
    xs, ys = _samples("x", x), _samples("y", y)
    if len(xs) != len(ys):
        raise ValueError(f"x and y differ in length: {len(xs)} vs {len(ys)}")
    return _pearson(_ranks(xs), _ranks(ys))


@dataclass(frozen=True)
class Trend:
    """The outcome of :func:`trend`.

    Attributes:
        holds: True (the claimed direction, significant), False (the opposite, significant), None.
        rho: Spearman's rank correlation over every point.
        p: one-sided p-value of ``rho`` in the claimed direction.
        p_other: one-sided p-value in the opposite direction.
        n: points.
        falling: the claimed direction (``y`` falls as ``x`` grows).
        method: which rule decided it.
        alpha: the one-sided significance the claim needs (``p < alpha``).
    """

    holds: bool | None
    rho: float
    p: float
    p_other: float
    n: int
    falling: bool
    method: str

    alpha: float = _ALPHA

    @property
    def spread(self) -> str:
        """Spearman's rho, its points and p-value in words (:func:`d2l_async._words.spread_words`)."""
        return spread_words(self)

    def __bool__(self) -> bool:
        raise TypeError("a Trend has three outcomes; read .holds (True, False or None)")


def trend(x: Sequence[float], y: Sequence[float], *, falling: bool = True, alpha: float = _ALPHA) -> Trend:
    """Decide "``y`` falls (``falling=True``) or rises as ``x`` grows" from every point of the series.

    Spearman's rho with its exact permutation p-value for up to 8 points (every ordering of the ranks),
    the normal approximation ``rho * sqrt(n - 1)`` above.  Fewer than 3 points cannot decide (None).

    Returns:
        A frozen :class:`Trend`: ``holds`` (True, False or None), Spearman's ``rho``, the one-sided p-values
        ``p`` and ``p_other``, the number of points ``n`` and the ``method``.
    """
    xs, ys = _samples("x", x), _samples("y", y)
    if len(xs) != len(ys):
        raise ValueError(f"x and y differ in length: {len(xs)} vs {len(ys)}")
    n = len(xs)
    method = f"trend: Spearman's rank correlation over every point, one-sided p < {alpha:g}"
    if n < 3:
        return Trend(None, 0.0, 1.0, 1.0, n, falling, method, alpha)
    rx, ry = _ranks(xs), _ranks(ys)
    rho = _pearson(rx, ry)
    if n <= 8:
        perms = [_pearson(rx, list(p)) for p in itertools.permutations(ry)]
        p_low = sum(r <= rho + 1e-12 for r in perms) / len(perms)
        p_high = sum(r >= rho - 1e-12 for r in perms) / len(perms)
    else:
        z = rho * math.sqrt(n - 1)
        p_low = 0.5 * math.erfc(-z / math.sqrt(2))
        p_high = 0.5 * math.erfc(z / math.sqrt(2))
    p, p_other = (p_low, p_high) if falling else (p_high, p_low)
    holds = True if p < alpha else False if p_other < alpha else None
    return Trend(holds, rho, p, p_other, n, falling, method, alpha)
