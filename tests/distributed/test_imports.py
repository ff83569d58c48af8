"""`import d2l_async.distributed` is cheap: torch is imported in the ranks (and when an experiment runs)."""

from __future__ import annotations

import subprocess
import sys

import d2l_async.distributed as dd


def test_import_loads_no_torch_plotly_or_ipywidgets():
    code = ("import sys, d2l_async.distributed\n"
            "print(','.join(m for m in ('torch', 'plotly', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""

