"""In headless Chromium: a notebook runs in a real JupyterLab, its figure renders, a slider moves it.

Every wait is scaled by the machine's measured load (:func:`_load_factor`), so the suite holds
while other work runs beside it."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest



def _load_factor() -> float:
    """How much slower than a quiet machine this one runs now: the 1-minute load average per usable
    CPU, between 1 and 5 (at load 12-18 on two cores, notebook 10's slider rerun passed a
    fixed 120 s wait).  Every browser wait below is scaled by it."""
    from d2l_async.devices import machine

    m = machine(sample_s=0)
    return min(5.0, max(1.0, m.load_avg / max(m.usable_cpus, 1.0)))


LOAD = _load_factor()


def _ms(seconds: float) -> int:
    """A Playwright timeout (ms) for a wait that takes ``seconds`` on a quiet machine, scaled by load."""
    return int(seconds * LOAD * 1000)


pytestmark = [pytest.mark.browser, pytest.mark.timeout(int(600 * LOAD))]

PLOT = ".jp-OutputArea-output .js-plotly-plot"
IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle'] >> visible=true"
SLIDER = ".jp-OutputArea-output .widget-slider .noUi-handle, .jp-OutputArea-output .widget-hslider .noUi-handle"


def _run_all(page, lab, name: str) -> None:
    # A workspace of its own per notebook, reset, so no other notebook's tab is open beside it.
    workspace = name.replace(".ipynb", "").replace("_", "-")
    page.goto(f"{lab['base']}/lab/workspaces/{workspace}/tree/{name}?reset&token={lab['token']}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=_ms(90))
    # Should the kernel dialog appear anyway (settings not honoured), accept the notebook's kernel.
    try:
        page.get_by_role("button", name="Select", exact=True).click(timeout=_ms(5))
    except Exception:  # noqa: BLE001 - no dialog: the kernel started on its own
        pass
    # Wait for the kernel to be idle before running.
    page.locator(IDLE).first.wait_for(timeout=_ms(90))
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    # Every code cell has run once the last prompt shows a number and the kernel is idle again.
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""",
        timeout=_ms(300),
    )
    page.locator(IDLE).first.wait_for(timeout=_ms(300))


def _shut_down_kernels(lab) -> int:
    """End every session of the lab server (and so its kernel): a notebook's kernel otherwise lives
    on for the rest of the run, ~500 MB each, eleven of them beside the later tests."""
    def call(method: str, path: str):
        req = urllib.request.Request(f"{lab['base']}{path}?token={lab['token']}", method=method)
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    sessions = call("GET", "/api/sessions")
    for s in sessions:
        call("DELETE", f"/api/sessions/{s['id']}")
    return len(sessions)


def _errors(page) -> list[str]:
    return page.eval_on_selector_all(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
        "els => els.map(e => e.textContent).filter(t => /Traceback|Error/.test(t))",
    )


_ALL_DATA = "els => JSON.stringify(els.map(el => (el.data || []).map(t => [t.x, t.y])))"


def _figure_data(page) -> str:
    """The x/y data of every plotly figure on the page."""
    return page.eval_on_selector_all(PLOT, _ALL_DATA)


def _settled_box(locator, timeout: float = 30.0) -> dict:
    """The element's box once it stops moving (figures above it may still be laying out)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        locator.scroll_into_view_if_needed()
        box = locator.bounding_box()
        if box is not None and box == last:
            return box
        last = box
        time.sleep(0.5)
    raise AssertionError(f"slider handle never settled (last box {last})")


def _drag_slider(page, index: int = 0, dx: int = 60) -> None:
    handle = page.locator(SLIDER).nth(index)
    box = _settled_box(handle, timeout=30.0 * LOAD)
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    # The pointer must land on the handle itself, or the drag moves nothing.
    hit = page.evaluate("([x, y]) => document.elementFromPoint(x, y)?.className || ''", [x, y])
    assert "noUi-handle" in hit or "noUi-touch-area" in hit, f"pointer would land on {hit!r}, not the handle"
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + dx / 2, y, steps=5)
    page.mouse.move(x + dx, y, steps=5)
    page.mouse.up()  # continuous_update=False: the release reruns the experiment


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).parents[2] / "notebooks").glob("*.ipynb")))
def test_notebook_runs_renders_and_slider_changes_figure(browser, lab_server, screenshots, name):
    if not (lab_server["dir"] / name).exists():
        pytest.fail(f"notebooks/{name} is missing")
    page = browser.new_page()
    shot = screenshots / name.replace(".ipynb", "")
    try:
        _run_all(page, lab_server, name)
        page.wait_for_selector(PLOT, timeout=_ms(120))
        page.wait_for_selector(SLIDER, timeout=_ms(60))
        assert _errors(page) == [], "error output in the notebook"
        page.screenshot(path=f"{shot}-before.png", full_page=False)

        before = _figure_data(page)
        _drag_slider(page)
        page.wait_for_function(
            f"""(before) => {{
                const els = [...document.querySelectorAll({json.dumps(PLOT)})];
                return ({_ALL_DATA})(els) !== before;
            }}""",
            arg=before,
            timeout=_ms(120),
        )
        page.screenshot(path=f"{shot}-after.png", full_page=False)
        assert _figure_data(page) != before
        assert _errors(page) == [], "moving the slider produced an error"
    except Exception:
        page.screenshot(path=f"{shot}-failure.png", full_page=True)
        raise
    finally:
        page.close()
        _shut_down_kernels(lab_server)
