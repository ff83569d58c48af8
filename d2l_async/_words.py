"""Words for a lesson: the one place where a run's numbers become the sentence a student reads.

A lesson check (:mod:`d2l_async.lesson`) shows numbers and, when it did not hold, explains.  Each of
those texts is a function of *this* run's numbers, built here, so that a sentence written for one
outcome is never shown for another (a "can't tell" that says "costs nothing" beside a 1.7x gap), a
comparison is never printed as ``a / b`` in one place and ``b / a`` in the next, and a spread reads
the same in every notebook, dashboard and the report.

One format per quantity:

* **time** -- :func:`fmt_time`: ``4.56 µs``, ``12.3 ms``, ``1.63 s``, the unit chosen by magnitude
  (three significant digits below a second), ``n/a`` for a number that was not measured;
* **a difference** -- :func:`fmt_change`: ``+3.2 ms`` / ``-239 µs`` (the sign always written), and
  :func:`added` for "a conversion adds ...", which never says "adds -239 µs";
* **a ratio** -- :func:`fmt_ratio` (``1.47×``); a verdict's ratio is always written in the verdict's own
  direction, named by its sides: :func:`ratio_words` (``every step / once at the end = 1.47``);
* **a spread** -- :func:`spread_words`: the ratio, its interval, the runs it came from and the bound the
  claim needs, each once: ``every step / once = 1.47, bootstrap 90% interval 1.10–1.95 over 5 vs 5
  runs; the claim needs it wholly above 1`` (what :attr:`d2l_async.verdict.Verdict.spread` returns, and
  what :func:`d2l_async.lesson.check` puts beside a ✘'s reason and in front of a can't tell's).

**Why a claim did not hold** -- :func:`cause_words`: one sentence per cause (the values of
:class:`d2l_async.lesson.Cause`), filled with this run's facts (``"1 usable CPU, 0.0 of them spare: the
frontend and the worker took turns on it"``).  A check states its cause as a field and its words come
from here, so the sentence of one cause is never shown for another, whatever claim it explains.

The verdict records (:class:`d2l_async.verdict.Verdict`, :class:`~d2l_async.verdict.Trend`) are read
by their fields (duck-typed), so this module imports nothing: standard library only.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["fmt_time", "fmt_change", "fmt_ratio", "fmt_interval", "added", "ratio_words", "spread_words", "MINUS",
           "CAUSE_WORDS", "cause_words", "trend_words"]

#: The minus sign of a negative number (ASCII, as Python prints it: a reader can paste it back).
MINUS = "-"


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fmt_time(seconds: float) -> str:
    """Seconds with the unit their magnitude calls for: ``4.56 µs``, ``12.3 ms``, ``1.63 s``.

    Three significant digits below one second (trailing zeros dropped: ``34 ms``), two decimals from one
    second up; the sign of a
    negative time is kept; ``n/a`` for None, NaN or an infinity.
    """
    if seconds is None or not _finite(float(seconds)):
        return "n/a"
    s = float(seconds)
    sign, a = (MINUS if s < 0 else ""), abs(s)
    r = float(f"{a:.3g}")  # the unit of the rounded value: 999.7 µs is 1.00 ms
    if r >= 1:
        return f"{sign}{a:.2f} s"
    if r >= 1e-3:
        return f"{sign}{_sig3(a * 1e3)} ms"
    if r >= 1e-6 or a == 0:
        return f"{sign}{_sig3(a * 1e6)} µs"
    return f"{sign}{_sig3(a * 1e9)} ns"


def _sig3(x: float) -> str:
    """Three significant digits, trailing zeros dropped (``12.3``, ``34``, ``0.5``); callers keep ``x`` below
    1000 by choosing the unit of the rounded value, so no exponent appears."""
    return f"{x:.3g}"


def fmt_change(seconds: float) -> str:
    """A difference of times, its sign always written: ``+3.2 ms``, ``-239 µs``."""
    if seconds is None or not _finite(float(seconds)):
        return "n/a"
    return ("+" if seconds >= 0 else "") + fmt_time(seconds)


def added(seconds: float) -> str:
    """What an extra step costs, in words: ``adds 239 µs``; a cost that measured zero or less is not
    called one (``adds nothing measurable: 239 µs less than without it, run-to-run noise``)."""
    if seconds is None or not _finite(float(seconds)):
        return "adds an unmeasured amount"
    if seconds > 0:
        return f"adds {fmt_time(seconds)}"
    if seconds == 0:
        return "adds nothing measurable"
    return f"adds nothing measurable ({fmt_time(-seconds)} less than without it: run-to-run noise)"


def fmt_ratio(x: float) -> str:
    """``1.47×`` (two decimals); ``n/a`` for a ratio that could not be computed."""
    if x is None or not _finite(float(x)):
        return "n/a"
    return f"{x:.2f}\u00d7"


def fmt_interval(low: float, high: float) -> str:
    """``0.94–1.25``: an interval of ratios (an en dash, two decimals)."""
    return f"{low:.2f}\u2013{high:.2f}"


def _names(v: Any) -> tuple[str, str]:
    names = tuple(getattr(v, "names", ()) or ())
    return (str(names[0]), str(names[1])) if len(names) == 2 else ("a", "b")


def ratio_words(v: Any) -> str:
    """The verdict's ratio in its own direction, named by its sides: ``every step / once = 1.47``."""
    a, b = _names(v)
    return f"{a} / {b} = {v.ratio:.2f}"


def _rule(v: Any) -> str:
    """What the claim needs of the interval, in words (``below 1``, ``inside 0.80–1.25``)."""
    rule = str(getattr(v, "rule", "") or "")
    if rule:
        return rule
    return f"{'below' if v.less else 'above'} {v.by:g}"


def spread_words(v: Any) -> str:
    """The spread behind a verdict, each number once.

    A :class:`~d2l_async.verdict.Verdict`: ``a / b = 1.47, bootstrap 90% interval 1.10–1.95 over 5
    vs 5 runs; the claim needs it above 1`` (one run each: no interval, and the factor that one run
    can decide beyond).  A :class:`~d2l_async.verdict.Trend`: ``Spearman's rho -0.90 over 20 points
    (one-sided p = 0.001; the claim needs p < 0.05)``.
    """
    if hasattr(v, "rho"):
        alpha = getattr(v, "alpha", 0.05)
        rho = f"{v.rho:+.2f}"
        return (f"Spearman's rho {rho} over {v.n} points (one-sided p = {v.p:.3g}; the claim needs "
                f"p < {alpha:g})")
    head = ratio_words(v)
    if v.n_a == 1 and v.n_b == 1:
        return f"{head} from one run each (no spread measured); the claim needs it {_rule(v)}"
    kind = str(getattr(v, "interval", "") or "interval")
    runs = f"{v.n_a} runs against a fixed {_names(v)[1]}" if v.n_b == 1 else f"{v.n_a} vs {v.n_b} runs"
    return f"{head}, {kind} {fmt_interval(v.low, v.high)} over {runs}; the claim needs it {_rule(v)}"


def trend_words(t: Any, what: str = "") -> str:
    """A rank trend in one number: ``rank trend of the ratio -0.89 over 7 points`` (Spearman's rho; its
    p-value and the rule are the check's detail)."""
    head = f"rank trend{' of ' + what if what else ''}"
    return f"{head} {t.rho:+.2f} over {t.n} points"


#: The sentence of each cause (:class:`d2l_async.lesson.Cause` values), with the facts it names in braces.
CAUSE_WORDS = {
    "spread": "inside the spread of {runs}: more runs decide it",
    "other-way": "it went the other way, beyond the spread of {runs}",
    "no-spare-cpu": "{cpus}: {threads} took turns on it",
    "interpreter-lock": "{cpus}; the interpreter lock ran {threads} in turn",
    "no-worker-thread": "the naive engine runs each op at push time: no worker thread",
    "one-chain": "{chains} dependent chain: no independent work for a second worker",
    "few-steps": "{steps} per loop: both loops do the same work",
    "too-small": "{small} took {took}, too short beside {beside}",
    "one-rank": "one rank has nobody to talk to or wait for",
    "sides-close": "the two sides' work per op was within a factor 2 ({sides})",
    "exceeds-cause": "{gain} {amount} exceeds {cap}, all that {source} can explain",
    "trace": "the trace shows {seen}",
    "gpu": "{gpu}",
    "missing": "{missing}",
    "bug": "{bug}: a bug, please report it",
}


def cause_words(cause: Any, **facts: Any) -> str:
    """The sentence of ``cause`` (a :class:`d2l_async.lesson.Cause` or its value) filled with ``facts``.

    Returns:
        The sentence, e.g. ``cause_words("one-chain", chains=1)`` -> ``"1 chain of dependent ops: no
        independent work for a second worker"``.

    Raises:
        ValueError: an unknown cause, or a fact its sentence names that ``facts`` lacks.
    """
    key = getattr(cause, "value", cause)
    if key not in CAUSE_WORDS:
        raise ValueError(f"cause must be one of {sorted(CAUSE_WORDS)}, got {cause!r}")
    try:
        return CAUSE_WORDS[key].format(**facts)
    except KeyError as err:
        raise ValueError(f"cause {key!r} names the fact {err.args[0]!r}; pass it: cause_words({key!r}, "
                         f"{err.args[0]}=...)") from None
