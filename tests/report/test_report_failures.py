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
@pytest.mark.parametrize("step, experiment", [("asynchrony", "run_asynchrony"), ("barriers", "run_barriers"),
                                              ("blockers", "run_blockers"), ("sync_async", "sweep_sync_async")])
def test_the_cuda_report_runs_each_gpu_step_at_a_gpus_size(one_gpu, monkeypatch, quick, step, experiment):
    """Quick mode's CPU sizes (5 products of 400x400) are a few µs per kernel on a GPU: launch-bound."""
    import d2l_async.experiments as E
    from d2l_async.report import _steps

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
        assert max(seen["numels"]) >= 10**8  # where t2 takes over from the launch and the round trip
    else:
        assert seen["size"] >= 2048, seen


def test_the_cpu_report_keeps_the_engines_sizes(one_gpu):
    b = Backends.for_device("cpu")
    assert not b.gpu_sized and b.sizes("barriers") == {}
    with pytest.raises(ValueError, match="known"):
        b.sizes("nope")
