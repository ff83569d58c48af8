"""Each notebook executed once per ``make test``, by nbval, on one CPU beside a busy process; the run is kept.

``make test`` runs ``pytest --nbval-lax notebooks tests``: nbval turns every code cell of every notebook into
a test item (a failing cell is reported as ``notebooks/05_sync_vs_async.ipynb::Cell 7``), executed in one
kernel per notebook, in order.  This plugin (loaded with ``-p tests.notebook_run``) makes that run the way a
Binder reader gets it, and keeps it for the tests that read it instead of executing the notebook again:

* before a notebook's kernel starts, this process's CPU affinity is narrowed to one CPU and a busy process
  is started on it: the kernel and every thread it starts (engine workers, BLAS, ranks) inherit that CPU;
* after the notebook's last cell, before its kernel stops, the kernel's affinity and peak resident memory
  are read from ``/proc``, and the notebook is written with every cell's outputs (what nbval received) to
  ``build/executed/<name>.ipynb``, its run in the metadata (``d2l_async_run``: seconds, CPU, affinity,
  peak memory, the cells that failed, and the machine line and date read in this process while pinned: the
  site's footer for a page built from this run);
* a display routed into an ``ipywidgets.Output`` (a dashboard's animation view) reaches nbval as a plain cell
  output; it is kept with ``metadata["d2l_async_output_widget"] = True``, so a reader of the run (the site)
  can tell it from the cell's own outputs (a front end shows it inside the widget, never in the cell);
* then the busy process is stopped and the affinity restored.

The lesson rules, the figure rules and the site build read ``build/executed``
(:func:`executed`).  Under pytest-xdist (``make test`` on two CPUs or more) the notebooks and the tests that read
their runs are one unit of work, run in that order by one worker (:func:`pytest_xdist_make_scheduler`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = ROOT / "build" / "executed"
RUN_KEY = "d2l_async_run"
#: Marks a stored output that the kernel sent into an ``ipywidgets.Output`` (a front end draws it inside that
#: widget, not in the cell).
IN_OUTPUT_WIDGET = "d2l_async_output_widget"

# Exits on its own once its parent is gone, so a killed test run leaves no spinning process.
_BUSY = ("import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n"
         "    for _ in range(200_000):\n        pass\n")

_runs: dict[str, dict[str, Any]] = {}


def _is_cell(item: Any) -> bool:
    return type(item).__name__ == "IPyNbCell" and type(item.parent).__name__ == "IPyNbFile"


def _kernel_pid(nbfile: Any) -> int | None:
    km = getattr(getattr(nbfile, "kernel", None), "km", None)
    provisioner = getattr(km, "provisioner", None)
    pid = getattr(provisioner, "pid", None) or getattr(getattr(provisioner, "process", None), "pid", None)
    return int(pid) if pid else None


def _peak_rss_bytes(pid: int | None) -> int:
    """The process's peak resident set (``VmHWM``), children not included; 0 when unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, TypeError):
        pass
    return 0


#: Test folders that read the kept runs: under pytest-xdist they run after the notebooks, in the same worker.
KEPT_RUN_READERS = ("tests/one_core/", "tests/site/")
KEPT_RUNS = "the notebooks and the tests that read their runs"
#: Work units sent first (the longest), so that the two workers end together.
FIRST = (KEPT_RUNS, "tests/browser/test_lab.py", "tests/hub/test_class.py")


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to under pytest-xdist: its file, or :data:`KEPT_RUNS`."""
    path = nodeid.split("::")[0]
    return KEPT_RUNS if path.startswith(("notebooks/", *KEPT_RUN_READERS)) else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    """``make test`` on two CPUs or more (``-n 2``): each unit of :func:`work_unit` goes whole to one worker,
    the units in collection order (see :func:`pytest_collection_modifyitems`).

    xdist's own ``--dist loadgroup`` would do this with marks, but with pytest 9 it leaves every test a unit of
    its own (it renames ``item._nodeid``, which pytest 9 no longer reads): a notebook's cells would run in two
    kernels.  Its ``LoadScopeScheduling`` is made to be subclassed this way (``LoadFileScheduling`` is one)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: Any, items: list) -> None:
    """In a pytest-xdist worker, where the tests are collected: the longest units of work first (the same
    order in every worker, as xdist requires)."""
    if not hasattr(config, "workerinput"):
        return
    rank = {unit: n for n, unit in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(work_unit(item.nodeid), len(rank)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: Any) -> None:
    """Before a notebook's first cell (and so before nbval starts its kernel): one CPU, a busy neighbour."""
    if not _is_cell(item) or item.parent.nodeid in _runs or not hasattr(os, "sched_setaffinity"):
        return
    saved = os.sched_getaffinity(0)
    cpu = min(saved)
    os.sched_setaffinity(0, {cpu})
    busy = subprocess.Popen([sys.executable, "-c", _BUSY], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    here = _machine_facts()  # before the clock starts: the run's seconds are the notebook's own
    _runs[item.parent.nodeid] = {"saved": saved, "cpu": cpu, "busy": busy, "t0": time.perf_counter(),
                                 "failed": [], "machine": here}
    _watch_output_widgets(item.parent)


def _machine_facts() -> dict[str, Any]:
    """The machine as the notebook's kernel finds it (this process pinned, its CPU busy), and today's date."""
    import datetime

    from d2l_async.devices import describe_machine, machine

    here = machine(sample_s=0.5)
    return {"machine": describe_machine(here), "usable_cpus": float(here.usable_cpus),
            "spare_cpus": float(here.spare_cpus), "date": datetime.date.today().isoformat()}


def _watch_output_widgets(nbfile: Any) -> None:
    """Mark each display the kernel sends while an ``ipywidgets.Output`` captures (nbval reads every iopub
    message through ``get_kernel_message`` and ignores comm messages: the widget's ``msg_id`` is seen here)."""
    if getattr(nbfile, "_d2l_watched", False):
        return
    read = nbfile.get_kernel_message
    outputs: set[str] = set()
    capturing: dict[str, str] = {}

    def get_kernel_message(*args: Any, **kwargs: Any) -> dict:
        msg = read(*args, **kwargs)
        kind, content = msg.get("msg_type"), msg.get("content") or {}
        data = content.get("data") or {}
        state = data.get("state") or {} if isinstance(data, dict) else {}
        if kind == "comm_open" and state.get("_model_name") == "OutputModel":
            outputs.add(content.get("comm_id"))
        if kind in ("comm_open", "comm_msg") and content.get("comm_id") in outputs and "msg_id" in state:
            capturing[content["comm_id"]] = state["msg_id"]
        if kind in ("display_data", "execute_result") and \
                (msg.get("parent_header") or {}).get("msg_id") in set(capturing.values()) - {""}:
            content["metadata"] = {**(content.get("metadata") or {}), IN_OUTPUT_WIDGET: True}
        return msg

    nbfile.get_kernel_message = get_kernel_message
    nbfile._d2l_watched = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any):
    outcome = yield
    report = outcome.get_result()
    run = _runs.get(getattr(item.parent, "nodeid", None)) if _is_cell(item) else None
    if run is not None and report.failed and item.cell_num not in run["failed"]:
        run["failed"].append(item.cell_num)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: Any, nextitem: Any):
    """After a notebook's last cell: read the kernel before nbval stops it, write the run, undo the pinning."""
    last = _is_cell(item) and (nextitem is None or getattr(nextitem, "parent", None) is not item.parent)
    run = _runs.get(item.parent.nodeid) if last else None
    if run is not None:
        pid = _kernel_pid(item.parent)
        try:
            affinity = sorted(os.sched_getaffinity(pid)) if pid else []
        except OSError:
            affinity = []
        _write(item.parent, {"seconds": time.perf_counter() - run["t0"], "cpu": run["cpu"], "busy": True,
                             "affinity": affinity, "peak_rss_bytes": _peak_rss_bytes(pid),
                             "failed_cells": sorted(run["failed"]), "quick": os.environ.get("D2L_ASYNC_QUICK") == "1",
                             **run["machine"]})
    yield
    if run is not None:
        run["busy"].kill()
        run["busy"].wait(timeout=30)
        os.sched_setaffinity(0, run["saved"])
        del _runs[item.parent.nodeid]


def _write(nbfile: Any, meta: dict[str, Any]) -> Path:
    """The notebook with every executed cell's outputs (nbval's ``test_outputs``) and the run's metadata."""
    import nbformat

    nb = nbformat.read(str(nbfile.fspath), as_version=4)
    items = {c.cell_num: c for c in nbfile.session.items if _is_cell(c) and c.parent is nbfile}
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    counter = 0
    for number, cell in enumerate(code):  # nbval numbers the code cells only, from 0
        outputs = getattr(items.get(number), "test_outputs", None)
        if outputs is not None:
            counter += 1
            cell.execution_count = counter
            cell.outputs = [nbformat.from_dict(dict(o)) for o in outputs]
    nb.metadata[RUN_KEY] = {**meta, "source_sha256": _digest(Path(str(nbfile.fspath)))}
    EXECUTED.mkdir(parents=True, exist_ok=True)
    path = EXECUTED / Path(str(nbfile.fspath)).name
    nbformat.write(nb, str(path))
    return path


def _digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def executed(name: str) -> tuple[Any, dict[str, Any]]:
    """The notebook ``name`` as the last nbval run executed it, and that run's facts.

    Returns:
        ``(notebook, run)``; ``run`` holds seconds, cpu, affinity, peak_rss_bytes, failed_cells, quick, machine,
        usable_cpus, spare_cpus, date, source_sha256.

    Raises:
        FileNotFoundError: no run is kept, or it ran another version of the notebook (the message says how to
            make one).
    """
    import nbformat

    source, path = ROOT / "notebooks" / name, EXECUTED / name
    nb = nbformat.read(str(path), as_version=4) if path.exists() else None
    run = dict(nb.metadata.get(RUN_KEY) or {}) if nb is not None else {}
    if nb is None or run.get("source_sha256") != _digest(source):
        raise FileNotFoundError(f"no run of this version of {name} in {EXECUTED}: `make test` runs every notebook "
                                f"first (pytest --nbval-lax notebooks tests -p tests.notebook_run)")
    return nb, run


def run_json(name: str) -> str:
    """The run's facts of ``name`` as one JSON line (for a test's failure message)."""
    return json.dumps(executed(name)[1], sort_keys=True)
