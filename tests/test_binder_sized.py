"""Every notebook fits a Binder pod: default mode, pinned to one busy CPU, in at most 90 s and 1 GiB.

The numbers come from a run, not from this test: ``benchmarks/bench_notebooks.py`` executes every notebook
in default mode pinned to one CPU beside a busy process and writes ``benchmarks/results/notebooks.json``
(a full default-mode run takes tens of minutes: too long for ``make test``, which executes the notebooks
in quick mode).  This test reads that file and holds it to the limits: every notebook of ``notebooks/`` has
a row from such a run, ran without error within the time and memory goal, and what it printed is one
sitting's reading with check lines of at most 40 words and at most 1,500 words of check text in all.
Rerun the benchmark after changing a notebook; the test names the notebooks it has no row for.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "notebooks.json"
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
MAX_SECONDS = 90.0
MAX_RSS_MIB = 1024
MAX_CHECK_WORDS = 1500
MAX_LINE_WORDS = 40


@pytest.fixture(scope="module")
def run() -> dict:
    data = json.loads(RESULTS.read_text())
    assert data["mode"] == "default" and data.get("busy", True), "notebooks.json must be a default-mode, busy run"
    return data


def test_every_notebook_has_a_row_of_a_pinned_default_run(run):
    rows = {r["notebook"]: r for r in run["notebooks"]}
    missing = sorted(set(NOTEBOOKS) - set(rows))
    assert not missing, f"no default-mode row for {missing}: rerun benchmarks/bench_notebooks.py"
    assert all(len(r["kernel_affinity"]) == 1 for r in rows.values()), "every kernel pinned to one CPU"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_notebook_fits_a_binder_pod(run, name):
    rows = {r["notebook"]: r for r in run["notebooks"]}
    if name not in rows:
        pytest.fail(f"{name}: no row in notebooks.json")
    r = rows[name]
    assert not r["error"], f"{name}: {r['error'][:300]}"
    assert r["seconds"] <= MAX_SECONDS, f"{name}: {r['seconds']} s on one busy CPU in default mode"
    assert r["peak_rss_mib"] <= MAX_RSS_MIB, f"{name}: the kernel peaked at {r['peak_rss_mib']} MiB"
    assert r["reading_minutes"] <= 20, f"{name}: {r['reading_minutes']} minutes to read with its outputs"
    long = [c["name"] for c in r["checks"] if len(_text(c).split()) > MAX_LINE_WORDS]
    assert not long, f"{name}: check lines over {MAX_LINE_WORDS} words: {long}"


def test_the_check_text_of_a_run_is_short(run):
    words = sum(r["check_words"] for r in run["notebooks"])
    assert words <= MAX_CHECK_WORDS, f"{words} words of check text in one default-mode run"


def _text(c: dict) -> str:
    line = f"x {c['name']}: {c['shown']}"
    return line + (f" — Why: {c['otherwise']}" if c["holds"] is not True else "")
