"""The trace and analysis packages load no heavy library and export what they say."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "plotly", "ipywidgets")


@pytest.mark.parametrize("code", [
    "import d2l_async.trace",
    "import d2l_async.analysis",
    "import d2l_async.data; d2l_async.data.load_sample('a100_simple_add')",
    "import d2l_async.analysis as a, d2l_async.data as d; a.queue_length_summary(d.load_sample('a100_alexnet'))",
    "import d2l_async.capture",  # torch loads when a capture starts, not on import
])
def test_no_heavy_imports(code):
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"{code!r} loaded {out.stdout.strip()}"



def test_trace_keeps_the_model_names():
    import d2l_async.trace as t

    for name in ["BACKEND_KINDS", "COLUMNS", "Event", "Kind", "Lane", "LaneRole", "Trace", "TraceError"]:
        assert name in t.__all__
