"""The report shows each step's lesson checks: after the table, in the HTML and in the JSON."""

from __future__ import annotations

import json

import plotly.graph_objects as go

from d2l_async import lesson
from d2l_async.report import Backends, Row, Step, StepOutput, run_report


def test_checks_are_printed_rendered_and_saved(tmp_path, capsys):
    held = lesson.check("the queue stays bounded", True, shown="4 ≤ 4")
    failed = lesson.check("the cost grows", False, shown="×1.03", otherwise="one usable CPU <busy>")

    def step(b: Backends) -> StepOutput:
        return StepOutput((Row("x", "—", "1 s", "here"),), (("fig", go.Figure()),), {"n": 1}, checks=(held, failed))

    out = run_report(device="cpu", quick=True, output=tmp_path / "r.html", progress=False,
                     steps=(Step("demo", "Demo", step),))
    text = capsys.readouterr().out
    assert "Lesson checks (1 of 2 held on this run):" in text
    assert "[demo] ✔ the queue stays bounded: 4 ≤ 4" in text
    assert "[demo] ✘ the cost grows: ×1.03 — Why: one usable CPU <busy>" in text
    page = out.html_path.read_text(encoding="utf-8")
    assert "the queue stays bounded" in page and "one usable CPU &lt;busy&gt;" in page  # escaped
    lessons = json.loads(out.json_path.read_text())["experiments"]["demo"]["lessons"]
    assert [c["holds"] for c in lessons] == [True, False] and lessons[1]["otherwise"] == "one usable CPU <busy>"


def test_a_step_without_checks_prints_no_lesson_section(tmp_path, capsys):
    def step(b: Backends) -> StepOutput:
        return StepOutput((Row("x", "—", "1 s", "here"),), ())

    out = run_report(device="cpu", quick=True, output=tmp_path / "r.html", progress=False,
                     steps=(Step("plain", "Plain", step),))
    assert "Lesson checks" not in capsys.readouterr().out
    assert "lessons" not in json.loads(out.json_path.read_text())["experiments"]["plain"]
