"""Rules that hold a lesson check's words against its numbers (used by the one-core test).

A check (:class:`d2l_async.lesson.Check`) is stored in the notebook output's metadata with every
field: its claim, outcome, numbers, explanation, the rule that decided it and that rule's numbers.
Each rule below reads those fields -- the metadata only, never the lines a cell printed, so a
lecturer's own ``print(f"ours {r.ratio:.2f}x vs the book's 3.4x")`` never fails the suite -- and
names what a student would read as a contradiction:

* ``unsure-claims-an-outcome`` -- a "can't tell" whose explanation states an outcome ("costs almost
  nothing extra", "at no cost in time", "was faster"): the words of another outcome;
* ``ratio-both-ways`` -- one comparison printed as ``a / b`` and as ``b / a`` (``0.75×`` in the numbers,
  ``= 1.34`` in the spread);
* ``timing-tick-undecided`` -- a ✔ about a magnitude of time (costs, saves, slows, "that time")
  whose numbers hold two times, decided by no spread rule and no machine gate;
* ``times-compared-undecided`` -- any check setting one time against another (``1.2 ms vs 3.4 ms``)
  without a spread rule;
* ``garbled-number`` -- a spread printed twice (``inside 0.80-1.25 0.94–1.25``, ``1 ± 0.25 3.76–5.25``),
  a sign printed twice (``+-9.7 ms``), a cost that "adds" a negative time;
* ``trend-not-by-trend`` -- a claim that something grows or shrinks, decided other than by the trend
  rule over every point (:func:`d2l_async.verdict.trend`);
* ``modelled-as-evidence`` -- a modelled result (a claim about modelled devices or a modelled link)
  credited as a speed-up or decided as a timing of this machine, instead of carrying the modelled mark.

:func:`claim_problems` holds a check against the claim registry (:mod:`d2l_async.claims`): it names a
declared claim shown by this notebook, a ✘ or ? gives its cause, and the line is at most 40 words.

Every rule is a pure function of the fields, so the rules are unit-tested with synthetic checks
(``tests/test_lesson.py``), one per finding they generalise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from d2l_async import lesson

__all__ = ["Cell", "Problem", "problems", "check_problems", "claim_problems", "compares_times", "RULES",
           "CLAIM_RULES", "MAX_WORDS"]

RULES = ("unsure-claims-an-outcome", "ratio-both-ways", "timing-tick-undecided", "times-compared-undecided",
         "garbled-number", "trend-not-by-trend", "modelled-as-evidence")
CLAIM_RULES = ("no-claim", "claim-of-another-notebook", "no-cause", "line-too-long")
#: The most words a check's line may have (its spread and rule are one click away, in its details).
MAX_WORDS = 40

_UNIT = r"(?:ns|µs|us|ms|s)\b"
_TIME = r"\d[\d,.]*\s*" + _UNIT
#: "12.0 ms ... vs ... 30.1 ms": a check whose numbers set one time against another.
_COMPARISON = re.compile(_TIME + r".*?\bvs\.?\s.*?" + _TIME)
_DURATION = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*(ns|µs|us|ms|s)\b")

#: Words that state an outcome; a "can't tell" must not use them about its own claim.
_OUTCOME = re.compile(
    r"\bat no cost\b|\bcosts? (?:almost |next to |practically )?nothing\b|\bno (?:extra )?cost\b"
    r"|\b(?:is|was|were|ran|runs) (?:faster|slower|shorter|longer|cheaper)\b"
    r"|\b(?:takes?|took|costs?|cost) [^;.]*?\d[^;.]*?\beither way\b"
    r"|\b(?:bought|buys) [^;.]*\bat no\b", re.IGNORECASE)
#: A claim about a magnitude of time (not the order of two events).
_TIMING_CLAIM = re.compile(
    r"\b(?:faster|slower|shorter|longer|costs?|saves?|saved|slows?|that time|that delay|its delay|as long)\b",
    re.IGNORECASE)
_TREND_CLAIM = re.compile(r"\b(?:grows?|shrinks?|rises?|falls?|increases?|decreases?)\b", re.IGNORECASE)
#: Ratios as the words print them: "1.47×", "(0.75x)", "a / b = 1.34", "ratio 1.34" (not "p = 0.38").
_RATIO = re.compile(r"(?<![\w.])(\d+\.\d+)\s*[x×](?!\w)|/ [^=;,()]{1,60}?=\s*(\d+\.\d+)\b(?!\s*(?:ns|µs|us|ms|s|%)\b)"
                    r"|\bratio (\d+\.\d+)\b")
_GARBLED = (
    (re.compile(r"\d(?:\.\d+)?\s*[-–]\s*\d+(?:\.\d+)?\s+\d+(?:\.\d+)?\s*[-–]\s*\d"), "two intervals in a row"),
    (re.compile(r"±\s*\d+(?:\.\d+)?\s+\d+(?:\.\d+)?\s*[-–]\s*\d"), "a bound and an interval in a row"),
    (re.compile(r"\+\s?[-−]\s?\d"), "a sign printed twice"),
    (re.compile(r"\badds?\s+(?:only\s+)?[-−]\s?\d"), "a cost that adds a negative time"),
)
_SCALE = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass(frozen=True)
class Cell:
    """What one code cell showed: its lesson checks and the lines it printed (stdout; kept for the reader's
    log, never read by a rule)."""

    checks: tuple[lesson.Check, ...] = ()
    printed: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Problem:
    """One rule broken: which, by which check (or printed line), and what a student would read."""

    rule: str
    text: str
    why: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.why}: {self.text}"


def compares_times(c: lesson.Check) -> bool:
    """Whether a check's numbers compare two times (``"... 1.2 ms vs 3.4 ms"``): such a claim must be
    decided against the run's spread by :mod:`d2l_async.verdict`, which records itself in ``decided_by``."""
    return bool(_COMPARISON.search(c.shown))


def _seconds(value: str, unit: str) -> float:
    return float(value.replace(",", "")) * _SCALE[unit]


def _ratios(text: str) -> list[float]:
    return [float(next(g for g in m.groups() if g)) for m in _RATIO.finditer(text)]


def _inverse(x: float, y: float) -> bool:
    """``x`` and ``y`` are one ratio in two directions (within the rounding of two decimals)."""
    if x <= 0 or y <= 0 or abs(x - 1) < 0.06 or abs(y - 1) < 0.06:
        return False
    return abs(x * y - 1) <= 0.02 and abs(x - y) > 0.05


def check_problems(c: lesson.Check) -> list[Problem]:
    """The rules that read one check's own fields."""
    out: list[Problem] = []
    words = f"{c.shown} {c.otherwise}"
    if c.holds is None and (m := _OUTCOME.search(c.otherwise)):
        out.append(Problem("unsure-claims-an-outcome", c.text,
                           f"a can't-tell that states an outcome ({m.group(0)!r})"))
    ratio = c.number("ratio")
    found = _ratios(words)
    if isinstance(ratio, (int, float)):
        inverse = [x for x in found if _inverse(x, float(ratio))]
        if inverse:
            out.append(Problem("ratio-both-ways", c.text,
                               f"the verdict's ratio {ratio:.2f} is also printed inverted ({inverse[0]:.2f})"))
    else:
        pairs = [(x, y) for i, x in enumerate(found) for y in found[i + 1:] if _inverse(x, y)]
        if pairs:
            out.append(Problem("ratio-both-ways", c.text, f"one ratio printed both ways ({pairs[0][0]:.2f} and "
                                                          f"{pairs[0][1]:.2f})"))
    if (c.holds is True and not c.decided_by and _TIMING_CLAIM.search(c.name)
            and len(_DURATION.findall(c.shown)) >= 2):
        out.append(Problem("timing-tick-undecided", c.text,
                           "a ✔ about a magnitude of time with no spread rule and no machine gate"))
    if compares_times(c) and not c.decided_by:
        out.append(Problem("times-compared-undecided", c.text,
                           "two times compared without deciding against the run's spread"))
    for pattern, what in _GARBLED:
        if m := pattern.search(words):
            out.append(Problem("garbled-number", c.text, f"{what} ({m.group(0)!r})"))
    if re.search(r"\bmodelled\b", c.name, re.IGNORECASE) and c.role != "modelled" and (
            c.role == "speed-up" or c.decided_by):
        out.append(Problem("modelled-as-evidence", c.text,
                           "a modelled result decided as a timing of this machine, without the modelled mark"))
    if c.holds is not None and _TREND_CLAIM.search(c.name) and "trend:" not in c.decided_by:
        out.append(Problem("trend-not-by-trend", c.text,
                           f"a growth or fall decided by {c.decided_by or 'no rule'!r}, not by the trend over every point"))
    return out


def cell_problems(cell: Cell) -> list[Problem]:
    """The rules broken by a cell's checks (its printed lines are the reader's, and no rule reads them)."""
    return [p for c in cell.checks for p in check_problems(c)]


def claim_problems(c: lesson.Check, notebook: str = "") -> list[Problem]:
    """The registry's rules for one displayed check: it decides a declared claim (of ``notebook``, a file
    stem, when given), a ✘ or ? names its cause, and its line is at most :data:`MAX_WORDS` words."""
    import d2l_async.experiments  # noqa: F401 - declares the claims
    import d2l_async.torch_async.lessons  # noqa: F401
    from d2l_async import claims

    out: list[Problem] = []
    known = {k.key: k for k in claims.registry()}
    if c.claim not in known:
        out.append(Problem("no-claim", c.text, f"the check names no declared claim ({c.claim!r})"))
    elif notebook and notebook not in known[c.claim].notebooks:
        out.append(Problem("claim-of-another-notebook", c.text,
                           f"claim {c.claim} is declared for {known[c.claim].notebooks}, shown in {notebook}"))
    if c.holds is not True and not c.cause:
        out.append(Problem("no-cause", c.text, "a ✘ or ? without its structured cause (lesson.Cause)"))
    if c.words > MAX_WORDS:
        out.append(Problem("line-too-long", c.text, f"{c.words} words, more than {MAX_WORDS}"))
    return out


def problems(cells: Iterable[Cell]) -> list[Problem]:
    """Every rule broken in a notebook's cells, in order."""
    return [p for cell in cells for p in cell_problems(cell)]
