"""``scripts/gpu_check.sh``'s control flow, without a GPU (issue 18, findings 1-2).

The script is run with a stub "python" (a shell script) that answers the script's questions the way
a CUDA machine would -- one GPU, no plotly -- and fails the steps a test chooses.  The real Python
still writes the summary (the stub hands ``python -`` on to it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and coreutils' timeout")

STUB = """#!/usr/bin/env bash
# a stand-in for the CUDA machine's python: $STUB_LOG gets one line per call
echo "$*" >> "$STUB_LOG"
case "$1" in
  -)  exec "$REAL_PY" "$@" ;;
  -c) case "$2" in
        *device_count*is_available*) [ "$STUB_TORCH" = 1 ] || exit 1; echo "$STUB_NGPU"; exit 0 ;;
        *"import plotly"*) exit 1 ;;
        *describe_machine*) echo "machine: stub"; exit 0 ;;
      esac ;;
  -m) [ "$2" = pytest ] && { echo "1 failed, 8 passed"; exit "$STUB_PYTEST_RC"; } ;;
  scripts/gpu_numbers.py) echo '{"increments": {"ratio": 3.0}}' > "$3"; exit "$STUB_NUMBERS_RC" ;;
esac
echo "stub: unexpected call $*" >&2
exit 9
"""


def run_check(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, Path, list[str]]:
    stub = tmp_path / "python"
    stub.write_text(STUB)
    stub.chmod(0o755)
    out = tmp_path / "out"
    calls = tmp_path / "calls.log"
    full = {**os.environ, "GPU_PY": str(stub), "OUT": str(out), "STUB_LOG": str(calls), "REAL_PY": sys.executable,
            "STUB_TORCH": "1", "STUB_NGPU": "1", "STUB_PYTEST_RC": "1", "STUB_NUMBERS_RC": "0", **env}
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=full, timeout=120)
    lines = calls.read_text().splitlines() if calls.exists() else []
    return proc, out, lines


def test_a_failing_step_does_not_stop_the_rest(tmp_path):
    proc, out, calls = run_check(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a step failed: the run says so at the end
    status = {s["step"]: s["status"] for s in json.loads((out / "gpu_check.json").read_text())["steps"]}
    assert status == {"env": "PASS", "tests": "FAIL", "numbers": "PASS", "report": "SKIP", "nccl": "SKIP"}
    assert any(c.startswith("scripts/gpu_numbers.py") for c in calls)  # it ran after the failing tests
    summary = json.loads((out / "gpu_check.json").read_text())
    assert summary["numbers"] == {"increments": {"ratio": 3.0}}
    assert "gpu-check: tests: FAIL" in proc.stdout and "plotly" in proc.stdout
    assert "1 failed, 8 passed" in (out / "gpu_check.log").read_text()


def test_only_the_gpu_test_files_are_collected(tmp_path):
    _, _, calls = run_check(tmp_path)
    (pytest_call,) = [c for c in calls if c.startswith("-m pytest")]
    assert " -m gpu " in f" {pytest_call} " and "tests/experiments/test_exp_gpu.py" in pytest_call
    files = [a for a in pytest_call.split() if a.startswith("tests/")]
    assert files and all("gpu" in (ROOT / f).read_text() for f in files), files
    assert "tests/distributed/test_gpu.py" in files and "tests/capture/test_capture.py" in files
    assert not any("widgets" in f or "viz" in f for f in files)  # those import ipywidgets / plotly
    assert not any(a.rstrip("/") == "tests" for a in pytest_call.split())  # never the whole suite


def test_all_steps_pass_exit_zero_and_two_gpus_run_nccl(tmp_path):
    proc, out, calls = run_check(tmp_path, STUB_PYTEST_RC="0", STUB_NGPU="2")
    status = {s["step"]: s["status"] for s in json.loads((out / "gpu_check.json").read_text())["steps"]}
    # the stub has no benchmarks/bench_distributed.py answer: the nccl step fails, and only it
    assert status == {"env": "PASS", "tests": "PASS", "numbers": "PASS", "report": "SKIP", "nccl": "FAIL"}
    assert proc.returncode == 1
    proc, out, _ = run_check(tmp_path, STUB_PYTEST_RC="0")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("torch_ok", ["1", "0"])
def test_without_cuda_one_line_and_exit_zero(tmp_path, torch_ok):
    proc, out, calls = run_check(tmp_path, STUB_TORCH=torch_ok, STUB_NGPU="0")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-check:"), proc.stdout
    assert "CUDA" in lines[0]
    assert not any(c.startswith("-m pytest") for c in calls)  # nothing else ran
    assert not (out / "gpu_check.json").exists()


def test_the_budget_bounds_the_whole_run(tmp_path):
    proc, out, calls = run_check(tmp_path, GPU_CHECK_BUDGET="0")
    status = {s["step"]: s["status"] for s in json.loads((out / "gpu_check.json").read_text())["steps"]}
    assert set(status.values()) == {"SKIP"} and proc.returncode == 0
    assert not any(c.startswith(("-m pytest", "scripts/")) for c in calls)


def test_the_gpu_test_files_collect_without_plotly_and_ipywidgets(tmp_path):
    """The lent GPU machine has neither: the files gpu_check.sh picks must collect without them."""
    for name in ("plotly", "ipywidgets"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('no {name} on the GPU machine')\n")
    files = subprocess.run(["bash", "-c", "grep -rl --include='test_*.py' -E 'mark\\.gpu|^gpu = ' tests | sort"],
                           cwd=ROOT, capture_output=True, text=True, timeout=60).stdout.split()
    script = SCRIPT.read_text()
    assert "grep -rl --include='test_*.py' -E 'mark\\.gpu|^gpu = ' tests" in script  # the same selection
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-o", "addopts=", *files], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "error" not in proc.stdout.lower().split("\n")[-2], proc.stdout[-500:]
