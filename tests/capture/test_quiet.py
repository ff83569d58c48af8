"""The profiler's progress lines stay out of the reader's stderr; everything else passes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from d2l_async.capture._quiet import is_kineto_progress

USDT = "USDT:2026-12-01 00:13:27 9234:9234 SyncActivityProfilerHandler.cpp:52] profiler_start"
STAGE = "STAGE:2026-12-01 00:13:40 9512:9512 SyncActivityProfilerHandler.cpp:60] Completed Stage: Collection"


@pytest.mark.parametrize("line, dropped", [
    (USDT, True), (STAGE, True),
    ("ERROR:2026-12-01 00:13:27 1:1 CuptiActivityApi.cpp:1] CUPTI failed", False),
    ("USDT: my own message", False), ("Traceback (most recent call last):", False), ("", False),
])
def test_only_kinetos_progress_lines_are_dropped(line, dropped):
    assert is_kineto_progress(line) is dropped


def test_capture_writes_no_progress_lines_but_keeps_other_stderr():
    code = (
        "import os, torch\n"
        "from d2l_async.capture import capture\n"
        "from d2l_async.capture._quiet import quiet_kineto\n"
        "capture(lambda: torch.ones(3) + 1, device='cpu')\n"
        "capture(lambda: torch.ones(3) + 1, device='cpu')\n"
        f"with quiet_kineto():\n    os.write(2, b'{USDT}\\nkept line\\n')\n"
        "print('done')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done"
    assert "USDT:" not in out.stderr and "profiler_start" not in out.stderr, out.stderr
    assert "kept line" in out.stderr


def test_the_profilers_cycle_warning_of_torch_2_11_does_not_reach_the_reader():
    """torch 2.11 warns "Profiler clears events at the end of each cycle" at the first profile of a process
    (a red box under the notebook cell); a capture uses no cycles, so it must not show.  Emulated here as
    torch 2.11 gives it: through torch's own ``_warn_once``, from ``torch.profiler.profiler``'s prepare_trace."""
    code = (
        "import torch, torch.profiler.profiler as P\n"
        "src = '''\n"
        "def prepare_trace(self, _old=_KinetoProfile.prepare_trace):\n"
        "    _warn_once('Warning: Profiler clears events at the end of each cycle.Only events from the current '\n"
        "               'cycle will be reported.To keep events across cycles, set acc_events=True.')\n"
        "    warn('another profiler warning', UserWarning)\n"
        "    return _old(self)\n"
        "'''\n"
        "exec(compile(src, P.__file__, 'exec'), vars(P))\n"
        "P._KinetoProfile.prepare_trace = P.prepare_trace\n"
        "from d2l_async.capture import capture\n"
        "capture(lambda: torch.ones(3) + 1, device='cpu')\n"
        "capture(lambda: torch.ones(3) + 1, device='cpu')\n"
        "print('done')\n"
    )
    out = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done"
    assert "clears events" not in out.stderr, out.stderr
    assert out.stderr.count("another profiler warning") == 2, out.stderr  # other warnings still reach the reader
