"""Response time of every ready-made dashboard: set its first control -> experiment rerun -> figures updated.

For each dashboard of :mod:`d2l_async.widgets.dashboards` with its default workload, the benchmark
builds it (in ``figurewidget`` mode, which is what JupyterLab shows), runs one warm-up change, then
moves the first control back and forth between its default and a neighbouring value ``--repeat``
times.  Setting ``.value`` from Python calls the same observer a released slider calls, and it
returns once the experiment has rerun and the existing ``FigureWidget``s hold the new data, so the
time of the assignment is the kernel's share of the response (the browser's redraw of the plotly
figure is not included).  Each change is checked: the run count grew and the status reports success.

We report the median, min and max per dashboard, the run/draw split of each change, and keep every
raw time.  Target: median <= 0.5 s.

Run: ``.venv/bin/python benchmarks/bench_dashboards.py [--repeat 5] [--only queue_dashboard]``;
writes ``benchmarks/results/dashboards.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _provenance import command  # benchmarks/, the script's own folder

TARGET_S = 0.5
OUT = Path(__file__).parent / "results" / "dashboards.json"
DASHBOARDS = (
    "asynchrony_dashboard", "sync_async_dashboard", "queue_dashboard", "dependency_dashboard",
    "barrier_dashboard", "blocker_dashboard", "parallelism_dashboard", "scheduling_dashboard", "trace_explorer",
)


def neighbour(control: Any) -> Any:
    """A valid value next to the control's current one."""
    import ipywidgets as widgets

    v = control.value
    if isinstance(control, (widgets.SelectionSlider, widgets.Dropdown)):
        values = [o[1] if isinstance(o, tuple) else o for o in control.options]
        i = values.index(v)
        return values[i + 1] if i + 1 < len(values) else values[i - 1]
    if isinstance(control, widgets.FloatRangeSlider):
        lo, hi = v
        shift = (hi - lo) / 2
        return (lo + shift, hi + shift) if hi + shift <= control.max else (lo - shift, hi - shift)
    if isinstance(control, (widgets.IntSlider, widgets.FloatSlider)):
        return v + control.step if v + control.step <= control.max else v - control.step
    raise TypeError(f"no neighbour rule for {type(control).__name__}")


def bench(name: str, repeat: int) -> dict[str, Any]:
    from d2l_async.widgets import dashboards

    t0 = time.perf_counter()
    d = getattr(dashboards, name)(mode="figurewidget")
    build = time.perf_counter() - t0
    if d.result is None:
        raise RuntimeError(f"{name}: first run failed: {d.status.value}")
    key, control = next(iter(d.controls.items()))
    values = [neighbour(control), control.value]
    runs, splits = [], []
    for i in range(repeat + 1):  # the first change is a warm-up
        before = d.runs
        t = time.perf_counter()
        control.value = values[i % 2]
        dt = time.perf_counter() - t
        if d.runs != before + 1 or 'data-kind="ok"' not in d.status.value:
            raise RuntimeError(f"{name}: setting {key}={values[i % 2]!r} did not rerun cleanly: {d.status.value}")
        if i:
            runs.append(dt)
            splits.append({k: round(v, 6) for k, v in d.timings.items()})
    med = statistics.median(runs)
    return {"control": key, "values": [repr(v) for v in values], "build_s": build, "median_s": med,
            "min_s": min(runs), "max_s": max(runs), "runs_s": runs, "splits": splits,
            "within_target": med <= TARGET_S}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=None, help="dashboard names to run")
    args = parser.parse_args(argv)
    names = args.only or list(DASHBOARDS)
    load_before = os.getloadavg()[0]  # the machine is shared: say how busy it was
    results: dict[str, Any] = {}
    for name in names:
        try:
            results[name] = bench(name, args.repeat)
        except Exception as exc:  # report and go on: one broken dashboard must not hide the others
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        r = results[name]
        if "error" in r:
            print(f"{name:24s} ERROR {r['error']}", flush=True)
        else:
            print(f"{name:24s} {r['control']:>12s}: median {r['median_s']:.3f} s (min {r['min_s']:.3f}, "
                  f"max {r['max_s']:.3f}) {'ok' if r['within_target'] else 'OVER TARGET'}", flush=True)
    doc = {
        "benchmark": "dashboard response: set first control .value -> rerun -> FigureWidget updated (kernel side)",
        "command": command(), "repeat": args.repeat, "target_s": TARGET_S,
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
                    "device": "CPU only: the engine's virtual devices are threads"},
        "quick_mode": os.environ.get("D2L_ASYNC_QUICK", ""),
        "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "dashboards": results,
    }
    if args.only is None:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(doc, indent=2))
        print(f"wrote {OUT}")
    ok = all("error" not in r and r["within_target"] for r in results.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
