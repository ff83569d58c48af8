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


def test_torch_async_uses_only_the_engines_public_names():
    """It builds on the engine through ``d2l_async.engine.core`` (the declared subclass hooks) and
    ``d2l_async.engine``: no ``engine._private`` module, and no private scheduler method called."""
    import ast
    from pathlib import Path

    import d2l_async.engine.core as core
    import d2l_async.torch_async as ta

    bad = []
    for path in sorted(Path(ta.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and "engine" in node.module:
                if node.module.split(".")[-1].startswith("_") or any(a.name.startswith("_") for a in node.names):
                    bad.append(f"{path.name}:{node.lineno} from {'.' * node.level}{node.module} import ...")
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Scheduler":
                bad.append(f"{path.name}:{node.lineno} Scheduler.{node.attr}")  # a call past an override
    assert bad == []
    for hook in ("submit", "queue_ready", "wait_op", "wait_idle", "mark_raised", "has_pending", "set_observers",
                 "device_record"):
        assert getattr(core.Scheduler, hook).__doc__, hook  # each declared hook documents its contract
