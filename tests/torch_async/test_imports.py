"""``d2l_async.torch_async`` sits on the engine's floor: it loads neither plotly nor ipywidgets,
and ``import d2l_async`` does not load it (nor torch)."""

from __future__ import annotations

import subprocess
import sys


def _loaded(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(','.join(m for m in "
                          "('torch', 'plotly', 'ipywidgets', 'd2l_async.torch_async') if m in sys.modules))"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_torch_async_loads_no_figure_or_widget_library():
    assert _loaded("import d2l_async.torch_async") == "torch,d2l_async.torch_async"


def test_import_d2l_async_stays_light():
    assert _loaded("import d2l_async") == ""
    assert _loaded("import d2l_async\nd2l_async.asynchronous") == "torch,d2l_async.torch_async"
