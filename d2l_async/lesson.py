"""Lesson checks: a sentence about *this run* is computed from this run, never typed.

The book states a claim ("the narrow wait lets the frontend go on sooner"); whether it held on the
reader's machine is a fact of the measurement.  A notebook therefore never prints a promised
result: it states the claim, the condition computed from the numbers, and the numbers themselves::

    lesson.expect("the narrow wait lets the frontend go on sooner",
                  r.narrow_s < r.wide_s,
                  shown=f"waited {r.narrow_s * 1e3:.1f} ms vs {r.wide_s * 1e3:.1f} ms",
                  otherwise="one usable CPU, busy: the worker ran only while the frontend waited. "
                            "Raise n_ops, or run on a machine with a spare core.")

renders one line::

    ✔ the narrow wait lets the frontend go on sooner: waited 1.2 ms vs 310.4 ms
    ✘ the narrow wait lets the frontend go on sooner: waited 311 ms vs 310 ms — Why: one usable CPU, ...

A ✘ always carries its *Why*: the measured reason (usable CPUs, load, sizes, which side was the
bottleneck) and what to change.  A ✘ without one is a bug in the notebook, and ``make test``'s
one-core run fails on it (:attr:`Check.explained`).

**Three outcomes.**  A claim that compares timings is decided against the run's own
spread by :mod:`d2l_async.verdict` (:func:`~d2l_async.verdict.compare` for two sets of repeated
samples, :func:`~d2l_async.verdict.trend` for a series): pass its record as ``holds`` and the check
is ✔ (the effect is larger than the spread, as claimed), ✘ (larger, the other way) or **can't tell**
(inside the spread), rendered with its own mark::

    ? the narrow wait lets the frontend go on sooner: waited 300 ms vs 310 ms — Can't tell: narrow / wide
      = 0.97, bootstrap 90% interval 0.88–1.09 over 5 vs 5 runs; the claim needs it wholly below 1; ...

The check then records which helper decided it (:attr:`Check.decided_by`), so the one-core test can
fail a timing comparison that was decided from one number.  ``holds=None`` may also be given directly
(with ``unclear=``, or ``otherwise=``, saying what would make the effect visible).  A check about the machine
(``role="machine"``: can this machine show a speed-up?) gates the checks that credit one
(``role="speed-up"``): :func:`contradictions` lists the pairs that disagree.

**Words from this run's numbers.**  Every text a check shows is built from its own numbers by
:mod:`d2l_async._words` (one time format, ratios in the verdict's own direction ``a / b`` with the
sides named, one spread format).  The line a student reads is short: the claim, its one number and,
when it did not hold, the reason (a verdict's can't tell gets ``unclear`` -- never ``otherwise``,
which was written for the other outcome).  The spread, the rule that decided it and the claim's source
are one click away: :attr:`Check.detail`, shown in the HTML's ``<details>`` beside a link to the key of
the marks in notebook 00 (:data:`KEY_URL`).  A check keeps the deciding verdict's numbers
(:attr:`Check.numbers`), its claim's key in the registry (:attr:`Check.claim`, :mod:`d2l_async.claims`)
and the structured reason (:attr:`Check.cause`, one of :class:`Cause`), stored with it, so the one-core
test can hold the words against them (``tests/one_core/rules.py``) without reading prose.

**Modelled results** (``role="modelled"``: a modelled link, modelled devices) render with their own
mark, ◇, whatever their outcome: an illustration of what the model gives, never a ✔ or ✘ of this
machine (:attr:`Check.evidence` is False); the name or numbers must say "modelled".

The three calls:

* :func:`check` builds a frozen :class:`Check` without displaying it (use it in experiment modules:
  a ``checks(result)`` function is then a pure function of a frozen result, testable with synthetic
  results);
* :func:`show` displays one check or several;
* :func:`expect` = :func:`check` + :func:`show`.

**Where a topic's checks live (the one convention).**  Each experiment topic has one home for its
checks: pure functions of its frozen result, named ``checks(result)`` or after the claim
(``time_check(runs)``, ``straggler_checks(result)``), built with :func:`check` (never displayed),
decided with :mod:`d2l_async.verdict` and worded with :mod:`d2l_async._words`.  The home is the
experiment module itself (``blockers``, ``scheduling``, ``collective``,
``ddp``), or, where that module would pass about 400 lines, its private
``_<topic>_lessons`` module, imported at the top of the experiment module and re-exported by it
(``queue_memory`` and ``_queue_lessons``, ``sync_async`` and ``_sync_async_lessons``);
``parallel_lessons`` is the public home of notebooks 02 and 07's device checks, since its
:func:`~d2l_async.experiments.parallel_lessons.plan_devices` is public.  The one exception is a notebook
whose own cells are the experiment (plain PyTorch inside ``asynchronous()``): it passes what it
measured to :mod:`d2l_async.torch_async.lessons`, whose functions are pure functions of those numbers.

In a notebook each check is displayed with IPython's ``display`` as text and HTML, and its fields
are also stored in the output's metadata under :data:`METADATA_KEY`, so a test reading the executed
notebook recovers every check exactly (:func:`checks_in_outputs`) without parsing prose.  Outside
IPython the text line is printed.  Standard library only.
"""

from __future__ import annotations

import html
import json
import numbers as _numbers
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, Union

from ._args import having, instance, sequence

__all__ = ["Cause", "Check", "CheckList", "check", "expect", "show", "checks_in_outputs", "contradictions",
           "HOLDS", "FAILS", "UNSURE", "MODELLED", "ROLES", "KEY_URL"]

#: The marks; a rendered check line starts with one of them.
HOLDS = "\u2714"  # ✔
FAILS = "\u2718"  # ✘
UNSURE = "?"  # can't tell: the difference is inside the run's spread
MODELLED = "\u25c7"  # ◇ a modelled result: an illustration of what a model gives, never evidence of this machine
#: What a check is about, for the rules between checks (:func:`contradictions`); ``"modelled"`` marks a
#: result computed from a model (a modelled link or device), shown with its own mark whatever its outcome.
ROLES = ("", "machine", "speed-up", "modelled")
#: The key under which a displayed check's fields are stored in the notebook output's metadata.
METADATA_KEY = "d2l_async_lesson"
#: Separates the numbers from the explanation in the text line.
WHY = " \u2014 Why: "
UNSURE_WHY = " \u2014 Can't tell: "
_DEFAULT_UNCLEAR = ("the difference is inside this run's spread; more repeats, a larger size or a spare core "
                    "would make it visible")
#: Where the marks and the one statistic of the checks are explained (notebook 00's key), linked from
#: every check's HTML (a relative link: the notebooks sit in one folder).
KEY_URL = "00_tour.ipynb#How-to-read-a-check"


class Cause(str, Enum):
    """Why a check did not hold, as a fact of the run (:attr:`Check.cause`): a test asserts on this
    field, never on the prose, and :func:`d2l_async._words.cause_words` turns it into the sentence.

    The members name what the run measured: the run's spread (``SPREAD``), the effect beyond it the
    other way (``OTHER_WAY``), the machine (``NO_SPARE_CPU``: fewer spare CPUs than busy threads;
    ``INTERPRETER_LOCK``: the CPUs were spare, Python's lock serialized the threads), the engine
    (``NO_WORKER_THREAD``: a naive engine runs every op at push time), the workload (``ONE_CHAIN``:
    no independent work; ``FEW_STEPS``: too few steps to differ; ``TOO_SMALL``: the work too short beside
    its overhead; ``ONE_RANK``: a job of one rank), the two sides' costs within the factor one
    measurement decides (``SIDES_CLOSE``), a gain larger than its cause can explain (``EXCEEDS_CAUSE``),
    what the trace or a recorded file shows (``TRACE``), a GPU's own reason (``GPU``), a missing input
    (``MISSING``) and a bug of the package (``BUG``).
    """

    SPREAD = "spread"
    OTHER_WAY = "other-way"
    NO_SPARE_CPU = "no-spare-cpu"
    INTERPRETER_LOCK = "interpreter-lock"
    NO_WORKER_THREAD = "no-worker-thread"
    ONE_CHAIN = "one-chain"
    FEW_STEPS = "few-steps"
    TOO_SMALL = "too-small"
    ONE_RANK = "one-rank"
    SIDES_CLOSE = "sides-close"
    EXCEEDS_CAUSE = "exceeds-cause"
    TRACE = "trace"
    GPU = "gpu"
    MISSING = "missing"
    BUG = "bug"


_CAUSES = {c.value for c in Cause}


@dataclass(frozen=True)
class Check:
    """The outcome of one expected lesson on this run.

    Attributes:
        name: the claim, e.g. ``"the narrow wait lets the frontend go on sooner"``.
        holds: True (✔), False (✘) or None (can't tell: the effect is inside the run's spread).
        shown: the numbers behind it, e.g. ``"waited 1.2 ms vs 310.4 ms"``.
        otherwise: why it did not hold (measured reason + what to change), or for can't tell the
            spread and what would make the effect visible; read only when ``holds`` is not True.
        decided_by: the rule that decided a comparison of timings (``"compare: ..."``,
            ``"trend: ..."``, from :mod:`d2l_async.verdict`); ``""`` for a fact read off the run.
        role: ``"machine"`` (whether this machine can show a speed-up), ``"speed-up"`` (a claim that
            credits one) or ``""``; see :func:`contradictions`.
        numbers: the deciding verdict's numbers as ``(key, value)`` pairs -- ``ratio``, ``low``,
            ``high``, ``n_a``, ``n_b``, ``a``, ``b`` (the sides' names) for a comparison; ``rho``,
            ``p``, ``n`` for a trend -- followed by the run's own numbers that the line shows (a fact's
            counts and sizes, passed as ``numbers=``).  Stored with the check, so a test asserts on
            them, never on the words.
        claim: the key of the claim in :mod:`d2l_async.claims` this check decides (``""``: none).
        cause: why it did not hold, a :class:`Cause` value (``""`` for a ✔).
        detail: the spread, the rule and the source, one click away (the HTML's ``<details>``).
    """

    name: str
    holds: bool | None
    shown: str
    otherwise: str = ""
    decided_by: str = ""
    role: str = ""
    numbers: tuple[tuple[str, Any], ...] = ()
    claim: str = ""
    cause: str = ""
    detail: str = ""

    def number(self, key: str, default: Any = None) -> Any:
        """One of :attr:`numbers` by its key (``default`` when the check has none)."""
        return dict(self.numbers).get(key, default)

    @property
    def mark(self) -> str:
        if self.role == "modelled":
            return MODELLED
        return UNSURE if self.holds is None else HOLDS if self.holds else FAILS

    @property
    def evidence(self) -> bool:
        """False for a modelled result: it illustrates a model and never counts as this machine's ✔ or ✘."""
        return self.role != "modelled"

    @property
    def explained(self) -> bool:
        """True unless this is a ✘ (or can't tell) without an explanation (a bug in whoever built it)."""
        return self.holds is True or bool(self.otherwise.strip())

    @property
    def text(self) -> str:
        """The one line shown in the notebook."""
        line = f"{self.mark} {self.name}: {self.shown}"
        if self.holds is not True:
            why = self.otherwise.strip() or "(no explanation given: a bug in the notebook)"
            line += f"{UNSURE_WHY if self.holds is None else WHY}{why}"
        return line

    @property
    def words(self) -> int:
        """Words in the line a student reads (:attr:`text`): the chapter keeps each at most 40."""
        return len(self.text.split())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _repr_html_(self) -> str:
        colour = ("#4b5d8a" if self.role == "modelled" else "#8c6d00" if self.holds is None
                  else "#1b7837" if self.holds else "#b2182b")
        body = (f'<a href="{KEY_URL}" title="what the marks mean (notebook 00)" style="color:{colour};'
                f'font-weight:bold;text-decoration:none">{self.mark}</a> '
                f"<b>{html.escape(self.name)}</b>: {html.escape(self.shown)}")
        if self.holds is not True:
            why = self.otherwise.strip() or "(no explanation given: a bug in the notebook)"
            label = "Can't tell:" if self.holds is None else "Why:"
            body += f"<br><i>{label}</i> {html.escape(why)}"
        more = [p for p in (self.detail, f"decided by {self.decided_by}" if self.decided_by else "",
                            f"claim {self.claim}" if self.claim else "") if p]
        if more:
            body += ('<details style="font-size:90%"><summary>how it was decided</summary>'
                     + "<br>".join(html.escape(p) for p in more)
                     + f' (<a href="{KEY_URL}">the key</a>)</details>')
        return f'<div class="d2l-async-lesson">{body}</div>'

    def __str__(self) -> str:
        return self.text

    def _ipython_display_(self) -> None:
        # ``lesson.expect(...)`` as a cell's last line already displayed the check: its return
        # value must not show it twice.  Evaluated later on its own, it displays as usual.
        if getattr(self, "_shown_in", None) != _execution_count():
            _display(self)


class CheckList(list):
    """The checks :func:`show` displayed; as a cell's last value it is not displayed again."""

    def __init__(self, iterable: Any = (), /) -> None:
        super().__init__(sequence("iterable", iterable, what="checks"))

    def _ipython_display_(self) -> None:
        if getattr(self, "_shown_in", None) != _execution_count():
            for c in self:
                _display(c)


def _execution_count() -> int | None:
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return getattr(shell, "execution_count", None) if shell is not None else None


CheckLike = Union[Check, tuple]


def _is_bool(value: Any) -> bool:
    # numpy.bool_ (comparisons of arrays/scalars) counts; ints, strings and None do not.
    return isinstance(value, bool) or type(value).__name__ in {"bool_", "bool"}


def _is_verdict(value: Any) -> bool:
    # a record of d2l_async.verdict (compare / trend): duck-typed, so this module stays import-free
    return hasattr(value, "holds") and isinstance(getattr(value, "method", None), str) and hasattr(value, "spread")


def check(name: str, holds: Any, *, shown: str, otherwise: str = "", unclear: str = "",
          role: str = "", cause: str = "", claim: str = "", detail: str = "",
          numbers: Mapping[str, Any] | None = None) -> Check:
    """A :class:`Check` built from this run's numbers, not displayed.

    Args:
        holds: a bool computed from the run (a fact: ✔ or ✘), ``None`` (can't tell), or a record of
            :func:`d2l_async.verdict.compare` / :func:`~d2l_async.verdict.trend`: its outcome,
            decided against the run's spread, with ``decided_by`` set to its method.
        otherwise: the ✘'s reason (measured, with what to change).
        unclear: for can't tell, what would make the effect visible (a default sentence otherwise).
        role: ``"machine"``, ``"speed-up"``, ``"modelled"`` or ``""`` (see :func:`contradictions`).
        cause: why it did not hold, a :class:`Cause` (or its value); ignored for a ✔.
        claim: the key of the claim it decides in :mod:`d2l_async.claims`.
        detail: more numbers for the HTML's ``<details>``; a verdict's spread is put in front of it.
        numbers: the run's numbers the line shows, by name (``{"max_queue": 40}``: str keys; int, float,
            str or bool values, as JSON stores them), kept after a verdict's own (:attr:`Check.numbers`).

    Returns:
        The frozen :class:`Check`: the stripped ``name`` and ``shown``, ``holds`` as ``True``, ``False`` or
        ``None``, the reason (for can't tell the ``unclear`` hint or a default, for ✘ ``otherwise``), for a
        verdict its ``decided_by`` method and numbers, then ``numbers``, the claim's key, the cause (``""``
        for a ✔) and the detail (the verdict's spread first).

    Raises:
        TypeError: ``holds`` is not a bool, None or a verdict (e.g. a number: compute the condition), or
            ``numbers`` is not a mapping of names to plain numbers or strings.
        ValueError: ``name`` or ``shown`` is empty, ``role`` is unknown, ``cause`` is not a :class:`Cause`
            or a name in ``numbers`` repeats one of the verdict's.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"lesson check: name must be a non-empty string (the claim), got {name!r}")
    numbers_given = numbers
    decided_by, spread, numbers, from_verdict = "", "", (), _is_verdict(holds)
    if from_verdict:
        decided_by, spread, numbers, holds = holds.method, str(holds.spread), _numbers_of(holds), holds.holds
    if holds is not None and not _is_bool(holds):
        raise TypeError(f"lesson check {name!r}: holds must be a bool computed from the run, None (can't tell) "
                        f"or a verdict of d2l_async.verdict, got {type(holds).__name__} {holds!r}")
    if not isinstance(shown, str) or not shown.strip():
        raise ValueError(f"lesson check {name!r}: shown must state the numbers, got {shown!r}")
    if not all(isinstance(x, str) for x in (otherwise, unclear, claim, detail)):
        raise TypeError(f"lesson check {name!r}: otherwise, unclear, claim and detail must be strings")
    if role not in ROLES:
        raise ValueError(f"lesson check {name!r}: role must be one of {ROLES}, got {role!r}")
    cause = cause.value if isinstance(cause, Cause) else cause
    if not isinstance(cause, str) or (cause and cause not in _CAUSES):
        raise ValueError(f"lesson check {name!r}: cause must be one of {sorted(_CAUSES)} (lesson.Cause), got {cause!r}")
    if role == "modelled" and "modelled" not in f"{name} {shown}".lower():
        raise ValueError(f"lesson check {name!r}: a modelled result must say so in its name or numbers "
                         "(the word 'modelled'), so the line cannot be read as a measurement")
    if holds is None:
        # A verdict's "can't tell" is explained by ``unclear`` only, never by ``otherwise``: that text was
        # written for the other outcome (a ✘'s reason shown beside numbers that say "maybe").
        otherwise = unclear.strip() or ("" if from_verdict else otherwise.strip()) or _DEFAULT_UNCLEAR
    numbers = numbers + _own_numbers(name, numbers_given, {k for k, _ in numbers})
    detail = "; ".join(p for p in (spread, detail.strip()) if p)
    return Check(name.strip(), None if holds is None else bool(holds), shown.strip(), otherwise.strip(),
                 decided_by, role, numbers, claim.strip(), "" if holds is True else cause, detail)


def _own_numbers(name: str, given: Any, taken: set[str]) -> tuple[tuple[str, Any], ...]:
    """``numbers=`` as ``(key, value)`` pairs, checked: what JSON keeps (the notebook's metadata)."""
    if given is None:
        return ()
    if not isinstance(given, Mapping):
        raise TypeError(f"lesson check {name!r}: numbers must be a mapping of names to numbers "
                        f"(e.g. {{'max_queue': 40}}), got {type(given).__name__} {given!r}")
    out = []
    for k, v in given.items():
        # numpy's scalars register as numbers.Integral / numbers.Real: stored as Python's, as JSON keeps them
        plain = (bool(v) if _is_bool(v) else int(v) if isinstance(v, _numbers.Integral)
                 else float(v) if isinstance(v, _numbers.Real) else v)
        if not isinstance(k, str) or not k or not isinstance(plain, (int, float, str)):
            raise TypeError(f"lesson check {name!r}: numbers must map names (str) to an int, float, str or bool, "
                            f"got {k!r}: {v!r}")
        if k in taken:
            raise ValueError(f"lesson check {name!r}: numbers names {k!r}, which the verdict already gives; "
                             "pick another name")
        out.append((k, plain))
    return tuple(out)


def _numbers_of(v: Any) -> tuple[tuple[str, Any], ...]:
    """The numbers of a verdict record that a check keeps (see :attr:`Check.numbers`)."""
    if hasattr(v, "rho"):
        return (("rho", float(v.rho)), ("p", float(v.p)), ("n", int(v.n)))
    names = tuple(getattr(v, "names", ("a", "b")))
    out: list[tuple[str, Any]] = [("ratio", float(v.ratio)), ("low", float(v.low)), ("high", float(v.high)),
                                  ("n_a", int(v.n_a)), ("n_b", int(v.n_b))]
    if len(names) == 2:
        out += [("a", str(names[0])), ("b", str(names[1]))]
    return tuple(out)


def contradictions(checks: Iterable[Check]) -> list[tuple[Check, Check]]:
    """Pairs of checks that contradict each other: a speed-up credited against the machine verdict.

    A check about the machine that says it *cannot* show a speed-up (``role="machine"``, ✘) forbids a
    ✔ on any check that credits a speed-up (``role="speed-up"``) among the same checks (one notebook).

    Returns:
        Every ``(machine check, speed-up check)`` pair where a ✘ ``role="machine"`` check meets a ✔
        ``role="speed-up"`` one; ``[]`` when none contradict.
    """
    items = [having("checks", c, ("role", "holds"), what="a sequence of lesson checks")
             for c in sequence("checks", checks, what="lesson checks")]
    no_speedup = [c for c in items if c.role == "machine" and c.holds is False]
    credited = [c for c in items if c.role == "speed-up" and c.holds is True]
    return [(m, s) for m in no_speedup for s in credited]


def _as_check(item: CheckLike) -> Check:
    if isinstance(item, Check):
        return item
    if isinstance(item, tuple) and len(item) in (3, 4):
        name, holds, shown, *rest = item
        return check(name, holds, shown=shown, otherwise=rest[0] if rest else "")
    raise TypeError(f"lesson.show: expected a Check or a (name, holds, shown[, otherwise]) tuple, "
                    f"got {item!r}")


def _in_ipython() -> bool:
    ipython = sys.modules.get("IPython")
    return ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None


def _display(c: Check) -> None:
    object.__setattr__(c, "_shown_in", _execution_count())  # not a field: equality is unchanged
    if _in_ipython():
        from IPython.display import display

        display({"text/plain": c.text, "text/html": c._repr_html_()}, raw=True,
                metadata={METADATA_KEY: c.to_dict()})
    else:
        print(c.text)


def show(checks: CheckLike | Iterable[CheckLike]) -> CheckList:
    """Display one check or several (Checks or ``(name, holds, shown[, otherwise])`` tuples).

    Returns:
        The checks, as :class:`Check` objects, in order (a list).
    """
    items = [checks] if isinstance(checks, (Check, tuple)) else list(
        sequence("checks", checks, what="checks (Check objects or (name, holds, shown) tuples)"))
    out = CheckList(_as_check(item) for item in items)
    for c in out:
        _display(c)
    out._shown_in = _execution_count()
    return out


def expect(name: str, holds: Any, *, shown: str, otherwise: str = "", unclear: str = "",
           role: str = "", cause: str = "", claim: str = "", detail: str = "",
           numbers: Mapping[str, Any] | None = None) -> Check:
    """Build a check from this run's numbers (see :func:`check`) and display it; returns the :class:`Check`.

    Returns:
        The :class:`Check` that :func:`check` builds, after it has been displayed.
    """
    c = check(name, holds, shown=shown, otherwise=otherwise, unclear=unclear, role=role, cause=cause, claim=claim,
              detail=detail, numbers=numbers)
    _display(c)
    return c


def parse_line(line: str) -> Check | None:
    """A check read back from its text line, or None when the line is not one.

    Text is ambiguous when a name contains ``": "``; prefer the metadata
    (:func:`checks_in_outputs`), which this falls back to only for printed checks.
    """
    line = instance("line", line, str, what="str (one printed line)").strip()
    if not line or line[0] not in (HOLDS, FAILS, UNSURE, MODELLED) or ": " not in line:
        return None
    if line[0] == MODELLED:  # the outcome of a modelled result is in the metadata only
        name, _, rest = line[1:].strip().partition(": ")
        rest, _, otherwise = rest.partition(WHY) if WHY in rest else rest.partition(UNSURE_WHY)
        return Check(name, None, rest, otherwise, role="modelled")
    holds = None if line[0] == UNSURE else line[0] == HOLDS
    name, _, rest = line[1:].strip().partition(": ")
    otherwise = ""
    sep = UNSURE_WHY if holds is None else WHY
    if holds is not True and sep in rest:
        rest, _, otherwise = rest.partition(sep)
        if otherwise.startswith("(no explanation given"):
            otherwise = ""
    return Check(name, holds, rest, otherwise)


def _text_of(data: Any) -> str:
    return "".join(data) if isinstance(data, list) else str(data or "")


def checks_in_outputs(outputs: Iterable[Mapping[str, Any]], *, printed: bool = True) -> list[Check]:
    """Every lesson check in a notebook cell's outputs (nbformat dicts), in order.

    Displayed checks are read from their metadata; printed ones (stdout streams) from their lines, unless
    ``printed=False`` (a test that must not mistake a reader's own ``print`` for a check).

    Returns:
        The :class:`Check` records found, in output order (``[]`` when the cell shows none).
    """
    found: list[Check] = []
    for out in sequence("outputs", outputs, what="nbformat output dicts"):
        instance("outputs", out, Mapping, what="sequence of nbformat output dicts")
        meta = out.get("metadata") or {}
        if isinstance(meta, Mapping) and METADATA_KEY in meta:
            fields = meta[METADATA_KEY]
            if isinstance(fields, str):
                fields = json.loads(fields)
            holds = fields["holds"]
            numbers = tuple((str(k), v) for k, v in (fields.get("numbers") or ()))
            found.append(Check(str(fields["name"]), None if holds is None else bool(holds), str(fields["shown"]),
                               str(fields.get("otherwise", "")), str(fields.get("decided_by", "")),
                               str(fields.get("role", "")), numbers, str(fields.get("claim", "")),
                               str(fields.get("cause", "")), str(fields.get("detail", ""))))
        elif printed and out.get("output_type") == "stream" and out.get("name") == "stdout":
            for line in _text_of(out.get("text")).splitlines():
                parsed = parse_line(line)
                if parsed is not None:
                    found.append(parsed)
    return found
