"""In headless Chromium, every dashboard as a student sees it: its own figures drawn with data, and redrawn.

For each notebook that builds a dashboard, a real JupyterLab runs the notebook up to the dashboard's cell
(:func:`~tests.browser._lab.notebook_up_to_dashboard`), then the test reads the figures *under the dashboard*
(each scrolled into view) from plotly.js: traces, points and drawn trace groups.  Every figure must show data
after the run; after the first slider moves (or the first drop-down changes), the status line reports the new
run, every figure still shows data and at least one of them changed.  A screenshot of the dashboard before
and after is kept in ``build/browser/`` for a person to look at.

Every wait is scaled by the machine's measured load (:func:`_load_factor`), so the suite holds while other
work runs beside it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from . import _lab

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb") if _lab.has_dashboard(p))


def _load_factor() -> float:
    """How much slower than a quiet machine this one runs now: the 1-minute load average per usable
    CPU, between 1 and 5.  Every browser wait below is scaled by it."""
    from d2l_async.devices import machine

    m = machine(sample_s=0)
    return min(5.0, max(1.0, m.load_avg / max(m.usable_cpus, 1.0)))


LOAD = _load_factor()

pytestmark = [pytest.mark.browser, pytest.mark.timeout(int(600 * LOAD))]


def _s(seconds: float) -> float:
    """A wait that takes ``seconds`` on a quiet machine, scaled by load."""
    return seconds * LOAD


def _showing(page, kernel: list, timeout_s: float) -> tuple[list, float]:
    """Read the figures until the page shows what the kernel's figures hold (``kernel``: the status line's
    ``[(traces, points), ...]``) or the wait ends: the kernel sends a run's figures one after another, and a
    busy browser applies the last one seconds after the first.  Returns the last figures read and the
    ``time.monotonic()`` at which they were read."""
    deadline = time.monotonic() + timeout_s
    while True:
        now = _lab.read_figures(page, timeout_s=_s(30))
        seen = time.monotonic()
        if _lab.sizes(now, kernel) == kernel or seen > deadline:
            return now, seen
        time.sleep(0.25)


def check_dashboard(page, lab, name: str, shots: Path, *, ui: str = "lab", kernel: str | None = None) -> dict:
    """Run ``name`` up to its dashboard in ``ui`` (``"lab"`` or ``"notebook"``), then read, move and read again.

    Returns:
        What was seen: the figures before and after, the status lines, the control moved and the
        seconds from the release to the redrawn figures.
    """
    copy = f"{Path(name).stem}-{ui}-{kernel or 'pinned'}.ipynb"  # a file of its own: a test saves it
    _lab.notebook_up_to_dashboard(ROOT / "notebooks" / name, lab["dir"] / copy)
    if kernel:  # another kernel, which first says what it runs
        nb = json.loads((lab["dir"] / copy).read_text())
        nb["metadata"]["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
        nb["cells"].insert(0, {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                               "source": "import plotly, ipywidgets\nprint('versions:', plotly.__version__, "
                                         "ipywidgets.__version__)"})
        (lab["dir"] / copy).write_text(json.dumps(nb, indent=1))
    workspace = Path(copy).stem.replace("_", "-")
    url = (f"{lab['base']}/lab/workspaces/{workspace}/tree/{copy}?reset&token={lab['token']}" if ui == "lab"
           else f"{lab['base']}/notebooks/{copy}?token={lab['token']}")
    _lab.run_all(page, url, timeout_s=_s(240), lab=lab, path=copy)
    assert _lab.errors(page) == [], f"{name}: error output up to the dashboard"
    versions = page.locator(".jp-OutputArea-output").filter(has_text="versions:").first.inner_text() if kernel else ""
    status_before = _lab.status(page)
    before, _ = _showing(page, status_before["figures"], timeout_s=_s(30))
    page.locator(_lab.DASHBOARD).first.screenshot(path=str(shots.with_name(shots.name + "-before.png")))
    assert status_before["kind"] == "ok", f"{name}: the dashboard's first run did not end well: {status_before}"
    assert before and _lab.blank(before) == [], f"{name}: figures drawn empty after the run: {before}"
    assert _lab.sizes(before, status_before["figures"]) == status_before["figures"], (
        f"{name}: after the first run the page shows {_lab.sizes(before)} (traces, points), the kernel's figures "
        f"hold {status_before['figures']}")
    moved = _lab.move_first_control(page, timeout_s=_s(30))
    released = time.monotonic()
    status_after = _lab.wait_for_new_run(page, status_before["runs"], timeout_s=_s(180))
    status_after = _lab.status(page)  # the line of the run that ended last (a drag can start several)
    after, seen = _showing(page, status_after["figures"], timeout_s=_s(30))
    latency = seen - released
    page.locator(_lab.DASHBOARD).first.screenshot(path=str(shots.with_name(shots.name + "-after.png")))
    assert status_after["kind"] == "ok", f"{name}: the rerun after the {moved} moved did not end well: {status_after}"
    assert _lab.blank(after) == [], f"{name}: figures drawn empty after the {moved} moved: {after}"
    assert _lab.sizes(after, status_after["figures"]) == status_after["figures"], (
        f"{name}: after the {moved} moved the page shows {_lab.sizes(after)} (traces, points), the kernel's "
        f"figures hold {status_after['figures']}")
    assert [f["digest"] for f in after] != [f["digest"] for f in before], f"{name}: no figure changed"
    assert _lab.errors(page) == [], f"{name}: moving the {moved} produced an error"

    # A reload builds every view anew from the kernel's synced state: the last run must be there.
    _lab.reopen(page, timeout_s=_s(60))
    reopened, _ = _showing(page, status_after["figures"], timeout_s=_s(30))
    page.locator(_lab.DASHBOARD).first.screenshot(path=str(shots.with_name(shots.name + "-reloaded.png")))
    assert _lab.blank(reopened) == [] and _lab.sizes(reopened, status_after["figures"]) == status_after["figures"], (
        f"{name}: once the page was reloaded (views built from the kernel's state) the figures show "
        f"{_lab.sizes(reopened)} (traces, points), not the last run's {status_after['figures']}")
    return {"before": before, "after": after, "reopened": reopened, "moved": moved, "latency_s": latency,
            "status": status_after, "versions": versions}


#: The whole matrix, one notebook at a time, when asked (the suite runs the pinned versions in JupyterLab):
#: ``D2L_ASYNC_BROWSER_UI=notebook`` drives Notebook 7, ``D2L_ASYNC_BROWSER_KERNEL=plotly6`` a matrix kernel.
UI = os.environ.get("D2L_ASYNC_BROWSER_UI", "lab")
KERNEL = os.environ.get("D2L_ASYNC_BROWSER_KERNEL", "")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_dashboard_figures_drawn_with_data_and_redrawn(browser, lab_server, screenshots, name):
    from .conftest import matrix_kernel

    kernel = matrix_kernel(lab_server, KERNEL) if KERNEL else None
    page = browser.new_page()
    shot = screenshots / (name.replace(".ipynb", "") if UI == "lab" and not kernel else
                          f"{UI}-{KERNEL or 'pinned'}-{name.replace('.ipynb', '')}")
    try:
        check_dashboard(page, lab_server, name, shot, ui=UI, kernel=kernel)
    except Exception:
        page.screenshot(path=f"{shot}-failure.png", full_page=True)
        raise
    finally:
        page.close()
        _lab.shut_down_kernels(lab_server)


def test_every_notebook_with_a_dashboard_is_covered():
    assert len(NOTEBOOKS) >= 10, NOTEBOOKS  # 00 and 01-10 build one; a regex that misses them would test nothing


def test_notebook_7_draws_a_dashboard(browser, lab_server, screenshots):
    page = browser.new_page()
    shot = screenshots / "notebook7-05_sync_vs_async"
    try:
        check_dashboard(page, lab_server, "05_sync_vs_async.ipynb", shot, ui="notebook")
    except Exception:
        page.screenshot(path=f"{shot}-failure.png", full_page=True)
        raise
    finally:
        page.close()
        _lab.shut_down_kernels(lab_server)


@pytest.mark.matrix
@pytest.mark.parametrize("version", ["plotly6"])
def test_a_dashboard_draws_with_other_plotly(browser, lab_server, screenshots, version):
    """plotly 6.0, anywidget's first plotly.  (Colab's plotly 5.24 + ipywidgets 7.7 cannot be drawn here:
    JupyterLab 4's widget manager shows "Click to show javascript error" for an ipywidgets 7 kernel's widgets;
    tests/widgets/test_colab_path.py runs that kernel and reads what it sends.)"""
    from .conftest import matrix_kernel

    kernel = matrix_kernel(lab_server, version)
    page = browser.new_page()
    shot = screenshots / f"{version}-05_sync_vs_async"
    try:
        seen = check_dashboard(page, lab_server, "05_sync_vs_async.ipynb", shot, kernel=kernel)
        wanted = {"plotly6": "6.0.1"}[version]
        assert seen["versions"].split(":", 1)[1].strip().startswith(wanted), seen["versions"]
    except Exception:
        page.screenshot(path=f"{shot}-failure.png", full_page=True)
        raise
    finally:
        page.close()
        _lab.shut_down_kernels(lab_server)
