"""Running the whole chapter headlessly: every step, a progress bar, a table, HTML and JSON.

``python -m d2l_async report`` calls :func:`run_report`; notebooks and tests can call it too.  A step
that raises does not lose the others: its error and traceback take its place in the table, the HTML and
the JSON (:func:`~d2l_async.report._steps.failed_output`), the remaining steps run, and the result lists
it in :attr:`ReportResult.failed` (the command line then exits with status 1).

The HTML and the JSON are written before the first step (the machine, every step pending) and again after
each step, each file whole or not at all (a temporary file renamed over it): a run stopped by its time
limit, a hang or Ctrl-C leaves every step it finished, and the JSON's ``pending`` names the ones it did not.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ._html import page_html, section_html, write_json, write_text
from ._steps import STEPS, Backends, Step, StepOutput, failed_output
from ._table import Row, format_table, wrap_line
from .._args import flag, instance, sequence

__all__ = ["DEVICES", "ReportResult", "check_device", "run_report"]

#: What ``--device`` accepts.
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class ReportResult:
    """What a report run produced.

    Attributes:
        rows: the results table.
        html_path: the HTML report.
        json_path: the JSON of the numbers, beside it.
        seconds: wall time of the run.
        device: ``"auto"``, ``"cpu"`` or ``"cuda"``.
        quick: whether quick mode was on.
        machine: :func:`d2l_async.devices.describe_machine`.
        failed: the keys of the steps that raised (their tracebacks are in the HTML and the JSON).
    """

    rows: tuple[Row, ...]
    html_path: Path
    json_path: Path
    seconds: float
    device: str
    quick: bool
    machine: str
    failed: tuple[str, ...] = ()

    @property
    def table(self) -> str:
        return format_table(self.rows)


def check_device(device: str) -> str:
    """``device`` if usable here.

    Returns:
        ``device`` unchanged.

    Raises:
        ValueError: not one of :data:`DEVICES`, or ``"cuda"`` on a machine without CUDA.
    """
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}: use one of {', '.join(DEVICES)}")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ValueError("--device cuda: torch.cuda.is_available() is False on this machine; "
                             "use --device cpu (the CPU engine) or --device auto")
    return device


def run_report(
    *, device: str = "auto", quick: bool | None = None, output: str | Path = "build/report.html",
    progress: bool = True, steps: Sequence[Step] = STEPS, stream: Any = None,
) -> ReportResult:
    """Run every step, print the table, write the HTML report and the JSON beside it (before the first step
    and again after each: a run stopped midway leaves the steps it finished).

    Args:
        device: ``"auto"`` (CUDA when present), ``"cpu"`` (the engine only) or ``"cuda"``.
        quick: set quick mode (``D2L_ASYNC_QUICK=1``) for this run; ``None`` keeps the environment's.
        output: the HTML path (``.html``); the JSON goes to the same path with ``.json``.
        progress: show a tqdm progress bar (on stderr).
        steps: the steps to run (default: all nine topics).
        stream: where the table is printed (default ``sys.stdout``).

    Returns:
        The frozen :class:`ReportResult`: the table's rows, the HTML and JSON paths written, the run's seconds, the
        device asked for, whether quick mode was on, the machine line and the keys of the steps that failed.

    Raises:
        ValueError: a bad device or output path.
    """
    check_device(device)
    if quick is not None:
        flag("quick", quick)
    flag("progress", progress)
    instance("output", output, (str, os.PathLike), what="path ending in .html")
    if stream is not None and not callable(getattr(stream, "write", None)):
        raise TypeError(f"stream must be a writable text stream (with .write), got {type(stream).__name__}")
    output = Path(output)
    if output.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"--output must end in .html, got {str(output)!r}")
    steps = sequence("steps", steps, what="report steps (d2l_async.report.STEPS)", empty=False)
    stream = stream if stream is not None else sys.stdout
    old_quick = os.environ.get("D2L_ASYNC_QUICK")
    if quick is not None:
        os.environ["D2L_ASYNC_QUICK"] = "1" if quick else "0"
    try:
        from d2l_async import config
        from d2l_async.devices import describe_machine

        is_quick = config.quick_mode()
        backends = Backends.for_device(device)
        machine = describe_machine()
        t0 = time.perf_counter()
        files = _Files(output, device, is_quick, machine, steps)
        files.write(None, 0.0)  # the machine, before anything can hang (measuring a GPU's sizes included)
        bar = _progress(steps, progress)
        for step in steps:
            bar.set_description(step.key)
            t_step = time.perf_counter()
            try:
                out = step.run(backends)
            except Exception as exc:  # noqa: BLE001 - one step's failure must not lose the others' results
                out = failed_output(step.key, exc)
            files.add(step, out, time.perf_counter() - t_step)
            files.write(backends.sizing(), time.perf_counter() - t0)  # a later hang or time limit keeps this step
            bar.update(1)
        bar.close()
        seconds = time.perf_counter() - t0
    finally:
        if quick is not None:
            if old_quick is None:
                os.environ.pop("D2L_ASYNC_QUICK", None)
            else:
                os.environ["D2L_ASYNC_QUICK"] = old_quick
    outputs = files.outputs
    rows = tuple(r for _, out, _ in outputs for r in out.rows)
    failed = tuple(s.key for s, out, _ in outputs if out.error)
    json_path = files.json_path
    print(format_table(rows), file=stream)
    checks = [(s.key, c) for s, out, _ in outputs for c in out.checks]
    if checks:
        print(f"\nLesson checks ({sum(c.holds is True for _, c in checks)} of {len(checks)} held on this run):", file=stream)
        for key, c in checks:
            print(wrap_line(f"[{key}] {c.text}"), file=stream)
    for s, out, _ in outputs:
        if out.error:
            print(wrap_line(f"\n[{s.key}] FAILED: {out.numbers['error']} (traceback in the HTML and the JSON)"),
                  file=stream)
    print(f"\nwrote {output} and {json_path} ({seconds:.1f} s)", file=stream)
    return ReportResult(rows, output, json_path, seconds, device, is_quick, machine, failed)


class _Files:
    """The report's HTML and JSON, rewritten whole from the steps done so far (each section rendered once)."""

    def __init__(self, output: Path, device: str, quick: bool, machine: str, steps: Sequence[Step]) -> None:
        self.output, self.json_path = output, output.with_suffix(".json")
        self.device, self.quick, self.machine = device, quick, machine
        self.pending = [s.key for s in steps]
        self.outputs: list[tuple[Step, StepOutput, float]] = []
        self.sections: list[str] = []
        output.parent.mkdir(parents=True, exist_ok=True)

    def add(self, step: Step, out: StepOutput, seconds: float) -> None:
        self.outputs.append((step, out, seconds))
        self.pending.remove(step.key)
        self.sections.append(section_html({"title": step.title, "figures": out.figures, "notes": out.notes,
                                           "checks": out.checks, "error": out.error}))

    def write(self, sizing: dict[str, Any] | None, seconds: float) -> None:
        from d2l_async.experiments import BOOK

        rows = tuple(r for _, out, _ in self.outputs for r in out.rows)
        left = f"; not run yet: {', '.join(self.pending)}" if self.pending else ""
        banner = (f"Ran on: {self.machine}. --device {self.device}{', quick mode' if self.quick else ''}; "
                  f"{seconds:.1f} s on {_dt.datetime.now().isoformat(timespec='seconds')}{left}.")
        write_text(self.output, page_html("d2l-async: the asynchronous computation chapter, measured", banner, rows,
                                          tuple(BOOK.values()), self.sections))
        write_json(self.json_path, {
            "machine": self.machine, "device": self.device, "quick": self.quick, "seconds": seconds,
            "complete": not self.pending, "pending": list(self.pending),
            **({"sizing": sizing} if sizing is not None else {}),
            "book": {k: {"value": n.value, "unit": n.unit, "what": n.what, "source": n.source} for k, n in BOOK.items()},
            "experiments": {s.key: {**out.numbers, "step_seconds": dt,
                                    **({"lessons": [c.to_dict() for c in out.checks]} if out.checks else {})}
                            for s, out, dt in self.outputs},
            "table": [dict(zip(("experiment", "book", "ours", "device"), r.cells())) for r in rows],
            "failed": [s.key for s, out, _ in self.outputs if out.error],
        })


class _NoBar:
    def set_description(self, _: str) -> None: ...
    def update(self, _: int) -> None: ...
    def close(self) -> None: ...


def _progress(steps: Sequence[Step], enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=len(steps), unit="experiment", file=sys.stderr, dynamic_ncols=True)
