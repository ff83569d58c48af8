"""The pipeline's lower layers load none of the heavy libraries of the layers above them."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "plotly", "ipywidgets")

CASES = {
    "d2l_async": HEAVY,
    "d2l_async.config": HEAVY,
    "d2l_async.trace": HEAVY,
    "d2l_async.analysis": HEAVY,
    "d2l_async.engine": ("plotly", "ipywidgets"),
    "d2l_async.experiments": ("plotly", "ipywidgets"),
    "d2l_async.viz": ("ipywidgets", "torch"),
}


@pytest.mark.parametrize("module,forbidden", CASES.items(), ids=list(CASES))
def test_import_does_not_load(module, forbidden):
    code = (
        f"import sys, {module}\n"
        f"bad = [m for m in {forbidden!r} if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"import {module} loaded {out.stdout.strip()}"

