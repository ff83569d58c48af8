"""One sitting, the book's code on the page: every notebook's reading time, concepts, plumbing and API, from
its source (tests/one_core/reading.py; the one-core test adds the printed words of an executed run).

* at most 20 minutes of markdown and code (markdown at 200 words a minute, code at 10 lines a minute);
* at most 10 new concepts, each defined in notebook 00's glossary and introduced by one notebook only;
* at most 20 % of the code lines print, format or unpack results;
* every ``d2l_async`` name a cell reads is pinned public API (tests/test_public_names.py);
* at most three headline claims per notebook, and every claim belongs to a notebook that exists.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.one_core import reading

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
GLOSSARY = reading.glossary(json.loads((ROOT / "notebooks" / "00_tour.ipynb").read_text()))


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebook_reads_in_one_sitting(path):
    s = reading.stats(path)
    assert s.minutes <= reading.MAX_MINUTES, f"{path.stem}: {s.minutes:.1f} minutes before its outputs"
    assert 1 <= len(s.concepts) <= reading.MAX_CONCEPTS, f"{path.stem}: {len(s.concepts)} new concepts {s.concepts}"
    undefined = [c for c in s.concepts if c not in GLOSSARY]
    assert not undefined, f"{path.stem}: concepts not defined in notebook 00's glossary: {undefined}"
    assert s.plumbing_share <= reading.MAX_PLUMBING, (f"{path.stem}: {s.plumbing_lines} of {s.code_lines} code lines "
                                                      "print, format or unpack results")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebook_calls_the_pinned_public_api_only(path):
    assert reading.api_calls(_nb(path)) == []


def test_each_concept_is_introduced_once_and_each_glossary_entry_by_a_notebook():
    seen = Counter(c for p in NOTEBOOKS for c in reading.concepts(_nb(p)))
    twice = [c for c, n in seen.items() if n > 1]
    assert not twice, f"introduced by more than one notebook: {twice}"
    assert sorted(set(GLOSSARY) - set(seen)) == [], "glossary entries no notebook introduces"


def test_at_most_three_headline_claims_per_notebook_and_every_claim_has_its_notebook():
    import d2l_async.experiments  # noqa: F401 - declares the claims
    import d2l_async.torch_async.lessons  # noqa: F401
    from d2l_async import claims

    stems = {p.stem for p in NOTEBOOKS}
    per = Counter(n for c in claims.headline_claims() for n in c.notebooks)
    assert max(per.values()) <= 3, per
    orphans = {c.key: c.notebooks for c in claims.registry() if not set(c.notebooks) <= stems}
    assert not orphans, f"claims of notebooks that do not exist: {orphans}"


def test_the_measures_see_what_they_count():
    """The measures on a small notebook of their own: words, plumbing, concepts, API."""
    cells = [{"cell_type": "markdown", "source": "# T\n\n**New concepts:** a · b\nc\n\nSome words here."},
             {"cell_type": "code", "source": "r = ex.run_barriers()\nm = r.model\nprint(f'{m:.2f}')\nr",
              "outputs": []}]
    nb = {"cells": cells}
    assert reading.concepts(nb) == ("a", "b c")
    assert reading.plumbing_lines(cells[1]["source"]) == (2, 4)  # the unpacking and the print
    assert reading.markdown_words(cells[0]["source"]) == 9  # "T New concepts: a b c Some words here.": not "·"
    bad = {"cells": [{"cell_type": "code", "source": "from d2l_async import experiments as ex\n"
                                                     "ex.asynchrony.timer_check(1, 2)\nex.run_barriers()"}]}
    assert reading.api_calls(bad) == ["d2l_async.experiments.asynchrony: a module outside the pinned surface"]
