"""A report survives a failing step, and a CUDA report sizes its GPU steps for a GPU."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from d2l_async.report import Backends, Row, Step, StepOutput, run_report


def _ok(key):
    def run(b: Backends) -> StepOutput:
        return StepOutput((Row(f"{key}: measured", "—", "1 s", "here"),), (), {"value": 1.0})
    return Step(key, key.title(), run)


def _deep_failure():
    raise RuntimeError("no kernel image is available for execution on the device")


def _bad(b: Backends) -> StepOutput:
    _deep_failure()
    raise AssertionError("unreachable")


STEPS = (_ok("first"), Step("bad", "Bad", _bad), _ok("last"))


def test_a_failing_step_is_reported_with_its_traceback_and_the_others_are_kept(tmp_path, capsys):
    pytest.importorskip("plotly")
    out = run_report(device="cpu", output=tmp_path / "r.html", progress=False, steps=STEPS)
    assert out.failed == ("bad",)
    data = json.loads(out.json_path.read_text())
    assert data["failed"] == ["bad"]
    assert data["experiments"]["first"]["value"] == 1.0 and data["experiments"]["last"]["value"] == 1.0
    bad = data["experiments"]["bad"]
    assert bad["error"].startswith("RuntimeError: no kernel image")
    assert "Traceback (most recent call last)" in bad["traceback"] and "_deep_failure" in bad["traceback"]
    page = out.html_path.read_text(encoding="utf-8")
    assert "_deep_failure" in page and "class='error'" in page
    assert page.index("<h2>First</h2>") < page.index("_deep_failure") < page.index("<h2>Last</h2>")
    assert [r.cells()[0] for r in out.rows] == ["first: measured", "bad: FAILED", "last: measured"]
    printed = capsys.readouterr().out
    assert "[bad] FAILED: RuntimeError" in printed and "wrote " in printed


def test_the_command_line_exits_non_zero_when_a_step_failed(tmp_path, monkeypatch):
    pytest.importorskip("plotly")
    import d2l_async.report as report
    from d2l_async.__main__ import main

    real = report.run_report
    monkeypatch.setattr(report, "run_report", lambda **kw: real(**kw, steps=STEPS))
    assert main(["report", "--device", "cpu", "--no-progress", "--output", str(tmp_path / "r.html")]) == 1
    assert (tmp_path / "r.json").exists() and (tmp_path / "r.html").exists()
    monkeypatch.setattr(report, "run_report", lambda **kw: real(**kw, steps=STEPS[:1]))
    assert main(["report", "--device", "cpu", "--no-progress", "--output", str(tmp_path / "r.html")]) == 0


def test_a_keyboard_interrupt_still_stops_the_report(tmp_path):
    def interrupted(b: Backends) -> StepOutput:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_report(device="cpu", output=tmp_path / "r.html", progress=False, steps=(Step("x", "X", interrupted),))


# -- GPU-sized workloads -----------------------------------------------------------------------------------
@pytest.fixture
def one_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


class Called(Exception):
    pass


@pytest.mark.parametrize("quick", ["1", "0"])
@pytest.mark.parametrize("step, experiment, field", [
    ("asynchrony", "run_asynchrony", "asynchrony"), ("barriers", "run_barriers", "barriers"),
    ("blockers", "run_blockers", "blockers"), ("sync_async", "sweep_sync_async", "sweep_numels")])
def test_the_cuda_report_runs_each_gpu_step_at_this_gpus_size(one_gpu, monkeypatch, quick, step, experiment, field):
    """Quick mode's CPU sizes (5 products of 400x400) are a few µs per kernel on a GPU: launch-bound.  The
    report runs each GPU step at the sizes measured on the GPU (here: a simulated H200's numbers), the ones
    the notebooks' CUDA runs get."""
    import torch

    import d2l_async.experiments as E
    from d2l_async.experiments import sizing
    from d2l_async.report import _steps

    from .._gpu_models import H200

    sizes = sizing.size_for_device(H200.times())
    monkeypatch.setattr(sizing, "_MEASURED", {0: sizes})
    monkeypatch.setattr(sizing._gpu_probe, "cuda_device", lambda d: torch.device("cuda", 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "NVIDIA H200")
    monkeypatch.setenv("D2L_ASYNC_QUICK", quick)
    seen = {}

    def record(**kw):
        seen.update(kw)
        raise Called

    monkeypatch.setattr(E, experiment, record)
    if step == "sync_async":  # the book's single run comes first (one element by design): on to the sweep
        monkeypatch.setattr(E, "run_sync_async", lambda **kw: SimpleNamespace(model=None))
    b = Backends.for_device("cuda")
    assert b.one == "cuda" and b.gpu_sized
    with pytest.raises(Called):
        getattr(_steps, step)(b)
    assert seen["backend"] == "cuda"
    if step == "sync_async":
        want = sizes.sweep_numels_quick if quick == "1" else sizes.sweep_numels
        assert seen["numels"] == want and max(want) >= 10**8  # where t2 takes over on an H200
    else:
        assert seen["size"] == getattr(sizes, field) >= 2048, seen
    assert b.sizing() == sizes.to_dict()


def test_the_cpu_report_keeps_the_engines_sizes(one_gpu):
    b = Backends.for_device("cpu")
    assert not b.gpu_sized and b.sizes("barriers") == {}
    with pytest.raises(ValueError, match="known"):
        b.sizes("nope")


# -- a report stopped midway keeps what it measured -------------------------------------------------------
def test_a_report_stopped_midway_leaves_the_steps_it_finished(tmp_path):
    pytest.importorskip("plotly")

    def stop(b: Backends) -> StepOutput:
        raise KeyboardInterrupt  # Ctrl-C, or a time limit's signal turned into an exception

    with pytest.raises(KeyboardInterrupt):
        run_report(device="cpu", output=tmp_path / "r.html", progress=False,
                   steps=(_ok("first"), Step("stop", "Stop", stop), _ok("last")))
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["experiments"]["first"]["value"] == 1.0 and list(data["experiments"]) == ["first"]
    assert data["pending"] == ["stop", "last"] and data["complete"] is False
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<h2>First</h2>" in page and "first: measured" in page and "<h2>Last</h2>" not in page
    assert not list(tmp_path.glob("*.tmp"))


def test_a_report_killed_by_its_time_limit_leaves_valid_json(tmp_path):
    """The report in its own process, its second step never ending, killed as ``timeout`` kills it."""
    pytest.importorskip("plotly")
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    out = tmp_path / "r.html"
    code = f"""
import threading
from d2l_async.report import Row, Step, StepOutput, run_report
first = Step("first", "First", lambda b: StepOutput((Row("first: measured", "-", "1 s", "here"),), (), {{"value": 1.0}}))
hang = Step("hang", "Hang", lambda b: threading.Event().wait())
run_report(device="cpu", output={str(out)!r}, progress=False, steps=(first, hang))
"""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=root, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(root)})
    try:
        deadline = time.monotonic() + 240
        data = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                data = json.loads(out.with_suffix(".json").read_text())
            except (OSError, ValueError):
                data = None
            if data and "first" in data["experiments"]:
                break
            try:
                proc.wait(timeout=0.2)  # the polling pace; returns at once if the report ended
            except subprocess.TimeoutExpired:
                pass
        assert data and "first" in data["experiments"], (proc.poll(), proc.stderr.read() if proc.poll() else "")
    finally:
        proc.kill()
        proc.wait(timeout=60)
    data = json.loads(out.with_suffix(".json").read_text())  # valid after the kill
    assert data["experiments"]["first"]["value"] == 1.0 and data["pending"] == ["hang"]
    assert "first: measured" in out.read_text(encoding="utf-8")
