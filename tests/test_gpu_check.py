"""``scripts/gpu_check.sh``'s control flow, without a GPU (findings 1-2).

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
    assert status == {"env": "PASS", "tests": "FAIL", "numbers": "PASS", "report": "SKIP", "nccl_tests": "FAIL",
                      "nccl": "SKIP"}
    assert any(c.startswith("scripts/gpu_numbers.py") for c in calls)
    assert [c.split()[1] for c in calls if c.startswith("-m pytest")] == ["pytest", "pytest"]  # both ran
    summary = json.loads((out / "gpu_check.json").read_text())
    assert summary["numbers"] == {"increments": {"ratio": 3.0}}
    assert "gpu-check: tests: FAIL" in proc.stdout and "plotly" in proc.stdout
    assert "1 failed, 8 passed" in (out / "gpu_check.log").read_text()


def test_only_the_gpu_test_files_are_collected(tmp_path):
    _, _, calls = run_check(tmp_path)
    pytest_call, nccl_call = [c for c in calls if c.startswith("-m pytest")]
    assert " -m gpu " in f" {pytest_call} " and "tests/experiments/test_exp_gpu.py" in pytest_call
    files = [a for a in pytest_call.split() if a.startswith("tests/")]
    assert files and all("gpu" in (ROOT / f).read_text() for f in files), files
    assert "tests/capture/test_capture.py" in files
    assert not any("widgets" in f or "viz" in f for f in files)  # those import ipywidgets / plotly
    assert not any(a.rstrip("/") == "tests" for a in pytest_call.split())  # never the whole suite
    # NCCL's test file (its launches may wait minutes for ranks) runs alone, after everything else
    assert "tests/distributed/test_gpu.py" not in files
    assert [a for a in nccl_call.split() if a.startswith("tests/")] == ["tests/distributed/test_gpu.py"]
    numbers = next(i for i, c in enumerate(calls) if c.startswith("scripts/gpu_numbers.py"))
    assert calls.index(nccl_call) > calls.index(pytest_call) > numbers  # the numbers first, NCCL last


def test_all_steps_pass_exit_zero_and_two_gpus_run_nccl(tmp_path):
    proc, out, calls = run_check(tmp_path, STUB_PYTEST_RC="0", STUB_NGPU="2")
    status = {s["step"]: s["status"] for s in json.loads((out / "gpu_check.json").read_text())["steps"]}
    # the stub has no benchmarks/bench_distributed.py answer: the nccl step fails, and only it
    assert status == {"env": "PASS", "tests": "PASS", "numbers": "PASS", "report": "SKIP", "nccl_tests": "PASS",
                      "nccl": "FAIL"}
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


# -- a dry run: the real script, the real steps, a Python that claims a GPU ----------------------------------
FAKE_CUDA = '''"""sitecustomize of a Python that claims one GPU: torch.cuda says an H200 is there; every real CUDA
call raises (this torch has no CUDA).  Installed when torch is first imported, in every process."""
import importlib.abc
import importlib.util
import sys


def _no_cuda(name):
    def call(*args, **kwargs):
        raise RuntimeError(f"dry run: this Python only claims a GPU; torch.cuda.{name} cannot run")
    return call  # one function per name: torch._dynamo refuses one object under two names


def _fake(torch):
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_name = lambda *a, **k: "NVIDIA H200 (fake: dry run)"
    for name in ("_lazy_init", "init", "synchronize", "get_device_properties", "set_device", "Stream", "Event",
                 "_sleep", "get_sync_debug_mode", "set_sync_debug_mode", "mem_get_info"):
        setattr(torch.cuda, name, _no_cuda(name))


class _PatchTorch(importlib.abc.MetaPathFinder):
    # stays on sys.meta_path: a mere importlib.util.find_spec("torch") (python -m d2l_async asks whether torch
    # is there before importing it) must not use up the patch before the import itself
    looking = False

    def find_spec(self, name, path, target=None):
        if name != "torch" or self.looking or "torch" in sys.modules:
            return None
        self.looking = True
        try:
            spec = importlib.util.find_spec("torch")
        finally:
            self.looking = False
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _fake(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchTorch())
'''


def fake_gpu_python(tmp_path: Path) -> Path:
    site = tmp_path / "fake_cuda"
    site.mkdir()
    (site / "sitecustomize.py").write_text(FAKE_CUDA)
    py = tmp_path / "python"
    py.write_text(f'#!/usr/bin/env bash\nexport PYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
                  f'exec "{sys.executable}" "$@"\n')
    py.chmod(0o755)
    return py


def test_the_fake_gpu_python_claims_a_gpu_and_refuses_cuda_calls(tmp_path):
    py = fake_gpu_python(tmp_path)
    code = ("import torch\nprint(torch.cuda.is_available(), torch.cuda.device_count())\n"
            "try:\n    torch.ones(1, device='cuda')\nexcept Exception as e:\n    print(type(e).__name__)\n")
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "1", "RuntimeError"], out.stdout + out.stderr


def test_the_fake_gpu_python_still_claims_a_gpu_after_torch_was_looked_for(tmp_path):
    py = fake_gpu_python(tmp_path)
    code = ("import importlib.util\nassert importlib.util.find_spec('torch') is not None\nimport torch\n"
            "print(torch.cuda.is_available())\n")
    out = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True"], out.stdout + out.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_dry_run_beside_two_busy_processes_stays_in_budget_and_brings_the_numbers_back(tmp_path):
    """With a Python that claims a GPU, every step really runs (and fails at its first CUDA call, or times
    out), beside two processes that keep two CPUs busy: the run ends within its budget and still writes
    gpu_check.json and gpu_numbers.json."""
    import time

    budget = int(os.environ.get("D2L_GPU_CHECK_DRY_BUDGET", "150"))
    py = fake_gpu_python(tmp_path)
    out = tmp_path / "out"
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(2)]
    try:
        t0 = time.monotonic()
        proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=budget + 120,
                              env={**os.environ, "GPU_PY": str(py), "OUT": str(out), "GPU_CHECK_BUDGET": str(budget)})
        seconds = time.monotonic() - t0
    finally:
        for p in busy:
            p.kill()
            p.wait(timeout=30)
    assert seconds <= budget + 10, (seconds, proc.stdout)  # the kill grace of one step at most
    assert proc.returncode == 1, proc.stdout + proc.stderr  # every CUDA step failed: it says so
    summary = json.loads((out / "gpu_check.json").read_text())
    numbers = json.loads((out / "gpu_numbers.json").read_text())
    assert summary["budget"] == budget and summary["numbers"] == numbers
    status = {s["step"]: s["status"] for s in summary["steps"]}
    assert status["env"] == "FAIL" and status["numbers"] in ("FAIL", "TIMEOUT"), status
    assert numbers["gpus"] == ["NVIDIA H200 (fake: dry run)"]
    measured = [k for k in ("kineto_tables", "sizing", "increments", "launch_queue_cap", "capture_queue") if k in numbers]
    assert measured == ["kineto_tables", "sizing", "increments", "launch_queue_cap", "capture_queue"], numbers.keys()
    assert all("dry run" in numbers[k]["error"] or "CUDA" in numbers[k]["error"] for k in measured)
    assert "gpu-check:" in proc.stdout.splitlines()[-1]


# -- gpu_numbers.py: every measurement's numbers kept the moment it ends --------------------------------------
def _gpu_numbers():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_numbers", ROOT / "scripts" / "gpu_numbers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_numbers_writes_its_file_after_every_measurement(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "NVIDIA H200")
    mod = _gpu_numbers()
    out = tmp_path / "numbers" / "gpu_numbers.json"
    on_disk = []

    def first():
        on_disk.append(json.loads(out.read_text()))  # the machine is written before anything can hang
        return {"value": 1}

    def second():
        on_disk.append(json.loads(out.read_text()))
        raise RuntimeError("the GPU fell off the bus")

    def third():
        on_disk.append(json.loads(out.read_text()))
        return {"value": 3}

    monkeypatch.setattr(mod, "MEASUREMENTS", {"first": first, "second": second, "third": third})
    assert mod.main(["--out", str(out)]) == 1
    before_first, before_second, before_third = on_disk
    assert before_first["gpus"] == ["NVIDIA H200"] and before_first["pending"] == ["first", "second", "third"]
    assert before_second["first"]["value"] == 1 and before_second["pending"] == ["second", "third"]
    assert before_third["second"]["error"] == "RuntimeError: the GPU fell off the bus"
    final = json.loads(out.read_text())
    assert final["third"]["value"] == 3 and final["pending"] == []
    assert not list(out.parent.glob("*.tmp"))


def test_gpu_numbers_runs_nccl_last_with_a_short_launch_limit():
    mod = _gpu_numbers()
    assert list(mod.MEASUREMENTS)[-1] == "nccl_all_reduce"
    assert mod.NCCL_LAUNCH_S <= 60
