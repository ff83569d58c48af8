"""Load the 109k-event A100 training-step trace and compute its queue-length summary: ours vs HTA.

Both sides do the same job from the same gzip file: parse it, pair launches with GPU work, and
compute the per-stream queue-length summary.  HTA (holistictraceanalysis 0.5.0) is given a temporary
folder holding only that file, as its ``TraceAnalysis`` expects.  Runs alternate between the two
(ours, HTA, ours, HTA, ...) so that a busy neighbour on this shared machine slows both alike; we
report the median of the runs and keep every raw time.  Target (issue 4): ours <= 1.5 s.

Run: ``.venv/bin/python benchmarks/bench_trace.py [--repeat 3]``; writes
``benchmarks/results/trace.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

SAMPLE = "a100_training_step"
TARGET_S = 1.5
OUT = Path(__file__).parent / "results" / "trace.json"


def run_ours(path: Path) -> tuple[float, float, int, float]:
    from d2l_async.analysis import queue_length_summary
    from d2l_async.trace import read_chrome_trace

    c0, t0 = time.process_time(), time.perf_counter()
    trace = read_chrome_trace(path)
    t1 = time.perf_counter()
    summary = queue_length_summary(trace)
    t2, c2 = time.perf_counter(), time.process_time()
    return t2 - t0, t1 - t0, int(summary.loc[summary["stream"] == 7, "max"].iloc[0]), c2 - c0


def run_hta(path: Path) -> tuple[float, float, int, float]:
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(path, d)
        c0, t0 = time.process_time(), time.perf_counter()
        ta = TraceAnalysis(trace_dir=d)
        t1 = time.perf_counter()
        summary = ta.get_queue_length_summary(ranks=[0])
        t2, c2 = time.perf_counter(), time.process_time()
    qmax = int(summary.loc[(0, 7), ("queue_length", "max")])
    return t2 - t0, t1 - t0, qmax, c2 - c0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # HTA logs every parse step
    import warnings

    warnings.filterwarnings("ignore")
    from d2l_async.data import sample_path

    path = sample_path(SAMPLE)
    try:
        import hta  # noqa: F401

        have_hta = True
    except ImportError:
        have_hta = False
    load_before = os.getloadavg()[0]
    runs: dict[str, list] = {"ours": [], "hta": []}
    run_ours(path)  # warm-up: imports and first-touch of the file
    if have_hta:
        run_hta(path)
    for _ in range(args.repeat):
        gc.collect()
        runs["ours"].append(run_ours(path))
        if have_hta:
            gc.collect()
            runs["hta"].append(run_hta(path))

    def summarize(rs):
        if not rs:
            return None
        total = [r[0] for r in rs]
        load = [r[1] for r in rs]
        cpu = [r[3] for r in rs]
        return {"median_s": statistics.median(total), "min_s": min(total), "max_s": max(total),
                "median_load_s": statistics.median(load), "median_cpu_s": statistics.median(cpu),
                "runs_s": total, "load_runs_s": load, "cpu_runs_s": cpu, "stream7_max_queue": rs[0][2]}

    ours, theirs = summarize(runs["ours"]), summarize(runs["hta"])
    import numpy
    import pandas

    result = {
        "benchmark": "load a100_training_step.json.gz (109k events) + queue-length summary",
        "repeat": args.repeat,
        "target_s": TARGET_S,
        "ours": ours,
        "hta": theirs if have_hta else "holistictraceanalysis not installed",
        "speedup": (theirs["median_s"] / ours["median_s"]) if theirs else None,
        "meets_target": ours["median_s"] <= TARGET_S,
        "same_max_queue": (ours["stream7_max_queue"] == theirs["stream7_max_queue"]) if theirs else None,
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "note": "wall-clock medians; the machine is shared, so a load average above its core count "
                "slows both sides alike; median_cpu_s is the process CPU time, which contention barely moves",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "numpy": numpy.__version__, "pandas": pandas.__version__, "device": "CPU only (parsing)"},
        "command": "python benchmarks/bench_trace.py --repeat " + str(args.repeat),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    print(f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs")
    print(f"ours: median {ours['median_s']:.3f} s (load {ours['median_load_s']:.3f} s, CPU {ours['median_cpu_s']:.3f} s) runs "
          + ", ".join(f"{t:.3f}" for t in ours["runs_s"]) + f"; stream 7 max queue {ours['stream7_max_queue']}")
    if theirs:
        print(f"HTA:  median {theirs['median_s']:.3f} s (load {theirs['median_load_s']:.3f} s, CPU {theirs['median_cpu_s']:.3f} s) runs "
              + ", ".join(f"{t:.3f}" for t in theirs["runs_s"]) + f"; stream 7 max queue {theirs['stream7_max_queue']}")
        print(f"speed-up {result['speedup']:.2f}x; target <= {TARGET_S} s: {'met' if result['meets_target'] else 'MISSED'}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {OUT}")
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
