"""The claim registry's mechanics (d2l_async.claims): declaring, words from the rule and the cause, probes.

The registry of the chapter's own claims is enumerated in tests/experiments/test_claims.py; here the
mechanism is tested on claims declared by the test itself (keys under ``99.``).
"""

from __future__ import annotations

import pytest

from d2l_async import claims, lesson, verdict
from d2l_async._words import CAUSE_WORDS, cause_words

FACT = claims.claim("99.fact", notebooks=("99_test",), sentence="the queue reached {bound} ops",
                    book="a test", quantity="the longest queue", rule="fact: at least the bound",
                    says="longest queue {queue} of {bound}")
RATIO = claims.claim("99.ratio", notebooks=("99_test",), sentence="a is faster than b", book="a test",
                     quantity="a / b", rule="compare: below 1")


def _take_test_claims() -> list[dict]:
    """Remove the ``99.`` entries from the registry's tables; returns them, table by table."""
    taken = []
    for table in (claims._CLAIMS, claims._FALSIFIERS, claims._COUNTERFACTUALS):
        taken.append({k: table.pop(k) for k in [k for k in table if k.startswith("99.")]})
    return taken


# Taken out as soon as declared: the chapter's registry is enumerated by other test modules, which may run
# (in another order, or in the same xdist worker) while this module is imported; its tests put them back.
_DECLARED = _take_test_claims()


@pytest.fixture(autouse=True)
def the_test_claims():
    """The test claims registered for one test of this module, and gone after it."""
    for table, entries in zip((claims._CLAIMS, claims._FALSIFIERS, claims._COUNTERFACTUALS), _DECLARED):
        table.update(entries)
    yield
    _take_test_claims()


def test_every_cause_has_its_words_and_every_word_a_cause():
    assert set(CAUSE_WORDS) == {c.value for c in lesson.Cause}
    assert cause_words(lesson.Cause.ONE_CHAIN, chains=1).startswith("1 dependent chain")
    with pytest.raises(ValueError, match="names the fact 'chains'"):
        cause_words("one-chain")
    with pytest.raises(ValueError, match="cause must be one of"):
        cause_words("a busy cpu")


def test_a_fact_shows_its_numbers_from_the_template_and_its_reason_from_the_cause():
    ok = FACT.check(True, facts={"bound": 8, "queue": 12})
    assert ok.holds and ok.text == "✔ the queue reached 8 ops: longest queue 12 of 8" and ok.cause == ""
    assert ok.claim == "99.fact" and "rule: fact: at least the bound" in ok.detail
    bad = FACT.check(False, cause=lesson.Cause.ONE_CHAIN, facts={"bound": 8, "queue": 3, "chains": 1})
    assert bad.cause == "one-chain" and bad.otherwise == cause_words("one-chain", chains=1)


def test_a_verdict_shows_one_number_and_its_spread_is_one_click_away():
    v = verdict.compare([1.0, 1.1, 0.9], [2.0, 2.1, 1.9], names=("a", "b"))
    c = RATIO.check(v)
    assert c.text == "✔ a is faster than b: a / b = 0.50" and c.number("ratio") == pytest.approx(0.5)
    assert "bootstrap 90% interval" in c.detail and "interval" not in c.text
    html = c._repr_html_()
    assert "<details" in html and lesson.KEY_URL in html  # the key of the marks, linked from every check


def test_a_cant_tell_defaults_to_the_spread_and_a_fail_needs_its_cause():
    v = verdict.compare([1.0, 1.3, 0.8], [1.1, 0.9, 1.2], names=("a", "b"))
    c = RATIO.check(v)
    assert c.holds is None and c.cause == "spread" and "3 vs 3 runs" in c.otherwise
    with pytest.raises(ValueError, match="needs its cause"):
        RATIO.check(verdict.compare([2.0, 2.1, 1.9], [1.0, 1.1, 0.9], names=("a", "b")))
    with pytest.raises(ValueError, match="names the facts"):
        FACT.check(True, facts={"queue": 1})


def test_declaring_a_key_twice_differently_is_refused_and_keys_are_checked():
    assert claims.claim("99.fact", notebooks=("99_test",), sentence="the queue reached {bound} ops", book="a test",
                        quantity="the longest queue", rule="fact: at least the bound",
                        says="longest queue {queue} of {bound}") is not None  # the same declaration again
    with pytest.raises(ValueError, match="declared twice"):
        claims.claim("99.fact", notebooks=("99_test",), sentence="something else", book="", quantity="", rule="")
    with pytest.raises(ValueError, match="key must read"):
        claims.claim("fact", notebooks=("99_test",), sentence="x", book="", quantity="", rule="")
    with pytest.raises(ValueError, match="notebooks"):
        claims.claim("99.none", notebooks=(), sentence="x", book="", quantity="", rule="")


def test_probes_register_by_their_words_and_name_a_real_cause():
    claims.falsifier(FACT, "a queue of 3", lambda: FACT.check(False, cause="spread", facts={
        "bound": 8, "queue": 3, "runs": "3 runs"}))
    claims.falsifier(FACT, "a queue of 3", lambda: None)  # the same words: replaced, not added
    assert len(claims.falsifiers("99.fact")) == 1
    with pytest.raises(ValueError, match="lesson.Cause"):
        claims.counterfactual(FACT, "x", "busy cpu", lambda: None)
    with pytest.raises(ValueError, match="no such claim"):
        claims.falsifier("99.undeclared", "x", lambda: None)
    assert claims.get("99.fact") is FACT and FACT in claims.headline_claims("99")
    with pytest.raises(ValueError, match="no claim"):
        claims.get("99.undeclared")


def test_a_check_refuses_an_unknown_cause():
    with pytest.raises(ValueError, match="cause must be one of"):
        lesson.check("x", False, shown="1", otherwise="why", cause="a busy CPU")
    assert lesson.check("x", True, shown="1", cause="spread").cause == ""  # a ✔ has no cause
