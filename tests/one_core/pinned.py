"""Run a notebook the way a Binder reader does: one CPU, shared with a busy neighbour.

:func:`run_pinned` executes a notebook with nbclient while this thread's CPU affinity is narrowed to
one CPU, so the kernel it starts (and every thread the kernel starts: engine workers, BLAS) inherits
that one CPU; a busy process started under the same affinity competes for it the whole time (a
``while True`` loop that exits by itself if this process dies, and is killed on every exit path).
A last cell, appended in memory only, reports the kernel's affinity and peak RSS.

Used by the one-core test (``tests/one_core/test_one_core.py``, quick mode, in ``make test``) and
by ``benchmarks/bench_notebooks.py`` (default mode: wall time and peak RSS per notebook).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from d2l_async import lesson

from .rules import Cell, Problem, claim_problems, compares_times, problems

__all__ = ["NotebookRun", "run_pinned", "analyse", "pinned", "busy_neighbour", "NOTEBOOKS"]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))

# Exits on its own once its parent is gone, so a killed test run leaves no spinning process.
_BUSY = ("import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n"
         "    for _ in range(200_000):\n        pass\n")
_PROBE_TAG = "D2L_ASYNC_PROBE "
# The kernel's own peak: VmHWM of its address space.  ru_maxrss is not it on Linux: a process keeps the
# maxrss of the process it was forked from across exec, so a kernel started by a large parent reported
# the parent's size (every notebook after 06 "peaked" at the same 665 MiB).
_PROBE = (
    "import json as _j, os as _o, resource as _r\n"
    "def _hwm():\n"
    "    try:\n"
    "        return int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')).split()[1])\n"
    "    except (OSError, StopIteration, ValueError):\n"
    "        return _r.getrusage(_r.RUSAGE_SELF).ru_maxrss\n"
    f"print({_PROBE_TAG!r} + _j.dumps({{'affinity': sorted(_o.sched_getaffinity(0)), "
    "'maxrss_kb': _hwm(), "
    "'children_maxrss_kb': _r.getrusage(_r.RUSAGE_CHILDREN).ru_maxrss}))"
)


@dataclass(frozen=True)
class NotebookRun:
    """One pinned execution of a notebook.

    Attributes:
        name: the notebook's file name.
        seconds: wall time from starting the kernel to the last cell's end.
        checks: every lesson check its outputs hold, in order.
        error: the first cell error (``""``: none).
        kineto_lines: stderr lines in kineto's progress format (a leak the reader should not see).
        affinity: the CPUs the kernel could use (read inside it).
        peak_rss_bytes: the kernel's peak resident memory.
        children_peak_rss_bytes: the peak of its finished child processes.
        cpu: the CPU it was pinned to; ``busy``: whether a busy process shared it.
    """

    name: str
    seconds: float
    checks: tuple[lesson.Check, ...]
    error: str
    kineto_lines: tuple[str, ...]
    affinity: tuple[int, ...]
    peak_rss_bytes: int
    children_peak_rss_bytes: int
    cpu: int
    busy: bool
    cells: int = field(default=0)
    figures: tuple[dict, ...] = field(default=())  # every plotly figure the notebook drew (output JSON)
    by_cell: tuple[Cell, ...] = field(default=())  # each code cell's checks and printed lines, for the rules
    notebook: dict = field(default_factory=dict, repr=False, compare=False)  # the executed copy (nbformat dict)

    @property
    def unexplained(self) -> tuple[lesson.Check, ...]:
        return tuple(c for c in self.checks if not c.explained)

    @property
    def contradictions(self) -> list[tuple[lesson.Check, lesson.Check]]:
        """Pairs of this notebook's checks that disagree (:func:`d2l_async.lesson.contradictions`)."""
        return lesson.contradictions(self.checks)

    @property
    def undecided_comparisons(self) -> tuple[lesson.Check, ...]:
        """Checks that set two times against each other but were not decided by the spread helper."""
        return tuple(c for c in self.checks if compares_times(c) and not c.decided_by)

    @property
    def word_problems(self) -> list[Problem]:
        """Explanations that contradict the numbers beside them (:mod:`tests.one_core.rules`)."""
        return problems(self.by_cell)

    @property
    def claim_problems(self) -> list[Problem]:
        """Checks that name no declared claim of this notebook, lack a cause, or run past 40 words."""
        return [p for c in self.checks for p in claim_problems(c, Path(self.name).stem)]


@contextlib.contextmanager
def pinned(cpu: int) -> Iterator[None]:
    """Narrow this thread's CPU affinity to ``cpu`` inside the block (children inherit it)."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


@contextlib.contextmanager
def busy_neighbour(enabled: bool = True) -> Iterator[subprocess.Popen | None]:
    """A process spinning on this thread's CPUs for the duration of the block; always killed."""
    if not enabled:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", _BUSY], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _text(out) -> str:
    text = out.get("text", "")
    return "".join(text) if isinstance(text, list) else str(text)


def run_pinned(path: str | os.PathLike, *, quick: bool = True, busy: bool = True, cpu: int | None = None,
               timeout: int = 600) -> NotebookRun:
    """Execute the notebook at ``path`` pinned to one CPU (default: the first this process may use)
    beside a busy process, in quick or default mode; never raises for a failing cell (see ``error``)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(_PROBE))
    cpu = min(os.sched_getaffinity(0)) if cpu is None else cpu
    saved = os.environ.get("D2L_ASYNC_QUICK")
    os.environ["D2L_ASYNC_QUICK"] = "1" if quick else "0"
    error = ""
    t0 = time.perf_counter()
    try:
        with pinned(cpu), busy_neighbour(busy):
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                    resources={"metadata": {"path": str(path.parent)}})
            try:
                client.execute()
            except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
                error = f"{type(exc).__name__}: {str(exc)[-3000:]}"
    finally:
        if saved is None:
            os.environ.pop("D2L_ASYNC_QUICK", None)
        else:
            os.environ["D2L_ASYNC_QUICK"] = saved
    seconds = time.perf_counter() - t0
    probe: dict = {}
    for out in nb.cells[-1].get("outputs", []):
        for line in _text(out).splitlines() if out.get("output_type") == "stream" else ():
            if line.startswith(_PROBE_TAG):
                probe = json.loads(line[len(_PROBE_TAG):])
    nb.cells = nb.cells[:-1]  # the probe cell is ours, not the notebook's
    return analyse(nb, path.name, seconds=seconds, cpu=cpu, busy=busy, error=error,
                   affinity=tuple(probe.get("affinity", ())), peak_rss_bytes=int(probe.get("maxrss_kb", 0)) * 1024,
                   children_peak_rss_bytes=int(probe.get("children_maxrss_kb", 0)) * 1024)


def analyse(nb, name: str, *, seconds: float, cpu: int, busy: bool, affinity: tuple[int, ...], peak_rss_bytes: int,
            children_peak_rss_bytes: int = 0, error: str = "") -> NotebookRun:
    """What an executed notebook ``nb`` (nbformat, outputs in place) shows: its checks, figures, printed lines,
    the first cell error (``error`` when the runner already knows one) and profiler lines on stderr.

    Returns:
        The :class:`NotebookRun`, with the run's own facts (``seconds``, ``cpu``, ...) as given.
    """
    import nbformat

    checks, leaks, figures, by_cell = [], [], [], []
    for cell in nb.cells:
        outputs = cell.get("outputs", []) if cell.cell_type == "code" else []
        found = lesson.checks_in_outputs(outputs, printed=False)  # metadata only: a reader's print is no check
        checks += found
        printed = [line for out in outputs if out.get("output_type") == "stream" and out.get("name") == "stdout"
                   for line in _text(out).splitlines() if lesson.parse_line(line) is None]
        if cell.cell_type == "code":
            by_cell.append(Cell(tuple(found), tuple(printed)))
        for out in outputs:
            fig_json = (out.get("data") or {}).get("application/vnd.plotly.v1+json")
            if fig_json:
                figures.append(json.loads(fig_json) if isinstance(fig_json, str) else dict(fig_json))
            if out.get("output_type") == "error" and not error:
                error = f"{out.get('ename')}: {out.get('evalue')}"
            if out.get("output_type") != "stream":
                continue
            for line in _text(out).splitlines():
                if out.get("name") == "stderr" and (line.startswith("USDT:") or line.startswith("STAGE:")):
                    leaks.append(line)
    executed = json.loads(nbformat.writes(nb))
    return NotebookRun(name, seconds, tuple(checks), error, tuple(leaks), tuple(affinity), int(peak_rss_bytes),
                       int(children_peak_rss_bytes), cpu, busy, len(nb.cells), tuple(figures), tuple(by_cell), executed)
