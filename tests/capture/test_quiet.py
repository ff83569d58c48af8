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
