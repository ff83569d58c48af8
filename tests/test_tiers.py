"""The fast tier (``make test-fast``) leaves out, before they run, the tests that would start a process
inside a library (Chromium through kaleido, a fork under a held engine): refused at that start, they
waited out their timeouts, and kaleido's threads kept the run from ever exiting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.process
@pytest.mark.timeout(300)
def test_the_fast_tier_skips_browser_and_process_tests_before_they_start():
    tests = ["tests/test_make_figures.py::test_one_figure_renders_to_a_png",
             "tests/torch_async/test_synchronous_table.py::test_each_case_of_the_table_is_recorded_with_its_reason"]
    env = {**os.environ, "D2L_ASYNC_TIER": "fast", "D2L_ASYNC_QUICK": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", *tests, "-p", "no:cacheprovider", "-q", "-rs",
                           "--durations=0", "--durations-min=5"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 2, out[-3000:]  # the one figure test, and the fork case of the table
    assert all("starts a process: not in the fast tier" in s for s in skipped), skipped
    assert {s.split()[2].split(":")[0] for s in skipped} == {t.split("::")[0] for t in tests}
    # none of them waited out a timeout first: no test took 5 s or more
    assert "durations < 5s hidden" in out and "s call " not in out and "s setup " not in out, out[-3000:]


def test_make_test_keeps_each_notebook_with_the_tests_that_read_its_run_in_one_worker(request, monkeypatch):
    """Under pytest-xdist (``make test`` on two CPUs) a notebook's cells must share one kernel, and the one-core
    and site tests must run after them in the same worker: all are one unit of work, every other test file one."""
    from tests import notebook_run

    monkeypatch.setattr(request.config.option, "tx", ["2*popen"], raising=False)  # what `pytest -n 2` sets
    scheduler = notebook_run.pytest_xdist_make_scheduler(request.config, None)
    unit = scheduler._split_scope  # what xdist calls to group the collected test ids
    kept = {unit(nodeid) for nodeid in ("notebooks/00_tour.ipynb::Cell 0", "notebooks/00_tour.ipynb::Cell 7",
                                        "notebooks/10b_ddp_overlap.ipynb::Cell 3",
                                        "tests/one_core/test_one_core.py::test_notebook_on_one_busy_core[00_tour]",
                                        "tests/site/test_site.py::test_every_page_loads_without_error_and_draws_its_figures")}
    assert kept == {notebook_run.KEPT_RUNS}
    assert unit("tests/browser/test_lab.py::test_a[00_tour.ipynb]") == unit("tests/browser/test_lab.py::test_b") \
        == "tests/browser/test_lab.py"
    assert unit("tests/test_args.py::test_x") != unit("tests/test_tiers.py::test_y")
