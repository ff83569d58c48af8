"""What a student sees of a dashboard in a real browser: the helpers of the browser tests and benchmark.

A dashboard is found by its class (``d2l-dashboard``, set by :class:`d2l_async.widgets.Dashboard`) and its
figures by theirs (``d2l-figure-view``), so the test reads the figures *under the dashboard*, not whatever
plotly figure happens to be on the page.  JupyterLab 4 renders only the cells near the viewport, so each
figure is scrolled into view before it is read.  What counts is what plotly.js holds and drew:

* ``traces`` -- the traces in the graph div (``gd.data``);
* ``points`` -- the points they carry (each trace's longest data array: x, y, z, values, base);
* ``drawn`` -- trace groups plotly.js drew in the plot's SVG (or WebGL) layers.

A notebook is driven up to its dashboard only: :func:`notebook_up_to_dashboard` writes a copy that ends
with the dashboard's cell and keeps of the code before it only the cells it needs (its imports and the
definitions it reads), so "Run All" runs the dashboard and what it needs, not the notebook's experiments
(every notebook is executed once per ``make test``, by nbval: ``tests/notebook_run.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).parents[2]

#: A code cell that builds a dashboard (one of the ready-made ones, or ``Dashboard(...)`` itself).
DASHBOARD_CALL = re.compile(r"\b(?:\w+_dashboard|trace_explorer|Dashboard)\(")
DASHBOARD = ".jp-OutputArea-output .d2l-dashboard"
IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle'] >> visible=true"
#: Page reloads allowed when JupyterLab fails to restore a widget from the kernel (its race, not ours).
RELOADS = 3

class LabDidNotStart(RuntimeError):
    """``jupyter lab`` exited or did not answer in time (the message holds the end of its log)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def lab_server(workdir: Path, *, start_s: float | None = None) -> Iterator[dict[str, Any]]:
    """``jupyter lab`` on a free loopback port with a random token, serving a copy of the notebooks.

    Yields:
        ``{"base": url, "token": ..., "dir": the notebooks' folder, "share": a JUPYTER_PATH entry for
        extra kernels}``; the server is stopped on exit.

    Raises:
        LabDidNotStart: the server exited or did not answer within ``start_s`` (default: 90 s scaled
            by the machine's load).
    """
    shutil.copytree(ROOT / "notebooks", workdir / "notebooks")
    port, token = _free_port(), secrets.token_hex(16)
    settings = workdir / "settings"
    # Start the notebook's kernel without asking, and no news pop-up over the page.
    for plugin, values in {
        "notebook-extension/tracker": {"autoStartDefaultKernel": True},
        "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    }.items():
        target = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    env = {**os.environ, "D2L_ASYNC_QUICK": "1", "JUPYTER_CONFIG_DIR": str(workdir / "cfg"),
           "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"), "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(workdir / "workspaces"), "JUPYTER_PATH": str(workdir / "share")}
    log = open(workdir / "lab.log", "w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}", "--ServerApp.open_browser=False",
         f"--notebook-dir={workdir / 'notebooks'}", "--allow-root"],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    base = f"http://127.0.0.1:{port}"
    if start_s is None:
        from d2l_async.devices import machine

        m = machine(sample_s=0)  # a loaded machine starts JupyterLab slower: scale the wait
        start_s = 90 * min(5.0, max(1.0, m.load_avg / max(m.usable_cpus, 1.0)))
    deadline = time.monotonic() + start_s
    try:
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise LabDidNotStart(f"jupyter lab did not start: {(workdir / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.25)
        yield {"base": base, "token": token, "dir": workdir / "notebooks", "share": workdir / "share"}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def shut_down_kernels(lab: dict[str, Any]) -> int:
    """End every session of the lab server (and so its kernel), ~500 MB each.

    Returns:
        How many sessions were ended.
    """
    def call(method: str, path: str) -> Any:
        req = urllib.request.Request(f"{lab['base']}{path}?token={lab['token']}", method=method)
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    sessions = call("GET", "/api/sessions")
    for s in sessions:
        call("DELETE", f"/api/sessions/{s['id']}")
    return len(sessions)


#: Reads one figure view: its plotly div's traces, points and drawn trace groups (None: no plot there yet).
_READ_FIGURE = """(view) => {
    const gd = view.matches('.js-plotly-plot') ? view : view.querySelector('.js-plotly-plot');
    if (!gd) return null;
    const digest = (text) => {  // FNV-1a: a short fingerprint of the data, to tell a redraw from none
        let h = 0x811c9dc5;
        for (let i = 0; i < text.length; i++) { h ^= text.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
        return h.toString(16) + ':' + text.length;
    };
    const size = (a) => (a == null ? 0 : (typeof a.length === 'number' ? a.length : 0));
    const data = gd.data || [];
    const points = data.map(t => Math.max(0, ...['x', 'y', 'z', 'values', 'base'].map(k => size(t[k]))));
    const drawn = gd.querySelectorAll('g.trace, .gl-container canvas').length;
    const box = gd.getBoundingClientRect();
    return {traces: data.length, points: points.reduce((a, b) => a + b, 0), drawn: drawn,
            width: box.width, height: box.height,
            digest: digest(JSON.stringify(data.map(t => [t.type, t.x, t.y, t.base, t.text])))};
}"""


_HAS_PLOT = """(view) => view.matches('.js-plotly-plot') || !!view.querySelector('.js-plotly-plot')"""


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell binds, names it reads) -- imports, assignments, defs, loop and with targets."""
    import ast

    lines = [line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
             for line in source.splitlines()]  # an IPython magic: a statement that binds nothing
    tree = ast.parse("\n".join(lines))
    bound, read, params = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            params.add(node.arg)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else read).add(node.id)
    return bound, read - params  # a function's parameters are its own


def needed_cells(cells: list[dict], last: int) -> list[int]:
    """The code cells up to ``last`` that cell ``last`` needs: each name it reads from the cell that bound
    it last before it, then what those cells read, in turn.  Returns their indices, in order."""
    sources = {i: "".join(c["source"]) for i, c in enumerate(cells[: last + 1]) if c["cell_type"] == "code"}
    names = {i: _names(src) for i, src in sources.items()}
    keep, todo = {last}, [last]
    while todo:
        i = todo.pop()
        for name in names[i][1]:
            j = max((k for k in names if k < i and name in names[k][0]), default=None)
            if j is not None and j not in keep:
                keep.add(j)
                todo.append(j)
    return sorted(keep)


def notebook_up_to_dashboard(src: Path, dst: Path) -> int:
    """Write ``dst``: the cells of ``src`` that its first dashboard cell needs (:func:`needed_cells`: its
    imports and the definitions it reads, not the experiments before it), markdown kept, outputs cleared.

    Returns:
        The index of the dashboard cell among the copy's cells.

    Raises:
        ValueError: ``src`` has no cell that builds a dashboard.
    """
    nb = json.loads(src.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code" and DASHBOARD_CALL.search("".join(cell["source"])):
            keep = set(needed_cells(nb["cells"], i))
            nb["cells"] = [c for k, c in enumerate(nb["cells"][: i + 1]) if c["cell_type"] != "code" or k in keep]
            for c in nb["cells"]:
                if c["cell_type"] == "code":
                    c["outputs"], c["execution_count"] = [], None
            dst.write_text(json.dumps(nb, indent=1))
            return len(nb["cells"]) - 1
    raise ValueError(f"{src.name} has no cell that builds a dashboard")


def has_dashboard(src: Path) -> bool:
    """True when a code cell of notebook ``src`` builds a dashboard."""
    nb = json.loads(src.read_text())
    return any(c["cell_type"] == "code" and DASHBOARD_CALL.search("".join(c["source"])) for c in nb["cells"])


def run_all(page: Any, url: str, *, timeout_s: float, lab: dict[str, Any], path: str) -> None:
    """Open ``url`` (notebook ``path`` of ``lab``, in JupyterLab or Notebook 7), run all its cells, wait until
    the kernel is idle.

    "Run All" is clicked once the server says the notebook's kernel is idle with the page connected to it (the
    page's own indicator reads "idle" before any kernel exists, and a click then is lost); should no cell have
    started even so, it is clicked once more (nothing ran, so nothing runs twice).

    Raises:
        AssertionError: no cell started after two clicks.
    """
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout_s * 1000)
    # The kernel starts on its own (the settings say so); should JupyterLab ask anyway, accept its choice.
    select = page.get_by_role("button", name="Select", exact=True)
    deadline = time.monotonic() + timeout_s
    while not _kernel_connected(lab, path):
        if select.count():
            select.click()
        assert time.monotonic() < deadline, f"no kernel of {path} idle and connected within {timeout_s:.0f} s"
        time.sleep(0.25)
    page.locator(IDLE).first.wait_for(timeout=timeout_s * 1000)
    for attempt in range(2):
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            page.wait_for_function(_SOME_CELL_STARTED, timeout=min(timeout_s, 30.0) * 1000)
            break
        except Exception:  # noqa: BLE001 - every prompt still "[ ]": the click was lost
            if attempt:
                raise AssertionError(f"Run All started no cell of {path} (clicked twice)") from None
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""",
        timeout=timeout_s * 1000,
    )
    page.locator(IDLE).first.wait_for(timeout=timeout_s * 1000)


#: True once a code cell is queued, running or done ("[*]" or "[3]" in its prompt).
_SOME_CELL_STARTED = """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
    .some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))"""


def _kernel_connected(lab: dict[str, Any], path: str) -> bool:
    """True when the server's session of notebook ``path`` has a kernel that is idle and has a connection."""
    url = f"{lab['base']}/api/sessions?token={lab['token']}"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            sessions = json.loads(r.read() or b"[]")
    except OSError:
        return False
    return any(s.get("path", "").endswith(path) and (s.get("kernel") or {}).get("execution_state") == "idle"
               and (s.get("kernel") or {}).get("connections", 0) >= 1 for s in sessions)


def errors(page: Any) -> list[str]:
    """The text of every error output on the page (tracebacks on stderr)."""
    return page.eval_on_selector_all(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr'], .jp-RenderedText[data-mime-type"
        "='application/vnd.jupyter.error']",
        "els => els.map(e => e.textContent).filter(t => /Traceback|Error/.test(t))",
    )


def status(page: Any) -> dict[str, Any]:
    """The dashboard's status line: its kind (ok, info, refused, error), its run count, its text, and
    ``figures``: what the kernel's figures hold as it wrote the line, ``[(traces, points), ...]`` in page order
    (:func:`d2l_async.widgets._views.drawn_size`, counted as :func:`read_figures` counts the browser's)."""
    span = page.locator(f"{DASHBOARD} .d2l-dashboard-status span").first
    if span.count() == 0:
        return {"kind": "", "runs": "", "text": "", "figures": []}
    drawn = span.get_attribute("data-figures") or ""
    return {"kind": span.get_attribute("data-kind") or "", "runs": span.get_attribute("data-runs") or "",
            "text": span.inner_text(),
            "figures": [tuple(None if n == "*" else int(n) for n in f.split(":")) for f in drawn.split(",") if f]}


def sizes(figures: list[dict[str, Any] | None], kernel: list[tuple[int, int | None]] = ()) -> list:
    """``[(traces, points), ...]`` of figures :func:`read_figures` read (None where no plot appeared); where
    ``kernel`` (the status line's) states no points (an animation: the page shows one of its frames), the
    points read are left out, as there."""
    out = [f and (f["traces"], f["points"]) for f in figures]
    return [(o[0], None) if o and i < len(kernel) and kernel[i][1] is None else o for i, o in enumerate(out)]


def read_figures(page: Any, *, timeout_s: float) -> list[dict[str, Any] | None]:
    """Every figure under the dashboard, each scrolled into view and read once plotly has drawn it.

    Returns:
        One entry per figure view, in page order: ``None`` where no plot appeared within ``timeout_s``.
    """
    scroll_to_dashboard(page, timeout_s=timeout_s)
    dashboard = page.locator(DASHBOARD).first
    views = dashboard.locator(".d2l-figure-view")
    out: list[dict[str, Any] | None] = []
    for i in range(views.count()):
        view = views.nth(i)
        view.scroll_into_view_if_needed(timeout=timeout_s * 1000)
        # the view is found anew at each look (a locator, not a handle): after a reload JupyterLab may
        # render an output twice, and a handle on the first, detached node never sees its plot
        deadline = time.monotonic() + timeout_s
        while not (has_plot := view.evaluate(_HAS_PLOT, timeout=timeout_s * 1000)) and time.monotonic() < deadline:
            time.sleep(0.25)
        if not has_plot:
            out.append(None)  # no plot drew there
            continue
        # plotly.js sets gd.data at once and draws afterwards: read until it drew, or the wait ends
        deadline = time.monotonic() + timeout_s
        seen = view.evaluate(_READ_FIGURE)
        while seen is not None and blank([seen]) and time.monotonic() < deadline:
            time.sleep(0.25)
            seen = view.evaluate(_READ_FIGURE)
        out.append(seen)
    return out


def blank(figures: list[dict[str, Any] | None]) -> list[int]:
    """The positions of the figures a student would see empty: no plot, no trace, no point or nothing drawn."""
    return [i for i, f in enumerate(figures)
            if f is None or f["traces"] == 0 or f["points"] == 0 or f["drawn"] == 0 or f["height"] < 50]


def _settled_box(locator: Any, timeout_s: float) -> dict[str, float]:
    """The element's box once it stops moving (figures above it may still be laying out)."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        locator.scroll_into_view_if_needed(timeout=timeout_s * 1000)
        box = locator.bounding_box()
        if box is not None and box == last:
            return box
        last = box
        time.sleep(0.25)
    raise AssertionError(f"the control never settled (last box {last})")


def move_first_control(page: Any, *, timeout_s: float, dx: float = 60) -> str:
    """Move the dashboard's first slider (or, without one, pick another option of its first drop-down).

    Returns:
        What was moved (``"slider"`` or ``"dropdown"``), once the pointer was released.
    """
    dashboard = page.locator(DASHBOARD).first
    handles = dashboard.locator(".widget-slider .noUi-handle, .widget-hslider .noUi-handle")
    if handles.count():
        handle = handles.first
        box = _settled_box(handle, timeout_s)
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        hit = page.evaluate("([x, y]) => document.elementFromPoint(x, y)?.className || ''", [x, y])
        assert "noUi-handle" in hit or "noUi-touch-area" in hit, f"the pointer would land on {hit!r}, not the handle"
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + dx / 2, y, steps=5)
        page.mouse.move(x + dx, y, steps=5)
        page.mouse.up()  # continuous_update=False: the release reruns the experiment
        return "slider"
    select = dashboard.locator("select").first
    options = select.locator("option").all_inner_texts()
    current = select.evaluate("s => s.options[s.selectedIndex].text")
    select.select_option(label=next(o for o in options if o != current))
    return "dropdown"


def wait_for_new_run(page: Any, runs_before: str, *, timeout_s: float) -> dict[str, str]:
    """Wait until the status line reports a run after ``runs_before`` that ended (not "Running…").

    Returns:
        The status line then (see :func:`status`).
    """
    page.wait_for_function(
        """(before) => {
            const s = document.querySelector('.jp-OutputArea-output .d2l-dashboard .d2l-dashboard-status span');
            return s && s.dataset.runs !== before && s.dataset.kind !== 'info';
        }""",
        arg=runs_before,
        timeout=timeout_s * 1000,
    )
    return status(page)


def reopen(page: Any, *, timeout_s: float) -> None:
    """Save the notebook, reload the page and wait for its dashboard again, drawn by views made anew.

    The kernel keeps running; the reloaded page rebuilds every widget view from the state the kernel
    syncs (``Widget.get_state()``), as a student's browser does after a reload or a lost connection, and as
    a second view of the same output does.  A figure whose traces never reached that state draws empty here.
    """
    page.locator("[data-command='docmanager:save']").first.click()  # the notebook toolbar's save button
    page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')", timeout=timeout_s * 1000)
    for attempt in range(RELOADS):
        page.reload()
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout_s * 1000)
        page.locator(IDLE).first.wait_for(timeout=timeout_s * 1000)
        try:
            scroll_to_dashboard(page, timeout_s=timeout_s / RELOADS)
            return
        except Exception:  # noqa: BLE001 - see below
            # JupyterLab sometimes renders a widget output before it has fetched the kernel's widgets
            # and then shows "Error displaying widget: model not found" for good (jupyterlab#15361,
            # ipywidgets#3823): not the figure's state, so the page is reloaded again
            if not page.get_by_text("model not found").count():
                raise
    raise AssertionError(f"JupyterLab did not restore the dashboard's widgets from the kernel in {RELOADS} reloads "
                         "('Error displaying widget: model not found' each time)")


def scroll_to_dashboard(page: Any, *, timeout_s: float) -> None:
    """Bring the dashboard's output into view, as a reader does: select the notebook's last cell (the
    dashboard's, in a copy made by :func:`notebook_up_to_dashboard`); JupyterLab scrolls the active cell
    into view and renders it (it renders only the cells near the viewport)."""
    if page.locator(DASHBOARD).count() == 0:
        cells = page.locator(".jp-Notebook .jp-Cell")
        cells.first.locator(".jp-InputPrompt, .jp-Cell-inputCollapser").first.click()
        page.keyboard.press("Escape")  # command mode: the arrow keys move between cells
        for _ in range(cells.count() + 2):
            page.keyboard.press("ArrowDown")
        page.locator(DASHBOARD).first.wait_for(state="attached", timeout=timeout_s * 1000)
    page.locator(DASHBOARD).first.scroll_into_view_if_needed(timeout=timeout_s * 1000)
