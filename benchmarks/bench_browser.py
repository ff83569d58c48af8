"""Slider to redrawn figure, as a student sees it: a real JupyterLab in headless Chromium.

For each dashboard named (default: notebook 05's ``sync_async_dashboard`` and 00's tour), the benchmark runs
the notebook up to its dashboard in JupyterLab (quick mode, as ``make test``), then moves the dashboard's
first slider ``--repeat`` times, alternately right and left, and times each move from the pointer's release
to the moment plotly.js holds the new figure under the dashboard (its data changed, and every figure holds
the traces and points the kernel's figures hold, as the dashboard's status line states them).  This is
the whole round trip: the front end's message, the kernel's rerun and drawing, the update messages back,
plotly.js's redraw.  With ``--busy N`` it does the same beside N processes that spin on a core each.

We report the median and the worst of the moves per dashboard and condition, with the load average.

Run: ``.venv/bin/python benchmarks/bench_browser.py [--repeat 5] [--busy 2]``; writes
``benchmarks/results/browser.json`` (a condition's entry replaces the one of the same ``busy``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _provenance import command  # benchmarks/, the script's own folder

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = Path(__file__).parent / "results" / "browser.json"
NOTEBOOKS = ("05_sync_vs_async.ipynb", "00_tour.ipynb")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _spin() -> None:
    while True:
        pass


def _moves(page, lab, name: str, repeat: int) -> list[float]:
    from tests.browser import _lab

    copy = f"{Path(name).stem}-bench.ipynb"
    _lab.notebook_up_to_dashboard(ROOT / "notebooks" / name, lab["dir"] / copy)
    _lab.run_all(page, f"{lab['base']}/lab/workspaces/bench-{Path(name).stem}/tree/{copy}?reset&token={lab['token']}",
                 timeout_s=600, lab=lab, path=copy)
    seconds: list[float] = []
    figures = _lab.read_figures(page, timeout_s=120)
    for i in range(repeat):
        runs = _lab.status(page)["runs"]
        before = [f["digest"] for f in figures]
        _lab.move_first_control(page, timeout_s=60, dx=50 if i % 2 == 0 else -50)
        released = time.monotonic()
        _lab.wait_for_new_run(page, runs, timeout_s=300)
        while True:  # the page shows what the kernel's figures hold (the status line's data-figures)
            kernel = _lab.status(page)["figures"]
            figures = _lab.read_figures(page, timeout_s=60)
            if [f["digest"] for f in figures] != before and not _lab.blank(figures) and \
                    _lab.sizes(figures, kernel) == kernel:
                break
            if time.monotonic() - released > 300:
                raise RuntimeError(f"{name}: the figures did not change within 300 s of the release")
            time.sleep(0.02)
        seconds.append(time.monotonic() - released)
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--busy", type=int, default=0, help="spinning processes beside the browser and the kernel")
    ap.add_argument("--only", action="append", help="a notebook file name (repeatable)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    from tests.browser import _lab

    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    results: dict[str, dict] = {}
    load_before = os.getloadavg()
    try:
        with tempfile.TemporaryDirectory() as tmp, _lab.lab_server(Path(tmp) / "lab", start_s=300) as lab, \
                sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                str(Path(tmp) / "profile"), executable_path=os.environ.get("D2L_ASYNC_CHROMIUM", "/usr/bin/chromium"),
                headless=True, args=CHROMIUM_FLAGS, viewport={"width": 1400, "height": 1000})
            for name in args.only or NOTEBOOKS:
                page = context.new_page()
                try:
                    raw = _moves(page, lab, name, args.repeat)
                finally:
                    page.close()
                    _lab.shut_down_kernels(lab)
                results[name] = {"median_s": statistics.median(raw), "worst_s": max(raw), "raw_s": raw}
                print(f"{name}: median {results[name]['median_s']:.2f} s, worst {results[name]['worst_s']:.2f} s "
                      f"over {len(raw)} moves", flush=True)
            context.close()
    finally:
        for p in spinners:
            p.terminate()
    entry = {"busy": args.busy, "repeat": args.repeat, "load_before": load_before, "load_after": os.getloadavg(),
             "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}, "dashboards": results,
             "command": command(), "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    old = json.loads(OUT.read_text()) if OUT.exists() else {"conditions": []}
    old["conditions"] = [c for c in old.get("conditions", []) if c.get("busy") != args.busy] + [entry]
    OUT.write_text(json.dumps(old, indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
