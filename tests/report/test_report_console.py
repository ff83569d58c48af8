"""The report's console output fits the terminal (with COLUMNS=80, 48 of 75 lines ran past
160 characters, the longest 894)."""

from __future__ import annotations

import io

import pytest

from d2l_async.lesson import Check
from d2l_async.report import Row, Step, StepOutput, format_table, run_report, terminal_width, wrap_line

LONG = ("the pipeline model predicts the asynchronous run from the synchronous one within its spread "
        "because frontend and worker overlap " * 4).strip()


def _rows():
    return [Row("sync vs async, 10,000 × y = x + 1 " * 2, "3.16 s vs 0.93 s (3.4×)",
                "1.2 s vs 0.3 s " * 5, "CPU engine, 1 virtual device (threads on a CPU) " * 2)]


@pytest.mark.parametrize("columns", [60, 80, 120, 200])
def test_table_lines_fit_the_terminal(columns, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert terminal_width() == columns
    lines = format_table(_rows()).splitlines()
    assert max(map(len, lines)) <= columns
    from collections import Counter

    printed = Counter(format_table(_rows()).split())
    wanted = Counter(w for cell in _rows()[0].cells() for w in cell.split())
    assert not wanted - printed  # every word is still there: wrapped, not cut


def test_wide_terminal_keeps_one_line_per_row():
    assert len(format_table([Row("a", "b", "c", "d")], total=200).splitlines()) == 3


def test_wrap_line_indents_and_fits():
    text = wrap_line("[sync] ✘ " + LONG, total=80)
    lines = text.splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 80
    assert lines[0].startswith("  [sync]") and all(line.startswith("      ") for line in lines[1:])
    assert " ".join(text.split()) == " ".join(("[sync] ✘ " + LONG).split())


def test_too_narrow_total_is_a_clear_error():
    with pytest.raises(ValueError, match="total"):
        format_table(_rows(), total=5)


def test_run_report_console_fits_columns(tmp_path, monkeypatch):
    import plotly.graph_objects as go

    monkeypatch.setenv("COLUMNS", "80")

    def fake(b) -> StepOutput:
        return StepOutput(tuple(_rows()), (("fig", go.Figure()),), {}, checks=(Check("a long claim", False, LONG, LONG),))

    out = io.StringIO()
    run_report(device="cpu", quick=True, output=tmp_path / "r.html", progress=False,
               steps=(Step("fake", "Fake", fake),), stream=out)
    lines = [line for line in out.getvalue().splitlines() if not line.startswith("wrote ")]
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    assert "Why:" in out.getvalue()
