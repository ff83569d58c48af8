"""Every benchmark ``make benchmarks`` runs still runs: a job that crashes fails here, not silently
in ``benchmarks/results/*.json`` (``benchmarks/run_all.py``).

Each script must start (``--help``: its imports and arguments); the trace benchmark, whose jobs run
in child processes that record an error instead of stopping, runs every job once in its smoke mode
(a small sample, a ~1 MB generated file) and must report each one's numbers.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
BENCHMARKS = ROOT / "benchmarks"


def run_all():
    spec = importlib.util.spec_from_file_location("run_all", BENCHMARKS / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def python(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.process
@pytest.mark.parametrize("script", [p.name for p in run_all().scripts()])
def test_every_benchmark_script_starts(script):
    p = python(str(BENCHMARKS / script), "--help")
    assert p.returncode == 0, p.stderr[-2000:]


@pytest.mark.process
def test_the_trace_benchmark_runs_every_job(tmp_path):
    out = tmp_path / "trace.json"
    p = python(str(BENCHMARKS / "bench_trace.py"), "--smoke", "--out", str(out))
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    r = json.loads(out.read_text())
    assert r["errors"] == {}
    events = r["a100"]["ours"]["runs"][0]["events"]
    assert events > 0
    for key in ("large", "large_rocm"):
        assert r[key]["ours"]["runs"][0]["events"] > events  # the generated file repeats the sample
    decoded = {job: v.get("events") for job, v in r["json"].items() if "skipped" not in v}
    assert set(decoded) >= {"json", "msgspec", "msgspec_typed", "reader_columns"}
    assert len(set(decoded.values())) == 1  # every decoder read every event of the file
    if importlib.util.find_spec("hta") is not None:
        assert r["a100"]["hta"]["runs"][0]["max_queue"] == r["a100"]["ours"]["runs"][0]["max_queue"]
