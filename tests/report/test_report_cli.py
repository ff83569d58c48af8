from __future__ import annotations

import json
import subprocess
import sys

import pytest

from d2l_async.__main__ import build_parser, main
from d2l_async.report import STEPS, Backends, Row, Step, StepOutput, check_device, run_report


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_unknown_device_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["report", "--device", "tpu"])
    assert exc.value.code == 2
    assert "invalid choice: 'tpu'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="auto, cpu, cuda"):
        check_device("tpu")


@pytest.mark.skipif(_cuda(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["report", "--device", "cuda"])
    assert exc.value.code == 2
    assert "torch.cuda.is_available() is False" in capsys.readouterr().err


def test_bad_output_and_no_command(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["report", "--output", str(tmp_path / "r.txt")])
    assert ".html" in capsys.readouterr().err
    assert main([]) == 2


def test_parser_defaults():
    args = build_parser().parse_args(["report"])
    assert (args.device, args.quick, args.output) == ("auto", False, "build/report.html")


def test_run_report_with_a_fake_step_restores_quick_mode(tmp_path, monkeypatch, capsys):
    import plotly.graph_objects as go

    monkeypatch.delenv("D2L_ASYNC_QUICK", raising=False)
    seen = []

    def fake(b: Backends) -> StepOutput:
        from d2l_async import config

        seen.append((b, config.quick_mode()))
        return StepOutput((Row("fake", "1 s", "2 s", "here"),), (("fig", go.Figure()),), {"x": float("nan")})

    out = run_report(device="cpu", quick=True, output=tmp_path / "r.html", progress=False,
                     steps=(Step("fake", "Fake", fake),))
    assert seen == [(Backends("engine", "engine", "cpu"), True)]
    import os

    assert "D2L_ASYNC_QUICK" not in os.environ
    data = json.loads(out.json_path.read_text())
    assert data["experiments"]["fake"]["x"] is None and data["quick"] is True
    assert "fake" in capsys.readouterr().out


def test_full_quick_report_from_the_command_line(tmp_path):
    """The real thing, as a reader runs it: every experiment, table on stdout, HTML and JSON."""
    out = tmp_path / "rep" / "report.html"
    import os

    env = {**os.environ, "COLUMNS": "80"}  # a reader's terminal: the console output must fit it
    proc = subprocess.run([sys.executable, "-m", "d2l_async", "report", "--quick", "--device", "cpu",
                           "--output", str(out), "--no-progress"], capture_output=True, text=True, timeout=300,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if not line.startswith("wrote ")]
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    words = proc.stdout.split()
    for word in ("experiment", "(MXNet,", "machine)", "(measured", "device", "3.16", "0.93"):
        assert word in words, word
    table = json.loads(out.with_suffix(".json").read_text())["table"]
    assert any("3.16 s vs 0.93 s" in row["book"] for row in table)  # the book's numbers, in the book's column
    page = out.read_text(encoding="utf-8")
    assert page.count("Plotly.newPlot") >= len(STEPS)
    assert "<script src=" not in page
    data = json.loads(out.with_suffix(".json").read_text())
    assert set(data["experiments"]) == {s.key for s in STEPS}
    assert data["quick"] is True and data["book"]["sync_async.sync"]["value"] == 3.16
    devices = {row["device"] for row in data["table"]}
    # no CPU number called a GPU one ("no GPU", as machine().describe() says, is not a claim of one)
    import re

    assert not any("GPU" in re.sub(r"\bno GPU\b|not (a )?GPUs?\b", "", d) and "shipped trace" not in d
                   for d in devices), devices
