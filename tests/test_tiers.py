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
