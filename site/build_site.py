"""Build the chapter as a static site: ``make site`` -> ``build/site/``.

Readers read D2L as a web page; this gives them the chapter the same way, with nothing to run:
every notebook executed here (default mode unless ``--quick``) by Jupyter Book 1.0.4 / myst-nb, one
page per notebook with its interactive plotly figures and animations, its lesson checks, the
machine it ran on, a note where a dashboard needs a kernel, and launch buttons (Binder, Colab and,
with ``--hub-url``, a JupyterHub through nbgitpuller) pointing at ``d2l_async.config.REPO_SLUG``.
The index page is the chapter's table of contents (read from the README's notebook table); the pages
of ``docs/`` follow the notebooks (``site/doc_pages.py``: their links rewritten for the site).

How: the notebooks are copied to a staging folder with two cells added — a hidden first one
(``site/setup_cell.py``: plotly figures as HTML for a page that loads plotly.js once, from the
site's own ``_static/``, each named by its text alternative, ``d2l_async.viz.alt_text``; dashboards
replaced by a note) and a last one whose output names the machine (``site/machine_cell.py``) — and
the notebooks' Colab-only install cell hidden; then ``jupyter-book build`` executes and renders them.

With ``--executed build/executed`` (the runs ``make test`` keeps: nbval, one CPU beside a busy process) and a
current run of every notebook there (:func:`stored_runs`: the run's ``source_sha256`` is the notebook's, the
same mode, no failed cell), nothing is executed: the stored notebooks are staged with their outputs rewritten
as the setup cell would have made them (:func:`page_from_run`, the same code: ``site/page_outputs.py``), the
footer's output stating the run's own machine and date, and Jupyter Book renders them with
``execute_notebooks: "off"``.  Without a current run of every notebook the build executes as above.
The build needs no network (plotly.js comes from the installed plotly package). Code and output wrap
within the page column (``site/d2l_site.css``).

The load: the pages' lesson checks decide timing claims against each run's spread, so a site built
on a busy machine says "can't tell" where a quiet one decides. The build measures the machine before
and during (:class:`LoadWatch`, ``site.json``'s ``"load"``) and warns when it was busy: build the
published site on a quiet machine.

Usage::

    python site/build_site.py [--out build/site] [--quick] [--hub-url https://hub.example.edu]
                              [--executed build/executed]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from d2l_async.config import REPO_SLUG  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_pages import stage_doc_pages  # noqa: E402
from page_outputs import NEEDS_KERNEL, NEEDS_KERNEL_TEXT, figure_html, machine_line  # noqa: E402

BRANCH = "main"


def chapter() -> list[tuple[str, str, str]]:
    """(notebook stem, topic, D2L section) for every row of the README's notebook table."""
    rows = []
    for line in (ROOT / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*`(\d\d[a-z]?_\w+)\.ipynb`\s*\|(.*)\|(.*)\|\s*$", line)
        if m:
            rows.append((m.group(1), m.group(2).strip(), m.group(3).strip()))
    found = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    if sorted(r[0] for r in rows) != found:
        raise SystemExit(f"README's notebook table {sorted(r[0] for r in rows)} differs from notebooks/ {found}")
    return rows


#: MathJax 3 (npm's ``mathjax``; ``make site`` installs it into .venv/site-js): the site's copy typesets
#: formulas with nothing fetched when a page is read. The files a page with a formula loads: the
#: combined TeX/MathML-to-HTML component, its fonts, and what its menu loads on demand (the
#: accessibility explorer and its speech rules). Copied into the built site's ``_static/`` after the
#: build: Jupyter Book adds every ``.js`` under the source's static folders to every page, and MathJax
#: loads its parts itself (loaded twice, they throw).
MATHJAX = Path(os.environ.get("D2L_ASYNC_MATHJAX", ROOT / ".venv" / "site-js" / "node_modules" / "mathjax" / "es5"))
MATHJAX_PARTS = ("tex-mml-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions", "a11y", "sre", "ui")


def copy_mathjax(static: Path, source: Path = MATHJAX) -> bool:
    """Copy MathJax's parts into ``static/mathjax``; False (and nothing copied) when it is not installed."""
    if not (source / MATHJAX_PARTS[0]).is_file():
        return False
    for part in MATHJAX_PARTS:
        src, dst = source / part, static / "mathjax" / part
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst)
        elif src.is_file():
            shutil.copy(src, dst)
    return True


def config_yml(*, hub_url: str | None, title: str, local_mathjax: bool = False, execute: bool = True) -> str:
    launch = {"notebook_interface": "jupyterlab", "binderhub_url": "https://mybinder.org",
              "colab_url": "https://colab.research.google.com"}
    if hub_url:
        launch["jupyterhub_url"] = hub_url.rstrip("/")
    cfg = {
        "title": title,
        "author": "d2l-async",
        "copyright": "MIT licence",
        "only_build_toc_files": True,
        "execute": {"execute_notebooks": "force" if execute else "off", "timeout": 900, "allow_errors": False,
                    "stderr_output": "show"},
        "repository": {"url": f"https://github.com/{REPO_SLUG}", "path_to_book": "notebooks", "branch": BRANCH},
        "launch_buttons": launch,
        "html": {"use_repository_button": True},
        # $...$ and $$...$$ in the notebooks' and pages' Markdown are formulas; amsmath adds its environments
        "parse": {"myst_enable_extensions": ["amsmath", "colon_fence", "dollarmath", "linkify", "substitution",
                                             "tasklist"]},
        "sphinx": {"recursive_update": True, "config": {
            # the site's own MathJax (relative to _static/); without it, Sphinx's default (a CDN)
            **({"mathjax_path": "mathjax/tex-mml-chtml.js"} if local_mathjax else {}),
            "html_theme_options": {"use_download_button": False},  # html_copy_source is off: no _sources/
            "html_static_path": ["_static"],
            "html_js_files": ["plotly.min.js"],  # once per page, before the figures' scripts run
            "html_css_files": ["d2l_site.css"],
            "html_copy_source": False,
            "nb_execution_raise_on_error": True,
            "nb_ipywidgets_js": {},  # dashboards show a note instead: no widget manager from a CDN
            "nb_merge_streams": True,
        }},
    }
    return json.dumps(cfg, indent=2)  # YAML is a superset of JSON


def toc_yml(stems: list[str], pages: list[dict[str, str]] = ()) -> str:
    """The table of contents: the notebooks in chapter order, then the pages of ``docs/``."""
    return json.dumps({"format": "jb-book", "root": "index",
                       "chapters": [{"file": s} for s in stems] + list(pages)}, indent=2)


#: The lesson checks' marks, as d2l_async.lesson prints them, explained once on the index.
MARKS_KEY = (
    "Each lesson check on a page begins with a mark:",
    "",
    "| mark | means |",
    "|---|---|",
    "| ✔ | the claim held on this run, with the numbers that decided it |",
    "| ✘ | it did not hold, with the measured reason and what would change it |",
    "| ? | can't tell: the difference lies inside the run's own spread (a busy machine, too few repeats); "
    "the check says what would decide it |",
    "| ◇ | modelled: what a model of devices or links gives, an illustration and never evidence of this machine |",
)


def index_md(rows: list[tuple[str, str, str]], *, quick: bool, stored: bool = False) -> str:
    when = ("by the test suite's run that this site was built from (nbval, on one CPU beside a busy process)"
            if stored else "when this site was built")
    lines = [
        "# Asynchronous computation, made visible",
        "",
        "Interactive notebooks for the *Asynchronous Computation* section of",
        "[Dive into Deep Learning](https://d2l.ai/chapter_computational-performance/async-computation.html)",
        f"and the *Automatic Parallelism* section that builds on it. Every page below was executed {when} "
        f"({'quick' if quick else 'default'} mode); each names the machine it ran on. Figures are "
        "interactive; the dashboards need a running kernel: use a page's launch button (Binder, Colab or a "
        "JupyterHub) to move their controls.",
        "",
        *MARKS_KEY,
        "",
        "| notebook | topic | from D2L |",
        "|---|---|---|",
    ]
    for stem, topic, book in rows:
        lines.append(f"| [{stem}]({stem}.ipynb) | {topic} | {book} |")
    lines += ["", f"Source: [github.com/{REPO_SLUG}](https://github.com/{REPO_SLUG})", "",
              "```{tableofcontents}", "```", ""]
    return "\n".join(lines)


def is_colab_cell(cell: dict) -> bool:
    """The notebooks' Colab-only install cell (``if "google.colab" in sys.modules: %pip install ...``):
    it does nothing off Colab, so the site does not show it (it was the first code of every page)."""
    return cell.get("cell_type") == "code" and "google.colab" in "".join(cell.get("source", ""))


RUN_KEY = "d2l_async_run"  # the run's facts in a stored notebook's metadata (tests/notebook_run.py)
IN_OUTPUT_WIDGET = "d2l_async_output_widget"  # a stored output the kernel sent into an ipywidgets.Output
PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stored_runs(folder: Path, stems: list[str], *, quick: bool) -> tuple[dict[str, Path], str]:
    """The stored runs of ``folder`` (``build/executed``) that the site can show instead of executing.

    Returns:
        ``(runs, why_not)``: every stem's stored notebook and ``""``, or ``{}`` and the reason one cannot be
        used (missing; run from another version of the notebook, or in the other mode, or by an older run
        without the machine line; a failed cell; a live figure, whose drawing a stored run does not keep).
    """
    runs: dict[str, Path] = {}
    for stem in stems:
        path = Path(folder) / f"{stem}.ipynb"
        if not path.is_file():
            return {}, f"no stored run of {stem} in {folder}"
        nb = nbformat.read(path, as_version=4)
        run = nb.metadata.get(RUN_KEY) or {}
        if run.get("source_sha256") != _sha256(ROOT / "notebooks" / f"{stem}.ipynb"):
            return {}, f"{path} ran another version of notebooks/{stem}.ipynb"
        if bool(run.get("quick")) != quick:
            return {}, f"{path} ran in {'quick' if run.get('quick') else 'default'} mode"
        if not all(k in run for k in ("machine", "date", "usable_cpus", "spare_cpus")):
            return {}, f"{path} does not record its machine and date (an older run)"
        if run.get("failed_cells"):
            return {}, f"{path}: cells {run['failed_cells']} failed"
        for k, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []):
                shown = str(out.get("data", {}).get("text/plain", ""))
                if WIDGET in out.get("data", {}) and shown.startswith("FigureWidget"):
                    return {}, f"{path}, cell {k}: a FigureWidget (a stored run keeps no widget's state to draw)"
        runs[stem] = path
    return runs, ""


def _stored_outputs(outputs: list, figures: list[int]) -> list:
    """A cell's stored outputs as the site's setup cell would have shown them (``figures``: the page's count)."""
    shown = []
    for out in outputs:
        data = out.get("data", {})
        if out.get("metadata", {}).get(IN_OUTPUT_WIDGET):
            continue  # drawn inside a dashboard, which the page replaces by the note: not on the page either way
        if PLOTLY in data:
            figures[0] += 1
            out = nbformat.from_dict({**out, "data": {"text/html": figure_html(data[PLOTLY], figures[0])}})
        elif WIDGET in data:
            out = nbformat.from_dict({**out, "data": {"text/html": NEEDS_KERNEL, "text/plain": NEEDS_KERNEL_TEXT}})
        shown.append(out)
    return shown


def page_from_run(stem: str, run_path: Path, footer: str):
    """The page's notebook from its stored run: outputs rewritten as :func:`stage`'s setup cell shows them, and
    ``footer`` (the machine cell) as the last cell, its output the run's own machine line and date.

    Returns:
        The notebook (nbformat) to stage, nothing left to execute.
    """
    import datetime

    nb = nbformat.read(run_path, as_version=4)
    run = nb.metadata[RUN_KEY]
    figures = [0]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = _stored_outputs(cell.outputs, figures)
    line = machine_line(day=f"{datetime.date.fromisoformat(run['date']):%d %B %Y}", quick=bool(run["quick"]),
                        machine=run["machine"], usable_cpus=run["usable_cpus"], spare_cpus=run["spare_cpus"])
    tail = nbformat.v4.new_code_cell(footer, metadata={"tags": ["remove-input"]},
                                     outputs=[nbformat.v4.new_output("stream", name="stdout", text=line + "\n")])
    nb.cells = [*nb.cells, tail]
    return nb


def stage(src: Path, stems: list[str], runs: dict[str, Path] | None = None) -> None:
    setup = (SITE / "setup_cell.py").read_text()
    footer = (SITE / "machine_cell.py").read_text()
    for stem in stems:
        if runs:
            nb = page_from_run(stem, runs[stem], footer)
        else:
            nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
            head = nbformat.v4.new_code_cell(setup, metadata={"tags": ["remove-cell"]})
            tail = nbformat.v4.new_code_cell(footer, metadata={"tags": ["remove-input"]})
            nb.cells = [head, *nb.cells, tail]
        for cell in nb.cells:
            if is_colab_cell(cell):
                cell.metadata["tags"] = sorted({*cell.metadata.get("tags", []), "remove-cell"})
        nbformat.write(nb, src / f"{stem}.ipynb")
    shutil.copy(SITE / "page_outputs.py", src / "page_outputs.py")  # the setup and machine cells import it
    static = src / "_static"
    static.mkdir()
    import plotly

    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    shutil.copy(plotly_js, static / "plotly.min.js")
    shutil.copy(SITE / "d2l_site.css", static / "d2l_site.css")


WIDGET_STATE = re.compile(r'<script type="application/vnd\.jupyter\.widget-state\+json">.*?</script>', re.S)


THEBE_CONST = re.compile(r"<script>const THEBE_JS_URL = [^<]*</script>\n?")

#: axe-core's findings on every page of the theme (pydata-sphinx-theme 0.17.1 under sphinx-book-theme
#: 1.3.0), each answered by an edit of the written HTML (name: (pattern, replacement)):
A11Y_FIXES: dict[str, tuple[re.Pattern[str], str]] = {
    # label-content-name-mismatch: the search button says "Search Ctrl+K" and is named "Search";
    # without the label its name is what it says
    "search-button-name": (re.compile(r'(<button class="btn search-button-field search-button__button[^"]*") '
                                      r'title="Search" aria-label="Search"'), r"\1"),
    # label-content-name-mismatch: the colour-mode button's icons carry titles a screen reader would
    # read beside its label; the icons are decoration
    "theme-icons-hidden": (re.compile(r'(<i class="theme-switch [^"]*" data-mode="\w+")\s+title="[^"]*"'),
                           r'\1 aria-hidden="true"'),
    # region: the sidebar's title and search button sat outside every landmark
    "sidebar-landmark": (re.compile(r'<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar">'),
                         '<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar" role="navigation" '
                         'aria-label="Chapter">'),
    # empty-table-header: pandas writes the index column's header as an empty <th>, and a Markdown
    # table with an empty corner does too; a cell that heads nothing is a plain cell
    "empty-header-cell": (re.compile(r"<th(?: class=\"head\")?>(?:<p></p>)?</th>"), "<td></td>"),
    # scrollable-region-focusable: a table wider than the column scrolls sideways inside it
    # (d2l_site.css); a keyboard reaches it only when it can take focus
    "scrolling-table-focus": (re.compile(r'<table border="1" class="dataframe">'),
                              '<table border="1" class="dataframe" tabindex="0">'),
}


#: A link written for JupyterLab in a notebook's own HTML output (a lesson check's mark links the key:
#: ``href="00_tour.ipynb#How-to-read-a-check"``). MyST rewrites Markdown links to a notebook's page, but
#: not links inside raw HTML, and on the site the page is ``00_tour.html``.
IPYNB_HREF = re.compile(r'href="([^"#?:]+)\.ipynb(?:#([^"]*))?"')


def _sphinx_id(fragment: str) -> str:
    """The id Sphinx gives the heading that JupyterLab anchors as ``fragment`` (JupyterLab keeps the
    heading's case and punctuation, joined by hyphens; docutils lower-cases and keeps letters and digits)."""
    return re.sub(r"[^a-z0-9]+", "-", fragment.lower()).strip("-")


def link_notebook_pages(text: str, page: Path) -> str:
    """``text`` (the HTML of ``page``) with each link to a notebook whose page was built beside it
    pointed at that page, the anchor kept (as the target page spells it where it has that heading).
    A link to a notebook without a page is left as it is (the site's link test names it)."""
    ids: dict[Path, set[str]] = {}

    def repoint(m: re.Match[str]) -> str:
        path, fragment = m.group(1), m.group(2)
        target = page.parent / f"{path}.html"
        if not target.is_file():
            return m.group(0)
        if fragment:
            if target not in ids:
                ids[target] = set(re.findall(r'\bid="([^"]+)"', target.read_text(encoding="utf-8")))
            if fragment not in ids[target] and _sphinx_id(fragment) in ids[target]:
                fragment = _sphinx_id(fragment)
        return f'href="{path}.html' + (f"#{fragment}" if fragment else "") + '"'

    return IPYNB_HREF.sub(repoint, text)


def tidy_page(page: Path) -> None:
    """Fixes to what Jupyter Book 1.0.4 writes, applied to every page.

    - Drop the dashboards' saved widget state (megabytes: plotly's FigureWidget carries plotly.js).
      Nothing on the page reads it: the site loads no widget manager, and every dashboard shows a
      note that it needs a kernel instead.
    - With sphinx-thebe 0.3.1 and Sphinx 7.4 every page gets sphinx-thebe's ``const THEBE_JS_URL``
      script twice, and the second throws "Identifier 'THEBE_JS_URL' has already been declared" in
      every reader's console: keep the first.
    - The accessibility fixes of :data:`A11Y_FIXES` (``site/check_site.py`` runs axe-core).
    - Links to a notebook (``X.ipynb#anchor``) in its outputs' HTML point at its page
      (:func:`link_notebook_pages`).
    """
    text = page.read_text(encoding="utf-8")
    lean = WIDGET_STATE.sub("", text)
    consts = THEBE_CONST.findall(lean)
    for dup in consts[1:]:
        at = lean.rindex(dup)
        lean = lean[:at] + lean[at + len(dup):]
    for pattern, replacement in A11Y_FIXES.values():
        lean = pattern.sub(replacement, lean)
    lean = link_notebook_pages(lean, page)
    if lean != text:
        page.write_text(lean, encoding="utf-8")


class LoadWatch:
    """The machine's load while the site builds: other work measured before the build starts (the
    CPUs' worth busy outside this process, ``d2l_async.devices.machine``) and the highest 1-minute
    load average seen during it.  A page's lesson checks decide timing claims against the run's
    spread; on a busy machine they say "can't tell" where a quiet one decides, and the published
    chapter would teach that.  :meth:`warning` says so."""

    def __init__(self, every_s: float = 5.0) -> None:
        from d2l_async.devices import machine

        here = machine(sample_s=1.0)
        self.cpus = float(here.usable_cpus)
        self.busy_before = float(here.usable_cpus - here.spare_cpus)
        self.peak_load = float(os.getloadavg()[0])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(every_s,), name="site-load-watch", daemon=True)

    def _watch(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.peak_load = max(self.peak_load, float(os.getloadavg()[0]))

    def __enter__(self) -> "LoadWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def warning(self) -> str:
        """A sentence when the machine was busy (other work on a quarter of its CPUs before the build,
        or a load above one per CPU plus the build's own during it), else ``""``."""
        why = []
        if self.busy_before > 0.25 * self.cpus:
            why.append(f"{self.busy_before:.1f} of {self.cpus:g} CPUs were busy with other work when it started")
        if self.peak_load > self.cpus + 1.5:
            why.append(f"the load average reached {self.peak_load:.1f} on {self.cpus:g} CPUs")
        if not why:
            return ""
        return ("WARNING: the site was built on a busy machine (" + "; ".join(why) + "): its timing checks may "
                "say \"can't tell\" where a quiet machine decides them. Build the published site on a quiet machine.")


ANSI = re.compile(r"\x1b\[[0-9;]*m")
EXECUTING = re.compile(r"/([^/\s]+)\.ipynb: Executing notebook")
EXECUTED = re.compile(r"/([^/\s]+)\.ipynb: Executed notebook in ([\d.]+) seconds")
WRITING = re.compile(r"writing output\.\.\. \[\s*\d+%\]")  # a page written (not the translations' step)


def progress_line(line: str, *, elapsed_s: float, stems: list[str], first_page: bool = True) -> str | None:
    """What ``make site`` prints for one line of Jupyter Book's log, or ``None`` for a line it skips.

    A notebook starting (``[3/11] 02_dependency_graph: executing``), a notebook done with its time, and
    the HTML being written (Sphinx's first page written, ``first_page``: it logs every page); each with
    the seconds since the build began, so a slow page shows while it runs. myst-nb's log lines name the
    staged notebook's path."""
    line = ANSI.sub("", line).strip()
    at = f"({elapsed_s:.0f} s into the build)"
    m = EXECUTED.search(line)
    if m:
        k = stems.index(m.group(1)) + 1 if m.group(1) in stems else "?"
        return f"[{k}/{len(stems)}] {m.group(1)}: executed in {float(m.group(2)):.1f} s {at}"
    m = EXECUTING.search(line)
    if m:
        k = stems.index(m.group(1)) + 1 if m.group(1) in stems else "?"
        return f"[{k}/{len(stems)}] {m.group(1)}: executing... {at}"
    if WRITING.match(line) and first_page:
        return f"writing the pages {at}"
    return None


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def build(out: Path, *, quick: bool, hub_url: str | None, work: Path, only: list[str] | None = None,
          progress: Callable[[str], None] | None = _stderr, executed: Path | None = None) -> dict:
    """Build the site into ``out`` (staging and Jupyter Book's output in ``work``).

    ``executed``: a folder of stored runs (``build/executed``); when it holds a current run of every page's
    notebook (:func:`stored_runs`), nothing is executed and the pages show those runs; else (or ``None``)
    Jupyter Book executes every notebook.

    Returns:
        The build's facts (also written to ``out/site.json``); ``"execution"`` says which way the pages got
        their outputs (``"stored runs"`` or ``"executed here"``), ``"stored_runs"`` why not where it was asked.
    """
    rows = chapter()
    stems = [r[0] for r in rows if not only or r[0] in only or r[0][:2] in only]
    if not stems:
        raise SystemExit(f"--only {only} matches no notebook")
    runs, why_not = stored_runs(Path(executed), stems, quick=quick) if executed is not None else ({}, "")
    if progress and executed is not None:
        progress(f"showing the stored runs of {executed}: nothing executed" if runs
                 else f"not using {executed} ({why_not}): executing every notebook")
    if work.exists():
        shutil.rmtree(work)
    src = work / "src"
    src.mkdir(parents=True)
    (src / "index.md").write_text(index_md([r for r in rows if r[0] in stems], quick=quick,
                                           stored=bool(runs)))
    stage(src, stems, runs)
    local_mathjax = (MATHJAX / MATHJAX_PARTS[0]).is_file()
    if not local_mathjax and progress:
        progress(f"MathJax not found at {MATHJAX} (make site installs it with npm): formulas will load it from a CDN")
    (src / "_config.yml").write_text(config_yml(hub_url=hub_url, title="D2L: asynchronous computation, made visible",
                                                local_mathjax=local_mathjax, execute=not runs))
    pages = stage_doc_pages(src, stems)
    (src / "_toc.yml").write_text(toc_yml(stems, pages))
    env = {**os.environ, "D2L_ASYNC_QUICK": "1" if quick else "0", "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(src), "--path-output", str(work), "--all",
           "--keep-going"]
    lines: list[str] = []
    writing = False
    with LoadWatch() as load:
        proc = subprocess.Popen(cmd, env=env, cwd=str(src), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace")
        for line in proc.stdout:  # as it comes, so each notebook's progress shows while the build runs
            lines.append(line)
            shown = progress_line(line, elapsed_s=time.perf_counter() - start, stems=stems, first_page=not writing)
            writing = writing or shown is not None and shown.startswith("writing")
            if shown and progress:
                progress(shown)
        proc.wait()
    seconds = time.perf_counter() - start
    log = "".join(lines)
    (work / "build.log").write_text(log)
    problems = [line for line in log.splitlines()
                if re.search(r"(WARNING|ERROR|CRITICAL).*(Executing notebook failed|CellExecutionError|Traceback|"
                             r"execution error)", line)]
    html = work / "_build" / "html"
    if proc.returncode != 0 or problems or not (html / "index.html").exists():
        tail = "\n".join(log.splitlines()[-40:])
        raise SystemExit(f"jupyter-book build failed (exit {proc.returncode}); log: {work / 'build.log'}\n"
                         + "\n".join(problems[:10]) + "\n" + tail)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(html, out)
    if local_mathjax:
        copy_mathjax(out / "_static")
    for page in [*out.glob("*.html"), *out.glob("docs/*.html")]:
        tidy_page(page)
    facts = {"pages": len(stems) + 1 + len(pages), "notebooks": stems, "doc_pages": [p["file"] for p in pages],
             "quick": quick, "execution": "stored runs" if runs else "executed here", "stored_runs": why_not,
             "mathjax": "the site's own" if local_mathjax else "CDN", "seconds": round(seconds, 1),
             "megabytes": round(folder_mb(out), 1), "repo": REPO_SLUG, "hub_url": hub_url,
             "load": {"cpus": load.cpus, "busy_before": round(load.busy_before, 2), "peak_load": round(load.peak_load, 2),
                      "warning": load.warning()}}
    (out / "site.json").write_text(json.dumps(facts, indent=2))
    return facts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python site/build_site.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "build" / "site"), help="where the HTML goes (default build/site)")
    p.add_argument("--work", default=None, help="staging and Jupyter Book's own output (default OUT-work)")
    p.add_argument("--quick", action="store_true", help="small workloads (D2L_ASYNC_QUICK=1), for tests")
    p.add_argument("--hub-url", default=os.environ.get("D2L_ASYNC_HUB_URL") or None,
                   help="a JupyterHub for the launch buttons (nbgitpuller link); default $D2L_ASYNC_HUB_URL or none")
    p.add_argument("--only", nargs="*", help="build these notebooks only (stems or their two-digit numbers)")
    p.add_argument("--executed", default=None,
                   help="a folder of stored runs (build/executed, kept by make test): when it holds a current run "
                        "of every notebook, the pages show them and nothing is executed")
    args = p.parse_args(argv)
    out = Path(args.out).resolve()
    work = Path(args.work).resolve() if args.work else out.with_name(out.name + "-work")
    facts = build(out, quick=args.quick, hub_url=args.hub_url, work=work, only=args.only,
                  executed=Path(args.executed).resolve() if args.executed else None)
    print(f"wrote {out}: {facts['pages']} pages, {facts['megabytes']} MB, built in {facts['seconds']} s "
          f"({'quick' if facts['quick'] else 'default'} mode, {facts['execution']})")
    if facts["load"]["warning"]:
        print(facts["load"]["warning"], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
