"""Layering: the engine core is standard library only; the engine never loads plotly or ipywidgets."""

from __future__ import annotations

import subprocess
import sys

import d2l_async.engine as engine


def loaded_after(statement: str) -> set[str]:
    code = (f"import sys\n{statement}\n"
            "print(','.join(m for m in ('torch', 'numpy', 'plotly', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(filter(None, out.stdout.strip().split(",")))


def test_core_uses_only_the_standard_library():
    loaded = loaded_after("import d2l_async.engine._scheduler, d2l_async.engine._deps, d2l_async.engine._op, "
                          "d2l_async.engine._waits, d2l_async.engine._shutdown, d2l_async.engine._guard, "
                          "d2l_async.engine._worker, d2l_async.engine._shield, d2l_async.engine._completion")
    assert loaded == set(), f"the engine core loaded {loaded}"


def test_engine_loads_neither_plotly_nor_ipywidgets():
    loaded = loaded_after("import d2l_async.engine as e\nimport torch\n"
                          "with e.ThreadedEngine() as eng:\n    (eng.array([1.0]) + 1).item()\n    eng.trace()")
    assert "plotly" not in loaded and "ipywidgets" not in loaded

