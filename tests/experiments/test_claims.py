"""A mutation test of the lessons: every claim of the chapter, run under what must make it false.

The registry (:mod:`d2l_async.claims`) holds every claim a notebook states, each with at least one
falsifier (an argument change or a synthetic result under which the claim is false) and at least one
counterfactual (a change under which its *reason* must change: the engine kind, the chain count, the
steps, the spare CPUs).  This module enumerates the registry:

* a claim without a falsifier or a counterfactual fails the suite (a new claim must say what would
  make it false);
* every falsifier runs, and fails the suite if its check still says ✔;
* every counterfactual runs, and fails the suite unless its check gives the structured cause it names
  (:attr:`d2l_async.lesson.Check.cause`) -- never read from prose;
* every line either produces is at most 40 words.

Probes that start rank processes (``process=True``) are skipped in the fast tier.
"""

from __future__ import annotations

import pytest

import d2l_async.experiments  # noqa: F401 - declares the claims
import d2l_async.torch_async.lessons  # noqa: F401 - declares the plain-PyTorch claims
from d2l_async import claims, lesson

REGISTRY = claims.registry()
FALSIFIERS = [(c, p) for c in REGISTRY for p in claims.falsifiers(c.key)]
COUNTERFACTUALS = [(c, p) for c in REGISTRY for p in claims.counterfactuals(c.key)]


def _marks(probe):
    return [pytest.mark.process, pytest.mark.timeout(300)] if probe.process else [pytest.mark.timeout(120)]


def _one(c, out):
    """A probe's check: the one it returns, or the one of its claim among several."""
    if isinstance(out, lesson.Check):
        return out
    mine = [x for x in out if x.claim == c.key]
    assert len(mine) == 1, f"{c.key}: the probe returned {len(mine)} checks of this claim"
    return mine[0]


def missing_probes(registry=None) -> list[str]:
    """The claims without a falsifier or without a counterfactual."""
    registry = REGISTRY if registry is None else registry
    return [c.key for c in registry if not claims.falsifiers(c.key) or not claims.counterfactuals(c.key)]


def test_the_registry_holds_the_chapters_claims():
    keys = {c.key for c in REGISTRY}
    assert {"10.late-peer", "02.dependent-no-gain", "05b.shrinks", "00.ran-ahead"} <= keys
    assert len(REGISTRY) >= 30 and len(FALSIFIERS) >= len(REGISTRY) and len(COUNTERFACTUALS) >= len(REGISTRY)


def test_every_claim_has_a_falsifier_and_a_counterfactual():
    assert missing_probes() == [], "a claim without what would make it false (claims.falsifier/counterfactual)"


def test_a_claim_without_a_falsifier_is_found():
    bare = claims.claim("98.bare", notebooks=("98_test",), sentence="x", book="", quantity="", rule="fact")
    try:
        assert missing_probes((bare,)) == ["98.bare"]
    finally:
        del claims._CLAIMS["98.bare"]


@pytest.mark.parametrize("c, probe", [pytest.param(c, p, id=f"{c.key}: {p.change}", marks=_marks(p))
                                      for c, p in FALSIFIERS])
def test_a_falsifier_makes_its_claim_not_hold(c, probe):
    check = _one(c, probe.run())
    assert check.claim == c.key
    assert check.holds is not True, f"{c.key} still says ✔ under {probe.change!r}: {check.text}"
    assert check.explained and check.cause, check.text
    assert check.words <= 40, check.text


@pytest.mark.parametrize("c, probe", [pytest.param(c, p, id=f"{c.key}: {p.change}", marks=_marks(p))
                                      for c, p in COUNTERFACTUALS])
def test_a_counterfactual_changes_the_reason(c, probe):
    check = _one(c, probe.run())
    assert check.claim == c.key
    assert check.cause == probe.cause, f"{c.key} under {probe.change!r}: cause {check.cause!r}: {check.text}"
    assert check.words <= 40, check.text
