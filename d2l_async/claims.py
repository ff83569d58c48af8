"""The chapter's claims, each declared once, with what must make it false.

A notebook states a claim of the book ("the narrow wait lets the frontend go on sooner") and a check
says whether this run showed it.  A check that no run can fail teaches nothing, however often it
passes; so each claim is declared here once, by the experiment module that decides it:

* ``sentence`` -- the claim as the check states it (facts in braces, e.g. ``{workers}``);
* ``book`` -- the book's sentence or section it comes from;
* ``quantity`` -- what decides it (``"synchronous / asynchronous wall time"``);
* ``rule`` -- how (a :mod:`d2l_async.verdict` helper and its bound, or ``"fact"``: read off the trace);
* ``says`` -- for a fact, the numbers shown, as a template of the run's facts (a verdict shows its
  own ratio or rank trend);

and, registered beside it, at least one **falsifier** -- an argument change or a synthetic result
under which the claim is false, so its check must not say ✔ -- and at least one **counterfactual**: a
change under which the claim's *reason* must change (the engine kind, the chain count, the steps, the
spare CPUs), with the :class:`~d2l_async.lesson.Cause` the check must then give.
``tests/experiments/test_claims.py`` enumerates the registry, runs every falsifier and every
counterfactual, and fails for a claim that has none (a mutation test of the lessons).

:meth:`Claim.check` builds the check of a claim from what decided it: the words come from the rule and
the numbers (:mod:`d2l_async._words`), the reason from the cause and the run's facts, never from a
sentence written for one outcome.  The line a student reads is short (the claim, one number, the
reason); the spread, the rule and the book's source are its :attr:`~d2l_async.lesson.Check.detail`.

Standard library only, like :mod:`d2l_async.lesson`; the registry fills as the experiment modules are
imported (``import d2l_async.experiments``).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from . import lesson
from ._words import cause_words, ratio_words, trend_words

__all__ = ["Claim", "Probe", "claim", "falsifier", "counterfactual", "registry", "get", "falsifiers",
           "counterfactuals", "headline_claims"]

_KEY = re.compile(r"^\d\d[a-z]?\.[a-z0-9-]+$")
_CLAIMS: dict[str, "Claim"] = {}
_FALSIFIERS: dict[str, dict[str, "Probe"]] = {}
_COUNTERFACTUALS: dict[str, dict[str, "Probe"]] = {}


@dataclass(frozen=True)
class Probe:
    """A change to run a claim's check under: a falsifier (the check must not say ✔) or a
    counterfactual (the check must give ``cause``).

    Attributes:
        change: what is changed, in words (``"peer_delay_ms=1"``, ``"a synthetic run, 2 workers as
            slow as 1"``).
        run: builds the claim's :class:`~d2l_async.lesson.Check` under that change.
        cause: for a counterfactual, the :class:`~d2l_async.lesson.Cause` value the check must give.
        process: True when ``run`` starts processes (rank processes): the fast tier skips it.
    """

    change: str
    run: Callable[[], Any]
    cause: str = ""
    process: bool = False


@dataclass(frozen=True)
class Claim:
    """One claim a notebook states (see the module docstring).

    Attributes:
        key: ``"<notebook number>.<name>"``, e.g. ``"03.narrow-sooner"``; a check stores it.
        notebooks: the notebooks that show its check (file stems).
        sentence: the claim as the check's line states it; braces name facts of the run.
        book: the book's sentence or section.
        quantity: what decides it.
        rule: how it is decided (a :mod:`d2l_async.verdict` helper and its bound, or ``"fact: ..."``).
        says: for a fact, the numbers the line shows, a template of the run's facts.
        headline: one of the (at most three) book points of its notebook.
        role: the check's role (:data:`d2l_async.lesson.ROLES`).
    """

    key: str
    notebooks: tuple[str, ...]
    sentence: str
    book: str
    quantity: str
    rule: str
    says: str = ""
    headline: bool = True
    role: str = ""

    def check(self, decided: Any, *, cause: Any = "", facts: Mapping[str, Any] | None = None, shown: str = "",
              detail: str = "", role: str | None = None, numbers: Mapping[str, Any] | None = None) -> lesson.Check:
        """This claim's check on one run, not displayed.

        Args:
            decided: a :mod:`d2l_async.verdict` record, or a bool (a fact: ✔ or ✘), or None (can't tell).
            cause: why it did not hold (:class:`~d2l_async.lesson.Cause`); for a verdict's can't tell it
                defaults to ``SPREAD``.  Ignored for a ✔.
            facts: the run's facts the sentence, ``says`` and the cause's words name (formatted strings or
                numbers).
            shown: the numbers, when neither the verdict nor ``says`` states them.
            detail: more for the check's details (after the spread, the quantity and the book).
            role: the check's role where the run decides it (a speed-up of threads is evidence, of modelled
                devices an illustration); default :attr:`role`.
            numbers: the run's numbers the line shows, unformatted (:attr:`~d2l_async.lesson.Check.numbers`):
                what a test asserts on instead of the words.

        Returns:
            The frozen :class:`~d2l_async.lesson.Check`, its ``claim`` set to :attr:`key`.

        Raises:
            ValueError: a ✘ or can't tell without a cause, or a fact the words name is missing.
        """
        facts = dict(facts or {})
        holds = getattr(decided, "holds", decided)
        if not shown:
            if hasattr(decided, "rho"):
                shown = trend_words(decided, facts.get("trend_of", ""))
            elif hasattr(decided, "ratio") and hasattr(decided, "names"):
                shown = ratio_words(decided)
            else:
                shown = _fill(self.says, facts, f"claim {self.key}'s says")
        if holds is not True and not cause:
            if holds is None and hasattr(decided, "method"):
                cause = lesson.Cause.SPREAD
                facts.setdefault("runs", _runs(decided))
            else:
                raise ValueError(f"claim {self.key}: a {'can' + chr(39) + 't tell' if holds is None else '✘'} "
                                 "needs its cause (lesson.Cause)")
        why = cause_words(cause, **facts) if holds is not True else ""
        more = "; ".join(p for p in (f"quantity: {self.quantity}", f"rule: {self.rule}", f"book: {self.book}",
                                     detail) if p)
        return lesson.check(_fill(self.sentence, facts, f"claim {self.key}'s sentence"), decided, shown=shown,
                            otherwise=why, unclear=why, role=self.role if role is None else role,
                            cause=cause if holds is not True else "",
                            claim=self.key, detail=more, numbers=numbers)


def _runs(v: Any) -> str:
    """``"3 vs 3 runs"``, ``"7 points"``: the samples a verdict decided from."""
    if hasattr(v, "rho"):
        return f"{v.n} points"
    if getattr(v, "n_b", 0) == 1 and getattr(v, "n_a", 0) > 1:
        return f"{v.n_a} runs"
    return f"{getattr(v, 'n_a', 1)} vs {getattr(v, 'n_b', 1)} runs"


def _fill(template: str, facts: Mapping[str, Any], what: str) -> str:
    names = {f for _, f, _, _ in string.Formatter().parse(template) if f}
    missing = sorted(names - set(facts))
    if missing:
        raise ValueError(f"{what} names the facts {missing}: pass them in facts=")
    return template.format(**facts) if names else template


def claim(key: str, *, notebooks: tuple[str, ...], sentence: str, book: str, quantity: str, rule: str,
          says: str = "", headline: bool = True, role: str = "") -> Claim:
    """Declare a claim and add it to the registry.

    Returns:
        The frozen :class:`Claim` (declaring the same claim again, as a module reload does, returns it).

    Raises:
        ValueError: a malformed key, no notebook, a role :mod:`d2l_async.lesson` does not know, or a key
            already declared differently.
    """
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f"key must read '<notebook number>.<name>' (e.g. '03.narrow-sooner'), got {key!r}")
    if not notebooks or not all(isinstance(n, str) and n for n in notebooks):
        raise ValueError(f"claim {key}: notebooks must name the notebooks that show it, got {notebooks!r}")
    if role not in lesson.ROLES:
        raise ValueError(f"claim {key}: role must be one of {lesson.ROLES}, got {role!r}")
    c = Claim(key, tuple(notebooks), sentence, book, quantity, rule, says, headline, role)
    old = _CLAIMS.get(key)
    if old is not None:
        if old != c:
            raise ValueError(f"claim {key} is declared twice, differently: {old} and {c}")
        return old
    _CLAIMS[key] = c
    return c


def _probe(table: dict[str, dict[str, Probe]], c: Claim | str, probe: Probe) -> Probe:
    key = c.key if isinstance(c, Claim) else c
    if not isinstance(key, str) or key not in _CLAIMS:
        raise ValueError(f"c={c!r}: no such claim is declared; declare it with claims.claim() first")
    if not isinstance(probe.change, str) or not probe.change.strip():
        raise ValueError(f"change={probe.change!r}: say in words what the probe changes (e.g. 'peer_delay_ms=1')")
    if not callable(probe.run):
        raise ValueError(f"run={probe.run!r}: pass a function that builds the claim's check under the change")
    table.setdefault(key, {})[probe.change] = probe  # by its words: a module reload replaces, not adds
    return probe


def falsifier(c: Claim | str, change: str, run: Callable[[], Any], *, process: bool = False) -> Probe:
    """Register a change under which claim ``c`` is false: its check (``run()``) must not say ✔.

    Returns:
        The registered :class:`Probe`.
    """
    return _probe(_FALSIFIERS, c, Probe(change, run, "", process))


def counterfactual(c: Claim | str, change: str, cause: Any, run: Callable[[], Any], *,
                   process: bool = False) -> Probe:
    """Register a change under which claim ``c``'s reason must be ``cause``: ``run()``'s check gives it.

    Returns:
        The registered :class:`Probe`.

    Raises:
        ValueError: ``cause`` is not a :class:`~d2l_async.lesson.Cause`.
    """
    value = getattr(cause, "value", cause)
    if not isinstance(value, str) or value not in {x.value for x in lesson.Cause}:
        raise ValueError(f"cause={cause!r}: pass a lesson.Cause (one of {sorted(x.value for x in lesson.Cause)})")
    return _probe(_COUNTERFACTUALS, c, Probe(change, run, value, process))


def registry() -> tuple[Claim, ...]:
    """Every declared claim, by key (import :mod:`d2l_async.experiments` first: it declares them).

    Returns:
        The :class:`Claim` records sorted by key.
    """
    return tuple(_CLAIMS[k] for k in sorted(_CLAIMS))


def get(key: str) -> Claim:
    """The claim declared under ``key``.

    Returns:
        Its :class:`Claim`.

    Raises:
        ValueError: no such claim (the message lists the declared ones).
    """
    if not isinstance(key, str) or key not in _CLAIMS:
        raise ValueError(f"no claim {key!r}; declared: {sorted(_CLAIMS)}")
    return _CLAIMS[key]


def falsifiers(key: str) -> tuple[Probe, ...]:
    """The falsifiers registered for the claim ``key``.

    Returns:
        Its :class:`Probe` records, in the order registered (``()`` when none).

    Raises:
        ValueError: no such claim.
    """
    return tuple(_FALSIFIERS.get(get(key).key, {}).values())


def counterfactuals(key: str) -> tuple[Probe, ...]:
    """The counterfactuals registered for the claim ``key``.

    Returns:
        Its :class:`Probe` records, in the order registered (``()`` when none).

    Raises:
        ValueError: no such claim.
    """
    return tuple(_COUNTERFACTUALS.get(get(key).key, {}).values())


def headline_claims(notebook: str | None = None) -> tuple[Claim, ...]:
    """The headline claims, of one notebook (its file stem or number) or of all.

    Returns:
        The :class:`Claim` records with ``headline`` set, sorted by key.
    """
    out = [c for c in registry() if c.headline]
    if notebook is not None and not isinstance(notebook, str):
        raise ValueError(f"notebook must be a notebook's file stem or number (e.g. '05'), got {notebook!r}")
    if notebook is not None:
        out = [c for c in out if any(n == notebook or n.split("_")[0] == notebook for n in c.notebooks)]
    return tuple(out)
