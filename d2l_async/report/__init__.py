"""The headless report: every experiment of the chapter, a results table, one HTML file.

``python -m d2l_async report [--device auto|cpu|cuda] [--quick] [--output PATH]`` runs the nine
topics (:data:`STEPS`) with a progress bar, prints a table (experiment, the book's number, ours,
device) and writes a self-contained HTML report (plotly.js embedded once) and a JSON of the
numbers beside it.
"""

from __future__ import annotations

from ._html import render_html, to_jsonable, write_json
from ._run import DEVICES, ReportResult, check_device, run_report
from ._steps import STEPS, Backends, Step, StepOutput, fmt_seconds, useful_sources
from ._table import HEADER, Row, format_table, terminal_width, wrap_line

#: the public names: run the report, read its result, render and save it; the steps, the table's
#: layout and the formatting helpers are importable from here but internal
__all__ = ["ReportResult", "check_device", "render_html", "run_report", "write_json"]
