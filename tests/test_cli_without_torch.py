"""``python -m d2l_async`` run by a Python that has no torch (the system's, not the venv's) says what to
run: ``make lab`` once, then ``source .venv/bin/activate``, with a non-zero exit status and no traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from d2l_async.__main__ import no_torch_message, torch_importable

ROOT = Path(__file__).parents[1]

# Runs ``python -m d2l_async ARGS`` in a Python whose import system refuses torch, as one without it does.
WITHOUT_TORCH = """
import runpy, sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoTorch())
sys.argv = ["d2l_async", *sys.argv[1:]]
runpy.run_module("d2l_async", run_name="__main__", alter_sys=True)
"""


def _run(python: list[str], args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*python, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _says_what_to_run(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "make lab" in proc.stderr, proc.stderr
    lines = [line.strip() for line in proc.stderr.splitlines()]
    assert "source .venv/bin/activate" in lines, proc.stderr
    assert "python -m d2l_async report" in lines, proc.stderr


@pytest.mark.parametrize("args", [["report", "--quick"], []], ids=["report", "no command"])
def test_a_python_without_torch_is_told_to_make_lab_and_activate_the_venv(args, tmp_path):
    proc = _run([sys.executable, "-c", WITHOUT_TORCH], args, tmp_path)
    _says_what_to_run(proc)
    assert not (tmp_path / "build").exists(), "no report may be started without torch"


def test_the_system_python_without_torch_is_told_the_same(tmp_path):
    system = shutil.which("python3", path="/usr/bin:/bin")
    if not system:
        pytest.skip("no /usr/bin/python3 on this machine")
    if subprocess.run([system, "-c", "import torch"], capture_output=True, timeout=120).returncode == 0:
        pytest.skip(f"{system} has torch: it is not a Python without torch")
    proc = _run([system, "-m", "d2l_async"], ["report"], tmp_path)
    _says_what_to_run(proc)
    assert system in proc.stderr, "the message names the Python that lacks torch"


def test_help_still_works_without_torch(tmp_path):
    proc = _run([sys.executable, "-c", WITHOUT_TORCH], ["--help"], tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: "), proc.stdout[:200] + proc.stderr[-500:]


def test_this_python_has_torch_and_the_message_names_the_python():
    assert torch_importable()
    assert "/opt/py/bin/python3" in no_torch_message("/opt/py/bin/python3")
